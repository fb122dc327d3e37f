"""Weights, batch and torch's measurement of an explorer setting, for the model in the page.

The site's JavaScript model (``book/_static/andrea_flow.js``, on TensorFlow.js) is tested against
the torch model by loading the very weights and batch that ``andrea.views.explorer.measure`` uses and
comparing the per-boundary statistics of ``andrea.measure.probe.gradient_flow``. This module hands them
over in a form a page can read: float32 arrays as base64, token ids as lists.
"""

from __future__ import annotations

import base64

import numpy as np
import torch

from ..measure.probe import gradient_flow, random_batch
from ..model.transformer import Andrea
from ..views.explorer import BATCH, SEQ, Setting
from ..views.static_explorer import SITE_WIDTHS as JS_WIDTHS  # the widths the page's model accepts


def js_setting(s: Setting) -> dict:
    """The setting as andrea_flow.js names it."""
    if s.width not in JS_WIDTHS:
        raise ValueError(f"the page's model takes widths {JS_WIDTHS}, got {s.width}")
    return {
        "width": s.width,
        "depth": s.depth,
        "norm": s.norm,
        "residual": s.residual,
        "layerscale": s.layerscale,
        "seed": s.seed,
    }


def _b64(a: torch.Tensor) -> str:
    return base64.b64encode(a.detach().to(torch.float32).contiguous().numpy().tobytes()).decode()


def case(s: Setting) -> dict:
    """One setting, built as ``explorer.measure`` builds it: its weights (base64 float32, torch's
    state_dict names and shapes), its batch, and what ``gradient_flow`` measures on them."""
    torch.manual_seed(s.seed)
    model = Andrea(s.config())
    idx, targets = random_batch(model.config.vocab_size, BATCH, SEQ, seed=s.seed)
    report = gradient_flow(model, idx, targets, weights=False)
    return {
        "setting": js_setting(s),
        "weights": {k: _b64(v) for k, v in model.state_dict().items()},
        "batch": {"idx": idx.reshape(-1).tolist(), "targets": targets.reshape(-1).tolist()},
        "torch": {
            "act": [float(v) for v in report.act_rms],
            "grad": [float(v) for v in report.grad_rms],
            "loss": report.loss,
            "status": report.status,
        },
    }


def relative_difference(js: list, torch_values: list) -> np.ndarray:
    """|js - torch| / |torch| per boundary (0 where both are 0)."""
    a, b = np.asarray(js, dtype=float), np.asarray(torch_values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.abs(a - b) / np.abs(b)
    return np.where((a == 0) & (b == 0), 0.0, d)


def js_model(config) -> dict:
    """An ``AndreaConfig`` as andrea_train.js's ``checkModel`` names it (GPT-2's or Xavier's
    initialisation, the GELU-tanh MLP with biases and LayerScale per channel: the only model the page
    trains)."""
    if config.init not in ("gpt2", "xavier"):
        raise ValueError(f"the page trains models with init gpt2 or xavier only, got {config.init!r}")
    supported = {"activation": "gelu_tanh", "bias": True, "dropout": 0.0, "ln_eps": 1e-5}
    for k, v in supported.items():
        if getattr(config, k) != v:
            raise ValueError(f"the page trains models with {k}={v!r} only, got {getattr(config, k)!r}")
    if config.mlp_dim not in (None, 4 * config.d_model) or config.layerscale_kind != "channel":
        raise ValueError("the page trains the 4x MLP with per-channel LayerScale only")
    if config.norm not in ("pre", "post", "none"):
        raise ValueError(f"the page trains norm pre, post or none, got {config.norm!r}")
    return {
        "vocab": config.vocab_size,
        "context": config.context_length,
        "width": config.d_model,
        "heads": config.n_head,
        "depth": config.n_layer,
        "norm": config.norm,
        "residual": config.residual,
        "layerscale": config.layerscale,
        "init": config.init,
    }


def from_js_model(model: dict):
    """The ``AndreaConfig`` that a page's model (as ``js_model`` names it) trains: the inverse of
    ``js_model``, for torch's side of a comparison or a benchmark."""
    from ..model.config import AndreaConfig

    return AndreaConfig(
        vocab_size=model["vocab"],
        context_length=model["context"],
        d_model=model["width"],
        n_layer=model["depth"],
        n_head=model["heads"],
        norm=model["norm"],
        residual=model["residual"],
        layerscale=model["layerscale"],
        init=model["init"],
    )


def js_train(t) -> dict:
    """A ``TrainConfig`` as andrea_train.js's ``checkTrain`` names it."""
    return {
        "steps": t.steps,
        "batchSize": t.batch_size,
        "seqLen": t.seq_len,
        "lr": t.lr,
        "warmup": t.warmup,
        "minLrRatio": t.min_lr_ratio,
        "weightDecay": t.weight_decay,
        "beta1": t.beta1,
        "beta2": t.beta2,
        "gradClip": t.grad_clip,
    }


def training_case(config, t, tokenizer: str = "bytes") -> dict:
    """A run of ``andrea.training.train.train`` as the page can repeat it: the initial weights and the
    batches of every step (drawn as ``train`` draws them: the model from ``torch.manual_seed(t.seed)``,
    the batches from the generator seeded ``t.seed * 1000``), torch's training loss at every step,
    and AdamW's moments after the last step (from the run's checkpoint), by parameter name."""
    import tempfile

    from ..model.transformer import read_checkpoint
    from ..training.data import load_token_data
    from ..training.train import train

    data = load_token_data(tokenizer)
    torch.manual_seed(t.seed)
    model = Andrea(config)
    gen = torch.Generator().manual_seed(t.seed * 1000)
    batches = []
    for _ in range(t.steps):
        x, y = data.batch("train", t.batch_size, t.seq_len, gen)
        batches.append({"idx": x.reshape(-1).tolist(), "targets": y.reshape(-1).tolist()})
    with tempfile.TemporaryDirectory() as d:
        result = train(config, t, data, device="cpu", out_dir=d, progress=False)
        if result.checkpoint is None or result.diverged:
            raise RuntimeError(f"torch's run did not finish its {t.steps} steps (diverged: {result.diverged})")
        blob = read_checkpoint(result.checkpoint)
    # the optimizer's state is kept by parameter index, matrices first (optimizer.make_optimizer)
    params = dict(model.named_parameters())
    order = [n for n, p in params.items() if p.dim() >= 2] + [n for n, p in params.items() if p.dim() < 2]
    state = blob["extra"]["optimizer"]["state"]
    moments = {part: {n: _b64(state[i][part]) for i, n in enumerate(order)} for part in ("exp_avg", "exp_avg_sq")}
    return {
        "model": js_model(config),
        "train": js_train(t),
        "weights": {k: _b64(v) for k, v in model.state_dict().items()},
        "batches": batches,
        "torch": {"loss": [float(v) for v in result.history["loss"]], **moments},
    }
