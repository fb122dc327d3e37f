"""The book's sources: table of contents, chapter standard, exercises, notation, code width, labs,
Colab copies, and the direction of the package's dependencies."""

import ast
import json
import re
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = sorted((ROOT / "book").glob("0*.md"))
PAGES = [ROOT / "book" / "attention.md"] + CHAPTERS + [ROOT / "book" / "papers.md"]
LABS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def toc_files():
    return [c["file"] for part in TOC["parts"] for c in part["chapters"]]


def test_toc_parts_and_files_exist():
    assert [p["caption"] for p in TOC["parts"]] == [
        "Before you start",
        "Inside one block",
        "The stack",
        "Labs",
        "Evidence",
        "Appendix",
    ]
    for f in toc_files() + [TOC["root"]]:
        assert (ROOT / f).with_suffix(".md").exists() or (ROOT / f).with_suffix(".ipynb").exists(), f
    listed = set(toc_files())
    for ch in CHAPTERS:
        assert f"book/{ch.stem}" in listed
    for lab in LABS:
        assert f"notebooks/{lab.stem}" in listed
    assert {"book/checking", "book/papers", "book/notation", "book/glossary", "book/references"} <= listed
    for ch in CHAPTERS:  # issue 47: each lesson's evidence page
        assert f"book/evidence/{ch.stem}_evidence" in listed


def source_text(path):
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    return path.read_text()


@pytest.mark.parametrize("path", PAGES + LABS, ids=lambda p: p.name)
def test_install_cell_uses_the_configured_repository(path):
    urls = re.findall(r'andrea @ git\+(\S+?)"', source_text(path))
    assert urls, f"{path.name} has no hidden install cell"
    assert set(urls) == {CONFIG["repository"]["url"]}


EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label: (\S+)\n(.*?)```", re.S)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_standard(path):
    text = path.read_text()
    assert text.startswith("---\njupytext:"), "MyST notebook front matter"
    assert "## Checking the claims" in text and ("ClaimsTable(" in text or "page.claims(" in text)
    assert "mystnb:\n  figure:" in text, "at least one numbered figure"
    for block in re.findall(r"mystnb:\n  figure:.*?\n---", text, flags=re.S):
        assert "alt:" in block, "every figure has alt text"
    assert "class " not in re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)  # no classes in the prose
    for cell in re.findall(r"```\{code-cell\} ipython3\n(.*?)```", text, flags=re.S):
        assert not re.search(r"^class \w+\(.*nn\.Module", cell, flags=re.M), "chapters import classes, never paste them"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_exercises_are_numbered_with_dropdown_solutions_and_checkers(path):
    text = path.read_text()
    labels = [m.group(1) for m in EXERCISE.finditer(text)]
    assert len(labels) >= 3, f"{path.name}: {len(labels)} exercises (at least 3)"
    checked = 0
    for label in labels:
        m = re.search(
            r"```\{solution-start\} " + re.escape(label) + r"\n:class: dropdown\n```(.*?)```\{solution-end\}",
            text,
            flags=re.S,
        )
        assert m, f"{label}: no dropdown solution"
        checked += bool(re.search(r"\bcheck_\w+\(", m.group(1)))
    assert checked >= 3, f"{path.name}: {checked} solutions call a checker (at least 3)"
    assert "**1." not in text and "# Solution" not in text, "old-style exercises"


OLD_FORMS = {
    r"N\(0, 0\.02\)": "write N(0, 0.02²): the second argument is a variance",
    r"N\(0, 1/d": "write N(0, 1/d) only as a variance, with the square made explicit",
    r"relative entropy": "that is KL; say 'normalised entropy'",
    r"1 \+ f['′]\(x\)": "the residual Jacobian is I + J_f",
    r"d_hidden": "the MLP width is mlp_dim (d_mlp) in text and code",
}


@pytest.mark.parametrize(
    "path", PAGES + [ROOT / "book" / "intro.md", ROOT / "book" / "notation.md"], ids=lambda p: p.name
)
def test_one_notation(path):
    text = path.read_text()
    for pattern, why in OLD_FORMS.items():
        assert not re.search(pattern, text), f"{path.name}: {pattern!r}: {why}"


def _displayed_code(path):
    """Code lines a reader sees (cells not removed from the page)."""
    nb = jupytext.read(path) if path.suffix == ".md" else json.loads(path.read_text())
    cells = nb.cells if path.suffix == ".md" else nb["cells"]
    for c in cells:
        ctype = c.cell_type if path.suffix == ".md" else c["cell_type"]
        meta = c.metadata if path.suffix == ".md" else c.get("metadata", {})
        if ctype != "code" or {"remove-cell", "remove-input"} & set(meta.get("tags", [])):
            continue
        src = c.source if path.suffix == ".md" else "".join(c["source"])
        yield from src.splitlines()


