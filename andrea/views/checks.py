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

import numpy as np
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
    answer it is judged against, which ``compare`` computes from the untouched originals. Whatever
    the reader's function returns, the checker answers ✓ or ✗: an answer it cannot read is ✗, saying
    why, never a crash.
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
        try:
            problem = compare(got, case)
        except Exception as e:  # an answer of a type the comparison cannot read
            problem = f"the answer ({type(got).__name__}) could not be read: {type(e).__name__}: {e}"
        if problem:
            return Check(False, f"{name}: case {i} ({case['desc']}): {problem}")
    return Check(True, f"{name}: all {len(cases)} cases pass")


def _plain(t: torch.Tensor) -> torch.Tensor:
    """A tensor as a plain ``torch.Tensor`` (a subclass's own operators, e.g. a ``!=`` that always says
    "equal", are not used to judge it)."""
    return torch.Tensor.as_subclass(t, torch.Tensor).detach()


def _close(got, want, tol: float):
    if not isinstance(got, torch.Tensor):
        return f"expected a torch.Tensor, got {type(got).__name__}"
    got = _plain(got)
    if got.shape != want.shape:
        return f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    if got.is_complex() or not torch.isfinite(got).all():
        return "the result has inf/NaN" if not got.is_complex() else "expected real numbers, got complex ones"
    err = float((got.double() - want.double()).abs().max())
    if err > tol:
        return f"max abs difference {err:.3g} (tolerance {tol:g})"
    return None


# What a checker takes as a number: Python and NumPy integers and floats (not booleans), and 0-d torch
# tensors and NumPy arrays of them. Anything else is "expected a number, got <type>" (the reader's own
# __float__ or __eq__ is never what decides).
_REAL = (int, float, np.integer, np.floating)
_EPS = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-23}


def _scalar(got):
    """(the Python number inside ``got``, the machine epsilon of its type), or (None, 0) if ``got`` is not
    a number a checker takes."""
    eps = 2.0**-52
    if isinstance(got, torch.Tensor):
        t = _plain(got)
        if t.dim() != 0 or t.dtype == torch.bool or t.is_complex():
            return None, 0.0
        eps = _EPS.get(t.dtype, eps)
        got = t.item()
    elif isinstance(got, np.ndarray):
        if got.ndim != 0 or got.dtype.kind not in "iuf":
            return None, 0.0
        got = got[()]
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, _REAL):
        return None, 0.0
    if isinstance(got, np.floating):
        eps = float(np.finfo(got.dtype).eps)
    return got, eps


def _number(got) -> Optional[float]:
    """``got`` as a float64 if it is a finite number a checker takes (``_scalar``), else None."""
    v, _ = _scalar(got)
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _not_a_number(got) -> str:
    v, _ = _scalar(got)
    if v is not None:
        return f"expected a finite number, got {v!r}"
    return f"expected a number, got {type(got).__name__}"


def _agrees(got, want: float, rel: float, digits: str = ".6g") -> Optional[str]:
    """None if ``got`` is a number within ``rel`` (relative, float64) of ``want``, the tolerance never tighter
    than the precision of the answer's own type (a float32 answer is judged at float32's); else what is
    wrong, with the relative difference."""
    v = _number(got)
    if v is None:
        return _not_a_number(got)
    _, eps = _scalar(got)
    tol = max(rel, 8 * eps)
    off = abs(v - want) / max(abs(want), 1e-300)
    if abs(v - want) <= tol * abs(want) or v == want:
        return None
    return f"expected {want:{digits}}, got {v:{digits}} (relative difference {off:.2g}; within {tol:.2g} passes)"


def _equals(got, want: int) -> Optional[str]:
    """None if ``got`` is a number equal to the integer ``want``, else what is wrong."""
    v = _number(got)
    if v is None:
        return _not_a_number(got)
    return None if v == want else f"expected {want:,}, got {v:,.10g}"


def _within(got, want: float, rel: float, what: str = "") -> Optional[str]:
    """None if ``got`` is a number within ``rel`` (relative) of ``want``, else what is wrong."""
    v = _number(got)
    if v is None:
        return _not_a_number(got)
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
