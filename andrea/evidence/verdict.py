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
* ``not testable``: nothing this book can run measures it;
* ``depends on the machine``: a comparison of stored runs decided on two machines (the runs as this
  machine trained them, and as another CPU trains them: ``evaluation.evidence``) that gives two
  different labels (``agree``); the book prints both readings.

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

LABELS = (
    "confirmed",
    "corrected",
    "qualified",
    "not reproduced",
    "inconclusive",
    "not testable",
    "depends on the machine",
)
MACHINE = "depends on the machine"

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


def interval(values: Iterable[float]) -> Interval:
    """Mean and 95 % Student-t interval of ``values`` (non-finite values are an error)."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("interval of no values")
    if not all(math.isfinite(x) for x in v):
        raise ValueError(f"interval of non-finite values: {v}")
    n = len(v)
    m = sum(v) / n
    if n < 2:
        return Interval(m, m, m, n)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
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


def _t_p(ci_mean: float, sd: float, n: int, threshold: float) -> float:
    """One-sided p-value of "the mean is above ``threshold``" (Student's t, ``n`` - 1 df)."""
    from scipy import stats

    if sd == 0:
        return 0.0 if ci_mean > threshold else 1.0
    return float(stats.t.sf((ci_mean - threshold) / (sd / math.sqrt(n)), n - 1))


def _sd(values: Sequence[float]) -> float:
    v = [float(x) for x in values]
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def compare(
    diffs: Sequence[float],
    predicted: str,
    margin: float = 0.0,
    what: str = "the difference",
    exact: bool = False,
) -> Verdict:
    """Decide a prediction about the sign of ``diffs`` (per-seed values or paired differences).

    ``predicted`` is "positive" (the claim predicts diffs > margin) or "negative" (diffs < -margin).
    ``exact``: the quantity has no noise (a property of the architecture), so one value decides.
    The verdict carries the one-sided p-values (paired t test) of both directions, for ``decide``'s
    correction across regimes. Whether another CPU would say the same is not this function's
    question: the book decides every stored comparison on two machines' runs (``evaluation.evidence``).
    """
    if predicted not in ("positive", "negative"):
        raise ValueError(f"predicted must be 'positive' or 'negative', got {predicted!r}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ci = interval(diffs)
    sign = 1 if predicted == "positive" else -1
    lo, hi = (ci.lo, ci.hi) if sign > 0 else (-ci.hi, -ci.lo)  # in the predicted direction
    if ci.n < 2 and not exact:
        return Verdict("inconclusive", f"{what} is {ci.mean:+.3g} from a single run: no interval, no verdict", ci)
    p_for = p_against = None
    if ci.n >= 2:
        sd = _sd(diffs)
        p_for = _t_p(sign * ci.mean, sd, ci.n, margin)
        p_against = _t_p(-sign * ci.mean, sd, ci.n, margin)
    side = "above" if sign > 0 else "below"
    bound = f"{sign * margin:+.3g}" if margin else "0"
    if lo > margin:
        return Verdict("confirmed", f"{what} is {ci} — entirely {side} {bound}, as predicted", ci, p_for, p_against)
    if hi < -margin:
        return Verdict(
            "not reproduced", f"{what} is {ci} — entirely on the other side of {bound}", ci, p_for, p_against
        )
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


def equivalent(diffs: Sequence[float], margin: float, what: str = "the difference") -> Verdict:
    """Decide a prediction that two arms are *about the same*: the whole 95 % interval of ``diffs``
    within (-margin, +margin) is confirmed (two one-sided tests, TOST, at the 2.5 % level each);
    the whole interval outside it is not reproduced; anything else is inconclusive. A test that
    only asked for "not better by more than the margin" would call a clear loss "the same"."""
    if margin <= 0:
        raise ValueError(f"equivalence needs a margin > 0, got {margin}")
    ci = interval(diffs)
    if ci.n < 2:
        return Verdict("inconclusive", f"{what} is {ci.mean:+.3g} from a single run: no interval, no verdict", ci)
    if -margin < ci.lo and ci.hi < margin:
        return Verdict("confirmed", f"{what} is {ci} — inside ±{margin:g}: the same within the margin", ci)
    if ci.lo >= margin or ci.hi <= -margin:
        return Verdict("not reproduced", f"{what} is {ci} — outside ±{margin:g}: they differ", ci)
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

    Each regime is one two-sided test (its two one-sided tests at 2.5 %: ``Verdict.p`` for the predicted
    direction, ``p_opposite`` for the other; two-sided p = 2 min(p, p_opposite)). The two-sided p-values
    are Holm-adjusted across the regimes, one family whatever the declared direction (a regime without
    p-values, e.g. made inconclusive by a diverged run, keeps its label and counts in the family as a p of
    1); a regime is
    *confirmed* if its adjusted p is below 2 ``alpha`` and it lies on the predicted side, *not
    reproduced* if it lies on the other, else *inconclusive* (a regime without p-values keeps the label
    it has). Then, by the declared ``rule``:

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
    two_sided = [min(1.0, 2 * min(float(verdicts[k].p), float(verdicts[k].p_opposite))) for k in tested]  # type: ignore[arg-type]
    # the family is every deciding regime: one without p-values (a diverged run made it inconclusive)
    # still counts, as a p of 1, so that it cannot make the others' bar lower
    adjusted = dict(zip(tested, holm(two_sided + [1.0] * (len(keys) - len(tested)))))
    corrected = {}
    for k in keys:
        v = verdicts[k]
        if k not in adjusted:
            corrected[k] = v
            continue
        predicted_side = v.p <= v.p_opposite  # type: ignore[operator]
        label = "inconclusive"
        if adjusted[k] < 2 * alpha:
            label = "confirmed" if predicted_side else "not reproduced"
        note = "" if len(keys) == 1 else f" (Holm-adjusted p = {adjusted[k]:.2g})"
        if label != v.label and v.label in ("confirmed", "not reproduced"):
            note = f"; not decisive after Holm's correction over {len(keys)} regimes" + note
        one_sided = adjusted[k] / 2  # after Holm, on the side the regime lies on
        p_for, p_against = (one_sided, 1 - one_sided) if predicted_side else (1 - one_sided, one_sided)
        corrected[k] = Verdict(label, v.reason + note, v.interval, p_for, p_against)
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


def agree(native: Verdict, emulated: Verdict | None) -> Verdict:
    """The label two machines' readings of one comparison give: the common label, or ``MACHINE``
    ("depends on the machine") with both. Without a second reading (None), the native one."""
    if emulated is None or emulated.label == native.label:
        return native
    return Verdict(
        MACHINE,
        f"{native.label} on this machine's runs ({native.reason}); {emulated.label} on the emulated second "
        f"CPU's ({emulated.reason})",
        native.interval,
    )


def combine(verdicts: Mapping[str, Verdict], rule: str = "every") -> Verdict:
    """One verdict for a claim tested in several regimes (keys name them): ``decide``'s verdict."""
    return decide(verdicts, rule)[0]


def not_testable(reason: str) -> Verdict:
    return Verdict("not testable", reason)
