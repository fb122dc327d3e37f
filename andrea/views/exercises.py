"""Checkers for the chapters' exercises. Each takes the reader's function (or answer), tests it on
several inputs against the package or against a fresh measurement, and returns a ``Check`` that
prints what went right or wrong (and is truthy only when everything passed).

    from andrea.views.exercises import check_layer_norm_std
    check_layer_norm_std(my_prediction)

The reader's function always gets copies of the inputs (so it may work in place), and the answer
it is judged against is computed from the untouched originals. Checkers of *predictions* measure
the real model and accept an answer within a stated tolerance of the measurement.

Chapter 8's checkers (inside the trained model) are in ``exercises_inside``.

A numeric answer must be a number: a Python or NumPy int or float, or a 0-d tensor or array of one, copied
out through NumPy and judged in float64 at the stated tolerance, whatever its type (a float32 or bfloat16
answer to a check finer than its type is ✗, saying so); a tensor answer must be a plain tensor, its values
copied out through NumPy (a subclass with its own operations is ✗); anything else (a list, a vector, an
object that says it equals everything) is ✗ with its type named; and no answer, nor any exception the reader's
function raises (``sys.exit`` and Ctrl-C included), makes a checker crash. The checkers run in the reader's own
process, so they check honest work; they are not a proctor: a reader determined to
cheat can read the expected answer from the checker's frame (``inspect``) or the package itself.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..model.config import ANDREA_120M
from ..model.transformer import Andrea, count_layer_norms, count_parameters
from .checks import (
    Check,
    _agrees,
    _close,
    _equals,
    _fresh,
    _not_a_number,
    _number,
    _run,
    _small,
    _tokens,
    _within,
)


# ---------------------------------------------------------------------------------------------
# Attention (the chapter before chapter 1)
# ---------------------------------------------------------------------------------------------
def check_attention(fn: Callable) -> Check:
    """fn(q, k, v) -> one causal attention head's output, (T, head size), from its queries, keys and
    values (each (T, head size)): scores q_t . k_s / sqrt(head size), the future masked, a softmax per
    row, the weighted sum of the values. Judged against ``scaled_dot_product_attention``."""
    cases = []
    for seed, (T, hs) in enumerate(((5, 4), (12, 32), (1, 8))):
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(T, hs, generator=g) * 2 for _ in range(3))
        want = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
        cases.append({"args": (q, k, v), "desc": f"{T} tokens, head size {hs}", "want": want})
    return _run("check_attention", cases, fn, lambda got, c: _close(got, c["want"], 1e-5))


# ---------------------------------------------------------------------------------------------
# Chapter 1
# ---------------------------------------------------------------------------------------------
def check_stream_decomposition(fn: Callable) -> Check:
    """fn(model, idx) -> list [embedding, delta_1, ..., delta_n] (tensors (B, T, C)) whose sum is
    the last block's output."""
    from ..measure.analysis import stream_contributions

    cases = []
    for seed, n in ((0, 3), (1, 5)):
        m = _fresh(replace(_small(), n_layer=n), seed)
        idx, _ = _tokens(64, 2, 8, seed)
        emb, deltas, _ = stream_contributions(m, idx)
        cases.append({"args": (m, idx), "desc": f"{n} blocks", "want": [emb] + deltas})

    def compare(got, case):
        want = case["want"]
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            n = len(got) if hasattr(got, "__len__") else "?"
            return f"expected a list of {len(want)} tensors (embedding + one delta per block), got {n}"
        for k, (g, w) in enumerate(zip(got, want)):
            p = _close(g, w, 1e-5)
            if p:
                return f"item {k} ({'embedding' if k == 0 else f'delta of block {k}'}): {p}"
        return None

    return _run("check_stream_decomposition", cases, fn, compare)


