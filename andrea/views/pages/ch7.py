"""Chapter 7 (LayerScale): its words, claims table and evidence, computed from its measurements and grids.

The lesson (``book/07_layerscale.md``) measures the stream at initialisation and the λ's growth itself and
passes what it measured to ``claims``; the evidence page (``book/evidence/07_layerscale_evidence.md``)
measures the same things again with ``noise_profiles`` and ``depth_moves`` (same seeds, same numbers).
Everything about the trained stacks comes from the stored grids, in ``ch7_training`` (re-exported here, so
that both pages call one module).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from ...evidence import verdict
from ...model.config import ANDREA_120M
from ..lesson import Markdown, evidence_claims, lesson_claims, paragraphs
from ..lesson import found as _found
from ..notebook import Claim, Table, table
from .ch7_deep import (  # noqa: F401 - the 80-block test, called as page.<name>
    FAIL_GAP,
    d80_calib,
    d80_scope,
    d80_settings,
    d80_why,
    d80_words,
    deep80_procedure,
    deep80_sentence,
    deep80_short,
    deep_ok,
    deep_round1_words,
    deep_rows,
    deep_table,
    sweep,
    sweep_figure,
    sweep_sentence,
)
from .ch7_rescue import (  # noqa: F401 - the rescue claim across rounds 2 and 3, called as page.<name>
    combined_said,
    per_setting,
    rescue_said,
    rescue_sentence,
    rescue_verdict,
    round3_words,
    scope_words,
)
from .ch7_training import (  # noqa: F401 - the training evidence, called as page.<name> by both pages
    DEEP80,
    DEEP80_R1,
    GLOSSED,
    GRIDS,
    PANEL,
    PANEL2,
    ROUND1,
    ROUND2,
    ROUND3,
    calib_words,
    cost_sentence,
    ev,
    label_md,
    lambda_runs,
    lambda_share,
    lambda_words,
    panel_rows,
    rescue_words,
    round1_words,
    rounds_procedure,
    rule_history,
    runs,
    same_words,
    sci,
    small_lam,
    training_settings,
    two_sentence,
    two_words,
)

CHAPTER = "07_layerscale"
LAMS = (None, 1e-1, 1e-4, 1e-6)  # the noise figure's λ₀ (None: LayerScale off)
INITS = {"GPT-2 init (scaled residual projections)": "gpt2", "plain N(0, 0.02²) init": "normal"}
DEPTHS = (12, 18, 24, 36, 48, 96)  # the initial-values table
# Where the lesson's gradient-flow explorer opens (StaticExplorer(**EXPLORER), GradientFlowExplorer(**EXPLORER)):
# CaiT's λ₀ for its depth. Its "what to look for" sentence is built from these.
EXPLORER: dict[str, Any] = {"depth": 24, "layerscale": 1e-5, "norm": "pre"}
# What the reader is asked to look for in the chapter's panels.
PANEL_LOOK = (
    "whether B leaves the plateau (the dotted level) where A stays, and how far B's λ has grown from λ₀ in each block."
)


# ---------------------------------------------------------------------------------------------
# Measurements at initialisation (the evidence page repeats the lesson's, with the same seeds)
# ---------------------------------------------------------------------------------------------
def batch():
    from ...measure.probe import random_batch

    return random_batch(8449, 2, 64, seed=0)


@lru_cache(maxsize=1)
def noise_profiles() -> tuple[dict, dict]:
    """(cosine with the embeddings, stream RMS) at every boundary of a fresh 96-block stack of width 128,
    keyed by (init, λ₀): the lesson's first figure."""
    from ...measure import analysis

    idx, _ = batch()
    survival, rms = {}, {}
    for init in INITS.values():
        for lam in LAMS:
            m = analysis.fresh_model(analysis.small(128, 96, layerscale=lam, init=init, context_length=64), seed=0)
            survival[init, lam] = analysis.embedding_survival(m, idx)
            rms[init, lam] = analysis.stream_rms(m, idx)
    return survival, rms


