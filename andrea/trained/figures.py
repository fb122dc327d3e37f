"""The trained-model chapter's figures: every panel draws the trained model beside the untrained one."""

from __future__ import annotations

from typing import Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..views.plots import PALETTE, REFERENCE_GREY, _styled, provenance
from .probes import BANDS, CALIBRATIONS, TASKS

TRAINED = PALETTE[0]
UNTRAINED = REFERENCE_GREY
BAND_SHADES = {"early": "#f2f2f2", "middle": "#ffffff", "late": "#f2f2f2"}
# The book's text column is about 750 px wide at a 1280 px window (672 px of it at the narrowest desktop
# layout, legibility.SHOWN_AT_MOST_PX): a figure drawn at most this many inches wide (100 dpi, as book_png
# draws) is shown at 0.85 of its size or more, so its 10-point text stays above 10 px as shown.
COLUMN_INCHES = 7.6


def _shade_bands(ax) -> None:
    """Grey columns behind the early (blocks 1-3) and late (9-12) bands; the captions name them."""
    for name, bs in BANDS.items():
        ax.axvspan(min(bs) - 0.5, max(bs) + 0.5, color=BAND_SHADES[name], zorder=0, lw=0)


@_styled
def training_figure(log: dict, seed: Optional[int] = 0):
    """Training loss (50-step mean) and validation loss against tokens seen, with the unigram and
    bigram baselines on the validation split."""
    h = log["history"]
    per_step = log["train_config"]["batch_size"] * log["train_config"]["seq_len"]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    loss = np.array(h["loss"])
    k = 50
    sm = np.convolve(loss, np.ones(k) / k, mode="valid")
    steps = np.array(h["step"][k - 1 :])
    ax.plot(steps * per_step / 1e6, sm, color=TRAINED, lw=1.6, label="training loss (50-step mean)")
    ax.plot(np.array(h["val_step"]) * per_step / 1e6, h["val_loss"], "o", ms=3.5, color=PALETTE[3],
            label="validation loss (held-out files)")  # fmt: skip
    b = log["baselines"]
    ax.axhline(b["unigram_ce"], color=UNTRAINED, ls="--", lw=1.2, label="unigram baseline")
    ax.axhline(b["bigram_ce"], color=UNTRAINED, ls=":", lw=1.4, label="bigram baseline")
    ax.set_xlabel("tokens seen (millions)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(2.0, max(8.0, b["unigram_ce"] + 0.5))
    ax.legend(fontsize=8, loc="upper right")
    provenance(fig, "cpu", seed, "trained ANDREA")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@_styled
def pair_figure(panels: Sequence[dict], ncols: int = 2, seed: Optional[int] = 0, width: Optional[float] = None):
    """Panels of ``{"title", "xlabel", "ylabel", "x", "trained", "untrained", "logy"?, "bands"?}``,
    each with the trained model's line and the untrained model's. ``width``: of one panel, in inches (by
    default the column's width shared by the ``ncols`` panels)."""
    width = width if width is not None else COLUMN_INCHES / ncols
    n = len(panels)
    rows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(rows, ncols, figsize=(width * ncols, (3.0 if ncols < 3 else 2.9) * rows), squeeze=False)
    for ax, p in zip(axes.ravel(), panels):
        if p.get("bands"):
            _shade_bands(ax)
        ax.plot(p["x"], p["trained"], "o-", ms=3.5, lw=1.8, color=TRAINED, label="trained")
        ax.plot(p["x"], p["untrained"], "s--", ms=3.5, lw=1.4, color=UNTRAINED, label="untrained")
        if p.get("logy"):
            ax.set_yscale("log")
        if p.get("hline") is not None:
            ax.axhline(p["hline"][0], color="#444444", lw=0.9, ls=":", label=p["hline"][1])
        ax.set_title(p["title"], fontsize=10)
        ax.set_xlabel(p["xlabel"])
        ax.set_ylabel(p["ylabel"])
        ax.legend(fontsize=8)
    for ax in axes.ravel()[n:]:
        ax.remove()
    provenance(fig, "cpu", seed, "trained ANDREA")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@_styled
def heads_figure(heads: dict, seed: Optional[int] = 0):
    """``heads``: {text: {"trained": inside.induction(...), "untrained": ...}} for each repeated text.
    One panel per text with every head as a point (previous-token score against induction score): the
    trained heads as filled dots, the untrained ones as hollow squares drawn on top of them, so that
    neither model's heads hide the other's; the last panel, the loss on the first and the second copy of
    each text."""
    texts = list(heads)
    fig, axes = plt.subplots(1, len(texts) + 1, figsize=(COLUMN_INCHES, 3.1))
    # every head's scores are small: the axes end a little beyond the largest, the same in each panel
    top = {
        k: max(float(heads[t][m][k].max()) for t in texts for m in ("trained", "untrained"))
        for k in ("previous_token", "induction")
    }
    for ax, text in zip(axes, texts):
        r = heads[text]["trained"]
        ax.scatter(
            r["previous_token"].ravel(), r["induction"].ravel(), s=22, color=TRAINED, alpha=0.6, lw=0,
            label="trained", zorder=2,
        )  # fmt: skip
        r = heads[text]["untrained"]
        ax.scatter(
            r["previous_token"].ravel(), r["induction"].ravel(), s=30, marker="s", facecolors="none",
            edgecolors="#333333", linewidths=1.0, label="untrained", zorder=3,
        )  # fmt: skip
        ax.set_xlabel("previous-token score")
        ax.set_ylabel("induction score")
        # a little room under 0 on both axes: the heads at 0 show whole, and the two axes' 0 labels part
        right, up = max(0.3, 1.15 * top["previous_token"]), max(0.15, 1.15 * top["induction"])
        ax.set_xlim(-0.04 * right, right)
        ax.set_ylim(-0.04 * up, up)
        ax.set_title(text, fontsize=10)
        ax.locator_params(nbins=4)
        # the untrained heads sit almost on one point: say how many are there
        u = np.column_stack([r["previous_token"].ravel(), r["induction"].ravel()])
        centre = np.median(u, axis=0)
        near = int((np.abs(u - centre) <= [0.02 * right, 0.02 * up]).all(1).sum())
        if near > len(u) // 2:
            ax.annotate(
                f"{near} untrained\nheads", centre, xytext=(centre[0] + 0.25 * right, centre[1] + 0.3 * up),
                fontsize=9, arrowprops=dict(arrowstyle="-", color="#333333", lw=0.8),
            )  # fmt: skip
    axes[0].legend(fontsize=9, loc="upper right", handletextpad=0.2, borderpad=0.3)
    bx = axes[-1]
    x = np.arange(2 * len(texts))
    for k, (name, c) in enumerate((("untrained", UNTRAINED), ("trained", TRAINED))):
        y = [heads[t][name][f"loss_{which}"] for t in texts for which in ("first", "second")]
        bx.bar(x + (k - 0.5) * 0.38, y, 0.38, color=c, label=name)
    bx.set_xticks(x, ["1st", "2nd"] * len(texts), fontsize=9)
    groups = bx.secondary_xaxis(-0.12)  # which text each pair of copies is
    groups.set_xticks([2 * i + 0.5 for i in range(len(texts))], [t.split()[-1] for t in texts], fontsize=9)
    groups.tick_params(length=0)
    groups.spines["bottom"].set_visible(False)
    bx.set_ylabel("loss (nats/token)")
    bx.set_title("loss on each copy", fontsize=10)
    bx.set_ylim(0, 1.3 * max(bx.get_ylim()[1], 1))  # room above the bars for the legend
    bx.legend(fontsize=9, loc="upper right", frameon=False)
    provenance(fig, "cpu", seed, "trained ANDREA")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@_styled
def mlp_figure(trained: dict, untrained: dict, window: float = 3.0, seed: Optional[int] = 0):
    """The MLP pre-activations of all blocks as a histogram (the |x| < 3 window shaded), and per
    block the fraction of activations near zero."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(COLUMN_INCHES, 3.3))
    centres = (trained["bins"][1:] + trained["bins"][:-1]) / 2
    ax.axvspan(-window, window, color="#f2f2f2", lw=0, zorder=0)
    ax.plot(centres, trained["histogram"], color=TRAINED, lw=1.8, label="trained")
    ax.plot(centres, untrained["histogram"], color=UNTRAINED, lw=1.4, ls="--", label="untrained")
    ax.set_yscale("log")
    ax.set_xlabel("pre-activation x (shaded: |x| < 3)")
    ax.set_ylabel("fraction of values per bin")
    ax.legend(fontsize=8)
    ax.set_title("where GELU's inputs lie", fontsize=10)
    blocks = np.arange(1, len(trained["near_zero"]) + 1)
    bx.plot(blocks, trained["near_zero"], "o-", ms=3.5, color=TRAINED, label="trained")
    bx.plot(blocks, untrained["near_zero"], "s--", ms=3.5, color=UNTRAINED, label="untrained")
    bx.set_xlabel("block")
    bx.set_ylabel("share with |GELU(x)| < 0.05")
    bx.set_ylim(0, 1)
    bx.legend(fontsize=8)
    bx.set_title("activations that are off", fontsize=10)
    provenance(fig, "cpu", seed, "trained ANDREA")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@_styled
def probes_figure(results: dict, seed: Optional[int] = 0):
    """One panel per probing task: balanced accuracy at every boundary, the trained model (solid),
    the untrained one (dashed) and the trained model's control task (dotted), chance as a thin line;
    the seeds' range as a band around each line, the band the source predicts named in the title.
    Three panels a row, the column's width; the legend under the panels."""
    ncols = 3
    rows = (len(TASKS) + ncols - 1) // ncols
    fig, axes = plt.subplots(rows, ncols, figsize=(COLUMN_INCHES, 2.55 * rows + 0.3), squeeze=False, sharex=True)
    x = np.arange(13)
    lines = (
        ("trained", "task", TRAINED, "o", "-", "trained model"),
        ("untrained", "task", UNTRAINED, "s", "--", "untrained model"),
        ("trained", "control", PALETTE[3], None, ":", "trained model,\ncontrol task"),
    )
    for k, (ax, task) in enumerate(zip(axes.ravel(), TASKS)):
        _shade_bands(ax)
        for model, what, c, m, ls, label in lines:
            acc = results[task.name][model][what]
            ax.fill_between(x, acc.min(0), acc.max(0), color=c, alpha=0.2, lw=0)
            ax.plot(x, acc.mean(0), marker=m, ms=3, ls=ls, color=c, lw=1.4, label=label)
        ax.axhline(1 / len(task.classes), color="#444444", lw=0.8)
        kind = "calibration: " if task.name in CALIBRATIONS.values() else "predicted: "
        ax.set_title(f"{task.name}\n({kind}{task.band})", fontsize=10)
        if k % ncols == 0:
            ax.set_ylabel("balanced accuracy")
        if k + ncols >= len(TASKS):  # the lowest panel of its column shows the boundaries' numbers
            ax.tick_params(labelbottom=True)
        if k == len(TASKS) - 1:  # named once: stacked on a phone, a name under every column's last ran
            ax.set_xlabel("boundary")  # into the next panel's title
        ax.set_xticks([0, 3, 6, 9, 12])
        ax.locator_params(axis="y", nbins=4)
    for ax in axes.ravel()[len(TASKS) :]:
        fig.delaxes(ax)  # an empty cell (switched off, it still widened the phone's stacked figure)
    handles, labels = axes[0][0].get_legend_handles_labels()
    # under the panels: a legend in the free cell spilled over that cell's edge
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=10, frameon=False, bbox_to_anchor=(0.5, 0.02))
    n = results[TASKS[0].name]["trained"]["task"].shape[0]
    provenance(fig, "cpu", seed, f"trained ANDREA, {n} probe seeds")
    fig.tight_layout(rect=(0, 0.09, 1, 1), h_pad=1.2)
    return fig