@pytest.mark.parametrize("path", PAGES + LABS, ids=lambda p: p.name)
def test_code_cells_fit_the_page(path):
    long = [ln for ln in _displayed_code(path) if len(ln) > 78]
    assert long == [], f"{path.name}: {len(long)} displayed code lines over 78 characters: {long[:3]}"


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_labs_are_stored_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None


def test_config_is_offline_and_strict():
    s = CONFIG["sphinx"]["config"]
    assert s["nb_ipywidgets_js"] == {}
    assert s["mathjax_path"].startswith("vendor/")
    for js in s["html_js_files"]:  # every script is the site's own file: vendored, or the book's
        assert "//" not in js and (js.startswith("vendor/") or (ROOT / "book/_static" / js).is_file()), js
    assert CONFIG["execute"]["allow_errors"] is False and CONFIG["launch_buttons"]["thebe"] is False
    assert "sphinx_exercise" in CONFIG["sphinx"]["extra_extensions"]


@pytest.mark.parametrize(
    "path", [ROOT / "book" / "attention.md", ROOT / "book" / "checking.md"] + CHAPTERS, ids=lambda p: p.name
)
def test_colab_copy_reads_like_the_book(path):
    """colab/<chapter>.ipynb: the chapter's code, the text with the glued values written in, outputs."""
    copy = ROOT / "colab" / f"{path.stem}.ipynb"
    assert copy.exists(), f"run `make book` (tools/make_colab.py): {copy.name} is missing"
    nb = json.loads(copy.read_text())
    chapter_code = [c.source for c in jupytext.read(path).cells if c.cell_type == "code"]
    copy_code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert copy_code == chapter_code, f"colab/{copy.name} is out of date: run `make book`"
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for leftover in ("{glue", "```{", "{doc}", "{cite}", "{numref}", "{ref}", "{term}"):
        assert leftover not in text, f"colab/{copy.name}: MyST markup {leftover!r} left in the text"
    images = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    figures = len(re.findall(r"mystnb:\n  figure:", path.read_text()))
    assert images >= figures, f"colab/{copy.name}: {images} images for {figures} figures"


# The package's layers, from the ground up: a module may import its own layer and those below, never
# one above (the model never imports training, the evidence never imports the book's views, ...).
LAYERS = {
    "files": 0, "device": 0, "progress": 0,  # utilities
    "model": 1, "training": 2, "measure": 3, "evidence": 4, "views": 5,
    "trained": 6, "web": 6,  # chapter 8's model and the in-page model's bridge: they use the views
    "experiments": 7, "__init__": 7,  # the command line and the package's face
}  # fmt: skip
PACKAGE_FILES = sorted((ROOT / "andrea").rglob("*.py"))


def _layer(parts: list[str]) -> int:
    assert parts[0] in LAYERS, f"andrea/{'/'.join(parts)}: a module in no layer (add it to LAYERS)"
    return LAYERS[parts[0]]


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=lambda p: str(p.relative_to(ROOT / "andrea")))
def test_dependencies_point_one_way(path):
    """No module imports from a layer above its own (lazy imports inside functions included)."""
    parts = list(path.relative_to(ROOT / "andrea").with_suffix("").parts)
    own = _layer(parts)
    package = parts[:-1]  # the module's package, relative to andrea/
    up = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = base + (node.module.split(".") if node.module else [])
            targets = [target] if node.module else [target + [a.name] for a in node.names]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            targets = [n.split(".")[1:] for n in names if n and n.split(".")[0] == "andrea" and "." in n]
        else:
            continue
        # a name that is no module of andrea (``from .. import __version__``) is an attribute of its face
        targets = [
            t
            for t in targets
            if t and ((ROOT / "andrea" / f"{t[0]}.py").is_file() or (ROOT / "andrea" / t[0]).is_dir())
        ]
        up += [".".join(t) for t in targets if _layer(t) > own]
    assert not up, f"andrea/{'/'.join(parts)}.py (layer {own}) imports from a higher layer: {up}"


