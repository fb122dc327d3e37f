"""Chapter 8's figures (andrea.trained.figures) fit the text column, so that their text is legible as shown,
and the heads figure shows the untrained heads over the trained ones (issue 47's reader: Figs 8.5 and 8.6 were
shown at half their size, and Fig 8.3 hid the untrained heads under the trained dots)."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from andrea.trained import figures  # noqa: E402
from andrea.trained.probes import TASKS  # noqa: E402
from andrea.views.figure_png import book_png, png_audit  # noqa: E402
from andrea.views.legibility import MIN_FONT_PX, SHOWN_AT_MOST_PX  # noqa: E402

COLUMN_PX = 780  # a figure this wide or less is shown at 0.86 of its size or more in the 672 px column


def _heads(rng):
    def one(scale):
        return {
            "previous_token": rng.uniform(0, 0.3 * scale, (12, 6)),
            "induction": rng.uniform(0, 0.1 * scale, (12, 6)),
            "loss_first": 9.0,
            "loss_second": 8.0,
        }

    return {t: {"trained": one(1.0), "untrained": one(0.01)} for t in ("random tokens", "held-out prose")}


def _probes(rng):
    def acc():
        return rng.uniform(0.3, 0.9, (5, 13))

    return {t.name: {m: {"task": acc(), "control": acc()} for m in ("trained", "untrained")} for t in TASKS}


def _pairs(n):
    x = np.arange(13)
    return [dict(title=f"panel {k}", xlabel="boundary", ylabel="y", x=x, trained=x + 1.0, untrained=x * 0 + 1.0)
            for k in range(n)]  # fmt: skip


def _mlp(rng):
    bins = np.linspace(-8, 8, 81)
    return {"bins": bins, "histogram": rng.uniform(1e-6, 0.1, 80), "near_zero": rng.uniform(0, 1, 12)}


def _located(rng):
    from andrea.trained import locate

    def found():
        def acc():
            return rng.uniform(0.3, 0.9, (5, 13))

        return {
            t.name: {"trained": {"task": acc(), "control": acc()}, "untrained": {"task": acc()}} for t in locate.tasks()
        }

    return figures.located_figure([found() for _ in locate.MODEL_SEEDS], found())


FIGURES = {
    "located": _located,
    "heads": lambda rng: figures.heads_figure(_heads(rng)),
    "probes": lambda rng: figures.probes_figure(_probes(rng)),
    "stream (2 a row)": lambda rng: figures.pair_figure(_pairs(4)),
    "norms (3 a row)": lambda rng: figures.pair_figure(_pairs(3), ncols=3),
    "mlp": lambda rng: figures.mlp_figure(_mlp(rng), _mlp(rng)),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_chapter_8_figure_fits_the_column_and_its_text_is_legible_as_shown(name):
    import matplotlib.pyplot as plt
    from PIL import Image

    fig = FIGURES[name](np.random.default_rng(0))
    data = book_png(fig)
    plt.close(fig)
    width = Image.open(io.BytesIO(data)).width
    assert width <= COLUMN_PX, f"{name}: {width} px wide, shown at {SHOWN_AT_MOST_PX / width:.2f} of its size"
    shown = float(png_audit(data)["andrea:min-font-px"]) * min(1.0, SHOWN_AT_MOST_PX / width)
    assert shown >= MIN_FONT_PX, f"{name}: smallest text {shown:.1f} px as shown"


def test_the_heads_figure_draws_the_untrained_heads_over_the_trained_ones():
    import matplotlib.pyplot as plt
    from matplotlib.collections import PathCollection

    fig = figures.heads_figure(_heads(np.random.default_rng(0)))
    for ax in fig.axes[:2]:
        dots = {c.get_label(): c for c in ax.collections if isinstance(c, PathCollection)}
        assert dots["untrained"].get_zorder() > dots["trained"].get_zorder()
        assert len(dots["untrained"].get_facecolors()) == 0 or dots["untrained"].get_facecolors()[0][3] == 0  # hollow
        assert ax.texts, "the untrained heads' cluster is named"
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["trained", "untrained"]
    plt.close(fig)
