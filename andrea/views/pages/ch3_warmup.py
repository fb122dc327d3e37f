"""Chapter 3's evidence page, second half: the declared warmup tests (both rounds, both machines, Holm's
correction), the pre-norm controls, the training panel's check, and each grid's evidence (``fold``), computed from
``ch3_runs``.

Every function returns something the page displays: ``paragraphs`` (MyST Markdown), a ``table``, a figure
or a grid's evidence.
"""

from __future__ import annotations

import re

from ...evidence import evaluation, verdict
from ..lesson import GridEvidence, Markdown, paragraphs
from ..notebook import Table, machines_said, table
from .ch3_evidence import label_term
from .ch3_runs import exploration, holm_family, pre_overall, round1, round2, round3

__all__ = [
    "fold",
    "warmup_rounds",
    "holm_words",
    "round1_rule",
    "round1_figure",
    "round1_outcome",
    "round2_why",
    "round2_table",
    "round2_figure",
    "round2_outcome",
    "pre_warmup_evidence",
    "round3_figure",
    "panel_words",
]


# --- a grid's evidence, with Holm's family as the code counts it -----------------------------------------------
_HOLM = re.compile(r"with Holm's correction across the \d+ deciding regimes?")


def holm_words(ev) -> str:
    """The clause naming the regimes Holm's correction was applied across: the deciding regimes whose
    calibration passed (``evidence.rule.evaluate``), counted on each machine's runs."""
    declared = len(ev.role("decides"))
    family = holm_family(ev)
    counts = set(family.values())
    if counts == {declared}:
        return f"with Holm's correction across the {declared} deciding regime" + ("s" if declared != 1 else "")
    if len(counts) == 1:
        n = counts.pop()
        return (
            f"with Holm's correction across the {n} deciding regime{'s' if n != 1 else ''} whose calibration passed "
            f"(of the {declared} declared)"
        )
    each = ", ".join(f"{n} on {machine}'s runs" for machine, n in family.items())
    return f"with Holm's correction across the deciding regimes whose calibration passed ({each}, of {declared})"


class Fold(GridEvidence):
    """A grid's evidence (open), whose rule names the number of regimes Holm's correction really spans."""

    def rule(self) -> str:
        text = super().rule()
        if not _HOLM.search(text):
            raise ValueError(f"grid {self.ev.name}: the rule's text no longer names Holm's family: {text!r}")
        return _HOLM.sub(holm_words(self.ev), text, count=1)


def fold(name: str) -> Fold:
    """The declared rule, calibrations, controls, both machines' readings and Holm for stored grid ``name``."""
    return Fold(evaluation.evidence(name))


# --- the two rounds, the deciding one first ---------------------------------------------------------------------
def warmup_rounds() -> Markdown:
    """The warmup section's opening: which round decides the claim (its label is the claims table's) and why
    the other one is still shown."""
    r1, r2 = round1(), round2()
    r1_steps = sorted({r["train"]["steps"] for rs in r1.warmed().values() for r in rs})
    return paragraphs(
        'The claim "post-norm trains poorly without warmup" was tested twice, each time by a rule written down '
        "before its runs and decided on seeds the exploration never used. Round 2, with budgets up to "
        f"{max(r2.budgets):,} steps, decides it: the claims table's label, {label_term(r2.ev.verdict.label)}, is "
        f"round 2's, and its evidence comes first below. Round 1 ({' and '.join(map(str, r1_steps))} steps only) "
        f"came out {label_term(r1.ev.verdict.label)} and raised a question about its own budget, which round 2 "
        "answers; it follows, as it came out."
    )


