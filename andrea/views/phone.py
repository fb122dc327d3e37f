"""A figure drawn for a phone's text column (``phone_png``): panels in one row stacked in one column, at
a phone's column width, with the legibility measures and fixes of ``legibility`` applied at that width.
``figure_png.book_png`` carries this rendering inside the book's PNG."""

from __future__ import annotations

import io
import textwrap

from .legibility import (
    MIN_FONT_PX,
    MIN_PLOT_PX,
    PHONE_PX,
    _clear_the_foot,
    _clear_the_head,
    _covers,
    _natural_width_px,
    _plots,
    _restore_ticks,
    _straddles,
    _texts,
    legends_off_data,
    legends_on_data,
    legible,
    min_plot_px,
    same_look,
    texts_collide,
    untangle_ticks,
)

# tight_layout's padding on a phone: a narrow margin at the column's edges (the PNG is cropped to its
# drawing anyway), the usual room between stacked panels
_PADS = {"pad": 0.4, "h_pad": 1.08, "w_pad": 1.08}


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
        fig.tight_layout(**_PADS, rect=(0, max(0.03, below + 0.01), 1, 1))
    return below


def _colorbar_under(ax, colorbar):
    """A horizontal copy of ``colorbar`` (a vertical one beside ``ax``) drawn under ``ax``, below its tick
    labels and x label, wherever the layout puts ``ax``; returns its axes."""
    from matplotlib.transforms import Bbox

    def locate(cax, renderer):
        box = ax.xaxis.get_tightbbox(renderer) or ax.bbox
        px = ax.figure.dpi / 72
        top = min(box.y0, ax.bbox.y0) - 6 * px
        return Bbox.from_bounds(ax.bbox.x0, top - 9 * px, ax.bbox.width, 9 * px).transformed(
            ax.figure.transFigure.inverted()
        )

    cax = ax.inset_axes([0, -0.3, 1, 0.05])
    cax.set_axes_locator(locate)
    ax.figure.colorbar(colorbar.mappable, cax=cax, orientation="horizontal")
    return cax


def _long_names(ax) -> bool:
    """``ax``'s y-axis is labelled with names of several words, some longer than 12 characters (a bar
    chart's parts), not with numbers."""
    labels = [t.get_text() for t in ax.get_yticklabels()]
    return bool(labels) and max(map(len, labels)) > 12 and any(" " in t and any(c.isalpha() for c in t) for t in labels)