def check_embedding_rms(fn: Callable) -> Check:
    """fn(init_std) -> the RMS of the stream entering block 1 (token + position embedding) of a
    freshly initialised ANDREA. Judged against a measurement at three values of init_std (2 %)."""
    cases = []
    for std in (0.01, 0.02, 0.05):
        m = _fresh(replace(ANDREA_120M, d_model=128, n_head=4, n_layer=1, context_length=64, init_std=std))
        idx, _ = _tokens(m.config.vocab_size, 8, 64, 0)
        with torch.no_grad():
            rms = float(m.embed(idx).pow(2).mean().sqrt())
        cases.append({"args": (std,), "desc": f"init_std={std}", "want": rms})
    return _run("check_embedding_rms", cases, fn, lambda got, c: _within(got, c["want"], 0.02))


def check_stream_growth(fn: Callable) -> Check:
    """fn(embedding_rms, delta_rms, n_blocks) -> the predicted RMS of the stream after n_blocks, if
    each block adds a delta of RMS delta_rms uncorrelated with everything before it. Judged against
    fresh pre-norm stacks of 3 depths, with the measured embedding and mean delta RMS (5 %)."""
    from ..measure.analysis import stream_contributions

    cases = []
    for depth in (4, 12, 36):
        m = _fresh(replace(ANDREA_120M, d_model=128, n_head=4, n_layer=depth, context_length=64))
        idx, _ = _tokens(m.config.vocab_size, 4, 64, 1)
        emb, deltas, final = stream_contributions(m, idx)
        rms = [float(t.pow(2).mean().sqrt()) for t in [emb] + deltas + [final]]
        delta_rms = float(np.sqrt(np.mean(np.square(rms[1:-1]))))
        cases.append({"args": (rms[0], delta_rms, depth), "desc": f"{depth} blocks", "want": rms[-1]})
    return _run("check_stream_growth", cases, fn, lambda got, c: _within(got, c["want"], 0.05))


def check_embedding_gradient(fn: Callable) -> Check:
    """fn(model, idx, targets) -> float: RMS of dLoss/d(embedding output), the input to block 1."""
    from ..measure.probe import gradient_flow

    cases = []
    for seed, kw in ((0, {}), (1, {"residual": False}), (2, {"norm": "post"})):
        m = _fresh(_small(**kw), seed)
        idx, tgt = _tokens(64, 2, 8, seed)
        cases.append(
            {
                "args": (m, idx, tgt),
                "desc": ", ".join(f"{k}={v}" for k, v in kw.items()) or "default",
                "want": float(gradient_flow(m, idx, tgt).grad_rms[0]),
            }
        )

    def compare(got, case):
        return _agrees(got, case["want"], 1e-4)

    return _run("check_embedding_gradient", cases, fn, compare)


# ---------------------------------------------------------------------------------------------
# Chapter 2
# ---------------------------------------------------------------------------------------------
def check_layer_norm_std(fn: Callable) -> Check:
    """fn(sigma, eps) -> the standard deviation of LN(x) (gamma = 1, beta = 0) for a token whose
    values have standard deviation sigma. Judged against LayerNorm on such tokens (1 %)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for sigma in (1.0, 1e-2, 3e-3, 1e-3, 1e-4):
        x = torch.randn(64, 768, generator=g, dtype=torch.float64)
        x = (x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True) * sigma
        y = F.layer_norm(x, (768,), eps=1e-5)
        cases.append(
            {
                "args": (sigma, 1e-5),
                "desc": f"sigma={sigma:g}, eps=1e-5",
                "want": float(y.std(-1, unbiased=False).mean()),
            }
        )
    return _run("check_layer_norm_std", cases, fn, lambda got, c: _within(got, c["want"], 0.01))


def check_rms_norm(fn: Callable) -> Check:
    """fn(x, gamma, eps) -> RMSNorm over the last axis: gamma * x / sqrt(mean(x^2) + eps)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, shift in (((4, 16), 0.0), ((2, 5, 32), 0.0), ((3, 8), 5.0)):
        x = torch.randn(*shape, generator=g, dtype=torch.float64) + shift
        gamma = torch.randn(shape[-1], generator=g, dtype=torch.float64)
        want = gamma * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        cases.append({"args": (x, gamma, 1e-6), "desc": f"shape {shape}, mean {shift:g}", "want": want})
    return _run("check_rms_norm", cases, fn, lambda got, c: _close(got, c["want"], 1e-9))