def test_importing_plots_leaves_matplotlib_settings_alone():
    import subprocess
    import sys

    code = (
        "import matplotlib; before = dict(matplotlib.rcParams); import andrea.views.plots; "
        "changed = [k for k, v in matplotlib.rcParams.items() if before.get(k) != v]; print(changed)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"importing andrea.views.plots changed {out}"


# Setup helpers (build a model, a batch, a config, a timer): shown once, in the first page that uses them.
PLUMBING = {"fresh_model", "small", "text_batch", "random_batch", "stream_at", "time_call"}


def _removed(cell) -> bool:
    """A code cell the page does not show at all (neither its code nor a toggle for it)."""
    return bool({"remove-cell", "remove-input"} & set(cell.metadata.get("tags", [])))


def _package_function(node) -> str | None:
    """``f`` for an expression ``analysis.f`` or ``papers.f``, else None."""
    if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") in {"analysis", "papers"}:
        return node.attr
    return None


def _calls_and_shown(path):
    """Package functions a page calls, and those whose source it shows in a cell a reader can open."""
    called, shown = set(), set()
    for cell in jupytext.read(path).cells:
        if cell.cell_type != "code" or "andrea @ git+" in cell.source:  # the install cell has a %pip magic
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if not isinstance(node, ast.Call):
                continue
            if getattr(node.func, "id", "") == "show_source" and not _removed(cell):
                shown |= {name for name in map(_package_function, node.args) if name}
            elif name := _package_function(node.func):
                called.add(name)
    return called, shown


def test_every_analysis_call_has_a_source_toggle():
    """Issue 11: where a page calls an andrea.measure.analysis (or andrea.measure.papers) function, the
    reader can open its source right there; setup helpers once, on the first page that calls them."""
    order = [ROOT / f"{f}.md" for f in toc_files() if (ROOT / f"{f}.md") in PAGES]
    missing, first_seen = [], {}
    for path in order:
        called, shown = _calls_and_shown(path)
        for name in sorted(called):
            if name in PLUMBING:
                first_seen.setdefault(name, (path, name in shown))
            elif name not in shown:
                missing.append(f"{path.name}: {name}")
    missing += [f"{p.name}: {n} (first use)" for n, (p, ok) in first_seen.items() if not ok]
    assert missing == [], f"show_source(...) missing for: {missing}"


def _only_glues(src):
    """A cell that computes nothing a reader needs to see: the install cell, glue(...) calls, imports,
    a bare name that displays a value computed in a visible cell, or the site's static explorer,
    attention viewer or training panel."""
    if "andrea @ git+" in src:
        return True
    for st in ast.parse(src).body:
        call = st.value if isinstance(st, ast.Expr) else None
        if isinstance(st, ast.ImportFrom) or isinstance(call, ast.Name):
            continue
        site_parts = {"glue", "StaticExplorer", "viewer", "TrainPanel"}
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") in site_parts:
            continue
        if isinstance(call, ast.Call) and _is_diagram(call):
            continue
        # the chapter's own words, computed by its module in andrea.views.pages (issue 47)
        if isinstance(call, ast.Call) and getattr(getattr(call.func, "value", None), "id", "") == "page":
            continue
        return False
    return True


def _is_diagram(call):
    """plots.block_diagram(...), plots.stack_diagram(...), plots.diagrams(...): a picture of the
    configuration, drawn from it (its arguments may only name configs)."""
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr in {"block_diagram", "stack_diagram", "diagrams"}


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_removed_cells_only_glue(path):
    """Issue 11: remove-cell/remove-input only for cells that just glue values; a cell that computes
    something the prose relies on (a verdict, a claims table) is visible or behind a toggle."""
    removed = [
        c.source.splitlines()[0]
        for c in jupytext.read(path).cells
        if c.cell_type == "code" and _removed(c) and not _only_glues(c.source)
    ]
    assert removed == [], f"{path.name}: removed cells that compute (use hide-cell/hide-input): {removed}"


def test_show_source_names_the_package_file():
    """A decorated function (torch.no_grad) is shown with its own file, not the decorator's."""
    from andrea.measure import analysis
    from andrea.views.notebook import show_source

    text = show_source(analysis.rank_collapse, analysis.fresh_model).data
    assert "`andrea.measure.analysis.rank_collapse` (andrea/measure/analysis.py)" in text
    assert "def rank_collapse(" in text and "def fresh_model(" in text
    assert "torch" not in text.split("\n")[0]


def test_the_readmes_map_of_the_package_matches_the_tree():
    """Every module and subpackage of andrea/ is on the README's map, and the map names none that is gone."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("\nandrea/ ") : readme.index("\ntests/ ")]
    named = set(re.findall(r"\b([a-z_0-9]+\.py)\b", block)) | set(re.findall(r"\b([a-z_0-9-]+)/", block))
    files = {p.name for p in (ROOT / "andrea").rglob("*.py") if p.name != "__init__.py"}
    folders = {p.name for p in (ROOT / "andrea").rglob("*") if p.is_dir() and p.name != "__pycache__"}
    assert files - named == set(), f"modules missing from the README's map: {sorted(files - named)}"
    assert folders - named == set(), f"folders missing from the README's map: {sorted(folders - named)}"
    ghosts = {n for n in named if n.endswith(".py")} - files
    assert ghosts == set(), f"the README's map names modules that are gone: {sorted(ghosts)}"


MAX_MODULE_LINES = 600  # the project's rule: a longer module is split along its seams


def test_no_module_of_the_package_or_the_tools_is_over_600_lines():
    """Every .py file under andrea/ and tools/ has at most MAX_MODULE_LINES lines."""
    files = sorted((ROOT / "andrea").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py"))
    assert len(files) > 50, "the package and the tools were not found"  # a wrong root would pass vacuously
    lengths = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    long = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}
    assert long == {}, f"over {MAX_MODULE_LINES} lines (split them along their seams): {long}"
