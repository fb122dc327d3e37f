"""The results store: training runs too long for the book's build, run once and committed.

A *grid* (``Grid``) is a named list of training runs (``Cell``s): a model config, a training
config, the corpus, and a label that says how a chapter groups the run (``{"norm": "post",
"lr": 1e-3, "seed": 0}``). ``andrea/experiments.py`` defines the book's grids; this module runs
them and keeps their results in ``andrea/results/<name>.json``, with what a reader needs to trust
and reproduce them: every cell's full configuration and seed, the torch version, the device, the
time, and a key made of

* the hash of the code that trains a cell (``CODE_MODULES``, by syntax tree: comments and
  formatting do not count), and
* the hash of the grid's own specification.

``results(name)`` refuses a file whose key no longer matches the code (run ``make experiments``),
and a file that is incomplete or malformed, naming the file and the problem. ``reproduce(name)``
re-runs one cell from scratch and compares it with the stored numbers (``make test`` does this for
every grid). Runs are seeded and use one CPU thread each, so a result does not depend on the
machine's core count; ``run`` trains a grid's cells two at a time in worker processes, caching
each finished cell, so an interrupted ``make experiments`` continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from .files import atomic_write_text, cache_dir, read_cached, source_hash, write_cached
from .runs import run_cell

RESULTS = Path(__file__).resolve().parent / "results"
# The modules whose code decides a training cell's numbers (the key changes when any of them does).
CODE_MODULES = ("config", "layers", "model", "train", "data", "probe", "runs")
# Reproduction: a cell re-run from scratch must match the stored one within these (absolute, nats).
# Runs are bit-identical on one machine; these allow for another CPU's floating-point kernels.
TOLERANCE = {"early_loss": 1e-4, "final_val_loss": 0.01}
EARLY_STEPS = 20
RESULT_FIELDS = (
    "steps",
    "loss",
    "grad_norm",
    "val_step",
    "val_loss",
    "diverged",
    "diverged_at",
    "final_val_loss",
    "final_train_loss",
    "unigram_ce",
    "kl_unigram",
    "monitor",
)


class StoreError(ValueError):
    """A results file that cannot be used: missing, malformed, incomplete or made by other code."""


@dataclass(frozen=True)
class Cell:
    label: dict  # how a chapter groups the run, e.g. {"norm": "post", "lr": 0.001, "seed": 0}
    model: dict  # AndreaConfig fields
    train: dict  # TrainConfig fields
    tokenizer: str = "bytes"
    monitor: Optional[str] = None  # a name in MONITORS, recorded at every validation

    def spec(self) -> dict:
        return {
            "label": self.label,
            "model": self.model,
            "train": self.train,
            "tokenizer": self.tokenizer,
            "monitor": self.monitor,
        }

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Grid:
    name: str  # the file name under andrea/results
    title: str  # one line for a reader
    prediction: str  # what the claim predicts, stated before any run
    cells: tuple = field(default_factory=tuple)
    check: int = 0  # the cell that `make test` re-runs from scratch

    def spec_hash(self) -> str:
        blob = json.dumps([c.spec() for c in self.cells], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def key(self) -> str:
        return f"{code_hash()}-{self.spec_hash()}"


def code_hash() -> str:
    import torch

    return f"{source_hash(CODE_MODULES)}-torch{torch.__version__.split('+')[0]}"


def path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def _cell_cache(cell: Cell) -> Path:
    return cache_dir() / "cells" / f"{cell.key()}-{code_hash()}.json"


def _run_cached(cell: Cell) -> dict:
    """Worker entry point: a cached cell is read back, a new one trained (one thread) and cached."""
    p = _cell_cache(cell)
    cached = read_cached(p, code_hash())
    if cached is not None:
        return json.loads(cached)
    row = run_cell(cell, threads=1)
    write_cached(p, json.dumps(row).encode(), code_hash())
    return row


# ---------------------------------------------------------------------------------------------
# Grids: run, load, check
# ---------------------------------------------------------------------------------------------
def workers() -> int:
    n = os.environ.get("ANDREA_WORKERS")
    if n:
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"ANDREA_WORKERS must be a positive integer, got {n!r}")
        return int(n)
    return max(1, min(2, os.cpu_count() or 1))


def run(grid: Grid, n_workers: Optional[int] = None) -> dict:
    """Train every cell of ``grid`` (cached cells are reused) and write ``andrea/results/<name>.json``."""
    import torch

    from .progress import bar

    t0 = time.perf_counter()
    rows: list = [None] * len(grid.cells)
    n_workers = n_workers or workers()
    pb = bar(len(grid.cells), f"{grid.name}: {len(grid.cells)} runs, {n_workers} at a time", unit="run")
    ctx = multiprocessing.get_context("spawn")  # safe inside Jupyter kernels and threads
    from .data import load_token_data

    for tok in sorted({c.tokenizer for c in grid.cells}):
        load_token_data(tok)  # build the shared caches once, before the workers start
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx) as pool:
        futures = {pool.submit(_run_cached, c): i for i, c in enumerate(grid.cells)}
        for fut in as_completed(futures):
            rows[futures[fut]] = fut.result()
            pb.update(1)
    pb.close()
    blob = {
        "grid": grid.name,
        "title": grid.title,
        "prediction": grid.prediction,
        "key": grid.key(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": "cpu",
        "threads_per_run": 1,
        "machine": f"{platform.machine()} {platform.system()}",
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "seconds": round(time.perf_counter() - t0, 1),
        "check": grid.check,
        "cells": [{**c.spec(), "result": r} for c, r in zip(grid.cells, rows)],
    }
    atomic_write_text(path(grid.name), json.dumps(blob, indent=1) + "\n")
    return blob


def load(grid: Grid, check_key: bool = True) -> dict:
    """The stored file of ``grid``, validated (see the module docstring); StoreError if unusable."""
    p = path(grid.name)
    if not p.is_file():
        raise StoreError(
            f"no stored results for {grid.name!r} at {str(p)!r}: run `make experiments` "
            f"(or andrea.experiments.run({grid.name!r}))"
        )
    try:
        blob = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise StoreError(
            f"{str(p)!r} is not readable JSON ({type(e).__name__}): restore it from git or run `make experiments`"
        ) from None
    if not isinstance(blob, dict) or blob.get("grid") != grid.name or not isinstance(blob.get("cells"), list):
        raise StoreError(f"{str(p)!r} is not the results file of grid {grid.name!r}")
    specs = [c.spec() for c in grid.cells]
    stored = [
        {k: c.get(k) for k in ("label", "model", "train", "tokenizer", "monitor")} if isinstance(c, dict) else None
        for c in blob["cells"]
    ]
    if len(stored) != len(specs):
        raise StoreError(
            f"{str(p)!r} has {len(stored)} runs; grid {grid.name!r} has {len(specs)}: run `make experiments`"
        )
    for i, (a, b) in enumerate(zip(stored, specs)):
        if a != b:
            raise StoreError(f"{str(p)!r}: run {i} is not the grid's run {i} ({b['label']}): run `make experiments`")
        res = blob["cells"][i].get("result")
        missing = [k for k in RESULT_FIELDS if not isinstance(res, dict) or k not in res]
        if missing:
            raise StoreError(f"{str(p)!r}: run {i} ({b['label']}) lacks {missing}: run `make experiments`")
    if check_key and blob.get("key") != grid.key():
        raise StoreError(
            f"{str(p)!r} was made by other code (stored key {blob.get('key')}, current {grid.key()}): "
            "the model or training code changed since; run `make experiments`"
        )
    return blob


def rows(blob: dict) -> list[dict]:
    """Tidy rows: each run's label and results in one dict, plus its configs under model/train."""
    return [{**c["label"], **c["result"], "model": c["model"], "train": c["train"]} for c in blob["cells"]]


