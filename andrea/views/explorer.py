"""The logic behind the gradient-flow explorer, as plain functions the widget and the site share.

A *setting* is one point of the explorer (LayerScale lambda, depth, norm placement, residual
path, width, seed). ``probe(setting)`` builds that freshly initialised model, runs
``gradient_flow`` on a seeded batch and caches the report.

Settings of the static grid (and the plain pre-norm reference curve at every depth) are measured
once by ``make experiments`` and shipped with the package in ``andrea/results/explorer.json``, so the
explorer shows them at once, on the site and in a notebook alike; the file is keyed by the hash of
the code that measures them and is refused (and recomputed live) when that code has changed.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import torch

from ..files import atomic_write_text, source_hash
from ..measure.probe import GradientReport, gradient_flow, random_batch
from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea

# LayerScale lambda choices: off, then quarter decades from 1e-6 to 1 (1e-6, 1.78e-6, 3.16e-6, ...).
LAMBDA_CHOICES: tuple = (None,) + tuple(float(f"{10 ** (-6 + k / 4):.3g}") for k in range(25))
DEPTH_RANGE = (1, 96)
SEED_RANGE = (0, 10_000)
NORM_CHOICES = ("pre", "post", "none")
WIDTH_CHOICES_CPU = (64, 128, 256)
WIDTH_CHOICES_GPU = WIDTH_CHOICES_CPU + (768,)
DEFAULT_WIDTH = 128
HEAD_DIM = 32  # heads = width / 32 (4 heads at width 128, 24 at 768 ... ANDREA's own is 64 per head)

# The grid precomputed for the static site (and shipped for the live explorer).
GRID_LAMBDAS: tuple = (None, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
GRID_DEPTHS: tuple = (1, 2, 4, 8, 12, 24, 48, 96)
GRID_NORMS: tuple = ("pre", "post", "none")
GRID_RESIDUALS: tuple = (True, False)

BATCH, SEQ = 2, 32  # the probe batch: 64 random tokens (x width values per boundary)
SHIPPED = "explorer"  # andrea/results/explorer.json


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
        w = self.width
        if isinstance(w, bool) or not isinstance(w, int) or w < HEAD_DIM or w % HEAD_DIM:
            raise ValueError(f"width must be a multiple of {HEAD_DIM} (e.g. {WIDTH_CHOICES_GPU}), got {w!r}")
        lo, hi = SEED_RANGE
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not lo <= self.seed <= hi:
            raise ValueError(f"seed must be an integer from {lo} to {hi}, got {self.seed!r}")

    def config(self) -> AndreaConfig:
        return replace(
            ANDREA_120M,
            d_model=self.width,
            n_head=self.width // HEAD_DIM,
            n_layer=self.depth,
            norm=self.norm,
            residual=self.residual,
            layerscale=self.layerscale,
            context_length=SEQ,
        )

    def reference(self) -> "Setting":
        """Plain pre-norm, residual on, no LayerScale, same depth/width/seed: drawn faintly for comparison."""
        return replace(self, layerscale=None, norm="pre", residual=True)

    def label(self) -> str:
        lam = "off" if self.layerscale is None else f"{self.layerscale:g}"
        return (
            f"λ₀={lam}, depth {self.depth}, {self.norm}-norm, residual {'on' if self.residual else 'off'}, "
            f"width {self.width}, seed {self.seed}"
        )


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


def measure(setting: Setting, device: str = "cpu") -> GradientReport:
    """Build the setting's freshly initialised model (seeded) and measure its gradient flow (no cache)."""
    torch.manual_seed(setting.seed)
    with torch.device(device):
        model = Andrea(setting.config())
    idx, targets = random_batch(model.config.vocab_size, BATCH, SEQ, seed=setting.seed, device=device)
    return gradient_flow(model, idx, targets, weights=False)


def probe(setting: Setting, device: str = "cpu", cache: Optional[ProbeCache] = CACHE) -> GradientReport:
    """The setting's report: from the cache, else from the shipped measurements (CPU), else measured."""
    key = (setting, str(device))
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit
    report = shipped().get(setting) if str(device) == "cpu" else None
    if report is None:
        report = measure(setting, device)
    if cache is not None:
        cache.put(key, report)
    return report


def lambda_label(v: Optional[float]) -> str:
    return "off" if v is None else f"{v:g}"


def grid_settings() -> list[Setting]:
    return [
        Setting(layerscale=lam, depth=d, norm=n, residual=res)
        for res in GRID_RESIDUALS
        for n in GRID_NORMS
        for lam in GRID_LAMBDAS
        for d in GRID_DEPTHS
    ]


def reference_settings() -> list[Setting]:
    return [Setting(depth=d) for d in range(DEPTH_RANGE[0], DEPTH_RANGE[1] + 1)]


# ---------------------------------------------------------------------------------------------
# The shipped measurements (andrea/results/explorer.json)
# ---------------------------------------------------------------------------------------------
def shipped_key() -> str:
    """Hash of the code that measures a setting, and of what is measured."""
    spec = json.dumps(
        {
            "grid": [GRID_LAMBDAS, GRID_DEPTHS, GRID_NORMS, GRID_RESIDUALS],
            "depths": DEPTH_RANGE,
            "w": DEFAULT_WIDTH,
            "batch": [BATCH, SEQ],
            "head": HEAD_DIM,
            "torch": torch.__version__.split("+")[0],
        }
    )
    import hashlib

    code = source_hash(["model.config", "model.layers", "model.transformer", "measure.probe", "views.explorer"])
    return f"{code}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


