"""What a well-formed training log of the trained model holds (``model.log`` checks it before any use).

Its configs are the code's, value and type; its hashes are SHA-256s; its history and baselines are finite
numbers, the lists in step. A malformed field is named (the file's digest is checked after these, so that
a field of the wrong type is named even when someone recomputed the digest).
"""

from __future__ import annotations

import math

SHA = {"weights_sha256", "eval_sha256", "tokenizer_sha256"}


def _number_lists(blob: dict) -> list[str]:
    """What is malformed in the log's history and baselines (lists of finite numbers, in step)."""
    bad = []
    h, b = blob.get("history"), blob.get("baselines")
    if not isinstance(h, dict):
        return ["history: not an object"]
    for k in ("step", "loss", "lr", "grad_norm", "val_step", "val_loss"):
        v = h.get(k)
        if not isinstance(v, list) or not v or not all(_finite(x) for x in v):
            bad.append(f"history.{k}: not a list of finite numbers")
    if not bad and (
        len({len(h[k]) for k in ("step", "loss", "lr", "grad_norm")}) != 1 or len(h["val_step"]) != len(h["val_loss"])
    ):
        bad.append("history: its lists are not in step (one value per step, one validation loss per validation)")
    for k in ("unigram_ce", "bigram_ce"):
        if not isinstance(b, dict) or not _finite(b.get(k)):
            bad.append(f"baselines.{k}: {b.get(k) if isinstance(b, dict) else None!r} (a finite number)")
    return bad


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def log_problems(blob: dict, model_config: dict, train_config: dict) -> tuple[list[str], list[str]]:
    """(config changes, malformed fields) of a parsed log: its configs against the code's (``model_config``,
    ``train_config``: what ``model.key`` covers; same value and same type, so 192.0 is not 192), then every
    field the book or the checks read."""
    changes = []
    for name, want in (("model_config", model_config), ("train_config", train_config)):
        got = blob.get(name)
        if not isinstance(got, dict):
            changes.append(f"{name} missing")
            continue
        changes += [
            f"{name}.{k}: {got.get(k, '(absent)')!r} (log) vs {v!r} (code)"
            for k, v in want.items()
            if got.get(k) != v or type(got.get(k)) is not type(v)
        ]
        changes += [f"{name}.{k}: unknown field" for k in got if k not in want]
    bad = []
    for k in sorted(SHA):
        v = blob.get(k)
        if not (isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)):
            bad.append(f"{k}: {v!r} (a SHA-256: 64 hexadecimal digits)")
    if not isinstance(blob.get("key"), str):
        bad.append(f"key: {blob.get('key')!r} (a string)")
    corpus_ = blob.get("corpus")
    if not isinstance(corpus_, dict) or not isinstance(corpus_.get("digest"), str):
        bad.append("corpus.digest: missing (the corpus's digest, a string)")
    return changes, bad + _number_lists(blob)
