"""The results store: training runs too long for the book's build, run once and committed.

A *grid* (``Grid``) is a named list of training runs (``Cell``s): a model config, a training
config, the corpus, and a label that says how a chapter groups the run (``{"norm": "post",
"lr": 1e-3, "seed": 0}``). ``andrea/evidence/grids/`` defines the book's grids; this module runs
them and keeps their results in ``andrea/results/<name>.json``, with what a reader needs to trust
and reproduce them: every cell's full configuration and seed, the torch version, the device, the
time, and a key made of

* the hash of the code that trains a cell (``CODE_MODULES``, by syntax tree: comments and
  formatting do not count), and
* the hash of the grid's own specification.

``results(name)`` refuses a file whose key no longer matches the code (run ``make experiments``),
and a file that is incomplete or malformed, naming the file and the problem. ``rerun.py`` re-runs
stored runs from scratch, natively and on another CPU's kernels, and compares them with the stored
numbers. Runs are seeded and use one CPU thread each, so a result does not depend on the machine's
core count; ``run`` trains a grid's cells two at a time in worker processes, caching each finished
cell, so an interrupted ``make experiments`` continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from ..files import atomic_write_text, cache_dir, read_cached, source_hash, write_cached
from ..measure.runstats import statistic  # noqa: F401  (chapter 7 reads store.statistic)
from .runs import run_cell

RESULTS = Path(__file__).resolve().parent.parent / "results"  # andrea/results
# The modules whose code decides a training cell's numbers (the key changes when any of them does),
# by their names under andrea/ (files.source_hash).
CODE_MODULES = (
    "model.config",
    "model.layers",
    "model.transformer",
    "training.train",
    "training.optimizer",
    "training.data",
    "measure.probe",
    "evidence.runs",
)
# Reproduction: a cell re-run from scratch must match the stored one within these (absolute, nats).
# Runs are bit-identical on one kind of CPU; the first losses' tolerance allows for another CPU's kernels
# (measured under EMULATED: first 20 losses up to 0.002 apart in the most chaotic deciding run, no
# normalisation at lr 3e-2), so that `make test` also passes on a machine of another kind. The final
# loss's holds on the stored run's kind of CPU; on another, the grid's kernel tolerance (final_tolerance).
TOLERANCE = {"early_loss": 0.005, "final_val_loss": 0.015}
EARLY_STEPS = 20
# How much a change of CPU kernels moves one stored run's final validation loss (nats), per grid
# unless a grid states its own: measured by re-running each grid's deciding run under EMULATED
# (0, 0.0031, 0.0088, 4e-5, 0.0121 over the grids whose run finished; root mean square 0.007), taken
# as the size of a run's change, rounded up from the largest. Every verdict on paired stored
# differences adds it to the seeds' noise (``verdict._kernel_sd``), so that a verdict another machine
# could flip by re-running the grid is reported as inconclusive.
KERNEL_TOLERANCE = 0.015
# How another CPU is emulated: torch's portable C++ kernels instead of this machine's vector kernels
# (AVX-512 here), and MKL's AVX2 code path for the matrix products (what MKL runs on an AMD or older
# Intel CPU). Each changes the last bits of sums; together they stand in for "another machine".
EMULATED = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
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


ROLES = ("decides", "calibration", "control")
TESTS = ("paired t", "fisher", "equivalence", "level", "every")


@dataclass(frozen=True)
class Decision:
    """One comparison of a grid's declared rule, fixed (and hashed with the grid) before any run.

    ``arm`` and ``against`` are label matches (e.g. ``{"norm": "post", "warmup": 0}``); the
    statistic is ``field``, a run's result field or one of ``measure.runstats.STATISTICS`` (``level`` is
    its threshold where it needs one). ``test`` says how it is decided:

    * ``"paired t"``: ``arm`` minus ``against``, paired by seed, lies beyond ``margin`` on the
      ``predicted`` side ("positive" or "negative"; Student's t, one-sided at 2.5 %);
    * ``"fisher"``: the event ``field`` (true or false per run) is more frequent in ``arm`` than in
      ``against`` (Fisher's exact test, one-sided at 2.5 %);
    * ``"equivalence"``: ``arm`` minus ``against`` lies within ±``margin`` (TOST);
    * ``"level"``: ``arm``'s statistic minus ``level`` lies on the ``predicted`` side (one-sample t);
    * ``"every"``: every run of ``arm`` shows the event ``field``.

    ``role``: ``"decides"`` (a regime of the claim: the claim's label comes from these, with Holm's
    correction), ``"calibration"`` (a known-good comparison that must pass the same kind of
    criterion at this budget, or the claim is not testable here) or ``"control"`` (reported beside
    the claim). ``seeds``: the seeds that decide, none of which had run when the rule was fixed
    (empty: every seed of the arm). `make test` re-runs each deciding arm's first seed."""

    what: str  # the regime or comparison, in words
    arm: dict
    against: Optional[dict] = None
    predicted: str = "negative"
    field: str = "final_val_loss"
    test: str = "paired t"
    role: str = "decides"
    margin: float = 0.0
    level: Optional[float] = None
    seeds: tuple = ()
    calibrates: str = ""  # for a calibration: the deciding regime (``what``) it calibrates; "" = all

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"decision {self.what!r}: role must be one of {ROLES}, got {self.role!r}")
        if self.test not in TESTS:
            raise ValueError(f"decision {self.what!r}: test must be one of {TESTS}, got {self.test!r}")
        if self.predicted not in ("positive", "negative"):
            raise ValueError(f"decision {self.what!r}: predicted must be 'positive' or 'negative'")
        if self.test in ("paired t", "fisher", "equivalence") and self.against is None:
            raise ValueError(f"decision {self.what!r}: a {self.test} test needs an `against` arm")

    @property
    def event(self) -> str:  # the result field that a count test counts
        return self.field

    def spec(self) -> dict:
        return {**asdict(self), "seeds": list(self.seeds)}

    def rerun_label(self) -> dict:
        return {**self.arm, "seed": self.seeds[0] if self.seeds else 0}


@dataclass(frozen=True)
class Grid:
    name: str  # the file name under andrea/results
    title: str  # one line for a reader
    prediction: str  # what the claim predicts, stated before any run
    cells: tuple = field(default_factory=tuple)
    decisions: tuple = field(default_factory=tuple)  # Decision: the declared rule (see Decision)
    rule: str = "every"  # how the deciding regimes make the claim's label (verdict.decide)
    # When the rule was written: "before the runs" (its deciding seeds had not run), or, for a rule
    # written after the runs it decides on, a sentence that says so (the book prints it).
    declared: str = "before the runs"
    # The largest change in a re-run's final validation loss that a change of CPU kernels may cause
    # (nats), stated from a measurement (KERNEL_TOLERANCE); reproduce() checks it both ways.
    kernel_tolerance: float = KERNEL_TOLERANCE

    def index(self, label: dict) -> int:
        """The position of the cell whose label matches ``label`` in every key given."""
        hits = [i for i, c in enumerate(self.cells) if all(c.label.get(k) == v for k, v in label.items())]
        if len(hits) != 1:
            raise ValueError(f"grid {self.name!r}: {len(hits)} cells match {label}, expected exactly one")
        return hits[0]

    def spec_hash(self) -> str:
        """The hash of the runs *and* the declared rule: changing a criterion after results exist
        makes them stale, like changing a run."""
        blob = json.dumps(
            {
                "cells": [c.spec() for c in self.cells],
                "rule": self.rule,
                "declared": self.declared,
                "decisions": [d.spec() for d in self.decisions],
                "prediction": self.prediction,
            },
            sort_keys=True,
        )
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
    row = {**run_cell(cell, threads=1), "cpu": cpu_identity()}  # which kind of CPU trained it
    write_cached(p, json.dumps(row).encode(), code_hash())
    return row


def cpu_identity() -> str:
    """The kind of CPU this process computes on, as far as a float's last bits go: the processor's model
    and torch's vector kernels (``ATEN_CPU_CAPABILITY`` included). Two runs of one cell on the same kind
    are bit-identical; on another kind (an AMD against an Intel processor, AVX2 against AVX-512) they
    differ in the last bits, which a long, unstable run can grow into visible differences."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if sys.platform == "darwin":
        r = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
        model = r.stdout.strip() or model
    return f"{model}, {torch.backends.cpu.get_cpu_capability()}"


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

    from ..progress import bar

    t0 = time.perf_counter()
    rows: list = [None] * len(grid.cells)
    n_workers = n_workers or workers()
    pb = bar(len(grid.cells), f"{grid.name}: {len(grid.cells)} runs, {n_workers} at a time", unit="run")
    ctx = multiprocessing.get_context("spawn")  # safe inside Jupyter kernels and threads
    from ..training.data import load_token_data

    for tok in sorted({c.tokenizer for c in grid.cells}):
        load_token_data(tok)  # build the shared caches once, before the workers start
    done = _stored_runs(grid)  # runs already in the stored file, by the same code: not trained again
    for i, c in enumerate(grid.cells):
        if c.key() in done:
            rows[i] = done[c.key()]
            pb.update(1)
    todo = [i for i, r in enumerate(rows) if r is None]
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx) as pool:
        futures = {pool.submit(_run_cached, grid.cells[i]): i for i in todo}
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
        "seconds": round(time.perf_counter() - t0, 1),  # this invocation (stored runs are reused)
        "compute_seconds": round(sum(r.get("seconds", 0.0) for r in rows), 1),  # every run, one core each
        "rule": grid.rule,
        "decisions": [d.spec() for d in grid.decisions],
        "checks": [grid.index(d.rerun_label()) for d in grid.decisions if d.role == "decides"],
        "cells": [{**c.spec(), "result": r} for c, r in zip(grid.cells, rows)],
    }
    atomic_write_text(path(grid.name), json.dumps(blob, indent=1) + "\n")
    return blob


def _stored_runs(grid: Grid) -> dict:
    """{cell key: result} of the runs in ``grid``'s stored file that the current code made (same
    code hash and torch), whatever the grid's rule or its other runs: a grid that gains seeds or a
    changed rule re-runs only what is new. Nothing if the file is missing or unreadable."""
    try:
        blob = json.loads(path(grid.name).read_text())
        if not str(blob.get("key", "")).startswith(code_hash() + "-"):
            return {}
        out = {}
        for c in blob["cells"]:
            spec = {k: c.get(k) for k in ("label", "model", "train", "tokenizer", "monitor")}
            if all(k in c.get("result", {}) for k in RESULT_FIELDS):
                out[Cell(**spec).key()] = c["result"]
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
        res = blob["cells"][i].get("result")
        missing = [k for k in RESULT_FIELDS if not isinstance(res, dict) or k not in res]
        if missing:
            raise StoreError(f"{str(p)!r}: run {i} ({b['label']}) lacks {missing}: run `make experiments`")
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


def rows(blob: dict, kernel_tolerance: float = 0.0) -> list[dict]:
    """Tidy rows: each run's label and results in one dict, plus its configs under model/train (and
    the grid's kernel tolerance, which ``paired`` passes on to the verdicts)."""
    return [
        {**c["label"], **c["result"], "model": c["model"], "train": c["train"], "kernel_tolerance": kernel_tolerance}
        for c in blob["cells"]
    ]


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


