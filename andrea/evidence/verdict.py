"""One rule for every verdict in the book, decided from the numbers.

The labels:

* ``confirmed``: the claim's prediction holds: the deciding difference lies on the predicted side,
  with its whole 95 % interval beyond the stated margin (0 unless a chapter says otherwise);
* ``not reproduced``: the opposite was measured: the whole interval lies on the other side;
* ``inconclusive``: the interval contains the margin: the difference is within the noise (a "win"
  inside the noise is no win for either side);
* ``qualified``: the claim holds in some of its deciding regimes and the opposite was measured in
  others (a regime within the noise does not make a claim qualified: see ``decide``);
* ``corrected``: a number the source states is off by more than the tolerance (the book gives the
  measured one);
* ``not testable``: nothing this book can run measures it.

A claim tested in several regimes is decided by ``decide``: Holm's correction across the regimes
that the claim's grid declares as deciding, and a declared rule ("every" or "some"). The quantiles
and the exact tests come from ``scipy.stats``.

Intervals are Student-t intervals on the mean of per-seed values (or of paired per-seed
differences, which remove what two arms share: the initial weights and the batches of a seed).
With one value there is no interval, and the verdict is ``inconclusive`` unless the claim is
exact (``exact``), as a property of the architecture is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

LABELS = ("confirmed", "corrected", "qualified", "not reproduced", "inconclusive", "not testable")

ALPHA = 0.025  # each one-sided test; a 95 % two-sided interval beyond the margin is the same test


def t975(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (``scipy.stats.t``)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float
    n: int

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.mean:+.3g} (one value, no interval)"
        return f"{self.mean:+.3g} [{self.lo:+.3g}, {self.hi:+.3g}] (95 % CI, n = {self.n})"

    def format(self, fmt: str = ".3f") -> str:
        if self.n < 2:
            return f"{self.mean:{fmt}} (n = 1)"
        return f"{self.mean:{fmt}} [{self.lo:{fmt}}, {self.hi:{fmt}}]"


def interval(values: Iterable[float], extra_sd: float = 0.0) -> Interval:
    """Mean and 95 % Student-t interval of ``values`` (non-finite values are an error).

    ``extra_sd``: noise that the values do not show but would have on another machine (each value's
    change under other CPU kernels, as a standard deviation); it is added to the seeds' variance."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("interval of no values")
    if not all(math.isfinite(x) for x in v):
        raise ValueError(f"interval of non-finite values: {v}")
    n = len(v)
    m = sum(v) / n
    if n < 2:
        return Interval(m, m, m, n)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1) + extra_sd**2)
    h = t975(n - 1) * sd / math.sqrt(n)
    return Interval(m, m - h, m + h, n)


@dataclass(frozen=True)
class Verdict:
    label: str
    reason: str  # one sentence, generated from the numbers
    interval: Interval | None = None
    # One-sided p-values of the test behind the label: for the predicted direction (``p``) and for
    # the opposite one (``p_opposite``); ``decide`` corrects them across regimes (Holm).
    p: float | None = None
    p_opposite: float | None = None

    def __post_init__(self):
        if self.label not in LABELS:
            raise ValueError(f"verdict label must be one of {LABELS}, got {self.label!r}")

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}"


def _kernel_sd(diffs, kernel_sd) -> float:
    """The extra noise for ``diffs``: given, or what other CPU kernels would add to a paired difference
    of two stored runs (``andrea.evidence.store.Paired`` carries its grid's kernel tolerance ``s``, the size of
    one run's change; a difference of two runs changes with standard deviation sqrt(2) s), or 0."""
    if kernel_sd is not None:
        if kernel_sd < 0 or not math.isfinite(kernel_sd):
            raise ValueError(f"kernel_sd must be a finite number >= 0, got {kernel_sd!r}")
        return kernel_sd
    return math.sqrt(2) * getattr(diffs, "kernel_tolerance", 0.0)


def _machine_note(ci: Interval) -> str:
    return f"; with another CPU's rounding added it spans [{ci.lo:+.3g}, {ci.hi:+.3g}], so this is not decisive"


