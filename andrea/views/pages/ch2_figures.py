"""Chapter 2's figures of what goes wrong without normalisation: weights too large, and training."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...evidence import evaluation
from .. import plots
from .ch2_training import WIRING, held, held_runs, norm_lr

NAMES = {"pre": "pre-norm (ANDREA)", "none": "no normalisation"}
COLOURS = {"pre": plots.PALETTE[0], "final": plots.PALETTE[2], "none": plots.PALETTE[3]}
# Fig 2.3's seeds: vermillion, sky blue and black, the Okabe-Ito triple whose colours stay furthest apart under
# each common colour-vision deficiency (orange and vermillion, the old pair, nearly merge)
SEED_COLOURS = (plots.PALETTE[3], plots.PALETTE[5], plots.PALETTE[7])


def growth_figure(pre, none, sweep: dict, scales: list, scale: float, device: str):
    """Left: the stream's RMS at every block boundary with weights x ``scale``; right: the RMS after the last
    block against the weight factor (missing points: non-finite)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9.5, 3.7))
    for rep, norm in ((pre, "pre"), (none, "none")):
        a.plot(
            np.arange(len(rep.act_rms)),
            plots.positive(rep.act_rms),
            color=COLOURS[norm],
            marker="o",
            ms=3,
            label=NAMES[norm],
        )
    a.set_yscale("log")
    a.set_xlabel("block boundary")
    a.set_ylabel("residual-stream RMS")
    a.set_title(f"weights × {scale}", fontsize=10)
    a.legend(fontsize=8)
    for norm in ("pre", "none"):
        c = COLOURS[norm]
        b.plot(scales, plots.positive(sweep[norm]["act_top"]), color=c, marker="o", ms=4, label=NAMES[norm])
        bad = [s for s, ok in zip(scales, sweep[norm]["finite"]) if not ok]
        if bad:
            b.axvspan(min(bad) * 0.9, max(scales) * 1.1, color=c, alpha=0.08)
            b.text(min(bad), 1, " non-finite", color=c, fontsize=8, va="bottom")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("factor s on every linear weight")
    b.set_ylabel("stream RMS after the last block")
    b.set_title(f"{len(pre.act_rms) - 1} blocks", fontsize=10)
    b.legend(fontsize=8)
    plots.provenance(fig, device, 0)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _arm(r: dict) -> str:
    name = "pre-norm" if r["norm"] == "pre" else "no norm"
    return f"{name}, {'clip 1' if r['clip'] else 'no clip'}"


def training_figure():
    """Left: final validation loss against the peak learning rate (the exploration's seeds); right: the
    gradient norm of the runs without normalisation at the highest rate, until they stopped."""
    nl = norm_lr()
    runs, lrs = nl.v["runs"], nl.v["lrs"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    part = [dict(r, arm=_arm(r)) for r in runs]
    arms = ["pre-norm, clip 1", "pre-norm, no clip", "no norm, clip 1", "no norm, no clip"]
    plots.seeds_figure(
        part,
        x="lr",
        arm="arm",
        arms=arms,
        ax=a,
        logx=True,
        xlabel="peak learning rate",
        hline=(runs[0]["unigram_ce"], "unigram entropy"),
        styles={k: "--" for k in arms if k.endswith("no clip")},
        colors={k: plots.PALETTE[0 if k.startswith("pre") else 3] for k in arms},
    )
    a.set_title("final validation loss (x: stopped on inf/NaN)", fontsize=9)
    top = [r for r in runs if r["norm"] == "none" and r["lr"] == lrs[-1]]
    seeds = sorted({r["seed"] for r in top})
    for r in top:
        g = np.array([np.nan if v is None else v for v in r["grad_norm"]])
        b.plot(
            np.arange(1, len(g) + 1),
            g,
            color=SEED_COLOURS[seeds.index(r["seed"]) % len(SEED_COLOURS)],
            ls="-" if r["clip"] == 1.0 else "--",
            lw=1.3,
            label=f"seed {r['seed']}, {'clip 1' if r['clip'] else 'no clip'}",
        )
    b.legend(fontsize=8, ncol=2)
    b.set_yscale("log")
    b.set_xlabel("optimizer step")
    b.set_ylabel("gradient norm (before clipping)")
    b.set_title(f"no normalisation, peak lr {lrs[-1]:g}: until non-finite", fontsize=9)
    plots.provenance(fig, "cpu", None, evaluation.provenance("ch2_norm_lr"))
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def held_figure():
    """The runs at a learning rate held at 1e-2: each wiring's training loss, and the residual stream's RMS."""
    hl_warm = held_runs()["native"][0]["train"]["warmup"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.6))
    axes[0, 0].sharey(axes[0, 1])
    short = {
        "pre": "pre-norm",
        "final": "no LayerNorm in the blocks (final one kept)",
        "none": "no LayerNorm at all",
    }
    for ax, norm in zip(axes.flat, WIRING):
        for r in held(norm, 1e-2):
            loss = plots.positive(r["loss"])
            ax.plot(r["steps"], loss, lw=0.6, color=COLOURS[norm], alpha=0.8)
            if r["diverged"]:  # mark the last finite loss before the break
                k = np.flatnonzero(np.isfinite(loss))[-1]
                ax.plot(r["steps"][k], loss[k], "x", color="k", ms=7)
        ax.axvspan(0, hl_warm, color="0.9", zorder=0)
        ax.axhline(r["unigram_ce"], ls=":", color="0.4", lw=1)
        ax.set_yscale("log")
        ax.set_xlim(0, r["train"]["steps"])
        ax.set_title(f"training loss: {short[norm]}", fontsize=9)
        ax.set_ylabel("nats")
    s = axes[1, 1]
    for k, norm in enumerate(WIRING):
        for i, r in enumerate(held(norm, 1e-2)):
            s.plot(
                [m["step"] for m in r["monitor"]],
                [m["stream_rms"] for m in r["monitor"]],
                color=COLOURS[norm],
                ls=("-", "--", "-.")[k],
                lw=1.4,
                label=short[norm] if i == 0 else None,
            )
    s.axvspan(0, hl_warm, color="0.9", zorder=0)
    s.set_yscale("log")
    s.set_xlim(0, r["train"]["steps"])
    s.set_title("RMS of the residual stream, last block", fontsize=9)
    s.legend(fontsize=7, loc="upper right")
    for ax in axes[1]:
        ax.set_xlabel("optimizer step")
    plots.provenance(fig, "cpu", None, evaluation.provenance("ch2_held_lr"))
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
