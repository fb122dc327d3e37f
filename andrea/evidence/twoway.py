"""Tests that can go both ways, for the grids declared after the review of issue 49, and the rule that
applies them.

``rule``, ``verdict`` and ``measure.runstats`` are part of every grid's rule hash (``store.RULE_MODULES``):
an edit there would mark every stored verdict as decided by a rule changed after its runs. The tests
the later grids need live here instead, and only a grid that lists this module in its
``Grid.rule_modules`` has it in its rule hash (and may use them):

* ``"interaction"``: a difference of differences, paired by seed: ``arm``'s change between the two
  settings of ``Decision.contrast`` minus ``against``'s (e.g. post-norm's gain from warmup minus
  pre-norm's), beyond ``margin`` on the ``predicted`` side (Student's t, one-sided at 2.5 %);
* ``"majority"``: the event ``field`` is shown by more (``predicted`` "positive") or fewer ("negative")
  than half of ``arm``'s runs: an exact binomial test against one half, one-sided at 2.5 % each way, so
  that the opposite count (e.g. every run learns, against a claim that they fail) refutes;
* ``"detectable"``: a power check for a calibration: the paired comparison ``arm`` minus ``against``
  would show an effect of ``level`` (or less) four times in five at the noise its runs show, at the
  level Holm's correction asks of the grid's deciding regimes (``rule.detectable``).

And one statistic, ``late_break`` (``STATISTICS``). ``evaluate`` is ``rule.evaluate`` for a grid that
lists no extra rule module, and the same procedure (calibrations, Holm, the claim's label) with these
tests for one that does.
"""

from __future__ import annotations

import math
from typing import Optional

from ..measure.runstats import statistic as _base_statistic
from . import rule, store, verdict

MODULE = "evidence.twoway"  # the name a grid lists in Grid.rule_modules
STABLE = 100  # break-free steps before a late break (``late_break``)


def breaks(r: dict) -> list[int]:
    """The steps at which run ``r``'s training loss broke: non-finite, or more than one nat above the loss
    of a uniform guess over the vocabulary (ln V + 1: a model that has learned nothing, plus a nat), and
    the step at which it diverged."""
    ceiling = math.log(r["model"]["vocab_size"]) + 1.0
    out = [int(s) for s, x in zip(r["steps"], r["loss"]) if x is None or not math.isfinite(x) or x > ceiling]
    if r.get("diverged") and r.get("diverged_at") is not None:
        out.append(int(r["diverged_at"]))
    return sorted(set(out))


def _late_break(r: dict, level: Optional[float]) -> bool:
    """A break at or after step ``level`` that follows ``STABLE`` break-free steps: an instability that
    came after a stable stretch, not one left over from the start of training."""
    if level is None:
        raise ValueError("the statistic 'late_break' needs a level (the first step at which a break counts as late)")
    b = breaks(r)
    return any(s >= level and not any(s - STABLE <= t < s for t in b) for s in b)


STATISTICS = {
    "late_break": (
        _late_break,
        f"a break (loss non-finite, or above ln V + 1) at or after the level's step, after {STABLE} break-free steps",
    ),
}
TESTS = ("interaction", "majority", "detectable")


def statistic(r: dict, name: str, level: Optional[float] = None):
    """``runstats.statistic``, and this module's ``STATISTICS``."""
    if name in STATISTICS:
        return STATISTICS[name][0](r, level)
    return _base_statistic(r, name, level)


def uses(g: store.Grid) -> bool:
    """Whether grid ``g``'s rule needs this module (a test or a statistic of it); a grid that does must
    list it in ``rule_modules`` (its rule hash then covers it)."""
    return any(d.test in TESTS or d.field in STATISTICS for d in g.decisions)


def _rows(rs: list, d: store.Decision, match: dict) -> list:
    sel = [r for r in store.pick(rs, **match) if not d.seeds or r["seed"] in d.seeds]
    return sorted(sel, key=lambda r: r["seed"])


def _by_seed(rs: list, d: store.Decision, match: dict) -> dict:
    return {r["seed"]: statistic(r, d.field, d.level) for r in _rows(rs, d, match)}


def _fmt(ci: verdict.Interval) -> str:
    return f"{ci.mean:+.3g} [{ci.lo:+.3g}, {ci.hi:+.3g}]" if ci.n >= 2 else f"{ci.mean:+.3g}"


def majority(k: int, n: int, predicted: str, what: str) -> verdict.Verdict:
    """Decide "more (``predicted`` positive) or fewer (negative) than half of the runs show the event" from
    ``k`` of ``n``: exact binomial tests against one half, one-sided at ``verdict.ALPHA`` each way."""
    from scipy import stats

    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"a majority test needs 0 <= k <= n and n >= 1, got {k} of {n}")
    more = float(stats.binom.sf(k - 1, n, 0.5))  # P(at least k of n)
    fewer = float(stats.binom.cdf(k, n, 0.5))  # P(at most k of n)
    p, p_opposite = (more, fewer) if predicted == "positive" else (fewer, more)
    side = "more" if predicted == "positive" else "fewer"
    said = f"{what}: {k} of {n} runs"
    if p < verdict.ALPHA:
        return verdict.Verdict(
            "confirmed", f"{said}, {side} than half (binomial p = {p:.2g}), as predicted", None, p, p_opposite
        )
    if p_opposite < verdict.ALPHA:
        return verdict.Verdict(
            "not reproduced", f"{said}: the opposite (binomial p = {p_opposite:.2g})", None, p, p_opposite
        )
    return verdict.Verdict("inconclusive", f"{said}: not beyond chance either way (p = {p:.2g})", None, p, p_opposite)