def _sig(x: float, digits: int = 8):
    return float(f"{x:.{digits}g}") if math.isfinite(x) else None


def _encode(s: Setting, r: GradientReport) -> dict:
    return {
        "lam": lambda_label(s.layerscale),
        "depth": s.depth,
        "norm": s.norm,
        "res": s.residual,
        "act": [_sig(float(v)) for v in r.act_rms],
        "grad": [_sig(float(v)) for v in r.grad_rms],
        "loss": _sig(r.loss),
        "finite": r.finite,
    }


def _decode(row: dict) -> GradientReport:
    nan = float("nan")
    act = np.array([nan if v is None else v for v in row["act"]], dtype=float)
    grad = np.array([nan if v is None else v for v in row["grad"]], dtype=float)
    return GradientReport(
        act_rms=act,
        grad_rms=grad,
        weight_grad_norm={},
        loss=nan if row["loss"] is None else row["loss"],
        finite=bool(row["finite"]),
    )


class Shipped:
    """The shipped reports, looked up by setting. Empty (so everything is measured live) when the
    file is missing or was made by other code; malformed content is reported, never used."""

    def __init__(self, reports: dict, problem: Optional[str] = None):
        self._reports = reports
        self.problem = problem

    def get(self, s: Setting) -> Optional[GradientReport]:
        return self._reports.get(s)

    def __len__(self) -> int:
        return len(self._reports)


_SHIPPED: Optional[Shipped] = None


def _load_shipped() -> Shipped:
    import warnings

    from ..evidence.store import path

    p = path(SHIPPED)
    if not p.is_file():
        return Shipped({}, f"{p} is missing")
    try:
        blob = json.loads(p.read_text())
        if blob.get("key") != shipped_key():
            return Shipped({}, f"{p} was made by other code (run `make experiments`)")
        reports = {}
        for row in blob["settings"] + blob["references"]:
            s = Setting(
                layerscale=None if row["lam"] == "off" else float(row["lam"]),
                depth=row["depth"],
                norm=row["norm"],
                residual=bool(row["res"]),
            )
            r = _decode(row)
            if len(r.act_rms) != s.depth + 1 or len(r.grad_rms) != s.depth + 1:
                raise ValueError(f"{s.label()}: {len(r.act_rms)} boundaries, expected {s.depth + 1}")
            reports[s] = r
        expected = set(grid_settings()) | set(reference_settings())
        if set(reports) != expected:
            raise ValueError(f"it has {len(set(reports) & expected)} of the {len(expected)} settings")
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(f"andrea: ignoring {str(p)!r}: {e}; the explorer measures every setting live", stacklevel=3)
        return Shipped({}, f"{p} is malformed: {e}")
    return Shipped(reports)


def shipped() -> Shipped:
    global _SHIPPED
    if _SHIPPED is None:
        _SHIPPED = _load_shipped()
    return _SHIPPED


def build_shipped(progress=None) -> dict:
    """Measure every grid setting and every depth's reference on the CPU; write the shipped file."""
    global _SHIPPED
    from ..evidence.store import path

    todo = grid_settings() + [s for s in reference_settings() if s not in set(grid_settings())]
    rows = {}
    for i, s in enumerate(todo):
        rows[s] = _encode(s, measure(s, "cpu"))
        if progress:
            progress(i + 1, len(todo))
    blob = {
        "key": shipped_key(),
        "torch": torch.__version__,
        "device": "cpu",
        "width": DEFAULT_WIDTH,
        "seed": 0,
        "batch": [BATCH, SEQ],
        "settings": [rows[s] for s in grid_settings()],
        "references": [rows[s] for s in reference_settings()],
    }
    atomic_write_text(path(SHIPPED), json.dumps(blob, separators=(",", ":")) + "\n")
    _SHIPPED = None
    return blob


def setting_rows(s: Setting, r: GradientReport) -> list[dict]:
    """One setting's measurement as the chart's tidy data: one row per block boundary."""
    ratio = r.grad_ratio
    rows = []
    for b in range(s.depth + 1):
        g, a = float(r.grad_rms[b]), float(r.act_rms[b])
        rows.append(
            {
                "lam": lambda_label(s.layerscale),
                "depth": s.depth,
                "norm": s.norm,
                "res": "on" if s.residual else "off",
                "width": s.width,
                "boundary": b,
                "grad": _sig(g, 4) if math.isfinite(g) and g > 0 else None,
                "act": _sig(a, 4) if math.isfinite(a) and a > 0 else None,
                "status": r.status,
                "ratio": _sig(ratio, 4) if math.isfinite(ratio) else None,
            }
        )
    return rows


def grid_rows() -> list[dict]:
    """Every setting of the static grid, one row per (setting, boundary): tidy data for the chart."""
    return [row for s in grid_settings() for row in setting_rows(s, probe(s, cache=None))]


def summary(report: GradientReport) -> str:
    """The explorer's one-line readout."""
    if report.status == "diverged":
        return "diverged: the forward or backward pass produced inf/NaN"
    if report.status == "vanished":
        return "vanished: no gradient reaches the embeddings (it underflowed to 0)"
    return (
        f"gradient RMS at the embeddings / at the top of the stack = {report.grad_ratio:.3g}×   "
        f"(loss {report.loss:.3f})"
    )
