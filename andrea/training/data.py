"""Real English text that ships with the book, and the tokenizers that turn it into ids.

The corpus is the documentation of Python 3.11 itself: the help topics of ``pydoc_data`` (about
0.5 MB) and the docstrings of the standard library's modules (about 1.6 MB). It ships in
``andrea/texts/python-3.11-docs.txt.xz`` (0.5 MB, its SHA-256 checked on every read), so that every
Python and every OS reads the same text; ``tools/make_corpus.py`` makes that file again from a
Python 3.11. ``load_text(path)`` takes any UTF-8 file instead.

Two tokenizers:
* ``BPETokenizer``: byte-level BPE trained on the corpus to ANDREA's vocabulary of 8449 tokens with
  Hugging Face ``tokenizers``; cached on disk. Byte-level means every input can be encoded.
* ``ByteTokenizer``: one token per UTF-8 byte (one per character in ASCII text), vocabulary 256,
  for the smallest demos and the chapters' quick experiments.
"""

from __future__ import annotations

import hashlib
import io
import lzma
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ..files import cache_dir, read_cached, source_hash, write_cached

ANDREA_VOCAB = 8449
EOT = "<|endoftext|>"
DOCS_TEXT = Path(__file__).resolve().parents[1] / "texts" / "python-3.11-docs.txt.xz"
DOCS_SHA256 = "b2810d2360e45da5c13b73321926c7051ca60acd5ee7d46f6e0d75707ee69da7"


def _code() -> str:
    """The hash of the code that produces this module's caches (checked when a cache is read)."""
    try:
        import tokenizers

        tok_version = tokenizers.__version__
    except ImportError:  # pragma: no cover - a dependency
        tok_version = "none"
    return f"{source_hash(['training.data'])}-tokenizers-{tok_version}"


def python_docs_corpus() -> str:
    """Python 3.11's own documentation as one string, documents separated by blank lines: the shipped
    file, checked against ``DOCS_SHA256``."""
    try:
        blob = DOCS_TEXT.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the corpus is missing at {str(DOCS_TEXT)!r}: restore it from git (git checkout -- andrea/texts)"
        ) from None
    got = hashlib.sha256(blob).hexdigest()
    if got != DOCS_SHA256:
        raise ValueError(
            f"{str(DOCS_TEXT)!r} has SHA-256 {got[:12]}…, expected {DOCS_SHA256[:12]}…: the file was altered; "
            "restore it from git (git checkout -- andrea/texts), or rebuild it with tools/make_corpus.py"
        )
    return lzma.decompress(blob).decode("utf-8")


