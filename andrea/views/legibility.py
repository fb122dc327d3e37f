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
import textwrap

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
    from matplotlib.patches import Rectangle

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
    for patch in ax.patches:  # a bar: a grid of points over it, so that a legend on a wide bar counts
        if isinstance(patch, Rectangle) and patch.get_visible() and patch.get_width() and patch.get_height():
            u = np.linspace(0, 1, 5)
            unit = np.column_stack([np.repeat(u, 5), np.tile(u, 5)])
            pts.append(patch.get_patch_transform().transform(unit))
            pts[-1] = patch.get_data_transform().transform(pts[-1])
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


def legends_off_data(fig, send_below: bool = True) -> None:
    """Move every axis legend that covers plotted points to the first corner of its axes where it
    covers none; where there is none, below everything drawn (an axis of the bottom row, with
    ``send_below``), else to the corner where it covers the fewest. A legend anchored by hand is left
    where it is."""
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
        if cost[best] and send_below and _bottom_row(fig, ax):
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


def _straddles(legend, ax, renderer) -> bool:
    """``legend`` lies across ``ax``'s left or right edge, part inside the panel and part over its tick
    labels or the next panel (a legend wholly beside the panel, placed there by hand, does not)."""
    box, panel = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    if box.y1 <= panel.y0 or box.y0 >= panel.y1:
        return False
    return any(box.x0 < edge - 1 and box.x1 > edge + 1 for edge in (panel.x0, panel.x1))


