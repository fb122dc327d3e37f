"""Chapter 7's test at the source's depth, 80 blocks (``ch7`` re-exports it).

Round 2 (``ch7_deep_80_round2``) decides the claim: each recipe's 80-block stacks are read on their own, so
that a recipe whose deep stacks all learn refutes it; beside it, plain post-norm at 6 to 48 blocks shows where
the plateau begins. Round 1 (``ch7_deep_80``), which could only confirm or say nothing, is kept as history on the
evidence page. Here: the lesson's sentences, the evidence page's paragraphs, its table and the depth figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...evidence import store, verdict
from .. import plots
from ..lesson import Markdown, paragraphs
from ..notebook import Table, settings, table
from .ch7_training import DEEP80, DEEP80_R1, ev, label_md, runs

FAIL_GAP = 0.3  # nats under the unigram entropy: a run that ends closer (or diverges) failed (both rounds)


def _recipe(regime: str) -> str:
    """A recipe's short name: "plain post-norm", "ANDREA's recipe"."""
    return regime.split(":")[0].split(",")[0]


def _count(name: str, regime: str, blocks: int, field: str = "failed", machine: str = "native") -> tuple[int, int]:
    rs = store.pick(runs(name) if machine == "native" else _emulated(name), regime=regime, blocks=blocks)
    return sum(bool(store.statistic(r, field, FAIL_GAP)) for r in rs), len(rs)


def _emulated(name: str) -> list:
    from ...evidence import evaluation

    return evaluation.results(name, "emulated")


def _of(k_n: tuple[int, int]) -> str:
    return f"{k_n[0]} of {k_n[1]}"


def _seeds(name: str) -> tuple:
    return tuple(ev(name).role("decides")[0].decision.seeds)


def _span(seeds: tuple) -> str:
    return f"{min(seeds)}–{max(seeds)}"


def _shallow(f: Any, name: str = DEEP80) -> int:
    """The shallow stack that calibrates deciding comparison ``f`` (round 2) or that it is compared with
    (round 1)."""
    if f.decision.against is not None:
        return f.decision.against["blocks"]
    cal = next(c for c in ev(name).role("calibration") if c.decision.calibrates == f.decision.what)
    return cal.decision.arm["blocks"]


def d80_settings() -> dict:
    return settings(store.pick(runs(DEEP80), blocks=80)[0], "n_layer", "d_model", "steps")


def deep_rows() -> list[dict]:
    """Per recipe (round 2): 80-block failures on each machine, the shallow stack's, and the recipe's label."""
    e = ev(DEEP80)
    out = []
    for f in e.role("decides"):
        regime, shallow = f.decision.arm["regime"], _shallow(f)
        there = "not made yet" if e.missing_emulated else _of(_count(DEEP80, regime, 80, machine="emulated"))
        out.append(
            {
                "recipe": _recipe(regime),
                "80 blocks failed": _of(_count(DEEP80, regime, 80)),
                "on the second CPU": there,
                "shallow stack failed": f"{_of(_count(DEEP80, regime, shallow))} ({shallow} blocks)",
                "verdict": f.verdict.label,
            }
        )
    return out


def deep_table() -> Table:
    rows = deep_rows()
    return table(rows, list(rows[0]))


def _ok_regime() -> str:
    return next(f.decision.arm["regime"] for f in ev(DEEP80).role("decides") if "ANDREA" in f.decision.arm["regime"])


def _post_regime() -> str:
    return next(f.decision.arm["regime"] for f in ev(DEEP80).role("decides") if "post-norm" in f.decision.arm["regime"])


def deep_ok() -> tuple[int, int]:
    """(80-block stacks of ANDREA's recipe that learned, runs), this machine's runs of round 2."""
    return _count(DEEP80, _ok_regime(), 80, field="learned")


def _per_recipe() -> list[tuple[str, int, int, str, str]]:
    """(recipe, 80-block failures, runs, label, regime) per recipe of round 2, this machine's counts."""
    return [
        (
            _recipe(f.decision.arm["regime"]),
            *_count(DEEP80, f.decision.arm["regime"], 80),
            f.verdict.label,
            f.decision.arm["regime"],
        )
        for f in ev(DEEP80).role("decides")
    ]


