"""Chapter 4, the MLP: the words, the claims and the evidence the chapter states.

``book/04_mlp.md`` (the lesson) runs the MLP by hand and counts its parameters in cells a reader can
re-run, and passes what it measured here for the claims table; ``book/evidence/04_mlp_evidence.md`` calls
the same functions with no arguments, and they rebuild the same models (seed 0) and batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch
import torch.nn.functional as F

from ...evidence import verdict
from ...measure import analysis
from ...model.config import ANDREA_120M
from ...model.transformer import count_parameters
from ..lesson import Markdown, lesson_claims
from ..lesson import evidence_claims as _evidence_claims
from ..lesson import found as _found
from ..notebook import Claim, glue, table

CHAPTER = "04_mlp"
# The source notes' numbers, checked below.
DOC_W1 = 2.36e6  # "each about 2.36M parameters"
DOC_BLOCK = 4.72e6  # "MLP parameters per block = 4.72M (ignoring biases)"
DOC_TWELVE = 56.6e6  # "twelve blocks x 4.72M = 56.6M"
DOC_SHARE = 0.5  # "about half of all parameters"
SHARE_TOL = 0.1  # "about": within 10 % of a half
COUNT_TOL = 0.005  # a parameter count stated to three digits: within 0.5 %


@dataclass(frozen=True)
class Counts:
    """What the chapter counts in ANDREA-120M's MLPs and in a SwiGLU MLP of the same width."""

    ratio: float  # hidden width / model width
    w1: int  # parameters of W1 (block 1)
    w2: int  # parameters of W2
    mlp_block: int  # one MLP with its biases
    mlp_total: int  # the twelve MLPs with their biases
    total: int  # the model's parameters (tied head once)
    attention_block: int  # one attention sublayer
    w_swi: int  # a SwiGLU MLP's weights (hidden width 8/3 d)
    n_swi: int  # ... with its biases
    n_gel: int  # the GELU MLP with its biases
    swi_width: int  # the SwiGLU MLP's hidden width

    @property
    def share(self) -> float:
        return self.mlp_total / self.total


def count(model, swi) -> Counts:
    """Count ``model``'s (ANDREA-120M) MLP parameters and those of ``swi``, a SwiGLU MLP."""
    blk = model.blocks[0]
    counts = count_parameters(model)
    gel = blk.mlp
    return Counts(
        ratio=blk.mlp.fc.out_features / model.config.d_model,
        w1=blk.mlp.fc.weight.numel(),
        w2=blk.mlp.proj.weight.numel(),
        mlp_block=counts["per_block"]["mlp"],
        mlp_total=counts["mlp"],
        total=counts["total"],
        attention_block=counts["per_block"]["attention"],
        w_swi=sum(p.numel() for n, p in swi.named_parameters() if n.endswith("weight")),
        n_swi=sum(p.numel() for p in swi.parameters()),
        n_gel=sum(p.numel() for p in gel.parameters()),
        swi_width=swi.proj.in_features,
    )


# ---------------------------------------------------------------------------------------------
# The measurements, recomputed for the opening and the evidence page (the lesson makes the same ones)
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def models():
    """A freshly initialised ANDREA-120M (seed 0) and a one-block SwiGLU ANDREA's MLP (seed 0)."""
    model = analysis.fresh_model(ANDREA_120M, seed=0)
    swi = analysis.fresh_model(replace(ANDREA_120M, activation="swiglu", n_layer=1), seed=0).blocks[0].mlp
    return model, swi


@lru_cache(maxsize=1)
def by_hand_difference() -> float:
    """max |the three lines by hand - block 1's MLP| on the chapter's real-text batch."""
    from ...training.data import get_tokenizer, python_docs_corpus

    idx, _ = analysis.text_batch(get_tokenizer("bpe"), python_docs_corpus()[:20_000], batch=2, seq=128)
    model, _ = models()
    blk = model.blocks[0]
    with torch.no_grad():
        x = blk.ln_2(model.embed(idx))
        h = x @ blk.mlp.fc.weight.T + blk.mlp.fc.bias
        y = F.gelu(h, approximate="tanh") @ blk.mlp.proj.weight.T + blk.mlp.proj.bias
        return float((y - blk.mlp(x)).abs().max())