def legends_on_data(fig) -> list[str]:
    """Legends that cover plotted points: an axis's own over its data, a figure's over any axis's."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for k, ax in enumerate(fig.axes):
        lg = ax.get_legend()
        if lg is not None and _covers(lg, ax, renderer):
            bad.append(f"axis {k}: its legend covers {_covers(lg, ax, renderer)} plotted points")
        if lg is not None and lg.get_visible() and _straddles(lg, ax, renderer):
            bad.append(f"axis {k}: its legend spills over the panel's edge (onto its tick labels)")
        for j, flg in enumerate(fig.legends):
            if _covers(flg, ax, renderer):
                bad.append(f"axis {k}: figure legend {j} covers {_covers(flg, ax, renderer)} plotted points")
    return bad


def _extent(artist, renderer):
    """An artist's box as drawn: a text that wraps (a phone's long lines) measured wrapped, as its draw
    lays it out (its own get_window_extent measures it on one line)."""
    import matplotlib.text

    if isinstance(artist, matplotlib.text.Text) and artist.get_wrap():
        text = artist.get_text()
        artist.set_text(getattr(artist, "_get_wrapped_text")())  # matplotlib's own wrapping, as drawn
        try:
            return artist.get_window_extent(renderer)
        finally:
            artist.set_text(text)
    return artist.get_window_extent(renderer)


def texts_collide(fig) -> list[str]:
    """Texts drawn over each other: any two of the figure's own lines (its provenance), the panels'
    titles, axis labels, tick labels and text labels, and the legends' boxes, whose boxes overlap by
    more than a pixel each way (a label on a bar's top run into a line's note; a phone's taller tick
    labels run into the provenance line)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    named: list = []
    for t in fig.texts:
        named.append((f"figure text {t.get_text()[:30]!r}", t))
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        parts = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        parts += _drawn_tick_labels(ax.xaxis) + _drawn_tick_labels(ax.yaxis)
        named += [(f"axis {k} {t.get_text()[:30]!r}", t) for t in parts]
        if ax.get_legend() is not None:
            named.append((f"axis {k} legend", ax.get_legend()))
    named += [(f"figure legend {j}", lg) for j, lg in enumerate(fig.legends)]
    boxes = []
    for name, a in named:
        if not a.get_visible() or (hasattr(a, "get_text") and not a.get_text().strip()):
            continue
        box = _extent(a, renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((name, box))
    bad = []
    for i, (na, a) in enumerate(boxes):
        for nb, b in boxes[i + 1 :]:
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1:
                bad.append(f"{na} and {nb} overlap")
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
    untangle_ticks(fig)
    _clear_the_foot(fig)
    _clear_the_head(fig)
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
        "andrea:text-collisions": json.dumps(texts_collide(fig), ensure_ascii=True),
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
    """The figure's panels, row by row and left to right, when every axes sits in a cell or span of one
    grid (or in a grid made inside such a cell: a panel and its colorbar, ``fig.colorbar(ax=...)``);
    each panel is the list of its axes (twins and colorbars stay with theirs). None for any other
    layout (a single panel, insets). Panels switched off (``ax.axis("off")``) are left out."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    specs = [ax.get_subplotspec() for ax in axes]
    if len(axes) < 2 or any(sp is None for sp in specs):
        return None
    tops = [sp.get_topmost_subplotspec() for sp in specs]
    grid = tops[0].get_gridspec()
    if any(top.get_gridspec() is not grid for top in tops):
        return None
    groups: dict = {}
    for ax, top in zip(axes, tops):
        groups.setdefault((top.rowspan.start, top.colspan.start), []).append(ax)
    panels = [groups[k] for k in sorted(groups) if any(ax.axison for ax in groups[k])]
    return panels if len(panels) >= 2 else None


def _place(ax, cell, moved: dict) -> None:
    """Put ``ax``'s panel in ``cell`` of the stacked grid: its own spec if it is a cell of the figure's
    grid, else the grid made inside that cell (remembered in ``moved``, to be put back)."""
    from matplotlib.gridspec import GridSpecFromSubplotSpec

    spec = ax.get_subplotspec()
    inner, top = spec.get_gridspec(), spec.get_topmost_subplotspec().get_gridspec()
    if inner is top:
        ax.set_subplotspec(cell)
        return
    while isinstance(inner, GridSpecFromSubplotSpec) and inner.get_topmost_subplotspec() is not None:
        outer = getattr(inner, "_subplot_spec")  # the cell this grid was made in
        if outer.get_gridspec() is top:
            break
        inner = outer.get_gridspec()
    moved.setdefault(id(inner), (inner, getattr(inner, "_subplot_spec")))
    setattr(inner, "_subplot_spec", cell)
    ax.set_subplotspec(spec)  # its place again, from the moved grid


def _one_column(lg):
    """Draw axes legend ``lg`` again in one column where matplotlib finds room (``loc="best"``); returns
    ``lg``, which ``phone_png`` gives back to its axes afterwards."""
    texts = lg.get_texts()
    labels = [t.get_text() for t in texts]
    artists, named = lg.axes.get_legend_handles_labels()  # the artists themselves draw best
    copy = lg.axes.legend(
        artists if named == labels else lg.legend_handles,
        labels,
        loc="best",
        ncols=1,
        frameon=lg.get_frame_on(),
        fontsize=texts[0].get_fontsize() if texts else None,
    )
    # inside its panel it takes no room of the layout's (one wider than the panel would squeeze it)
    copy.set_in_layout(False)
    return lg


def _lay_out_above_foot(fig) -> float:
    """Lay the panels out (tight_layout) above the lines at the figure's foot (its provenance, a figure
    legend below the panels); returns the foot's top, as a fraction of the figure's height (0 under a
    constrained layout, which lays out by itself)."""
    import warnings

    if type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine":
        return 0.0
    fig.canvas.draw()
    low = [lg for lg in fig.legends if lg.get_visible()]
    low += [t for t in fig.texts if t.get_visible() and t.get_position()[1] < 0.15]
    below = max((a.get_window_extent().y1 / fig.bbox.height for a in low), default=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a layout tight_layout cannot fit is drawn as it comes
        fig.tight_layout(rect=(0, max(0.03, below + 0.01), 1, 1))
    return below


def _drawn_tick_labels(axis) -> list:
    """The tick labels ``axis`` draws: those of ticks inside the view (matplotlib keeps others it does
    not draw), with some text."""
    return [
        lab
        for tick in axis._update_ticks()
        for lab in (tick.label1, tick.label2)
        if lab.get_visible() and lab.get_text().strip()
    ]


def _overlap(a, b, px: float = 1.0) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > px and min(a.y1, b.y1) - max(a.y0, b.y0) > px


def _ticks_collide(axis, renderer) -> bool:
    boxes = [lab.get_window_extent(renderer) for lab in _drawn_tick_labels(axis)]
    return any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def _only_mantissas(formatter, digits: set):
    """``formatter``'s labels for the ticks whose leading digit is in ``digits`` (2 of 2 x 10^-5), no others."""
    import math

    from matplotlib.ticker import FuncFormatter

    def label(v, pos=None):
        if v <= 0 or round(v / 10 ** math.floor(math.log10(v) + 1e-9)) not in digits:
            return ""
        return formatter(v, pos)

    return FuncFormatter(label)


