"""Sphinx tweaks for the ANDREA book's site (registered in _config.yml as a local extension).

* The book uses no Thebe (live code runs through the launch buttons), but sphinx-thebe, which
  Jupyter Book always loads, still adds its configuration script to every page, twice, which
  raises a JavaScript error ("THEBE_JS_URL has already been declared"). We drop its scripts.
* Colab opens only .ipynb files: the chapters' Colab buttons point at colab/<chapter>.ipynb
  (made from the chapter by tools/sync_colab.py) instead of the chapter's .md source.
* pydata-sphinx-theme logs a console error when no default colour mode is set; we set "auto"
  (follow the reader's system setting) through the
  ``default_mode`` template variable.
* The attention viewer (``andrea.web.attention``) computes in the page from the trained
  model's weights, its tokenizer and its config: when an HTML build finishes they are written into
  ``_static/andrea/`` of the built site (from ``andrea/results/trained``, never a second copy in git),
  and so is the byte corpus the page trains on (``andrea.web.training``).
* Phones get figures that fit their column: each figure's PNG carries a second rendering, its panels
  stacked (``andrea.views.phone.phone_png``). When the build finishes it is taken out into
  ``<name>.phone.png`` beside the figure, and each ``<img>`` of the figure becomes a ``<picture>``
  whose phone source the browser picks at 700 px or less (book/_static/andrea.css). A caption that
  names panel places gets the note on reading them stacked only where the phone's rendering did stack
  panels (its ``andrea:stacked-panels``), not on a one-panel figure.
"""

import re
from pathlib import Path

PHONE_MEDIA = "(max-width: 700px)"
_IMG = re.compile(r'<img\b[^>]*?\bsrc="([^"]*_images/[^"/]+?)\.png"[^>]*>')
_FIGURE = re.compile(r'<figure class="([^"]*)"(.*?)</figure>', re.S)
# a caption that places its panels ("left:", "top row") speaks of the desktop layout
_PLACES = re.compile(r"\b(left|right|middle|top row|bottom row)\b", re.I)


def _is_thebe(js) -> bool:
    name = str(js) or ""
    body = getattr(js, "attributes", {}).get("body", "") if hasattr(js, "attributes") else ""
    return "thebe" in name.lower() or "THEBE_JS_URL" in (body or "")


def _colab_to_ipynb(context):
    for group in context.get("header_buttons", []) or []:
        for button in group.get("buttons", []) or []:
            url = button.get("url", "")
            if url.startswith("https://colab.research.google.com/") and url.endswith(".md"):
                head, _, name = url.rpartition("/")
                head = head.rsplit("/book", 1)[0] if head.endswith("/book") else head
                button["url"] = f"{head}/colab/{name[:-3]}.ipynb"


def _page_context(app, pagename, templatename, context, doctree):
    context.setdefault("default_mode", "auto")
    _colab_to_ipynb(context)
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if not _is_thebe(js)]
    if "css_files" in context:
        context["css_files"] = [css for css in context["css_files"] if "thebe" not in str(css).lower()]


def _page_assets(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from andrea.web import attention, training

    attention.write_site_assets(Path(app.outdir) / "_static" / "andrea")
    training.write_site_assets(Path(app.outdir) / "_static" / "andrea")


def phone_figures(outdir: Path) -> int:
    """Take the phone renderings out of the built figures and give every page's figures a phone
    source (the module docstring); returns how many figures have one. Idempotent."""
    from andrea.views.figure_png import png_audit, split_phone

    images = outdir / "_images"
    phones, stacked_stems = set(), set()
    for png in sorted(images.glob("*.png")) if images.is_dir() else []:
        if png.name.endswith(".phone.png"):
            continue
        desk, phone = split_phone(png.read_bytes())
        if phone is not None:
            png.with_name(png.stem + ".phone.png").write_bytes(phone)
            png.write_bytes(desk)
        if png.with_name(png.stem + ".phone.png").is_file():
            phones.add(png.stem)
            # the phone's rendering says how many panels it stacked (one written before it said so: stacked)
            panels = png_audit(png.with_name(png.stem + ".phone.png").read_bytes()).get("andrea:stacked-panels", "2")
            if int(panels) >= 2:
                stacked_stems.add(png.stem)

    def picture(m):
        stem = m.group(1).rsplit("/", 1)[-1]
        if stem not in phones or m.string[: m.start()].endswith('.phone.png">'):  # not twice
            return m.group(0)
        return f'<picture><source media="{PHONE_MEDIA}" srcset="{m.group(1)}.phone.png">{m.group(0)}</picture>'

    def stacked(m):
        # a figure with a phone rendering whose caption names panel places: on a phone the panels are
        # stacked, and the caption says how to read its places there (andrea.css, .andrea-stacked)
        classes, body = m.group(1), m.group(2)
        caption = body.split("<figcaption", 1)[-1] if "<figcaption" in body else ""
        shown = {src.rsplit("/", 1)[-1] for src in _IMG.findall(body)}
        if "andrea-stacked" in classes or not shown & stacked_stems or not _PLACES.search(caption):
            return m.group(0)
        return f'<figure class="{classes} andrea-stacked"{body}</figure>'

    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if "_images/" not in text:
            continue
        new = _FIGURE.sub(stacked, _IMG.sub(picture, text))
        if new != text:
            page.write_text(new, encoding="utf-8")
    return len(phones)


def _phone_figures(app, exception):
    if exception is None and app.builder.format == "html":
        phone_figures(Path(app.outdir))


def setup(app):
    app.connect("html-page-context", _page_context, priority=900)
    app.connect("build-finished", _page_assets)
    app.connect("build-finished", _phone_figures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
