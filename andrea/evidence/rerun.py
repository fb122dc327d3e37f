"""Re-running stored runs from scratch: does today's code, on this machine and on another CPU, give
the stored numbers?

``reproduce_first_steps(grid)`` re-runs the first ``EARLY_STEPS`` steps of every deciding run of a grid
(the run of each arm that decides a verdict: ``deciding_cells``), natively and under torch's portable
kernels (``emulate.EMULATED``, another CPU); ``reproduce(grid)`` re-runs them in full, both ways at once,
and compares each with its stored twin (the native run, and the emulated copy the verdicts are also
decided on): on the kind of CPU that trained a stored run it must match it (``store.TOLERANCE``), on
another kind it is held to what the stored pairs of its arm show a change of CPU does
(``final_tolerance``), and ``margin`` says how far each verdict stands from flipping. ``full_sample``
draws, from the commit's hash, the runs that one ``make test`` re-runs in full;
``python -m andrea.experiments --reproduce`` re-runs them all.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from .emulate import EMULATED
from .emulate import finish as finish_emulated
from .emulate import start as start_emulated
from .runs import run_cell
from .store import EARLY_STEPS, TOLERANCE, Cell, Decision, Grid, cpu_identity, load, pick, rows


class _Enough(Exception):
    """Raised by a prefix re-run's callback once it has the steps it needs."""


def run_prefix(cell: Cell, steps: int = EARLY_STEPS, threads: int = 1) -> dict:
    """Re-run the first ``steps`` training steps of ``cell`` from scratch, exactly as ``run_cell``
    starts it (same data, seed, schedule and monitor), and stop there: {"loss": [...] (rounded as
    stored), "diverged": bool}. A few seconds where the whole run takes minutes."""
    import torch

    from ..model.config import AndreaConfig
    from ..training.data import load_token_data
    from ..training.train import TrainConfig, train
    from .runs import _make_stream_monitor, _monitor_layerscale, _sig

    torch.set_num_threads(threads)
    data = load_token_data(cell.tokenizer)
    model_cfg, train_cfg = AndreaConfig(**cell.model), TrainConfig(**cell.train)
    monitor = {"layerscale": _monitor_layerscale, None: None}.get(cell.monitor)
    if cell.monitor == "stream":
        monitor = _make_stream_monitor(data, model_cfg)
    losses: list[float] = []

    def enough(step: int, loss: float) -> None:
        losses.append(loss)
        if len(losses) >= steps:
            raise _Enough

    diverged = False
    try:
        diverged = train(
            model_cfg, train_cfg, data, device="cpu", progress=False, callback=enough, monitor=monitor
        ).diverged
    except _Enough:
        pass
    return {"loss": _sig(losses), "diverged": diverged}


def run_prefixes_emulated(cells: Sequence[Cell], steps: int = EARLY_STEPS) -> list[dict]:
    """``run_prefix`` of each cell in one child process on torch's portable kernels (``EMULATED``)."""
    code = (
        "import json, sys; from andrea.evidence import rerun, store; specs = json.loads(sys.stdin.read()); "
        f"print(json.dumps([rerun.run_prefix(store.Cell(**s), {steps}) for s in specs]))"
    )
    env = dict(os.environ, **EMULATED)
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([c.spec() for c in cells]),
        env=env,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"the emulated first steps failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def deciding_cells(grid: Grid) -> list[tuple[Decision, int]]:
    """(decision, cell index) of the run that ``reproduce`` re-runs for each deciding arm."""
    return [(d, grid.index(d.rerun_label())) for d in grid.decisions if d.role == "decides"]


