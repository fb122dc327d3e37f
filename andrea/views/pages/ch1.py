"""Chapter 1, residual connections: the words, the claims and the evidence the chapter states.

``book/01_residual.md`` (the lesson) computes its measurements in cells a reader can re-run and passes them
here for the claims table; ``book/evidence/01_residual_evidence.md`` (the evidence page) calls the same
functions with no arguments, and they recompute the same measurements (same seeds, same batch). The
stored training grid's sentences and tables live in ``ch1_training``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from ...evidence import verdict
from ...measure import analysis
from ...measure.probe import gradient_flow, random_batch
from ...model.config import ANDREA_120M
from .. import explorer as E
from ..lesson import Markdown, lesson_claims
from ..lesson import evidence_claims as _evidence_claims
from ..notebook import Claim, glue, table
from . import ch1_training as training

CHAPTER = "01_residual"
SEEDS = (0, 1, 2)  # the fresh-model measurements' seeds (weights and batch)
DEPTHS = (1, 2, 4, 8, 12, 24, 48, 96)  # the gradient sweep's depths
WIDTH = 64  # the gradient sweep's width
# The gradient sweep's arms: the residual path, and two controls for the defaults that shrink a gradient
# for reasons of their own (LayerNorm's epsilon, GPT-2's depth-scaled initialisation).
ARMS: dict[str, dict[str, Any]] = {
    "with residual": {},
    "without residual": {"residual": False},
    "without, ε = 1e-12": {"residual": False, "ln_eps": 1e-12},
    "without, no depth scaling": {"residual": False, "init": "normal"},
}
LOST = 0.01  # "lost": a gradient ratio (embeddings / top) below 1 %
# The explorer's sensitivity without the residual path (the note under the explorer, lab 1's question 5).
EXPLORER_DEPTH = 48
EXPLORER_WIDTHS = (64, 128, 256)
EXPLORER_WIDTH = EXPLORER_WIDTHS[0]  # the width the lesson's explorer opens at
EXPLORER_SEEDS = (0, 1, 2, 3, 4)
EXPLORER_LOOK = (  # the chapter's explorer: what to look at
    "how far the gradient falls from the last block to the first without the residual path, and what "
    "switching the path on does to it."
)


# ---------------------------------------------------------------------------------------------
# The measurements (the lesson's cells make the same ones; the evidence page recomputes them here)
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def text_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sequences of 128 BPE tokens of Python's documentation: the chapter's real-text batch."""
    from ...training.data import get_tokenizer, python_docs_corpus

    return analysis.text_batch(get_tokenizer("bpe"), python_docs_corpus()[:20_000], batch=2, seq=128)


def sweep_config(arm: str, depth: int = 1):
    return replace(analysis.small(d_model=WIDTH, n_layer=depth, context_length=32), **ARMS[arm])


@lru_cache(maxsize=1)
def depth_sweep() -> tuple[dict, ...]:
    """``analysis.gradient_vs_depth`` for every arm: one row per (arm, depth, seed)."""
    rows: list[dict] = []
    for arm in ARMS:
        rows += [dict(r, arm=arm) for r in analysis.gradient_vs_depth(list(DEPTHS), sweep_config(arm), SEEDS)]
    return tuple(rows)


@lru_cache(maxsize=1)
def by_hand_difference() -> float:
    """max |the two lines by hand - block 1| on the real-text batch (ANDREA-120M, seed 0)."""
    idx, _ = text_batch()
    model = analysis.fresh_model(ANDREA_120M, seed=0)
    block = analysis.blocks(model)[0]
    with torch.no_grad():
        x = model.embed(idx)
        y = x + block.attn(block.ln_1(x))
        y = y + block.mlp(block.ln_2(y))
        return float((y - block(x)).abs().max())


@lru_cache(maxsize=1)
def block_moves() -> np.ndarray:
    """(seeds, 12): how far each block of fresh ANDREA-120Ms moves the stream it receives."""
    idx, _ = text_batch()
    return np.array([analysis.block_moves(analysis.fresh_model(ANDREA_120M, s), idx) for s in SEEDS])


@lru_cache(maxsize=1)
def sum_error64() -> float:
    """max |embedding + sum of the 12 deltas - final stream| in float64 (ANDREA-120M, seed 0)."""
    idx, _ = text_batch()
    emb, deltas, final = analysis.stream_contributions(analysis.fresh_model(ANDREA_120M, seed=0).double(), idx)
    return float((emb + sum(deltas) - final).abs().max())


