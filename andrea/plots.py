"""Figures for the book: pure functions that take measurements and return matplotlib figures.

Conventions: the Okabe-Ito colour-blind-safe palette; labelled axes with units; a white figure
background (legible on the light and the dark theme); a small provenance line (package and torch
versions, device, seed) so a reader can reproduce the figure.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import matplotlib

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from .probe import GradientReport  # noqa: E402

# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
REFERENCE_GREY = "#9a9a9a"

plt.rcParams.update({
    "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE), "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100, "font.size": 10,
    "legend.frameon": False,
})


def provenance(fig, device: str = "cpu", seed: Optional[int] = 0, extra: str = "") -> None:
    """Write 'andrea x · torch y · device · seed s' in small grey type at the bottom right."""
    from . import __version__

    bits = [f"andrea {__version__}", f"torch {torch.__version__.split('+')[0]}", str(device)]
    if seed is not None:
        bits.append(f"seed {seed}")
    if extra:
        bits.append(extra)
    fig.text(0.995, 0.005, " · ".join(bits), ha="right", va="bottom", fontsize=7, color="#666666")


def positive(a) -> np.ndarray:
    """Values for a log axis: non-positive and non-finite entries become NaN (a gap in the line)."""
    a = np.asarray(a, dtype=float).copy()
    a[~np.isfinite(a) | (a <= 0)] = np.nan
    return a


def gradient_flow_figure(report: GradientReport, reference: Optional[GradientReport] = None, title: str = "",
                         label: str = "this setting", reference_label: str = "reference: pre-norm, no LayerScale",
                         device: str = "cpu", seed: Optional[int] = 0, fig=None):
    """Two panels over the block boundaries: gradient RMS and residual-stream RMS (log scales).

    A non-finite run is drawn with what it has and labelled "diverged"; a gradient that
    underflows to zero is labelled "vanished".
    """
    if fig is None:
        fig = plt.figure(figsize=(9, 3.6))
    fig.clear()
    axes = fig.subplots(1, 2)
    panels = [("grad_rms", "gradient RMS  ‖∂loss/∂x‖ / √n", "gradient reaching each boundary"),
              ("act_rms", "residual-stream RMS", "size of the residual stream")]
    for ax, (field, ylabel, sub) in zip(axes, panels):
        if reference is not None:
            ax.plot(np.arange(reference.n_layer + 1), positive(getattr(reference, field)), color=REFERENCE_GREY,
                    lw=2.5, alpha=0.6, label=reference_label)
        y = positive(getattr(report, field))
        xs = np.arange(report.n_layer + 1)
        ax.plot(xs, y, color=PALETTE[0], lw=2, marker="o" if report.n_layer <= 24 else None, ms=3, label=label)
        if np.isfinite(y).any():
            ax.set_yscale("log")
        ax.set_xlabel("block boundary (0 = embeddings, n = last block's output)")
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize=10)
        ax.set_xlim(-0.5, max(report.n_layer, 1) + 0.5)
        if report.status != "ok":
            ax.text(0.5, 0.5, report.status.upper(), transform=ax.transAxes, ha="center", va="center",
                    fontsize=20, color=PALETTE[3], alpha=0.85, fontweight="bold")
    axes[0].legend(loc="best", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    provenance(fig, device, seed)
    fig.subplots_adjust(left=0.09, right=0.985, bottom=0.17, top=0.83 if title else 0.9, wspace=0.3)
    return fig


def loss_curves_figure(rows: Sequence[dict], facet: str, color: str, style: Optional[str] = None,
                       title: str = "", smooth: int = 10, ylim: Optional[tuple] = None, labels=None,
                       seed: Optional[int] = 0):
    """Training-loss curves of experiment rows: one panel per value of ``facet``, one colour per
    value of ``color``, solid/dashed by ``style``. Validation points are drawn as markers.
    Diverged runs end where the loss became non-finite and are marked with a cross."""
    facets = list(dict.fromkeys(r[facet] for r in rows))
    colors = list(dict.fromkeys(r[color] for r in rows))
    styles = list(dict.fromkeys(r[style] for r in rows)) if style else [None]
    fig, axes = plt.subplots(1, len(facets), figsize=(4.6 * len(facets), 3.6), sharey=True, squeeze=False)
    fmt = labels or (lambda k, v: f"{k} = {v}")
    for ax, fv in zip(axes[0], facets):
        for r in (r for r in rows if r[facet] == fv):
            c = PALETTE[colors.index(r[color]) % len(PALETTE)]
            ls = ["-", "--", ":", "-."][styles.index(r[style]) % 4] if style else "-"
            loss = np.array([np.nan if v is None else v for v in r["loss"]], dtype=float)
            if smooth > 1 and len(loss) >= smooth:
                kernel = np.ones(smooth) / smooth
                sm = np.convolve(np.nan_to_num(loss, nan=np.nan), kernel, mode="valid")
                xs = np.array(r["steps"][smooth - 1:])
            else:
                sm, xs = loss, np.array(r["steps"])
            name = fmt(color, r[color]) + (f", {fmt(style, r[style])}" if style else "")
            ax.plot(xs, sm, color=c, ls=ls, lw=1.8, label=name)
            if r["val_step"]:
                ax.plot(r["val_step"], r["val_loss"], color=c, ls="none", marker="o", ms=3.5)
            if r.get("diverged"):
                ax.plot(r["steps"][-1], np.nanmax(loss) if np.isfinite(loss).any() else 0, "x", color=c, ms=10, mew=2)
        ax.set_title(fmt(facet, fv), fontsize=10)
        ax.set_xlabel("optimizer step")
        if ylim:
            ax.set_ylim(*ylim)
    axes[0][0].set_ylabel(f"training loss (nats/token, {smooth}-step mean)\n● validation loss")
    axes[0][-1].legend(fontsize=8, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=11)
    provenance(fig, "cpu", seed)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def line_figure(x, series: dict, xlabel: str, ylabel: str, title: str = "", logx=False, logy=False,
                figsize=(6.4, 3.8), device="cpu", seed: Optional[int] = 0, markers=True, styles=None):
    """A simple labelled line chart: ``series`` maps a legend label to y values over ``x``."""
    fig, ax = plt.subplots(figsize=figsize)
    for i, (name, y) in enumerate(series.items()):
        ls = (styles or {}).get(name, "-")
        ax.plot(x, positive(y) if logy else y, marker="o" if markers else None, ms=3.5, lw=1.8, ls=ls,
                color=PALETTE[i % len(PALETTE)], label=name)
    if logx:
        ax.set_xscale("log", base=2 if all(float(v).is_integer() for v in x) else 10)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8)
    provenance(fig, device, seed)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def bar_figure(labels: Sequence[str], values: Sequence[float], xlabel: str, title: str = "", fmt="{:,.0f}",
               seed: Optional[int] = None, colors: Optional[Iterable[str]] = None):
    """Horizontal bars with the value written at the end of each bar."""
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1.2))
    cols = list(colors) if colors is not None else [PALETTE[i % len(PALETTE)] for i in range(len(labels))]
    ax.barh(range(len(labels)), values, color=cols)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    top = max(values) if len(values) else 1
    for i, v in enumerate(values):
        ax.text(v + top * 0.01, i, fmt.format(v), va="center", fontsize=9)
    ax.set_xlim(0, top * 1.22)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    if title:
        ax.set_title(title, fontsize=11)
    provenance(fig, "cpu", seed)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def token_stats_figure(before, after, title: str = "", seed: Optional[int] = 0):
    """Per-token mean (x) and standard deviation (y) over d_model, before and after a LayerNorm.
    ``before``/``after``: tensors (N, d_model)."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, t, name, c in ((axes[0], before, "before LayerNorm", PALETTE[1]), (axes[1], after, "after LayerNorm", PALETTE[0])):
        t = t.detach().double()
        mean, std = t.mean(-1).numpy(), t.std(-1, unbiased=False).numpy()
        ax.scatter(mean, std, s=9, alpha=0.6, color=c)
        ax.set_xlabel("per-token mean over d_model")
        ax.set_ylabel("per-token standard deviation")
        ax.set_title(f"{name} ({len(mean)} tokens)", fontsize=10)
        span = max(np.ptp(mean), 1e-3)
        ax.set_xlim(mean.min() - span, mean.max() + span)
        sspan = max(np.ptp(std), 1e-3)
        ax.set_ylim(max(0, std.min() - sspan), std.max() + sspan)
        ax.ticklabel_format(useOffset=False, style="plain", axis="both")
    if title:
        fig.suptitle(title, fontsize=11)
    provenance(fig, "cpu", seed)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def fig_to_png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()