def untangle_ticks(fig) -> list:
    """Tick labels of one axis that run into each other (a log axis's 3 and 4 x 10^-5 in a short panel, a
    heatmap's tokens on a phone): the minor ticks' labels are dropped first, then every second (third, ...)
    major label, until none collide; a few named categories (at most 8 bars' names) are left for the figure
    to make room for (``texts_collide`` reports them). Returns what it changed, for ``_restore_ticks``."""
    from matplotlib.ticker import FixedFormatter, NullFormatter

    changed: list = []
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in [a for a in fig.axes if a.get_visible()]:
        for axis in (ax.xaxis, ax.yaxis):
            if not _ticks_collide(axis, renderer):
                continue
            changed.append((axis, axis.get_major_locator(), axis.get_major_formatter(), axis.get_minor_formatter()))
            minor = {id(t) for t in axis.get_minorticklabels()}
            if any(id(lab) in minor for lab in _drawn_tick_labels(axis)):
                own = axis.get_minor_formatter()
                for kept_digits in ({2, 3, 5}, {2, 5}, {3}, set()):  # a log axis's 2, 3 and 5 x 10^k, then fewer
                    axis.set_minor_formatter(_only_mantissas(own, kept_digits) if kept_digits else NullFormatter())
                    fig.canvas.draw()
                    if not _ticks_collide(axis, renderer):
                        break
                if not _ticks_collide(axis, renderer):
                    continue
            lo, hi = sorted(axis.get_view_interval())
            kept = [(loc, lab.get_text()) for loc, lab in zip(axis.get_majorticklocs(), axis.get_majorticklabels())]
            kept = [(loc, text) for loc, text in kept if lo <= loc <= hi]
            if isinstance(axis.get_major_formatter(), FixedFormatter) and len(kept) <= 8:
                continue  # a few named categories (bars) are each needed: the figure must make room for them
            for k in range(2, len(kept) + 1):
                axis.set_ticks(
                    [loc for loc, _ in kept], [text if i % k == 0 else "" for i, (_, text) in enumerate(kept)]
                )
                fig.canvas.draw()
                if not _ticks_collide(axis, renderer):
                    break
    return changed


def _restore_ticks(changed: list) -> None:
    for axis, locator, formatter, minor in reversed(changed):
        axis.set_major_locator(locator)
        axis.set_major_formatter(formatter)
        axis.set_minor_formatter(minor)


