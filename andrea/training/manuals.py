"""The manuals corpus: Python's full manuals, shipped with the book, that chapter 8's model trained on.

The reStructuredText sources of the documentation of Python 3.11 (the tutorial, the library and
language references, the HOWTOs, the FAQ, the C API, "What's new"), as Debian's ``python3.11-doc``
installs them: 11 MB of English with Python in it, under the PSF License. The book ships them in
``andrea/texts/python-3.11-manuals.jsonl.xz`` (2.2 MB, its SHA-256 checked on every read), so that
every machine and every Python reads the same text without installing anything; ``tools/make_corpus.py``
makes that file again from an installed copy. The chapters' own corpus (``andrea.training.data``, 2 MB)
is too small to train twelve blocks without memorising it.

The held-out split is by *file*: a file whose path hashes to 0 modulo 10 is validation, so no page
of the validation text was seen in training, not even in part. Each file keeps its manual (its top
folder), which the probes use as a label.

It lives with the training code, below chapter 8's package (``andrea.trained``, which imports it as
``corpus``), so that the training command line can train ``--preset andrea-120m`` on it
(``load``: the text in the tokenizer chapter 8's model was trained with, ``book_tokenizer``).
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..files import cache_dir, read_cached, source_hash, write_cached
from .data import BPETokenizer, TokenData

SHIPPED = Path(__file__).resolve().parents[1] / "texts" / "python-3.11-manuals.jsonl.xz"
SHIPPED_SHA256 = "db46b7cec36a5e0af7e71086c3f464a0199ba2563bb03128fd6d77fabce2f83a"
PACKAGE = "python3.11-doc"  # where the shipped text comes from (Debian's package of Python 3.11's manuals)
# The manuals, by top folder; the small folders are grouped with their nearest kind.
MANUALS = {
    "library": "library",
    "c-api": "c-api",
    "extending": "c-api",
    "reference": "reference",
    "tutorial": "guides",
    "howto": "guides",
    "faq": "guides",
    "using": "guides",
    "whatsnew": "whatsnew",
}
SKIP = {"whatsnew/changelog.rst.txt", "contents.rst.txt", "copyright.rst.txt", "license.rst.txt"}
VAL_MODULUS = 10


@dataclass(frozen=True)
class Doc:
    path: str  # relative to the docs root, e.g. "library/functions.rst.txt"
    manual: str  # one of MANUALS' values
    text: str

    @property
    def held_out(self) -> bool:
        return is_held_out(self.path)


def is_held_out(path: str) -> bool:
    """Validation file or not: by the file's path alone, so the split never depends on the order."""
    return int(hashlib.sha256(path.encode("utf-8")).hexdigest(), 16) % VAL_MODULUS == 0


def manual_docs() -> list[Doc]:
    """Every file of the manuals that belongs to one of ``MANUALS``, sorted by path: the shipped file,
    checked against ``SHIPPED_SHA256``."""
    try:
        blob = SHIPPED.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the manuals' text is missing at {str(SHIPPED)!r}: restore it from git (git checkout -- andrea/texts)"
        ) from None
    got = hashlib.sha256(blob).hexdigest()
    if got != SHIPPED_SHA256:
        raise ValueError(
            f"{str(SHIPPED)!r} has SHA-256 {got[:12]}…, expected {SHIPPED_SHA256[:12]}…: the file was altered; "
            "restore it from git (git checkout -- andrea/texts), or rebuild it with tools/make_corpus.py"
        )
    docs = []
    for line in lzma.decompress(blob).decode("utf-8").splitlines():
        row = json.loads(line)
        docs.append(Doc(row["path"], MANUALS[row["path"].split("/")[0]], row["text"]))
    return docs


def _code() -> str:
    return source_hash(["training.data", "training.manuals"])