def _room_for_plots(fig, dpi: float, roomed: list, limits: list, share: float = 0.3) -> None:
    """Panels squeezed under ``MIN_PLOT_PX`` as shown on a phone by long names on their y-axis (a horizontal
    bar chart's parts): the names are wrapped to ``share`` of the column (at the phone's font size at
    least), and the figure grows in height so that each name's lines fit beside its bar; a value written past
    the end of the panel's x range (a bar's number) gets room inside it, so that the layout need not narrow
    the panel for it. Appends what it changed to ``roomed`` (for ``legibility._restore_ticks``) and
    ``limits`` ((axes, its x limits))."""
    scale = min(1.0, PHONE_PX / _natural_width_px(fig, dpi))
    renderer = fig.canvas.get_renderer()
    for ax in _plots(fig):
        if ax.bbox.width * dpi / fig.dpi * scale >= MIN_PLOT_PX * 1.05 or not _long_names(ax):
            continue
        labels = [t.get_text() for t in ax.get_yticklabels()]
        px = fig.dpi / dpi  # the figure's pixels per PNG pixel
        size_px = max(ax.get_yticklabels()[0].get_fontsize() * fig.dpi / 72, MIN_FONT_PX * 1.04 * px)
        chars = max(8, int(share * PHONE_PX * px / (0.58 * size_px)))
        axis = ax.yaxis
        roomed.append((axis, axis.get_major_locator(), axis.get_major_formatter(), axis.get_minor_formatter()))
        wrapped = [textwrap.fill(" ".join(t.split()), chars) for t in labels]
        ax.set_yticks(ax.get_yticks(), wrapped)
        lines = max(t.count("\n") + 1 for t in wrapped)
        need = len(labels) * (lines * 1.25 + 0.5) * size_px  # the panel's height that its names need, in pixels
        if need > ax.bbox.height:
            w, h = fig.get_size_inches()
            fig.set_size_inches(w, h + (need - ax.bbox.height) / fig.dpi)
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        texts = [t for t in ax.texts if t.get_visible() and t.get_transform().contains_branch(ax.transData)]
        if texts and hi > lo:
            # the width the panel will have, and the range that puts each text's end inside it
            width = max(ax.bbox.width, MIN_PLOT_PX * px / scale)
            ends = [
                lo + (t.get_position()[0] - lo) * width / max(width - t.get_window_extent(renderer).width - 4, 1.0)
                for t in texts
            ]
            if max(ends) > hi:
                limits.append((ax, (lo, hi)))
                ax.set_xlim(lo, max(ends))
        fig.canvas.draw()


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
    unshared_x: list = []  # axes whose shared x tick labels the phone shows
    turned: list = []  # (axes, its x tick labels' rotation) turned so that they do not collide
    wrapped: list = []  # (axes, its x tick formatter) whose long tick labels were wrapped instead
    swapped: list = []  # axes legends drawn in one column on the phone (the desktop's, kept to restore)
    moved: dict = {}  # grids made inside a cell (a panel and its colorbar), moved with their cell
    thinned: list = []  # tick labels dropped where they ran into each other (untangle_ticks)
    titles: list = []  # (axes, its title) wrapped to the panel's width
    bars_under: list = []  # colorbars drawn under their panel on the phone (removed afterwards)
    roomed: list = []  # long names on a y-axis wrapped so that their panel is wide enough (_room_for_plots)
    limits: list = []  # (axes, x limits) widened to hold the values written past a bar's end (_room_for_plots)
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
                bars = [a for a in group if hasattr(a, "_colorbar") and a._colorbar.orientation == "vertical"]
                main = [a for a in group if not hasattr(a, "_colorbar")]
                if bars and len(main) == 1:  # beside its panel a colorbar takes the column's width from it
                    main[0].set_subplotspec(stacked[i, 0])
                    for cax in bars:
                        cax.set_visible(False)
                        bars_under.append(_colorbar_under(main[0], cax._colorbar))
                    continue
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
            # likewise panels that shared an x-axis down a column showed its numbers on the lowest only:
            # stacked, each panel shows its own (a reader scrolling a phone sees one or two panels at once)
            for ax in [a for a in fig.axes if id(a) in kept]:
                siblings = ax.get_shared_x_axes().get_siblings(ax)
                if len(siblings) < 2 or ax.xaxis.get_tick_params(which="major").get("labelbottom", True):
                    continue
                unshared_x.append(ax)
                ax.xaxis.set_tick_params(which="both", labelbottom=True)
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
        if any(_long_names(ax) for ax in _plots(fig)):
            # long names wrapped before the fonts are raised: left as they were they widen the figure past
            # the column, and the fonts grow to make up for a figure the phone then shrinks
            _lay_out_above_foot(fig)
            _room_for_plots(fig, dpi, roomed, limits)
        legible(fig, dpi, at_most=PHONE_PX)
        below = _lay_out_above_foot(fig)
        for _ in range(3):  # raised fonts widen the figure, which shrinks it on the phone: until it settles
            min_px = legible(fig, dpi, at_most=PHONE_PX)
            if min_px * min(1.0, PHONE_PX / _natural_width_px(fig, dpi)) >= MIN_FONT_PX:
                break
        below = _lay_out_above_foot(fig)  # the raised fonts (axis labels, the foot's lines) laid out again
        for share in (0.3, 0.25, 0.2) if roomed else ():  # wrapped again at the raised fonts' size, narrower
            _room_for_plots(fig, dpi, roomed, limits, share)
            below = _lay_out_above_foot(fig)
            # with a margin: the column may be a few pixels narrower than PHONE_PX
            if min_plot_px(fig, dpi) * min(1.0, PHONE_PX / _natural_width_px(fig, dpi)) >= MIN_PLOT_PX * 1.05:
                break
        # a title wider than its panel holds the panel narrower than the column lets it be: wrapped to the panel
        renderer = fig.canvas.get_renderer()
        for ax in _plots(fig):
            text = ax.get_title()
            box = ax.title.get_window_extent(renderer)
            if text and "\n" not in text and box.width > ax.bbox.width:
                titles.append((ax, text))
                ax.title.set_text(textwrap.fill(text, max(12, int(len(text) * ax.bbox.width / box.width))))
        if titles:
            below = _lay_out_above_foot(fig)
        for _ in range(3):  # a panel of fixed aspect (a heat map's square cells) is as wide as its height lets it be
            scale = min(1.0, PHONE_PX / _natural_width_px(fig, dpi))
            fixed = [ax.bbox.width * dpi / fig.dpi * scale for ax in _plots(fig) if ax.get_aspect() != "auto"]
            narrow = [w for w in fixed if w < MIN_PLOT_PX * 1.05]
            if not narrow:
                break
            w, h = fig.get_size_inches()
            fig.set_size_inches(w, h * min(2.0, MIN_PLOT_PX * 1.1 / max(min(narrow), 1.0)))
            below = _lay_out_above_foot(fig)
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
                fig.tight_layout(**_PADS, rect=(0, max(0.03, below + 0.01), 1, 1))
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
                    fig.tight_layout(**_PADS, rect=(0, max(0.03, (below * h) / (h + grow) + 0.01), 1, 1))
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
                    fig.tight_layout(**_PADS, rect=(0, max(0.03, (below * h) / (h + grow) + 0.01), 1, 1))
                fig.canvas.draw()
                renderer = fig.canvas.get_renderer()
        _clear_the_foot(fig)
        _clear_the_head(fig)
        meta = {
            "andrea:min-font-px": f"{min_px:.2f}",
            "andrea:min-plot-px": f"{min_plot_px(fig, dpi):.1f}",
            # how many panels were stacked (0: drawn narrower as it is): the site's build says "stacked" only then
            "andrea:stacked-panels": str(len(panels) if panels is not None else 0),
            "andrea:same-look": json.dumps(same_look(fig)),
            "andrea:legend-on-data": json.dumps(legends_on_data(fig)),
            "andrea:text-collisions": json.dumps(texts_collide(fig), ensure_ascii=True),
        }
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata=meta)
        return buf.getvalue()
    finally:
        for ax, text in titles:
            ax.title.set_text(text)
        for cax in bars_under:
            cax.remove()
        _restore_ticks(thinned)
        _restore_ticks(roomed)
        for ax, xlim in reversed(limits):
            ax.set_xlim(xlim)
        fig.set_size_inches(size)
        for ax, label in unshared:
            ax.yaxis.set_tick_params(which="both", labelleft=False)
            ax.set_ylabel(label)
        for ax in unshared_x:
            ax.xaxis.set_tick_params(which="both", labelbottom=False)
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