def load_text(path: Union[str, Path]) -> str:
    """Read a UTF-8 text file, with a clear message for a missing, empty or non-text file."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"corpus file {str(p)!r} does not exist")
    if not p.is_file():
        raise ValueError(f"corpus path {str(p)!r} is not a file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"corpus file {str(p)!r} is not UTF-8 text (byte {e.start}: {e.reason})") from None
    if len(text) < 1000:
        raise ValueError(f"corpus file {str(p)!r} has {len(text)} characters; at least 1000 are needed to train on")
    return text


# ---------------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------------
class ByteTokenizer:
    """One token per UTF-8 byte: lossless for any string, vocabulary 256."""

    vocab_size = 256
    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < 256]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the byte vocabulary [0, 256)")
        return bytes(ids).decode("utf-8", errors="replace")


class BPETokenizer:
    """Byte-level BPE (the GPT-2 scheme) from Hugging Face ``tokenizers``."""

    name = "bpe"

    def __init__(self, tok):
        self._tok = tok
        self.vocab_size = tok.get_vocab_size()
        self.eot_id = tok.token_to_id(EOT)

    @classmethod
    def train(cls, text: str, vocab_size: int = ANDREA_VOCAB, cache: bool = True) -> "BPETokenizer":
        from tokenizers import Tokenizer
        from tokenizers.decoders import ByteLevel as ByteLevelDecoder
        from tokenizers.models import BPE
        from tokenizers.pre_tokenizers import ByteLevel
        from tokenizers.trainers import BpeTrainer

        if vocab_size < 257:
            raise ValueError(f"BPE vocab_size must be at least 257 (256 bytes + {EOT}), got {vocab_size}")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = cache_dir() / f"bpe-{vocab_size}-{digest}.json"
        cached = read_cached(path, _code()) if cache else None
        if cached is not None:
            return cls(Tokenizer.from_str(cached.decode("utf-8")))
        tok = Tokenizer(BPE())
        tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
        tok.decoder = ByteLevelDecoder()
        trainer = BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=[EOT],
            initial_alphabet=ByteLevel.alphabet(),
            show_progress=False,
        )
        chunks = text.split("\n\n")
        tok.train_from_iterator(chunks, trainer=trainer)
        if tok.get_vocab_size() != vocab_size:
            raise ValueError(
                f"the corpus is too small for a vocabulary of {vocab_size}: BPE stopped at {tok.get_vocab_size()} tokens"  # noqa: E501
            )
        if cache:
            write_cached(path, tok.to_str().encode("utf-8"), _code())
        return cls(tok)

    @classmethod
    def load(cls, path: Union[str, Path]) -> "BPETokenizer":
        from tokenizers import Tokenizer

        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"no tokenizer file at {str(p)!r}")
        return cls(Tokenizer.from_file(str(p)))

    def save(self, path: Union[str, Path]) -> None:
        self._tok.save(str(path))

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts)]

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary [0, {self.vocab_size})")
        return self._tok.decode(ids, skip_special_tokens=False)


def get_tokenizer(kind: str = "bpe", text: Optional[str] = None):
    """ "bpe": ANDREA's 8449-token BPE trained on ``text`` (default: Python's docs); "bytes": 256 bytes."""
    if kind == "bytes":
        return ByteTokenizer()
    if kind == "bpe":
        return BPETokenizer.train(text if text is not None else python_docs_corpus())
    raise ValueError(f"tokenizer must be 'bpe' or 'bytes', got {kind!r}")


# ---------------------------------------------------------------------------------------------
# Token data: a train/validation split and random batches
# ---------------------------------------------------------------------------------------------
@dataclass
class TokenData:
    train: torch.Tensor  # (N_train,) int64 token ids
    val: torch.Tensor  # (N_val,)
    vocab_size: int
    tokenizer: object
    digest: str = ""  # sha256 of the corpus text (first 16 hex digits): which text this is

    def check_split(self, split: str, seq_len: int) -> None:
        """Raise ValueError unless ``split`` has room for windows of ``seq_len + 1`` tokens."""
        data = {"train": self.train, "val": self.val}.get(split)
        if data is None:
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        if len(data) <= seq_len + 1:
            raise ValueError(
                f"the {split} split has {len(data)} tokens, too few for windows of {seq_len + 1} "
                f"(seq_len {seq_len} + 1): use a longer corpus or a shorter seq_len"
            )

    def batch(self, split: str, batch_size: int, seq_len: int, generator: torch.Generator):
        """Random windows of ``seq_len + 1`` tokens: inputs (B, T) and next-token targets (B, T)."""
        self.check_split(split, seq_len)
        data = self.train if split == "train" else self.val
        starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=generator)
        win = torch.stack([data[s : s + seq_len + 1] for s in starts.tolist()])  # (B, T+1)
        return win[:, :-1], win[:, 1:]


def load_token_data(
    tokenizer: str = "bpe", path: Optional[Union[str, Path]] = None, val_fraction: float = 0.1
) -> TokenData:
    """Tokenize a corpus (Python's docs, or the UTF-8 file at ``path``) and split it.

    The split is deterministic: the last ``val_fraction`` of the token stream is validation.
    Encoded ids are cached next to the tokenizer.
    """
    if not 0 < val_fraction < 0.5:
        raise ValueError(f"val_fraction must be in (0, 0.5), got {val_fraction!r}")
    text = load_text(path) if path is not None else python_docs_corpus()
    tok = get_tokenizer(tokenizer, text)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    ids_path = cache_dir() / f"ids-{tok.name}-{tok.vocab_size}-{digest}.npy"
    cached = read_cached(ids_path, _code())
    ids = None
    if cached is not None:
        try:
            ids = np.load(io.BytesIO(cached), allow_pickle=False)
        except ValueError:  # a checksummed file that still does not parse: rebuild it
            ids = None
    if ids is None:
        if isinstance(tok, BPETokenizer):
            docs = text.split("\n\n")
            ids = np.fromiter((i for doc in tok.encode_batch([d + "\n\n" for d in docs]) for i in doc), dtype=np.int64)
        else:
            ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)
        buf = io.BytesIO()
        np.save(buf, ids, allow_pickle=False)
        write_cached(ids_path, buf.getvalue(), _code())
    ids = torch.from_numpy(np.ascontiguousarray(ids))
    cut = int(len(ids) * (1 - val_fraction))
    return TokenData(train=ids[:cut], val=ids[cut:], vocab_size=tok.vocab_size, tokenizer=tok, digest=digest)


def corpus_stats(text: str) -> dict:
    return {"characters": len(text), "bytes": len(text.encode("utf-8")), "words": len(text.split())}
