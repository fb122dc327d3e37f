"""The book's figure helpers."""

import matplotlib
import pytest

matplotlib.use("Agg")

from andrea.views import plots  # noqa: E402


def _provenance_texts(fig):
    return [t.get_text() for t in fig.texts if "torch" in t.get_text()]


def test_a_restated_provenance_replaces_the_figures_own():
    """A chapter that restates device and seeds under a figure function's plot gets one line, not two
    drawn on top of each other."""
    rows = [{"depth": d, "arm": a, "seed": s, "final_val_loss": 1.0 + s} for d in (1, 2) for a in "ab" for s in (0, 1)]
    fig = plots.seeds_figure(rows, x="depth", arm="arm")
    assert len(_provenance_texts(fig)) == 1
    plots.provenance(fig, "cpu", None, "seeds 0-1")
    texts = _provenance_texts(fig)
    assert len(texts) == 1 and texts[0].endswith("seeds 0-1")


def test_same_look_names_lines_a_reader_cannot_tell_apart():
    import matplotlib.pyplot as plt

    from andrea.views.legibility import same_look

    fig, (a, b, c) = plt.subplots(1, 3)
    a.plot([0, 1], [0, 1], color="C0", label="warmup")
    a.plot([0, 1], [1, 0], color="C0", label="no warmup")  # same colour, same style: flagged
    b.plot([0, 1], [0, 1], color="C0", label="warmup")
    b.plot([0, 1], [1, 0], color="C0", ls="--", label="no warmup")  # dashed: distinct
    for s in range(3):
        c.plot([0, 1], [s, s + 1], color="C1")  # one arm's seeds: one series
    c.axhline(0.5, color="C1")  # a reference line, not a series
    a.legend()
    b.legend()
    problems = same_look(fig)
    assert problems == ["axis 0: 'warmup' and 'no warmup' look the same"]
    fig2, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color="C0")
    ax.plot([0, 1], [1, 0], color="C1")  # two kinds of line, nothing names them
    assert same_look(fig2) == ["axis 0: 2 kinds of line and no legend or label"]
    ax.legend(["a", "b"])
    assert same_look(fig2) == []
    # a legend names only the lines it has handles for: one axis's legend does not name another's lines
    fig3, (d, e) = plt.subplots(1, 2)
    d.plot([0, 1], [0, 1], color="C0", label="pre")
    d.plot([0, 1], [1, 0], color="C1", label="post")
    e.plot([0, 1], [0, 1], color="C2")
    e.plot([0, 1], [1, 0], color="C3")
    d.legend()
    assert same_look(fig3) == ["axis 1: 2 kinds of line and no legend or label"]
    e.lines[0].set_color("C0"), e.lines[1].set_color("C1")  # the same two arms: the shared legend names them
    assert same_look(fig3) == []
    plt.close("all")


def test_book_png_raises_small_fonts_and_records_its_audit():
    import matplotlib.pyplot as plt

    from andrea.views.figure_png import book_png, png_audit
    from andrea.views.legibility import MIN_FONT_PX, SHOWN_AT_MOST_PX

    fig, ax = plt.subplots(figsize=(12, 3), dpi=100)  # 1200 px wide: shown at 640, scale 0.53
    ax.plot([0, 1], [0, 1], label="x")
    ax.legend(fontsize=6)
    ax.tick_params(labelsize=7)
    data = book_png(fig)
    audit = png_audit(data)
    import io

    from PIL import Image

    width = Image.open(io.BytesIO(data)).width
    shown = float(audit["andrea:min-font-px"]) * min(1, SHOWN_AT_MOST_PX / width)
    assert MIN_FONT_PX <= shown < MIN_FONT_PX * 1.15, (audit, width)
    assert audit["andrea:same-look"] == "[]"
    plt.close(fig)
    assert png_audit(_plain_png()) == {}


def test_a_legend_over_the_data_moves_off_it_and_the_audit_says_where_one_is_left():
    import json

    import matplotlib.pyplot as plt
    import numpy as np

    from andrea.views.figure_png import book_png, png_audit
    from andrea.views.legibility import legends_off_data, legends_on_data

    x = np.linspace(0, 1, 50)
    fig, ax = plt.subplots()
    ax.plot(x, 1 - x, label="falls")  # from the upper left corner to the lower right one
    ax.plot(x, 0.5 + 0 * x, label="flat")
    ax.legend(loc="upper left")  # on the falling line
    assert legends_on_data(fig) and "axis 0" in legends_on_data(fig)[0]
    legends_off_data(fig)
    assert legends_on_data(fig) == []
    assert ax.get_legend()._loc != 2  # 2: "upper left"
    # nowhere free inside: the legend goes below everything drawn
    fig2, ax2 = plt.subplots(figsize=(3, 2))
    for k in range(12):
        ax2.plot(x, (x * (k + 1)) % 1, label=f"seed {k}")
    ax2.set_xlabel("step")
    ax2.legend()
    assert json.loads(png_audit(book_png(fig2))["andrea:legend-on-data"]) == []
    r = fig2.canvas.get_renderer()
    assert ax2.get_legend().get_window_extent(r).y1 < ax2.xaxis.label.get_window_extent(r).y0
    # a figure legend drawn over an axis is recorded, not moved
    fig3, ax3 = plt.subplots()
    ax3.plot(x, x, label="rises")
    fig3.legend(loc="center")
    left = json.loads(png_audit(book_png(fig3))["andrea:legend-on-data"])
    assert len(left) == 1 and left[0].startswith("axis 0: figure legend 0 covers"), left
    plt.close("all")


