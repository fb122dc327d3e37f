"""Legibility: what a reader's eyes need from a figure, measured on its artists.

``book_png`` draws a figure as the book shows it and records its audit (the smallest font, lines a
reader cannot tell apart, legends drawn over the data, each named line's colour) in the PNG; it moves
a legend that covers plotted points to a free corner of its axes, or below the figure; ``png_audit`` reads it back (the
site's tests do, on every figure of the built book); ``show_legibly`` makes IPython draw every
figure through ``book_png``. ``book_png`` also draws the figure for a phone (``phone_png``: panels in
one row stacked in one column, at a phone's column width) and carries that PNG inside its own
(``with_phone``); the site's build takes it out (``split_phone``, book/_ext/andrea_site.py).
"""

from __future__ import annotations

import io

import matplotlib
import matplotlib.colors

MIN_FONT_PX = 10.0  # the smallest text a reader is shown, in CSS pixels
# The widest a figure is shown: the text column at 1280 px is 672 px.
SHOWN_AT_MOST_PX = 640
# On a phone the site shows another rendering of each figure (``phone_png``), its panels stacked, at
# most as wide as the text column of a 390 px screen (book/_static/andrea.css, book/_ext/andrea_site.py).
PHONE_PX = 340


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


def legible(fig, dpi: float = 100, at_most: float = SHOWN_AT_MOST_PX) -> float:
    """Raise every text of the figure that would be shown below ``MIN_FONT_PX`` (the figure shown
    at most ``at_most`` pixels wide) to that size; returns the smallest font, in the PNG's pixels."""
    for _ in range(2):  # the tight box grows with the fonts: a second pass settles it
        scale = min(1.0, at_most / _natural_width_px(fig, dpi))
        floor_pt = MIN_FONT_PX * 1.04 * 72 / (dpi * scale)
        small = [t for t in _texts(fig) if t.get_fontsize() < floor_pt]
        for t in small:
            t.set_fontsize(floor_pt)
        if not small:
            break
        if fig.get_layout_engine() is not None:
            fig.canvas.draw()
    return min((t.get_fontsize() * dpi / 72 for t in _texts(fig)), default=float("inf"))


def _data_points(ax, n: int = 24):
    """Display coordinates of what ``ax`` plots: every line's points, with ``n`` points along each
    segment (a straight stretch between two far points still crosses what lies between them), and
    every scatter's points."""
    import numpy as np
    from matplotlib.collections import PathCollection

    pts = []
    for ln in ax.get_lines():
        if not ln.get_visible() or not ln.get_transform().contains_branch(ax.transData):
            continue
        xy = ln.get_transform().transform(np.column_stack([ln.get_xdata(), ln.get_ydata()]).astype(float))
        xy = xy[np.isfinite(xy).all(1)]
        if len(xy) >= 2:
            t = np.linspace(0, 1, n)[:, None, None]
            xy = (xy[:-1][None] * (1 - t) + xy[1:][None] * t).reshape(-1, 2)
        pts.append(xy)
    for c in ax.collections:
        offsets = np.asarray(c.get_offsets(), dtype=float) if isinstance(c, PathCollection) else np.zeros((0, 2))
        if c.get_visible() and len(offsets):
            xy = c.get_offset_transform().transform(offsets)
            pts.append(xy[np.isfinite(xy).all(1)])
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def _covers(legend, ax, renderer) -> int:
    """How many of ``ax``'s plotted points (``_data_points``) lie under ``legend``'s box."""
    box = legend.get_window_extent(renderer)
    xy = _data_points(ax)
    if not len(xy):
        return 0
    inside = (xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)
    return int(inside.sum())


_CORNERS = ("upper right", "upper left", "lower left", "lower right", "center right", "center left", "upper center")


def _bottom_row(fig, ax) -> bool:
    """No other axis of ``fig`` lies below ``ax`` (with a horizontal overlap)."""
    b = ax.get_position()
    return not any(
        o is not ax and o.get_position().y1 <= b.y0 + 1e-6 and o.get_position().x0 < b.x1 and o.get_position().x1 > b.x0
        for o in fig.axes
    )


