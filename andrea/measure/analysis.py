"""Measurements the chapters make, as plain functions (the chapters only call and plot them).

Each function builds the models it needs from a config and a seed, so a figure in the book can be
reproduced by calling the same function with the same arguments. Everything here measures freshly
initialised models (fast enough for the book's build); training runs live in ``andrea.evidence``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterable, Sequence, cast

import numpy as np
import torch
import torch.nn.functional as F

from ..model.config import ANDREA_120M, AndreaConfig
from ..model.layers import Block
from ..model.transformer import Andrea
from .probe import GradientReport, capture_residual_stream, gradient_flow, random_batch
from .runstats import first_step_at  # noqa: F401 - the chapters call it as analysis.first_step_at


def fresh_model(cfg: AndreaConfig, seed: int = 0, device: str = "cpu") -> Andrea:
    """``Andrea(cfg)`` initialised from ``seed`` (on ``device``)."""
    torch.manual_seed(seed)
    with torch.device(device):
        return Andrea(cfg)


def blocks(model: Andrea) -> list[Block]:
    """The model's blocks, typed (``nn.ModuleList`` items are plain modules to a type checker)."""
    return [cast(Block, b) for b in model.blocks]


def text_batch(tokenizer, text: str, batch: int, seq: int, device: str = "cpu"):
    """The first batch*(seq+1) tokens of ``text``, cut into ``batch`` rows: inputs and targets."""
    ids = tokenizer.encode(text)
    need = batch * (seq + 1)
    if len(ids) < need:
        raise ValueError(f"the text has {len(ids)} tokens; {need} are needed for a {batch}x{seq} batch")
    t = torch.tensor(ids[:need], dtype=torch.long).view(batch, seq + 1)
    return t[:, :-1].to(device), t[:, 1:].to(device)