def test_a_legend_across_its_panels_edge_is_recorded_and_the_phone_gives_a_legend_from_below_one_column():
    """The primer's paired figure: a two-column legend anchored under the right panel. On a phone the
    panels stack and the legend moves into its panel; with two columns it was wider than the panel and
    lay across its edge, over the tick labels (no plotted point under it). The audit records such a
    legend, and the phone's drawing gives it one column."""
    import json

    import matplotlib.pyplot as plt
    import numpy as np

    from andrea.views import plots
    from andrea.views.figure_png import png_audit
    from andrea.views.legibility import legends_on_data
    from andrea.views.phone import phone_png

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1], label="a long label for a narrow panel")
    ax.plot([0, 1], [1, 0], label="another long label")
    ax.legend(loc="center left", ncols=2, bbox_to_anchor=(0.0, 0.5))  # by hand, across the right edge
    assert any("spills over the panel's edge" in b for b in legends_on_data(fig)), legends_on_data(fig)
    fig2, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.4))
    for k in range(5):
        left.plot([0, 1], [2.6 + 0.05 * k, 2.5 + 0.02 * k], marker="o")
    left.set_xticks([0, 1], ["LayerScale off", "λ₀ = 1e-5"])
    d = np.array([0.12, 0.07, 0.17, 0.19, 0.29])
    right.scatter(range(5), d, label="one seed")
    right.errorbar(
        5.5, d.mean(), yerr=[[0.1], [0.1]], color="black", marker="s", capsize=5, label="mean, 95 % interval"
    )
    right.axhline(0, color="grey", lw=1, ls=":")
    right.set_xlabel("seed")
    right.set_ylabel("off minus on (nats)")
    right.set_title("the difference, seed by seed", fontsize=10)
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, fontsize=9, frameon=False)
    plots.provenance(fig2, "cpu", None, "stored results 'x' (45 runs, seeds 0-4), torch 2.13.0, cpu, 2026-12-01")
    fig2.tight_layout(rect=(0, 0.03, 1, 1))
    desktop = right.get_legend()
    audit = png_audit(phone_png(fig2))
    assert json.loads(audit["andrea:legend-on-data"]) == [], audit["andrea:legend-on-data"]
    assert right.get_legend() is desktop and desktop._ncols == 2  # the desktop figure is given back as it was
    plt.close("all")


def _plain_png():
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def test_a_table_takes_rows_by_column_name_and_never_prints_its_header_as_a_row():
    from andrea.views.notebook import table

    t = table([{"task": "position", "band": "early"}, {"band": "late", "task": "meaning"}], ["task", "band"])
    assert t.rows == [["position", "early"], ["meaning", "late"]]
    assert "<td>task</td>" not in t._repr_html_()
    with pytest.raises(ValueError, match="lacks the columns"):
        table([{"task": "position"}], ["task", "band"])


