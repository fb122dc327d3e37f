"""The measurements of the appendix "Reproducing the papers": each paper's claim, measured with
``andrea`` in the paper's own setting and in ANDREA's, side by side.

Every function builds its models from config switches (``andrea.AndreaConfig``), never from a copy
of the model; where a paper's setting needs something no switch gives (Xiong et al.'s zero query and
key weights, which make attention uniform; their i.i.d. Gaussian inputs), the function sets those
weights on a freshly built model and says so.
"""

from __future__ import annotations

from typing import Sequence, cast

import numpy as np
import torch

from ..model.config import AndreaConfig, rezero
from ..model.layers import LayerNorm
from ..model.transformer import Andrea
from .analysis import blocks, fresh_model, rank_collapse, small, stream_rms
from .probe import gradient_flow, random_batch

VOCAB, SEQ = 8449, 32


# ---------------------------------------------------------------------------------------------
# Xiong et al. 2020: the pre-LN stream grows linearly; the last layer's gradient by depth
# ---------------------------------------------------------------------------------------------
def xiong_config(norm: str, n_layer: int, d_model: int = 64) -> AndreaConfig:
    """Their analysis' setting: Xavier weights, a ReLU FFN, one head, biases 0, gamma 1, inputs of
    unit variance (token embeddings N(0, 1))."""
    return AndreaConfig(
        vocab_size=VOCAB,
        context_length=SEQ,
        d_model=d_model,
        n_head=1,
        n_layer=n_layer,
        norm=norm,
        init="xavier",
        init_std=1.0,
        activation="relu",
        mlp_dim=d_model,
    )


def andrea_config(norm: str, n_layer: int, d_model: int = 64) -> AndreaConfig:
    """ANDREA's setting at the same width and depth: GPT-2 init, GELU (tanh), 4x MLP, heads of 32."""
    return small(d_model, n_layer, norm=norm, context_length=SEQ)


def xiong_model(norm: str, n_layer: int, seed: int = 0, d_model: int = 64) -> Andrea:
    """A fresh model in Xiong et al.'s setting. Besides the config switches, three weights are set:
    the query and key weights are zero (attention is uniform over the visible tokens) and the
    position embeddings are zero (the inputs are i.i.d. N(0, 1) vectors), as their Section 3.3
    assumes; and the gain of the last LayerNorm is 1/sqrt(d), so that the tied output head, whose
    matrix is the N(0, 1) embedding, scores like their N(0, 1/d) output layer (logits of unit scale)."""
    m = fresh_model(xiong_config(norm, n_layer, d_model), seed)
    with torch.no_grad():
        m.position_embedding.weight.zero_()
        for blk in blocks(m):
            blk.attn.qkv.weight[: 2 * d_model].zero_()
        last_ln = cast(LayerNorm, m.final_norm if norm == "pre" else blocks(m)[-1].ln_2)
        last_ln.weight.fill_(d_model**-0.5)
    return m


def _batch(seed: int, batch: int = 4):
    return random_batch(VOCAB, batch, SEQ, seed=seed)


@torch.no_grad()
def xiong_stream_norms(m: Andrea, idx: torch.Tensor) -> dict:
    """E||x_l||^2 / d at every layer boundary (pre-LN: the stream; post-LN: also x^{post,5}, the sum
    that enters each block's last LayerNorm, which is the quantity their Lemma 2 bounds)."""
    inside = []
    hooks = [
        blk.ln_2.register_forward_pre_hook(lambda mod, args: inside.append(float(args[0].double().pow(2).mean())))
        for blk in blocks(m)
    ]
    try:
        rms = stream_rms(m, idx)
    finally:
        for h in hooks:
            h.remove()
    return {"stream": rms**2, "pre_last_ln": np.array(inside)}


def lemma2(depth: int = 24, seeds: Sequence[int] = (0, 1, 2), d_model: int = 64) -> dict:
    """E||x_l||^2/d by layer l, for pre-LN and post-LN, in Xiong's setting and ANDREA's, per seed."""
    out: dict = {}
    for setting in ("paper", "andrea"):
        for norm in ("pre", "post"):
            runs = []
            for s in seeds:
                m = (
                    xiong_model(norm, depth, s, d_model)
                    if setting == "paper"
                    else fresh_model(andrea_config(norm, depth, d_model), s)
                )
                runs.append(xiong_stream_norms(m, _batch(s)[0]))
            out[setting, norm] = {k: np.array([r[k] for r in runs]) for k in ("stream", "pre_last_ln")}
    return out


def last_ffn_grad(norm: str, depth: int, seed: int, setting: str = "paper", d_model: int = 64) -> float:
    """||dLoss/dW^{2,L}||_F: the gradient of the last block's second FFN matrix (Xiong's Theorem 1)."""
    m = (
        xiong_model(norm, depth, seed, d_model)
        if setting == "paper"
        else fresh_model(andrea_config(norm, depth, d_model), seed)
    )
    idx, tgt = _batch(seed)
    (g,) = torch.autograd.grad(m.loss(idx, tgt), [blocks(m)[-1].mlp.proj.weight])
    return float(g.norm())