def _clear_the_foot(fig) -> None:
    """Where the panels' lowest text (tick labels, an x label) or a figure legend under the panels still
    runs into the lines at the figure's foot (its provenance; a layout tight_layout could not fit, such as
    long tick labels in a phone's narrow column), the figure grows at the bottom by the overlap: the panels
    and that legend keep their place above it, and a legend already placed under the foot stays there."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    foot = [t for t in fig.texts if t.get_visible() and t.get_text().strip() and t.get_position()[1] < 0.15]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if not foot or not axes:
        return
    top = max(t.get_window_extent(renderer).y1 for t in foot)
    bottom = min(t.get_window_extent(renderer).y0 for t in foot)
    legends = [lg for lg in fig.legends if lg.get_visible()]
    legends += [lg for ax in axes if (lg := ax.get_legend()) is not None and lg.get_visible()]
    # a legend anchored in the figure (not in its panel) is moved by hand; those under the foot stay
    placed = [lg for lg in legends if any(lg is f for f in fig.legends) or _under(lg, fig)]
    above = [lg for lg in placed if lg.get_window_extent(renderer).y0 > bottom]
    lowest = min(
        [ax.get_tightbbox(renderer, bbox_extra_artists=[]).y0 for ax in axes]
        + [lg.get_window_extent(renderer).y0 for lg in above]
    )
    need = top + 4 - lowest  # pixels
    if need <= 0:
        return
    w, h = fig.get_size_inches()
    old_px, new_px, width_px = h * fig.dpi, h * fig.dpi + need, w * fig.dpi
    boxes = [(ax, ax.get_position()) for ax in axes]
    anchors = [(lg, lg.get_bbox_to_anchor(), lg in above) for lg in placed]  # in pixels
    fig.set_size_inches(w, new_px / fig.dpi)
    for ax, p in boxes:
        ax.set_position([p.x0, (p.y0 * old_px + need) / new_px, p.width, p.height * old_px / new_px])
    for lg, a, up in anchors:
        y0 = a.y0 + (need if up else 0)
        lg.set_bbox_to_anchor((a.x0 / width_px, y0 / new_px, a.width / width_px, a.height / new_px), fig.transFigure)
    fig.canvas.draw()


def _clear_the_head(fig) -> None:
    """Where a line at the figure's head (a title over all panels, wrapped on a phone) runs into the
    panels' highest text (their titles), the figure grows at the top by the overlap: the panels keep
    their place under it."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    head = [t for t in fig.texts if t.get_visible() and t.get_text().strip() and t.get_position()[1] > 0.85]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if not head or not axes:
        return
    low = min(_extent(t, renderer).y0 for t in head)
    highest = max(ax.get_tightbbox(renderer, bbox_extra_artists=[]).y1 for ax in axes)
    need = highest + 4 - low  # pixels
    if need <= 0:
        return
    w, h = fig.get_size_inches()
    old_px, new_px = h * fig.dpi, h * fig.dpi + need
    boxes = [(ax, ax.get_position()) for ax in axes]
    fig.set_size_inches(w, new_px / fig.dpi)
    for ax, p in boxes:
        ax.set_position([p.x0, p.y0 * old_px / new_px, p.width, p.height * old_px / new_px])
    fig.canvas.draw()


def _under(legend, fig) -> bool:
    """An axis's legend anchored in the figure's coordinates (legends_off_data sent it below the figure)."""
    anchor = legend._bbox_to_anchor
    return anchor is not None and getattr(anchor, "_transform", None) is fig.transFigure


