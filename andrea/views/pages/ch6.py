"""Chapter 6, the 12-block stack: the lesson's sentences, tables, figures and claims, and its evidence page.

The lesson (``book/06_stack.md``) measures in its own cells (the six-line forward, the parameter counts, one
token's trace, each block's move on the same input); ``what_we_found`` opens it, ``budget_table``,
``budget_figure`` and ``trace_figure`` draw what it measured, ``glue_alike`` says whether the blocks are alike,
and ``claims`` closes it. ``live`` measures the same with the lesson's code and seeds, for the claims and for
the evidence page (``book/evidence/06_stack_evidence.md``), which calls the section functions below.
"""

from __future__ import annotations

import functools

import matplotlib.pyplot as plt
import numpy as np
import torch

from ... import ANDREA_120M
from ...evidence import verdict
from .. import plots
from ..lesson import Markdown, lesson_claims, paragraphs
from ..lesson import evidence_claims as _evidence_claims
from ..lesson import found as _found
from ..notebook import Claim, Table, glue

STEM = "06_stack"
SEEDS = (0, 1, 2)  # the fresh models whose blocks are compared
TOLERANCE = 0.05  # "alike": the trend over the 12 blocks is within 5 % of the mean move


def _ref(anchor: str, words: str = "the evidence") -> str:
    return f"{{ref}}`{words} <{anchor}>`"


# ---------------------------------------------------------------------------------------------------------
# The parameter budget: the model's count against the source notes' arithmetic
# ---------------------------------------------------------------------------------------------------------
def budget(counts: dict) -> dict:
    """The source notes' sums next to the model's counts (``count_parameters``), in parameters."""
    V, d = ANDREA_120M.vocab_size, ANDREA_120M.d_model
    trunk = counts["blocks"]
    emb_doc = V * d * 2  # the source notes' "8449 x 768 x 2 for tied input/output"
    return dict(
        V=V,
        d=d,
        trunk=trunk,
        emb=V * d,
        emb_doc=emb_doc,
        pos=counts["position_embedding"],
        total=counts["total"],
        doc_sum=trunk + emb_doc + counts["final_norm"],
        untied=counts["total"] + V * d,
    )


def budget_table(counts: dict) -> Table:
    """ANDREA-120M's parameters by part, with each part's share of the total."""
    parts = [
        ("token embedding, 8,449 × 768 (also the output head)", counts["token_embedding"]),
        ("position embedding, 1,024 × 768", counts["position_embedding"]),
        ("attention, 12 blocks", counts["attention"]),
        ("MLP, 12 blocks", counts["mlp"]),
        ("LayerNorms inside the blocks (24)", counts["norms"]),
        ("final LayerNorm", counts["final_norm"]),
        ("total", counts["total"]),
    ]
    return Table(
        [[name, f"{n:,}", f"{100 * n / counts['total']:.1f} %"] for name, n in parts],
        ["part", "parameters", "share"],
    )


def budget_figure(counts: dict):
    """The parameters as the model has them against the source notes' sum, beside the source notes' 120 M."""
    b = budget(counts)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    parts_m = [
        ("12 blocks (trunk)", b["trunk"], b["trunk"]),
        ("token embedding", b["emb"], b["emb_doc"]),
        ("position embedding", b["pos"], 0),
        ("final LayerNorm", counts["final_norm"], counts["final_norm"]),
    ]
    bottom = np.zeros(2)
    for i, (name, measured, documented) in enumerate(parts_m):
        vals = np.array([measured, documented]) / 1e6
        ax.bar([0, 1], vals, bottom=bottom, color=plots.PALETTE[i], label=name, width=0.55)
        bottom += vals
    for xpos, tot in zip([0, 1], bottom):
        ax.text(xpos, tot + 1.5, f"{tot:.1f} M", ha="center", fontsize=9)
    ax.axhline(120, ls="--", color=plots.PALETTE[3], label="source notes' total: ~120 M")
    ax.set_xticks(
        [0, 1],
        ["the model's count\n(tied head once)", "the notes' sum\n(embedding x 2,\nno positions)"],
    )
    ax.set_ylabel("parameters (millions)")
    ax.set_ylim(0, 135)
    # the legend under the axes: right of them, it widened the phone's rendering past the column, which
    # shrank every label on a phone
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=3)
    ax.set_title("The parameter budget of ANDREA-120M", fontsize=11)
    plots.provenance(fig, "cpu", None)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def trace_figure(trace: list[dict]):
    """One token's vector through block 1: its L2 norm after each step."""
    labels = [f"{r['step']}  {r['shape']}" for r in trace]
    return plots.bar_figure(
        labels,
        [r["norm"] for r in trace],
        xlabel="L2 norm of this token's vector",
        fmt="{:.2f}",
        title="One token through one block",
        seed=0,
    )


