"""A grid's declared rule applied to stored runs: every comparison's verdict, the deciding regimes
corrected for their number (Holm), the claim's verdict, and the two machines' readings combined.

This module, with ``verdict`` and ``measure.runstats``, is the code that turns runs into verdicts: its
hash is part of each grid's rule hash (``store.RULE_MODULES``), so an edit here marks the verdicts as
decided by a rule changed after their runs. Loading the stored runs is ``evaluation``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..measure.runstats import statistic
from . import store, verdict
from .verdict import Verdict


@dataclass(frozen=True)
class Finding:
    """One declared comparison of a grid, evaluated on its stored runs."""

    decision: store.Decision
    verdict: Verdict  # for a deciding regime: after Holm's correction across the regimes
    measured: str  # the number, short: "+0.26 [+0.18, +0.34]" or "5 of 5 vs 0 of 5"
    seeds: tuple
    raw: Optional[Verdict] = None  # before the correction across regimes
    # The smallest true effect this comparison would show with 80 % power at its seeds' noise, at the
    # level Holm's correction asks of a deciding regime: paired or one-sample t tests only (``detectable``).
    detectable: Optional[float] = None
    # The same comparison on the emulated second CPU's runs (None: not stored yet); ``verdict`` is then
    # the label both give, or "depends on the machine" (``verdict.agree``).
    emulated: Optional["Finding"] = None
    native: Optional[Verdict] = None  # this machine's verdict (after Holm), where the two are combined

    @property
    def lost_to_holm(self) -> bool:
        """Decisive on its own, but not once corrected for the number of deciding regimes."""
        return self.raw is not None and self.raw.label != self.verdict.label


@dataclass(frozen=True)
class Evidence:
    """A grid's declared rule and what its stored runs say under it: ``evidence(name)``."""

    name: str
    prediction: str
    rule: str
    findings: tuple
    verdict: Verdict  # the claim's
    seconds: float  # compute time of every stored run of the grid, one core each
    declared: str = "before the runs"  # when the rule was written (store.Grid.declared)
    native: Optional[Verdict] = None  # the claim's verdict on each machine's runs
    emulated: Optional[Verdict] = None
    missing_emulated: int = 0  # runs it decides on that have no emulated copy yet (decided on one machine)
    rule_status: str = store.BEFORE  # store.rule_status: BEFORE or CHANGED, and why
    rule_note: str = ""

    def role(self, role: str) -> list:
        return [f for f in self.findings if f.decision.role == role]

    def regime(self, what: str) -> Finding:
        hits = [f for f in self.findings if f.decision.what == what]
        if len(hits) != 1:
            raise KeyError(
                f"grid {self.name!r} declares no comparison {what!r}; it has {[f.decision.what for f in self.findings]}"
            )
        return hits[0]

    @property
    def calibrated(self) -> bool:
        return all(f.verdict.label == "confirmed" for f in self.role("calibration"))


def _stat_rows(rs: list, d: store.Decision, match: dict) -> list:
    sel = [r for r in store.pick(rs, **match) if not d.seeds or r["seed"] in d.seeds]
    return [{**r, "_stat": statistic(r, d.field, d.level)} for r in sorted(sel, key=lambda r: r["seed"])]


def _fmt(ci: Optional[verdict.Interval]) -> str:
    if ci is None:
        return ""
    if ci.n < 2:
        return f"{ci.mean:+.3g}"
    return f"{ci.mean:+.3g} [{ci.lo:+.3g}, {ci.hi:+.3g}]"