def _t_p(ci_mean: float, sd: float, n: int, threshold: float) -> float:
    """One-sided p-value of "the mean is above ``threshold``" (Student's t, ``n`` - 1 df)."""
    from scipy import stats

    if sd == 0:
        return 0.0 if ci_mean > threshold else 1.0
    return float(stats.t.sf((ci_mean - threshold) / (sd / math.sqrt(n)), n - 1))


def _sd(values: Sequence[float], extra_sd: float) -> float:
    v = [float(x) for x in values]
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) + extra_sd**2)


def compare(
    diffs: Sequence[float],
    predicted: str,
    margin: float = 0.0,
    what: str = "the difference",
    exact: bool = False,
    kernel_sd: float | None = None,
) -> Verdict:
    """Decide a prediction about the sign of ``diffs`` (per-seed values or paired differences).

    ``predicted`` is "positive" (the claim predicts diffs > margin) or "negative" (diffs < -margin).
    ``exact``: the quantity has no noise (a property of the architecture), so one value decides.
    ``kernel_sd``: decide on the interval with this much extra noise per value, what re-running on
    another CPU would add (by default from stored runs' kernel tolerance, see ``_kernel_sd``; 0
    otherwise). A difference decisive only without it is inconclusive, and the reason says so.
    The verdict carries the one-sided p-values (paired t test, with the extra noise) of both
    directions, for ``decide``'s correction across regimes.
    """
    if predicted not in ("positive", "negative"):
        raise ValueError(f"predicted must be 'positive' or 'negative', got {predicted!r}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ci = interval(diffs)
    extra = _kernel_sd(diffs, kernel_sd)
    wide = interval(diffs, extra) if ci.n >= 2 else ci
    sign = 1 if predicted == "positive" else -1

    def edges(c: Interval) -> tuple[float, float]:  # in the predicted direction
        return (c.lo, c.hi) if sign > 0 else (-c.hi, -c.lo)

    (lo, hi), (wlo, whi) = edges(ci), edges(wide)
    if ci.n < 2 and not exact:
        return Verdict("inconclusive", f"{what} is {ci.mean:+.3g} from a single run: no interval, no verdict", ci)
    p_for = p_against = None
    if ci.n >= 2:
        sd = _sd(diffs, extra)
        p_for = _t_p(sign * ci.mean, sd, ci.n, margin)
        p_against = _t_p(-sign * ci.mean, sd, ci.n, margin)
    side = "above" if sign > 0 else "below"
    bound = f"{sign * margin:+.3g}" if margin else "0"
    if wlo > margin:
        return Verdict("confirmed", f"{what} is {ci} — entirely {side} {bound}, as predicted", ci, p_for, p_against)
    if whi < -margin:
        return Verdict(
            "not reproduced", f"{what} is {ci} — entirely on the other side of {bound}", ci, p_for, p_against
        )
    if lo > margin or hi < -margin:
        where = "entirely " + (f"{side} {bound}" if lo > margin else f"on the other side of {bound}")
        return Verdict("inconclusive", f"{what} is {ci} — {where}" + _machine_note(wide), ci, p_for, p_against)
    return Verdict(
        "inconclusive", f"{what} is {ci} — the interval contains {bound}: within the noise", ci, p_for, p_against
    )


def flip_distance(diffs: Sequence[float], predicted: str, margin: float = 0.0) -> float:
    """How far the 95 % interval of ``diffs`` is from changing ``compare``'s label (same units as
    ``diffs``): for a confirmed or not-reproduced verdict, the gap between the interval's near edge and
    its threshold; for an inconclusive one, the smaller distance either edge would have to move."""
    ci = interval(diffs)
    lo, hi = (ci.lo, ci.hi) if predicted == "positive" else (-ci.hi, -ci.lo)
    if lo > margin:
        return lo - margin
    if hi < -margin:
        return -margin - hi
    return min(margin - lo, hi + margin)


def fisher_one_sided(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """P(at least k_a of the events fall in group a | k_a + k_b events, group sizes n_a, n_b):
    Fisher's exact test of "events are more frequent in a than in b" (``scipy.stats.fisher_exact``)."""
    from scipy import stats

    return float(stats.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]], alternative="greater").pvalue)