def reproduce(grid: Grid) -> dict:
    """Re-run the grid's check cell from scratch; compare with the stored result.

    Returns {"ok": bool, "label": ..., "early_loss_diff": ..., "final_val_loss_diff": ..., "problems": [...]}.
    """
    blob = load(grid, check_key=False)
    i = blob.get("check", grid.check)
    stored = blob["cells"][i]["result"]
    fresh = run_cell(grid.cells[i], threads=1)
    problems = []
    if bool(stored["diverged"]) != bool(fresh["diverged"]):
        problems.append(f"diverged: stored {stored['diverged']}, now {fresh['diverged']}")
    a, b = stored["loss"][:EARLY_STEPS], fresh["loss"][:EARLY_STEPS]
    early = max((abs(x - y) for x, y in zip(a, b) if x is not None and y is not None), default=0.0)
    if len(a) != len(b) or early > TOLERANCE["early_loss"]:
        problems.append(f"first {EARLY_STEPS} losses differ by up to {early:.2g} (tolerance {TOLERANCE['early_loss']})")
    fv = None
    if stored["final_val_loss"] is not None and fresh["final_val_loss"] is not None:
        fv = abs(stored["final_val_loss"] - fresh["final_val_loss"])
        if fv > TOLERANCE["final_val_loss"]:
            problems.append(
                f"final validation loss {fresh['final_val_loss']} vs stored {stored['final_val_loss']} "
                f"(tolerance {TOLERANCE['final_val_loss']})"
            )
    return {
        "ok": not problems,
        "label": grid.cells[i].label,
        "early_loss_diff": early,
        "final_val_loss_diff": fv,
        "problems": problems,
        "seconds": fresh["seconds"],
    }


def describe(blob: dict) -> str:
    """One provenance line for a figure or table built from a results file."""
    seeds = sorted({c["train"]["seed"] for c in blob["cells"]})
    return (
        f"stored results '{blob['grid']}' ({len(blob['cells'])} runs, seeds {seeds[0]}–{seeds[-1]}), "
        f"torch {blob['torch'].split('+')[0]}, {blob['device']}, {blob['created']}"
    )


def pick(rs: Sequence[dict], **match) -> list[dict]:
    """The rows whose labels match every ``key=value`` given."""
    return [r for r in rs if all(r.get(k) == v for k, v in match.items())]


def values(rs: Sequence[dict], field: str, **match) -> list:
    """``field`` of the matching rows, ordered by seed (None where a run has no value: it diverged)."""
    return [r[field] for r in sorted(pick(rs, **match), key=lambda r: r["seed"])]


def paired(rs: Sequence[dict], field: str, a: dict, b: dict) -> list[float]:
    """Per-seed differences ``field``(b) - ``field``(a) between two arms that share their seeds.

    A seed where either run has no value (it diverged) is an error: decide those runs separately."""
    ra = {r["seed"]: r[field] for r in pick(rs, **a)}
    rb = {r["seed"]: r[field] for r in pick(rs, **b)}
    if set(ra) != set(rb):
        raise ValueError(f"the arms {a} and {b} do not share their seeds: {sorted(ra)} vs {sorted(rb)}")
    missing = [s for s in ra if ra[s] is None or rb[s] is None]
    if missing:
        raise ValueError(f"seeds {missing} have no {field} in {a} or {b} (a diverged run)")
    return [rb[s] - ra[s] for s in sorted(ra)]