@lru_cache(maxsize=1)
def depth_moves() -> list[tuple]:
    """(depth, CaiT's λ₀, mean move with LayerScale, largest move, mean move without): the table of
    "Initial values by depth"."""
    from ...measure import analysis

    idx, _ = batch()
    rows = []
    for depth in DEPTHS:
        lam = analysis.cait_init(depth)
        cfg = analysis.small(128, depth, context_length=64)
        with_ls = analysis.block_moves(analysis.fresh_model(replace(cfg, layerscale=lam)), idx)
        without = analysis.block_moves(analysis.fresh_model(cfg), idx)
        rows.append((depth, lam, with_ls.mean(), with_ls.max(), without.mean()))
    return rows


def per_block() -> int:
    """LayerScale's parameters in one block of ANDREA-120M."""
    from ...model.transformer import count_parameters

    return count_parameters(replace(ANDREA_120M, layerscale=1e-6))["per_block"]["layerscale"]


def depth_table(rows: list[tuple]) -> Table:
    """The lesson's table of CaiT's λ₀ by depth and how far a fresh block moves its input."""
    return table(
        [(d, f"{lam:g}", f"{m:.2e}", f"{mx:.2e}", f"{wo:.3f}") for d, lam, m, mx, wo in rows],
        ["depth", "CaiT λ₀", "mean move with LayerScale", "largest move", "mean move without"],
    )


def explorer_look() -> str:
    """What to look for in the explorer, from where it opens (``EXPLORER``) and its shipped rows: the profile
    is flat (a ratio of 1) for small λ₀ and joins the grey reference, LayerScale off, at λ₀ = 1 (a scale of
    one changes nothing)."""
    from ..static_explorer import cached_grid_rows

    start = EXPLORER["layerscale"]
    at = (EXPLORER["depth"], EXPLORER["norm"], "on", 0)
    ratio = {r["lam"]: r["ratio"] for r in cached_grid_rows() if (r["depth"], r["norm"], r["res"], r["boundary"]) == at}
    flat = [float(k) for k, v in ratio.items() if k not in ("off", "1") and abs(v - 1) <= 0.02]
    if ratio.get("1") != ratio.get("off") or not flat or max(flat) <= start:
        raise ValueError(f"the explorer's rows no longer behave as its sentence says (opening at {start}): {ratio}")
    return (
        f"it opens at λ₀ = {sci(start)}; drag λ₀ up. Up to λ₀ = {max(flat):g} the gradient profile stays flat; "
        "above it, it bends towards the grey reference and joins it at λ₀ = 1, where LayerScale multiplies by one."
    )


# ---------------------------------------------------------------------------------------------
# The lesson's opening and its claims
# ---------------------------------------------------------------------------------------------
def found() -> Markdown:
    """ "What we found": the rescue at 24 blocks, the source's 80 blocks, and LayerScale's cost."""
    return _found(rescue_sentence(), deep80_short(), cost_sentence().replace(" nats", " {term}`nats`", 1))


def noise_verdict(survival: dict) -> Any:
    """'Drowns' read as: the cosine with the embeddings falls below 0.5 by block 50, with each init."""
    return verdict.combine(
        {
            "plain init": verdict.compare(
                [0.5 - float(survival["normal", None][50])],
                "positive",
                exact=True,
                what="0.5 minus the cosine at block 50",
            ),
            "GPT-2 init": verdict.compare(
                [0.5 - float(survival["gpt2", None][50])],
                "positive",
                exact=True,
                what="GPT-2 init: 0.5 minus the cosine",
            ),
        }
    )


def deep80_said() -> Markdown:
    """The 80-block verdict where the lesson tests it, linked to its evidence, and where plain post-norm stops
    learning (the depth sweep beside it)."""
    return Markdown(deep80_sentence().removesuffix(".") + " ({ref}`evidence <ev-ch7-deep80>`). " + sweep_sentence())