def reproduce_first_steps(grid: Grid, emulate: bool = True, steps: int = EARLY_STEPS) -> dict:
    """The cheap half of ``reproduce``, for every deciding arm: its first ``steps`` losses re-run from
    scratch natively (and, with ``emulate``, on portable kernels) must match the stored ones within
    ``TOLERANCE["early_loss"]``. It catches results that today's code does not start the same way
    (another initialisation, batch, schedule or optimiser) in seconds per run; the full runs are
    re-run for a sample (``full_sample``). Returns {"ok", "problems", "cells": [{label, native,
    emulated}]} (the largest difference of the first losses, per kernel)."""
    blob = load(grid, check_key=False)
    pairs = deciding_cells(grid)
    problems: list[str] = [] if pairs else [f"grid {grid.name!r} declares no deciding arm to re-run"]
    cells = [grid.cells[i] for _, i in pairs]
    native = [run_prefix(c, steps) for c in cells]
    emulated = run_prefixes_emulated(cells, steps) if emulate and cells else [None] * len(cells)
    out = []
    for (dec, i), nat, emu in zip(pairs, native, emulated):
        stored = blob["cells"][i]["result"]
        row = {"what": dec.what, "label": grid.cells[i].label}
        for kernel, fresh in (("native", nat), ("emulated", emu)):
            if fresh is None:
                continue
            want = stored["loss"][:steps]
            got = fresh["loss"][: len(want)]
            diff = max((abs(x - y) for x, y in zip(want, got) if x is not None and y is not None), default=0.0)
            row[kernel] = diff
            early_end = bool(stored["diverged"]) and (stored.get("diverged_at") or steps + 1) <= steps
            if bool(fresh["diverged"]) != early_end or (not early_end and len(got) != len(want)):
                problems.append(
                    f"{grid.cells[i].label} ({kernel}): {len(got)} of the first {len(want)} steps re-ran "
                    f"(diverged: {fresh['diverged']})"
                )
            elif diff > TOLERANCE["early_loss"]:
                problems.append(
                    f"{grid.cells[i].label} ({kernel}): the first {len(want)} losses differ from the stored ones "
                    f"by up to {diff:.2g} (tolerance {TOLERANCE['early_loss']})"
                )
        out.append(row)
    return {"ok": not problems, "problems": problems, "cells": out}


# How much of the full re-runs one commit's ``make test`` does: the stored seconds of native training
# it re-runs, and the longest run it takes. Each run is re-run natively and on portable kernels at once
# (one core each); the portable kernels take about 2.4 times the stored seconds (measured: a run stored
# at 86 s took 300 s re-run both ways one after the other), so 35 s stored is about 85 s of test. Longer
# runs are re-run in full by ``python -m andrea.experiments --reproduce``; every run's first steps are
# re-run by every ``make test`` (``reproduce_first_steps``).
FULL_SAMPLE_BUDGET_S = 35.0
FULL_SAMPLE_LONGEST_S = 35.0


def deciding_seconds(grids: Sequence[Grid]) -> dict[tuple[str, int], float]:
    """(grid name, cell index) -> the stored seconds of the run ``reproduce`` re-runs per deciding arm."""
    out = {}
    for g in grids:
        blob = load(g, check_key=False)
        for _, i in deciding_cells(g):
            out[g.name, i] = float(blob["cells"][i]["result"]["seconds"])
    return out


def full_sample(
    seconds: dict[tuple[str, int], float],
    seed: str,
    budget_s: float = FULL_SAMPLE_BUDGET_S,
    longest_s: float = FULL_SAMPLE_LONGEST_S,
) -> list[tuple[str, int]]:
    """The deciding runs one commit re-runs in full: (grid name, cell index), drawn from ``seed`` (the
    commit's hash) among ``seconds`` (``deciding_seconds``), so that over commits every deciding run no
    longer than ``longest_s`` is re-run. The draw orders the runs by a hash of (seed, grid, cell) and
    takes them in that order while their stored seconds fit in ``budget_s`` (the first always)."""
    order = sorted(
        (hashlib.sha256(f"{seed}:{name}:{i}".encode()).hexdigest(), name, i, secs)
        for (name, i), secs in seconds.items()
        if secs <= longest_s
    )
    chosen: list[tuple[str, int]] = []
    total = 0.0
    for _, name, i, secs in order:
        if not chosen or total + secs <= budget_s:
            chosen.append((name, i))
            total += secs
    return chosen


def sample_seed() -> str:
    """The commit being tested (``git rev-parse HEAD``), or $ANDREA_SAMPLE_SEED, or "no-git"."""
    if os.environ.get("ANDREA_SAMPLE_SEED"):
        return os.environ["ANDREA_SAMPLE_SEED"]
    try:
        r = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return r.stdout.strip() or "no-git"
    except (OSError, subprocess.SubprocessError):
        return "no-git"


def _differences(stored: dict, fresh: dict) -> dict:
    a, b = stored["loss"][:EARLY_STEPS], fresh["loss"][:EARLY_STEPS]
    early = max((abs(x - y) for x, y in zip(a, b) if x is not None and y is not None), default=0.0)
    fv = None
    if stored["final_val_loss"] is not None and fresh["final_val_loss"] is not None:
        fv = abs(stored["final_val_loss"] - fresh["final_val_loss"])
    return {"early_loss": early, "final_val_loss": fv, "same_length": len(a) == len(b)}


def _stat(r: dict, decision: Decision):
    from .twoway import statistic as any_statistic  # runstats' statistics, and evidence.twoway's

    return any_statistic(r, decision.field, decision.level)


