"""Legibility: what a reader's eyes need from a figure, measured on its artists, and the fixes the book
applies before drawing it: fonts raised to a legible size (``legible``), a legend that covers plotted points
moved to a free corner of its axes or below the figure (``legends_off_data``), tick labels that run into
each other thinned (``untangle_ticks``), and the lines at a figure's foot and head kept clear of its panels.
Lines a reader cannot tell apart (``same_look``), legends still on the data and texts that collide are
reported. ``phone`` draws a figure for a phone with the same measures; ``figure_png`` draws the PNG the
book shows and records the audit in it.
"""

from __future__ import annotations

import matplotlib
import matplotlib.colors

MIN_FONT_PX = 10.0  # the smallest text a reader is shown, in CSS pixels
# The widest a figure is shown: the text column at 1280 px is 672 px.
SHOWN_AT_MOST_PX = 640
# On a phone the site shows another rendering of each figure (``phone.phone_png``), its panels stacked, at
# most as wide as the text column of a 390 px screen (book/_static/andrea.css, book/_ext/andrea_site.py).
PHONE_PX = 340
# The narrowest a plotted area may be shown on a phone, in CSS pixels (issue 47): narrower, its data cannot be read.
MIN_PLOT_PX = 200.0


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


def _plots(fig) -> list:
    """The figure's plotted areas: its visible axes with their frame on, not a colorbar."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and not hasattr(ax, "_colorbar")]


def min_plot_px(fig, dpi: float) -> float:
    """The width of the figure's narrowest plotted area (``_plots``), in the pixels of a PNG saved at ``dpi``."""
    fig.canvas.draw()
    return min((ax.bbox.width * dpi / fig.dpi for ax in _plots(fig)), default=float("inf"))


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


# Texts of two panels closer than this share of the smaller font read as one (a panel's x label and the
# title of the panel under it): the reader cannot tell which panel a label belongs to.
PANEL_GAP_EM = 0.35


def _panel_of(ax):
    """The panel ``ax`` belongs to: its cell of the figure's grid (a twin and a colorbar made in the cell
    belong to their panel), else the axes itself."""
    spec = ax.get_subplotspec()
    if spec is None:
        return id(ax)
    top = spec.get_topmost_subplotspec()
    return (id(top.get_gridspec()), top.rowspan.start, top.colspan.start)


def _font_px(artist, fig) -> float:
    """The size of ``artist``'s font (a legend: of its entries), in the figure's pixels."""
    texts = artist.get_texts() if hasattr(artist, "get_texts") else [artist]
    return min((t.get_fontsize() for t in texts), default=10.0) * fig.dpi / 72


def texts_collide(fig) -> list[str]:
    """Texts drawn over each other: any two of the figure's own lines (its provenance), the panels'
    titles, axis labels, tick labels and text labels, and the legends' boxes, whose boxes overlap by
    more than a pixel each way (a label on a bar's top run into a line's note; a phone's taller tick
    labels run into the provenance line). Texts of two different panels are also reported when they
    are closer than ``PANEL_GAP_EM`` of the smaller font (one row's x labels touching the next row's
    titles): they do not overlap, but the eye cannot tell which panel each belongs to."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    named: list = []
    for t in fig.texts:
        named.append((f"figure text {t.get_text()[:30]!r}", t, None))
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        parts = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        parts += _drawn_tick_labels(ax.xaxis) + _drawn_tick_labels(ax.yaxis)
        named += [(f"axis {k} {t.get_text()[:30]!r}", t, _panel_of(ax)) for t in parts]
        if ax.get_legend() is not None:
            named.append((f"axis {k} legend", ax.get_legend(), _panel_of(ax)))
    named += [(f"figure legend {j}", lg, None) for j, lg in enumerate(fig.legends)]
    boxes = []
    for name, a, panel in named:
        if not a.get_visible() or (hasattr(a, "get_text") and not a.get_text().strip()):
            continue
        box = _extent(a, renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((name, box, panel, _font_px(a, fig)))
    bad = []
    for i, (na, a, pa, fa) in enumerate(boxes):
        for nb, b, pb, fb in boxes[i + 1 :]:
            if _overlap(a, b):
                bad.append(f"{na} and {nb} overlap")
            elif pa is not None and pb is not None and pa != pb and _overlap(a, b, -PANEL_GAP_EM * min(fa, fb)):
                bad.append(f"{na} and {nb} (two panels) almost touch")
    return bad


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
    """Boxes ``a`` and ``b`` overlap by more than ``px`` each way (a negative ``px``: they come closer than
    ``-px``)."""
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
