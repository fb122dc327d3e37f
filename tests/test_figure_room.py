"""Issue 47, the reader's test: the room a figure gives its data on a phone and a desktop (the narrowest
plotted area, recorded in every PNG's audit), stacked panels that keep their own x numbers, and texts of
two panels that run together."""

import io
import json

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from andrea.views.figure_png import book_png, png_audit, split_phone  # noqa: E402
from andrea.views.legibility import MIN_PLOT_PX, PHONE_PX  # noqa: E402


@pytest.fixture(scope="module")
def full():
    import torch

    from andrea import ANDREA_120M, Andrea

    torch.manual_seed(0)
    return Andrea(ANDREA_120M).eval()


def _budget(full):  # Fig 4.2, as chapter 4 draws it
    from andrea import count_parameters
    from andrea.views import plots

    counts = count_parameters(full)
    parts = {
        "12 MLPs": counts["mlp"],
        "12 attention sublayers": counts["attention"],
        "token embedding (= output head)": counts["token_embedding"],
        "position embedding": counts["position_embedding"],
        "25 LayerNorms": counts["norms"] + counts["final_norm"],
    }
    values = [v / 1e6 for v in parts.values()]
    return plots.bar_figure(list(parts), values, xlabel="parameters (millions)", fmt="{:.2f} M", title="budget")


def _trace(full):  # Fig 6.2: one token through block 1, on a batch of token ids
    import torch

    from andrea.measure import analysis
    from andrea.views.pages import ch6

    idx = torch.randint(0, full.config.vocab_size, (1, 48), generator=torch.Generator().manual_seed(0))
    return ch6.trace_figure(analysis.trace_token(full, idx, 40))


def _full_budget(full):  # Fig 6.1
    from andrea import count_parameters
    from andrea.views.pages import ch6

    return ch6.budget_figure(count_parameters(full))


def _tokens(full):  # Fig 2.1
    import torch

    from andrea.views import plots

    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(0)) * 3 + 1
    return plots.token_stats_figure(x, torch.nn.functional.layer_norm(x, (128,)))


def _probes(full):  # version 4's figure on the evidence page, from the shipped probes
    from andrea.trained import figures
    from andrea.trained import model as trained

    return figures.probes_figure(trained.probe_results())


def _located(full):  # Fig 8.6 (rule version 5), from the stored probes of the new models and the shipped one
    from andrea.trained import figures, replicas

    v5 = replicas.stored()
    return figures.located_figure(v5["models"], v5["shipped"])


def _init(full):  # Fig 3.1, on a smaller stack than the chapter's (the layout is the same)
    from andrea.measure import analysis
    from andrea.views.pages import ch3

    inits = {"GPT-2 init": "gpt2", "Xavier init": "xavier"}
    return ch3.init_figure({n: analysis.compare_norms(depth=6, d_model=32, init=i) for n, i in inits.items()}, "cpu")


def _steps(T: int, hs: int = 32):
    rng = np.random.default_rng(0)
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    scores = rng.normal(size=(T, T))
    weights = np.exp(scores) * ~mask
    weights /= weights.sum(1, keepdims=True)
    qkv = {k: rng.normal(size=(T, hs)) for k in "qkv"}
    labels = [" dictionary", " sorted", " the", " keys", ".", "The"] * 4
    return {**qkv, "mask": mask, "scores": scores, "weights": weights}, labels[:T]


def _scores(full):  # the attention page's Fig 2 and chapter 8's: square heat maps with a colorbar each
    from andrea.views import attention_figures

    return attention_figures.scores_figure(*_steps(13))


def _qkv(full):  # the attention page's Fig 1: three tall heat maps with a colorbar each
    from andrea.views import attention_figures

    return attention_figures.qkv_figure(*_steps(21))


FIGURES = {
    "4.2": _budget,
    "6.2": _trace,
    "6.1": _full_budget,
    "2.1": _tokens,
    "8.6": _located,
    "8.6 (version 4)": _probes,
    "3.1": _init,
    "attention scores": _scores,
    "attention q, k, v": _qkv,
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_book_figure_gives_its_narrowest_panel_room_on_a_phone(full, name):
    """Issue 47: "no plotted area narrower than 200 px at 390 px". Every figure's PNG records its narrowest
    plotted area (andrea:min-plot-px, desktop and phone renderings); on the phone, as shown in its column,
    it is at least MIN_PLOT_PX. Fig 4.2's and 6.2's long bar names squeezed their bars to a strip; the
    attention heat maps lost a sixth of the column to the colorbar beside each (on a phone it goes under)."""
    import matplotlib.pyplot as plt
    from PIL import Image

    fig = FIGURES[name](full)
    desk, phone = split_phone(book_png(fig))
    plt.close(fig)
    assert phone is not None
    for which, data in (("desktop", desk), ("phone", phone)):
        assert float(png_audit(data)["andrea:min-plot-px"]) > 0, which
    width = Image.open(io.BytesIO(phone)).width
    shown = float(png_audit(phone)["andrea:min-plot-px"]) * min(1.0, PHONE_PX / width)
    assert shown >= MIN_PLOT_PX, f"Fig {name}: narrowest panel {shown:.0f} px on a phone"
    assert json.loads(png_audit(phone)["andrea:text-collisions"]) == [], name


def test_the_plot_width_recorded_is_the_panels_own_in_the_pngs_pixels():
    """andrea:min-plot-px is the narrowest visible panel's width (a colorbar and a switched-off panel are
    not plotted areas), in the pixels of the PNG (saved at another dpi than the figure's)."""
    import matplotlib.pyplot as plt

    from andrea.views.legibility import min_plot_px

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(9, 3), dpi=72, width_ratios=[3, 2, 1])
    fig.colorbar(a.imshow(np.eye(3)), ax=a)
    c.axis("off")
    fig.canvas.draw()
    assert min_plot_px(fig, 144) == pytest.approx(b.bbox.width * 2)
    plt.close(fig)