def small(d_model: int = 64, n_layer: int = 12, **kw) -> AndreaConfig:
    """ANDREA's config at another width and depth (heads of 32), for the chapters' quick measurements."""
    return replace(ANDREA_120M, d_model=d_model, n_head=max(1, d_model // 32), n_layer=n_layer, **kw)


# ---------------------------------------------------------------------------------------------
# Chapter 1: residual connections
# ---------------------------------------------------------------------------------------------
def gradient_vs_depth(
    depths: Sequence[int], base: AndreaConfig, seeds: Iterable[int] = (0,), batch: int = 2, seq: int = 32
) -> list[dict]:
    """``gradient_flow`` of fresh models of ``base``'s kind at each depth and seed (a seed fixes the
    weights and the batch). One row per (depth, seed): the gradient RMS at the embeddings and at the
    top of the stack, their ratio, and the report's status."""
    rows = []
    for seed in seeds:
        idx, tgt = random_batch(base.vocab_size, batch, seq, seed=seed)
        for d in depths:
            cfg = replace(base, n_layer=d, context_length=seq)
            r = gradient_flow(fresh_model(cfg, seed), idx, tgt, weights=False)
            rows.append(
                {
                    "depth": d,
                    "seed": seed,
                    "grad_emb": float(r.grad_rms[0]),
                    "grad_top": float(r.grad_rms[-1]),
                    "ratio": r.grad_ratio,
                    "status": r.status,
                }
            )
    return rows


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


def composite_norm(a: torch.Tensor) -> torch.Tensor:
    """Dong et al.'s ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf) of each matrix in a batch (..., T, C):
    the largest column sum of |A| times the largest row sum, square-rooted."""
    a = a.abs().double()
    return (a.sum(-2).amax(-1) * a.sum(-1).amax(-1)).sqrt()


def token_residual(x: torch.Tensor, norm: str = "composite") -> float:
    """How far the T token vectors of each sequence are from all being the same vector: the norm of
    X - 1 x̄ᵀ (x̄ the mean token) relative to the norm of X, averaged over the batch. 0 means rank
    collapse (every token carries the same vector); Dong et al. 2021 plot exactly this ratio."""
    res = x - x.mean(dim=-2, keepdim=True)
    if norm == "composite":
        return float((composite_norm(res) / composite_norm(x)).mean())
    return float((res.double().flatten(-2).norm(dim=-1) / x.double().flatten(-2).norm(dim=-1)).mean())


@torch.no_grad()
def rank_collapse(model: Andrea, idx: torch.Tensor, parts: str = "block", norm: str = "composite") -> np.ndarray:
    """``token_residual`` of the stream at every boundary (n_layer + 1 values).

    ``parts="block"`` runs the whole blocks; ``parts="attention"`` runs only each block's attention
    sublayer (its own code, ``Block._sublayer``), so with ``residual=False, norm="none"`` the model
    is the pure self-attention network of Dong et al.
    """
    if parts not in ("block", "attention"):
        raise ValueError(f"parts must be 'block' or 'attention', got {parts!r}")
    x = model.embed(idx)
    out = [token_residual(x, norm)]
    for blk in blocks(model):
        x = blk(x) if parts == "block" else blk._sublayer(x, blk.ln_1, blk.attn, blk.ls_1)
        out.append(token_residual(x, norm))
    return np.array(out)


def growth_exponent(values: Sequence[float], start: int = 1) -> float:
    """The exponent p of values[l] ~ l**p, fitted by least squares on log-log axes from boundary
    ``start`` on (boundary 0 is the embeddings)."""
    v = np.asarray(values, dtype=float)[start:]
    ls = np.arange(start, start + len(v), dtype=float)
    return float(np.polyfit(np.log(ls), np.log(v), 1)[0])


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


def scaled_weights_report(
    norm: str, scale: float, n_layer: int = 24, d_model: int = 64, seed: int = 0
) -> GradientReport:
    """A fresh model with every linear weight multiplied by ``scale``, probed with ``gradient_flow``
    on a seeded random batch: what weights that are too large do in one forward and backward pass."""
    cfg = small(d_model, n_layer, norm=norm, context_length=32)
    m = fresh_model(cfg, seed)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear):
                mod.weight.mul_(scale)
    idx, tgt = random_batch(cfg.vocab_size, 2, 32, seed=seed)
    return gradient_flow(m, idx, tgt)


def weight_scale_sweep(
    scales: Iterable[float], norms=("pre", "none"), n_layer: int = 24, d_model: int = 64, seed: int = 0
) -> dict:
    """``scaled_weights_report`` over several scales: the last block's stream RMS, the gradient
    RMS at the embeddings, and whether forward and backward stayed finite.

    Returns {norm: {"scale": [...], "act_top": [...], "grad_emb": [...], "finite": [...]}}.
    """
    out = {}
    for norm in norms:
        rows: dict = {"scale": [], "act_top": [], "grad_emb": [], "finite": []}
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
def compare_norms(
    depth: int = 24,
    d_model: int = 128,
    init: str = "gpt2",
    seed: int = 0,
    norms=("pre", "post"),
    activation: str = "gelu_tanh",
) -> dict:
    """``gradient_flow`` of the same fresh model wired each way in ``norms`` (same weights, same batch)."""
    idx, tgt = random_batch(ANDREA_120M.vocab_size, 2, 32, seed=seed)
    out = {}
    for norm in norms:
        cfg = small(d_model, depth, norm=norm, init=init, activation=activation, context_length=32)
        out[norm] = gradient_flow(fresh_model(cfg, seed), idx, tgt)
    return out


@torch.no_grad()
def representation(model: Andrea, idx: torch.Tensor) -> torch.Tensor:
    """What the stack hands to the output head: the last block's output after the final LayerNorm
    (pre-norm), or the last block's output (post-norm and DeepNorm end in a LayerNorm already)."""
    with capture_residual_stream(model) as stream:
        model(idx)
    return model.final_norm(stream[-1])


def output_change(cfg: AndreaConfig, seed: int = 0, lr: float = 1e-4, batch: int = 2, seq: int = 32) -> float:
    """How much one small optimizer step changes the model's output: ||F(θ+δ) - F(θ)|| / ||F(θ)||.

    F is ``representation`` on a fixed batch (unit-scale in every wiring, so the ratios compare);
    δ is one Adam step of size ``lr`` on that batch's loss (Adam's first step moves every weight by
    about ``lr`` whatever its gradient, so δ has the same size in every architecture: differences in
    the output change are the architecture's amplification, the quantity Liu et al. 2020 and Wang
    et al. 2022 study)."""
    m = fresh_model(replace(cfg, context_length=seq), seed).eval()
    idx, tgt = random_batch(cfg.vocab_size, batch, seq, seed=seed)
    before = representation(m, idx).double()
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    m.loss(idx, tgt).backward()
    opt.step()
    after = representation(m, idx).double()
    return float((after - before).norm() / before.norm())


def output_change_sweep(
    depths: Sequence[int], variants: dict, seeds=(0, 1, 2), d_model: int = 64, lr: float = 1e-4
) -> list[dict]:
    """``output_change`` for every depth, named variant ({name: config switches}) and seed."""
    rows = []
    for name, kw in variants.items():
        for d in depths:
            for s in seeds:
                rows.append(
                    {
                        "variant": name,
                        "depth": d,
                        "seed": s,
                        "change": output_change(small(d_model, d, **kw), seed=s, lr=lr),
                    }
                )
    return rows


def mlp_weight_grads(report: GradientReport) -> np.ndarray:
    """The Frobenius norm of the gradient of each block's MLP weights, block 1 first."""
    return np.asarray(report.weight_grad_norm["mlp"])


# ---------------------------------------------------------------------------------------------
# Chapter 4: the MLP / Chapter 5: GELU
# ---------------------------------------------------------------------------------------------
def time_call(fn, *args, repeat: int = 7, number: int = 3) -> float:
    """Median seconds per call of fn(*args) over ``repeat`` timings of ``number`` calls each."""
    fn(*args)  # warm up (allocations, lazy init)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        times.append((time.perf_counter() - t0) / number)
    return float(np.median(times))


def gelu_speed(n: int = 4 * 128 * 3072, device: str = "cpu", dtype=torch.float32, repeat: int = 9) -> dict:
    """Seconds per call of the readable GELU formula vs torch's fused F.gelu (tanh) on ``n`` values
    (the default is one ANDREA-120M MLP activation: batch 4, 128 tokens, 3072 features), timed in
    ``repeat`` interleaved pairs; ``ratio`` is the median of the pairs' ratios."""
    from ..model.layers import gelu

    x = torch.randn(n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)

    def readable():
        gelu(x, "tanh")
        sync()

    def fused():
        F.gelu(x, approximate="tanh")
        sync()

    # interleaved, pair by pair: a machine that slows down in the middle slows both of a pair alike
    readable(), fused()  # warm up (allocations, lazy init)
    pairs = [(time_call(readable, repeat=1), time_call(fused, repeat=1)) for _ in range(repeat)]
    return {
        "readable": float(np.median([a for a, _ in pairs])),
        "fused": float(np.median([b for _, b in pairs])),
        "ratio": float(np.median([a / b for a, b in pairs])),  # readable / fused, the median of the pairs'
        "n": n,
        "device": str(device),
    }


@torch.no_grad()
def mlp_preactivation_std(cfg: AndreaConfig, idx: torch.Tensor, seed: int = 0) -> float:
    """The standard deviation of block 1's MLP pre-activations (x W_1 + b_1, after its LayerNorm):
    the scale at which the activation function is first used."""
    m = fresh_model(cfg, seed)
    blk = blocks(m)[0]
    x = m.embed(idx)
    x = blk._sublayer(x, blk.ln_1, blk.attn, blk.ls_1)
    return float(blk.mlp.fc(blk.ln_2(x)).std())


# ---------------------------------------------------------------------------------------------
# Chapter 6: the stack
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def trace_token(model: Andrea, idx: torch.Tensor, position: int, batch_row: int = 0) -> list[dict]:
    """Follow one token's vector through block 1: each step's name, shape and L2 norm.

    The whole sequence is computed (attention needs the earlier tokens); the rows report the
    vector of token ``position`` at each step.
    """
    blk = blocks(model)[0]
    if model.config.norm != "pre" or not model.config.residual:
        raise ValueError("trace_token follows ANDREA's own wiring (norm='pre', residual=True)")
    c = model.config
    rows = []

    def add(name, t, note=""):
        v = t[batch_row, position] if t.dim() == 3 else t[batch_row, :, position]
        rows.append({"step": name, "shape": tuple(v.shape), "norm": float(v.norm()), "note": note})
        return t

    x = add("token + position embedding", model.embed(idx), "x: the residual stream entering block 1")
    h = add("LayerNorm 1", blk.ln_1(x), "per-token standardisation, then gamma, beta")
    q, k, v = blk.attn.split_heads(h)  # (B, H, T, hs)
    add(f"query ({c.n_head} heads x {c.head_dim})", q, "this token's questions, one per head")
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hs)
    B, H, T, hs = att.shape
    merged = att.transpose(1, 2).reshape(B, T, H * hs)
    add("attention: weighted sum of values", merged, "mixes information from tokens 0..t")
    a = add("attention output projection", blk.attn.proj(merged), "the attention sublayer's delta")
    x = add("residual: x + attention", x + a, "the stream after the first sublayer")
    h = add("LayerNorm 2", blk.ln_2(x))
    hid = add("MLP expand (W_1, b_1)", blk.mlp.fc(h), f"{c.d_model} -> {c.d_hidden}")
    act = add("GELU", blk.mlp.act(hid), "elementwise")
    m = add("MLP contract (W_2, b_2)", blk.mlp.proj(act), f"{c.d_hidden} -> {c.d_model}: the MLP sublayer's delta")
    add("residual: x + MLP", x + m, "the block's output: input to block 2")
    return rows