def legends_off_data(fig) -> None:
    """Move every axis legend that covers plotted points to the first corner of its axes where it
    covers none; where there is none, below everything drawn (an axis of the bottom row), else to the
    corner where it covers the fewest. A legend anchored by hand is left where it is."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    below = []
    for ax in fig.axes:
        lg = ax.get_legend()
        if lg is None or lg._bbox_to_anchor is not None:  # matplotlib keeps None unless bbox_to_anchor was given
            continue
        if not _covers(lg, ax, renderer):
            continue
        cost: dict[str, int] = {}
        for loc in _CORNERS:
            lg.set_loc(loc)
            cost[loc] = _covers(lg, ax, renderer)
            if not cost[loc]:
                break
        best = min(cost, key=lambda loc: cost[loc])
        lg.set_loc(best)
        if cost[best] and _bottom_row(fig, ax):
            below.append(ax)
    if below:
        # under the lowest text of the figure (tick labels, x labels, a provenance line), in figure coordinates
        lowest = min(
            [a.get_tightbbox(renderer).y0 for a in fig.axes]
            + [t.get_window_extent(renderer).y0 for t in fig.texts if t.get_visible() and t.get_text().strip()]
        )
        y = (lowest - 4) / fig.bbox.height
        for ax in below:
            lg = ax.get_legend()
            box = ax.get_position()
            lg.set_loc("upper center")
            lg.set_bbox_to_anchor(((box.x0 + box.x1) / 2, y), transform=fig.transFigure)
    fig.canvas.draw()


def legends_on_data(fig) -> list[str]:
    """Legends that cover plotted points: an axis's own over its data, a figure's over any axis's."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for k, ax in enumerate(fig.axes):
        lg = ax.get_legend()
        if lg is not None and _covers(lg, ax, renderer):
            bad.append(f"axis {k}: its legend covers {_covers(lg, ax, renderer)} plotted points")
        for j, flg in enumerate(fig.legends):
            if _covers(flg, ax, renderer):
                bad.append(f"axis {k}: figure legend {j} covers {_covers(flg, ax, renderer)} plotted points")
    return bad


def book_png(fig, dpi: float = 100) -> bytes:
    """The figure as the book shows it (a tight PNG), with its legibility audit in the PNG's text
    chunks: ``andrea:min-font-px`` (smallest font, in the PNG's pixels), ``andrea:same-look``
    (lines a reader cannot tell apart), ``andrea:legend-on-data`` (legends over plotted points, after
    ``legends_off_data`` moved what it could) and ``andrea:colours`` (each named line's colour).
    ``tests/test_site.py`` reads them from the built site."""
    import json

    drawn = [(t, t.get_fontsize()) for t in _texts(fig)]  # the fonts the figure was drawn with
    legible(fig, dpi)
    legends_off_data(fig)
    min_px = legible(fig, dpi)  # a legend moved outside widens the figure: its fonts are checked again
    colours = {
        ln.get_label(): matplotlib.colors.to_hex(ln.get_color())
        for ax in fig.axes
        for ln in ax.get_lines()
        if not ln.get_label().startswith("_")
    }
    meta = {
        "andrea:min-font-px": f"{min_px:.2f}",
        "andrea:same-look": json.dumps(same_look(fig)),
        "andrea:legend-on-data": json.dumps(legends_on_data(fig)),
        "andrea:colours": json.dumps(colours, ensure_ascii=True),
    }
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata=meta)
    shown = [(t, t.get_fontsize()) for t in _texts(fig)]
    for t, size in drawn:  # the phone's rendering raises the fonts it needs from the figure's own
        t.set_fontsize(size)
    phone = phone_png(fig, dpi)
    for t, size in shown:
        t.set_fontsize(size)
    return with_phone(buf.getvalue(), phone)


