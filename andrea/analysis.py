"""Measurements the chapters make, as plain functions (the chapters only call and plot them).

Each function builds the models it needs from a config and a seed, so a figure in the book can be
reproduced by calling the same function with the same arguments.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Optional, Sequence

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