# ---------------------------------------------------------------------------------------------
# The claims
# ---------------------------------------------------------------------------------------------
def claim_rows(diff: float, c: Counts) -> list[Claim]:
    return [
        Claim(
            "The MLP is two linear maps with one nonlinearity between them: h = x W1 + b1; h = GELU(h); y = h W2 + b2.",
            f"the three lines reproduce block 1's MLP (max |difference| {diff:.0g})",
            verdict.exact(diff, 1e-6, "max |by hand - MLP|"),
            "run on real text in the lesson",
            anchor="ev-ch4-forward",
        ),
        Claim(
            "The hidden width is 4 x 768 = 3072 in ANDREA-120M.",
            f"hidden width / model width = {c.ratio:g}",
            verdict.numeric(4, c.ratio, 0.0, "the ratio"),
            "the config, as the model builds it",
            anchor="ev-ch4-counts",
        ),
        Claim(
            "W1 is 768 × 3072 and W2 is 3072 × 768, each about 2.36M parameters.",
            f"{c.w1:,} and {c.w2:,}",
            verdict.numeric(DOC_W1, c.w1, COUNT_TOL, "W1's parameters"),
            "fc.weight.T and proj.weight.T of block 1",
            anchor="ev-ch4-counts",
        ),
        Claim(
            "MLP parameters per block = 4.72M (ignoring biases).",
            f"{(c.w1 + c.w2):,} ({c.mlp_block:,} with biases)",
            verdict.numeric(DOC_BLOCK, c.w1 + c.w2, COUNT_TOL, "per block"),
            "counted in the model's weights",
            anchor="ev-ch4-counts",
        ),
        Claim(
            "Twelve blocks x 4.72M = 56.6M MLP parameters.",
            f"{12 * (c.w1 + c.w2) / 1e6:.1f} M",
            verdict.numeric(DOC_TWELVE, 12 * (c.w1 + c.w2), COUNT_TOL, "twelve MLPs"),
            "counted in the model's weights",
            anchor="ev-ch4-counts",
        ),
        Claim(
            "The MLPs are about half of all parameters.",
            f"{100 * c.share:.1f} % of the {c.total / 1e6:.1f} M the model has",
            share_verdict(c),
            "'half' rests on the source notes' 120M total, which chapter 6 corrects",
            anchor="ev-ch4-share",
        ),
        Claim(
            "The 4x ratio appears in GPT, BERT, T5, LLaMA and ANDREA.",
            "4x in the 2017 Transformer, GPT-2, BERT-base, T5-base and ANDREA; LLaMA uses SwiGLU with about 8/3 x",
            "corrected",
            "LLaMA's hidden width is 2/3 of 4d (Touvron et al. 2023)",
            anchor="ev-ch4-ratio",
        ),
        Claim(
            "Gated MLPs (SwiGLU) can use an 8/3 expansion with comparable capacity at lower cost (PaLM, Chinchilla).",
            f"8/3 matches the 4x MLP's weights exactly ({c.w_swi:,}): the same multiply-adds per token",
            "corrected",
            "equal parameters, so equal cost, not lower; gated MLPs come from Shazeer (2020), used by PaLM and "
            "LLaMA; we found no gated MLP in Chinchilla's description",
            anchor="ev-ch4-swiglu",
        ),
    ]


def share_verdict(c: Counts) -> verdict.Verdict:
    return verdict.numeric(DOC_SHARE, c.share, SHARE_TOL, "the share")


# ---------------------------------------------------------------------------------------------
# The lesson
# ---------------------------------------------------------------------------------------------
def what_we_found() -> Markdown:
    """ "What we found": the source notes' MLP arithmetic, the MLPs' share, and SwiGLU's cost."""
    c = count(*models())
    arithmetic = verdict.numeric(DOC_TWELVE, 12 * (c.w1 + c.w2), COUNT_TOL, "twelve MLPs")
    share = share_verdict(c)
    first = (
        f"The {{doc}}`source notes' <sources>` arithmetic for the MLP holds: {c.w1:,} parameters per weight matrix, "
        f"{(c.w1 + c.w2) / 1e6:.2f} M per block and {12 * (c.w1 + c.w2) / 1e6:.1f} M for the twelve blocks, "
        f"without biases (**{arithmetic.label}**)."
    )
    second = (
        f"With their biases the twelve MLPs are {100 * c.share:.1f} % of the model's {c.total / 1e6:.1f} M "
        f"parameters, not about half (**{share.label}**): the notes' total is too large."
        if share.label == "corrected"
        else f"The twelve MLPs are {100 * c.share:.1f} % of the model's parameters (**{share.label}**)."
    )
    same = c.w_swi == c.w1 + c.w2
    third = (
        f"A {{term}}`SwiGLU` MLP of hidden width 8/3 has exactly as many weights ({c.w_swi:,}) as the 4× MLP: "
        "contrary to the source notes, it is not cheaper (**corrected**), only better at the same cost in "
        "Shazeer's experiments."
        if same
        else f"A SwiGLU MLP of hidden width 8/3 has {c.w_swi:,} weights against the 4× MLP's {c.w1 + c.w2:,}."
    )
    return _found(first, second, third)