# --- round 1 ---------------------------------------------------------------------------------------------------
def round1_rule() -> Markdown:
    r1 = round1()
    return paragraphs(
        "The exploration suggested where warmup could matter: post-norm with Xavier's initialisation at peak "
        "learning rates 10⁻³ and 2·10⁻³. The rule for the verdict was then written down before any further run: "
        f"{len(r1.fresh)} fresh seeds at each of those two rates, with no warmup and with {r1.warmup} warmup "
        "steps. The claim counts as confirmed if warmup lowers post-norm's final loss at one of the two rates at "
        "least, and at neither raises it, corrected for testing two rates (Holm). The calibration, at 2·10⁻³: "
        "pre-norm must end clearly below post-norm without warmup. It shows that five seeds can resolve a "
        "difference in final loss of the size of a plateau escape; it is not a test that warmup can help. The "
        "control: pre-norm with and without warmup within ±0.05 nats.",
        "Two choices were made after seeing the exploration. The two rates are the ones where the exploration "
        f"showed an effect, and the warmup is longer than the exploration's {exploration().warmup} steps, which "
        "had not helped at 2·10⁻³. A quarter of the run is about five times the memory of AdamW's second-moment "
        "average at β₂ = 0.95, which is the usual reason given for warmup.",
    )


def round1_figure():
    from .. import plots

    return plots.loss_bands_figure(
        round1().figure_runs(),
        facet="panel",
        color="arm",
        labels=lambda k, v: str(v),
        hline=(round1().all_runs[0]["unigram_ce"], "unigram entropy"),
        source=evaluation.provenance("ch3_warmup"),
        panel_width=6.4,
        ncols=1,
        palette=plots.WARMUP_COLOURS,  # pre-norm blue, post-norm orange, as in the lesson's figures
    )


def _warm_said(f) -> str:
    ci, lr = f.verdict.interval, f.decision.arm["lr"]
    if f.verdict.label == "confirmed":
        return f"At lr {lr:g}, warmup lowered post-norm's final loss by {ci.mean:.2f} nats."
    if f.verdict.label == "not reproduced":
        return f"At lr {lr:g}, warmup raised it by {-ci.mean:.2f} nats."
    if f.verdict.label == "not testable":
        return f"At lr {lr:g} the calibration failed, so it decides nothing."
    power = (
        f" With {ci.n} seeds this test confirms a true gain four times in five only from about "
        f"{f.detectable:.2f} nats up (its power)."
        if f.detectable is not None
        else ""
    )
    if f.lost_to_holm:
        return (
            f"At lr {lr:g}, warmup lowered it by {ci.mean:.2f} nats on average, decisive on its own but not once "
            "corrected for testing two rates." + power
        )
    if ci.mean > 0:
        return (
            f"At lr {lr:g}, warmup lowered it by {ci.mean:.2f} nats on average, but its {ci.n} seeds disagree too "
            f"much to call it: the mean could lie anywhere from {ci.lo:+.2f} to {ci.hi:+.2f} nats." + power
        )
    return f"At lr {lr:g}, the difference ({ci.mean:+.2f} nats) is within the seeds' noise." + power


def _budget_said(lr, rs) -> str:
    from ...evidence import store

    dipped = sum(store.statistic(r, "escaped") for r in rs)
    ended = sum(r["final_val_loss"] < r["unigram_ce"] - 0.1 for r in rs)
    if dipped == 0:
        stayed = "so none ended below it"
    elif ended == dipped:
        stayed = "and all of them ended the run below it"
    else:
        stayed = f"but only {ended} ended the run below it"
    lo = min(r["final_val_loss"] for r in rs)
    hi = max(r["final_val_loss"] for r in rs)
    return (
        f"At lr {lr:g}, {dipped} of {len(rs)} warmed post-norm runs dipped 0.1 nats below the plateau at some step "
        f"of {rs[0]['train']['steps']}, {stayed} (the five final validation losses: {lo:.2f} to {hi:.2f} nats)."
    )


def round1_outcome() -> Markdown:
    r1 = round1()
    cal = r1.calibration
    calib = (
        f"Pre-norm ended {cal.verdict.interval.mean:.2f} nats below post-norm without warmup, so the design can "
        "see a difference."
        if cal.verdict.label == "confirmed"
        else "The calibration failed: pre-norm did not end clearly below post-norm."
    )
    pre = {
        "confirmed": "within 0.05 nats with and without warmup",
        "not reproduced": "not the same with and without warmup",
    }.get(r1.control.verdict.label, "too uncertain to call the same")
    return paragraphs(
        f"**Outcome.** {calib} {' '.join(_warm_said(f) for f in r1.ev.role('decides'))} Verdict of this round "
        f'on "post-norm needs warmup": **{r1.ev.verdict.label}**. Pre-norm ended {pre}.',
        "The budget is part of this result. "
        + " ".join(_budget_said(lr, rs) for lr, rs in r1.warmed().items())
        + " A run that leaves the plateau and then stalls, or leaves it with few steps left before the cosine "
        "schedule ends, shows little of what warmup does, so a short budget can hide an effect. That is the "
        "question round 2, above, answers.",
    )


