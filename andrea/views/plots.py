"""Figures for the book: pure functions that take measurements and return matplotlib figures.

Conventions: the Okabe-Ito colour-blind-safe palette; labelled axes with units; a white figure
background (legible on the light and the dark theme); a small provenance line (package and torch
versions, device, seed) so a reader can reproduce the figure.

Importing this module changes nothing in the reader's matplotlib settings: every function here
draws inside ``style()``, a ``matplotlib.rc_context`` with the book's look, and the chapters'
own cells get the same look from ``andrea.views.notebook.setup()``.
"""

from __future__ import annotations

import contextlib
import io
from typing import Iterable, Optional, Sequence

import matplotlib
import matplotlib.colors
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import torch
from cycler import cycler

from ..measure.probe import GradientReport

# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
REFERENCE_GREY = "#9a9a9a"
# chapter 3's arms, the same in each of its figures: the colour says the norm's placement (pre-norm
# blue, post-norm orange), the line style the warmup (loss_bands_figure draws each arm in its own style,
# solid for the first)
WARMUP_COLOURS = {
    "pre-norm, no warmup": PALETTE[0],
    "post-norm, no warmup": PALETTE[1],
    "post-norm, warmup": PALETTE[1],
}

STYLE: dict = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.prop_cycle": cycler(color=PALETTE),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
    "font.size": 10,
    "legend.frameon": False,
}


@contextlib.contextmanager
def style():
    """A context in which figures get the book's look (and outside of which nothing changes).

    It saves and restores only the settings it changes: ``matplotlib.rc_context`` would restore
    every setting, including the one an inline backend switches on when it draws the first figure
    (interactive mode), and later figures would no longer be shown."""
    old = {k: plt.rcParams[k] for k in STYLE}
    plt.rcParams.update(STYLE)
    try:
        yield
    finally:
        plt.rcParams.update(old)