def noise_sentence(survival: dict) -> Markdown:
    """The noise claim's verdict in one plain sentence (the label links the glossary), from each
    initialisation's reading."""
    v = noise_verdict(survival)
    drowned = {name: float(survival[init, None][50]) < 0.5 for name, init in (("plain", "normal"), ("GPT-2's", "gpt2"))}
    yes = [k for k, d in drowned.items() if d]
    no = [k for k, d in drowned.items() if not d]
    if yes and no:
        how = f"true with {' and '.join(yes)} initialisation, not with {' and '.join(no)}"
    else:
        how = "true with both initialisations" if yes else "true with neither initialisation"
    return Markdown(
        f'So the source\'s "drowned by block 50" gets the {{term}}`verdict` {label_md(v.label)}: {how} '
        "({ref}`evidence <ev-ch7-noise>`)."
    )


def _claims(survival: dict, rms: dict, n_per_block: int, depth_rows: list[tuple]) -> list[Claim]:
    e80 = ev(DEEP80)
    _, n = deep_ok()
    s = training_settings()
    plain_cos50 = float(survival["normal", None][50])
    growth = rms["normal", None][-1] / rms["normal", None][0]
    move48 = next(r for r in depth_rows if r[0] == 48)[2]
    return [
        Claim(
            "Training a transformer of ~80 layers from scratch fails to converge: the loss explodes or plateaus.",
            "80-block stacks that failed: " + "; ".join(f"{r['recipe']} {r['80 blocks failed']}" for r in deep_rows()),
            e80.verdict,
            f"80 blocks of width 32, 800 steps, {n} fresh seeds per recipe, each recipe's 80-block stacks read on "
            f"their own ({n} of {n} failing confirms, {n} of {n} learning refutes, anything between is inconclusive; "
            f"the recipe's shallow stack must learn in all {n}); "
            + (
                "one machine's runs until the emulated copies are made"
                if e80.missing_emulated
                else "decided on both machines"
            ),
            anchor="ev-ch7-deep80",
        ),
        Claim(
            "At initialisation each block pours noise into the stream; by layer 50 the embedding signal drowns "
            "in variance.",
            f"cosine of stream and embeddings at block 50: plain init {plain_cos50:.2f}, "
            f"GPT-2 init {float(survival['gpt2', None][50]):.2f}",
            noise_verdict(survival),
            "'drowns' read as: the cosine with the embeddings falls below 0.5",
            anchor="ev-ch7-noise",
        ),
        Claim(
            "LayerNorm at each block's input does not protect the stream itself.",
            f"pre-norm stream RMS grows {growth:.0f}x over 96 blocks (plain init)",
            verdict.compare([np.log(growth)], "positive", exact=True, what="log growth"),
            "the pre-norm stream is never normalised (chapter 3)",
            anchor="ev-ch7-noise",
        ),
        Claim(
            "LayerScale multiplies each block's output by a learnable vector lambda (a diagonal matrix) before "
            "adding it.",
            f"x + lambda * f(LN(x)); {n_per_block:,} parameters per block",
            verdict.numeric(2 * 768, n_per_block, 0.0, "LayerScale parameters per block"),
            "andrea.model.layers.LayerScale, Block",
            anchor="ev-ch7-definition",
        ),
        Claim(
            "lambda is initialised to tiny values such as 1e-4 or 1e-5 (1e-6 for very deep networks).",
            "CaiT: 0.1 up to 18 blocks, 1e-5 at 24, 1e-6 deeper",
            "corrected",
            "1e-4 is not one of CaiT's values; 0.1 is used for shallower networks",
            anchor="ev-ch7-definition",
        ),
        Claim(
            "At the first iteration, since lambda ~ 0, every block's output is multiplied by ~zero.",
            f"mean relative move per block at lambda 1e-6, 48 blocks: {move48:.1e}",
            verdict.compare([np.log10(move48 / 1e-3)], "negative", exact=True, what="log10(move / 0.1 %)"),
            "each block's change, measured on fresh models",
            anchor="ev-ch7-definition",
        ),
        Claim(
            "LayerScale was proposed by Meta AI researchers.",
            "Touvron et al. 2021 (CaiT), Facebook AI Research and Sorbonne",
            "confirmed",
            "the paper",
            anchor="ev-ch7-definition",
        ),
        Claim(
            "LayerScale lets deep transformers converge where they otherwise would not.",
            f"24 blocks, λ₀ {small_lam():g} against off, where a plain stack struggles",
            rescue_verdict(),
            f"{s['steps']} steps at width {s['d_model']}, each setting read from the round that decides it. "
            + scope_words(),
            anchor="ev-ch7-rescue",
        ),
    ]