# --- round 2 ---------------------------------------------------------------------------------------------------
def round2_why() -> Markdown:
    r2 = round2()
    return paragraphs(
        "Running a second round after seeing the first is how one fools oneself, if the second round replaces "
        "the first until the answer pleases. Here round 1 (400 steps, below) stays as it came out, and round 2 "
        "answers a different question that round 1 raised about its own test, not about its answer: was the "
        "budget long enough for warmup to show? Round 2's rule and seeds were fixed before its runs. It also "
        "repeats round 1's 400-step setting on new seeds; by itself such a repeat could be a second draw that "
        "happened to pass, so what carries round 2's answer is the setting round 1 never tried, a budget four "
        "times longer.",
        f"Round 2 trains for {' and '.join(str(b) for b in r2.budgets)} steps, with the warmup {r2.share:.0%} of "
        f"each schedule (round 1's proportion), on {len(r2.seeds)} new seeds. Its calibration asks that every "
        "warmed-up post-norm run *end* clear of the plateau: a final validation loss at least 0.1 nats under it, "
        "the distance that counts as leaving it. Where that fails, the budget is too short for the test, and the "
        "setting decides nothing. Beside the loss it counts how many runs end below the plateau with and without "
        "warmup ({term}`Fisher's exact test`). It also repeats the pre-norm control at GPT-2's initialisation and "
        "lr 3·10⁻³, where the exploration showed pre-norm's largest warmup effect.",
    )


def round2_table() -> Table:
    r2 = round2()
    rows = []
    for f in r2.deciding():
        a = f.decision.arm
        cold, warm = r2.cold(f), r2.warm(f)
        rows.append(
            {
                "steps": a["budget"],
                "peak lr": f"{a['lr']:g}",
                "ended below the plateau, with warmup": f"{r2.ended_below(warm)} of {len(warm)}",
                "without warmup": f"{r2.ended_below(cold)} of {len(cold)}",
                "loss without minus with warmup": f"{f.verdict.interval.mean:+.2f} nats",
                "label": f.verdict.label,
            }
        )
    return table(rows, list(rows[0]))


def _round_figure(rows: list, grid: str, palette=None):
    """A round's training-loss curves, one panel per ``panel`` label, one colour per ``arm``, against the plateau."""
    from .. import plots

    return plots.loss_bands_figure(
        rows,
        facet="panel",
        color="arm",
        labels=lambda k, v: str(v),
        hline=(rows[0]["unigram_ce"], "unigram entropy"),
        source=evaluation.provenance(grid),
        ncols=2,
        palette=palette,
    )


def round2_figure():
    from .. import plots

    return _round_figure(round2().post_figure_runs(), "ch3_warmup_round2", plots.WARMUP_COLOURS)