def _styled(fn):
    """Run a figure function inside ``style()``."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with style():
            return fn(*args, **kwargs)

    return wrapper


def _provenance_text(device: str = "cpu", seed: Optional[int] = 0, extra: str = "") -> str:
    from .. import __version__

    bits = [f"andrea {__version__}", f"torch {torch.__version__.split('+')[0]}", str(device)]
    if seed is not None:
        bits.append(f"seed {seed}")
    if extra:
        bits.append(extra)
    return " · ".join(bits)


def provenance(fig, device: str = "cpu", seed: Optional[int] = 0, extra: str = "") -> None:
    """Write 'andrea x · torch y · device · seed s' in small grey type at the bottom right, replacing
    the line a figure function already wrote (so a chapter can restate the device and seeds)."""
    for old in [t for t in fig.texts if t.get_gid() == "andrea-provenance"]:
        old.remove()
    text = _provenance_text(device, seed, extra)
    fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=7, color="#666666", gid="andrea-provenance")


def positive(a) -> np.ndarray:
    """Values for a log axis: non-positive and non-finite entries become NaN (a gap in the line)."""
    a = np.asarray(a, dtype=float).copy()
    a[~np.isfinite(a) | (a <= 0)] = np.nan
    return a


def _minor_label(ax):
    """Label a log axis's minor ticks when its decades alone would leave too few labels: every one
    when it spans less than a decade, 2, 3 and 5 when it spans less than two, none beyond."""

    def fmt(v, _):
        lo, hi = ax.get_ylim()
        if v <= 0 or lo <= 0:
            return ""
        decades = np.log10(hi / lo)
        mantissa = round(v / 10 ** np.floor(np.log10(v)), 6)
        if decades < 1 or (decades < 2 and mantissa in (2, 3, 5)):
            return f"{v:.2g}"
        return ""

    return fmt


class ExplorerFigure:
    """The gradient-flow explorer's figure: two log-scale panels over the block boundaries, the
    gradient RMS (left) and the residual stream's RMS (right), with a faint reference curve.

    The figure and its lines are made once and updated in place (``update``), which is several
    times faster than drawing a new figure: the live explorer redraws it on every change. A
    non-finite run is drawn with what it has and labelled "diverged"; a gradient that underflows to
    zero is labelled "vanished".
    """

    PANELS = (
        ("grad_rms", "gradient RMS (∂loss/∂x)", "gradient reaching each boundary"),
        ("act_rms", "residual-stream RMS", "size of the residual stream"),
    )

    def __init__(
        self, figsize=(9, 3.7), label: str = "this setting", reference_label: str = "reference: pre-norm, no LayerScale"
    ):
        with style():
            self.fig = plt.figure(figsize=figsize)
            self.axes = self.fig.subplots(1, 2)
            self.ref_lines, self.lines, self.marks = [], [], []
            for ax, (_, ylabel, sub) in zip(self.axes, self.PANELS):
                (ref,) = ax.plot([], [], color=REFERENCE_GREY, lw=2.5, alpha=0.6, label=reference_label)
                (line,) = ax.plot([], [], color=PALETTE[0], lw=2, ms=3, label=label)
                ax.set_yscale("log")
                # Short tick labels ("0.009", "1e-05") whatever the range, so the y-label always fits.
                ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.2g}"))
                ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_minor_label(ax)))
                ax.set_xlabel("block boundary (0 = embeddings)")
                ax.set_ylabel(ylabel)
                ax.set_title(sub, fontsize=10)
                self.marks.append(
                    ax.text(
                        0.5,
                        0.5,
                        "",
                        transform=ax.transAxes,
                        ha="center",
                        va="center",
                        fontsize=20,
                        color=PALETTE[3],
                        alpha=0.85,
                        fontweight="bold",
                    )
                )
                self.ref_lines.append(ref)
                self.lines.append(line)
            self.legend = self.fig.legend(
                handles=[self.ref_lines[0], self.lines[0]],
                loc="lower left",
                ncol=2,
                fontsize=8,
                bbox_to_anchor=(0.005, 0.0),
            )
            self.title = self.fig.suptitle("", fontsize=11)
            self.prov = self.fig.text(0.995, 0.01, "", ha="right", va="bottom", fontsize=7, color="#666666")
            # Fixed margins (measured to fit the longest labels at this size): no layout engine
            # runs on each update, and no label is ever clipped.
            self.fig.subplots_adjust(left=0.085, right=0.985, bottom=0.235, top=0.82, wspace=0.3)
        plt.close(self.fig)  # drawn into by us only; never shown twice by the inline backend

    def update(
        self,
        report: GradientReport,
        reference: Optional[GradientReport] = None,
        title: str = "",
        device: str = "cpu",
        seed: Optional[int] = 0,
        ylims: Optional[dict] = None,
    ):
        """Draw ``report`` (and ``reference``). ``ylims``: {"grad_rms": (lo, hi), "act_rms": (lo, hi)} to
        hold the y-axes fixed (e.g. ``static_explorer.grid_extent``); by default each axis fits this setting."""
        n = report.n_layer
        for i, (field, _, _) in enumerate(self.PANELS):
            ax, line, ref = self.axes[i], self.lines[i], self.ref_lines[i]
            y = positive(getattr(report, field))
            line.set_data(np.arange(n + 1), y)
            line.set_marker("o" if n <= 24 else "")
            if reference is not None:
                ref.set_data(np.arange(reference.n_layer + 1), positive(getattr(reference, field)))
            ref.set_visible(reference is not None)
            ax.set_xlim(-0.5, max(n, 1) + 0.5)
            values = np.concatenate(
                [y[np.isfinite(y)]] + ([positive(getattr(reference, field))] if reference is not None else [])
            )
            values = values[np.isfinite(values)]
            if ylims is not None:
                ax.set_ylim(*ylims[field])
            elif len(values):
                lo, hi = values.min(), values.max()
                pad = (hi / lo) ** 0.08 if hi > lo else 2.0
                ax.set_ylim(lo / pad, hi * pad)
            self.marks[i].set_text("" if report.status == "ok" else report.status.upper())
        self.title.set_text(title)
        self.prov.set_text(_provenance_text(device, seed))
        return self.fig

    def png(self, dpi: int = 100) -> bytes:
        """The figure as PNG bytes (fast zlib level: the widget redraws often, the bytes stay local)."""
        buf = io.BytesIO()
        with style():
            self.fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
        return buf.getvalue()


def gradient_flow_figure(
    report: GradientReport,
    reference: Optional[GradientReport] = None,
    title: str = "",
    label: str = "this setting",
    reference_label: str = "reference: pre-norm, no LayerScale",
    device: str = "cpu",
    seed: Optional[int] = 0,
):
    """The explorer's two panels for one report (and an optional reference), as a new figure."""
    f = ExplorerFigure(label=label, reference_label=reference_label)
    return f.update(report, reference, title, device, seed)