class Paired(list):
    """Per-seed differences of stored runs, carrying the grid's ``kernel_tolerance``: the verdict
    functions add what a change of CPU would add to each difference (``verdict._kernel_sd``)."""

    kernel_tolerance: float = 0.0


def paired(rs: Sequence[dict], field: str, a: dict, b: dict) -> Paired:
    """Per-seed differences ``field``(b) - ``field``(a) between two arms that share their seeds.

    A seed where either run has no value (it diverged) is an error: decide those runs separately.
    Rows from ``evaluation.results`` carry their grid's kernel tolerance; the result keeps it."""
    ra = {r["seed"]: r[field] for r in pick(rs, **a)}
    rb = {r["seed"]: r[field] for r in pick(rs, **b)}
    if set(ra) != set(rb):
        raise ValueError(f"the arms {a} and {b} do not share their seeds: {sorted(ra)} vs {sorted(rb)}")
    missing = [s for s in ra if ra[s] is None or rb[s] is None]
    if missing:
        raise ValueError(f"seeds {missing} have no {field} in {a} or {b} (a diverged run)")
    out = Paired(rb[s] - ra[s] for s in sorted(ra))
    out.kernel_tolerance = max((r.get("kernel_tolerance", 0.0) for r in pick(rs, **a) + pick(rs, **b)), default=0.0)
    return out