def detectable(values: list, family: int = 1) -> Optional[float]:
    """(t_(1 - 0.025/family) + t_0.8)(n - 1 df) times the standard error: the effect a one-sided test
    finds four times in five at the noise the values show, at the level Holm's correction asks of the
    strictest of ``family`` deciding regimes (2.5 % / family)."""
    from scipy import stats

    n = len(values)
    if n < 2:
        return None
    m = sum(values) / n
    sd = (sum((x - m) ** 2 for x in values) / (n - 1)) ** 0.5
    return float((stats.t.ppf(1 - verdict.ALPHA / family, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / n**0.5)


def _evaluate(rs: list, d: store.Decision, family: int = 1) -> tuple:
    """(verdict, measured[, detectable]) of one declared comparison, before any correction across
    regimes; ``family``: the number of deciding regimes it is corrected over (for ``detectable``)."""
    a = _stat_rows(rs, d, d.arm)
    if not a:
        raise ValueError(f"decision {d.what!r}: no stored run matches {d.arm}")
    b = _stat_rows(rs, d, d.against) if d.against is not None else []
    what = d.what
    if d.test in ("fisher", "every"):
        ka = sum(bool(r["_stat"]) for r in a)
        if d.test == "every":
            label = "confirmed" if ka == len(a) else "not reproduced"
            return verdict.Verdict(label, f"{what}: {ka} of {len(a)} runs"), f"{ka} of {len(a)} runs"
        kb = sum(bool(r["_stat"]) for r in b)
        v = verdict.counts(ka, len(a), kb, len(b), what=what, names=("arm", "reference"))
        return v, f"{ka} of {len(a)} vs {kb} of {len(b)}"
    if d.test == "level":
        vals = [r["_stat"] for r in a]
        if any(x is None for x in vals):
            k = sum(x is None for x in vals)
            return verdict.Verdict("inconclusive", f"{what}: {k} of {len(vals)} runs diverged"), f"{k} diverged"
        v = verdict.compare([x - d.level for x in vals], d.predicted, d.margin, what=f"{what}, minus the level")
        ci = verdict.interval(vals)
        return v, _fmt(ci), detectable(vals, family)
    da = {r["seed"]: r["_stat"] for r in a}
    db = {r["seed"]: r["_stat"] for r in b}
    if set(da) != set(db):
        raise ValueError(f"decision {d.what!r}: the arms do not share their seeds: {sorted(da)} vs {sorted(db)}")
    if any(da[s] is None or db[s] is None for s in da):
        k = sum(da[s] is None or db[s] is None for s in da)
        return verdict.Verdict("inconclusive", f"{what}: {k} of {len(da)} pairs have a diverged run"), f"{k} diverged"
    diffs = [da[s] - db[s] for s in sorted(da)]
    if d.test == "equivalence":
        v = verdict.equivalent(diffs, d.margin, what=what)
        return v, _fmt(v.interval), None
    v = verdict.compare(diffs, d.predicted, d.margin, what=what)
    return v, _fmt(v.interval), detectable(diffs, family)


def both(
    native: Evidence, emulated: Optional[Evidence], missing: int = 0, rule_status=store.BEFORE, note=""
) -> Evidence:
    """One ``Evidence`` from each machine's: every label the one both give (``verdict.agree``)."""
    findings = []
    for i, f in enumerate(native.findings):
        e = emulated.findings[i] if emulated is not None else None
        findings.append(
            Finding(
                f.decision,
                verdict.agree(f.verdict, e.verdict if e else None),
                f.measured,
                f.seeds,
                f.raw,
                f.detectable,
                e,
                f.verdict,
            )
        )
    claim = verdict.agree(native.verdict, emulated.verdict if emulated else None)
    return Evidence(
        native.name,
        native.prediction,
        native.rule,
        tuple(findings),
        claim,
        native.seconds,
        native.declared,
        native.verdict,
        emulated.verdict if emulated else None,
        missing,
        rule_status,
        note,
    )


def evaluate(g: store.Grid, rs: list, seconds: float = 0.0) -> Evidence:
    """The declared rule of ``g`` on given rows (one machine's stored runs, or made-up ones in the tests)."""
    family = max(1, sum(d.role == "decides" for d in g.decisions))
    raw = {d.what: (_evaluate(rs, d, family if d.role == "decides" else 1) + (None,))[:3] for d in g.decisions}
    failed = [d for d in g.decisions if d.role == "calibration" and raw[d.what][0].label != "confirmed"]
    deciding = [d for d in g.decisions if d.role == "decides"]
    untestable = {d.what for d in deciding if any(c.calibrates in ("", d.what) for c in failed)}
    tested = {d.what: raw[d.what][0] for d in deciding if d.what not in untestable}
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
            + "; ".join(raw[c.what][0].reason for c in failed)
            + ")"
        )
    findings = []
    for d in g.decisions:
        v, measured, mde = raw[d.what]
        if d.what in untestable:
            v = verdict.Verdict("not testable", v.reason + "; its calibration failed", v.interval, v.p, v.p_opposite)
        elif d.what in corrected:
            v = corrected[d.what]
        seeds = tuple(d.seeds) or tuple(sorted({r["seed"] for r in store.pick(rs, **d.arm)}))
        findings.append(Finding(d, v, measured, seeds, raw[d.what][0], mde))
    return Evidence(g.name, g.prediction, g.rule, tuple(findings), claim, seconds, g.declared, claim)
