"""The grids' stored results, by name, and the declared rule applied to them.

``results(name)`` gives a grid's stored runs as tidy rows (refusing results that are missing,
malformed or made by other code), ``info`` and ``provenance`` what a figure says about them, ``run``
recomputes a grid; ``evidence(name)`` applies the grid's declared rule (``store.Decision``) to its
stored runs on two machines: the runs as this machine trained them and as the emulated second CPU
trained them (``emulate``). Each machine gets every comparison's verdict, the deciding regimes
corrected for their number (Holm) and the claim's verdict (``verdict.decide``); the book prints a
label where both machines give it, and "depends on the machine" with both readings where they do not
(``verdict.agree``). ``status(name)`` says whether the stored file is current.
"""

from __future__ import annotations

from dataclasses import replace

from . import store, verdict
from .grids import grid
from .rule import Evidence, Finding, both, detectable  # noqa: F401  (the rule, re-exported)
from .twoway import evaluate  # rule.evaluate, with the later grids' tests where a grid lists them


def results(name: str, machine: str = "native") -> list[dict]:
    """The stored runs of grid ``name`` as tidy rows (label, results and configs in one dict each);
    ``machine="emulated"``: the runs it decides on as the emulated second CPU trained them.

    Refuses (``StoreError``, naming the file) results that are missing, malformed or made by code
    that has changed since; ``run(name)`` recomputes them."""
    return store.rows(store.load(grid(name)), machine)


def exploration(name: str) -> list[dict]:
    """The stored runs of grid ``name`` on the seeds its verdict is not decided on (the exploration a
    chapter plots), without the runs on the fresh seeds of its declared rule."""
    fresh = {s for d in grid(name).decisions if d.role == "decides" for s in (d.seeds or ())}
    return [r for r in results(name) if r["seed"] not in fresh]


def info(name: str) -> dict:
    """The stored file's header: prediction, provenance (torch, device, date, seconds), check cell."""
    blob = store.load(grid(name))
    return {k: v for k, v in blob.items() if k != "cells"}


def provenance(name: str) -> str:
    """One line for a figure built from grid ``name``'s stored results (runs, seeds, torch, date)."""
    return store.describe(store.load(grid(name)))


def run(name: str, workers=None, second_cpu: bool = False) -> list[dict]:
    """Recompute grid ``name`` (cached cells are reused) and store it; returns its rows. With
    ``second_cpu``, also the emulated second CPU's copies of its deciding runs (3 to 4 times slower)."""
    return store.rows(store.run(grid(name), workers, emulated=second_cpu))


# ---------------------------------------------------------------------------------------------
# The declared rule applied to the stored runs
# ---------------------------------------------------------------------------------------------
def evidence(name: str) -> Evidence:
    """Grid ``name``'s declared rule applied to its stored runs on both machines (the module docstring):
    every comparison's verdict, the deciding regimes corrected for their number (Holm), and the claim's
    verdict, each the label both machines give or "depends on the machine".

    A deciding regime whose calibration (``Decision.calibrates``, or a calibration for the whole
    grid) is not confirmed is *not testable at this scale*: the criterion could not be passed even
    by a known-good arm. The claim is decided on the other deciding regimes by ``verdict.decide``
    with the grid's rule; with none left it is not testable. Until every run it decides on has an
    emulated copy (``store.emulated_missing``), the verdicts are this machine's alone, and
    ``missing_emulated`` says how many copies are missing."""
    g = grid(name)
    blob = store.load(g)
    seconds = float(blob.get("compute_seconds") or sum(c["result"].get("seconds", 0.0) for c in blob["cells"]))
    native = evaluate(g, store.rows(blob), seconds)
    missing = store.emulated_missing(g, blob)
    emulated = None if missing else evaluate(g, store.rows(blob, "emulated"), seconds)
    status_, note = store.rule_status(g, blob)
    return _one_reason(both(native, emulated, len(missing), status_, note))


def _one_reason(ev: Evidence) -> Evidence:
    """Where both machines give the claim the same label but reach it by different regimes (a regime's
    calibration passes on one machine's runs only, say), the claim's reason is this machine's alone and
    would contradict the comparisons printed beside it. It is rewritten from the regimes' labels as both
    machines give them; the label is unchanged."""
    if ev.native is None or ev.emulated is None or ev.native.label != ev.emulated.label:
        return ev
    if all(f.verdict.label != verdict.MACHINE for f in ev.role("decides")):
        return ev  # the same regimes decide on both: the reasons differ in their numbers at most
    by_label: dict[str, list[str]] = {}
    for f in ev.role("decides"):
        by_label.setdefault(f.verdict.label, []).append(f.decision.what)
    parts = []
    for label, where in by_label.items():
        if label == verdict.MACHINE:
            each = [
                f"{f.decision.what}: {f.native.label} on this machine's runs, {f.emulated.verdict.label} on the "
                "emulated second CPU's"
                for f in ev.role("decides")
                if f.verdict.label == label and f.native is not None and f.emulated is not None
            ]
            parts.append("depends on the machine in " + "; ".join(each))
        else:
            parts.append(f"{label} in " + ", ".join(where))
    return replace(ev, verdict=replace(ev.verdict, reason="; ".join(parts)))


def status(name: str) -> str:
    try:
        store.load(grid(name))
        return "current"
    except store.StoreError as e:
        return "stale" if "other code" in str(e) else "missing or invalid"


def holm_example() -> tuple[str, Finding] | None:
    """The first deciding comparison, over every grid, whose own 95 % interval lies wholly on one side
    of zero while Holm's correction over its grid's settings leaves it inconclusive (the primer's
    example): (grid name, finding), or None when no grid has one."""
    from .grids import DECLARED, GRIDS

    for name in sorted(GRIDS) + sorted(DECLARED):
        if status(name) != "current":
            continue
        for f in evidence(name).role("decides"):
            raw = f.raw
            if raw is not None and raw.label in ("confirmed", "not reproduced") and f.verdict.label == "inconclusive":
                return name, f
    return None


def holm_interval(name: str, f: Finding) -> tuple[float, int, object]:
    """The interval Holm's correction asks of deciding comparison ``f`` of grid ``name`` (the primer's
    example): (its confidence level, its rank among the grid's deciding comparisons by two-sided p, 1
    for the clearest, and the interval itself, ``verdict.Interval``). Holm orders the m comparisons from
    the clearest; the k-th must clear the margin with a 1 - 0.05 / (m - k + 1) interval, and the
    checking stops at the first that fails."""
    from scipy import stats

    from .verdict import Interval, t975

    deciding = [d.raw for d in evidence(name).role("decides")]
    if f.raw is None or f.raw.interval is None or f.raw.p is None or f.raw.p_opposite is None:
        raise ValueError(f"{f.decision.what!r} has no paired interval and p-values to widen")

    def two_sided(v) -> float:
        if v is None or v.p is None or v.p_opposite is None:
            return 1.0
        return min(1.0, 2 * min(v.p, v.p_opposite))

    mine = two_sided(f.raw)
    rank = 1 + sum(two_sided(v) < mine for v in deciding)
    level = 1 - 0.05 / (len(deciding) - rank + 1)
    ci = f.raw.interval
    n = ci.n
    scale = float(stats.t.ppf(1 - (1 - level) / 2, n - 1)) / t975(n - 1)
    half = (ci.hi - ci.lo) / 2 * scale
    return level, rank, Interval(ci.mean, ci.mean - half, ci.mean + half, n)