def round2_outcome() -> Markdown:
    r2 = round2()
    per_budget = []
    for steps in r2.budgets:
        counts = [
            f"{r2.ended_below(r2.warm(f))} of {len(r2.warm(f))} at lr {f.decision.arm['lr']:g}"
            for f in r2.deciding()
            if f.decision.arm["budget"] == steps
        ]
        per_budget.append(f"after {steps} steps, " + " and ".join(counts))
    untestable = r2.untestable()
    cal = (
        "Warmed runs that ended below the plateau: "
        + "; ".join(per_budget)
        + "."
        + (
            " Where not every one did ("
            + ", ".join(f"lr {f.decision.arm['lr']:g} after {f.decision.arm['budget']} steps" for f in untestable)
            + "), the calibration failed and the setting decides nothing."
            if untestable
            else ""
        )
    )
    big = r2.biggest()
    cold, warm = r2.cold(big), r2.warm(big)
    clearest = (
        f"The clearest case is lr {big.decision.arm['lr']:g} after {big.decision.arm['budget']} steps: without "
        f"warmup, post-norm ended {big.verdict.interval.mean:.2f} nats above the warmed runs, and "
        f"{r2.ended_below(warm)} of {len(warm)} warmed runs ended below the plateau against {r2.ended_below(cold)} "
        f"of {len(cold)} without warmup."
    )
    by_lr: dict = {}
    for f in r2.deciding():
        by_lr.setdefault(f.decision.arm["lr"], []).append(f)
    budgets = " ".join(
        f"At lr {lr:g}, warmup's gain was "
        + " and ".join(f"{f.verdict.interval.mean:+.2f} nats after {f.decision.arm['budget']} steps" for f in fs)
        + "."
        for lr, fs in by_lr.items()
    )
    family = holm_family(r2.ev)
    n_machine = r2.n_machine()
    machines = (
        "These runs were made on this machine only; their copies on the emulated second CPU "
        f"({r2.ev.missing_emulated} runs) have not been trained yet, so the labels are this machine's."
        if r2.ev.missing_emulated
        else "Both machines give these labels"
        + (
            f", except in {n_machine} comparison{'s' * (n_machine > 1)} of the evidence below, which shows both "
            "readings."
            if n_machine
            else "."
        )
    )
    return paragraphs(
        f'**Outcome of round 2.** {cal} {clearest} Verdict on "post-norm needs warmup", from round 2: '
        f"**{r2.ev.verdict.label}**, {holm_words(r2.ev)}. {budgets} So the short budget hid the effect "
        "where post-norm stalls on the plateau, not everywhere.",
        "Warmup does not win here by lowering the average learning rate: over a whole cosine schedule, a warmup "
        f"of a quarter of the steps lowers the mean rate by {r2.mean_lr_cut():.0%}. What is specific to post-norm "
        "is the failure without warmup at the higher rate, where runs stay on the plateau. This round does not "
        f"compare the two wirings in matched settings. {machines}",
        "In the evidence below, the Detectable column of a deciding regime is computed at the level Holm's "
        f"correction would ask across all {len(r2.deciding())} declared regimes"
        + (
            f", a little stricter than the {' or '.join(str(n) for n in sorted(set(family.values())))} it was "
            "applied across"
            if set(family.values()) != {len(r2.deciding())}
            else ""
        )
        + ". The claims table reports round 2's label; round 1's "
        f"({round1().ev.verdict.label}) stays beside it in the row's reasons.",
    )


# --- pre-norm without warmup -------------------------------------------------------------------------------------
def _pre_said(f) -> str:
    def words(v):
        return {"confirmed": "the same within ±0.05 nats", "not reproduced": "a clear gain"}.get(
            v.label, "too uncertain to call"
        )

    v, steps = f.verdict, f.decision.arm["budget"]
    said = words(v)
    if v.label == verdict.MACHINE:
        said = f"{words(f.native)} on this machine, {words(f.emulated.verdict)} on the emulated second CPU"
    return f"{v.interval.mean:+.2f} nats after {steps} steps ({said})"


def _init_name(f) -> str:
    return {"gpt2": "GPT-2's", "xavier": "Xavier's"}.get(f.decision.arm["init"], f.decision.arm["init"])


