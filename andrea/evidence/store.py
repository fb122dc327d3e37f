"""The results store: training runs too long for the book's build, run once and committed.

A *grid* (``Grid``, declared with its runs and its rule in ``declare``) is a named list of training runs
(``Cell``s): a model config, a training config, the corpus, and a label that says how a chapter groups the
run (``{"norm": "post", "lr": 1e-3, "seed": 0}``). ``andrea/evidence/grids/`` defines the book's grids; this module runs
them and keeps their results in ``andrea/results/<name>.json``, with what a reader needs to trust
and reproduce them: every cell's full configuration and seed, the torch version, the device, the
time, and a key made of

* the hash of the code that trains a cell (``CODE_MODULES``, by syntax tree: comments and
  formatting do not count), and
* the hash of the grid's own specification.

``load`` refuses a file whose key no longer matches the code (run ``make experiments``), and a file that
is incomplete, malformed or not whole (``seal``: its digest, its copies' stamps, its values' types),
naming the file, the run and the problem. ``rerun.py`` re-runs
stored runs from scratch, natively and on another CPU's kernels, and compares them with the stored
numbers. Runs are seeded and use one CPU thread each, so a result does not depend on the machine's
core count; ``run`` trains a grid's cells two at a time in worker processes, caching each finished
cell, so an interrupted ``make experiments`` continues where it stopped.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import re
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from ..files import atomic_write_text, cache_dir, read_cached, write_cached
from ..measure.runstats import statistic  # noqa: F401  (chapter 7 reads store.statistic)
from . import emulate, seal
from .declare import (  # noqa: F401  (what a grid declares, read as store.Grid, store.CODE_MODULES, ...)
    BEFORE,
    CHANGED,
    CODE_MODULES,
    ROLES,
    RULE_MODULES,
    TESTS,
    Cell,
    Decision,
    Grid,
    code_hash,
    rule_status,
)
from .emulate import EMULATED  # noqa: F401  (how another CPU is emulated)
from .machine import cpu_identity, die_with_parent, workers  # noqa: F401  (re-exported)
from .runs import run_cell
from .seal import RESULT_FIELDS, StoreError, digest  # noqa: F401  (a results file's integrity)

RESULTS = Path(__file__).resolve().parent.parent / "results"  # andrea/results
# Reproduction: a cell re-run from scratch must match the stored one within these (absolute, nats).
# Runs are bit-identical on one kind of CPU; the first losses' tolerance allows for another CPU's kernels
# (measured under EMULATED: first 20 losses up to 0.002 apart in the most chaotic deciding run, no
# normalisation at lr 3e-2), so that `make test` also passes on a machine of another kind. The final
# loss's holds on the stored run's kind of CPU; on another, what the stored pair of the run's arm shows
# (rerun.final_tolerance).
TOLERANCE = {"early_loss": 0.005, "final_val_loss": 0.015}
EARLY_STEPS = 20


def path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def _cell_cache(cell: Cell) -> Path:
    return cache_dir() / "cells" / f"{cell.key()}-{code_hash()}.json"


def _cached_run(cell: Cell) -> Optional[dict]:
    """The cached run of ``cell``, or None; a cached run stopped part-way (``seal.short_run``, cached by
    code older than that check) is no run: it is trained again."""
    cached = read_cached(_cell_cache(cell), code_hash())
    row = None if cached is None else json.loads(cached)
    return None if row is None or seal.short_run(row, cell.steps()) else row


def _run_cached(cell: Cell, rule: Optional[str] = None) -> dict:
    """Worker entry point: a cached cell is read back, a new one trained (one thread) and cached, with
    the kind of CPU that trained it and the rule hash it was trained under (``rule_status``)."""
    hit = _cached_run(cell)
    if hit is not None:
        return hit
    row = {**run_cell(cell, threads=1), "cpu": cpu_identity(), "rule": rule}
    seal.whole(row, cell.steps(), f"the run of {cell.label}")  # a run stopped by a signal is not cached
    write_cached(_cell_cache(cell), json.dumps(row).encode(), code_hash())
    return row


def run(grid: Grid, n_workers: Optional[int] = None, emulated: bool = True, cached_only: bool = False) -> dict:
    """Train every cell of ``grid`` (runs already stored or cached by the same code are reused), then,
    with ``emulated``, the emulated second CPU's copy of every run the grid decides on
    (``Grid.decision_cells``), and write ``andrea/results/<name>.json``. ``cached_only``: train nothing
    new; store the runs that are stored or cached (a grid whose runs are not all there is refused)."""
    import torch

    from ..progress import bar

    t0 = time.perf_counter()
    rows: list = [None] * len(grid.cells)
    n_workers = n_workers or workers()
    rule = grid.rule_hash()
    pb = bar(len(grid.cells), f"{grid.name}: {len(grid.cells)} runs, {n_workers} at a time", unit="run")
    ctx = multiprocessing.get_context("spawn")  # safe inside Jupyter kernels and threads
    from ..training.data import load_token_data

    for tok in sorted({c.tokenizer for c in grid.cells}):
        load_token_data(tok)  # build the shared caches once, before the workers start
    stored = _stored_runs(grid)  # runs already in the stored file, by the same code: not trained again
    for i, c in enumerate(grid.cells):
        if c.key() in stored:
            rows[i] = stored[c.key()]["result"]
            pb.update(1)
    todo = [i for i, r in enumerate(rows) if r is None]
    if cached_only:
        rows = [r if r is not None else _cached_run(grid.cells[i]) for i, r in enumerate(rows)]
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            raise StoreError(f"grid {grid.name!r}: {len(todo)} runs are neither stored nor cached")
    if todo:
        with ProcessPoolExecutor(
            max_workers=n_workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
        ) as pool:
            futures = {pool.submit(_run_cached, grid.cells[i], rule): i for i in todo}
            for fut in as_completed(futures):
                rows[futures[fut]] = fut.result()
                pb.update(1)
    pb.close()
    # A run re-trained (by new code, or a new torch) keeps the rule stamp its seed first got: its outcome
    # was seen then, whatever rule is in force now (rule_status).
    prior = _prior_stamps(grid)
    for i in todo:
        if grid.cells[i].key() in prior:
            rows[i] = {**rows[i], "rule": prior[grid.cells[i].key()]}
    trained = bool(todo)
    emu: dict = {
        i: stored[c.key()]["emulated"] for i, c in enumerate(grid.cells) if "emulated" in stored.get(c.key(), {})
    }
    # a file rewritten without a new run keeps when and where its runs were made; a first file made only of
    # cached runs (trained by an earlier process) is dated and placed now
    before = _header(grid)

    def write(trained: bool) -> dict:
        # an emulated copy shows the outcome of a seed already seen in its native run: it carries that
        # run's stamp
        stamped = {i: {**row, "rule": rows[i].get("rule")} for i, row in emu.items()}
        blob = {
            "grid": grid.name,
            "title": grid.title,
            "prediction": grid.prediction,
            "key": grid.key(),
            "rule_key": rule,  # the rule when this file was written; each run records its own (rule_status)
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": "cpu",
            "threads_per_run": 1,
            "machine": before["machine"]
            if not trained and before.get("machine")
            else f"{platform.machine()} {platform.system()}",
            "emulation": emulate.EMULATED,
            "created": before["created"]
            if not trained and before.get("created")
            else datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            # the last invocation that trained something (stored runs are reused)
            "seconds": before["seconds"]
            if not trained and before.get("seconds") is not None
            else round(time.perf_counter() - t0, 1),
            "compute_seconds": round(sum(r.get("seconds", 0.0) for r in rows), 1),  # every run, one core each
            "emulated_seconds": round(sum(r.get("seconds", 0.0) for r in stamped.values()), 1),
            "rule": grid.rule,
            "decisions": [d.spec() for d in grid.decisions],
            "checks": [grid.index(d.rerun_label()) for d in grid.decisions if d.role == "decides"],
            "cells": [
                {**c.spec(), "result": r, **({"emulated": stamped[i]} if i in stamped else {})}
                for i, (c, r) in enumerate(zip(grid.cells, rows))
            ],
        }
        seal.seal(blob, [c.key() for c in grid.cells])  # each copy stamped, the whole file under the digest
        atomic_write_text(path(grid.name), json.dumps(blob, indent=1) + "\n")
        return blob

    if emulated:
        need = [i for i in grid.decision_cells() if i not in emu]
        if cached_only:
            for i in need:
                hit = emulate.cached(grid.cells[i], code_hash())
                if hit is not None:
                    emu[i] = hit
            need = []
        if trained:
            write(True)  # the native runs are kept before the (long) emulated copies start
        pb = bar(len(need), f"{grid.name}: {len(need)} runs as another CPU trains them", unit="run")
        cells = [grid.cells[i] for i in need]

        def copied(j: int, row: dict) -> None:
            # each copy is stored as it finishes: a stopped session keeps it in the results file, which
            # git keeps (the verdicts stay this machine's alone until the last copy: emulated_missing)
            emu[need[j]] = row
            write(True)
            pb.update(1)

        emulate.train(cells, code_hash(), n_workers, rule, copied)
        pb.close()
        trained = trained or bool(need)
    return write(trained)


def _header(grid: Grid) -> dict:
    """The stored file's header (everything but its runs), or {} if there is none."""
    try:
        blob = json.loads(path(grid.name).read_text())
        return {k: v for k, v in blob.items() if k != "cells"} if isinstance(blob, dict) else {}
    except (OSError, ValueError):
        return {}


