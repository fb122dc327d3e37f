"""Measurements the chapters make, as plain functions (the chapters only call and plot them).

Each function builds the models it needs from a config and a seed, so a figure in the book can be
reproduced by calling the same function with the same arguments.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np
import torch

from .config import ANDREA_120M, AndreaConfig
from .model import Andrea
from .probe import GradientReport, gradient_flow, random_batch


def fresh_model(cfg: AndreaConfig, seed: int = 0, device: str = "cpu") -> Andrea:
    torch.manual_seed(seed)
    with torch.device(device):
        return Andrea(cfg)


def text_batch(tokenizer, text: str, batch: int, seq: int, device: str = "cpu"):
    """The first batch*(seq+1) tokens of ``text``, cut into ``batch`` rows: inputs and targets."""
    ids = tokenizer.encode(text)
    need = batch * (seq + 1)
    if len(ids) < need:
        raise ValueError(f"the text has {len(ids)} tokens; {need} are needed for a {batch}x{seq} batch")
    t = torch.tensor(ids[:need], dtype=torch.long).view(batch, seq + 1)
    return t[:, :-1].to(device), t[:, 1:].to(device)


# ---------------------------------------------------------------------------------------------
# Chapter 1: residual connections
# ---------------------------------------------------------------------------------------------
def gradient_vs_depth(depths: Sequence[int], base: AndreaConfig, seed: int = 0, batch: int = 2, seq: int = 32,
                      progress=None) -> list[GradientReport]:
    """``gradient_flow`` of a fresh model of ``base``'s kind at each depth (same seed, same batch)."""
    reports = []
    idx, tgt = random_batch(base.vocab_size, batch, seq, seed=seed)
    for d in depths:
        m = fresh_model(replace(base, n_layer=d, context_length=max(seq, 1)), seed)
        reports.append(gradient_flow(m, idx, tgt))
        if progress:
            progress(d)
    return reports


@torch.no_grad()
def stream_contributions(model: Andrea, idx: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """Split the residual stream into the embedding and each block's delta.

    Returns (embedding, [delta_1, ..., delta_n], final) where delta_i = block_i(x) - x and
    final is the last block's output, so final == embedding + sum(deltas) up to rounding.
    Meaningful for pre-norm / no-norm stacks with the residual path on (post-norm renormalises
    the stream, so it is not a sum).
    """
    x = model.embed(idx)
    emb = x.clone()
    deltas = []
    for block in model.blocks:
        y = block(x)
        deltas.append(y - x)
        x = y
    return emb, deltas, x


@torch.no_grad()
def block_moves(model: Andrea, idx: torch.Tensor) -> np.ndarray:
    """For each block, ||block(x) - x|| / ||x||: how far it moves the stream it receives."""
    x = model.embed(idx)
    out = []
    for block in model.blocks:
        y = block(x)
        out.append(float((y - x).norm() / x.norm()))
        x = y
    return np.array(out)


# ---------------------------------------------------------------------------------------------
# Chapter 2: layer normalisation
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def stream_at(model: Andrea, idx: torch.Tensor, boundary: int) -> torch.Tensor:
    """The residual stream at a block boundary (0 = embedding output)."""
    x = model.embed(idx)
    for block in model.blocks[:boundary]:
        x = block(x)
    return x


def scaled_weights_report(norm: str, scale: float, n_layer: int = 24, d_model: int = 64, seed: int = 0) -> GradientReport:
    """A fresh model with every linear weight multiplied by ``scale`` (what growing weights do in a
    run that is going wrong), probed with ``gradient_flow`` on a seeded random batch."""
    cfg = replace(ANDREA_120M, d_model=d_model, n_head=max(1, d_model // 32), n_layer=n_layer, norm=norm,
                  context_length=32)
    m = fresh_model(cfg, seed)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear):
                mod.weight.mul_(scale)
    idx, tgt = random_batch(cfg.vocab_size, 2, 32, seed=seed)
    return gradient_flow(m, idx, tgt)


def weight_scale_sweep(scales: Iterable[float], norms=("pre", "none"), n_layer: int = 24, d_model: int = 64,
                       seed: int = 0) -> dict:
    """``scaled_weights_report`` over several scales: the last block's stream RMS, the gradient
    RMS at the embeddings, and whether forward and backward stayed finite.

    Returns {norm: {"scale": [...], "act_top": [...], "grad_emb": [...], "finite": [...]}}.
    """
    out = {}
    for norm in norms:
        rows = {"scale": [], "act_top": [], "grad_emb": [], "finite": []}
        for s in scales:
            r = scaled_weights_report(norm, s, n_layer, d_model, seed)
            rows["scale"].append(float(s))
            rows["act_top"].append(float(r.act_rms[-1]))
            rows["grad_emb"].append(float(r.grad_rms[0]))
            rows["finite"].append(r.finite)
        out[norm] = rows
    return out


# ---------------------------------------------------------------------------------------------
# Chapter 3: pre-norm vs post-norm
# ---------------------------------------------------------------------------------------------
def compare_norms(depth: int = 24, d_model: int = 128, init_std: float = 0.02, seed: int = 0,
                  norms=("pre", "post")) -> dict:
    """``gradient_flow`` of the same fresh model wired pre-norm and post-norm (same weights)."""
    idx, tgt = random_batch(8449, 2, 32, seed=seed)
    out = {}
    for norm in norms:
        cfg = replace(ANDREA_120M, d_model=d_model, n_head=d_model // 32, n_layer=depth, norm=norm,
                      init_std=init_std, context_length=32)
        out[norm] = gradient_flow(fresh_model(cfg, seed), idx, tgt)
    return out


# ---------------------------------------------------------------------------------------------
# Chapter 4: the MLP / Chapter 5: GELU
# ---------------------------------------------------------------------------------------------
def time_call(fn, *args, repeat: int = 7, number: int = 3) -> float:
    """Median seconds per call of fn(*args) over ``repeat`` timings of ``number`` calls each."""
    import time

    fn(*args)  # warm up (allocations, lazy init)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        times.append((time.perf_counter() - t0) / number)
    return float(np.median(times))


def gelu_speed(n: int = 4 * 128 * 3072, device: str = "cpu", dtype=torch.float32) -> dict:
    """Seconds per call of the readable GELU formula vs torch's fused F.gelu (tanh) on ``n`` values
    (the default is one ANDREA-120M MLP activation: batch 4, 128 tokens, 3072 features)."""
    import torch.nn.functional as F

    from .layers import gelu

    x = torch.randn(n, device=device, dtype=dtype, generator=None)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)

    def readable():
        gelu(x, "tanh")
        sync()

    def fused():
        F.gelu(x, approximate="tanh")
        sync()

    return {"readable": time_call(readable), "fused": time_call(fused), "n": n, "device": str(device)}


