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