def _prior_stamps(grid: Grid) -> dict:
    """{cell key: the rule stamp of its run} in ``grid``'s stored file, whatever code made it (None: a run
    stored before runs recorded their rule); {} without a readable file."""
    try:
        blob = json.loads(path(grid.name).read_text())
        out = {}
        for c in blob["cells"]:
            spec = {k: c.get(k) for k in ("label", "model", "train", "tokenizer", "monitor")}
            out[Cell(**spec).key()] = c.get("result", {}).get("rule")
        return out
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _stored_runs(grid: Grid) -> dict:
    """{cell key: {"result": ..., "emulated": ... (if stored)}} of the runs in ``grid``'s stored file
    that the current code made (same code hash and torch), whatever the grid's rule or its other runs:
    a grid that gains seeds or a changed rule (a changed emulation included: each copy records the rule it
    was made under, ``rule_status``) re-runs only what is new. Nothing if the file is missing or unreadable."""
    try:
        blob = json.loads(path(grid.name).read_text())
        if not str(blob.get("key", "")).startswith(code_hash() + "-"):
            return {}
        out = {}
        for c in blob["cells"]:
            spec = {k: c.get(k) for k in ("label", "model", "train", "tokenizer", "monitor")}
            cell = Cell(**spec)
            whole_run = lambda r: all(k in r for k in RESULT_FIELDS) and not seal.short_run(r, cell.steps())  # noqa: E731
            if whole_run(c.get("result", {})):
                out[cell.key()] = {"result": c["result"]}
                if whole_run(c.get("emulated", {})):
                    out[cell.key()]["emulated"] = c["emulated"]
        return out
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _without_torch(key) -> str:
    return re.sub(r"-torch[^-]*-", "-", str(key))