def margin(grid: Grid, decision: Decision, rows_: Optional[list] = None) -> dict:
    """How far the stored verdict of ``decision`` (on ``rows_``, by default the native stored runs) is
    from flipping: its label on the raw interval and the gap to its threshold (for counts: the events
    over the deciding runs)."""
    from . import verdict

    rs = rows_ if rows_ is not None else rows(load(grid, check_key=False))

    def sel(match):
        return sorted(
            (r for r in pick(rs, **match) if not decision.seeds or r["seed"] in decision.seeds), key=lambda r: r["seed"]
        )

    arm = sel(decision.arm)
    if decision.test in ("fisher", "every", "majority"):
        return {"kind": "count", "events": sum(bool(_stat(r, decision)) for r in arm), "runs": len(arm)}
    if decision.test == "interaction":  # its paired interval is evidence.twoway's
        from .twoway import raw

        v = raw(rs, decision)[0]
        return {"kind": "interval", "label": v.label, "distance": None, "n": v.interval.n if v.interval else 0}
    if decision.test == "level":
        pairs = [(_stat(r, decision), decision.level) for r in arm]
    else:
        other = {r["seed"]: _stat(r, decision) for r in sel(decision.against)}
        pairs = [(_stat(r, decision), other[r["seed"]]) for r in arm]
    if any(a is None or b is None for a, b in pairs):  # a diverged run: the verdict is inconclusive
        return {"kind": "interval", "label": "inconclusive", "distance": None, "n": len(pairs), "diverged": True}
    d = [a - b for a, b in pairs]
    return {
        "kind": "interval",
        "label": verdict.compare(d, decision.predicted).label,
        "distance": verdict.flip_distance(d, decision.predicted),
        "n": len(d),
    }


def _gaps(blob: dict, label: Optional[dict] = None) -> list[float]:
    """|native - emulated| final validation loss of the stored pairs of ``blob`` (those whose label
    matches ``label`` in every key given; both finite)."""
    gaps = []
    for c in blob["cells"]:
        if "emulated" not in c or any(c["label"].get(k) != v for k, v in (label or {}).items()):
            continue
        a, b = c["result"]["final_val_loss"], c["emulated"]["final_val_loss"]
        if a is not None and b is not None:
            gaps.append(abs(a - b))
    return gaps


def arm_spread(grid: Grid, blob: dict, i: int) -> Optional[float]:
    """How far a change of CPU moved the final validation loss of the runs of cell ``i``'s arm (the cells
    whose label differs from it only in the seed): the largest |native - emulated| over the arm's stored
    pairs, or None if none of them has an emulated copy yet (or a pair has no final loss: a divergence)."""
    label = {k: v for k, v in grid.cells[i].label.items() if k != "seed"}
    gaps = _gaps(blob, label)
    return max(gaps) if gaps else None


def spread_for(grid: Grid, blob: dict, i: int) -> tuple[Optional[float], str]:
    """(spread, where it was measured): the arm's (``arm_spread``); for an arm without stored pairs yet,
    the largest over the grid's pairs; for a grid without any, the largest over every stored grid's pairs;
    (None, "none") where nothing is stored yet."""
    s = arm_spread(grid, blob, i)
    if s is not None:
        return s, "arm"
    gaps = _gaps(blob)
    if gaps:
        return max(gaps), "grid"
    from .grids import GRIDS

    every = []
    for name in GRIDS:
        try:
            every += _gaps(load(GRIDS[name](), check_key=False))
        except (ValueError, OSError):
            continue
    return (max(every), "all grids") if every else (None, "none")


def final_tolerance(spread: Optional[float], same_cpu: bool, kind: str = "interval") -> Optional[float]:
    """How far a re-run's final validation loss may sit from its stored twin: ``TOLERANCE`` on the kind of
    CPU that trained the stored run (``cpu_identity``, recorded with each run; runs stored before it was
    recorded count as another kind). On another kind, what a change of CPU did to the runs of the same
    arm (``arm_spread``: the stored native/emulated pairs), and never less than ``TOLERANCE``; for a
    decision that counts events (``kind`` "count"), or an arm with no stored pair, None: the re-run must
    show the same event as the stored run (its final loss is not what the verdict reads). Measured: a run
    of chapter 7's unstable regime (pre-norm, plain init, no warmup, lr 3e-3), stored by an earlier
    session's Intel Xeon, re-ran identically for 27 steps on an AMD EPYC (AVX-512) and ended 0.019 nats
    apart; a run of chapter 2's no-normalisation arm at lr 1e-2 ended 0.043 apart there. ``reproduce``
    passes ``spread_for``: the arm's spread, or, before the arm has stored pairs, the grid's or all grids'
    largest, so that a check on another CPU always compares the final loss."""
    if same_cpu:
        return TOLERANCE["final_val_loss"]
    if kind == "count" or spread is None:
        return None
    return max(TOLERANCE["final_val_loss"], spread)