def ratios(sweep, arm: str, depth: int) -> list[float]:
    """The sweep's gradient ratios (embeddings / top) of one arm at one depth, seed by seed."""
    out = [r["ratio"] for r in sweep if r["arm"] == arm and r["depth"] == depth]
    if not out:
        raise ValueError(f"no sweep rows for arm {arm!r} at depth {depth}: arms {list(ARMS)}, depths {DEPTHS}")
    return out


def gmean(values) -> float:
    """The geometric mean (zeros count as 1e-300, so an underflow pulls it to the floor)."""
    return float(np.exp(np.mean(np.log(np.maximum(values, 1e-300)))))


# ---------------------------------------------------------------------------------------------
# The verdicts
# ---------------------------------------------------------------------------------------------
def _below_lost(values) -> list[float]:
    return [float(np.log10(max(r, 1e-300) / LOST)) for r in values]


def lost_at_12(sweep) -> verdict.Verdict:
    return verdict.compare(
        _below_lost(ratios(sweep, "without residual", 12)), "negative", what="log10(ratio / 1 %) at 12 blocks"
    )


def lost_at_48_controls(sweep) -> verdict.Verdict:
    names = {"default": "without residual", "ε = 1e-12": "without, ε = 1e-12"}
    names["no depth scaling"] = "without, no depth scaling"
    return verdict.combine(
        {k: verdict.compare(_below_lost(ratios(sweep, arm, 48)), "negative", what=k) for k, arm in names.items()}
    )


def usable_at_96(sweep) -> verdict.Verdict:
    return verdict.compare(
        _below_lost(ratios(sweep, "with residual", 96)), "positive", what="log10(ratio / 1 %) at 96 blocks"
    )


def identity(moves) -> verdict.Verdict:
    return verdict.compare(list(moves[:, 0] - 0.10), "negative", what="block 1's relative move minus 10 %")