# ---------------------------------------------------------------------------------------------------------
# Are the blocks alike at initialisation?
# ---------------------------------------------------------------------------------------------------------
def alike(same_in: np.ndarray) -> verdict.Verdict:
    """Is there any trend with the block's index when every block gets the same input? A slope per seed, in
    fractions of the mean move per block, times 11 (the trend over the 12 blocks); "alike" = within 5 %."""
    blocks_idx = np.arange(1, same_in.shape[1] + 1)
    slopes = [np.polyfit(blocks_idx, row / row.mean(), 1)[0] * 11 for row in same_in]
    return verdict.compare(
        [abs(sl) - TOLERANCE for sl in slopes],
        "negative",
        what="the trend over 12 blocks (fraction of the mean) minus 5 %",
    )


def trend_words(same_in: np.ndarray) -> str:
    label = alike(same_in).label
    if label == "confirmed":
        return "no trend"
    return "a trend" if label == "not reproduced" else "no clear trend either way"


def glue_alike(same_in: np.ndarray) -> None:
    """Glue whether the blocks' moves on the same input show a trend along the stack (``trend_words``)."""
    glue("trend_words", trend_words(same_in))


# ---------------------------------------------------------------------------------------------------------
# The lesson's opening and its claims
# ---------------------------------------------------------------------------------------------------------
def what_we_found(counts: dict | None = None) -> Markdown:
    """ "What we found": the budget's corrections and the specialisation claim's status, one number each."""
    counts = counts if counts is not None else _counts()
    b = budget(counts)
    total = verdict.numeric(120e6, counts["total"], 0.05, "the total").label
    emb = verdict.numeric(13e6, b["emb"], 0.05, "the token embedding").label
    trunk = verdict.numeric(85e6, b["trunk"], 0.02, "the trunk").label
    blocks = (
        f"while the twelve blocks do hold the {b['trunk'] / 1e6:.1f} M the source notes say"
        if trunk == "confirmed"
        else f"and the twelve blocks hold {b['trunk'] / 1e6:.1f} M, not 85 M (**{trunk}**)"
    )
    return _found(
        f"ANDREA-120M has {b['total'] / 1e6:.1f} M parameters, not the 120 M of its name and of the "
        f"{{doc}}`source notes' <sources>` sum (**{total}**).",
        f"The source notes count the token embedding twice, but the output layer reuses it: it is "
        f"{b['emb'] / 1e6:.1f} M parameters, not {b['emb_doc'] / 1e6:.1f} M (**{emb}**), {blocks}.",
        "Whether blocks specialise in syntax, relations or facts cannot be tested on an untrained model (**not "
        "testable** here): at initialisation the twelve blocks are alike by construction, and {doc}`chapter 8 "
        "<08_trained>` tests the claim on a trained one.",
    )


@functools.cache
def _counts() -> dict:
    from ... import count_parameters

    return count_parameters(ANDREA_120M)


