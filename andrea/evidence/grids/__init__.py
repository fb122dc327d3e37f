"""The training grids behind the book's verdicts: one named grid per claim, one module per chapter.

Each grid states its prediction before any run, puts the claim in the regime where it is supposed
to bite, keeps a control where it is not, switches the default confounds off in an arm of its own,
and repeats every arm over several seeds (a seed fixes both the initial weights and the batches,
so two arms with the same seed are paired). ``evidence.store`` runs them and keeps their results in
``andrea/results``; ``evidence.evaluation`` reads them back and applies each grid's declared rule.
``base`` holds what the grids share (the small model, its training, the seeds).
"""

from __future__ import annotations

from ..store import Grid
from .appendix import app_layerscale_kind, app_rezero
from .ch1 import ch1_residual
from .ch2 import ch2_final_ln, ch2_held_lr, ch2_norm_lr, ch2_source_arm
from .ch3 import ch3_panel, ch3_warmup, ch3_warmup_round2, ch3_warmup_round3
from .ch5 import ch5_activation, ch5_activation_round2, ch5_activation_round3
from .ch7 import (
    ch7_deep_80,
    ch7_deep_80_round2,
    ch7_layerscale,
    ch7_layerscale_round2,
    ch7_layerscale_round3,
    ch7_panel,
    ch7_panel_round2,
)

GRIDS = {
    g.__name__: g
    for g in (
        ch1_residual,
        ch2_norm_lr,
        ch2_final_ln,
        ch2_held_lr,
        ch2_source_arm,
        ch3_warmup,
        ch3_warmup_round2,
        ch3_warmup_round3,
        ch3_panel,
        ch5_activation,
        ch5_activation_round2,
        ch5_activation_round3,
        ch7_layerscale,
        ch7_layerscale_round2,
        ch7_layerscale_round3,
        ch7_deep_80,
        ch7_deep_80_round2,
        ch7_panel,
        ch7_panel_round2,
        app_rezero,
        app_layerscale_kind,
    )
}


# Grids whose rule is written and committed before any of their runs: `python -m andrea.experiments
# <name>` (or `make experiments`) runs them, and once their results are stored they move to GRIDS (a
# test keeps the two apart), so that git's history shows each rule before its results.
DECLARED: dict = {}


def grid(name: str) -> Grid:
    if name in DECLARED:
        return DECLARED[name]()
    if name not in GRIDS:
        raise ValueError(f"no experiment grid named {name!r}; the grids are {sorted(GRIDS) + sorted(DECLARED)}")
    return GRIDS[name]()