def claim_rows(same: float, sweep, moves, err64: float) -> list[Claim]:
    """The chapter's claims, each with its measurement, its verdict and its evidence section."""
    ev = training.grid()
    return [
        Claim(
            "Each sublayer adds its output back to its input: x = x + Attention(LN(x)); x = x + MLP(LN(x)).",
            f"max |by hand - block| = {same:g}",
            verdict.exact(same, 1e-6, "max |by hand - block|"),
            "the two lines run on block 1 of ANDREA-120M and compared with the block's forward",
            anchor="ev-ch1-pattern",
        ),
        Claim(
            "A 12-layer stack without residuals would lose the gradient signal long before the embeddings.",
            f"at 12 blocks the embeddings get {gmean(ratios(sweep, 'without residual', 12)):.2f}× the last "
            "block's gradient at initialisation (3 seeds)",
            lost_at_12(sweep),
            f"controls at 48 blocks: {lost_at_48_controls(sweep).reason}",
            anchor="ev-ch1-gradient",
        ),
        Claim(
            "Residuals are needed for a deep stack to train.",
            "final loss higher without them at 12 and at 24 blocks (5 fresh seeds)",
            ev.verdict,
            "the gap's growth with depth only explored (3 seeds); beyond "
            f"{training.top_depth()} blocks the residual-free stack sits on the plateau",
            anchor="ev-ch1-training",
        ),
        Claim(
            "With residuals, the gradient stays usable through hundreds of layers.",
            f"gradient ratio, embeddings / last block, {gmean(ratios(sweep, 'with residual', 96)):.2f} at 96 blocks",
            usable_at_96(sweep),
            "the gradient probe on fresh pre-norm stacks, 3 seeds",
            anchor="ev-ch1-deep",
        ),
        Claim(
            "At initialisation a layer passes its input almost unchanged.",
            f"block 1 of ANDREA-120M moves its input by {moves[:, 0].mean() * 100:.0f} %, "
            f"block 12 by {moves[:, -1].mean() * 100:.0f} %",
            identity(moves),
            "near-identity needs LayerScale (chapter 7)",
            anchor="ev-ch1-identity",
        ),
        Claim(
            "Each block learns a refinement; the residual stream accumulates them.",
            f"embedding + sum of 12 deltas = final stream (error {err64:.0e} in float64)",
            verdict.exact(err64, 1e-12, "the float64 error"),
            "an exact identity of the architecture",
            anchor="ev-ch1-sum",
        ),
        Claim(
            "Layer 1 may add positional information, layer 2 syntax, layer 7 semantic relations.",
            "needs a trained model and probing classifiers",
            "not testable",
            "an illustration, not a measurement; see chapter 8",
            anchor="ev-ch1-specialisation",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# The lesson
# ---------------------------------------------------------------------------------------------
def what_we_found() -> Markdown:
    """ "What we found": the gradient claim, the training verdict and the identity claim, one number each."""
    from ..lesson import found as opening

    r12 = ratios(
        [
            dict(r, arm="without residual")
            for r in analysis.gradient_vs_depth([12], sweep_config("without residual"), SEEDS)
        ],
        "without residual",
        12,
    )
    lost = verdict.compare(_below_lost(r12), "negative", what="log10(ratio / 1 %) at 12 blocks")
    if lost.label == "not reproduced":
        first = (
            f"Without residual connections the embeddings of a fresh 12-block stack still get {gmean(r12):.2f} "
            "times its last block's gradient (the source's claim that it is lost: **not reproduced**)."
        )
    else:
        first = (
            "Without residual connections, the embeddings of a freshly initialised 12-block stack get "
            f"{gmean(r12):.2g} times the gradient of its last block (the source's claim that it is lost: "
            f"**{lost.label}**)."
        )
    ev = training.grid()
    gaps = [f.verdict.interval.mean for f in ev.role("decides")]
    depths = " and ".join(str(f.decision.arm["depth"]) for f in ev.role("decides"))
    second = (
        f"What the path does decide is training: without it, stacks of {depths} blocks end "
        f"{min(gaps):.2f} to {max(gaps):.2f} {{term}}`nats <nats>` per byte worse "
        f"(**{ev.verdict.label}**, {len(ev.role('decides')[0].seeds)} fresh {{term}}`seeds <seeds>`)."
    )
    moves = block_moves()
    ident = identity(moves)
    third = (
        "And a fresh block is far from the identity (a function that returns its input unchanged): the first "
        "block of ANDREA-120M moves its input by "
        f"{100 * moves[:, 0].mean():.0f} % (**{ident.label}**)."
        if ident.label == "not reproduced"
        else f"A fresh block moves its input by {100 * moves[:, 0].mean():.0f} % (**{ident.label}**)."
    )
    return opening(first, second, third)


def glue_gradient(sweep) -> None:
    """The sweep's numbers the lesson states (``res_ratio_96``, ``nores_ratio_12``)."""
    glue("res_ratio_96", gmean(ratios(sweep, "with residual", 96)), ".2f")
    glue("nores_ratio_12", gmean(ratios(sweep, "without residual", 12)), ".2f")


@lru_cache(maxsize=1)
def explorer_spread() -> dict:
    """The explorer's gradient ratio at depth 48, with and without the residual path, by width and seed:
    {residual: {width: [ratio per seed]}} (the explorer's own probe, so its shipped grid where it has one)."""
    return {
        res: {
            w: [
                E.probe(E.Setting(depth=EXPLORER_DEPTH, residual=res, width=w, seed=s)).grad_ratio
                for s in EXPLORER_SEEDS
            ]
            for w in EXPLORER_WIDTHS
        }
        for res in (False, True)
    }


def explorer_words() -> str:
    """The note under the explorer: how much its readout moves with the width and the seed, without and
    with the residual path (issue 47's reader saw it swing by nine orders of magnitude)."""
    s = explorer_spread()
    off, on = s[False], s[True]
    w0, others = EXPLORER_WIDTH, [w for w in EXPLORER_WIDTHS if w != EXPLORER_WIDTH]
    all_off = [r for v in off.values() for r in v]
    all_on = [r for v in on.values() for r in v]
    swing_off = max(all_off) / max(min(all_off), 1e-300)
    swing_on = max(all_on) / min(all_on)
    elsewhere = " and ".join(f"{off[w][0]:.2g} at width {w}" for w in others)
    measured = (
        f"At width {w0}, where the explorer opens, {len(EXPLORER_SEEDS)} seeds give {min(off[w0]):.2g} to "
        f"{max(off[w0]):.2g} at {EXPLORER_DEPTH} blocks; seed {EXPLORER_SEEDS[0]} gives {elsewhere}. With the path "
        f"on, every width and seed gives {min(all_on):.2g} to {max(all_on):.2g}."
    )
    if swing_off > 10 * swing_on:
        return "A caution: without the residual path this readout is fragile. " + measured
    return measured.replace("At ", "Without the residual path, at ", 1)


def glue_rank(collapse: dict) -> None:
    """The token-distinctness numbers the lesson states: res(X) at the top with the residual path, and
    after 6 and 48 blocks without it (``collapse``: arm -> (seeds, boundaries))."""
    on, off = collapse["with residual"], collapse["without residual"]
    glue("rank_res_48", float(on[:, -1].mean()), ".2f")
    glue("rank_nores_6", float(off[:, 6].mean()), ".2f")
    glue("rank_nores_48", float(off[:, -1].mean()), ".1e")


def glue_training() -> None:
    """The training section's numbers and verdict sentence (``ch1_training.glue_lesson``)."""
    training.glue_lesson()


def identity_sentence(moves) -> str:
    """The identity claim's verdict, in the lesson's words."""
    label = identity(moves).label
    if label == "not reproduced":
        return "This is not an identity."
    return "Every block is close to the identity." if label == "confirmed" else ""


def claims(same: float, sweep, moves, err64: float):
    """The lesson's claims table, each row linked to its evidence section."""
    return lesson_claims(CHAPTER, claim_rows(same, sweep, moves, err64))


# ---------------------------------------------------------------------------------------------
# The evidence page
# ---------------------------------------------------------------------------------------------
def evidence_claims():
    """Every claim with its reasons, from the measurements recomputed here."""
    return _evidence_claims(claim_rows(by_hand_difference(), depth_sweep(), block_moves(), sum_error64()))


def glue_controls() -> None:
    """The gradient controls' numbers: the ratios with ε = 1e-12 and without depth scaling, the
    residual-free stream's RMS at 48 blocks, and √ε."""
    sweep = depth_sweep()
    glue("nores_ratio_12", gmean(ratios(sweep, "without residual", 12)), ".2f")
    glue("nores_ratio_48", gmean(ratios(sweep, "without residual", 48)), ".1e")
    glue("eps_ratio_48", gmean(ratios(sweep, "without, ε = 1e-12", 48)), ".2f")
    glue("eps_ratio_96", gmean(ratios(sweep, "without, ε = 1e-12", 96)), ".2f")
    glue("noscale_ratio_48", gmean(ratios(sweep, "without, no depth scaling", 48)), ".2f")
    glue("res_ratio_96", gmean(ratios(sweep, "with residual", 96)), ".2f")
    cfg = analysis.small(WIDTH, 48, residual=False, context_length=32)
    rep = gradient_flow(analysis.fresh_model(cfg, 0), *random_batch(cfg.vocab_size, 2, 32, 0))
    glue("nores_stream_48", float(np.median(rep.act_rms[1:])), ".1e")
    glue("sqrt_eps", 1e-5**0.5, ".1e")
    glue("same", by_hand_difference(), "g")
    glue("sum_err64", sum_error64(), ".1e")


def sweep_table():
    """The gradient sweep, arm by arm and depth by depth: the geometric mean and each seed's ratio."""
    sweep = depth_sweep()
    rows = [
        [arm, d, f"{gmean(ratios(sweep, arm, d)):.3g}", ", ".join(f"{r:.2g}" for r in ratios(sweep, arm, d))]
        for arm in ARMS
        for d in DEPTHS
    ]
    return table(
        rows,
        ["arm", "blocks", "ratio (geometric mean)", "seeds 0-2"],
        caption=f"Gradient RMS at the embeddings / at the top, fresh pre-norm stacks of width {WIDTH}",
    )


def explorer_table():
    """The explorer's ratio at depth 48 by width and seed, with and without the residual path."""
    s = explorer_spread()
    rows = [
        ["on" if res else "off", w, *(f"{r:.3g}" for r in s[res][w])] for res in (False, True) for w in EXPLORER_WIDTHS
    ]
    return table(
        rows,
        ["residual", "width", *(f"seed {k}" for k in EXPLORER_SEEDS)],
        caption=f"The explorer's gradient ratio (embeddings / top) at {EXPLORER_DEPTH} blocks, pre-norm",
    )


def moves_table():
    """Each block's relative move of the stream at initialisation, seed by seed."""
    moves = block_moves()
    rows = [
        [i + 1, f"{100 * moves[:, i].mean():.1f}", ", ".join(f"{100 * v:.1f}" for v in moves[:, i])]
        for i in range(moves.shape[1])
    ]
    return table(
        rows,
        ["block", "move (%, mean)", "seeds 0-2 (%)"],
        caption="||block(x) - x|| / ||x|| in fresh ANDREA-120Ms, on the real-text batch",
    )


def identity_words() -> Markdown:
    moves = block_moves()
    v = identity(moves)
    return Markdown(
        f"The test: block 1's relative move minus 10 %, over {len(SEEDS)} seeds, must be below zero for the "
        f"claim to hold. {v.reason}. Verdict: **{v.label}**."
    )


def grid_evidence():
    """The stored training grid's declared rule, calibration, controls, both machines and Holm."""
    from ..lesson import grid_evidence as fold

    return fold(training.GRID)