def with_phone(png: bytes, phone: bytes) -> bytes:
    """``png`` with ``phone`` (the phone's rendering) inside it, base64 in a compressed text chunk
    ``andrea:phone``, which the site's build takes out into a file of its own (``book/_ext``)."""
    import base64

    from PIL import Image, PngImagePlugin

    im = Image.open(io.BytesIO(png))
    info = PngImagePlugin.PngInfo()
    for k, v in getattr(im, "text", {}).items():
        info.add_text(k, v)
    info.add_text("andrea:phone", base64.b64encode(phone).decode("ascii"), zip=True)
    out = io.BytesIO()
    im.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def split_phone(png: bytes) -> tuple[bytes, bytes | None]:
    """(the PNG without its phone rendering, the phone rendering or None): ``with_phone`` undone."""
    import base64

    from PIL import Image, PngImagePlugin

    im = Image.open(io.BytesIO(png))
    text = dict(getattr(im, "text", {}))
    phone = text.pop("andrea:phone", None)
    if phone is None:
        return png, None
    info = PngImagePlugin.PngInfo()
    for k, v in text.items():
        info.add_text(k, v)
    out = io.BytesIO()
    im.save(out, format="PNG", pnginfo=info)
    return out.getvalue(), base64.b64decode(phone)


def _panels(fig) -> list | None:
    """The figure's axes, grouped by panel (twins together) from left to right, when they stand in one
    row of one grid; None for any other layout (a grid of rows, colorbars, insets)."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    specs = [ax.get_subplotspec() for ax in axes]
    if len(axes) < 2 or any(sp is None for sp in specs):
        return None
    grid = specs[0].get_gridspec()
    if grid.nrows != 1 or any(sp.get_gridspec() is not grid for sp in specs):
        return None
    groups: dict = {}
    for ax, sp in zip(axes, specs):
        groups.setdefault((sp.colspan.start, sp.colspan.stop), []).append(ax)
    return [groups[k] for k in sorted(groups)] if len(groups) >= 2 else None


def phone_png(fig, dpi: float = 100) -> bytes:
    """The figure drawn for a phone's text column (``PHONE_PX``): panels that stand in one row are
    stacked in one column, any other figure is redrawn narrower; fonts raised as ``legible`` does for
    that width; the PNG carries ``andrea:min-font-px`` like ``book_png``'s. The figure is put back as
    it was (size, panel places, fonts) afterwards."""
    from matplotlib.gridspec import GridSpec

    size = fig.get_size_inches().copy()
    places = [(ax, ax.get_subplotspec(), ax.get_position(original=True)) for ax in fig.axes]
    fonts = [(t, t.get_fontsize()) for t in _texts(fig)]
    panels = _panels(fig)
    width = PHONE_PX / dpi
    try:
        if panels is not None:
            each = min(3.4, max(2.4, size[1] * width / (size[0] / len(panels))))
            rows = GridSpec(len(panels), 1, figure=fig)
            for i, group in enumerate(panels):
                for ax in group:
                    ax.set_subplotspec(rows[i, 0])
            fig.set_size_inches(width, each * len(panels) + 0.3)
        else:
            fig.set_size_inches(width, max(2.4, min(size[1] * 1.15, size[1] * width / size[0] * 1.6)))
        legible(fig, dpi, at_most=PHONE_PX)
        if type(fig.get_layout_engine()).__name__ != "ConstrainedLayoutEngine":  # that one lays out by itself
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a layout tight_layout cannot fit is drawn as it comes
                fig.tight_layout(rect=(0, 0.03, 1, 1))
        min_px = legible(fig, dpi, at_most=PHONE_PX)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"andrea:min-font-px": f"{min_px:.2f}"})
        return buf.getvalue()
    finally:
        fig.set_size_inches(size)
        for ax, spec, pos in places:
            if spec is not None:
                ax.set_subplotspec(spec)
            ax.set_position(pos)
        for t, f in fonts:
            t.set_fontsize(f)


def png_audit(data: bytes) -> dict:
    """The audit ``book_png`` wrote into a PNG (empty for a PNG it did not write)."""
    from PIL import Image

    info = getattr(Image.open(io.BytesIO(data)), "text", {})  # a PNG's text chunks
    return {k: v for k, v in info.items() if k.startswith("andrea:") and k != "andrea:phone"}


def show_legibly(ip) -> None:
    """Make an IPython shell display every matplotlib figure through ``book_png``."""
    from matplotlib.figure import Figure

    ip.display_formatter.formatters["image/png"].for_type(Figure, book_png)
