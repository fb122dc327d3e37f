"""Write colab/<chapter>.ipynb from each chapter as the book's build executed it.

Google Colab opens only .ipynb files and knows nothing of MyST, so a chapter's Colab copy is made
from the executed notebook that `make book` leaves in _build/jupyter_execute/book/: the outputs
(figures, tables, printed numbers) are kept, and the MyST markup in the text is turned into what
Colab can show: glued values ({glue:text}`name`) become the values themselves, cross-references
become plain words, exercises become headed paragraphs, and the static explorer (drawn on the site
by the book's own JavaScript) becomes a Vega-Lite chart that Colab draws itself. A reader who clicks
the launch button sees the same page before running anything. The build calls this at its end.

    .venv/bin/python tools/make_colab.py     # after `make book`
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ROOT / "_build" / "jupyter_execute" / "book"
OUT = ROOT / "colab"
CACHE = ROOT / "_build" / ".jupyter_cache"  # myst-nb's execution cache (execute_notebooks: cache)
GLUE_PREFIX = "application/papermill.record/"
VEGALITE = "application/vnd.vegalite.v5+json"


def _glue_outputs(nb, executed: Path | None = None):
    """The executed notebook's glue records: kept in its outputs, or (myst-nb moves them there when it
    renders the page) in the ``<name>.glue.json`` file beside it."""
    for cell in nb.cells:
        yield from cell.get("outputs", []) if cell.cell_type == "code" else []
    side = executed.with_suffix(".glue.json") if executed is not None else None
    if side is not None and side.exists():
        yield from json.loads(side.read_text()).values()


def glued_values(nb, executed: Path | None = None) -> dict:
    """name -> the text a {glue:text} role shows, from the executed notebook's glue records."""
    values = {}
    for out in _glue_outputs(nb, executed):
        meta = out.get("metadata", {}).get("scrapbook", {})
        if "name" not in meta:
            continue
        data = out.get("data", {})
        text = data.get(GLUE_PREFIX + "text/plain", data.get("text/plain", ""))
        try:
            value = ast.literal_eval(text)
            values[meta["name"]] = str(value)
        except (ValueError, SyntaxError):
            values[meta["name"]] = text
    return values


def _titles() -> dict:
    """doc path -> its title (the first '# ' heading), for {doc} references."""
    out = {}
    for p in list((ROOT / "book").glob("*.md")) + list((ROOT / "notebooks").glob("*.ipynb")):
        text = p.read_text()
        m = re.search(r"^# (.+)$", text, flags=re.M) if p.suffix == ".md" else re.search(r'"# ([^"\\]+)', text)
        if m:
            out[p.stem] = m.group(1).strip()
    return out


def plain_markdown(text: str, values: dict, titles: dict) -> str:
    """MyST markup to plain Markdown (what Colab renders)."""

    def glue(m):
        name = m.group(1).split(":")[0]
        if name not in values:
            raise KeyError(f"glued value {name!r} is not in the executed notebook")
        return values[name]

    text = re.sub(r"\{glue(?::text)?\}`([^`]+)`", glue, text)
    text = re.sub(r"\{doc\}`([^`]+)`", lambda m: f"*{titles.get(Path(m.group(1)).stem, Path(m.group(1)).stem)}*", text)
    text = re.sub(r"\{cite\}`([^`]+)`", lambda m: "[" + m.group(1).replace(",", "; ") + "]", text)
    text = re.sub(r"\{numref\}`[^`]+`", "the figure", text)
    text = re.sub(r"\{term\}`([^`<]+?)(?: <[^>]+>)?`", lambda m: m.group(1).strip(), text)  # glossary links
    text = re.sub(
        r"\{ref\}`([^`<]+?)(?: <[^>]+>)?`",
        lambda m: "the appendix section" if m.group(1).startswith("app-") else m.group(1),
        text,
    )
    text = re.sub(
        r"```\{exercise\}[ \t]*([^\n]*)\n(?::[a-z]+:[^\n]*\n)*(.*?)```",
        lambda m: (
            f"**Exercise: {m.group(1).strip().rstrip('.')}{'' if m.group(1).strip()[-1:] in '?!' else '.'}** "
            f"{m.group(2).strip()}"
        ),
        text,
        flags=re.S,
    )
    text = re.sub(r"```\{solution-start\}.*?```", "**Solution.**", text, flags=re.S)
    text = re.sub(r"```\{solution-end\}\s*```", "", text, flags=re.S)
    text = re.sub(
        r"```\{(?:note|important|admonition)\}[ \t]*([^\n]*)\n(.*?)```",
        lambda m: "> **" + (m.group(1).strip() or "Note") + "** " + m.group(2).strip().replace("\n", "\n> "),
        text,
        flags=re.S,
    )
    text = re.sub(r"^\(([\w-]+)\)=\s*$", "", text, flags=re.M)
    return text.strip()


