"""Real English text that every machine already has, and the tokenizers that turn it into ids.

The corpus is the documentation that ships with Python itself: the help topics of ``pydoc_data``
(about 0.5 MB) and the docstrings of the standard library's modules (about 1.6 MB, read from the
source files with ``ast``, nothing imported). No download. ``load_text(path)`` takes any UTF-8
file instead.

Two tokenizers:
* ``BPETokenizer``: byte-level BPE trained on the corpus to ANDREA's vocabulary of 8449 tokens with
  Hugging Face ``tokenizers``; cached on disk. Byte-level means every input can be encoded.
* ``ByteTokenizer``: one token per UTF-8 byte (one per character in ASCII text), vocabulary 256,
  for the smallest demos and the chapters' quick experiments.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

ANDREA_VOCAB = 8449
EOT = "<|endoftext|>"
_SKIP_DIRS = {"test", "tests", "site-packages", "dist-packages", "idlelib", "lib2to3", "turtledemo", "__pycache__"}


def cache_dir() -> Path:
    """Where tokenizers, corpora and experiment results are cached ($ANDREA_CACHE or ~/.cache/andrea)."""
    d = Path(os.environ.get("ANDREA_CACHE") or Path.home() / ".cache" / "andrea")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _stdlib_docstrings() -> list[str]:
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


def python_docs_corpus(include_docstrings: bool = True) -> str:
    """Python's own documentation as one string, documents separated by blank lines. Cached."""
    import sys

    from pydoc_data import topics

    key = f"python-docs-{sys.version_info.major}.{sys.version_info.minor}-{int(include_docstrings)}.txt"
    path = cache_dir() / key
    if path.is_file():
        return path.read_text(encoding="utf-8")
    parts = [topics.topics[k].strip() for k in sorted(topics.topics)]
    if include_docstrings:
        parts += _stdlib_docstrings()
    text = "\n\n".join(parts) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


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
        if cache and path.is_file():
            return cls.load(path)
        tok = Tokenizer(BPE())
        tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
        tok.decoder = ByteLevelDecoder()
        trainer = BpeTrainer(
            vocab_size=vocab_size, min_frequency=2, special_tokens=[EOT],
            initial_alphabet=ByteLevel.alphabet(), show_progress=False,
        )
        chunks = text.split("\n\n")
        tok.train_from_iterator(chunks, trainer=trainer)
        if tok.get_vocab_size() != vocab_size:
            raise ValueError(
                f"the corpus is too small for a vocabulary of {vocab_size}: BPE stopped at {tok.get_vocab_size()} tokens"
            )
        if cache:
            tok.save(str(path))
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
    """"bpe": ANDREA's 8449-token BPE trained on ``text`` (default: Python's docs); "bytes": 256 bytes."""
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

    def batch(self, split: str, batch_size: int, seq_len: int, generator: torch.Generator):
        """Random windows of ``seq_len + 1`` tokens: inputs (B, T) and next-token targets (B, T)."""
        data = {"train": self.train, "val": self.val}.get(split)
        if data is None:
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        if len(data) <= seq_len + 1:
            raise ValueError(f"the {split} split has {len(data)} tokens, too few for windows of {seq_len + 1}")
        starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=generator)
        win = torch.stack([data[s: s + seq_len + 1] for s in starts.tolist()])  # (B, T+1)
        return win[:, :-1], win[:, 1:]


def load_token_data(tokenizer: str = "bpe", path: Optional[Union[str, Path]] = None,
                    val_fraction: float = 0.1) -> TokenData:
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
    if ids_path.is_file():
        ids = np.load(ids_path)
    else:
        if isinstance(tok, BPETokenizer):
            docs = text.split("\n\n")
            ids = np.fromiter((i for doc in tok.encode_batch([d + "\n\n" for d in docs]) for i in doc), dtype=np.int64)
        else:
            ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)
        np.save(ids_path, ids)
    ids = torch.from_numpy(np.ascontiguousarray(ids))
    cut = int(len(ids) * (1 - val_fraction))
    return TokenData(train=ids[:cut], val=ids[cut:], vocab_size=tok.vocab_size, tokenizer=tok)


def corpus_stats(text: str) -> dict:
    return {"characters": len(text), "bytes": len(text.encode("utf-8")), "words": len(text.split())}
