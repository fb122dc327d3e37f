"""Write colab/<chapter>.ipynb from each book/<chapter>.md (jupytext), without outputs.

Google Colab opens only .ipynb files, and the chapters are MyST Markdown notebooks, so the chapters'
Colab launch buttons point at these copies (book/_ext/andrea_site.py rewrites the links). Run after
editing a chapter; tests/test_book_source.py fails while a copy is out of date.

    .venv/bin/python tools/sync_colab.py
"""

from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]


def colab_notebook(md: Path) -> nbformat.NotebookNode:
    nb = jupytext.read(md)
    for i, cell in enumerate(nb.cells):
        cell.id = f"{md.stem.split('_')[0]}-{i:02d}"
        cell.metadata.pop("vscode", None)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def main() -> None:
    out = ROOT / "colab"
    out.mkdir(exist_ok=True)
    for md in sorted((ROOT / "book").glob("0*.md")):
        path = out / f"{md.stem}.ipynb"
        nbformat.write(colab_notebook(md), path)
        print("wrote", path.relative_to(ROOT))


if __name__ == "__main__":
    main()