def glue_counts(model) -> None:
    """The counted numbers the lesson states (from ``model``, ANDREA-120M)."""
    _, swi = models()
    c = count(model, swi)
    glue("ratio", c.ratio, "g")
    glue("w1", f"{c.w1:,}")
    glue("w1m", c.w1 / 1e6, ".2f")
    glue("w12m", (c.w1 + c.w2) / 1e6, ".2f")
    glue("mlp_total_m", c.mlp_total / 1e6, ".1f")
    glue("mlp_share", 100 * c.share, ".1f")
    glue("total_m", c.total / 1e6, ".1f")
    glue("mlp_vs_attn", c.mlp_block / c.attention_block, ".2f")
    glue("mlp_nobias_12_m", 12 * (c.w1 + c.w2) / 1e6, ".1f")


def glue_swiglu(model, swi) -> None:
    """SwiGLU against the GELU MLP: the hidden width, the weights and the extra biases."""
    c = count(model, swi)
    glue("swi_h", c.swi_width)
    glue("w_swi", f"{c.w_swi:,}")
    glue("w_gel", f"{c.w1 + c.w2:,}")
    glue("b_extra", c.n_swi - c.n_gel)


def claims(diff: float, model, swi):
    """The lesson's claims table, each row linked to its evidence section."""
    return lesson_claims(CHAPTER, claim_rows(diff, count(model, swi)))


# ---------------------------------------------------------------------------------------------
# The evidence page
# ---------------------------------------------------------------------------------------------
def evidence_claims():
    """Every claim with its reasons, from the models rebuilt here."""
    return _evidence_claims(claim_rows(by_hand_difference(), count(*models())))


def glue_evidence() -> None:
    c = count(*models())
    glue("diff", by_hand_difference(), ".0g")
    glue("ratio", c.ratio, "g")
    glue("w1", f"{c.w1:,}")
    glue("w2", f"{c.w2:,}")
    glue("w12", f"{c.w1 + c.w2:,}")
    glue("mlp_block", f"{c.mlp_block:,}")
    glue("mlp_total", f"{c.mlp_total:,}")
    glue("total", f"{c.total:,}")
    glue("mlp_share", 100 * c.share, ".1f")
    glue("share_label", share_verdict(c).label)
    glue("w_swi", f"{c.w_swi:,}")
    glue("swi_h", c.swi_width)
    glue("b_extra", c.n_swi - c.n_gel)


def counts_table():
    """The source notes' numbers against the counted ones, with the tolerance each is read with."""
    c = count(*models())
    rows = [
        ["W1's parameters", f"{DOC_W1 / 1e6:.2f} M", f"{c.w1:,}", f"{100 * COUNT_TOL:g} %"],
        ["one MLP, without biases", f"{DOC_BLOCK / 1e6:.2f} M", f"{c.w1 + c.w2:,}", f"{100 * COUNT_TOL:g} %"],
        [
            "twelve MLPs, without biases",
            f"{DOC_TWELVE / 1e6:.1f} M",
            f"{12 * (c.w1 + c.w2):,}",
            f"{100 * COUNT_TOL:g} %",
        ],
        ["the MLPs' share of all parameters", f"{DOC_SHARE:.0%}", f"{100 * c.share:.1f} %", f"{100 * SHARE_TOL:g} %"],
    ]
    return table(
        rows,
        ["quantity", "the source notes", "counted", "tolerance (relative)"],
        caption="ANDREA-120M's MLP parameters, counted from the model (tied output head counted once)",
    )
