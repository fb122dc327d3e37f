"""Rebuild the book's two shipped texts from a Python 3.11 installation.

1. ``andrea/texts/python-3.11-docs.txt.xz``, the chapters' corpus (``andrea.training.data``): the help
   topics of ``pydoc_data`` and the docstrings of the standard library's modules (longer than 40
   characters, read from the source files with ``ast``, nothing imported), one document per
   paragraph-separated block. It must be made by Python 3.11 (another Python has other docs).
2. ``andrea/texts/python-3.11-manuals.jsonl.xz``, chapter 8's corpus (``andrea.training.manuals``): the
   reStructuredText sources of Python 3.11's manuals, as Debian's ``python3.11-doc`` installs them
   under ``/usr/share/doc/python3.11/html/_sources`` (PSF License), one JSON line per file (its path
   under ``_sources`` and its text). Kept: the files of the folders in ``corpus.MANUALS``, less
   ``corpus.SKIP``, stripped, of more than 200 characters, sorted by path.

Shipped, they give every machine and every Python the same text, without an apt package.
This tool makes both files again and prints their SHA-256s, to put in ``andrea.training.data.DOCS_SHA256``
and ``andrea.training.manuals.SHIPPED_SHA256``:

    sudo apt-get install python3.11-doc
    python3.11 tools/make_corpus.py                       # writes both files, prints their SHA-256s
    python3.11 tools/make_corpus.py --docs /path/_sources # another copy of the manuals' folder
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import lzma
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from andrea.training import data  # noqa: E402
from andrea.training import manuals as corpus  # noqa: E402

DEFAULT_DOCS = Path("/usr/share/doc/python3.11/html/_sources")
_SKIP_DIRS = {"test", "tests", "site-packages", "dist-packages", "idlelib", "lib2to3", "turtledemo", "__pycache__"}


def stdlib_docstrings() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not (_SKIP_DIRS & set(p.relative_to(root).parts)))
    docs = []
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 40:
                    docs.append(doc)
    return docs


def python_docs_text() -> str:
    """The chapters' corpus as this Python makes it: pydoc's help topics, then the stdlib's docstrings."""
    from pydoc_data import topics

    if sys.version_info[:2] != (3, 11):
        raise SystemExit(f"the chapters' corpus is Python 3.11's docs; this is Python {sys.version.split()[0]}")
    parts = [topics.topics[k].strip() for k in sorted(topics.topics)]
    parts += stdlib_docstrings()
    return "\n\n".join(parts) + "\n"


def read_manuals(root: Path) -> list[dict]:
    if not root.is_dir():
        raise SystemExit(f"Python's manuals are not at {str(root)!r}: sudo apt-get install python3.11-doc")
    out = []
    for p in sorted(root.rglob("*.rst.txt")):
        rel = p.relative_to(root).as_posix()
        manual = corpus.MANUALS.get(rel.split("/")[0]) if "/" in rel else None
        if manual is None or rel in corpus.SKIP:
            continue
        text = p.read_text(encoding="utf-8").strip()
        if len(text) > 200:
            out.append({"path": rel, "text": text})
    if len(out) < 100:
        raise SystemExit(f"found only {len(out)} manual pages under {str(root)!r}; is python3.11-doc complete?")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/make_corpus.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help=f"the manuals' _sources folder ({DEFAULT_DOCS})")
    a = p.parse_args(argv)
    text = python_docs_text().encode("utf-8")
    _write(data.DOCS_TEXT, text, "the chapters' corpus")
    docs = read_manuals(a.docs)
    lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8")
    _write(corpus.SHIPPED, lines, f"the manuals, {len(docs)} files")
    return 0


def _write(path: Path, raw: bytes, what: str) -> None:
    blob = lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    print(
        f"{what}: {len(raw) / 1e6:.1f} MB of text, {len(blob) / 1e6:.2f} MB compressed, in {path}\n"
        f"  SHA-256 {hashlib.sha256(blob).hexdigest()}"
    )


if __name__ == "__main__":
    sys.exit(main())