def check_count_layer_norms(fn: Callable) -> Check:
    """fn(config) -> the number of LayerNorm modules in Andrea(config)."""
    configs = [
        ANDREA_120M,
        replace(ANDREA_120M, n_layer=48),
        replace(ANDREA_120M, norm="post"),
        replace(ANDREA_120M, norm="none"),
        replace(ANDREA_120M, norm="deepnorm"),
        replace(ANDREA_120M, n_layer=1),
    ]
    cases = []
    for c in configs:
        small = replace(c, d_model=32, n_head=4, vocab_size=16, context_length=8)
        cases.append(
            {"args": (c,), "desc": f"norm={c.norm}, n_layer={c.n_layer}", "want": count_layer_norms(Andrea(small))}
        )
    return _run(
        "check_count_layer_norms",
        cases,
        fn,
        lambda got, c: _equals(got, c["want"]),
    )


# ---------------------------------------------------------------------------------------------
# Chapter 3
# ---------------------------------------------------------------------------------------------
def check_post_norm_jump(fn: Callable) -> Check:
    """fn(embedding_rms) -> the predicted ratio of the gradient RMS at the embeddings to that at
    boundary 1 in a post-norm stack. Judged against gradient_flow at three init scales (5 %)."""
    from ..measure.probe import gradient_flow

    cases = []
    for std in (0.01, 0.02, 0.05):
        cfg = replace(ANDREA_120M, d_model=128, n_head=4, n_layer=12, norm="post", init_std=std, context_length=32)
        m = _fresh(cfg)
        idx, tgt = _tokens(cfg.vocab_size, 2, 32, 0)
        r = gradient_flow(m, idx, tgt, weights=False)
        cases.append(
            {
                "args": (float(r.act_rms[0]),),
                "desc": f"init_std={std} (embedding RMS {r.act_rms[0]:.4f})",
                "want": float(r.grad_rms[0] / r.grad_rms[1]),
            }
        )
    return _run("check_post_norm_jump", cases, fn, lambda got, c: _within(got, c["want"], 0.05))


