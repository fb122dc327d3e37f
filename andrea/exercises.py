"""Checkers for the chapters' exercises. Each takes the reader's function (or answer), tests it
against the package on several inputs, and returns a ``Check`` that prints what went right or
wrong (and is truthy only when everything passed).

    from andrea.exercises import check_layer_norm
    check_layer_norm(my_layer_norm)
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.nn.functional as F

from .config import ANDREA_120M, AndreaConfig
from .model import Andrea, count_layer_norms, count_parameters


@dataclass
class Check:
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return ("✓ " if self.ok else "✗ ") + self.message

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731


def _run(name: str, cases, fn: Callable, compare) -> Check:
    """Call fn on each case; compare(got, case) returns None if right or a message if wrong."""
    for i, case in enumerate(cases, 1):
        try:
            got = fn(*case["args"])
        except Exception as e:  # the reader's code raised: say where
            tb = traceback.format_exception_only(type(e), e)[-1].strip()
            return Check(False, f"{name}: case {i} ({case['desc']}) raised {tb}")
        problem = compare(got, case)
        if problem:
            return Check(False, f"{name}: case {i} ({case['desc']}): {problem}")
    return Check(True, f"{name}: all {len(cases)} cases pass")


def _close(got, want, tol: float):
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


def _small(d=32, **kw) -> AndreaConfig:
    return replace(ANDREA_120M, vocab_size=64, context_length=16, d_model=d, n_head=4, n_layer=3, **kw)


# ---------------------------------------------------------------------------------------------
# Chapter 1
# ---------------------------------------------------------------------------------------------
def check_stream_decomposition(fn: Callable) -> Check:
    """fn(model, idx) -> list [embedding, delta_1, ..., delta_n] (tensors (B, T, C)) whose sum is
    the last block's output."""
    cases = []
    for seed, n in ((0, 3), (1, 5)):
        torch.manual_seed(seed)
        m = Andrea(replace(_small(), n_layer=n))
        idx = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(seed))
        cases.append({"args": (m, idx), "desc": f"{n} blocks", "model": m, "idx": idx})

    def compare(got, case):
        from .analysis import stream_contributions

        emb, deltas, final = stream_contributions(case["model"], case["idx"])
        want = [emb] + deltas
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"expected a list of {len(want)} tensors (embedding + one delta per block), got {type(got).__name__} of length {len(got) if hasattr(got, '__len__') else '?'}"
        for k, (g, w) in enumerate(zip(got, want)):
            p = _close(g.detach() if isinstance(g, torch.Tensor) else g, w, 1e-5)
            if p:
                return f"item {k} ({'embedding' if k == 0 else f'delta of block {k}'}): {p}"
        return None

    return _run("check_stream_decomposition", cases, fn, compare)


def check_embedding_gradient(fn: Callable) -> Check:
    """fn(model, idx, targets) -> float: RMS of dLoss/d(embedding output), the input to block 1."""
    from .probe import gradient_flow

    cases = []
    for seed, kw in ((0, {}), (1, {"residual": False}), (2, {"norm": "post"})):
        torch.manual_seed(seed)
        m = Andrea(_small(**kw))
        g = torch.Generator().manual_seed(seed)
        idx, tgt = torch.randint(0, 64, (2, 8), generator=g), torch.randint(0, 64, (2, 8), generator=g)
        cases.append({"args": (m, idx, tgt), "desc": ", ".join(f"{k}={v}" for k, v in kw.items()) or "default",
                      "want": float(gradient_flow(m, idx, tgt).grad_rms[0])})

    def compare(got, case):
        try:
            got = float(got)
        except (TypeError, ValueError):
            return f"expected a number, got {type(got).__name__}"
        if not math.isclose(got, case["want"], rel_tol=1e-4):
            return f"expected {case['want']:.6g}, got {got:.6g}"
        return None

    return _run("check_embedding_gradient", cases, fn, compare)