@_styled
def loss_curves_figure(
    rows: Sequence[dict],
    facet: str,
    color: str,
    style: Optional[str] = None,
    title: str = "",
    smooth: int = 10,
    ylim: Optional[tuple] = None,
    labels=None,
    seed: Optional[int] = 0,
):
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
                xs = np.array(r["steps"][smooth - 1 :])
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


@_styled
def line_figure(
    x,
    series: dict,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx=False,
    logy=False,
    figsize=(6.4, 3.8),
    device="cpu",
    seed: Optional[int] = 0,
    markers=True,
    styles=None,
):
    """A simple labelled line chart: ``series`` maps a legend label to y values over ``x``."""
    fig, ax = plt.subplots(figsize=figsize)
    for i, (name, y) in enumerate(series.items()):
        ls = (styles or {}).get(name, "-")
        ax.plot(
            x,
            positive(y) if logy else y,
            marker="o" if markers else None,
            ms=3.5,
            lw=1.8,
            ls=ls,
            color=PALETTE[i % len(PALETTE)],
            label=name,
        )
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


@_styled
def bar_figure(
    labels: Sequence[str],
    values: Sequence[float],
    xlabel: str,
    title: str = "",
    fmt="{:,.0f}",
    seed: Optional[int] = None,
    colors: Optional[Iterable[str]] = None,
):
    """Horizontal bars with the value written at the end of each bar."""
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1.2))
    cols = list(colors) if colors is not None else [PALETTE[0]] * len(labels)  # one colour: bars are one quantity
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


