"""The PNG the book shows for a figure (``book_png``): drawn legibly (``legibility``), with its audit in the
PNG's text chunks and the phone's rendering (``phone``) carried inside it (``with_phone``); ``png_audit``
reads the audit back (the site's tests do, on every figure of the built book) and the site's build takes the
phone's PNG out (``split_phone``, book/_ext/andrea_site.py); ``show_legibly`` makes IPython draw every figure
through ``book_png``."""

from __future__ import annotations

import io

import matplotlib
import matplotlib.colors

from .legibility import (
    _clear_the_foot,
    _clear_the_head,
    _texts,
    legends_off_data,
    legends_on_data,
    legible,
    min_plot_px,
    same_look,
    texts_collide,
    untangle_ticks,
)
from .phone import _lay_out_above_foot, phone_png


def book_png(fig, dpi: float = 100) -> bytes:
    """The figure as the book shows it (a tight PNG), with its legibility audit in the PNG's text
    chunks: ``andrea:min-font-px`` (smallest font, in the PNG's pixels), ``andrea:min-plot-px`` (the
    narrowest plotted area's width, in the PNG's pixels), ``andrea:same-look``
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
    places = [(ax, ax.get_position(original=True)) for ax in fig.axes]
    size = fig.get_size_inches().copy()
    if any(c.endswith("almost touch") for c in texts_collide(fig)):
        # raised fonts brought two panels' texts together (a row's x labels onto the next row's titles):
        # laid out again at the fonts the figure is shown with (the figure's own layout is put back after)
        _lay_out_above_foot(fig)
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
        "andrea:min-plot-px": f"{min_plot_px(fig, dpi):.1f}",
        "andrea:same-look": json.dumps(same_look(fig)),
        "andrea:legend-on-data": json.dumps(legends_on_data(fig)),
        "andrea:text-collisions": json.dumps(texts_collide(fig), ensure_ascii=True),
        "andrea:colours": json.dumps(colours, ensure_ascii=True),
    }
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata=meta)
    fig.set_size_inches(size)
    for ax, pos in places:
        ax.set_position(pos)
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


def png_audit(data: bytes) -> dict:
    """The audit ``book_png`` wrote into a PNG (empty for a PNG it did not write)."""
    from PIL import Image

    info = getattr(Image.open(io.BytesIO(data)), "text", {})  # a PNG's text chunks
    return {k: v for k, v in info.items() if k.startswith("andrea:") and k != "andrea:phone"}


def show_legibly(ip) -> None:
    """Make an IPython shell display every matplotlib figure through ``book_png``."""
    from matplotlib.figure import Figure

    ip.display_formatter.formatters["image/png"].for_type(Figure, book_png)