def pre_warmup_evidence() -> Markdown:
    """Round 3, which decides the pre-norm claim and the contrast; what its curves and its schedule add; then
    rounds 1-2's pre-norm controls, as they came out."""
    r1, r3 = round1(), round3()
    agreed, here, there = pre_overall()
    pre, post, both = r3.gain_pre, r3.gain_post, r3.interaction
    init = "GPT-2's" if r3.init == "gpt2" else "Xavier's"
    gains = r3.gain_by_step("pre")
    ahead = [k for k, g in gains.items() if g < 0]
    late = (
        f"Pre-norm's gain came late: without warmup it was ahead until step {max(ahead):,} (by "
        f"{-gains[min(ahead)]:.2f} nats at step {min(ahead):,}), and the gain built up after that, to "
        f"{gains[max(gains)]:.2f} nats at step {max(gains):,}. "
        if ahead
        else ""
    )
    ctl, pre2 = r1.control, round2().pre_controls()
    return paragraphs(
        "The source implies that pre-norm does not need the warmup post-norm needs. Round 3 tests that in matched "
        f"settings: both wirings at {init} initialisation, a peak learning rate of {r3.lr:g} and {r3.steps:,} "
        f"steps, with no warmup and with {r3.warmup} steps of it, on {len(r3.seeds)} fresh seeds, under the rule "
        "below, written before its runs. Two one-sided tests decide, and each can come out either way: "
        "pre-norm's gain from warmup (its final loss without warmup minus with it) is above zero, or below; and "
        "post-norm's gain minus pre-norm's, paired by seed, is above zero, or below. The rule counts a gain for "
        "pre-norm against the claim.",
        f"**Outcome.** Post-norm's own gain from warmup, the calibration, is {post.verdict.interval} nats "
        f"({machines_said(post)}). Pre-norm's gain is {pre.verdict.interval} nats ({machines_said(pre)}), and "
        f"the difference between the two gains is {both.verdict.interval} nats ({machines_said(both)}). "
        f'So "pre-norm needs no warmup", the opposite of the first test, is {label_term(agreed.label)}'
        + (
            f" ({here.label} on this machine's runs, {there.label} on the emulated second CPU's)"
            if agreed.label == verdict.MACHINE and there is not None
            else ""
        )
        + f', and "post-norm needs warmup more than pre-norm" is {label_term(both.verdict.label)}, at this setting.',
        late + "A warmup also shortens the cosine decay that follows it: from the end of the warmup on, the warmed "
        f"run's learning rate is up to {r3.lr_ratio_after_warmup():.1f} times the other's, so part of pre-norm's "
        "gain may come from that later, higher rate rather than from small first steps; this round does not "
        "separate the two.",
        f"Rounds 1 and 2 each carried a pre-norm control: its final loss the same with and without warmup, within "
        f"±0.05 nats (an equivalence test, five seeds). In round 1 (Xavier init, lr {ctl.decision.arm['lr']:g}, "
        f"400 steps) it was {ctl.verdict.label}: warmup's effect on pre-norm was {ctl.verdict.interval} nats. At "
        f"400 steps round 1 did not settle whether post-norm needs warmup either (it came out "
        f"{r1.ev.verdict.label}), so it says nothing on the contrast. In round 2, at {_init_name(pre2[0])} "
        f"initialisation and lr {pre2[0].decision.arm['lr']:g}, {', and '.join(_pre_said(f) for f in pre2)}: "
        f"its intervals reached {_half_widths()} nats on each side of their mean, too wide for the equivalence "
        "test to pass at five seeds whatever the truth. Neither round ran the two wirings side by side, which "
        "is why round 3, declared for this claim, decides it.",
    )


def _half_widths() -> str:
    """The range of round 2's pre-norm controls' 95 % interval half-widths (both machines)."""
    found = round2().pre_controls()
    verdicts = [v for f in found for v in (f.native or f.verdict, f.emulated.verdict if f.emulated else None) if v]
    half = sorted((v.interval.hi - v.interval.lo) / 2 for v in verdicts if v.interval is not None)
    return f"{half[0]:.2f} to {half[-1]:.2f}"


def round3_figure():
    return _round_figure(round3().figure_runs(), "ch3_warmup_round3")


# --- the training panel ------------------------------------------------------------------------------------------
def panel_words() -> Markdown:
    ev = evaluation.evidence("ch3_panel")
    return paragraphs(
        "The lesson's \"train it yourself\" panel trains round 2's model at lr 10⁻³ for 400 steps on smaller "
        "batches (8 sequences of 32 bytes) in the reader's browser. Whether torch shows the effect the lesson "
        "reads from it at these defaults was declared and tested on five fresh seeds (grid `ch3_panel`): "
        f"**{ev.verdict.label}** ({ev.verdict.reason})."
    )
