"""The attention chapter's figures: one head's queries, keys and values, its scores and weights, one
token's mix, and every head of a block (``andrea.measure.attention`` measures what they draw)."""

from __future__ import annotations

from typing import Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .plots import PALETTE, REFERENCE_GREY, _styled, provenance


def token_labels(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each token as text for an axis, as the site's attention viewer writes it: a space shown as "␣"
    (so " the" and "the", two different tokens, look different), a newline as "↵", a tab as "⇥"."""
    out = []
    for i in ids:
        s = tokenizer.decode([int(i)])
        out.append(s.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥"))
    return out


def _limit(a: np.ndarray) -> float:
    m = float(np.nanmax(np.abs(a)))
    return m if m > 0 else 1.0


def _masked_cmap(name: str):
    """A colour map whose masked cells (NaN: the future a token cannot see) are light grey."""
    cmap = plt.get_cmap(name).copy()
    cmap.set_bad("#d9d9d9")
    return cmap


def _finish(fig, title: str, seed: Optional[int]):
    """The figures' common end: a title over all panels (if any), the provenance line, a tight layout."""
    if title:
        fig.suptitle(title, fontsize=11)
    provenance(fig, "cpu", seed, "trained ANDREA")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@_styled
def qkv_figure(steps: dict, labels: Sequence[str], title: str = "", seed: Optional[int] = 0):
    """Three heat maps side by side: the head's queries, keys and values, one row per token."""
    T, hs = steps["q"].shape
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 0.26 * T + 1.6), sharey=True)
    for ax, name, what in zip(axes, ("q", "k", "v"), ("queries q", "keys k", "values v")):
        a = steps[name]
        lim = _limit(a)
        im = ax.imshow(a, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
        ax.set_title(what, fontsize=11)
        ax.set_xlabel(f"number 1 to {hs} of the head")
        ax.set_xticks([0, hs - 1], ["1", str(hs)])
        ax.grid(False)
        fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02)
    axes[0].set_yticks(range(T), labels, fontsize=9)
    axes[0].set_ylabel("token")
    return _finish(fig, title, seed)


@_styled
def scores_figure(steps: dict, labels: Sequence[str], title: str = "", seed: Optional[int] = 0):
    """Two T x T heat maps: the scaled scores with the future masked (grey), and the weights the
    softmax makes of them. Rows are the token that looks (the query), columns the token looked at."""
    T = len(labels)
    masked = np.where(steps["mask"], np.nan, steps["scores"])
    # one set of row labels (the same tokens), left: the first colorbar's numbers would run into a second
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 6.2), sharey=True)
    cmap = _masked_cmap("viridis")  # the scores' own range: only differences within a row matter
    im0 = axes[0].imshow(
        masked, cmap=cmap, vmin=float(np.nanmin(masked)), vmax=float(np.nanmax(masked)), interpolation="nearest"
    )
    axes[0].set_title("scores q·k/√d, future masked (grey)", fontsize=11)
    fig.colorbar(im0, ax=axes[0], fraction=0.046, pad=0.03)
    w = np.where(steps["mask"], np.nan, steps["weights"])
    wmap = _masked_cmap("Blues")
    im1 = axes[1].imshow(w, cmap=wmap, vmin=0, vmax=float(np.nanmax(w)), interpolation="nearest")
    axes[1].set_title("weights: softmax of each row", fontsize=11)
    fig.colorbar(im1, ax=axes[1], fraction=0.046, pad=0.03)
    for ax in axes:
        ax.set_xticks(range(T), labels, rotation=90, fontsize=9)
        ax.set_yticks(range(T), labels, fontsize=9)
        ax.set_xlabel("token looked at (key)")
        ax.grid(False)
    axes[0].set_ylabel("token that looks (query)")
    return _finish(fig, title, seed)


@_styled
def mix_figure(
    trained: np.ndarray, untrained: np.ndarray, labels: Sequence[str], title: str = "", seed: Optional[int] = 0
):
    """One query's weights over the tokens it can see, in the trained and in the untrained model,
    with uniform attention (1 / the number of visible tokens) as a dashed line."""
    n = len(trained)
    x = np.arange(n)
    fig, ax = plt.subplots(figsize=(7.2, 3.9))
    ax.bar(x - 0.2, untrained, 0.4, color=REFERENCE_GREY, hatch="//", edgecolor="white", label="untrained")
    ax.bar(x + 0.2, trained, 0.4, color=PALETTE[0], label="trained")
    ax.axhline(1 / n, color="#444444", ls="--", lw=1.2, label=f"uniform, 1/{n}")
    ax.set_xticks(x, labels[:n], rotation=90, fontsize=9)
    ax.set_ylabel("attention weight")
    ax.set_xlabel("token looked at")
    ax.legend(fontsize=9, loc="upper left")
    if title:
        ax.set_title(title, fontsize=11)
    return _finish(fig, "", seed)


@_styled
def heads_figure(maps: np.ndarray, entropy: Sequence[float], title: str = "", seed: Optional[int] = 0):
    """Every head of one block as a small T x T heat map of its weights (``maps``: (H, T, T)), each
    titled with its evenness (normalised entropy, 1 = spread evenly)."""
    H, T, _ = maps.shape
    cols = 3
    rows = (H + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(8.4, 2.9 * rows), squeeze=False)
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    wmap = _masked_cmap("Blues")
    for h, ax in enumerate(axes.ravel()):
        if h >= H:
            ax.remove()
            continue
        ax.imshow(np.where(mask, np.nan, maps[h]), cmap=wmap, vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"head {h + 1}: evenness {entropy[h]:.2f}", fontsize=11)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    return _finish(
        fig, title or "each row: a token that looks (top to bottom) at the tokens before it (left to right)", seed
    )