def raw(rs: list, d: store.Decision, family: int = 1) -> tuple:
    """(verdict, measured, detectable) of one declared comparison before any correction across regimes:
    ``rule``'s for its tests, this module's for the others; ``family``: the number of deciding regimes."""
    if d.test not in TESTS:
        if d.field in STATISTICS:  # the statistic, computed here, read by rule as a result field
            rs = [{**r, d.field: statistic(r, d.field, d.level)} for r in rs]
        return (rule._evaluate(rs, d, family) + (None,))[:3]
    what = d.what
    if d.test == "majority":
        a = _by_seed(rs, d, d.arm)
        if not a:
            raise ValueError(f"decision {d.what!r}: no stored run matches {d.arm}")
        k = sum(bool(x) for x in a.values())
        return majority(k, len(a), d.predicted, what), f"{k} of {len(a)} runs", None
    if d.test == "interaction":
        if d.contrast is None or d.against is None:
            raise ValueError(f"decision {d.what!r}: an interaction needs `against` and `contrast`")
        base, treated = d.contrast
        sides = [
            (_by_seed(rs, d, {**side, **base}), _by_seed(rs, d, {**side, **treated})) for side in (d.arm, d.against)
        ]
        seeds = set(sides[0][0])
        if not seeds or any(set(x) != seeds for pair in sides for x in pair):
            raise ValueError(f"decision {d.what!r}: the four arms do not share their seeds")
        if any(x[s] is None for pair in sides for x in pair for s in seeds):
            return verdict.Verdict("inconclusive", f"{what}: a run diverged"), "diverged", None
        diffs = [(sides[0][0][s] - sides[0][1][s]) - (sides[1][0][s] - sides[1][1][s]) for s in sorted(seeds)]
        v = verdict.compare(diffs, d.predicted, d.margin, what=what)
        # compare always gives an interval here (two or more seeds)
        return v, _fmt(v.interval), rule.detectable(diffs, family)  # type: ignore[arg-type]
    # "detectable": the power of the paired comparison arm minus against
    if d.level is None or d.against is None:
        raise ValueError(f"decision {d.what!r}: a detectable test needs `against` and a level (nats)")
    a, b = _by_seed(rs, d, d.arm), _by_seed(rs, d, d.against)
    if set(a) != set(b) or not a:
        raise ValueError(f"decision {d.what!r}: the arms do not share their seeds: {sorted(a)} vs {sorted(b)}")
    if any(a[s] is None or b[s] is None for s in a):
        return verdict.Verdict("inconclusive", f"{what}: a run diverged"), "diverged", None
    mde = rule.detectable([a[s] - b[s] for s in sorted(a)], family)
    if mde is None:
        return verdict.Verdict("inconclusive", f"{what}: one seed, no noise estimate"), "one seed", None
    ok = mde <= d.level
    said = f"{what}: {mde:.3g} nats detectable with {len(a)} seeds ({'at most' if ok else 'more than'} {d.level:g})"
    return verdict.Verdict("confirmed" if ok else "not reproduced", said), f"{mde:.3g} nats", mde


def evaluate(g: store.Grid, rs: list, seconds: float = 0.0) -> rule.Evidence:
    """Grid ``g``'s declared rule on given rows: ``rule.evaluate`` for a grid that lists no extra rule
    module, else the same procedure (``rule.evaluate``) with this module's tests (``raw``)."""
    if MODULE not in g.rule_modules:
        if uses(g):
            raise ValueError(f"grid {g.name!r} uses tests or statistics of {MODULE} without listing it in rule_modules")
        return rule.evaluate(g, rs, seconds)
    deciding = [d for d in g.decisions if d.role == "decides"]
    family = max(1, len(deciding))
    got = {d.what: raw(rs, d, family if d.role == "decides" or d.test == "detectable" else 1) for d in g.decisions}
    failed = [d for d in g.decisions if d.role == "calibration" and got[d.what][0].label != "confirmed"]
    untestable = {d.what for d in deciding if any(c.calibrates in ("", d.what) for c in failed)}
    tested = {d.what: got[d.what][0] for d in deciding if d.what not in untestable}
    if tested:
        claim, corrected = verdict.decide(tested, g.rule)
        if untestable:
            claim = verdict.Verdict(
                claim.label, claim.reason + "; not testable at this scale in " + ", ".join(sorted(untestable))
            )
    else:
        corrected = {}
        claim = verdict.not_testable(
            "not testable at this scale: the calibration failed ("
            + "; ".join(got[c.what][0].reason for c in failed)
            + ")"
        )
    findings = []
    for d in g.decisions:
        v, measured, mde = got[d.what]
        if d.what in untestable:
            v = verdict.Verdict("not testable", v.reason + "; its calibration failed", v.interval, v.p, v.p_opposite)
        elif d.what in corrected:
            v = corrected[d.what]
        seeds = tuple(d.seeds) or tuple(sorted({r["seed"] for r in store.pick(rs, **d.arm)}))
        findings.append(rule.Finding(d, v, measured, seeds, got[d.what][0], mde))
    return rule.Evidence(g.name, g.prediction, g.rule, tuple(findings), claim, seconds, g.declared, claim)
