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
  ``_static/andrea/`` of the built site (from ``andrea/results/trained``, never a second copy in git).
"""

from pathlib import Path


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


def _attention_assets(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from andrea.web.attention import write_site_assets

    write_site_assets(Path(app.outdir) / "_static" / "andrea")


def setup(app):
    app.connect("html-page-context", _page_context, priority=900)
    app.connect("build-finished", _attention_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