def claim_list(m: dict) -> list[Claim]:
    """The chapter's claims from the measurements ``m``: six_diff, counts, ent_min and same_in (the blocks'
    moves on the same input, seeds x blocks; None where only the parameter claims are needed)."""
    counts, six_diff, same_in = m["counts"], m["six_diff"], m["same_in"]
    b = budget(counts)
    moves = (
        f"untrained, same input for every block: moves {100 * same_in.mean(0).min():.0f}–"
        f"{100 * same_in.mean(0).max():.0f} %, {trend_words(same_in)} with the block's index"
        if same_in is not None
        else ""
    )
    return [
        Claim(
            "The forward pass is six lines: embed + positions, 12 blocks, final LayerNorm, logits from the (tied) "
            "token embedding.",
            f"six-line function = model(idx): max |difference| {six_diff:.0g}",
            verdict.exact(six_diff, 1e-5, "max |six lines - model|"),
            "the six lines run against model(idx) on real text",
            anchor="ev-ch6-forward",
        ),
        Claim(
            "85M parameters in the trunk.",
            f"{b['trunk']:,}",
            verdict.numeric(85e6, b["trunk"], 0.02, "the trunk"),
            "counted in the model, and by the formula: they agree",
            anchor="ev-ch6-budget",
        ),
        Claim(
            "~13M in the token embeddings (8449 x 768 x 2 for tied input/output).",
            f"{b['emb']:,} (tied: counted once)",
            verdict.numeric(13e6, b["emb"], 0.05, "the token embedding"),
            "tying shares one matrix between input and output; it is not counted twice",
            anchor="ev-ch6-budget",
        ),
        Claim(
            "Total ~120M with the embeddings and the final LayerNorm.",
            f"{counts['total']:,}",
            verdict.numeric(120e6, counts["total"], 0.05, "the total"),
            f"the source notes' own parts sum to {b['doc_sum'] / 1e6:.1f}M; positions "
            f"(+{counts['position_embedding']:,}) were left out",
            anchor="ev-ch6-budget",
        ),
        Claim(
            "The block design is two thirds of the parameters; the embeddings the rest.",
            f"trunk = {100 * b['trunk'] / counts['total']:.0f} % of the total",
            verdict.numeric(2 / 3, b["trunk"] / counts["total"], 0.05, "the trunk's share"),
            f"embeddings with positions are {100 * (b['emb'] + b['pos']) / counts['total']:.1f} %",
            anchor="ev-ch6-budget",
        ),
        Claim(
            "Layers specialise (1-3 syntax/position, 4-8 relations, 9-12 semantics, facts).",
            f"at initialisation all blocks are alike (attention normalised entropy >= {m['ent_min']:.3f})",
            "not testable",
            "needs a trained model and probing: tested in chapter 8; Tenney et al. (2019) report a related "
            "ordering in BERT",
            anchor="ev-ch6-specialise",
        ),
        Claim(
            "The specialisation comes from training pressure, not from architectural choices.",
            moves,
            verdict.not_testable("needs a trained model: see chapter 8"),
            "an untrained model's blocks are alike by construction (same code, same initial distributions, here "
            "the same input), so measuring that says nothing about what training does; a trained model is needed",
            anchor="ev-ch6-specialise",
        ),
    ]


def claims():
    """The lesson's claims table, from the numbers its cells measure (``live``: the same code and seeds)."""
    return lesson_claims(STEM, claim_list(live()))


# ---------------------------------------------------------------------------------------------------------
# The evidence page
# ---------------------------------------------------------------------------------------------------------
@functools.cache
def live() -> dict:
    """The lesson's measurements, made again with its code and seeds."""
    from ... import count_parameters
    from ...measure import analysis
    from ...training.data import get_tokenizer, python_docs_corpus

    tok = get_tokenizer("bpe")
    idx, _ = analysis.text_batch(tok, python_docs_corpus()[:20_000], batch=2, seq=128)
    model = analysis.fresh_model(ANDREA_120M, seed=0).eval()
    with torch.no_grad():
        x = model.token_embedding(idx) + model.position_embedding(torch.arange(idx.size(1)))
        for block in model.blocks:
            x = block(x)
        six = model.final_norm(x) @ model.token_embedding.weight.T
        full = model(idx)
    same_in = np.array([analysis.block_moves_same_input(analysis.fresh_model(ANDREA_120M, s), idx) for s in SEEDS])
    in_stack = np.array([analysis.block_moves(analysis.fresh_model(ANDREA_120M, s), idx) for s in SEEDS])
    ent = analysis.attention_entropy(analysis.fresh_model(ANDREA_120M, 0), idx)
    return dict(
        six_diff=float((six - full).abs().max()),
        counts=count_parameters(model),
        ent_min=float(ent.min()),
        ent=ent,
        same_in=same_in,
        in_stack=in_stack,
    )