def corpus_digest(docs: list[Doc]) -> str:
    h = hashlib.sha256()
    for d in docs:
        h.update(d.path.encode() + b"\0" + d.text.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


def token_data(tok: BPETokenizer, docs: list[Doc] | None = None) -> TokenData:
    """The manuals as ``tok``'s ids (the book's 8449-token BPE: the shipped model's, ``model.tokenizer()``,
    or a fresh one to retrain it): training files, then the held-out files.

    Each file ends with the tokenizer's end-of-text token. Cached (checksummed) by the corpus's
    digest. ``TokenData.digest`` names the corpus.
    """
    docs = manual_docs() if docs is None else docs
    digest = corpus_digest(docs)
    which = hashlib.sha256(tok._tok.to_str().encode("utf-8")).hexdigest()[:12]  # which tokenizer
    path = cache_dir() / f"manuals-ids-{tok.vocab_size}-{digest}-{which}.npz"
    cached = read_cached(path, _code())
    if cached is not None:
        z = np.load(io.BytesIO(cached), allow_pickle=False)
        train, val = z["train"], z["val"]
    else:
        parts: dict[bool, list[np.ndarray]] = {False: [], True: []}
        encoded = tok.encode_batch([d.text for d in docs])
        for d, ids in zip(docs, encoded):
            parts[d.held_out].append(np.asarray(ids + [tok.eot_id], dtype=np.int64))
        train, val = np.concatenate(parts[False]), np.concatenate(parts[True])
        buf = io.BytesIO()
        np.savez(buf, train=train, val=val)
        write_cached(path, buf.getvalue(), _code())
    return TokenData(
        train=torch.from_numpy(train.astype(np.int64)),
        val=torch.from_numpy(val.astype(np.int64)),
        vocab_size=tok.vocab_size,
        tokenizer=tok,
        digest=digest,
    )


def describe(docs: list[Doc]) -> dict:
    """Files, characters and manuals of each split."""
    out: dict = {}
    for split, held in (("train", False), ("val", True)):
        part = [d for d in docs if d.held_out == held]
        out[split] = {
            "files": len(part),
            "characters": sum(len(d.text) for d in part),
            "manuals": {m: sum(d.manual == m for d in part) for m in sorted(set(MANUALS.values()))},
        }
    return out


# The tokenizer chapter 8's model was trained with, shipped beside its weights; its SHA-256 is in the log.
TRAINED = Path(__file__).resolve().parents[1] / "results" / "trained"
TOKENIZER = TRAINED / "tokenizer.json"


def book_tokenizer() -> BPETokenizer:
    """The book's 8449-token BPE as chapter 8's model was trained with it (``results/trained/tokenizer.json``),
    checked against the SHA-256 its training log names: the same ids on every Python, whichever docs it has.
    (``andrea.trained.model.tokenizer`` reads the same file and checks the whole log besides.)"""
    import json

    from tokenizers import Tokenizer

    log = TRAINED / "trained.json"
    try:
        blob, want = TOKENIZER.read_bytes(), json.loads(log.read_text(encoding="utf-8"))["tokenizer_sha256"]
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{e.filename!r} is missing: restore it from git (git checkout -- andrea/results/trained)"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f"{str(log)!r} is not chapter 8's training log (no tokenizer_sha256): "
            "restore it from git (git checkout -- andrea/results/trained)"
        ) from None
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        raise ValueError(
            f"{str(TOKENIZER)!r} has SHA-256 {got[:12]}…, the log says {str(want)[:12]}…: it is not the tokenizer "
            "chapter 8's model was trained with; restore it from git (git checkout -- andrea/results/trained)"
        )
    return BPETokenizer(Tokenizer.from_str(blob.decode("utf-8")))


def load() -> TokenData:
    """The manuals in the book's tokenizer (``book_tokenizer``): training files, then held-out files, exactly
    the ids chapter 8's model trained and was validated on (``TokenData.digest`` names the corpus)."""
    return token_data(book_tokenizer())