def test_a_phone_gets_the_panels_stacked_legible_in_its_column_and_the_figure_is_put_back():
    """Issue 33: a figure's PNG carries a phone rendering (panels in one row become one column, drawn at
    the phone's column width, fonts at least MIN_FONT_PX as shown there); the site's build takes it out
    (split_phone). The figure itself is left as it was."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    from andrea.views.figure_png import book_png, png_audit, split_phone
    from andrea.views.legibility import MIN_FONT_PX, PHONE_PX

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for i, ax in enumerate(axes):
        ax.plot(range(10), [x * (i + 1) for x in range(10)], label=f"arm {i}")
        ax.set_title(f"panel {i}", fontsize=8)
        ax.tick_params(labelsize=6)
    twin = axes[1].twinx()  # a twin stays with its panel
    twin.plot(range(10), range(10, 0, -1), color="grey")
    fig.tight_layout()
    size, places = fig.get_size_inches().copy(), [ax.get_position().bounds for ax in fig.axes]
    desk, phone = split_phone(book_png(fig))
    assert phone is not None and "andrea:phone" not in png_audit(desk) and png_audit(desk)["andrea:min-font-px"]
    wide, tall = Image.open(io.BytesIO(desk)).size, Image.open(io.BytesIO(phone)).size
    assert wide[0] > wide[1] and tall[1] > 2 * tall[0], (wide, tall)  # one row, then one column
    shown = float(png_audit(phone)["andrea:min-font-px"]) * min(1, PHONE_PX / tall[0])
    assert shown >= MIN_FONT_PX - 0.05, (shown, tall)
    assert list(fig.get_size_inches()) == list(size) and [ax.get_position().bounds for ax in fig.axes] == places
    assert split_phone(desk) == (desk, None)
    plt.close(fig)


def test_texts_drawn_over_each_other_are_found_and_the_phone_lays_out_above_its_foot():
    """legibility.texts_collide names two texts whose boxes overlap (a note on a bar's top label), and
    passes the same figure with the note moved; the phone's rendering of a bar chart with a long x label
    and a provenance line has no collision (its raised fonts are laid out again above the foot)."""
    import json

    import matplotlib.pyplot as plt

    from andrea.views import plots
    from andrea.views.figure_png import png_audit
    from andrea.views.legibility import texts_collide
    from andrea.views.phone import phone_png

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar([0, 1], [92.3, 98.0])
    ax.text(1, 99.5, "98.0 M", ha="center")
    note = ax.text(1.3, 99.5, "documents' total: ~120 M", ha="right")
    ax.set_ylim(0, 135)
    assert any("documents' total" in b and "98.0 M" in b for b in texts_collide(fig)), texts_collide(fig)
    note.set_position((1.3, 125))
    assert texts_collide(fig) == []
    fig2, ax2 = plt.subplots(figsize=(7, 6))
    ax2.barh(range(11), range(1, 12))
    ax2.set_yticks(range(11), [f"a long name for bar number {k}  (768,)" for k in range(11)])
    ax2.set_xlabel("L2 norm of this token's vector")
    plots.provenance(fig2, "cpu", 0)
    fig2.tight_layout(rect=(0, 0.03, 1, 1))
    assert json.loads(png_audit(phone_png(fig2))["andrea:text-collisions"]) == []
    plt.close("all")


def test_crowded_log_tick_labels_are_thinned_not_all_dropped():
    """A short log panel whose minor labels (2, 3, 4, 6 x 10^k) run into each other keeps some of them
    (legibility.untangle_ticks: 2, 3 and 5 x 10^k, then fewer), so that the axis still reads, and none
    collide afterwards."""
    import matplotlib.pyplot as plt

    from andrea.views.legibility import _drawn_tick_labels, _ticks_collide, untangle_ticks

    fig, ax = plt.subplots(figsize=(3.2, 2.2))
    ax.semilogy(
        range(13), [5e-4, 2e-5, 2.1e-5, 2.6e-5, 2.9e-5, 2.4e-5, 2e-5, 1.8e-5, 1.6e-5, 1.5e-5, 1.4e-5, 1.4e-5, 1.5e-5]
    )
    ax.tick_params(labelsize=14)
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert _ticks_collide(ax.yaxis, renderer)  # the case is crowded
    untangle_ticks(fig)
    assert not _ticks_collide(ax.yaxis, renderer)
    assert len(_drawn_tick_labels(ax.yaxis)) >= 3, [t.get_text() for t in _drawn_tick_labels(ax.yaxis)]
    plt.close("all")


def test_the_stacked_note_goes_only_on_figures_whose_phone_rendering_stacked_panels(tmp_path):
    """Round 2's reader: a one-panel figure whose caption says "left bar" carried the note "on a phone the
    panels are stacked". phone_png records how many panels it stacked; the site's build (book/_ext,
    phone_figures) adds the note's class only where it stacked two or more."""
    import importlib.util
    from pathlib import Path

    import matplotlib.pyplot as plt

    from andrea.views.figure_png import book_png, png_audit, split_phone

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("andrea_site", root / "book" / "_ext" / "andrea_site.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    one, _ = plt.subplots(figsize=(6, 3))
    one.axes[0].bar([0, 1], [1, 2])
    three, _ = plt.subplots(1, 3, figsize=(10, 3))
    images = tmp_path / "_images"
    images.mkdir()
    for name, fig in (("one", one), ("three", three)):
        png = book_png(fig)
        want = "0" if name == "one" else "3"
        assert png_audit(split_phone(png)[1])["andrea:stacked-panels"] == want
        (images / f"{name}.png").write_bytes(png)
    html = "".join(
        f'<figure class="align-default"><img src="_images/{n}.png"><figcaption>Left: a bar.</figcaption></figure>'
        for n in ("one", "three")
    )
    (tmp_path / "page.html").write_text(html, encoding="utf-8")
    assert site.phone_figures(tmp_path) == 2
    out = (tmp_path / "page.html").read_text(encoding="utf-8")
    figures = out.split("</figure>")
    assert "andrea-stacked" not in figures[0] and "one.phone.png" in figures[0]
    assert "andrea-stacked" in figures[1] and "three.phone.png" in figures[1]
    plt.close("all")
