"""What the book measures inside the trained model, each beside the same model at initialisation.

* ``logit_lens``: decode the residual stream at every boundary with the final LayerNorm and the tied
  head (nostalgebraist 2020): next-token accuracy, and the KL divergence from the model's own final
  distribution, per boundary;
* ``stream_profile``: the stream's RMS, each block's relative move (chapter 1), and how far each
  block's delta points along the model's final prediction;
* ``attention_profile``: per head, the entropy of its attention and the mean distance it looks back;
  ``induction``: the previous-token and induction scores of every head on a repeated random-token
  sequence (Olsson et al. 2022), and the loss on the first and second copy;
* ``mlp_profile``: where the MLP's pre-activations lie (how much mass falls where GELU and ReLU
  differ, |x| < 3 by chapter 5) and how many activations are near zero;
* ``layernorm_gains``: the mean and spread of every LayerNorm's gamma.

Everything runs forward passes on a few held-out windows (``eval.npz``): a few seconds on a CPU.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import torch
import torch.nn.functional as F

from ..measure import analysis
from ..measure.probe import capture_residual_stream
from ..model.layers import LayerNorm
from ..model.transformer import Andrea

GELU_WINDOW = 3.0  # |x| below which GELU and ReLU differ visibly (chapter 5)
NEAR_ZERO = 0.05  # |GELU(x)| below this counts as "off"


def _pre_norm(model: Andrea) -> None:
    if model.config.norm != "pre" or not model.config.residual:
        raise ValueError("these instruments read a pre-norm stack with its residual path (the trained ANDREA)")


@torch.no_grad()
def logit_lens(model: Andrea, ids: torch.Tensor) -> dict:
    """Per boundary 0..n: next-token top-1 accuracy and mean KL(final || lens) in nats."""
    _pre_norm(model)
    with capture_residual_stream(model) as stream:
        final_logits = model(ids)
    logp_final = F.log_softmax(final_logits[:, :-1].double(), -1)
    target = ids[:, 1:]
    acc, kl = [], []
    for x in stream:
        logits = model.final_norm(x) @ model.token_embedding.weight.T
        logp = F.log_softmax(logits[:, :-1].double(), -1)
        acc.append(float((logp.argmax(-1) == target).double().mean()))
        kl.append(float((logp_final.exp() * (logp_final - logp)).sum(-1).mean()))
    return {"accuracy": np.array(acc), "kl": np.array(kl)}


@torch.no_grad()
def heldout_loss(model: Andrea, ids: torch.Tensor, batch: int = 8) -> float:
    """The mean next-token cross-entropy (nats per token) over the windows ``ids`` (B, T)."""
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(ids), batch):
        x = ids[i : i + batch]
        logits = model(x)[:, :-1].double()
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum"))
        n += x[:, 1:].numel()
    return total / n


@torch.no_grad()
def stream_profile(model: Andrea, ids: torch.Tensor) -> dict:
    """The stream's RMS at every boundary, each block's move ||delta|| / ||x||, and the cosine of
    each block's delta with the direction that raises the model's final top token (its unembedding
    vector minus the mean unembedding)."""
    _pre_norm(model)
    with capture_residual_stream(model) as stream:
        logits = model(ids)
    E = model.token_embedding.weight
    top = logits.argmax(-1)  # (B, T)
    direction = E[top] - E.mean(0)  # (B, T, C)
    rms = [float(x.double().pow(2).mean().sqrt()) for x in stream]
    move, along = [], []
    for a, b in zip(stream[:-1], stream[1:]):
        d = (b - a).double()
        move.append(float(d.norm() / a.double().norm()))
        along.append(float(F.cosine_similarity(d, direction.double(), dim=-1).mean()))
    return {"rms": np.array(rms), "move": np.array(move), "along_prediction": np.array(along)}


def attention_maps(model: Andrea, ids: torch.Tensor) -> list[torch.Tensor]:
    """Every block's attention probabilities, (B, H, T, T) per block (``analysis.attention_maps``)."""
    _pre_norm(model)
    return analysis.attention_maps(model, ids)


def attention_profile(model: Andrea, ids: torch.Tensor) -> dict:
    """Per layer and head: normalised entropy (1 = uniform over the visible tokens) and the mean
    distance t - s the head looks back, both averaged over queries t >= 1. Shapes (n_layer, n_head)."""
    T = ids.size(1)
    t = torch.arange(T, dtype=torch.float64)
    dist = (t[:, None] - t[None, :]).clamp_min(0)
    ent, far = [], []
    for p in attention_maps(model, ids):
        ent.append(analysis.normalised_entropy(p).mean((0, 2)).numpy())
        far.append((p.double() * dist).sum(-1)[..., 1:].mean((0, 2)).numpy())
    return {"entropy": np.array(ent), "distance": np.array(far)}