@_styled
def token_stats_figure(before, after, title: str = "", seed: Optional[int] = 0):
    """Per-token mean (x) and standard deviation (y) over d_model, before and after a LayerNorm.
    ``before``/``after``: tensors (N, d_model)."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, t, name, c in (
        (axes[0], before, "before LayerNorm", PALETTE[1]),
        (axes[1], after, "after LayerNorm", PALETTE[0]),
    ):
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


def fig_to_png(fig, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _smooth(v, k: int):
    v = np.array([np.nan if x is None else x for x in v], dtype=float)
    if k <= 1 or len(v) < k:
        return v
    return np.convolve(v, np.ones(k) / k, mode="valid")


@_styled
def seeds_figure(
    rows: Sequence[dict],
    x: str,
    arm: str,
    field: str = "final_val_loss",
    arms: Optional[list] = None,
    ax=None,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "final validation loss (nats/byte)",
    logx: bool = False,
    hline: Optional[tuple] = None,
    labels=None,
    source: str = "",
    styles: Optional[dict] = None,
    colors: Optional[dict] = None,
    mean: str = "arithmetic",
):
    """One line per arm through the mean over seeds, with every seed's value as a point: the spread
    a verdict has to beat is visible. ``mean="geometric"`` (positive values, for a log axis) takes the
    mean of the logarithms. ``styles`` / ``colors`` map an arm to a line style / colour.
    Runs whose value is missing (diverged) are drawn as crosses at the top of the panel.
    ``hline`` = (y, label) draws a reference level (e.g. the unigram entropy)."""
    if mean not in ("arithmetic", "geometric"):
        raise ValueError(f"mean must be 'arithmetic' or 'geometric', got {mean!r}")
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.4, 3.9))
    else:
        fig = ax.figure
    arms = arms or list(dict.fromkeys(r[arm] for r in rows))
    xs = sorted({r[x] for r in rows})
    finite = [r[field] for r in rows if r.get(field) is not None]
    top = max(finite) if finite else 1.0
    for i, a in enumerate(arms):
        c = (colors or {}).get(a, PALETTE[i % len(PALETTE)])
        means = []
        for xv in xs:
            vals = [r[field] for r in rows if r[arm] == a and r[x] == xv]
            ok = [v for v in vals if v is not None]
            ax.scatter([xv] * len(ok), ok, color=c, s=14, alpha=0.6, zorder=3)
            bad = len(vals) - len(ok)
            if bad:
                ax.scatter([xv] * bad, [top] * bad, marker="x", color=c, s=40, zorder=3)
            centre = float(np.exp(np.mean(np.log(ok)))) if mean == "geometric" and ok else np.mean(ok) if ok else 0
            means.append(centre if ok and not bad else np.nan)
        name = labels(a) if labels else str(a)
        ls = (styles or {}).get(a, "-")
        ax.plot(xs, means, color=c, lw=1.8, marker="o", ms=4, label=name, zorder=2, ls=ls)
    if hline:  # named in the legend, where the legend's placement keeps it clear of the data
        ax.axhline(hline[0], color="#666666", ls=":", lw=1.2, label=hline[1])
    if logx:
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.minorticks_off()
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, handlelength=3.5)  # long enough for a dashed line to show its dashes
    if own:
        provenance(fig, "cpu", None, source)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@_styled
def loss_bands_figure(
    rows: Sequence[dict],
    facet: str,
    color: str,
    style: Optional[str] = None,
    title: str = "",
    smooth: int = 10,
    ylim: Optional[tuple] = None,
    labels=None,
    hline: Optional[tuple] = None,
    source: str = "",
    panel_width: float = 4.2,
    ncols: Optional[int] = None,
    palette: Optional[dict] = None,
):
    """Training-loss curves over seeds: per (facet, color, style) group, the mean of the seeds'
    ``smooth``-step running means, with a band from the lowest to the highest seed. A group in which
    a run diverged ends with a cross where its loss stopped being finite. ``ncols``: panels per row
    (default: all in one row); without a ``style`` key each colour also gets its own line style,
    so that the curves stay apart in grey print and for colour-blind readers. ``palette`` maps a
    ``color`` value to its colour, so that an arm keeps the colour other figures give it."""
    facets = list(dict.fromkeys(r[facet] for r in rows))
    colors = list(dict.fromkeys(r[color] for r in rows))
    styles = list(dict.fromkeys(r[style] for r in rows)) if style else [None]
    ncols = min(ncols or len(facets), len(facets))
    nrows = -(-len(facets) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(panel_width * ncols, 3.4 * nrows + 0.3), sharey=True, squeeze=False)
    for extra in grid.flat[len(facets) :]:
        extra.set_visible(False)
    axes = [list(grid.flat[: len(facets)])]
    fmt = labels or (lambda k, v: f"{k} = {v}")
    for ax, fv in zip(axes[0], facets):
        for cv in colors:
            for sv in styles:
                group = [r for r in rows if r[facet] == fv and r[color] == cv and (not style or r[style] == sv)]
                if not group:
                    continue
                c = (palette or {}).get(cv, PALETTE[colors.index(cv) % len(PALETTE)])
                ls = ["-", "--", "-.", ":"][(styles.index(sv) if style else colors.index(cv)) % 4]
                curves = [_smooth(r["loss"], smooth) for r in group]
                n = max(len(cu) for cu in curves)
                arr = np.full((len(curves), n), np.nan)
                for k, cu in enumerate(curves):
                    arr[k, : len(cu)] = cu
                xs = np.arange(n) + smooth
                with np.errstate(all="ignore"):
                    import warnings

                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        mean = np.nanmean(arr, 0)
                        lo, hi = np.nanmin(arr, 0), np.nanmax(arr, 0)
                name = fmt(color, cv) + (f", {fmt(style, sv)}" if style else "")
                ax.plot(xs, mean, color=c, ls=ls, lw=1.8, label=name)
                ax.fill_between(xs, lo, hi, color=c, alpha=0.15, lw=0)
                for r in group:
                    if r.get("diverged"):
                        fin = [v for v in r["loss"] if v is not None]
                        ax.plot(len(r["loss"]), fin[-1] if fin else (ylim[1] if ylim else 0), "x", color=c, ms=9, mew=2)
        if hline:  # named in the legend, where no curve covers it
            ax.axhline(hline[0], color="#666666", ls=":", lw=1.2, label=hline[1])
        ax.set_title(fmt(facet, fv), fontsize=10)
        ax.set_xlabel("optimizer step")
        if ylim:
            ax.set_ylim(*ylim)
    for row in grid:
        row[0].set_ylabel(f"training loss\n(nats/byte, {smooth}-step mean)")
    handles, names = [], []
    for ax in axes[0]:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    axes[0][-1].legend(handles, names, fontsize=9, loc="upper right", handlelength=3.5)
    if title:
        fig.suptitle(title, fontsize=11)
    provenance(fig, "cpu", None, source)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