def test_stacked_panels_each_show_their_x_numbers_on_a_phone():
    """Round 3's reader: Fig 8.6 stacked on a phone kept the x numbers only under the panels that were
    lowest in their column on the desktop (shared x). Stacked, every panel shows its own, as a shared y
    already did; the desktop figure keeps its shared axis."""
    import matplotlib.pyplot as plt

    from andrea.views.legibility import _drawn_tick_labels
    from andrea.views.phone import phone_png

    fig, axes = plt.subplots(2, 3, figsize=(9, 5), sharex=True, sharey=True)
    for ax in axes.flat:
        ax.plot(range(13), np.linspace(0, 1, 13))
    fig.tight_layout()
    seen: list = []
    save = fig.savefig

    def spy(*args, **kwargs):  # what the phone's PNG draws, at the moment it is saved
        seen.extend((len(_drawn_tick_labels(ax.xaxis)), len(_drawn_tick_labels(ax.yaxis))) for ax in fig.axes)
        return save(*args, **kwargs)

    fig.savefig = spy
    phone_png(fig)
    assert len(seen) == 6 and all(x > 0 and y > 0 for x, y in seen), seen
    assert [len(_drawn_tick_labels(ax.xaxis)) > 0 for ax in axes.flat] == [False] * 3 + [True] * 3
    plt.close(fig)


def test_texts_of_two_panels_that_almost_touch_are_found_and_laid_apart():
    """Fig 3.1 at 1280 px: fonts raised to be legible as shown grew the top row's x labels onto the bottom
    row's titles without overlapping them, so texts_collide passed it. Two panels' texts closer than
    PANEL_GAP_EM of their font are now reported, and book_png lays such a figure out again: its audit is
    clean, and the figure keeps its own layout afterwards."""
    import matplotlib.pyplot as plt

    from andrea.views.legibility import legible, texts_collide

    def draw():
        fig, axes = plt.subplots(2, 3, figsize=(11, 6.4))
        for ax in axes.flat:
            ax.plot(range(25), np.linspace(1, 2, 25))
            ax.set_title("gradient at each boundary, Xavier init", fontsize=9)
            ax.set_xlabel("block boundary (0 = embeddings)")
        fig.tight_layout()
        return fig

    fig = draw()
    assert texts_collide(fig) == []  # as drawn, the rows are apart
    legible(fig)  # the fonts the desktop shows it with
    close = texts_collide(fig)
    assert close and all(c.endswith("(two panels) almost touch") for c in close), close
    assert any("block boundary" in c and "gradient at each" in c for c in close), close
    plt.close(fig)
    fig = draw()
    places = [ax.get_position().bounds for ax in fig.axes]
    desk, _ = split_phone(book_png(fig))
    assert json.loads(png_audit(desk)["andrea:text-collisions"]) == []
    assert [ax.get_position().bounds for ax in fig.axes] == places
    plt.close(fig)


def test_the_packages_sentences_name_panels_by_their_titles_not_by_their_places():
    """Round 3's reader: the sentences under Fig 2.4 said "bottom right" and "top right", wrong on a phone,
    where the panels are stacked. No sentence the package writes (its string constants, docstrings and
    legend locations such as "upper right" aside) names a panel by its place; captions, which the site
    annotates on a phone, are not the package's."""
    import ast
    import re
    from pathlib import Path

    locations = {"best", "upper right", "upper left", "lower left", "lower right", "right", "center left"}
    locations |= {"center right", "lower center", "upper center", "center"}
    place = re.compile(
        r"\b(top|bottom|upper|lower)[ -](left|right)\b|\b(left|right|middle|top|bottom|upper|lower) "
        r"(panel|row|column|chart|plot)s?\b|\((left|right|top|bottom)\)",
        re.IGNORECASE,
    )
    found = []
    for path in sorted((Path(__file__).resolve().parents[1] / "andrea").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if node.value.strip() not in locations and (m := place.search(node.value)):
                    found.append(f"{path.name}:{node.lineno} {m.group(0)!r}")
    assert found == [], f"sentences that name a panel by its place: {found}"


def test_the_source_arms_figure_marks_exactly_the_runs_the_declared_rule_counts_as_late():
    """Fig 2.4 (chapter 2's source arm): a black dot for each run the rule counts (``twoway``'s late break),
    one per run, in the panel of its rate; the panel's title gives the same count."""
    import matplotlib.pyplot as plt

    from andrea.evidence.grids.ch2 import SOURCE_RATES
    from andrea.views.pages import ch2_source

    fig = ch2_source.source_figure()
    for ax, lr in zip(fig.axes, SOURCE_RATES):
        dots = [ln for ln in ax.lines if ln.get_marker() == "o"]
        counted = sum(ch2_source.late(r) for norm in ("none", "pre") for r in ch2_source.runs(norm, lr))
        assert len(dots) == counted, (lr, len(dots), counted)
        k = sum(ch2_source.late(r) for r in ch2_source.runs("none", lr))
        assert ax.get_title().split(": ")[1].startswith(f"{k} of"), ax.get_title()
    plt.close(fig)