@_styled
def located_figure(models: Sequence[dict], shipped: Optional[dict] = None, seed: Optional[int] = 0):
    """Version 5's probes (``andrea.trained.locate``): one panel per task, the trained probe's accuracy (mean
    over probe seeds) at every boundary on each deciding model and, grey, the shipped model, with the boundary
    where each reaches ``locate.SHARE`` of its rise marked by a large dot. ``models``: per deciding model (in
    ``locate.MODEL_SEEDS`` order), the stored probes ({task: {"trained": {"task": (seeds, 13)}}})."""
    from . import locate

    tasks = locate.tasks()
    ncols = 3
    rows = (len(tasks) + ncols - 1) // ncols
    fig, axes = plt.subplots(rows, ncols, figsize=(COLUMN_INCHES, 2.55 * rows + 0.3), squeeze=False, sharex=True)
    x = np.arange(13)
    series = [
        (f"new model, seed {s}", found, PALETTE[i], "-") for i, (s, found) in enumerate(zip(locate.MODEL_SEEDS, models))
    ]
    if shipped is not None:
        series.append(("shipped model\n(decides nothing)", shipped, REFERENCE_GREY, "--"))
    for k, (ax, task) in enumerate(zip(axes.ravel(), tasks)):
        _shade_bands(ax)
        for label, found, c, ls in series:
            acc = np.asarray(found[task.name]["trained"]["task"]).mean(0)
            ax.plot(x, acc, ls=ls, color=c, lw=1.4, label=label)
            r = locate.reading(task, found[task.name])
            if r.boundary is not None:  # hollow where one of the reading's checks failed
                face = c if r.label != "inconclusive" else "white"
                ax.plot([r.boundary], [acc[r.boundary]], "o", ms=6, color=c, mfc=face, mew=1.5)
        kind = "calibration: " if task.name in locate.CALIBRATIONS.values() else "predicted: "
        ax.set_title(f"{task.name}\n({kind}{task.band})", fontsize=10)
        if k % ncols == 0:
            ax.set_ylabel("balanced accuracy")
        if k + ncols >= len(tasks):
            ax.tick_params(labelbottom=True)
        if k == len(tasks) - 1:
            ax.set_xlabel("boundary")
        ax.set_xticks([0, 3, 6, 9, 12])
        ax.locator_params(axis="y", nbins=4)
    for ax in axes.ravel()[len(tasks) :]:
        fig.delaxes(ax)
    from matplotlib.lines import Line2D

    handles, labels = axes[0][0].get_legend_handles_labels()
    share = f"{100 * locate.SHARE:.0f} % of the rise"
    handles += [
        Line2D([], [], marker="o", ls="", color="#444444", ms=6, mew=1.5),
        Line2D([], [], marker="o", ls="", color="#444444", ms=6, mew=1.5, mfc="white"),
    ]
    labels += [share, "a check failed"]
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=10, frameon=False, bbox_to_anchor=(0.5, 0.02))
    n = np.asarray(models[0][tasks[0].name]["trained"]["task"]).shape[0]
    provenance(fig, "cpu", seed, f"{len(models)} new models and the shipped one, {n} probe seeds each")
    fig.tight_layout(rect=(0, 0.13, 1, 1), h_pad=1.2)
    return fig