def load(grid: Grid, check_key: bool = True, same_torch: bool = False) -> dict:
    """The stored file of ``grid``, validated (see the module docstring); StoreError if unusable.

    Results made by the same code under another torch version (a reader on Colab, whose torch is
    not the book's pinned one) are used, with a warning saying which torch measured them; with
    ``same_torch`` (the tests) they are refused like results of other code."""
    p = path(grid.name)
    if not p.is_file():
        raise StoreError(
            f"no stored results for {grid.name!r} at {str(p)!r}: run `make experiments` "
            f"(or andrea.evidence.evaluation.run({grid.name!r}))"
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
        for part in ("result", "emulated"):
            res = blob["cells"][i].get(part)
            if part == "emulated" and res is None:
                continue  # not every run has an emulated copy (emulated_missing says which should)
            missing = [k for k in RESULT_FIELDS if not isinstance(res, dict) or k not in res]
            if missing:
                what = "" if part == "result" else "'s emulated copy"
                raise StoreError(f"{str(p)!r}: run {i} ({b['label']}){what} lacks {missing}: run `make experiments`")
    problem = seal.values_problem(repr(str(p)), blob)  # named even where the digest was recomputed
    if problem:
        raise StoreError(problem)
    if blob.get("digest") != digest(blob):
        raise StoreError(
            f"{str(p)!r}: its contents do not match the digest written with them (edited by hand, or damaged): "
            "restore it from git (git checkout -- andrea/results) or run `make experiments`"
        )
    keys = [c.key() for c in grid.cells]
    checks = [grid.index(d.rerun_label()) for d in grid.decisions if d.role == "decides"]
    problem = (
        seal.copy_problem(repr(str(p)), blob, keys)
        or seal.duplicate_problem(repr(str(p)), blob)
        or seal.header_problem(repr(str(p)), blob, checks)
    )
    if problem:
        raise StoreError(problem)
    if check_key and blob.get("key") != grid.key():
        if not same_torch and _without_torch(blob.get("key")) == _without_torch(grid.key()):
            import torch

            warnings.warn(
                f"andrea: the stored results {grid.name!r} were measured with torch {blob.get('torch')}; this is "
                f"torch {torch.__version__}: they are shown as measured (make experiments would re-run them here)",
                stacklevel=2,
            )
            return blob
        raise StoreError(
            f"{str(p)!r} was made by other code (stored key {blob.get('key')}, current {grid.key()}): "
            "the model or training code changed since; run `make experiments`"
        )
    return blob


MACHINES = ("native", "emulated")


def rows(blob: dict, machine: str = "native") -> list[dict]:
    """Tidy rows: each run's label and results in one dict, plus its configs under model/train.

    ``machine``: "native" (the runs as stored), or "emulated": the runs the grid decides on as the
    emulated second CPU trained them (``emulate``), the others as stored (no verdict reads them)."""
    if machine not in MACHINES:
        raise ValueError(f"machine must be one of {MACHINES}, got {machine!r}")
    out = []
    for c in blob["cells"]:
        res = c["emulated"] if machine == "emulated" and "emulated" in c else c["result"]
        out.append({**c["label"], **res, "model": c["model"], "train": c["train"]})
    return out


def emulated_missing(grid: Grid, blob: dict) -> list[int]:
    """The runs the grid decides on that have no emulated copy stored yet (``run`` trains them)."""
    return [i for i in grid.decision_cells() if "emulated" not in blob["cells"][i]]


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


def paired(rs: Sequence[dict], field: str, a: dict, b: dict) -> list:
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
