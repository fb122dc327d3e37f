"""Chapter 2's training experiments, read from the results store: what the three grids measured.

Three grids test the source's "without normalisation, small instabilities of training accumulate into NaN
gradients":

- ``ch2_norm_lr``: pre-norm against no normalisation at rising peak learning rates (``norm_lr``);
- ``ch2_final_ln``: the blocks' LayerNorms removed, the final one kept (``final_ln``);
- ``ch2_held_lr``: the rate held after the warmup, to see whether spikes add up or die out (``held_lr``).

Each function reads its grid once (cached) and returns a ``Reading``: the numbers and sentences the lesson
and the evidence page say (``.said``, formatted as the book prints them) and the values they are built
from. The computations are the chapter's own, moved here from its cells (issue 47) unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...evidence import evaluation, store, verdict
from ...training.train import TrainConfig, lr_at
from ..notebook import _plain, settings

WIRING = {
    "pre": "pre-norm",
    "final": "no LayerNorm in the blocks, final one kept",
    "none": "no LayerNorm at all",
}
MACHINES = ("native", "emulated")
WHERE = {"native": "here", "emulated": "on the second CPU"}


@dataclass
class Reading:
    """A grid's reading: ``said`` maps a name to the text the book prints; ``v`` holds the raw values."""

    said: dict[str, str] = field(default_factory=dict)
    v: dict[str, Any] = field(default_factory=dict)

    def put(self, name: str, value: Any, fmt: str | None = None) -> None:
        """Record ``value`` as the book prints it (``fmt`` as in ``glue``)."""
        value = _plain(value)
        self.said[name] = str(format(value, fmt) if fmt else value)


