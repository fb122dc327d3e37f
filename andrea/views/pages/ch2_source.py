"""Chapter 2's test of the source's own arm (``ch2_source_arm``, declared for issue 49 before its runs): no
LayerNorm at all against pre-norm, at learning rates held at 1e-2 and 1.5e-2, and the two-sided reading of
"small instabilities accumulate": a run *accumulates* if its loss breaks after step 300 following 100
break-free steps (``evidence.twoway``).

``source`` reads the grid once (cached) into a ``Reading``; ``source_said`` is the lesson's paragraph,
``source_figure`` the figure it shows, and ``source_evidence`` / ``source_table`` the evidence page's.
"""

from __future__ import annotations

import functools

import matplotlib.pyplot as plt
import numpy as np

from ...evidence import evaluation, store, twoway, verdict
from ...evidence.grids.ch2 import LATE, SOURCE_RATES
from .. import plots
from ..lesson import Markdown, paragraphs, ref
from ..notebook import Table
from .ch2_training import MACHINES, Reading

GRID = "ch2_source_arm"
NAMES = {"none": "no LayerNorm at all", "pre": "pre-norm"}
COLOURS = {"pre": plots.PALETTE[0], "none": plots.PALETTE[3]}


@functools.cache
def source_runs() -> dict[str, list[dict]]:
    return {machine: evaluation.results(GRID, machine) for machine in MACHINES}


def runs(norm: str, lr: float, machine: str = "native") -> list[dict]:
    return sorted(store.pick(source_runs()[machine], norm=norm, lr=lr), key=lambda r: r["seed"])


def late(r: dict) -> bool:
    """The declared statistic: a break at or after step ``LATE`` that follows 100 break-free steps."""
    return bool(twoway.statistic(r, "late_break", LATE))


def _rate(lr: float) -> str:
    return {1e-2: "10⁻²", 1.5e-2: "1.5·10⁻²"}.get(lr, f"{lr:g}")


@functools.cache
def machines() -> tuple[str, ...]:
    """The machines whose runs the counts read: the second CPU's only once every deciding copy is stored
    (``store.rows`` gives a native row where a copy is missing, which would mix the two)."""
    missing = store.emulated_missing(evaluation.grid(GRID), store.load(evaluation.grid(GRID)))
    return MACHINES if not missing else ("native",)


def pending() -> str:
    """Empty once the second CPU's copies are all stored, else how many are."""
    g = evaluation.grid(GRID)
    missing, total = store.emulated_missing(g, store.load(g)), len(g.decision_cells())
    return f"second CPU: pending ({total - len(missing)} of {total} copies)" if missing else ""


def _count(k: dict, n: int, noun: str = "") -> str:
    """``k`` (by machine) of ``n`` (then ``noun``), the second CPU's count beside this machine's where they
    differ."""
    said = f"{k['native']} of {n}" + (f" {noun}" if noun else "")
    if "emulated" not in machines() or k["native"] == k["emulated"]:
        return said
    return f"{said} ({k['emulated']} on a second CPU)"


def thresholds(n: int) -> dict[str, int]:
    """The fewest late-breaking runs of ``n`` at a rate that confirm, and the most that refute, after Holm's
    correction over the rates (``verdict.decide``, as the rule): ``alone`` when the other rate is within
    chance, ``both`` when both rates show the same count."""
    out = {}
    for case in ("alone", "both"):
        labels = {}
        for k in range(n + 1):
            v = twoway.majority(k, n, "positive", "")
            other = v if case == "both" else verdict.Verdict("inconclusive", "", None, 0.5, 0.5)
            labels[k] = verdict.decide({"a": v, "b": other}, "every")[1]["a"].label
        out[f"yes_{case}"] = min(k for k, lab in labels.items() if lab == "confirmed")
        out[f"no_{case}"] = max(k for k, lab in labels.items() if lab == "not reproduced")
    return out


