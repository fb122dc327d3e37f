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


# ---------------------------------------------------------------------------------------------
# Chapter 4
# ---------------------------------------------------------------------------------------------
def check_mlp_params(fn: Callable) -> Check:
    """fn(d_model, mlp_dim, bias) -> parameters of one (non-gated) MLP: W_1, b_1, W_2, b_2."""
    from .layers import MLP

    cases = []
    for d, h, bias in ((768, 3072, True), (768, 3072, False), (128, 512, True), (100, 250, True)):
        n = sum(p.numel() for p in MLP(replace(ANDREA_120M, d_model=d, n_head=1, mlp_dim=h, bias=bias)).parameters())
        cases.append({"args": (d, h, bias), "desc": f"d_model={d}, mlp_dim={h}, bias={bias}", "want": n})

    def compare(got, case):
        return None if got == case["want"] else f"expected {case['want']:,}, got {got!r}"

    return _run("check_mlp_params", cases, fn, compare)


def check_mlp_forward(fn: Callable) -> Check:
    """fn(x, W_1, b_1, W_2, b_2) -> GELU-tanh MLP output, with W_1 of shape (d_model, mlp_dim) as
    in the documents (x @ W_1), i.e. the transpose of torch's Linear.weight."""
    from .layers import MLP

    cases = []
    for seed, d in ((0, 32), (1, 48)):
        torch.manual_seed(seed)
        mlp = MLP(replace(ANDREA_120M, d_model=d, n_head=1)).double()
        x = torch.randn(2, 5, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        args = (x, mlp.fc.weight.detach().T, mlp.fc.bias.detach(), mlp.proj.weight.detach().T, mlp.proj.bias.detach())
        cases.append({"args": args, "desc": f"d_model={d}", "want": mlp(x).detach()})

    return _run("check_mlp_forward", cases, fn, lambda got, case: _close(got, case["want"], 1e-10))


# ---------------------------------------------------------------------------------------------
# Chapter 5
# ---------------------------------------------------------------------------------------------
def check_gelu(fn: Callable) -> Check:
    """fn(x) -> the exact GELU, x * Phi(x) with the normal CDF Phi (not the tanh approximation)."""
    xs = [torch.linspace(-6, 6, 1001, dtype=torch.float64), torch.tensor([0.0, -0.7517916, 3.0, -3.0], dtype=torch.float64)]
    cases = [{"args": (x,), "desc": d} for x, d in zip(xs, ("a grid on [-6, 6]", "special points"))]
    return _run("check_gelu", cases, fn, lambda got, case: _close(got, F.gelu(case["args"][0]), 1e-12))


def check_gelu_derivative(fn: Callable) -> Check:
    """fn(x) -> d/dx of the exact GELU, i.e. Phi(x) + x * phi(x)."""
    cases = []
    for x, d in ((torch.linspace(-6, 6, 801, dtype=torch.float64), "a grid on [-6, 6]"),
                 (torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64), "0 and +-1")):
        xx = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(F.gelu(xx).sum(), xx)
        cases.append({"args": (x,), "desc": d, "want": g})
    return _run("check_gelu_derivative", cases, fn, lambda got, case: _close(got, case["want"], 1e-10))


# ---------------------------------------------------------------------------------------------
# Chapter 6
# ---------------------------------------------------------------------------------------------
def check_parameter_count(fn: Callable) -> Check:
    """fn(config) -> total parameters of Andrea(config), tied embeddings counted once."""
    configs = [ANDREA_120M, replace(ANDREA_120M, n_layer=24, d_model=1024, n_head=16),
               replace(ANDREA_120M, bias=False), replace(ANDREA_120M, norm="post"),
               replace(ANDREA_120M, vocab_size=50257, context_length=2048, d_model=256, n_head=4)]
    cases = [{"args": (c,), "desc": f"d_model={c.d_model}, n_layer={c.n_layer}, bias={c.bias}, norm={c.norm}",
              "want": count_parameters(c)["total"]} for c in configs]
    return _run("check_parameter_count", cases, fn,
                lambda got, case: None if got == case["want"] else f"expected {case['want']:,}, got {got!r}")


def check_six_line_forward(fn: Callable) -> Check:
    """fn(model, idx) -> logits (B, T, vocab), written from the model's parts (token_embedding,
    position_embedding, blocks, final_norm) as the documents' six lines."""
    cases = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = Andrea(_small()).eval()
        idx = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(seed))
        cases.append({"args": (m, idx), "desc": f"seed {seed}", "want": m(idx).detach()})
    return _run("check_six_line_forward", cases, fn,
                lambda got, case: _close(got.detach() if isinstance(got, torch.Tensor) else got, case["want"], 1e-5))


# ---------------------------------------------------------------------------------------------
# Chapter 7
# ---------------------------------------------------------------------------------------------
def check_cait_init(fn: Callable) -> Check:
    """fn(depth) -> LayerScale's initial lambda as CaiT chose it: 0.1 up to depth 18, 1e-5 at 24,
    1e-6 deeper."""
    from .analysis import cait_init

    cases = [{"args": (d,), "desc": f"depth {d}", "want": cait_init(d)} for d in (1, 12, 18, 24, 36, 48, 96)]
    return _run("check_cait_init", cases, fn,
                lambda got, case: None if isinstance(got, (int, float)) and math.isclose(got, case["want"], rel_tol=1e-9)
                else f"expected {case['want']:g}, got {got!r}")


def check_layerscale_sublayer(fn: Callable) -> Check:
    """fn(x, f, ln, lam) -> the pre-norm sublayer with LayerScale, x + lam * f(ln(x)), where lam is
    a vector of shape (d_model,)."""
    from .layers import Block

    cases = []
    for seed, lam in ((0, 1e-2), (1, 0.5)):
        torch.manual_seed(seed)
        blk = Block(_small(layerscale=lam))
        with torch.no_grad():
            blk.ls_1.scale.mul_(torch.linspace(0.5, 1.5, 32))  # a genuinely per-channel lambda
        x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(seed))
        want = (x + blk.ls_1(blk.attn(blk.ln_1(x)))).detach()
        cases.append({"args": (x, blk.attn, blk.ln_1, blk.ls_1.scale.detach()), "desc": f"lambda around {lam}", "want": want})
    return _run("check_layerscale_sublayer", cases, fn,
                lambda got, case: _close(got.detach() if isinstance(got, torch.Tensor) else got, case["want"], 1e-6))