# ---------------------------------------------------------------------------------------------------------
# ch2_norm_lr: rising learning rates
# ---------------------------------------------------------------------------------------------------------
@functools.cache
def norm_lr() -> Reading:
    out = Reading()
    all_runs = evaluation.results("ch2_norm_lr")
    runs = evaluation.exploration("ch2_norm_lr")  # the exploration: seeds 0-2
    info = evaluation.info("ch2_norm_lr")
    lrs = sorted({r["lr"] for r in runs})
    ev = evaluation.evidence("ch2_norm_lr")
    s = settings(runs[0], "n_layer", "d_model", "steps", "warmup", "batch_size", "seq_len")
    for k, val in s.items():
        out.put(f"tr_{k}", val)
    out.put("tr_lrs", ", ".join(f"{lr:g}" for lr in lrs))
    out.put("tr_seeds", len({r["seed"] for r in runs}))

    def diverged(norm, lr):
        part = store.pick(runs, norm=norm, lr=lr)
        return sum(r["diverged"] for r in part), len(part)

    hi = lrs[-1]
    k_hi, n_hi = diverged("none", hi)
    steps_hi = sorted(r["diverged_at"] for r in store.pick(runs, norm="none", lr=hi) if r["diverged"])
    growth = [
        max(v for v in r["grad_norm"] if v is not None) / r["grad_norm"][0]
        for r in store.pick(runs, norm="none", lr=hi)
    ]
    out.put("div_hi", f"{k_hi} of {n_hi}")
    pre_runs = [r for r in runs if r["norm"] == "pre"]
    out.put("div_pre_all", f"{sum(r['diverged'] for r in pre_runs)} of the {len(pre_runs)}")
    out.put("div_steps", f"{steps_hi[0]}–{steps_hi[-1]}" if steps_hi else "none")
    out.put("warmup_end", runs[0]["train"]["warmup"])
    out.put("grad_growth", min(growth), ".0e")
    # the shape of the failure: the last step whose gradient norm was still below 10, and how many steps
    # later the run stopped
    runaway, div_lrs = [], []
    for r in store.pick(runs, norm="none", lr=hi):
        if r["diverged"]:
            g = r["grad_norm"]
            calm = max(i + 1 for i, v in enumerate(g) if v is not None and v < 10)
            runaway.append(r["diverged_at"] - calm)
            div_lrs.append(r["diverged_at"])
    warm = runs[0]["train"]["warmup"]
    in_warmup = sum(step <= warm for step in div_lrs)
    out.put("in_warmup", f"{in_warmup} of {len(div_lrs)}")
    out.put("runaway_steps", f"{min(runaway)}–{max(runaway)}" if runaway else "no")
    lr_at_div = [hi * min(1.0, step / warm) for step in div_lrs]
    out.put("runaway_lr", f"{min(lr_at_div):.2g}–{max(lr_at_div):.2g}" if lr_at_div else "none")
    lo = lrs[0]
    worse_lo = verdict.compare(
        store.paired(
            runs,
            "final_val_loss",
            {"norm": "pre", "lr": lo, "clip": 1.0},
            {"norm": "none", "lr": lo, "clip": 1.0},
        ),
        "positive",
        what=f"no norm minus pre-norm at lr {lo:g}",
    )
    out.put("worse_lo", worse_lo.reason)
    n_lo = sum(r["diverged"] for r in store.pick(runs, lr=lo))
    out.put(
        "lo_words",
        "both wirings stay finite, as predicted" if n_lo == 0 else f"{n_lo} runs diverged, against the prediction",
    )
    out.put(
        "lo_learns",
        {"confirmed": "learns less", "not reproduced": "learns more"}.get(worse_lo.label, "learns about as much"),
    )
    out.put("lo_lr", lo, "g")
    mid = lrs[1]
    logit_mid = max(m["max_logit"] for r in store.pick(runs, norm="none", lr=mid, clip=None) for m in r["monitor"])
    out.put("logit_mid", logit_mid, ".0f")
    out.put("mid_lr", mid, "g")
    mid_runs = store.pick(runs, lr=mid)
    n_mid = sum(r["diverged"] for r in mid_runs)
    out.put("mid_words", "nothing diverged" if n_mid == 0 else f"{n_mid} of {len(mid_runs)} runs diverged")

    # the verdict on fresh seeds
    def n_div(match, seeds):
        sel = [r for r in store.pick(all_runs, **match) if r["seed"] in seeds]
        return f"{sum(r['diverged'] for r in sel)} of {len(sel)}"

    div_said = [
        f"at lr {f.decision.arm['lr']:g}, {n_div(f.decision.arm, f.seeds)} runs without "
        f"normalisation and {n_div(f.decision.against, f.seeds)} pre-norm runs diverged "
        f"({f.verdict.label})"
        for f in ev.role("decides")
    ]
    cal = ev.role("calibration")[0]
    out.put(
        "div_words",
        (
            f"The calibration passed ({cal.measured} diverged)"
            if cal.verdict.label == "confirmed"
            else f"The calibration failed ({cal.measured} diverged)"
        )
        + "; "
        + "; ".join(div_said)
        + ".",
    )
    out.put("nan_verdict", ev.verdict.label)
    # the deciding rate's fresh seeds, for "What we found": the highest deciding rate's counts
    top = max(ev.role("decides"), key=lambda f: f.decision.arm["lr"])
    out.put("top_lr", top.decision.arm["lr"], "g")
    out.put("top_none", n_div(top.decision.arm, top.seeds))
    out.put("top_pre", n_div(top.decision.against, top.seeds))
    out.v.update(all_runs=all_runs, runs=runs, info=info, lrs=lrs, ev=ev, growth=growth, runaway=runaway, top=top)
    return out