# ---------------------------------------------------------------------------------------------
# Chapter 6: the stack
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def trace_token(model: Andrea, idx: torch.Tensor, position: int, batch_row: int = 0) -> list[dict]:
    """Follow one token's vector through block 1: each step's name, shape and L2 norm.

    The whole sequence is computed (attention needs the earlier tokens); the rows report the
    vector of token ``position`` at each step.
    """
    blk = model.blocks[0]
    if model.config.norm != "pre" or not model.config.residual:
        raise ValueError("trace_token follows ANDREA's own wiring (norm='pre', residual=True)")
    rows = []

    def add(name, t, note=""):
        v = t[batch_row, position] if t.dim() == 3 else t[batch_row, :, position]
        rows.append({"step": name, "shape": tuple(v.shape), "norm": float(v.norm()), "note": note})
        return t

    x = add("token + position embedding", model.embed(idx), "x: the residual stream entering block 1")
    h = add("LayerNorm 1", blk.ln_1(x), "per-token standardisation, then gamma, beta")
    q, k, v = blk.attn.split_heads(h)  # (B, H, T, hs)
    add("query (12 heads x 64)", q, "this token's questions, one per head")
    att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hs)
    B, H, T, hs = att.shape
    merged = att.transpose(1, 2).reshape(B, T, H * hs)
    add("attention: weighted sum of values", merged, "mixes information from tokens 0..t")
    a = add("attention output projection", blk.attn.proj(merged), "the attention sublayer's delta")
    x = add("residual: x + attention", x + a, "the stream after the first sublayer")
    h = add("LayerNorm 2", blk.ln_2(x))
    hid = add("MLP expand (W_1, b_1)", blk.mlp.fc(h), "768 -> 3072")
    act = add("GELU", blk.mlp.act(hid), "elementwise")
    m = add("MLP contract (W_2, b_2)", blk.mlp.proj(act), "3072 -> 768: the MLP sublayer's delta")
    x = add("residual: x + MLP", x + m, "the block's output: input to block 2")
    return rows


@torch.no_grad()
def attention_entropy(model: Andrea, idx: torch.Tensor) -> np.ndarray:
    """Mean entropy (nats) of each block's causal attention distributions, relative to the
    entropy of uniform attention over the visible tokens (1 = uniform). Shape (n_layer,)."""
    x = model.embed(idx)
    T = idx.size(1)
    uniform = torch.log(torch.arange(1, T + 1, dtype=torch.float64))  # entropy of uniform over t+1 tokens
    out = []
    for blk in model.blocks:
        q, k, _ = blk.attn.split_heads(blk.ln_1(x) if model.config.norm == "pre" else x)
        s = q @ k.transpose(-2, -1) / (q.size(-1) ** 0.5)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), -1).double()
        ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)  # (B, H, T)
        rel = (ent[..., 1:] / uniform[1:]).mean()  # skip t=0 (entropy 0 by definition)
        out.append(float(rel))
        x = blk(x)
    return np.array(out)


# ---------------------------------------------------------------------------------------------
# Chapter 7: LayerScale
# ---------------------------------------------------------------------------------------------
def cait_init(depth: int) -> float:
    """LayerScale's initial lambda by depth, as CaiT chose it (Touvron et al., 2021):
    0.1 up to 18 blocks, 1e-5 at 24, 1e-6 deeper. (Depths 19-23 are not in the paper; we use 1e-5.)"""
    if depth <= 18:
        return 0.1
    if depth <= 24:
        return 1e-5
    return 1e-6


@torch.no_grad()
def embedding_survival(model: Andrea, idx: torch.Tensor) -> np.ndarray:
    """cos(x_l, x_0) at every boundary l: how much of the stream still points along the embeddings
    (computed per token, averaged). Shape (n_layer + 1,)."""
    x0 = model.embed(idx)
    x = x0
    out = [1.0]
    for blk in model.blocks:
        x = blk(x)
        out.append(float(torch.nn.functional.cosine_similarity(x, x0, dim=-1).mean()))
    return np.array(out)
