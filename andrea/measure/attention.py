"""Attention, one step at a time: what the attention chapter (``book/attention.md``) draws.

``head_steps`` computes one head of one block by hand for a whole sequence (queries, keys and values,
the scaled scores, the causal mask, the softmax and the weighted mix of the values) and checks the
result against the model's own fused kernel. ``head_table`` summarises every head of a model on a
text, so that the chapter can pick its example head by a measurement instead of by eye.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..model.transformer import Andrea
from .analysis import attention_maps, blocks, normalised_entropy


@torch.no_grad()
def head_steps(model: Andrea, idx: torch.Tensor, block: int = 1, head: int = 0) -> dict:
    """Head ``head`` (0-based) of block ``block`` (1-based) of ``model`` on one sequence ``idx``
    (shape (1, T)), computed step by step for every token.

    Returns numpy arrays: "x" (the block's input to attention, after ``ln_1`` in a pre-norm stack,
    (T, C)), "q", "k", "v" (T, head size), "scores" (T, T: q_t . k_s / sqrt(head size)), "mask" (T, T,
    True where s > t: the future), "weights" (the softmax of the masked scores; each row sums to 1),
    "out" (T, head size: the weighted mix of the values), and "max_diff", the largest difference
    between "out" and the same head's output from ``scaled_dot_product_attention``."""
    n_layer, n_head = model.config.n_layer, model.config.n_head
    if not 1 <= block <= n_layer:
        raise ValueError(f"block must be in 1..{n_layer}, got {block}")
    if not 0 <= head < n_head:
        raise ValueError(f"head must be in 0..{n_head - 1}, got {head}")
    if idx.dim() != 2 or idx.size(0) != 1:
        raise ValueError(f"idx must be one sequence of shape (1, T), got shape {tuple(idx.shape)}")
    x = model.embed(idx)
    stack = blocks(model)
    for blk in stack[: block - 1]:
        x = blk(x)
    blk = stack[block - 1]
    x_in = blk.ln_1(x) if model.config.norm == "pre" else x
    q, k, v = blk.attn.split_heads(x_in)  # each (1, H, T, hs)
    hs = q.size(-1)
    qh, kh, vh = q[0, head], k[0, head], v[0, head]  # (T, hs)
    scores = qh @ kh.T / hs**0.5  # (T, T): every query against every key
    T = idx.size(1)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # s > t: tokens after the query
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    out = weights @ vh
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, head]
    return {
        "x": x_in[0].numpy(),
        "q": qh.numpy(),
        "k": kh.numpy(),
        "v": vh.numpy(),
        "scores": scores.numpy(),
        "mask": mask.numpy(),
        "weights": weights.numpy(),
        "out": out.numpy(),
        "max_diff": float((out - fused).abs().max()),
        "head_dim": hs,
    }


@torch.no_grad()
def head_table(model: Andrea, idx: torch.Tensor) -> dict:
    """Every head of every block on one sequence ``idx`` (1, T), arrays of shape (n_layer, n_head):
    "entropy" (the mean over queries t >= 1 of the weights' entropy divided by that of uniform
    attention over the t + 1 visible tokens: 1 = spread evenly), "previous" (the mean weight on the
    token just before the query) and "first" (the mean weight on the sequence's first token)."""
    ent, prev, first = [], [], []
    for p in attention_maps(model, idx):
        p = p[0].double()  # (H, T, T)
        ent.append(normalised_entropy(p).mean(-1).numpy())
        prev.append(torch.diagonal(p, -1, dim1=-2, dim2=-1).mean(-1).numpy())
        first.append(p[:, 1:, 0].mean(-1).numpy())
    return {"entropy": np.array(ent), "previous": np.array(prev), "first": np.array(first)}


def sharpest_head(table: dict) -> tuple[int, int]:
    """(block, head), block 1-based and head 0-based, of the head whose weights are least evenly
    spread (the lowest normalised entropy in ``head_table``)."""
    b, h = np.unravel_index(int(np.argmin(table["entropy"])), table["entropy"].shape)
    return int(b) + 1, int(h)


@torch.no_grad()
def repeat_table(model: Andrea, idx: torch.Tensor) -> dict:
    """On one sequence ``idx`` (1, T) with a repeated phrase: for each token that already occurred earlier in
    it, the weight on the token that followed its latest earlier occurrence (what an induction head looks
    at), averaged over those tokens: "weight", (n_layer, n_head); and "even", what a head that spreads its
    weight evenly over the visible tokens would give there."""
    ids = idx[0].tolist()
    pairs = []
    for t, x in enumerate(ids):
        earlier = [s for s in range(t - 1) if ids[s] == x]
        if earlier:
            pairs.append((t, earlier[-1] + 1))
    if not pairs:
        raise ValueError(f"no token of the sequence (length {len(ids)}) occurs twice: repeat a phrase in it")
    q = torch.tensor([t for t, _ in pairs])
    k = torch.tensor([s for _, s in pairs])
    weight = np.array([p[0][:, q, k].double().mean(-1).numpy() for p in attention_maps(model, idx)])
    return {"weight": weight, "even": float(np.mean([1 / (t + 1) for t, _ in pairs]))}
