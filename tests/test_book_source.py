"""The book's sources: table of contents, chapter standard, launch/install cells, clean labs."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = sorted((ROOT / "book").glob("0*.md"))
LABS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def toc_files():
    return [c["file"] for part in TOC["parts"] for c in part["chapters"]]


def test_toc_parts_and_files_exist():
    assert [p["caption"] for p in TOC["parts"]] == ["Inside one block", "The stack", "Labs", "Appendix"]
    for f in toc_files() + [TOC["root"]]:
        assert (ROOT / f).with_suffix(".md").exists() or (ROOT / f).with_suffix(".ipynb").exists(), f
    listed = set(toc_files())
    for ch in CHAPTERS:
        assert f"book/{ch.stem}" in listed
    for lab in LABS:
        assert f"notebooks/{lab.stem}" in listed


def source_text(path):
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    return path.read_text()


@pytest.mark.parametrize("path", CHAPTERS + LABS, ids=lambda p: p.name)
def test_install_cell_uses_the_configured_repository(path):
    urls = re.findall(r'andrea @ git\+(\S+?)"', source_text(path))
    assert urls, f"{path.name} has no hidden install cell"
    assert set(urls) == {CONFIG["repository"]["url"]}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_standard(path):
    text = path.read_text()
    assert text.startswith("---\njupytext:"), "MyST notebook front matter"
    assert "## Checking the claims" in text and "ClaimsTable(" in text
    assert len(re.findall(r"from andrea\.exercises import check_\w+", text)) >= 4  # >= 2 exercises, each shown + solved
    assert text.count("# Solution") >= 2
    assert "mystnb:\n  figure:" in text, "at least one numbered figure"
    for block in re.findall(r"mystnb:\n  figure:.*?\n---", text, flags=re.S):
        assert "alt:" in block, "every figure has alt text"
    assert "class " not in re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)  # no classes pasted into prose
    for cell in re.findall(r"```\{code-cell\} ipython3\n(.*?)```", text, flags=re.S):
        assert not re.search(r"^class \w+\(.*nn\.Module", cell, flags=re.M), "chapters import classes, never paste them"


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
    assert all(js.startswith("vendor/") for js in s["html_js_files"])
    assert CONFIG["execute"]["allow_errors"] is False and CONFIG["launch_buttons"]["thebe"] is False


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_colab_copy_is_in_sync(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_colab", ROOT / "tools" / "sync_colab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    copy = ROOT / "colab" / f"{path.stem}.ipynb"
    assert copy.exists(), f"run tools/sync_colab.py: {copy.name} is missing"
    committed = json.loads(copy.read_text())
    fresh = mod.colab_notebook(path)
    assert ["".join(c["source"]) for c in committed["cells"]] == [c.source for c in fresh.cells], \
        f"colab/{copy.name} is out of date: run tools/sync_colab.py"
    assert all(c.get("outputs", []) == [] for c in committed["cells"] if c["cell_type"] == "code")
