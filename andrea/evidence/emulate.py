"""The second machine: a stored run re-trained the way a CPU of another kind computes it.

Every verdict in the book is decided twice, on the stored runs as this machine trained them (*native*)
and on the same runs trained under ``EMULATED`` (*emulated*): torch's portable C++ kernels instead of
this machine's vector kernels, and MKL's AVX2 code path for the matrix products. Each changes the last
bits of sums, as another processor does; a long, unstable run can grow those bits into a visible
difference. A label the book prints is one that both machines give (``evaluation.evidence``).

``train(cells)`` trains cells that way, two at a time in child processes (the variables are read
when torch and MKL load, so they cannot be switched inside a running process), and caches each
finished run, so an interrupted ``make experiments`` continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..files import cache_dir, read_cached, write_cached
from . import seal

# How another CPU is emulated (part of every grid's declared rule: ``store.Grid.rule_hash``).
EMULATED = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def procedure_hash() -> str:
    """The hash of the emulation procedure: which variables, which values."""
    return hashlib.sha256(json.dumps(EMULATED, sort_keys=True).encode()).hexdigest()[:12]


_CHILD = (
    "import json, sys; from andrea.evidence import store, runs; "
    "cell = store.Cell(**json.loads(sys.stdin.read())); "
    "print(json.dumps({**runs.run_cell(cell, threads=1), 'cpu': store.cpu_identity()}))"
)


def start(cell) -> subprocess.Popen:
    """Start training ``cell`` (one thread) in a child process on the emulated CPU; ``finish`` collects
    it. The caller may train natively meanwhile."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, **EMULATED, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"),
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(cell.spec()))
    proc.stdin.close()
    proc.stdin = None  # closed: communicate() must not write to it
    return proc


def finish(proc: subprocess.Popen, cell) -> dict:
    """The result of a ``start``ed run, once it has finished (RuntimeError with the child's last words
    if it failed)."""
    out, err = proc.communicate()  # both pipes at once: a child that fills one cannot block
    if proc.returncode != 0:
        raise RuntimeError(f"the emulated run of {cell.label} failed: {err.strip()[-500:]}")
    return json.loads(out.strip().splitlines()[-1])


def _cache(cell, code: str) -> Path:
    return cache_dir() / "cells-emulated" / f"{cell.key()}-{code}-{procedure_hash()}.json"


def cached(cell, code: str) -> Optional[dict]:
    """The emulated run of ``cell`` cached by this code (``store.code_hash()``) and procedure, or None."""
    blob = read_cached(_cache(cell, code), code)
    if blob is None:
        return None
    row = {"emulation": procedure_hash(), **json.loads(blob)}  # the cache's name carries the procedure
    return None if seal.short_run(row, cell.steps()) else row  # stopped part-way: trained again


def run_one(cell, code: str, rule: Optional[str] = None) -> dict:
    """The emulated run of ``cell``: from the cache, or trained now (recording the grid's ``rule`` hash,
    see ``store.rule_status``) and cached."""
    hit = cached(cell, code)
    if hit is not None:
        return hit
    row = {**finish(start(cell), cell), "rule": rule, "emulation": procedure_hash()}
    seal.whole(row, cell.steps(), f"the emulated copy of {cell.label}")  # a copy stopped by a signal is not cached
    write_cached(_cache(cell, code), json.dumps(row).encode(), code)
    return row


def train(
    cells: Sequence,
    code: str,
    n_workers: int = 2,
    rule: Optional[str] = None,
    done: Optional[Callable[[int, dict], None]] = None,
) -> list[dict]:
    """The emulated runs of ``cells`` (cached ones are read back), ``n_workers`` at a time; ``done(i, row)``
    is called as each finishes."""
    out: list = [None] * len(cells)
    with ThreadPoolExecutor(max_workers=max(1, n_workers)) as pool:
        futures = {pool.submit(run_one, c, code, rule): i for i, c in enumerate(cells)}
        for fut in as_completed(futures):
            i = futures[fut]
            out[i] = fut.result()
            if done is not None:
                done(i, out[i])
    return out