# ---------------------------------------------------------------------------------------------------------
# ch2_final_ln: the blocks' LayerNorms removed, the final one kept
# ---------------------------------------------------------------------------------------------------------
@functools.cache
def final_ln() -> Reading:
    out = Reading()
    fl_runs = {machine: evaluation.results("ch2_final_ln", machine) for machine in MACHINES}

    def breaks(norm, lr, machine="native"):
        """The step and the learning rate at which each run broke."""
        part = store.pick(fl_runs[machine], norm=norm, lr=lr)
        got = []
        for r in part:
            if r["diverged"]:
                step = r["diverged_at"]  # its loss or gradient was inf/NaN
                got.append((step, lr_at(step - 1, TrainConfig(**r["train"]))))
        return sorted(got), len(part)

    def steps(b):
        return ", ".join(str(step) for step, _ in b) or "none"

    rows = []
    for lr in (2e-2, 3e-2):
        for norm, name in WIRING.items():
            b, n = breaks(norm, lr)
            b2, _ = breaks(norm, lr, "emulated")
            rows.append([f"{lr:g}", name, f"{len(b)} of {n}", steps(b), steps(b2)])
    fl = evaluation.evidence("ch2_final_ln")
    fl_warm = fl_runs["native"][0]["train"]["warmup"]
    out.put("fl_warm", fl_warm)

    def unnormed(lr, machine):
        return breaks("final", lr, machine)[0] + breaks("none", lr, machine)[0]

    low = [b for m in MACHINES for b in unnormed(2e-2, m)]
    n_unnormed = sum(breaks(norm, lr)[1] for norm in ("final", "none") for lr in (2e-2, 3e-2))
    after = {m: sum(step > fl_warm for step, _ in unnormed(2e-2, m)) for m in MACHINES}
    k_f2, n_f2 = len(breaks("final", 2e-2)[0]), breaks("final", 2e-2)[1]
    k_p2, n_p2 = len(breaks("pre", 2e-2)[0]), breaks("pre", 2e-2)[1]
    k_f3, n_f3 = len(breaks("final", 3e-2)[0]), breaks("final", 3e-2)[1]
    k_pre = len(breaks("pre", 2e-2)[0]) + len(breaks("pre", 3e-2)[0])
    k_all = sum(len(unnormed(lr, "native")) for lr in (2e-2, 3e-2))
    out.put("fl_cal", fl.role("calibration")[0].verdict.label)
    out.put("fl_broke", f"{k_all} of {n_unnormed}")
    out.put("fl_pre", "no pre-norm run did" if k_pre == 0 else f"{k_pre} pre-norm runs did")
    out.put("fl_low_steps", f"{min(s for s, _ in low)}–{max(s for s, _ in low)}")
    n_low = len(unnormed(2e-2, "native"))
    out.put("fl_after", f"{after['native']} of the lower peak's {n_low}")
    out.put("fl_verdict", fl.verdict.label)
    # When did the trouble start? The first step whose gradient norm passed 1,000, against the step of the
    # overflow.
    onset = []
    for m in MACHINES:
        for norm in ("final", "none"):
            for r in store.pick(fl_runs[m], norm=norm, lr=2e-2):
                g = r["grad_norm"]
                i = next(k for k, v in enumerate(g) if v is not None and v > 1e3)
                onset.append((i + 1, lr_at(i, TrainConfig(**r["train"]))))
    out.put("fl_onset", f"{min(s for s, _ in onset)}–{max(s for s, _ in onset)}")
    pre_max = max(
        v for m in MACHINES for r in store.pick(fl_runs[m], norm="pre") for v in r["grad_norm"] if v is not None
    )
    out.put("fl_pre_max", pre_max, ",.0f")
    rates = [r for _, r in onset]
    out.put("fl_onset_lr", f"{min(rates):.4f}–{max(rates):.4f}")
    n_final = sum(breaks("final", lr)[1] for lr in (2e-2, 3e-2))
    k_final = sum(len(breaks("final", lr)[0]) for lr in (2e-2, 3e-2))
    out.put(
        "fl_second",
        "it settles the second caveat: the final LayerNorm does not keep a stack finite; the blocks' LayerNorms do"
        if fl.verdict.label == "confirmed" and k_final == n_final
        else f"with the final LayerNorm kept {k_final} of {n_final} runs broke",
    )
    accumulates = verdict.not_testable(
        "the gradient norm passed 1,000 at steps "
        f"{min(s for s, _ in onset)}-{max(s for s, _ in onset)}, the overflow "
        f"came at steps {min(s for s, _ in low)}-{max(s for s, _ in low)}: "
        "the step of the overflow cannot tell an accumulation from a rate "
        "threshold followed by a runaway"
    )
    out.put("fl_acc", accumulates.label)
    out.put("fl_final_2", f"{k_f2} of {n_f2}")
    out.v.update(
        fl_runs=fl_runs, rows=rows, fl=fl, k_f2=k_f2, n_f2=n_f2, k_p2=k_p2, n_p2=n_p2, k_f3=k_f3, n_f3=n_f3,
        accumulates=accumulates,
    )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------------------
# ch2_held_lr: the rate held after the warmup
# ---------------------------------------------------------------------------------------------------------
def spikes(r: dict, after: int) -> int:
    """Steps after ``after`` whose training loss is 1 nat or more above the unigram entropy: the model lost,
    for a while, what it had learnt."""
    top = r["unigram_ce"] + 1
    return sum(1 for step, loss in zip(r["steps"], r["loss"]) if step > after and loss is not None and loss > top)


def stream_at(r: dict, step: int):
    """The residual stream's RMS at ``step`` (measured every 25 steps; None if the run had stopped before)."""
    return next((m["stream_rms"] for m in r["monitor"] if m["step"] == step), None)