def counts(
    k_a: int, n_a: int, k_b: int, n_b: int, what: str = "runs that diverged", names: tuple = ("A", "B")
) -> Verdict:
    """Decide "event (e.g. divergence) is more frequent in A than in B" from counts over seeds,
    by Fisher's exact test, one-sided at ``ALPHA`` in each direction (as the intervals are)."""
    for k, n in ((k_a, n_a), (k_b, n_b)):
        if not (0 <= k <= n) or n < 1:
            raise ValueError(f"counts need 0 <= k <= n and n >= 1, got {k} of {n}")
    p_more = fisher_one_sided(k_a, n_a, k_b, n_b)
    p_less = fisher_one_sided(k_b, n_b, k_a, n_a)
    said = f"{what}: {names[0]} {k_a}/{n_a}, {names[1]} {k_b}/{n_b}"
    if p_more < ALPHA:
        return Verdict("confirmed", f"{said} (Fisher's exact p = {p_more:.2g}), as predicted", None, p_more, p_less)
    if p_less < ALPHA:
        return Verdict("not reproduced", f"{said}: the opposite (p = {p_less:.2g})", None, p_more, p_less)
    return Verdict("inconclusive", f"{said}: no difference beyond chance (p = {p_more:.2g})", None, p_more, p_less)


def equivalent(
    diffs: Sequence[float], margin: float, what: str = "the difference", kernel_sd: float | None = None
) -> Verdict:
    """Decide a prediction that two arms are *about the same*: the whole 95 % interval of ``diffs``
    within (-margin, +margin) is confirmed (two one-sided tests, TOST, at the 2.5 % level each);
    the whole interval outside it is not reproduced; anything else is inconclusive. A test that
    only asked for "not better by more than the margin" would call a clear loss "the same".
    ``kernel_sd`` adds another CPU's rounding as in ``compare``; when that alone makes the interval
    wider than the margin, the design cannot show equivalence, and the reason says so."""
    if margin <= 0:
        raise ValueError(f"equivalence needs a margin > 0, got {margin}")
    ci = interval(diffs)
    if ci.n < 2:
        return Verdict("inconclusive", f"{what} is {ci.mean:+.3g} from a single run: no interval, no verdict", ci)
    extra = _kernel_sd(diffs, kernel_sd)
    w = interval(diffs, extra)
    floor = t975(ci.n - 1) * extra / math.sqrt(ci.n)  # the half-width another CPU's rounding alone gives
    if floor >= margin:
        return Verdict(
            "inconclusive",
            f"{what} is {ci}; another CPU's rounding alone widens the interval by ±{floor:.2g}, more than the "
            f"margin ±{margin:g}: {ci.n} seeds cannot show equivalence",
            ci,
        )
    if -margin < w.lo and w.hi < margin:
        return Verdict("confirmed", f"{what} is {ci} — inside ±{margin:g}: the same within the margin", ci)
    if w.lo >= margin or w.hi <= -margin:
        return Verdict("not reproduced", f"{what} is {ci} — outside ±{margin:g}: they differ", ci)
    if -margin < ci.lo and ci.hi < margin:
        return Verdict("inconclusive", f"{what} is {ci} — inside ±{margin:g}" + _machine_note(w), ci)
    if ci.lo >= margin or ci.hi <= -margin:
        return Verdict("inconclusive", f"{what} is {ci} — outside ±{margin:g}" + _machine_note(w), ci)
    return Verdict("inconclusive", f"{what} is {ci} — reaches beyond ±{margin:g}: not shown to be the same", ci)


def numeric(stated: float, measured: float, rel_tol: float = 0.05, what: str = "the value") -> Verdict:
    """A number the source states vs the measured one: confirmed within ``rel_tol``, else corrected."""
    if not (math.isfinite(stated) and math.isfinite(measured)):
        raise ValueError(f"numeric verdict needs finite numbers, got {stated!r} and {measured!r}")
    err = abs(measured - stated) / max(abs(stated), 1e-300)
    if err <= rel_tol:
        return Verdict("confirmed", f"{what}: stated {stated:.4g}, measured {measured:.4g} (within {rel_tol:.0%})")
    return Verdict("corrected", f"{what}: stated {stated:.4g}, measured {measured:.4g} (off by {err:.0%})")