@torch.no_grad()
def attention_maps(model: Andrea, idx: torch.Tensor) -> list[torch.Tensor]:
    """Every block's causal attention probabilities as the model computes them, (B, H, T, T) per
    block (queries and keys from the block's input, after ln_1 in a pre-norm stack)."""
    x = model.embed(idx)
    T = idx.size(1)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
    maps = []
    for blk in blocks(model):
        q, k, _ = blk.attn.split_heads(blk.ln_1(x) if model.config.norm == "pre" else x)
        s = q @ k.transpose(-2, -1) / (q.size(-1) ** 0.5)
        maps.append(torch.softmax(s.masked_fill(mask, float("-inf")), -1))
        x = blk(x)
    return maps


def normalised_entropy(p: torch.Tensor) -> torch.Tensor:
    """Each query's attention entropy (nats) over that of uniform attention on its t+1 visible tokens,
    log(t+1) (1 = uniform), for queries t >= 1 (t = 0 sees one token): (..., T - 1), float64."""
    p = p.double()
    T = p.size(-1)
    uniform = torch.log(torch.arange(1, T + 1, dtype=torch.float64, device=p.device))
    ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)  # (..., T)
    return ent[..., 1:] / uniform[1:]


def attention_entropy(model: Andrea, idx: torch.Tensor) -> np.ndarray:
    """Mean normalised entropy of each block's causal attention (``normalised_entropy``), averaged
    over heads and queries. Shape (n_layer,)."""
    return np.array([float(normalised_entropy(p).mean()) for p in attention_maps(model, idx)])