def repeated_random_tokens(vocab: int, batch: int = 16, length: int = 64, seed: int = 0) -> torch.Tensor:
    """``batch`` sequences of ``length`` random token ids, each followed by the same ids again."""
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(0, vocab, (batch, length), generator=g)
    return torch.cat([half, half], 1)


def repeated_text(windows: torch.Tensor, length: int = 64) -> torch.Tensor:
    """The first ``length`` tokens of each window, followed by the same tokens again: text the model
    knows how to read, so that the second copy tests copying in distribution (random tokens do not)."""
    half = windows[:, :length]
    return torch.cat([half, half], 1)


def induction_scores(maps: list[torch.Tensor], L: int) -> tuple[np.ndarray, np.ndarray]:
    """From attention maps (B, H, 2L, 2L) per layer on sequences repeated after ``L`` tokens: each
    head's previous-token score (mean attention from t to t - 1) and induction score (mean attention
    from t >= L to t - L + 1, the token after the earlier copy of t). Shapes (n_layer, n_head)."""
    prev, ind = [], []
    t2 = torch.arange(L, 2 * L)
    for p in maps:
        prev.append(p[:, :, torch.arange(1, 2 * L), torch.arange(0, 2 * L - 1)].double().mean((0, 2)).numpy())
        ind.append(p[:, :, t2, t2 - L + 1].double().mean((0, 2)).numpy())
    return np.array(prev), np.array(ind)


def induction(model: Andrea, ids: torch.Tensor) -> dict:
    """On sequences made of a random half and its repeat (``repeated_random_tokens``):

    * previous-token score of each head: the mean attention from token t to token t-1;
    * induction score: the mean attention from a token of the second copy to the token that
      *followed* its earlier occurrence (t - L + 1), what an induction head does;
    * the loss on the first and on the second copy: an induction mechanism makes the second one low.
    Shapes (n_layer, n_head) for the scores."""
    L = ids.size(1) // 2
    prev, ind = induction_scores(attention_maps(model, ids), L)
    with torch.no_grad():
        logits = model(ids)
    lp = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), reduction="none")
    lp = lp.view(ids.size(0), -1).double()
    return {
        "previous_token": prev,
        "induction": ind,
        "loss_first": float(lp[:, : L - 1].mean()),
        "loss_second": float(lp[:, L:].mean()),
    }


@torch.no_grad()
def mlp_profile(model: Andrea, ids: torch.Tensor, bins: np.ndarray | None = None) -> dict:
    """Per layer: the fraction of MLP pre-activations with |x| < 3 (where GELU and ReLU differ), the
    fraction of activations near zero (|GELU(x)| < 0.05), and a histogram of all pre-activations."""
    _pre_norm(model)
    bins = np.linspace(-8, 8, 81) if bins is None else bins
    window, off, hist = [], [], np.zeros(len(bins) - 1)
    per_layer = []
    x = model.embed(ids)
    for blk in analysis.blocks(model):  # one pass: each block's two sublayers, as Block.forward runs them
        mid = x + blk.ls_1(blk.attn(blk.ln_1(x)))
        h = blk.mlp.fc(blk.ln_2(mid))
        a = blk.mlp.act(h)
        window.append(float((h.abs() < GELU_WINDOW).double().mean()))
        off.append(float((a.abs() < NEAR_ZERO).double().mean()))
        counts = np.histogram(h.numpy().ravel(), bins)[0].astype(np.float64)
        per_layer.append(counts / counts.sum())
        hist += counts
        x = mid + blk.ls_2(blk.mlp.dropout(blk.mlp.proj(a)))
    return {
        "in_window": np.array(window),
        "near_zero": np.array(off),
        "bins": bins,
        "histogram": hist / hist.sum(),
        "histogram_by_layer": np.array(per_layer),
    }


def layernorm_gains(model: Andrea) -> dict:
    """Mean and standard deviation of gamma for ln_1 and ln_2 of every block, and the final norm."""
    bs = analysis.blocks(model)
    g1 = np.array([cast(LayerNorm, b.ln_1).weight.detach().numpy() for b in bs])
    g2 = np.array([cast(LayerNorm, b.ln_2).weight.detach().numpy() for b in bs])
    gf = cast(LayerNorm, model.final_norm).weight.detach().numpy()
    return {
        "ln_1_mean": g1.mean(1),
        "ln_1_sd": g1.std(1),
        "ln_2_mean": g2.mean(1),
        "ln_2_sd": g2.std(1),
        "final_mean": float(gf.mean()),
        "final_sd": float(gf.std()),
    }