def _said(name: str, k: int, n: int) -> str:
    return f"with {name} none of {n} failed" if k == 0 else f"{name} stacks failed in {k} of {n} runs"


def _how(regime: str) -> str:
    """How a recipe's 80-block runs failed (all on the plateau, some diverged) or how far they got (beside its
    shallow stack): the clause after its count in the lesson's sentence."""
    rs = store.pick(runs(DEEP80), regime=regime, blocks=80)
    failed = [r for r in rs if store.statistic(r, "failed", FAIL_GAP)]
    if failed:
        blew = sum(bool(r["diverged"]) for r in failed)
        return " (all on the plateau)" if blew == 0 else f" ({blew} of them diverged)"
    return f", ending as low as {_shallow_of(regime)}-block stacks"


def _shallow_of(regime: str) -> int:
    f = next(f for f in ev(DEEP80).role("decides") if f.decision.arm["regime"] == regime)
    return _shallow(f)


def _why(name: str, label: str) -> str:
    return {"confirmed": f"it holds for {name}", "not reproduced": f"not for {name}"}.get(
        label, f"for {name} it is {label}"
    )


def deep80_sentence() -> str:
    """The 80-block verdict in one plain sentence (MyST Markdown: the label links the glossary), from each
    recipe's failures and label; how the rule combines them is on the evidence page (``d80_why``)."""
    per = _per_recipe()
    return (
        f"At the source's depth of 80 blocks, {', but '.join(_said(r, k, n) + _how(g) for r, k, n, _, g in per)}, "
        f"so the claim that such a stack cannot converge (in {d80_settings()['steps']} steps) is "
        f"{label_md(ev(DEEP80).verdict.label)}: {', '.join(_why(r, lab) for r, _, _, lab, _ in per)}."
    )


def deep80_short() -> str:
    """The 80-block verdict for "What we found": the label and each recipe's failures, without the reasons."""
    per = _per_recipe()
    return (
        f"At the source's 80 blocks, the claim that a stack cannot converge is "
        f"{label_md(ev(DEEP80).verdict.label)}: {', but '.join(_said(r, k, n) for r, k, n, _, _ in per)}."
    )


# --- the plain post-norm depth sweep (described, not tested) ------------------------------------------
def sweep() -> dict[int, list[dict]]:
    """Plain post-norm runs of round 2 by depth (6, 12, 24, 48, 80 blocks), this machine's."""
    post = store.pick(runs(DEEP80), regime=_post_regime())
    return {n: store.pick(post, blocks=n) for n in sorted({r["blocks"] for r in post})}


def sweep_sentence() -> str:
    """Where plain post-norm stops learning, from the sweep's failure counts (the lesson's second sentence)."""
    by = {n: _count(DEEP80, _post_regime(), n) for n in sweep()}
    groups: list[tuple[tuple[int, int], list[int]]] = []  # runs of depths with the same count
    for n, kn in by.items():
        if groups and groups[-1][0] == kn:
            groups[-1][1].append(n)
        else:
            groups.append((kn, [n]))
    said = [
        f"{_of(kn)} at {ns[0]}" if len(ns) == 1 else f"{_of(kn)} at each of {', '.join(map(str, ns[:-1]))} and {ns[-1]}"
        for kn, ns in groups
    ]
    said[0] = said[0].replace(" at ", " runs failed at ", 1)
    counts = " blocks, ".join(said) + " blocks"
    fails = {n: 2 * k > m for n, (k, m) in by.items()}  # more than half of the runs failed
    first = next((n for n, f in fails.items() if f), None)
    if first is None or first == min(by) or not all(f == (n >= first) for n, f in fails.items()):
        return f"Plain post-norm on the same seeds: {counts}."
    return (  # the sweep is described, not tested: what the runs did, in this recipe and budget
        f"Plain post-norm already fails at {first} blocks: {counts}."
    )


