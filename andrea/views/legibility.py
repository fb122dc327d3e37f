"""Legibility: what a reader's eyes need from a figure, measured on its artists.

``book_png`` draws a figure as the book shows it and records its audit (the smallest font, lines a
reader cannot tell apart, each named line's colour) in the PNG; ``png_audit`` reads it back (the
site's tests do, on every figure of the built book); ``show_legibly`` makes IPython draw every
figure through ``book_png``.
"""

from __future__ import annotations

import io

import matplotlib
import matplotlib.colors

MIN_FONT_PX = 9.0  # the smallest text a reader is shown, in CSS pixels
# The widest a figure is shown: the text column at 1280 px is 672 px; on a phone a figure keeps
# 640 px inside a box that scrolls sideways (book/_static/andrea.css), so its text stays legible.
SHOWN_AT_MOST_PX = 640


def _texts(fig):
    import matplotlib.text

    return [
        t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip() and t.get_alpha() != 0
    ]


def _look(line) -> tuple:
    marker = line.get_marker()
    marker = "" if marker in (None, "None", "", " ") else str(marker)
    return (matplotlib.colors.to_hex(line.get_color()), line.get_linestyle(), marker)


def same_look(fig) -> list[str]:
    """Lines of one axis that a reader cannot tell apart: two labelled series drawn in the same
    colour, line style and marker, or several differently drawn series with neither a legend nor a
    text label to name them. (Unlabelled lines of one look, e.g. one arm's seeds, are one series.)"""
    problems = []
    named = _legend_looks(fig)  # the looks that some legend of the figure names (a shared legend, too)
    for k, ax in enumerate(fig.axes):
        series = [
            ln
            for ln in ax.get_lines()
            if ln.get_visible() and len(ln.get_xdata()) >= 2 and ln.get_transform().contains_branch(ax.transData)
        ]
        seen: dict = {}
        for ln in series:
            label = ln.get_label()
            if label.startswith("_"):
                continue
            other = seen.setdefault(_look(ln), label)
            if other != label:
                problems.append(f"axis {k}: {other!r} and {label!r} look the same")
        looks = {_look(ln) for ln in series}
        if len(looks) > 1 and ax.get_legend() is None and not ax.texts and not looks <= named:
            problems.append(f"axis {k}: {len(looks)} kinds of line and no legend or label")
    return problems


def _legend_looks(fig) -> set:
    """The look of every line that a legend of ``fig`` (its own, or any axis's) shows a handle for."""
    from matplotlib.lines import Line2D

    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return {_look(h) for lg in legends for h in lg.legend_handles if isinstance(h, Line2D)}


def _natural_width_px(fig, dpi: float) -> float:
    if not hasattr(fig.canvas, "get_renderer"):  # a figure closed before it was shown
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.get_tightbbox(fig.canvas.get_renderer()).width * dpi


def legible(fig, dpi: float = 100) -> float:
    """Raise every text of the figure that would be shown below ``MIN_FONT_PX`` (the figure shown
    at most ``SHOWN_AT_MOST_PX`` wide) to that size; returns the smallest font, in the PNG's pixels."""
    for _ in range(2):  # the tight box grows with the fonts: a second pass settles it
        scale = min(1.0, SHOWN_AT_MOST_PX / _natural_width_px(fig, dpi))
        floor_pt = MIN_FONT_PX * 1.04 * 72 / (dpi * scale)
        small = [t for t in _texts(fig) if t.get_fontsize() < floor_pt]
        for t in small:
            t.set_fontsize(floor_pt)
        if not small:
            break
        if fig.get_layout_engine() is not None:
            fig.canvas.draw()
    return min((t.get_fontsize() * dpi / 72 for t in _texts(fig)), default=float("inf"))


def book_png(fig, dpi: float = 100) -> bytes:
    """The figure as the book shows it (a tight PNG), with its legibility audit in the PNG's text
    chunks: ``andrea:min-font-px`` (smallest font, in the PNG's pixels), ``andrea:same-look``
    (lines a reader cannot tell apart) and ``andrea:colours`` (each named line's colour).
    ``tests/test_site.py`` reads them from the built site."""
    import json

    min_px = legible(fig, dpi)
    colours = {
        ln.get_label(): matplotlib.colors.to_hex(ln.get_color())
        for ax in fig.axes
        for ln in ax.get_lines()
        if not ln.get_label().startswith("_")
    }
    meta = {
        "andrea:min-font-px": f"{min_px:.2f}",
        "andrea:same-look": json.dumps(same_look(fig)),
        "andrea:colours": json.dumps(colours, ensure_ascii=True),
    }
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata=meta)
    return buf.getvalue()


def png_audit(data: bytes) -> dict:
    """The audit ``book_png`` wrote into a PNG (empty for a PNG it did not write)."""
    from PIL import Image

    info = getattr(Image.open(io.BytesIO(data)), "text", {})  # a PNG's text chunks
    return {k: v for k, v in info.items() if k.startswith("andrea:")}


def show_legibly(ip) -> None:
    """Make an IPython shell display every matplotlib figure through ``book_png``."""
    from matplotlib.figure import Figure

    ip.display_formatter.formatters["image/png"].for_type(Figure, book_png)