def phone_png(fig, dpi: float = 100) -> bytes:
    """The figure drawn for a phone's text column (``PHONE_PX``): panels of one grid are stacked in one
    column (row by row), any other figure is redrawn narrower; fonts raised as ``legible`` does for
    that width; the PNG carries ``andrea:min-font-px`` like ``book_png``'s. The figure is put back as
    it was (size, panel places, fonts) afterwards."""
    import json
    import warnings

    from matplotlib.gridspec import GridSpec
    from matplotlib.transforms import blended_transform_factory

    size = fig.get_size_inches().copy()
    places = [(ax, ax.get_subplotspec(), ax.get_position(original=True), ax.get_visible()) for ax in fig.axes]
    fonts = [(t, t.get_fontsize()) for t in _texts(fig)]
    legends = [lg for lg in fig.legends if lg.get_visible()]  # shown again, one entry per line, below
    copies = []
    # the figure's own lines (its provenance) and the panels' titles wrap on a phone
    notes = [(t, t.get_wrap()) for t in [*fig.texts, *(ax.title for ax in fig.axes)]]
    # legends that legends_off_data sent below the figure (anchored in its coordinates) go back into
    # their axes, where matplotlib finds them the emptiest place: the stacked panels have no "below"
    placed = [(lg, lg._loc, lg._bbox_to_anchor) for ax in fig.axes if (lg := ax.get_legend()) is not None]
    sent_below = [
        (lg, loc, anchor)
        for lg, loc, anchor in placed
        if anchor is not None and anchor.y0 < lg.axes.get_window_extent().y0
    ]
    panels = _panels(fig)
    unshared: list = []  # (axes, its y label) whose shared y tick labels the phone shows
    turned: list = []  # (axes, its x tick labels' rotation) turned so that they do not collide
    wrapped: list = []  # (axes, its x tick formatter) whose long tick labels were wrapped instead
    swapped: list = []  # axes legends drawn in one column on the phone (the desktop's, kept to restore)
    moved: dict = {}  # grids made inside a cell (a panel and its colorbar), moved with their cell
    thinned: list = []  # tick labels dropped where they ran into each other (untangle_ticks)
    width = PHONE_PX / dpi
    try:
        if panels is not None:
            rows_before, cols = panels[0][0].get_subplotspec().get_topmost_subplotspec().get_gridspec().get_geometry()
            # each panel keeps its shape (a tall heatmap stays tall), between 2.4 in and twice the width
            each = min(2 * width, max(2.4, (size[1] / rows_before) * width / (size[0] / cols)))
            stacked = GridSpec(len(panels), 1, figure=fig)
            kept = {id(ax) for group in panels for ax in group}
            for ax in fig.axes:
                if id(ax) not in kept:
                    ax.set_visible(False)  # a panel switched off
            for i, group in enumerate(panels):
                for ax in group:
                    _place(ax, stacked[i, 0], moved)
            fig.set_size_inches(width, each * len(panels) + 0.3)
            # panels that shared a y-axis across a row showed its numbers (and its label) on the first
            # only: stacked, each panel shows its own
            for ax in [a for a in fig.axes if id(a) in kept]:
                siblings = ax.get_shared_y_axes().get_siblings(ax)
                if len(siblings) < 2 or ax.yaxis.get_tick_params(which="major").get("labelleft", True):
                    continue
                unshared.append((ax, ax.get_ylabel()))
                ax.yaxis.set_tick_params(which="both", labelleft=True)
                if not ax.get_ylabel():
                    ax.set_ylabel(next((a.get_ylabel() for a in siblings if a.get_ylabel()), ""))
        else:
            fig.set_size_inches(width, max(2.4, min(size[1] * 1.15, size[1] * width / size[0] * 1.6)))
        for t, _ in notes:
            t.set_wrap(True)
        for lg, _, _ in sent_below:  # inside a narrow panel: one entry per line, not wider than the panel
            swapped.append(_one_column(lg))
        for lg in legends:  # a figure legend below the panels, one entry per line
            lg.set_visible(False)
            copies.append(
                fig.legend(
                    lg.legend_handles,
                    [t.get_text() for t in lg.get_texts()],
                    loc="lower center",
                    bbox_to_anchor=(0.5, 0.03),
                    ncols=1,
                    frameon=False,
                    fontsize=lg.get_texts()[0].get_fontsize() if lg.get_texts() else None,
                )
            )
        legible(fig, dpi, at_most=PHONE_PX)
        below = _lay_out_above_foot(fig)
        for _ in range(3):  # raised fonts widen the figure, which shrinks it on the phone: until it settles
            min_px = legible(fig, dpi, at_most=PHONE_PX)
            if min_px * min(1.0, PHONE_PX / _natural_width_px(fig, dpi)) >= MIN_FONT_PX:
                break
        below = _lay_out_above_foot(fig)  # the raised fonts (axis labels, the foot's lines) laid out again
        # in the stacked panels, as on the desktop; one with no free corner goes under its own panel
        # (below), the last panel's too
        legends_off_data(fig, send_below=False)
        fig.canvas.draw()
        # a legend in several columns, wider than its narrow panel: one column, and placed again
        wide = [lg for ax in fig.axes if (lg := ax.get_legend()) is not None and lg not in swapped]
        wide = [lg for lg in wide if lg._ncols > 1 and _straddles(lg, lg.axes, fig.canvas.get_renderer())]
        if wide:
            swapped.extend(_one_column(lg) for lg in wide)
            legends_off_data(fig, send_below=False)
            fig.canvas.draw()
        # tick labels that run into each other in the narrow column (0.002 and 0.003 on a log axis) are
        # turned to 45 degrees
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            ticks = [t for t in ax.get_xticklabels(which="both") if t.get_visible() and t.get_text()]
            boxes = sorted((t.get_window_extent(renderer) for t in ticks), key=lambda b: b.x0)
            if not any(a.x1 > b.x0 - 2 for a, b in zip(boxes, boxes[1:])):
                continue
            if max(len(line) for t in ticks for line in t.get_text().split("\n")) > 10:
                # words (a bar's name), not numbers: wrapped to the width each tick has, not turned
                size_px = ticks[0].get_fontsize() * fig.dpi / 72
                room = max(8, int(ax.bbox.width / len(ticks) / (0.55 * size_px)))
                wrapped.append((ax, ax.xaxis.get_major_formatter()))
                every = [t.get_text() for t in ax.get_xticklabels()]
                ax.set_xticks(ax.get_xticks(), [textwrap.fill(" ".join(t.split()), room) for t in every])
                continue
            turned.append((ax, ax.xaxis.get_tick_params(which="major").get("labelrotation", 0)))
            ax.tick_params(axis="x", labelrotation=45)
        if (turned or wrapped) and type(fig.get_layout_engine()).__name__ != "ConstrainedLayoutEngine":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fig.tight_layout(rect=(0, max(0.03, below + 0.01), 1, 1))
            fig.canvas.draw()
        thinned = untangle_ticks(fig)
        covering = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        covering = [lg for lg in covering if _covers(lg, lg.axes, fig.canvas.get_renderer())]
        if covering:  # no free corner: under its own panel, and the figure grows by its height
            renderer = fig.canvas.get_renderer()
            grow = sum(lg.get_window_extent(renderer).height / fig.dpi + 0.1 for lg in covering)
            w, h = fig.get_size_inches()
            fig.set_size_inches(w, h + grow)
            if type(fig.get_layout_engine()).__name__ != "ConstrainedLayoutEngine":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fig.tight_layout(rect=(0, max(0.03, (below * h) / (h + grow) + 0.01), 1, 1))
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            # just under the panel's own tick labels and axis label; the layout then makes room for the
            # legends, which moves the panels: placed again where the panels are now
            for settle in range(3):
                for lg in covering:
                    ax = lg.axes
                    lg.set_visible(False)
                    under = (ax.get_tightbbox(renderer).y0 - 3 - ax.bbox.y0) / ax.bbox.height
                    lg.set_visible(True)
                    lg.set_loc("upper center")
                    lg.set_in_layout(True)  # under its panel: the layout makes room for it
                    # centred in the column, not under the panel (a legend wider than its panel, centred
                    # on it, would run off the figure's edge and tight_layout would squeeze the panel)
                    lg.set_bbox_to_anchor(
                        (0.5, under), transform=blended_transform_factory(fig.transFigure, ax.transAxes)
                    )
                if settle == 2 or type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine":
                    break
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fig.tight_layout(rect=(0, max(0.03, (below * h) / (h + grow) + 0.01), 1, 1))
                fig.canvas.draw()
                renderer = fig.canvas.get_renderer()
        _clear_the_foot(fig)
        _clear_the_head(fig)
        meta = {
            "andrea:min-font-px": f"{min_px:.2f}",
            "andrea:same-look": json.dumps(same_look(fig)),
            "andrea:legend-on-data": json.dumps(legends_on_data(fig)),
            "andrea:text-collisions": json.dumps(texts_collide(fig), ensure_ascii=True),
        }
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata=meta)
        return buf.getvalue()
    finally:
        _restore_ticks(thinned)
        fig.set_size_inches(size)
        for ax, label in unshared:
            ax.yaxis.set_tick_params(which="both", labelleft=False)
            ax.set_ylabel(label)
        for ax, formatter in wrapped:
            ax.xaxis.set_major_formatter(formatter)
        for ax, rotation in turned:
            ax.tick_params(axis="x", labelrotation=rotation)
        for inner, cell in moved.values():
            setattr(inner, "_subplot_spec", cell)
        for ax, spec, pos, visible in places:
            if spec is not None:
                ax.set_subplotspec(spec)
            ax.set_position(pos)
            ax.set_visible(visible)
        for t, f in fonts:
            t.set_fontsize(f)
        for t, wrap in notes:
            t.set_wrap(wrap)
        for lg, loc, anchor in placed:
            lg._loc = loc
            lg.set_bbox_to_anchor(anchor)
        for lg in swapped:
            lg.axes.legend_ = lg  # the desktop's own legend again, in place of its one-column copy
        for lg in copies:
            lg.remove()
        for lg in legends:
            lg.set_visible(True)


def png_audit(data: bytes) -> dict:
    """The audit ``book_png`` wrote into a PNG (empty for a PNG it did not write)."""
    from PIL import Image

    info = getattr(Image.open(io.BytesIO(data)), "text", {})  # a PNG's text chunks
    return {k: v for k, v in info.items() if k.startswith("andrea:") and k != "andrea:phone"}


def show_legibly(ip) -> None:
    """Make an IPython shell display every matplotlib figure through ``book_png``."""
    from matplotlib.figure import Figure

    ip.display_formatter.formatters["image/png"].for_type(Figure, book_png)