def claims(survival: dict, rms: dict, n_per_block: int, depth_rows: list[tuple]):
    """The lesson's claims table, from what the lesson measured (the stream at initialisation, the
    parameters per block, the blocks' moves by depth) and the stored grids."""
    return lesson_claims(CHAPTER, _claims(survival, rms, n_per_block, depth_rows))


def evidence_table():
    """The evidence page's full claims table (its own measurements, the same seeds as the lesson's)."""
    survival, rms = noise_profiles()
    return evidence_claims(_claims(survival, rms, per_block(), depth_moves()))


# ---------------------------------------------------------------------------------------------
# The evidence page's paragraphs
# ---------------------------------------------------------------------------------------------
def noise_evidence() -> Markdown:
    survival, rms = noise_profiles()
    v = noise_verdict(survival)
    cos = {init: float(survival[init, None][50]) for init in INITS.values()}
    growth = {init: float(rms[init, None][-1] / rms[init, None][0]) for init in INITS.values()}
    return paragraphs(
        "The measurement: a freshly initialised pre-norm stack of 96 blocks of width 128 (seed 0, one batch of two "
        "random sequences of 64 tokens), LayerScale off, once with GPT-2's initialisation and once with every "
        "weight drawn from N(0, 0.02²). At every block boundary, the cosine similarity between the stream and the "
        "embeddings it started from, and the stream's RMS. A fresh model has no seeds to average over: each number "
        "is exact for this model and batch, and is compared with its threshold directly.",
        f"'Drowns' is read as: the cosine falls below 0.5 by block 50. With plain initialisation it is "
        f"{cos['normal']:.2f} there; with GPT-2's depth-scaled initialisation {cos['gpt2']:.2f}. The label, combining "
        f"the two initialisations, is {label_md(v.label)} ({v.reason}).",
        f"The stream's RMS grows {growth['normal']:.0f}-fold over the 96 blocks with plain initialisation and "
        f"{growth['gpt2']:.1f}-fold with GPT-2's: the LayerNorm at each sublayer's input normalises what the "
        "sublayer reads, never the stream itself.",
    )


def definition_evidence() -> Markdown:
    rows = depth_moves()
    r48 = next(r for r in rows if r[0] == 48)
    return paragraphs(
        f"LayerScale's parameters: {per_block():,} per block of ANDREA-120M (two vectors of 768, one per sublayer), "
        "counted by `count_parameters` on the model with `layerscale` set; the formula is "
        "`andrea.model.layers.LayerScale` and `Block`.",
        "The initial values are CaiT's (Touvron et al. 2021, Facebook AI Research and Sorbonne University): "
        "λ₀ = 0.1 for networks of up to 18 blocks, 10⁻⁵ at 24 blocks and 10⁻⁶ deeper "
        "(`andrea.measure.analysis.cait_init`); CaiT's released code uses 10⁻⁵ for its 36-block XXS model. The "
        "source's 10⁻⁴ is not among them, and it leaves out 0.1 for shallower networks: hence 'corrected'.",
        f"'Multiplied by about zero' is read as: on a fresh 48-block stack with λ₀ = 10⁻⁶, a block moves its "
        f"input by less than 0.1 % of its length on average. It moves it by {r48[2]:.1e} (largest {r48[3]:.1e}), "
        f"against {r48[4]:.2f} without LayerScale. The table below gives every depth measured (width 128, seed 0).",
    )