def check_lr_schedule(fn: Callable) -> Check:
    """fn(step, steps, warmup, lr, min_lr_ratio) -> learning rate: linear warmup over ``warmup``
    steps (step 0 gets lr/warmup), then cosine decay to lr*min_lr_ratio at ``steps``."""
    from ..training.train import TrainConfig, lr_at

    cases = []
    for steps, warmup, lr, ratio in ((100, 10, 1e-3, 0.1), (50, 0, 3e-3, 0.0), (200, 50, 6e-4, 0.1)):
        t = TrainConfig(steps=steps, warmup=warmup, lr=lr, min_lr_ratio=ratio)
        for s in (0, warmup // 2, max(warmup - 1, 0), warmup, (steps + warmup) // 2, steps - 1, steps):
            cases.append(
                {
                    "args": (s, steps, warmup, lr, ratio),
                    "desc": f"step {s} of {steps}, warmup {warmup}",
                    "want": lr_at(s, t),
                }
            )

    def compare(got, case):
        if case["want"] == 0:
            return _equals(got, 0)
        return _agrees(got, case["want"], 1e-9)

    return _run("check_lr_schedule", cases, fn, compare)


def check_prediction(question: str, answer: Any) -> Check:
    """Questions whose answer the book measures on the spot. ``question`` names one:

    * "amplification": which wiring's output moves more after one small Adam step, at 48 blocks with
      GPT-2's initialisation: answer "pre" or "post" (measured over 2 seeds with
      ``analysis.output_change``)."""
    if question == "amplification":
        from ..measure.analysis import output_change, small

        if type(answer) is not str or answer not in ("pre", "post"):  # a str subclass's own == never decides
            shown = repr(answer) if type(answer) is str else f"a {type(answer).__name__}"
            return Check(False, f"answer 'pre' or 'post' (a plain str), got {shown}")
        change = {
            n: float(np.mean([output_change(small(64, 48, norm=n), seed=s) for s in (0, 1)])) for n in ("pre", "post")
        }
        right = max(change, key=lambda k: change[k])
        msg = f"pre-norm {change['pre']:.3g}, post-norm {change['post']:.3g} (relative output change, 2 seeds)"
        return Check(answer == right, ("right: " if answer == right else f"no, it is {right}-norm: ") + msg)
    return Check(False, f"unknown question {question!r}; the questions are ['amplification']")


# ---------------------------------------------------------------------------------------------
# Chapter 4
# ---------------------------------------------------------------------------------------------
def check_mlp_params(fn: Callable) -> Check:
    """fn(d_model, mlp_dim, bias) -> parameters of one (non-gated) MLP: W_1, b_1, W_2, b_2."""
    from ..model.layers import MLP

    cases = []
    for d, h, bias in ((768, 3072, True), (768, 3072, False), (128, 512, True), (100, 250, True)):
        n = sum(p.numel() for p in MLP(replace(ANDREA_120M, d_model=d, n_head=1, mlp_dim=h, bias=bias)).parameters())
        cases.append({"args": (d, h, bias), "desc": f"d_model={d}, mlp_dim={h}, bias={bias}", "want": n})
    return _run(
        "check_mlp_params",
        cases,
        fn,
        lambda got, c: _equals(got, c["want"]),
    )


def check_mlp_share(fn: Callable) -> Check:
    """fn(config) -> the fraction of the model's parameters that sit in its MLPs (tied head once)."""
    configs = [
        ANDREA_120M,
        replace(ANDREA_120M, vocab_size=50257),
        replace(ANDREA_120M, d_model=256, n_head=4),
        replace(ANDREA_120M, n_layer=48),
        replace(ANDREA_120M, activation="swiglu"),
    ]
    cases = []
    for c in configs:
        n = count_parameters(c)
        cases.append(
            {
                "args": (c,),
                "desc": f"d_model={c.d_model}, n_layer={c.n_layer}, vocab={c.vocab_size}, {c.activation}",
                "want": n["mlp"] / n["total"],
            }
        )

    def compare(got, case):
        return _agrees(got, case["want"], 1e-9)

    return _run("check_mlp_share", cases, fn, compare)


def check_swiglu_width(fn: Callable) -> Check:
    """fn(d_model) -> the (real) hidden width h at which a SwiGLU MLP with biases has exactly the
    parameters of the 4x GELU MLP with biases. Judged by counting the modules at nearby widths."""
    from ..model.layers import MLP

    def count(d, h, act):
        return sum(
            p.numel() for p in MLP(replace(ANDREA_120M, d_model=d, n_head=1, mlp_dim=h, activation=act)).parameters()
        )

    cases = []
    for d in (768, 512, 64):
        target = count(d, 4 * d, "gelu_tanh")
        lo = int((8 * d) // 3) - 2
        below = max(h for h in range(lo, lo + 8) if count(d, h, "swiglu") <= target)
        a, b = count(d, below, "swiglu"), count(d, below + 1, "swiglu")
        cases.append({"args": (d,), "desc": f"d_model={d}", "want": below + (target - a) / (b - a)})

    def compare(got, case):
        return _agrees(got, case["want"], 1e-6 / case["want"], ".4f")

    return _run("check_swiglu_width", cases, fn, compare)


# ---------------------------------------------------------------------------------------------
# Chapter 5
# ---------------------------------------------------------------------------------------------
def check_gelu_derivative(fn: Callable) -> Check:
    """fn(x) -> d/dx of the exact GELU, i.e. Phi(x) + x * phi(x)."""
    cases = []
    for x, d in (
        (torch.linspace(-6, 6, 801, dtype=torch.float64), "a grid on [-6, 6]"),
        (torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64), "0 and +-1"),
    ):
        xx = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(F.gelu(xx).sum(), xx)
        cases.append({"args": (x,), "desc": d, "want": g})
    return _run("check_gelu_derivative", cases, fn, lambda got, c: _close(got, c["want"], 1e-10))


def gelu_minimum() -> float:
    """Where the exact GELU has its minimum (Newton's method on the derivative, float64)."""
    x = torch.tensor(-0.75, dtype=torch.float64)
    for _ in range(50):
        phi = torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
        d1, d2 = cdf + x * phi, phi * (2 - x * x)  # GELU' and GELU''
        x = x - d1 / d2
    return float(x)


def check_gelu_minimum(x_min: Any) -> Check:
    """x_min: where you found the exact GELU's minimum. Right to 1e-6."""
    want = gelu_minimum()
    v = _number(x_min)
    if v is None:
        return Check(False, f"check_gelu_minimum: {_not_a_number(x_min)}")
    ok = abs(v - want) < 1e-6
    return Check(
        ok, f"check_gelu_minimum: {'right' if ok else 'not quite'}: you gave {v:.8f}, the minimum is at {want:.8f}"
    )


def check_gelu_mean(fn: Callable) -> Check:
    """fn(s) -> E[GELU(h)] for h ~ N(0, s^2). Judged against numerical integration (1e-6 relative)."""
    xs = torch.linspace(-12, 12, 400_001, dtype=torch.float64)
    dx = float(xs[1] - xs[0])
    cases = []
    for s in (0.1, 0.55, 1.0, 3.0):
        h = xs * s
        density = torch.exp(-xs * xs / 2) / math.sqrt(2 * math.pi)
        want = float((F.gelu(h) * density).sum() * dx)
        cases.append({"args": (s,), "desc": f"s={s}", "want": want})
    return _run("check_gelu_mean", cases, fn, lambda got, c: _within(got, c["want"], 1e-6))


# ---------------------------------------------------------------------------------------------
# Chapter 6
# ---------------------------------------------------------------------------------------------
def check_parameter_count(fn: Callable) -> Check:
    """fn(config) -> total parameters of Andrea(config), tied embeddings counted once."""
    configs = [
        ANDREA_120M,
        replace(ANDREA_120M, n_layer=24, d_model=1024, n_head=16),
        replace(ANDREA_120M, bias=False),
        replace(ANDREA_120M, norm="post"),
        replace(ANDREA_120M, vocab_size=50257, context_length=2048, d_model=256, n_head=4),
    ]
    cases = [
        {
            "args": (c,),
            "desc": f"d_model={c.d_model}, n_layer={c.n_layer}, bias={c.bias}, norm={c.norm}",
            "want": count_parameters(c)["total"],
        }
        for c in configs
    ]
    return _run(
        "check_parameter_count",
        cases,
        fn,
        lambda got, c: _equals(got, c["want"]),
    )


def check_vocab_for(fn: Callable) -> Check:
    """fn(config, target) -> the smallest vocabulary size at which Andrea(config) (tied head) has at
    least ``target`` parameters."""
    cases = []
    for c, target in ((ANDREA_120M, 120_000_000), (ANDREA_120M, 100_000_000), (replace(ANDREA_120M, n_layer=6), 60e6)):
        fixed = count_parameters(replace(c, vocab_size=1))["total"] - c.d_model
        need = max(1, math.ceil((target - fixed) / c.d_model))
        cases.append({"args": (c, target), "desc": f"{c.n_layer} blocks, target {target:,.0f}", "want": need})
    return _run(
        "check_vocab_for",
        cases,
        fn,
        lambda got, c: _equals(got, c["want"]),
    )


def check_flops_per_token(fn: Callable) -> Check:
    """fn(config, seq_len) -> the matrix-multiply FLOPs of one training step (forward and backward)
    per token, attention's own products included (1 %). The benchmark's count is the reference."""
    from .bench import step_flops

    cases = []
    for c, T in ((ANDREA_120M, 1024), (ANDREA_120M, 128), (replace(ANDREA_120M, d_model=256, n_head=4), 512)):
        cases.append({"args": (c, T), "desc": f"d_model={c.d_model}, T={T}", "want": step_flops(c, 1, T) / T})
    return _run("check_flops_per_token", cases, fn, lambda got, c: _within(got, c["want"], 0.01))


# ---------------------------------------------------------------------------------------------
# Chapter 7
# ---------------------------------------------------------------------------------------------
def check_layerscale_move(fn: Callable) -> Check:
    """fn(lam, lam_ref, move_ref) -> a block's relative move at LayerScale lambda_0 = lam, given
    its move ``move_ref`` at ``lam_ref``. Judged against fresh 12-block stacks (3 %)."""
    from ..measure.analysis import block_moves

    def move(lam):
        m = _fresh(replace(ANDREA_120M, d_model=128, n_head=4, n_layer=12, layerscale=lam, context_length=32))
        idx, _ = _tokens(m.config.vocab_size, 2, 32, 0)
        return float(block_moves(m, idx).mean())

    ref = move(1e-6)
    cases = [{"args": (lam, 1e-6, ref), "desc": f"lambda_0={lam:g}", "want": move(lam)} for lam in (1e-5, 1e-3, 1e-2)]
    return _run("check_layerscale_move", cases, fn, lambda got, c: _within(got, c["want"], 0.03))


def check_layerscale_reach(fn: Callable) -> Check:
    """fn(lam0, lr) -> the largest |lambda| of a small LayerScale model after 300 AdamW steps (no
    warmup). Judged against a measurement (``analysis.layerscale_growth``) for two settings, within a
    factor of 2 either way: an order-of-magnitude question. (The measurement itself moves by up to
    about 20 % between CPUs, since 300 training steps amplify rounding; a factor of 2 is well outside
    that, so a prediction does not pass on one machine and fail on another unless it is borderline.)"""
    from ..measure.analysis import layerscale_growth

    cases = []
    for lam0, lr in ((1e-4, 1e-2), (1e-6, 1e-2)):
        cases.append(
            {
                "args": (lam0, lr),
                "desc": f"lambda_0={lam0:g}, lr={lr:g}",
                "want": layerscale_growth(lam0, lr)["max"][-1],
            }
        )

    def compare(got, case):
        v = _number(got)
        if v is None or v <= 0:
            return f"expected a positive number, got {type(got).__name__ if v is None else v}"
        ratio = v / case["want"]
        if not 0.5 <= ratio <= 2:
            return f"predicted {v:.3g}, measured {case['want']:.3g} ({ratio:.2g} times; within a factor of 2 passes)"
        return None

    return _run("check_layerscale_reach", cases, fn, compare)


def check_rezero_gradients(fn: Callable) -> Check:
    """fn(model) -> the set of parameter names that get a non-zero gradient on the first batch of a
    ReZero model (every alpha = 0). Judged against autograd."""
    from ..model.config import rezero

    cases = []
    for n in (2, 4):
        m = _fresh(rezero(replace(_small(), n_layer=n)))
        idx, tgt = _tokens(64, 2, 8, 0)
        names = [k for k, _ in m.named_parameters()]
        grads = torch.autograd.grad(m.loss(idx, tgt), [p for _, p in m.named_parameters()], allow_unused=True)
        want = {k for k, g in zip(names, grads) if g is not None and float(g.abs().max()) > 0}
        cases.append({"args": (m,), "desc": f"{n} blocks", "want": want})

    def compare(got, case):
        if not isinstance(got, (set, frozenset, list, tuple)) or not all(type(x) is str for x in got):
            return f"expected a set of parameter names (strings), got {type(got).__name__}"
        got = {str(x) for x in got}
        if got == case["want"]:
            return None
        return f"missing {sorted(case['want'] - got)[:4]}, extra {sorted(got - case['want'])[:4]}"

    return _run("check_rezero_gradients", cases, fn, compare)
