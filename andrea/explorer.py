"""The logic behind the gradient-flow explorer, as plain functions the widget and the site share.

A *setting* is one point of the explorer (LayerScale lambda, depth, norm placement, residual
path, width, seed). ``probe(setting)`` builds that fresh model, runs ``gradient_flow`` on a seeded
batch and caches the report; ``grid_rows`` does it over the grid the static site ships.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Optional

import torch

from .config import ANDREA_120M, AndreaConfig
from .model import Andrea
from .probe import GradientReport, gradient_flow, random_batch

# LayerScale lambda choices: off, then quarter decades from 1e-6 to 1 (1e-6, 1.78e-6, 3.16e-6, ...).
LAMBDA_CHOICES: tuple = (None,) + tuple(float(f"{10 ** (-6 + k / 4):.3g}") for k in range(25))
DEPTH_RANGE = (1, 96)
NORM_CHOICES = ("pre", "post", "none")
WIDTH_CHOICES_CPU = (64, 128, 256)
WIDTH_CHOICES_GPU = WIDTH_CHOICES_CPU + (768,)
DEFAULT_WIDTH = 128
HEAD_DIM = 32  # heads = width / 32 (4 heads at width 128, 24 at 768 ... ANDREA's own is 64 per head)

# The grid precomputed for the static site.
GRID_LAMBDAS: tuple = (None, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
GRID_DEPTHS: tuple = (1, 2, 4, 8, 12, 24, 48, 96)
GRID_NORMS: tuple = ("pre", "post")

BATCH, SEQ = 2, 32  # the probe batch: 64 random tokens (x width values per boundary)


@dataclass(frozen=True)
class Setting:
    layerscale: Optional[float] = None
    depth: int = 12
    norm: str = "pre"
    residual: bool = True
    width: int = DEFAULT_WIDTH
    seed: int = 0

    def __post_init__(self):
        lo, hi = DEPTH_RANGE
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or not lo <= self.depth <= hi:
            raise ValueError(f"depth must be an integer from {lo} to {hi}, got {self.depth!r}")
        if self.layerscale is not None:
            v = self.layerscale
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (1e-6 <= v <= 1.0):
                raise ValueError(f"layerscale must be None (off) or a number from 1e-6 to 1, got {v!r}")
        if self.norm not in NORM_CHOICES:
            raise ValueError(f"norm must be one of {NORM_CHOICES}, got {self.norm!r}")
        if not isinstance(self.residual, bool):
            raise ValueError(f"residual must be True or False, got {self.residual!r}")
        if isinstance(self.width, bool) or not isinstance(self.width, int) or self.width < HEAD_DIM or self.width % HEAD_DIM:
            raise ValueError(f"width must be a multiple of {HEAD_DIM} (e.g. {WIDTH_CHOICES_GPU}), got {self.width!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")

    def config(self) -> AndreaConfig:
        return replace(ANDREA_120M, d_model=self.width, n_head=self.width // HEAD_DIM, n_layer=self.depth,
                       norm=self.norm, residual=self.residual, layerscale=self.layerscale, context_length=SEQ)

    def reference(self) -> "Setting":
        """Plain pre-norm, residual on, no LayerScale, same depth/width/seed: drawn faintly for comparison."""
        return replace(self, layerscale=None, norm="pre", residual=True)

    def label(self) -> str:
        lam = "off" if self.layerscale is None else f"{self.layerscale:g}"
        return f"λ={lam}, depth {self.depth}, {self.norm}-norm, residual {'on' if self.residual else 'off'}, width {self.width}"


class ProbeCache:
    """An LRU cache of reports keyed by setting (and device), with hit/miss counters."""

    def __init__(self, maxsize: int = 256):
        self.maxsize = maxsize
        self._d: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key):
        if key in self._d:
            self._d.move_to_end(key)
            self.hits += 1
            return self._d[key]
        return None

    def put(self, key, value):
        self.misses += 1
        self._d[key] = value
        if len(self._d) > self.maxsize:
            self._d.popitem(last=False)


CACHE = ProbeCache()


def probe(setting: Setting, device: str = "cpu", cache: Optional[ProbeCache] = CACHE) -> GradientReport:
    """Build the setting's freshly initialised model (seeded) and measure its gradient flow."""
    key = (setting, str(device))
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit
    torch.manual_seed(setting.seed)
    with torch.device(device):
        model = Andrea(setting.config())
    idx, targets = random_batch(model.config.vocab_size, BATCH, SEQ, seed=setting.seed, device=device)
    report = gradient_flow(model, idx, targets)
    if cache is not None:
        cache.put(key, report)
    return report


def lambda_label(v: Optional[float]) -> str:
    return "off" if v is None else f"{v:g}"


def grid_rows(progress=None) -> list[dict]:
    """Every setting of the static grid, one row per (setting, boundary): tidy data for the chart."""
    rows = []
    settings = [Setting(layerscale=lam, depth=d, norm=n) for n in GRID_NORMS for lam in GRID_LAMBDAS for d in GRID_DEPTHS]
    for i, s in enumerate(settings):
        r = probe(s, cache=None)
        ratio = r.grad_ratio
        for b in range(s.depth + 1):
            g, a = float(r.grad_rms[b]), float(r.act_rms[b])
            rows.append({
                "lam": lambda_label(s.layerscale), "depth": s.depth, "norm": s.norm, "boundary": b,
                "grad": _sig(g) if math.isfinite(g) and g > 0 else None,
                "act": _sig(a) if math.isfinite(a) and a > 0 else None,
                "status": r.status,
                "ratio": _sig(ratio) if math.isfinite(ratio) else None,
            })
        if progress:
            progress(i + 1, len(settings))
    return rows


def _sig(x: float, digits: int = 4) -> float:
    """Round to 4 significant digits: the page stays small and nothing visible changes."""
    return float(f"{x:.{digits}g}")


def summary(report: GradientReport) -> str:
    """The explorer's one-line readout."""
    if report.status == "diverged":
        return "diverged: the forward or backward pass produced inf/NaN"
    if report.status == "vanished":
        return "vanished: no gradient reaches the embeddings (it underflowed to 0)"
    return (f"gradient RMS at the embeddings / at the top of the stack = {report.grad_ratio:.3g}×   "
            f"(loss {report.loss:.3f})")
