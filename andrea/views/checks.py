"""The harness the exercises' checkers share (``exercises``, ``exercises_inside``): ``Check``, the verdict a
checker returns (truthy only when everything passed), ``_run``, which calls the reader's function on copies
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
        except BaseException as e:  # the reader's code raised (sys.exit and Ctrl-C included): say where
            tb = traceback.format_exception_only(type(e), e)[-1].strip()
            return Check(False, f"{name}: case {i} ({case['desc']}) raised {tb}")
        try:
            problem = compare(got, case)
        except Exception as e:  # an answer of a type the comparison cannot read
            problem = f"the answer ({type(got).__name__}) could not be read: {type(e).__name__}: {e}"
        if problem:
            return Check(False, f"{name}: case {i} ({case['desc']}): {problem}")
    return Check(True, f"{name}: all {len(cases)} cases pass")


def _values(got) -> "np.ndarray | str":
    """A copy of the values of ``got`` (a tensor or an array) as a plain NumPy array, or what is wrong with
    it. The values are copied out through NumPy: a tensor subclass's own operations (an ``__eq__`` or a
    ``__torch_dispatch__`` that says "equal") are never what judges it, and one whose values NumPy cannot
    read (a wrapper subclass with no values of its own) is refused by name."""
    if isinstance(got, torch.Tensor):
        t = torch.Tensor.as_subclass(got, torch.Tensor)
        if type(t) is not torch.Tensor:
            return f"expected a plain tensor, got a {type(got).__name__} (a tensor subclass with its own operations)"
        t = t.detach()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()  # exact: NumPy has no bfloat16
        try:
            return np.array(t.cpu().numpy(), copy=True)
        except (RuntimeError, TypeError) as e:
            return f"expected a plain tensor, got a {type(got).__name__} whose values cannot be read ({e})"
    if isinstance(got, np.ndarray):
        return np.array(got, copy=True, subok=False)
    return f"expected a tensor or an array, got {type(got).__name__}"


def _close(got, want, tol: float):
    if not isinstance(got, torch.Tensor):
        return f"expected a torch.Tensor, got {type(got).__name__}"
    a = _values(got)
    if isinstance(a, str):
        return a
    if a.shape != tuple(want.shape):
        return f"expected shape {tuple(want.shape)}, got {a.shape}"
    if a.dtype.kind == "c":
        return "expected real numbers, got complex ones"
    if a.dtype.kind not in "iuf":
        return f"expected numbers, got {a.dtype}"
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        return "the result has inf/NaN"
    err = float(np.abs(a - want.detach().double().cpu().numpy()).max()) if a.size else 0.0
    if err > tol:
        return f"max abs difference {err:.3g} (tolerance {tol:g})"
    return None


# What a checker takes as a number: a Python int or float, a NumPy integer or floating scalar, or a 0-d torch
# tensor or NumPy array of one (not booleans). Its value is copied out through NumPy as float64; anything else
# is "expected a number, got <type>" (the reader's own __float__, __eq__ or tensor operations never decide).
_REAL = (int, float, np.integer, np.floating)


def _scalar(got):
    """(the answer's value as a float64, the name of its type's precision when coarser than float64 or None),
    or (None, None) if ``got`` is not a number a checker takes."""
    if isinstance(got, (torch.Tensor, np.ndarray)):
        a = _values(got)
        if isinstance(a, str) or a.ndim != 0 or a.dtype.kind not in "iuf":
            return None, None
        named = str(got.dtype).removeprefix("torch.")  # bfloat16 is float32 in the copy
        coarse = named if a.dtype.kind == "f" and named != "float64" else None
        return float(a.astype(np.float64)[()]), coarse
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, _REAL):
        return None, None
    a = np.array(got)  # the C value, never the type's own __float__
    if a.dtype.kind not in "iuf":  # an int too large for 64 bits
        try:
            return float(int(got)), None
        except OverflowError:  # past float64's range
            return None, None
    coarse = str(a.dtype) if a.dtype.kind == "f" and a.dtype != np.float64 else None
    return float(a.astype(np.float64)[()]), coarse


def _number(got) -> Optional[float]:
    """``got`` as a float64 if it is a finite number a checker takes (``_scalar``), else None."""
    v, _ = _scalar(got)
    if v is None:
        return None
    return v if math.isfinite(v) else None


def _not_a_number(got) -> str:
    if isinstance(got, torch.Tensor):
        a = _values(got)
        if isinstance(a, str):
            return a
    v, _ = _scalar(got)
    if v is not None:
        return f"expected a finite number, got {v!r}"
    if isinstance(got, int) and not isinstance(got, bool):
        return f"expected a number within float64's range, got an int of {int(got).bit_length()} bits"
    return f"expected a number, got {type(got).__name__}"


def _agrees(got, want: float, rel: float, digits: str = ".6g") -> Optional[str]:
    """None if ``got`` is a number within ``rel`` (relative, float64) of ``want``; else what is wrong, with the
    relative difference. The tolerance is the one stated, whatever the answer's type: an answer given in a
    coarser type than float64 (float32, bfloat16) is judged at the same tolerance, and told why if its type's
    rounding alone is what failed it."""
    v, coarse = _scalar(got)
    if v is None or not math.isfinite(v):
        return _not_a_number(got)
    off = abs(v - want) / max(abs(want), 1e-300)
    if abs(v - want) <= rel * abs(want) or v == want:
        return None
    why = f"expected {want:{digits}}, got {v:{digits}} (relative difference {off:.2g}; within {rel:.2g} passes)"
    if coarse is not None:
        why += f": your answer is {coarse}, coarser than this check; compute it in float64"
    return why


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