# ---------------------------------------------------------------------------------------------
# Chapter 2
# ---------------------------------------------------------------------------------------------
def check_layer_norm(fn: Callable) -> Check:
    """fn(x, gamma, beta, eps) -> LayerNorm over the last axis, as torch.nn.functional.layer_norm."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, desc in (((4, 16), "a (4, 16) matrix"), ((2, 5, 32), "a (2, 5, 32) batch"), ((3, 8), "offset, large values")):
        x = torch.randn(*shape, generator=g, dtype=torch.float64)
        if desc.startswith("offset"):
            x = x * 100 + 50
        d = shape[-1]
        cases.append({"args": (x, torch.randn(d, generator=g, dtype=torch.float64),
                               torch.randn(d, generator=g, dtype=torch.float64), 1e-5), "desc": desc})
    const = torch.full((2, 8), 3.0, dtype=torch.float64)  # zero variance: epsilon matters
    cases.append({"args": (const, torch.ones(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64), 1e-5),
                  "desc": "constant rows (variance 0)"})

    def compare(got, case):
        x, gamma, beta, eps = case["args"]
        return _close(got, F.layer_norm(x, (x.shape[-1],), gamma, beta, eps), 1e-9)

    return _run("check_layer_norm", cases, fn, compare)


def check_count_layer_norms(fn: Callable) -> Check:
    """fn(config) -> int: how many LayerNorms a model with that config has."""
    configs = [ANDREA_120M, replace(ANDREA_120M, n_layer=48), replace(ANDREA_120M, norm="post"),
               replace(ANDREA_120M, norm="none"), replace(ANDREA_120M, n_layer=1)]
    cases = [{"args": (c,), "desc": f"norm={c.norm}, n_layer={c.n_layer}",
              "want": count_layer_norms(Andrea(replace(c, d_model=32, n_head=4, vocab_size=16, context_length=8)))}
             for c in configs]

    def compare(got, case):
        return None if got == case["want"] else f"expected {case['want']}, got {got!r}"

    return _run("check_count_layer_norms", cases, fn, compare)


# ---------------------------------------------------------------------------------------------
# Chapter 3
# ---------------------------------------------------------------------------------------------
def check_post_norm_sublayer(fn: Callable) -> Check:
    """fn(x, f, ln) -> the post-norm sublayer LN(x + f(x)), with f and ln callables."""
    from .layers import Block

    cases = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        blk = Block(_small(norm="post"))
        x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(seed)) * 3
        cases.append({"args": (x, blk.attn, blk.ln_1), "desc": f"attention sublayer, seed {seed}", "blk": blk, "x": x})

    def compare(got, case):
        blk, x = case["blk"], case["x"]
        want = blk.ln_1(x + blk.attn(x))
        return _close(got.detach() if isinstance(got, torch.Tensor) else got, want.detach(), 1e-5)

    return _run("check_post_norm_sublayer", cases, fn, compare)


def check_lr_schedule(fn: Callable) -> Check:
    """fn(step, steps, warmup, lr, min_lr_ratio) -> learning rate: linear warmup over ``warmup``
    steps (step 0 gets lr/warmup), then cosine decay to lr*min_lr_ratio at ``steps``."""
    from .train import TrainConfig, lr_at

    cases = []
    for steps, warmup, lr, ratio in ((100, 10, 1e-3, 0.1), (50, 0, 3e-3, 0.0), (200, 50, 6e-4, 0.1)):
        t = TrainConfig(steps=steps, warmup=warmup, lr=lr, min_lr_ratio=ratio)
        for s in (0, warmup // 2, max(warmup - 1, 0), warmup, (steps + warmup) // 2, steps - 1, steps):
            cases.append({"args": (s, steps, warmup, lr, ratio), "desc": f"step {s} of {steps}, warmup {warmup}",
                          "want": lr_at(s, t)})

    def compare(got, case):
        try:
            got = float(got)
        except (TypeError, ValueError):
            return f"expected a number, got {type(got).__name__}"
        return None if math.isclose(got, case["want"], rel_tol=1e-9, abs_tol=1e-15) else f"expected {case['want']:.6g}, got {got:.6g}"

    return _run("check_lr_schedule", cases, fn, compare)