def _check(problems: list, cell: Cell, dec: Decision, kernel: str, stored: dict, fresh: dict, tol, same_cpu):
    """Compare one re-run with its stored twin (``final_tolerance``), adding what differs to ``problems``."""
    diff = _differences(stored, fresh)
    kind = "the same" if same_cpu else "another"
    if bool(stored["diverged"]) != bool(fresh["diverged"]):
        problems.append(f"{cell.label} ({kernel}): diverged: stored {stored['diverged']}, now {fresh['diverged']}")
    elif not diff["same_length"] or diff["early_loss"] > TOLERANCE["early_loss"]:
        problems.append(
            f"{cell.label} ({kernel}): first {EARLY_STEPS} losses differ by up to {diff['early_loss']:.2g} "
            f"(tolerance {TOLERANCE['early_loss']})"
        )
    elif tol is None and bool(_stat(fresh, dec)) != bool(_stat(stored, dec)):
        problems.append(
            f"{cell.label} ({kernel}): {dec.field} {_stat(fresh, dec)} here, {_stat(stored, dec)} in the stored run "
            f"(another kind of CPU than the stored run's: the verdict counts this event)"
        )
    elif tol is not None and diff["final_val_loss"] is not None and diff["final_val_loss"] > tol:
        problems.append(
            f"{cell.label} ({kernel}): final validation loss {fresh['final_val_loss']} vs stored "
            f"{stored['final_val_loss']} (tolerance {tol:.3g}: {kind} kind of CPU as the stored run's)"
        )
    return {**diff, "same_cpu": same_cpu, "tolerance": tol}


def reproduce(grid: Grid, emulate: bool = True, only: Optional[Sequence[int]] = None) -> dict:
    """Re-run, from scratch and in full, the first deciding seed of each deciding arm (``grid.decisions``
    whose role is "decides"; ``only``: just these cell indices), natively and (``emulate``) on the
    emulated second CPU, at once; compare each with its stored twin.

    Returns {"ok": bool, "problems": [...], "cells": [one dict per decision: its label, the differences
    of each re-run from its stored twin, with the tolerance it was held to, and the verdict's margin]}.
    A re-run must match its twin within ``TOLERANCE`` on the kind of CPU that trained the twin (runs
    are deterministic on one kind of CPU); on another kind, within what a change of CPU did to the
    stored pairs of its arm (``final_tolerance``). The native re-run's twin is the stored run; the
    emulated re-run's is the stored emulated copy (or, where none is stored yet, the stored run)."""
    blob = load(grid, check_key=False)
    rs = rows(blob)
    problems: list[str] = []
    out = []
    deciding = deciding_cells(grid)
    if not deciding:
        problems.append(f"grid {grid.name!r} declares no deciding arm to re-run")
    for dec, i in deciding:
        if only is not None and i not in only:
            continue
        cell, stored = grid.cells[i], blob["cells"][i]["result"]
        background = start_emulated(cell) if emulate else None  # on the other core, while this one trains
        try:
            fresh = run_cell(cell, threads=1)
        except BaseException:
            if background is not None:
                background.kill()
                background.wait()
            raise
        m = margin(grid, dec, rs)
        spread, where = spread_for(grid, blob, i)
        same_cpu = stored.get("cpu") == cpu_identity()
        native = _check(
            problems, cell, dec, "native", stored, fresh, final_tolerance(spread, same_cpu, m["kind"]), same_cpu
        )
        native["identical"] = native["early_loss"] == 0 and native["final_val_loss"] in (0, 0.0, None)
        row = {"what": dec.what, "label": cell.label, "native": native, "seconds": fresh["seconds"], "margin": m}
        row["spread"], row["spread_from"] = spread, where
        if background is not None:
            emu = finish_emulated(background, cell)
            twin = blob["cells"][i].get("emulated", stored)
            same = "emulated" in blob["cells"][i] and twin.get("cpu") == emu.get("cpu")
            row["emulated"] = _check(
                problems, cell, dec, "emulated", twin, emu, final_tolerance(spread, same, m["kind"]), same
            )
            row["emulated"]["twin"] = "emulated" if "emulated" in blob["cells"][i] else "native"
        out.append(row)
    return {"ok": not problems, "problems": problems, "cells": out}
