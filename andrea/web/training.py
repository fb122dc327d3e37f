"""Training in the reader's browser: what the site serves for it.

The page trains ANDREA with ``book/_static/andrea_train.js`` (one optimizer step as
``andrea.training.train`` takes it) in a Web Worker (``andrea_train_worker.js``), on batches drawn
from ``_static/andrea/train_corpus.bin``: the first ``CORPUS_BYTES`` bytes of the chapters' own
corpus (Python's documentation, ``andrea.training.data.python_docs_corpus``), as the byte tokenizer
reads it (UTF-8). ``write_site_assets`` writes it (the book's Sphinx extension calls it when a build
finishes; the browser tests call it for their own small site).
"""

from __future__ import annotations

from pathlib import Path

from ..files import atomic_write_bytes

CORPUS_BYTES = 1 << 20  # 1 MiB: about half the corpus, enough windows for a few thousand steps
CORPUS_FILE = "train_corpus.bin"


def corpus_bytes(n: int = CORPUS_BYTES) -> bytes:
    """The first ``n`` bytes of the chapters' corpus, UTF-8 (the byte tokenizer's ids)."""
    from ..training.data import python_docs_corpus

    if not isinstance(n, int) or isinstance(n, bool) or n < 1024:
        raise ValueError(f"the page's corpus needs n >= 1024 bytes, got {n!r}")
    return python_docs_corpus().encode("utf-8")[:n]


def write_site_assets(dest: Path | str) -> Path:
    """Write ``train_corpus.bin`` into ``dest`` (made if missing, written atomically)."""
    return atomic_write_bytes(Path(dest) / CORPUS_FILE, corpus_bytes())
