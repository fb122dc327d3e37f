"""Statistics of one stored training run, by name: what a grid's declared rule decides on.

A run is a row of ``evidence.store.rows``: its label, its result fields (``loss``, ``steps``,
``final_val_loss``, ``unigram_ce``, ...) and its configs. ``statistic(row, name)`` is a result field
or one of ``STATISTICS`` (how long a run takes to leave the plateau, to reach a level, ...), which
``store.Decision.field`` names; ``first_step_at`` is the chapters' measure of "how long until".
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np


def first_step_at(values: Sequence[Optional[float]], steps: Sequence[int], level: float, window: int = 10):
    """The first step at which the ``window``-step running mean of ``values`` is below ``level``
    (None if never): how long a run takes to get somewhere."""
    v = np.array([np.nan if x is None else x for x in values], dtype=float)
    if len(v) < window:
        return None
    sm = np.convolve(v, np.ones(window) / window, mode="valid")
    below = np.nonzero(sm < level)[0]
    return int(steps[below[0] + window - 1]) if len(below) else None


PLATEAU_GAP = 0.1  # nats below the unigram entropy that a run must reach to have left the plateau


def _escaped(r: dict, level: Optional[float]) -> bool:
    return first_step_at(r["loss"], r["steps"], r["unigram_ce"] - PLATEAU_GAP) is not None


def _steps_to_level(r: dict, level: Optional[float]) -> int:
    if level is None:
        raise ValueError("the statistic 'steps_to_level' needs a level")
    s = first_step_at(r["loss"], r["steps"], level)
    return int(r["train"]["steps"]) + 1 if s is None else s  # not reached: one step past the run


def _reached_level(r: dict, level: Optional[float]) -> bool:
    if level is None:
        raise ValueError("the statistic 'reached_level' needs a level")
    return first_step_at(r["loss"], r["steps"], level) is not None


def _gain_over_unigram(r: dict, level: Optional[float]):
    v = r["final_val_loss"]
    return None if v is None else r["unigram_ce"] - v


def _failed(r: dict, level: Optional[float]) -> bool:
    if level is None:
        raise ValueError("the statistic 'failed' needs a level (nats below the unigram entropy)")
    gain = _gain_over_unigram(r, level)
    return bool(r["diverged"]) or gain is None or gain < level


def _lambda_mean(r: dict, level: Optional[float]):
    last = r["monitor"][-1] if r.get("monitor") else None
    if not last or "lam_attn" not in last:
        raise ValueError("the statistic 'lambda_mean' needs a run recorded with monitor='layerscale'")
    lams = [x for x in last["lam_attn"] + last["lam_mlp"] if x is not None]
    return float(np.mean(lams))


STATISTICS = {
    "escaped": (_escaped, "left the plateau (10-step mean training loss 0.1 nats below the unigram entropy)"),
    "steps_to_level": (_steps_to_level, "steps until the 10-step mean training loss is below the level"),
    "reached_level": (_reached_level, "the 10-step mean training loss went below the level"),
    "gain_over_unigram": (_gain_over_unigram, "unigram entropy minus the final validation loss (nats)"),
    "lambda_mean": (_lambda_mean, "mean |lambda| over all blocks at the end of the run"),
    "failed": (_failed, "diverged, or ended less than the level (nats) below the unigram entropy"),
    "learned": (lambda r, level: not _failed(r, level), "finite, and ended the level (nats) below the unigram entropy"),
}


def statistic(r: dict, name: str, level: Optional[float] = None):
    """Statistic ``name`` of one stored run: a result field (``final_val_loss``, ``diverged``, ...)
    or one of ``STATISTICS``."""
    if name in STATISTICS:
        return STATISTICS[name][0](r, level)
    if name not in r:
        raise ValueError(f"no statistic or result field {name!r}; the statistics are {sorted(STATISTICS)}")
    return r[name]