def _vegalite_from_html(html: str):
    """The Vega-Lite spec embedded in the static explorer's HTML (None if there is none)."""
    m = re.search(r"vegaEmbed\(el, (\{.*\}), \{renderer", html, flags=re.S)
    if not m:
        return None
    spec = json.loads(m.group(1))
    spec["$schema"] = "https://vega.github.io/schema/vega-lite/v5.json"
    return spec


def _with_outputs(executed: Path) -> nbformat.NotebookNode:
    """The executed notebook with its outputs. When myst-nb takes a page's outputs from its execution
    cache, the copy it writes to _build/jupyter_execute has none (myst-nb 1.x writes the notebook it
    read, not the one its cache client merged), so they are merged from that cache here."""
    nb = nbformat.read(executed, as_version=4)
    if any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):  # executed by myst-nb: it has them
        return nb
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(CACHE)).merge_match_into_notebook(nb)
    except KeyError:
        raise SystemExit(
            f"make_colab: {executed.name} has no outputs and no match in {CACHE}: run `make book` again"
        ) from None
    return merged


def _without_phone(b64) -> str:
    import base64

    from andrea.views.figure_png import split_phone

    png = base64.b64decode("".join(b64) if isinstance(b64, list) else b64)
    return base64.b64encode(split_phone(png)[0]).decode("ascii")


def colab_notebook(executed: Path) -> nbformat.NotebookNode:
    nb = _with_outputs(executed)
    values, titles = glued_values(nb, executed), _titles()
    cells = []
    for i, cell in enumerate(nb.cells):
        cell.id = f"{executed.stem.split('_')[0]}-{i:02d}"
        cell.metadata.pop("vscode", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "markdown":
            cell.source = plain_markdown(cell.source, values, titles)
            if not cell.source:
                continue
        elif cell.cell_type == "code":
            outs = []
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if "scrapbook" in out.get("metadata", {}):
                    continue  # glue records: their values are in the text now
                html = data.get("text/html", "")
                html = "".join(html) if isinstance(html, list) else html
                spec = _vegalite_from_html(html) if 'class="andrea-explorer"' in html else None
                if spec is not None:
                    out["data"] = {VEGALITE: spec, "text/plain": "Precomputed gradient-flow explorer (Vega-Lite)"}
                if "text/markdown" in data:  # computed prose ("What we found"): its MyST links as plain words
                    md = data["text/markdown"]
                    data["text/markdown"] = plain_markdown("".join(md) if isinstance(md, list) else md, values, titles)
                if "image/png" in data:  # the site's phone rendering is of no use in Colab
                    data["image/png"] = _without_phone(data["image/png"])
                outs.append(out)
            cell.outputs = outs
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["colab"] = {"provenance": []}
    return nb


def main() -> int:
    # the chapters, and the pages before them that run code (their Colab buttons open these copies)
    chapters = sorted((ROOT / "book").glob("0*.md")) + [ROOT / "book" / "attention.md", ROOT / "book" / "checking.md"]
    missing = [c.stem for c in chapters if not (EXECUTED / f"{c.stem}.ipynb").exists()]
    if missing:
        print(f"make_colab: no executed notebook for {missing} in {EXECUTED}: run `make book` first", file=sys.stderr)
        return 1
    OUT.mkdir(exist_ok=True)
    for c in chapters:
        path = OUT / f"{c.stem}.ipynb"
        nbformat.write(colab_notebook(EXECUTED / f"{c.stem}.ipynb"), path)
        print("wrote", path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