def _first_breaks(lr: float, verb: str = "broke") -> str:
    """When the runs without any LayerNorm first broke: "every run broke within its first 11 steps" (the lesson's
    ``verb``: "spiked")."""
    part = runs("none", lr)
    firsts = [twoway.breaks(r)[0] for r in part if twoway.breaks(r)]
    who = "every run" if len(firsts) == len(part) else f"{len(firsts)} of {len(part)} runs"
    return f"{who} {verb} within its first {max(firsts)} steps"


def thinned(lr: float, machine: str = "native") -> tuple[int, int]:
    """Runs without any LayerNorm that broke less often per step after ``LATE`` than over steps 100 to ``LATE``
    (a description made after the runs, not part of the declared rule), of the runs that lived past ``LATE``."""
    k = n = 0
    for r in runs("none", lr, machine):
        end = r["diverged_at"] if r["diverged"] else r["steps"][-1]
        if end <= LATE:
            continue
        b = twoway.breaks(r)
        before = sum(100 < t < LATE for t in b) / (LATE - 100)
        after = sum(t >= LATE for t in b) / (end - LATE + 1)
        n += 1
        k += after < before
    return k, n


def windows(lr: float, width: int = 100) -> list[int]:
    """Breaking steps per ``width``-step window, summed over the runs without any LayerNorm (this machine's)."""
    steps = runs("none", lr)[0]["train"]["steps"]
    out = [0] * -(-steps // width)
    for r in runs("none", lr):
        for t in twoway.breaks(r):
            out[min(len(out) - 1, (t - 1) // width)] += 1
    return out


def _instead(lr: float, div_k: dict, n: int) -> str:
    """What the runs without any LayerNorm did at one rate, beyond the declared count (descriptive)."""
    d = div_k["none", lr]
    if d["native"] == 0:
        thin = {m: "{} of {}".format(*thinned(lr, m)) for m in machines()}
        there = thin.get("emulated", thin["native"])
        fewer = f"{thin['native']} runs" + (f" here, {there} on a second CPU" if there != thin["native"] else "")
        if not any(d[m] for m in machines()):
            died = "no run diverged"
        else:
            steps = [r["diverged_at"] for r in runs("none", lr, "emulated") if r["diverged"]]
            died = f"no run diverged here ({len(steps)} on a second CPU, by step {max(steps)})"
        return f"at {_rate(lr)} {died}, and the breaks thinned out: fewer per step after step {LATE} in {fewer}"
    at = sorted(r["diverged_at"] for r in runs("none", lr) if r["diverged"])
    early = [x for x in at if x < LATE]
    return f"at {_rate(lr)} {_first_breaks(lr)}, and {_count(d, n)} diverged, " + (
        f"{len(early)} of them by step {max(early)}" if early else f"all after step {LATE}"
    )


def _instead_here(lr: float, div_k: dict) -> str:
    """The lesson's shorter ``_instead``: this machine's runs, the part a student reads in the figure."""
    if div_k["none", lr]["native"] == 0:
        return f"at {_rate(lr)} the spikes thinned out after step {LATE} in {'{} of {}'.format(*thinned(lr))} runs"
    at = sorted(r["diverged_at"] for r in runs("none", lr) if r["diverged"])
    early = [x for x in at if x < LATE]
    return f"at {_rate(lr)} {_first_breaks(lr, 'spiked')}, and {len(at)} of {len(runs('none', lr))} diverged" + (
        f", {len(early)} of them by step {max(early)}" if early else f", all after step {LATE}"
    )


@functools.cache
def source() -> Reading:
    out = Reading()
    ev = evaluation.evidence(GRID)
    n = len(runs("none", SOURCE_RATES[0]))
    first = runs("none", SOURCE_RATES[0])[0]
    warm, steps = first["train"]["warmup"], first["train"]["steps"]
    rows, late_k, div_k = [], {}, {}
    for lr in SOURCE_RATES:
        for norm in ("none", "pre"):
            k_late = {m: sum(late(r) for r in runs(norm, lr, m)) for m in MACHINES}
            k_div = {m: sum(bool(r["diverged"]) for r in runs(norm, lr, m)) for m in MACHINES}
            k_any = {m: sum(bool(twoway.breaks(r)) for r in runs(norm, lr, m)) for m in MACHINES}
            late_k[norm, lr], div_k[norm, lr] = k_late, k_div
            rows.append([_rate(lr), NAMES[norm], _count(k_any, n), _count(k_late, n), _count(k_div, n)])
    by_rate = {f.decision.arm["lr"]: f for f in ev.role("decides")}
    cals = ev.role("calibration")
    th = thresholds(n)
    out.put("src_label", ev.verdict.label)
    out.put("src_n", n)
    out.put("src_warm", warm)
    out.put("src_held", steps - warm)
    out.put("src_late", LATE)
    out.put("src_stable", twoway.STABLE)
    both = (th["yes_both"], th["no_both"]) != (th["yes_alone"], th["no_alone"])
    out.put(
        "src_needs",
        f"{th['yes_alone']} or more of {n} to confirm and {th['no_alone']} or fewer to refute"
        + (f" ({th['yes_both']} and {th['no_both']} when both rates show it)" if both else ""),
    )
    out.put("src_rates", " and ".join(_rate(lr) for lr in SOURCE_RATES))
    out.put("src_none", " and ".join(_count(late_k["none", lr], n) for lr in SOURCE_RATES))
    out.put("src_pre", " and ".join(_count(late_k["pre", lr], n) for lr in SOURCE_RATES))
    pre_none = not any(late_k["pre", lr][m] for lr in SOURCE_RATES for m in machines())
    pre_said = "No pre-norm run spiked late." if pre_none else f"Pre-norm: {out.said['src_pre']} spiked late."
    out.put("src_pre_said", pre_said)
    quiet = pre_none and not any(div_k["pre", lr][m] for lr in SOURCE_RATES for m in machines())
    out.put(
        "src_pre_all",
        "no pre-norm run broke late or diverged"
        if quiet
        else f"pre-norm: {out.said['src_pre']} broke late, "
        + " and ".join(_count(div_k["pre", lr], n) for lr in SOURCE_RATES)
        + " diverged",
    )
    trained = float(np.median([r["final_train_loss"] for lr in SOURCE_RATES for r in runs("pre", lr)]))
    out.put("src_ceiling", (np.log(first["model"]["vocab_size"]) + 1) / trained, ".0f")
    out.put("src_div", " and ".join(_count(div_k["none", lr], n) for lr in SOURCE_RATES))
    out.put("src_div_pre", " and ".join(_count(div_k["pre", lr], n) for lr in SOURCE_RATES))
    out.put("src_pending", pending())
    out.put(
        "src_cal",
        "Both calibrations passed"
        if all(c.verdict.label == "confirmed" for c in cals)
        else "A calibration failed: "
        + "; ".join(f"{c.decision.what}, {c.verdict.label}" for c in cals if c.verdict.label != "confirmed"),
    )
    out.put(
        "src_rate_labels",
        "; ".join(
            f"at {_rate(lr)}, **{by_rate[lr].verdict.label}** ({by_rate[lr].verdict.reason})" for lr in SOURCE_RATES
        ),
    )
    per_rate = []
    for lr in SOURCE_RATES:
        said = f"at {_rate(lr)}, {_count(late_k['none', lr], n, 'runs')} did"
        per_rate.append(said + (": too close to half to call" if by_rate[lr].verdict.label == "inconclusive" else ""))
    out.put("src_per_rate", "; ".join(per_rate))
    out.put(
        "src_per_rate_here",
        "; ".join(
            f"at {_rate(lr)}, {late_k['none', lr]['native']} of {n} runs spiked late"
            + (", about half, which alone decides nothing" if by_rate[lr].verdict.label == "inconclusive" else "")
            for lr in SOURCE_RATES
        ),
    )
    out.put("src_instead_here", "; ".join(_instead_here(lr, div_k) for lr in SOURCE_RATES))
    out.put("src_instead", "; ".join(_instead(lr, div_k, n) for lr in SOURCE_RATES))
    out.v.update(ev=ev, rows=rows, late=late_k, div=div_k, n=n, warm=warm, steps=steps, by_rate=by_rate)
    return out


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def source_said() -> Markdown:
    """The lesson's paragraph: what counts as accumulating, how many runs did, the label, and what the runs did
    instead (this machine's counts; the rule, its thresholds and the second CPU are on the evidence page)."""
    s = source().said
    return paragraphs(
        f"The source's own arm tests the word: no LayerNorm at all, the rate held for {s['src_held']} steps. A run "
        f"counts as accumulating if its loss *spikes late*: at or after step {s['src_late']}, following "
        f"{s['src_stable']} quiet steps. Verdict: **{s['src_label']}** ({ref('ev-ch2-accumulate')}). "
        f"{_cap(s['src_per_rate_here'])}. {s['src_pre_said']} The spikes came early instead: "
        f"{s['src_instead_here']}."
    )


def source_figure():
    """One panel per held rate: each run a row (no LayerNorm above, pre-norm below), a tick at every step
    its loss broke, a dot at its first late break, a cross where it diverged; grey: the warmup; dashed: step
    ``LATE``."""
    rd = source()
    n, warm, steps = rd.v["n"], rd.v["warm"], rd.v["steps"]
    fig, axes = plt.subplots(1, len(SOURCE_RATES), figsize=(9.5, 4.8), sharey=True)
    for ax, lr in zip(np.atleast_1d(axes), SOURCE_RATES):
        for block, norm in enumerate(("pre", "none")):
            for i, r in enumerate(runs(norm, lr)):
                y = block * (n + 2) + i
                end = r["diverged_at"] if r["diverged"] else steps
                ax.hlines(y, 0, end, color="0.75", lw=0.6)  # the steps it trained
                b = twoway.breaks(r)
                ax.plot(b, [y] * len(b), "|", color=COLOURS[norm], ms=5, mew=1.0)
                quiet = [t for t in b if t >= LATE and not any(t - twoway.STABLE <= u < t for u in b)]
                if quiet:
                    ax.plot(quiet[0], y, "o", color="k", ms=4.5, zorder=3)
                if r["diverged"]:
                    ax.plot(r["diverged_at"], y, "x", color="k", ms=6, mew=1.4, zorder=4)
        k, d = rd.v["late"]["none", lr]["native"], rd.v["div"]["none", lr]["native"]
        ax.axvspan(0, warm, color="0.9", zorder=0)
        ax.axvline(LATE, ls="--", color="0.3", lw=1)
        ax.text(LATE + 10, -2.2, f"late: step {LATE} on", fontsize=8, color="0.3", va="center")
        ax.set_xlim(0, steps)
        ax.set_xlabel("optimizer step")
        died = f", {d} diverge" if d else ""
        ax.set_title(f"held at {lr:g}: {k} of {n} spike late{died}", fontsize=9)
    first = np.atleast_1d(axes)[0]
    first.set_yticks([(n - 1) / 2, n + 2 + (n - 1) / 2], [NAMES["pre"], NAMES["none"]], fontsize=8)
    first.set_ylim(-3.5, 2 * n + 2)
    plots.provenance(fig, "cpu", None, evaluation.provenance(GRID))
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def source_table() -> Table:
    rd = source()
    return Table(
        rd.v["rows"],
        ["rate, held", "wiring", "runs that broke", "broke late", "diverged"],
        caption=f"{rd.v['n']} fresh seeds per row, clipped at 1, the rate held after a {rd.v['warm']}-step warmup. "
        f"Broke: the training loss non-finite or above ln 256 + 1 nats at some step. Late: at or after step {LATE}, "
        f"after {twoway.STABLE} steps without a break. In brackets: the emulated second CPU's count, where it differs.",
    )


def source_evidence() -> Markdown:
    """The deciding evidence on "accumulate": the declared two-sided reading of the source's arm, its limits,
    and what the runs did beyond it (described after the runs, not declared)."""
    rd = source()
    s, ev = rd.said, rd.v["ev"]
    if s["src_pending"]:
        machines_said = f"This machine's runs give it; {s['src_pending']}."
    elif ev.emulated is not None and ev.emulated.label == ev.native.label:
        machines_said = "Both machines give it."
    else:
        machines_said = f"This machine's runs give {ev.native.label}, the second CPU's {ev.emulated.label}."
    died = {lr: sorted(r["diverged_at"] for r in runs("none", lr) if r["diverged"]) for lr in SOURCE_RATES}
    deaths = [
        f"at {_rate(lr)}, without any LayerNorm, {_first_breaks(lr)} and "
        f"{len(d)} diverged, at steps {', '.join(map(str, d))}, so the count there says *when* they died"
        for lr, d in died.items()
        if d
    ]
    window = [f"{_rate(lr)}: {', '.join(map(str, windows(lr)))}" for lr in SOURCE_RATES]
    return paragraphs(
        f'Verdict on "small instabilities accumulate into NaN": **{s["src_label"]}**. {machines_said} Declared '
        "after the review of issue 49, before any of these runs: without any LayerNorm, at a rate held at "
        f"{s['src_rates']} (a {s['src_warm']}-step warmup, then {s['src_held']} steps at the peak, clipped at 1), "
        f"{s['src_n']} fresh seeds per rate and wiring. A run accumulates if its loss breaks (the lesson says "
        "spikes: non-finite, or more "
        f"than a nat above a uniform guess over the 256 bytes, ln 256 + 1 = 6.5 nats) at or after step "
        f"{s['src_late']}, after {s['src_stable']} break-free steps. The claim predicts more than half of the "
        "runs: an exact binomial test against one half, one-sided at 2.5 % each way, with Holm's correction over "
        f"the two rates, so a rate needs {s['src_needs']}. The same reading on the pre-norm runs must return "
        "fewer than half: the calibration, which shows that the reading can refute on an arm known to be stable.",
        f"{s['src_cal']}. Runs without any LayerNorm that broke late: {s['src_none']}; pre-norm: {s['src_pre']}. "
        f"Per rate: {s['src_rate_labels']}. Beside it, runs that diverged (stopped on a non-finite loss or "
        f"gradient): {s['src_div']} without any LayerNorm, {s['src_div_pre']} pre-norm.",
        "What this test cannot show. A break is a big event (the ceiling is about "
        f"{s['src_ceiling']} times a trained pre-norm model's loss), so small instabilities are inferred from "
        "the timing of big ones. One late break is enough to count, whether or not the run recovers, and the "
        "reading does not ask that breaks come more and more often. The calibration was expected to pass, and "
        "no arm shows the reading confirming. A run that "
        f"diverges before step {s['src_late']} can never count as late: "
        + ("; ".join(deaths) if deaths else "no run did")
        + ".",
        "Described after the runs, not declared (so it decides nothing): breaking steps per 100-step window, "
        f"summed over the {s['src_n']} runs without any LayerNorm, this machine's, "
        + "; ".join(window)
        + f". {_cap(s['src_instead'])}.",
    )


def verdict_of_claim() -> verdict.Verdict:
    """The label of "... because small instabilities accumulate", both machines' (the claims row's)."""
    return source().v["ev"].verdict


__all__ = ["source", "source_evidence", "source_figure", "source_said", "source_table", "verdict_of_claim"]