def theorem1(depths: Sequence[int] = (6, 24), seeds: Sequence[int] = (0, 1, 2, 3, 4), d_model: int = 64) -> list[dict]:
    """The last FFN's weight gradient at two depths, per norm placement, setting and seed."""
    rows = []
    for setting in ("paper", "andrea"):
        for norm in ("pre", "post"):
            for d in depths:
                for s in seeds:
                    rows.append(
                        {
                            "setting": setting,
                            "norm": norm,
                            "depth": d,
                            "seed": s,
                            "grad": last_ffn_grad(norm, d, s, setting, d_model),
                        }
                    )
    return rows


def layerwise_ffn_grads(depth: int = 12, seeds: Sequence[int] = (0, 1, 2), d_model: int = 64) -> dict:
    """The FFN weight-gradient norm of every layer (their Figure 3's quantity), per setting and norm."""
    out: dict = {}
    for setting in ("paper", "andrea"):
        for norm in ("pre", "post"):
            per_seed = []
            for s in seeds:
                m = (
                    xiong_model(norm, depth, s, d_model)
                    if setting == "paper"
                    else fresh_model(andrea_config(norm, depth, d_model), s)
                )
                idx, tgt = _batch(s)
                ws = [blk.mlp.proj.weight for blk in blocks(m)]
                grads = torch.autograd.grad(m.loss(idx, tgt), ws)
                per_seed.append([float(g.norm()) for g in grads])
            out[setting, norm] = np.array(per_seed)
    return out


# ---------------------------------------------------------------------------------------------
# Radford et al. 2019 (GPT-2): the depth-scaled init keeps the stream's added variance fixed
# ---------------------------------------------------------------------------------------------
def added_variance(
    depths: Sequence[int] = (12, 48), seeds: Sequence[int] = (0, 1, 2), d_model: int = 128
) -> list[dict]:
    """The variance the blocks add to the stream, E[x_L^2] - E[x_0^2], with and without the scaling."""
    rows = []
    for init in ("gpt2", "normal"):
        for d in depths:
            for s in seeds:
                m = fresh_model(small(d_model, d, init=init, context_length=SEQ), s)
                rms = stream_rms(m, _batch(s)[0])
                rows.append({"init": init, "depth": d, "seed": s, "added": float(rms[-1] ** 2 - rms[0] ** 2)})
    return rows


# ---------------------------------------------------------------------------------------------
# Touvron et al. 2021 (CaiT): a block's change is linear in lambda_0
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def layerscale_linearity(
    lams: Sequence[float], depth: int = 24, seeds: Sequence[int] = (0, 1, 2), d_model: int = 128
) -> np.ndarray:
    """Mean relative move ||block(x) - x|| / ||x|| over the blocks of a fresh stack, per lambda_0
    (rows) and seed (columns)."""
    from .analysis import block_moves

    out = np.zeros((len(lams), len(seeds)))
    for i, lam in enumerate(lams):
        for j, s in enumerate(seeds):
            m = fresh_model(small(d_model, depth, layerscale=lam, context_length=SEQ), s)
            out[i, j] = block_moves(m, _batch(s)[0]).mean()
    return out


# ---------------------------------------------------------------------------------------------
# Bachlechner et al. 2020 (ReZero): identity at alpha = 0, and who gets a gradient first
# ---------------------------------------------------------------------------------------------
def rezero_at_zero(depth: int = 24, seed: int = 0, d_model: int = 64) -> dict:
    """At alpha = 0 every block is the identity, so the last block's output is the embedding
    exactly; the branch weights get exactly zero gradient, the alphas do not."""
    m = fresh_model(rezero(small(d_model, depth, init="xavier", context_length=SEQ)), seed)
    idx, tgt = _batch(seed)
    with torch.no_grad():
        x = m.embed(idx)
        y = x
        for blk in blocks(m):
            y = blk(y)
    r = gradient_flow(m, idx, tgt)
    alphas = [p for n, p in m.named_parameters() if n.endswith("ls_1.scale") or n.endswith("ls_2.scale")]
    g_alpha = torch.autograd.grad(m.loss(idx, tgt), alphas)
    return {
        "identity_error": float((y - x).abs().max()),
        "branch_grad_max": float(max(r.weight_grad_norm["attn"].max(), r.weight_grad_norm["mlp"].max())),
        "alpha_grad_min": float(min(abs(float(g)) for g in g_alpha)),
        "n_alpha": len(alphas),
        "alpha_numel": int(sum(a.numel() for a in alphas)),
    }


# ---------------------------------------------------------------------------------------------
# Dong et al. 2021: pure attention loses rank; skips and MLPs stop it
# ---------------------------------------------------------------------------------------------
DONG_VARIANTS = {
    # name: (config switches, which parts of each block run)
    "attention only (SAN)": ({"norm": "none", "residual": False}, "attention"),
    "attention + MLP": ({"norm": "none", "residual": False}, "block"),
    "attention + skip": ({"norm": "none", "residual": True}, "attention"),
    "ANDREA block (attention, MLP, skips, LayerNorm)": ({}, "block"),
}


def dong(depth: int = 12, seeds: Sequence[int] = (0, 1, 2), d_model: int = 64, init: str = "gpt2") -> dict:
    """Relative distance of the token vectors from rank one, at every boundary, per variant and seed."""
    out = {}
    for name, (kw, parts) in DONG_VARIANTS.items():
        runs = []
        for s in seeds:
            m = fresh_model(small(d_model, depth, init=init, context_length=SEQ, **kw), s)
            runs.append(rank_collapse(m, _batch(s)[0], parts=parts))
        out[name] = np.array(runs)
    return out
