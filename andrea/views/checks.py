"""The harness the exercises' checkers share (``exercises``): ``Check``, the verdict a checker
returns (truthy only when everything passed), ``_run``, which calls the reader's function on copies
of each case, and the comparisons and small models the checkers build their cases from.
"""

from __future__ import annotations

import copy
import math
import traceback
from dataclasses import dataclass, replace
from typing import Callable, Optional

import torch

from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea


@dataclass
class Check:
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return ("✓ " if self.ok else "✗ ") + self.message

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def _run(name: str, cases, fn: Callable, compare) -> Check:
    """Call fn on each case; compare(got, case) returns None if right or a message if wrong.

    The reader's function gets deep copies of the case's arguments: it may work in place (as
    ``x.mul_(...)`` does) without failing, and whatever it does to its inputs cannot change the
    answer it is judged against, which ``compare`` computes from the untouched originals.
    """
    if not callable(fn):
        return Check(False, f"{name}: expected a function to check, got {type(fn).__name__}")
    for i, case in enumerate(cases, 1):
        args = copy.deepcopy(case["args"])
        try:
            got = fn(*args)
        except Exception as e:  # the reader's code raised: say where
            tb = traceback.format_exception_only(type(e), e)[-1].strip()
            return Check(False, f"{name}: case {i} ({case['desc']}) raised {tb}")
        problem = compare(got, case)
        if problem:
            return Check(False, f"{name}: case {i} ({case['desc']}): {problem}")
    return Check(True, f"{name}: all {len(cases)} cases pass")


def _close(got, want, tol: float):
    if isinstance(got, torch.Tensor):
        got = got.detach()
    if not isinstance(got, torch.Tensor):
        return f"expected a torch.Tensor, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    if not torch.isfinite(got).all():
        return "the result has inf/NaN"
    err = float((got.double() - want.double()).abs().max())
    if err > tol:
        return f"max abs difference {err:.3g} (tolerance {tol:g})"
    return None


def _number(got) -> Optional[float]:
    try:
        v = float(got)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _within(got, want: float, rel: float, what: str = "") -> Optional[str]:
    """None if ``got`` is a number within ``rel`` (relative) of ``want``, else what is wrong."""
    v = _number(got)
    if v is None:
        return f"expected a finite number, got {got!r}"
    if abs(v - want) > rel * abs(want):
        off = abs(v - want) / abs(want)
        return f"{what}predicted {v:.4g}, measured {want:.4g} (off by {off:.0%}; within {rel:.0%} passes)"
    return None


def _small(d=32, **kw) -> AndreaConfig:
    return replace(ANDREA_120M, vocab_size=64, context_length=16, d_model=d, n_head=4, n_layer=3, **kw)


def _fresh(cfg: AndreaConfig, seed: int = 0) -> Andrea:
    torch.manual_seed(seed)
    return Andrea(cfg)


def _tokens(vocab: int, batch: int, seq: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]