def median_at(part: list[dict], step: int) -> str:
    v = [x for x in (stream_at(r, step) for r in part) if x is not None]
    if not v:
        return "(stopped before)"
    mid = float(np.median(v))
    return f"{mid:,.0f}" if mid >= 10 else f"{mid:.2g}"


SUPER = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def decade(x: float) -> str:
    """The power of ten at or below x, written 10ⁿ."""
    return "10" + str(int(np.floor(np.log10(x)))).translate(SUPER)


@functools.cache
def held_runs() -> dict[str, list[dict]]:
    return {machine: evaluation.results("ch2_held_lr", machine) for machine in MACHINES}


def held(norm: str, lr: float, machine: str = "native") -> list[dict]:
    return store.pick(held_runs()[machine], norm=norm, lr=lr)


@functools.cache
def held_lr() -> Reading:  # noqa: PLR0915 - the chapter's reading, one step after another
    out = Reading()
    all_runs = norm_lr().v["all_runs"]
    hl_warm = held_runs()["native"][0]["train"]["warmup"]

    def accumulated(r, machine="native"):
        """A break after twice the warmup, from a stream still tame at its end: an RMS within 10 times the
        pre-norm runs' median."""
        pre = [stream_at(p, hl_warm) for p in held("pre", 1e-2, machine)]
        return r["diverged"] and r["diverged_at"] > 2 * hl_warm and stream_at(r, hl_warm) <= 10 * float(np.median(pre))

    def broke_at(part):
        return ", ".join(str(r["diverged_at"]) for r in part if r["diverged"])

    rows = []
    for lr, norms in ((1e-2, ("pre", "final", "none")), (3e-2, ("pre", "none"))):
        for norm in norms:
            part = held(norm, lr)
            rows.append(
                dict(
                    lr=f"{lr:g}",
                    wiring=WIRING[norm],
                    steps=part[0]["train"]["steps"],
                    diverged=f"{sum(r['diverged'] for r in part)} of {len(part)}",
                    here=broke_at(part) or "none",
                    there=broke_at(held(norm, lr, "emulated")) or "none",
                    rms=median_at(part, hl_warm),
                    spikes=", ".join(str(spikes(r, hl_warm)) for r in part),
                )
            )
    hl = evaluation.evidence("ch2_held_lr")
    out.put("hl_warm", hl_warm)
    out.put("hl_late", 2 * hl_warm)
    out.put("hl_held_steps", held("final", 1e-2)[0]["train"]["steps"] - hl_warm)
    # The exploration's runs without normalisation at 1e-2, clipped: their spikes after the warmup, and the
    # rate when the last one came.
    last = []
    for r in store.pick(all_runs, norm="none", lr=1e-2, clip=1.0):
        top = r["unigram_ce"] + 1
        hits = [
            (step, loss)
            for step, loss in zip(r["steps"], r["loss"])
            if step > hl_warm and loss is not None and loss > top
        ]
        if hits:
            last.append((hits[-1][0], max(loss for _, loss in hits), r))
    out.put("hl_explore_max", max(peak for _, peak, _ in last), ",.0f")
    out.put("hl_explore_last", f"{min(s for s, _, _ in last)}–{max(s for s, _, _ in last)}")
    ratios = [lr_at(s - 1, TrainConfig(**r["train"])) / r["train"]["lr"] for s, _, r in last]
    out.put("hl_explore_lr", f"{max(ratios):.0%} to {min(ratios):.0%}")
    cals = hl.role("calibration")
    out.put(
        "hl_cal",
        "Both calibrations passed"
        if all(c.verdict.label == "confirmed" for c in cals)
        else "A calibration failed ("
        + "; ".join(c.decision.what + ": " + c.measured for c in cals if c.verdict.label != "confirmed")
        + ")",
    )
    n_held = len(held("final", 1e-2))

    def counted(norm):
        k = {m: sum(r["diverged"] for r in held(norm, 1e-2, m)) for m in MACHINES}
        if k["native"] == k["emulated"]:
            return f"{k['native']} of {n_held}"
        return f"{k['native']} of {n_held} ({k['emulated']} on a second CPU)"

    hl_held = held("final", 1e-2)[0]["train"]["steps"] - hl_warm
    out.put("hl_final", counted("final"))
    out.put("hl_pre", counted("pre"))
    out.put("hl_none", counted("none"))
    out.put("hl_verdict", hl.verdict.label)
    out.put(
        "hl_verdict_words",
        f"at a rate that pre-norm holds for {hl_held} steps, a stack whose only LayerNorm is the final one breaks"
        if hl.verdict.label == "confirmed"
        else "the final LayerNorm alone did not make runs break more often than pre-norm's",
    )
    final_runs = [r for m in MACHINES for r in held("final", 1e-2, m)]
    broken = [r for r in final_runs if r["diverged"]]
    steps_broken = [r["diverged_at"] for r in broken]
    out.put("hl_steps", f"{min(steps_broken)}–{max(steps_broken)}" if broken else "no step")
    # How far below the plateau the 10-step mean training loss got, at best
    window = 10
    gap = max(
        r["unigram_ce"] - np.convolve([v for v in r["loss"] if v is not None], np.ones(window) / window, "valid").min()
        for r in final_runs
    )
    out.put("hl_gap", gap, ".2f")
    most = max(spikes(r, hl_warm) for r in final_runs)
    out.put(
        "hl_final_spiked",
        "their loss never spiked"
        if most == 0
        else f"their loss hardly spiked (at most {most} spiking step{'s' * (most > 1)} in a run, on either machine)",
    )

    def rms_at_warm(norm):
        v = [stream_at(r, hl_warm) for m in MACHINES for r in held(norm, 1e-2, m)]
        return [x for x in v if x is not None]

    def median_rms(norm, machine):
        return median_at(held(norm, 1e-2, machine), hl_warm)

    big = sum(x > 1e3 for x in rms_at_warm("final"))
    out.put(
        "hl_s50",
        f"{median_rms('final', 'native')} (the median, as in the table; "
        f"{median_rms('final', 'emulated')} on a second CPU; {big} of the "
        f"{len(rms_at_warm('final'))} runs were above 1,000)",
    )
    out.put("hl_s50_pre", median_rms("pre", "native"))
    # how many times pre-norm's the stream was at the warmup's end (the medians, this machine's runs)
    ratio = float(np.median([x for x in (stream_at(r, hl_warm) for r in held("final", 1e-2)) if x is not None]))
    ratio /= float(np.median([x for x in (stream_at(r, hl_warm) for r in held("pre", 1e-2)) if x is not None]))
    out.put("hl_times_pre", ratio, ",.0f")
    # how far the stream went before the overflow, against pre-norm's largest
    peaks = [max(m["stream_rms"] for m in r["monitor"]) for r in final_runs]
    pre_top = max(m["stream_rms"] for mach in MACHINES for r in held("pre", 1e-2, mach) for m in r["monitor"])
    out.put(
        "hl_growth",
        f"before the overflow it passed {decade(min(peaks))} in every run "
        f"and {decade(max(peaks))} in one, where pre-norm's never passed "
        f"{pre_top:.0f} in "
        f"{held('pre', 1e-2)[0]['train']['steps']:,} steps",
    )
    # The declared reading, on each machine: the runs whose break counts as an accumulation, against the
    # pre-norm runs' (Fisher's exact test, as the rule)
    readings = {}
    for m in MACHINES:
        k_acc = sum(accumulated(r, m) for r in held("final", 1e-2, m))
        k_ref = sum(accumulated(r, m) for r in held("pre", 1e-2, m))
        readings[m] = (
            k_acc,
            verdict.counts(
                k_acc,
                n_held,
                k_ref,
                len(held("pre", 1e-2, m)),
                what="breaks that count as an accumulation",
                names=("no LayerNorm in the blocks", "pre-norm"),
            ),
        )
    accumulates = verdict.agree(readings["native"][1], readings["emulated"][1])
    k_here, k_there = readings["native"][0], readings["emulated"][0]
    hl_acc_said = f"{k_here} of {n_held}" + (f" ({k_there} on a second CPU)" if k_there != k_here else "")
    out.put(
        "hl_acc_count",
        f"On this machine {k_here} of the {n_held} breaks counted"
        + (f" ({k_there} on a second CPU)" if k_there != k_here else ""),
    )

    def why_not(r, machine):
        """Which line of the declared reading a run's break did not cross."""
        if not r["diverged"]:
            return "did not break"
        if r["diverged_at"] <= 2 * hl_warm:
            return f"broke at step {r['diverged_at']}"
        pre = [stream_at(p, hl_warm) for p in held("pre", 1e-2, machine)]
        return (
            f"had a stream RMS of {stream_at(r, hl_warm):.0f} at step {hl_warm} "
            f"(the line: {10 * float(np.median(pre)):.0f})"
        )

    parted = []
    for r_here in held("final", 1e-2):
        seed = r_here["seed"]
        r_there = store.pick(held("final", 1e-2, "emulated"), seed=seed)[0]
        runs_of = {"native": r_here, "emulated": r_there}
        if accumulated(r_here) != accumulated(r_there, "emulated"):
            m = "emulated" if accumulated(r_here) else "native"
            parted.append(f"seed {seed} {why_not(runs_of[m], m)} {WHERE[m]}")
    out.put(
        "hl_acc_split",
        f"The machines differ on {len(parted)} run{'s' * (len(parted) > 1)}: " + "; ".join(parted) + "."
        if parted
        else "",
    )
    out.put(
        "hl_acc_words",
        {
            "confirmed": "a difference beyond chance, as the source predicts",
            "not reproduced": "the opposite of the prediction",
        }.get(
            readings["native"][1].label if accumulates.label == verdict.MACHINE else accumulates.label,
            "a split that Fisher's test cannot tell from chance",
        ),
    )
    out.put("hl_acc", accumulates.label)
    # The runs without any LayerNorm: when their spikes came, and how a late break began (the largest
    # gradient norm over the 30 steps before it)
    none_both = [r for m in MACHINES for r in held("none", 1e-2, m)]
    spike_steps = [
        step
        for r in none_both
        for step, loss in zip(r["steps"], r["loss"])
        if step > hl_warm and loss is not None and loss > r["unigram_ce"] + 1
    ]
    out.put("hl_none_spiked", f"{sum(spikes(r, hl_warm) > 0 for r in none_both)} of {len(none_both)}")
    out.put("hl_none_early", f"{sum(s <= 300 for s in spike_steps)} of their {len(spike_steps)}")
    out.put("hl_none_finite", f"{sum(not r['diverged'] for r in none_both)} of {len(none_both)}")

    def broke_late(machine):
        """Each late break: the step its loss first leapt (1 nat above the unigram entropy) for good, and the
        largest gradient norm over the 30 steps before that leap."""
        said = []
        for r in held("none", 1e-2, machine):
            b = r["diverged_at"]
            if not (r["diverged"] and b > 2 * hl_warm):
                continue
            top = r["unigram_ce"] + 1
            k = b - 1  # index of the break step; walk back while spiking
            while k > 0 and (r["loss"][k - 1] is None or r["loss"][k - 1] > top):
                k -= 1
            before = [g for g in r["grad_norm"][k - 30 : k] if g is not None]
            said.append(
                f"at step {b} {WHERE[machine]}: the loss leapt from "
                f"{r['loss'][k - 1]:.1f} to {r['loss'][k]:,.0f} nats in one step "
                f"(step {r['steps'][k]}), out of a quiet stretch (gradient norm "
                f"at most {max(before):.1f} over the 30 steps before), and never "
                "came back"
            )
        return said

    early = sum(s <= 300 for s in spike_steps)
    died_out = early >= 0.75 * len(spike_steps)
    finite = sum(not r["diverged"] for r in none_both)
    out.put(
        "hl_none_lead",
        "The runs without any LayerNorm do not show an accumulation either"
        if died_out and finite >= 0.8 * len(none_both)
        else "The runs without any LayerNorm are less clear",
    )
    out.put(
        "hl_none_after",
        "and then the spikes died out with the rate unchanged" if died_out else "and the spikes went on after it",
    )
    # What the final-kept runs show instead, if the data say so: a stream that grew tenfold or more within 25
    # steps, while the loss barely spiked
    runaway = min(peaks) >= 100 * pre_top and most <= 1
    out.put(
        "hl_mechanism",
        "What broke these runs was not a pile-up of small instabilities but the "
        "scale of the stream running away from the warmup on, out of the loss's "
        "sight."
        if runaway
        else "",
    )
    late = broke_late("native") + broke_late("emulated")
    out.put(
        "hl_none_late",
        "No run broke late" if not late else f"The late break{'s' * (len(late) > 1)} came " + "; ".join(late),
    )
    out.v.update(
        hl=hl, hl_warm=hl_warm, hl_held=hl_held, rows=rows, accumulates=accumulates, hl_acc_said=hl_acc_said,
        counted={norm: counted(norm) for norm in WIRING}, runaway=runaway, died_out=died_out,
    )  # fmt: skip
    return out
