"""Running one cell of a grid: train it from scratch, diagnose it, return a row of plain numbers.

This is the code whose hash keys the results store (with the model, training and data modules):
``andrea.evidence.store`` decides *which* runs to make and keeps them; this module decides *what a run
computes*. A cell is seeded and trains on ``threads`` CPU threads, so its numbers depend only on
the code, the torch version and the machine's floating-point kernels.
"""

from __future__ import annotations

import math
import time


def _sig(x, digits: int = 6):
    """Round for storage (6 significant digits); non-finite numbers become None (JSON null)."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return [_sig(v, digits) for v in x]
    if isinstance(x, dict):
        return {k: _sig(v, digits) for k, v in x.items()}
    if isinstance(x, bool) or isinstance(x, int) or isinstance(x, str):
        return x
    x = float(x)
    return float(f"{x:.{digits}g}") if math.isfinite(x) else None


def _monitor_layerscale(model):
    """Mean |lambda| of each block's two LayerScale vectors (attention, MLP)."""
    attn, mlp = [], []  # type: ignore[var-annotated]
    for blk in model.blocks:
        for out, ls in ((attn, blk.ls_1), (mlp, blk.ls_2)):
            scale = getattr(ls, "scale", None)
            out.append(float(scale.detach().abs().mean()) if scale is not None else None)
    return {"lam_attn": attn, "lam_mlp": mlp}


def _make_stream_monitor(data, model_cfg):
    """RMS of the residual stream at the last block's output, and the largest |logit|, on a fixed
    validation batch; and the RMS of the largest weight matrix."""
    import torch

    from ..measure.probe import capture_residual_stream

    g = torch.Generator().manual_seed(123)
    x, _ = data.batch("val", 4, min(64, model_cfg.context_length), g)

    @torch.no_grad()
    def monitor(model):
        was = model.training
        model.eval()
        with capture_residual_stream(model) as stream:
            logits = model(x.to(model.device))
        model.train(was)
        top = stream[-1].double()
        w = max(float(p.detach().double().pow(2).mean().sqrt()) for p in model.parameters() if p.dim() == 2)
        return {
            "stream_rms": float(top.pow(2).mean().sqrt()),
            "max_logit": float(logits.abs().max()),
            "max_weight_rms": w,
        }

    return monitor


MONITORS = ("layerscale", "stream")


def run_cell(cell, threads: int = 1) -> dict:
    """Train one cell from scratch (seeded, ``threads`` CPU threads) and return its result row."""
    import torch
    import torch.nn.functional as F

    from ..model.config import AndreaConfig
    from ..training.data import load_token_data
    from ..training.train import TrainConfig, train

    torch.set_num_threads(threads)
    data = load_token_data(cell.tokenizer)
    model_cfg = AndreaConfig(**cell.model)
    train_cfg = TrainConfig(**cell.train)
    if cell.monitor not in (None,) + MONITORS:
        raise ValueError(f"monitor must be None or one of {MONITORS}, got {cell.monitor!r}")
    monitor = None
    if cell.monitor == "layerscale":
        monitor = _monitor_layerscale
    elif cell.monitor == "stream":
        monitor = _make_stream_monitor(data, model_cfg)
    t0 = time.perf_counter()
    res = train(model_cfg, train_cfg, data, device="cpu", progress=False, monitor=monitor)
    h = res.history
    # The loss of a model that ignores its input and predicts how common each token is: the
    # unigram distribution of the training split, scored on the validation split.
    counts = torch.bincount(data.train, minlength=data.vocab_size).double() + 1.0
    unigram = counts / counts.sum()
    val_counts = torch.bincount(data.val, minlength=data.vocab_size).double()
    unigram_ce = float(-(val_counts * unigram.log()).sum() / val_counts.sum())
    kl = None
    if not res.diverged:
        # How far the trained model's predictions are from that unigram distribution (nats/token):
        # near 0 means the model has learned nothing beyond token frequencies.
        model = res.model.eval()
        g = torch.Generator().manual_seed(10_000 + train_cfg.seed)
        with torch.no_grad():
            x, _ = data.batch("val", train_cfg.batch_size, train_cfg.seq_len, g)
            logp = F.log_softmax(model(x).double(), -1)
            kl = float((logp.exp() * (logp - unigram.log())).sum(-1).mean())
    finite = [v for v in h["loss"] if math.isfinite(v)]
    row = {
        "steps": h["step"],
        "loss": h["loss"],
        "grad_norm": h["grad_norm"],
        "val_step": h["val_step"],
        "val_loss": h["val_loss"],
        "diverged": res.diverged,
        "diverged_at": res.diverged_at,
        "final_val_loss": h["val_loss"][-1] if h["val_loss"] and not res.diverged else None,
        "final_train_loss": sum(finite[-20:]) / len(finite[-20:]) if finite and not res.diverged else None,
        "unigram_ce": unigram_ce,
        "kl_unigram": kl,
        "monitor": h.get("monitor", []),
    }
    row = _sig(row)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row