def evidence_claims():
    """The evidence page's claims table: every claim with its reasons."""
    return _evidence_claims(claim_list(live()))


def forward_evidence() -> Markdown:
    m = live()
    return paragraphs(
        "The six lines (token and position embeddings, the 12 blocks in turn, the final LayerNorm, and the "
        "product with the transposed token embedding) were run on two sequences of 128 tokens of real text (the "
        "Python documentation, byte-pair encoded) through a fresh ANDREA-120M (seed 0, evaluation mode), and "
        f"compared with the model's own `forward`: the largest difference between the logits was {m['six_diff']:g}. "
        "The claim is a fact of the code, so the rule is exact agreement within 10⁻⁵.",
    )


def budget_evidence() -> Markdown:
    m = live()
    counts = m["counts"]
    b = budget(counts)
    return paragraphs(
        "`count_parameters` counts every tensor of the model once (the output head is the embedding matrix, so "
        "it adds nothing) and checks the result against a closed-form formula in the config; both agree with "
        "`sum(p.numel() for p in model.parameters())`. The stated numbers are compared within a tolerance: 2 % "
        "for the trunk, 5 % for the others, as the source notes round them.",
        f"The twelve blocks hold {b['trunk']:,} parameters. The token embedding is {b['V']:,} × {b['d']} = "
        f'{b["emb"]:,}; the source notes\' "× 2 for tied input/output" gives {b["emb_doc"]:,}, which counts the '
        f"shared matrix twice. The position embeddings (1,024 × 768 = {b['pos']:,}) are missing from the "
        f"source notes' sum. The model has {counts['total']:,} parameters; the source notes' own parts add up to "
        f"{b['doc_sum'] / 1e6:.1f} M, and an untied model with its positions would have {b['untied'] / 1e6:.1f} M: "
        f"no reading of this architecture reaches 120 M. The trunk is {100 * b['trunk'] / counts['total']:.0f} % "
        f"of the real total ({100 * b['trunk'] / 120e6:.0f} % of 120 M), far more than two thirds.",
    )


def moves_table() -> Table:
    m = live()
    same, stack, ent = m["same_in"].mean(0), m["in_stack"].mean(0), m["ent"]
    return Table(
        [
            [i + 1, f"{100 * a:.0f} %", f"{100 * s:.0f} %", f"{e:.3f}"]
            for i, (a, s, e) in enumerate(zip(same, stack, ent))
        ],
        ["block", "move, same input", "move in the stack", "attention entropy"],
        caption="Each block's relative move ‖block(x) − x‖ / ‖x‖ (the mean of 3 fresh models, seeds 0–2), when "
        "every block gets the embeddings as its input and in the stack; the normalised entropy of its attention "
        "(seed 0; 1 is uniform attention over the visible tokens).",
    )


def specialise_evidence() -> Markdown:
    m = live()
    v = alike(m["same_in"])
    return paragraphs(
        "The prediction, if the blocks are alike by construction: fed the same input, the twelve blocks move it "
        "by the same amount, with no trend along the stack. The statistic: for each of the three fresh models, "
        "a straight line fitted to the moves against the block's index, its slope (as a fraction of the mean "
        "move) times 11, the trend from block 1 to block 12. The rule: the blocks are alike if the trend's size "
        f"is below {100 * TOLERANCE:.0f} % of the mean, that is, if the 95 % interval of |trend| − 5 % over the "
        f"seeds lies entirely below zero. The reading: {v.reason}; so there is {trend_words(m['same_in'])} along "
        "the stack.",
        "This measures what the architecture does before training, which is not what the source notes claim: "
        "they describe what trained blocks specialise in, and say the specialisation comes from training. Both "
        "claims need a trained model, so both are **not testable** here; {doc}`../08_trained` tests them with "
        "probes on a trained twelve-block ANDREA, with the same model at initialisation as the control.",
    )