@torch.no_grad()
def block_moves_same_input(model: Andrea, idx: torch.Tensor) -> np.ndarray:
    """Each block's relative move ||block(x) - x|| / ||x|| when every block gets the *same* input
    (the embeddings): what the blocks do by construction, apart from the stream they receive."""
    x = model.embed(idx)
    return np.array([float((blk(x) - x).norm() / x.norm()) for blk in model.blocks])


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
        out.append(float(F.cosine_similarity(x, x0, dim=-1).mean()))
    return np.array(out)


@torch.no_grad()
def stream_rms(model: Andrea, idx: torch.Tensor) -> np.ndarray:
    """The residual stream's RMS at every boundary (a forward pass only)."""
    with capture_residual_stream(model) as stream:
        model(idx)
    return np.array([float(t.double().pow(2).mean().sqrt()) for t in stream])


def layerscale_growth(lam0: float, lr: float, steps: int = 300, seed: int = 0) -> dict:
    """Train a small LayerScale model (4 blocks, width 64, bytes; AdamW, no warmup, ``lr``) and
    record the largest and the mean |lambda| after every step: how fast do the lambdas open?

    Returns {"max": [...], "mean": [...], "step": [...], "bound": [...] (AdamW's bound lambda_0 +
    lr * step), "straightness": mean over the lambdas of |lambda_end - lambda_0| / (sum of |each
    step's change|): 1 for a lambda that always moves the same way, near 0 for one that goes back and
    forth}. No first crossing of a level is searched for: after the first tens of steps the largest
    lambda creeps along a plateau, and the step at which it crosses a level there moves by hundreds
    of steps between CPUs (on another machine 0.1 was reached at step 284, or not within 300)."""
    from ..training.data import load_token_data
    from ..training.train import TrainConfig, train

    state: dict = {}

    def monitor(model):
        lam = torch.cat([p.detach().flatten() for n, p in model.named_parameters() if ".ls_" in n])
        if "prev" in state:
            state["path"] += (lam - state["prev"]).abs()
        else:  # first call: after step 1; lambda_0 is the configured initial value
            state["first"] = torch.full_like(lam, lam0)
            state["path"] = (lam - state["first"]).abs()
        state["prev"] = lam.clone()
        lams = lam.abs()
        return {"max": float(lams.max()), "mean": float(lams.mean())}

    data = load_token_data("bytes")
    cfg = AndreaConfig(vocab_size=256, context_length=64, d_model=64, n_head=2, n_layer=4, layerscale=lam0)
    t = TrainConfig(steps=steps, batch_size=8, seq_len=32, lr=lr, warmup=0, eval_every=1, eval_batches=1, seed=seed)
    hist = train(cfg, t, data, device="cpu", progress=False, monitor=monitor).history["monitor"]
    net = (state["prev"] - state["first"]).abs()
    straight = float((net / state["path"].clamp_min(1e-30)).mean())
    return {
        "max": [h["max"] for h in hist],
        "mean": [h["mean"] for h in hist],
        "step": [h["step"] for h in hist],
        "bound": [lam0 + lr * h["step"] for h in hist],
        "straightness": straight,
    }