def exact(error: float, tol: float, what: str = "the difference") -> Verdict:
    """An identity of the code (two computations that must agree): confirmed when they agree to
    ``tol``, corrected (the statement is wrong as written) when they do not."""
    if not math.isfinite(error):
        return Verdict("corrected", f"{what} is not finite")
    if abs(error) <= tol:
        return Verdict("confirmed", f"{what} is {error:.2g} (at most {tol:g})")
    return Verdict("corrected", f"{what} is {error:.2g}, more than {tol:g}")


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (family-wise error across regimes): the k-th
    smallest p is multiplied by (m - k + 1), and adjusted values never decrease along the order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


RULES = ("every", "some")


def decide(verdicts: Mapping[str, Verdict], rule: str = "every", alpha: float = ALPHA) -> tuple[Verdict, dict]:
    """The claim's verdict from its deciding regimes (keys name them), with Holm's correction.

    Each regime's one-sided p-values (``Verdict.p`` for the predicted direction, ``p_opposite``
    for the other) are Holm-adjusted across the regimes; a regime is *confirmed* if its adjusted
    ``p`` is below ``alpha``, *not reproduced* if its adjusted ``p_opposite`` is, else
    *inconclusive* (a regime without p-values keeps the label it has). Then, by the declared
    ``rule``:

    * ``"every"`` (the claim says it holds in each regime): confirmed if confirmed in all;
      *qualified* if confirmed in some and not reproduced in others; not reproduced if not
      reproduced in some and confirmed in none; otherwise inconclusive;
    * ``"some"`` (it holds in at least one): confirmed if confirmed in one and not reproduced in
      none; qualified if confirmed in some and not reproduced in others; not reproduced if not
      reproduced in all; otherwise inconclusive.

    Returns (the claim's verdict, {regime: the regime's corrected verdict})."""
    if not verdicts:
        raise ValueError("decide needs at least one regime")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    keys = list(verdicts)
    tested = [k for k in keys if verdicts[k].p is not None and verdicts[k].p_opposite is not None]
    adj_for = dict(zip(tested, holm([verdicts[k].p for k in tested])))  # type: ignore[misc]
    adj_against = dict(zip(tested, holm([verdicts[k].p_opposite for k in tested])))  # type: ignore[misc]
    corrected = {}
    for k in keys:
        v = verdicts[k]
        if k not in adj_for:
            corrected[k] = v
            continue
        label = "confirmed" if adj_for[k] < alpha else "not reproduced" if adj_against[k] < alpha else "inconclusive"
        note = "" if len(tested) == 1 else f" (Holm-adjusted p = {min(adj_for[k], adj_against[k]):.2g})"
        if label != v.label and v.label in ("confirmed", "not reproduced"):
            note = f"; not decisive after Holm's correction over {len(tested)} regimes" + note
        corrected[k] = Verdict(label, v.reason + note, v.interval, adj_for[k], adj_against[k])
    labels = {k: v.label for k, v in corrected.items()}
    yes = [k for k in keys if labels[k] == "confirmed"]
    no = [k for k in keys if labels[k] == "not reproduced"]
    rest = [k for k in keys if k not in yes and k not in no]

    def names(ks):
        return ", ".join(ks)

    if yes and no:
        label, why = "qualified", f"confirmed in {names(yes)}; the opposite in {names(no)}"
    elif yes and (not rest or rule == "some"):
        label = "confirmed"
        why = f"confirmed in {names(yes)}" + (f"; inconclusive in {names(rest)}" if rest else "")
    elif no and (rule == "every" or not rest):
        label = "not reproduced"
        why = f"the opposite in {names(no)}" + (f"; inconclusive in {names(rest)}" if rest else "")
    else:
        label = "inconclusive"
        why = (f"confirmed in {names(yes)} only; " if yes else "") + (
            f"the opposite in {names(no)} only; " if no else ""
        )
        why += f"within the noise in {names(rest)}"
    return Verdict(label, why), corrected


def combine(verdicts: Mapping[str, Verdict], rule: str = "every") -> Verdict:
    """One verdict for a claim tested in several regimes (keys name them): ``decide``'s verdict."""
    return decide(verdicts, rule)[0]


def not_testable(reason: str) -> Verdict:
    return Verdict("not testable", reason)