def sweep_figure():
    """Each plain post-norm run's final distance under the unigram entropy against depth (one dot per seed),
    with the line under which a run counts as failed; ANDREA's 80-block runs beside them."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    by = sweep()
    for i, (n, rs) in enumerate(by.items()):
        gains = [store.statistic(r, "gain_over_unigram") for r in rs]
        ax.scatter(
            np.full(len(gains), i) + np.linspace(-0.12, 0.12, len(gains)),
            gains,
            color=plots.PALETTE[1],
            marker="o",
            s=22,
            label="plain post-norm" if i == 0 else None,
        )
    ok = [store.statistic(r, "gain_over_unigram") for r in store.pick(runs(DEEP80), regime=_ok_regime(), blocks=80)]
    at = list(by).index(80) + 0.35
    ax.scatter(
        np.full(len(ok), at) + np.linspace(-0.06, 0.06, len(ok)),
        ok,
        color=plots.PALETTE[0],
        marker="s",
        s=22,
        label="ANDREA's recipe",
    )
    ax.axhline(FAIL_GAP, color="#666", ls=":", lw=1.2, label=f"fails below {FAIL_GAP:g} nats")
    ax.axhline(0, color=plots.REFERENCE_GREY, lw=0.8)
    ax.set_xticks(range(len(by)), [str(n) for n in by])
    ax.set_xlabel("blocks")
    ax.set_ylabel("nats under the unigram entropy")
    ax.set_xlim(-0.5, len(by) - 0.3)
    ax.legend(fontsize=9, loc="center", bbox_to_anchor=(0.5, 0.55))
    from ...evidence import evaluation

    plots.provenance(fig, "cpu", None, evaluation.provenance(DEEP80))
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


# --- the evidence page -------------------------------------------------------------------------------
def deep80_procedure() -> Markdown:
    d, seeds = d80_settings(), _seeds(DEEP80)
    return paragraphs(
        f"The rescue rounds ran 24 blocks; the source's number is 80. Two further rounds, each written down before its "
        f"runs, train stacks of {d['n_layer']} blocks of width {d['d_model']} for {d['steps']} steps at a learning "
        "rate of 10⁻³ in two recipes: plain post-norm (Xavier's initialisation, no warmup) and ANDREA's (pre-norm, "
        "GPT-2's initialisation, a short warmup). A run **fails** if its loss stops being finite or ends less than "
        f"{FAIL_GAP:g} nats below the unigram entropy, where a model that ignores its context sits.",
        f"**Round 2** decides. On {len(seeds)} fresh seeds ({_span(seeds)}) it reads each recipe's 80-block stacks "
        "on their own: the claim predicts that more than half of them fail, and fewer than half failing refutes it "
        "for that recipe (an exact binomial test against one half, one-sided at 2.5 % each way, Holm's correction "
        f"over the two recipes: {len(seeds)} of {len(seeds)} failing confirms, {len(seeds)} of {len(seeds)} "
        "learning refutes, anything between is inconclusive). A recipe decides only if its shallow stack, one that "
        "trains in this budget (6 post-norm blocks; 2 of ANDREA's), learns in more than half of its runs by the "
        f"same test, which with {len(seeds)} seeds means in all {len(seeds)} (the calibration). Beside the verdict, "
        "each 80-block arm against its shallow stack (Fisher's exact test), and plain post-norm at 12, 24 and 48 "
        "blocks on the same seeds, described on this machine's runs and not tested.",
    )


def d80_words() -> str:
    rows = deep_rows()
    said = "; ".join(
        f"{r['recipe']}: 80 blocks failed in {r['80 blocks failed']} runs here and {r['on the second CPU']} on the "
        f"emulated second CPU, the shallow stack in {r['shallow stack failed']}"
        for r in rows
    )
    return said[:1].upper() + said[1:]


def d80_calib() -> str:
    labels = {c.verdict.label for c in ev(DEEP80).role("calibration")}
    return labels.pop() if len(labels) == 1 else " and ".join(sorted(labels))


def d80_why() -> str:
    """How the rule turned each recipe's reading into the claim's label (the mechanics the lesson leaves out)."""
    e = ev(DEEP80)
    per = "; ".join(f"{_recipe(f.decision.arm['regime'])} {f.verdict.label}" for f in e.role("decides"))
    labels = {f.verdict.label for f in e.role("decides")}
    said = (
        f"The rule asks for the claim with every recipe ({per}, after Holm's correction, the same on both machines"
        if not e.missing_emulated
        else f"The rule asks for the claim with every recipe ({per}, after Holm's correction, this machine's runs"
    ) + "). "
    if labels == {"confirmed", "not reproduced"}:
        said += (
            "One recipe confirming it and the other refuting it makes the claim qualified: at 80 blocks, whether "
            "training fails depends on the recipe, not on the depth alone. The recipes differ in three things "
            "(where the LayerNorm sits, the initialisation, the warmup); which of them matters is not tested."
        )
    return said


def d80_scope() -> str:
    post80 = store.pick(runs(DEEP80), blocks=80, regime=_post_regime())
    best_gain = max(  # furthest any 10-step mean got below the unigram entropy
        r["unigram_ce"] - np.convolve(r["loss"], np.ones(10) / 10, "valid").min() for r in post80
    )
    ok80 = sorted(store.pick(runs(DEEP80), blocks=80, regime=_ok_regime()), key=lambda r: r["seed"])
    ok2 = sorted(store.pick(runs(DEEP80), blocks=2, regime=_ok_regime()), key=lambda r: r["seed"])
    gap = verdict.interval([a["final_val_loss"] - b["final_val_loss"] for a, b in zip(ok80, ok2)])
    gains = [store.statistic(r, "gain_over_unigram") for r in ok80]
    return (
        f"No 80-block post-norm run got more than {best_gain:.2f} nats below the unigram entropy at any step of "
        f"{post80[0]['train']['steps']}, so within this budget the stack never left the plateau; whether a longer "
        f"run would is not tested. {_same_plateau()} ANDREA's 80-block stacks ended "
        f"{min(gains):.2f}–{max(gains):.2f} nats below the unigram entropy, about the same as 2 blocks: 80 blocks "
        f"minus 2, paired by seed, {gap.format('+.3f')} nats (a comparison not declared in advance)."
    )


def _same_plateau() -> str:
    """How close plain post-norm's deepest runs ended to one another, seed by seed: where they sit is the
    plateau, not something the 80th block adds."""
    by = sweep()
    deep = [n for n in by if n >= 24]
    finals = {n: {r["seed"]: r["final_val_loss"] for r in by[n]} for n in deep}
    spread = max(max(finals[n][s] for n in deep) - min(finals[n][s] for n in deep) for s in finals[deep[0]])
    head = ", ".join(map(str, deep[:-1]))
    said = f"Plain post-norm's {head} and {deep[-1]}-block runs ended within {spread:.3f} nats of each other per seed"
    return said + (": at these depths its failure does not depend on the depth." if spread < 0.01 else ".")


def deep_round1_words() -> str:
    """Round 1 (``ch7_deep_80``), kept as history: what it compared, what it found and why it could not refute."""
    e = ev(DEEP80_R1)
    seeds = _seeds(DEEP80_R1)
    parts = []
    for f in e.role("decides"):
        regime, shallow = f.decision.arm["regime"], _shallow(f, DEEP80_R1)
        parts.append(
            f"{_recipe(regime)} {_of(_count(DEEP80_R1, regime, 80))} at 80 blocks against "
            f"{_of(_count(DEEP80_R1, regime, shallow))} at {shallow}, {f.verdict.label}"
        )
    return (
        f"Round 1, on seeds {_span(seeds)}, counted each recipe's 80-block failures against its shallow stack's by "
        f"Fisher's exact test ({'; '.join(parts)}) and gave the claim the label {e.verdict.label}. With no failures on "
        "either side, that test can only say nothing, so it could not go against the claim even when every deep "
        "stack learned. Round 2 was declared after a review pointed this out; round 1 decides nothing now."
    )
