"""Rebuild the trained model's shipped corpus from Python's manuals.

The trained model of chapter 8 learns from Python 3.11's manuals: the reStructuredText sources that
Debian's ``python3.11-doc`` installs under ``/usr/share/doc/python3.11/html/_sources`` (PSF License).
The book ships them, filtered and compressed, as ``andrea/texts/python-3.11-manuals.jsonl.xz`` (one
JSON line per file: its path under ``_sources`` and its text), so that every machine and every
Python reads the same text without an apt package. This tool makes that file again from an
installed copy, and prints the SHA-256 to put in ``andrea.trained.corpus.SHIPPED_SHA256``:

    sudo apt-get install python3.11-doc
    python tools/make_corpus.py                       # writes the file, prints its SHA-256
    python tools/make_corpus.py --docs /path/_sources # another copy of the same folder

What is kept: the files of the folders in ``corpus.MANUALS``, less ``corpus.SKIP``, stripped, of more
than 200 characters, sorted by path (``corpus.manual_docs`` reads them back in that order).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from andrea.trained import corpus  # noqa: E402

DEFAULT_DOCS = Path("/usr/share/doc/python3.11/html/_sources")


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
    p.add_argument("--out", type=Path, default=corpus.SHIPPED, help=f"where to write ({corpus.SHIPPED})")
    a = p.parse_args(argv)
    docs = read_manuals(a.docs)
    lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8")
    blob = lzma.compress(lines, preset=9 | lzma.PRESET_EXTREME)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_bytes(blob)
    print(
        f"{len(docs)} files, {len(lines) / 1e6:.1f} MB of text, {len(blob) / 1e6:.2f} MB compressed, in {a.out}\n"
        f"SHA-256 {hashlib.sha256(blob).hexdigest()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
