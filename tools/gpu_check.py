"""One prepared check of every CUDA path in andrea, for a machine with a GPU.

    bash tools/gpu_device.sh            # on the lent GPU machine as it is (see README, "On a GPU")
    make gpu-check                     # on a GPU machine of your own, in the project's .venv
    PYTHONPATH=. python3 tools/gpu_check.py [--only STEP ...] [--rehearse]

It prints the python, torch and CUDA it found before anything else. Each step runs in its own process
with its own timeout (TIMEOUTS), inside one budget for the whole check (BUDGET_S); a failing step prints
its error and the check goes on, and a step that runs out of time is killed with every process it
started. At the end one table says, per step, pass / FAIL / skipped and the figures measured. The log
(each line as it is said, and each step's full output) and the table (rewritten after each step) go to
files beside each other: --out, else $OUT/gpu-check.log when OUT is set, else a new temp folder. On a
machine without CUDA every step says "skipped: no CUDA" and the exit status is 0. Nothing here downloads
anything.

--rehearse (for the CPU, `make gpu-rehearse`): also, per step, import every module the step imports and
run a small CPU stand-in (the device tests on the CPU; torchrun on the CPU; the explorer's probe at its
default width; for the chapters, a kernel started from this very python that imports all that the
chapters and andrea import and runs a trivial cell, then two small pages executed side by side the way
the step does; for the bench, its stand-in model eager and compiled, and the levers the CPU can run),
so that a package missing here fails the rehearsal.

The steps, in three device runs (RUNS) that each fit BUDGET_S (each step's timeout in TIMEOUTS):
the run "check" (the default; about 5 minutes on one H100/H200-class GPU)
  tests       the device-generic tests (tests/test_device.py) on cuda
  agreement   CPU vs CUDA: the same seed and batch give the same gradient_flow report (fp32, TF32
              off), and the same first 20 training losses (the CUDA run uses bf16 autocast)
  train-120m  ANDREA-120M training steps in bf16 autocast, without and with torch.compile:
              tokens/s, MFU against the GPU's bf16 peak, peak memory
  ddp         torchrun --nproc_per_node=1 with NCCL for a few steps (and 2 processes on one GPU)
  explorer    the live explorer's probe at width 768, depth 96
  chapters    every page of the book executed, several at a time, each in its own kernel: its seconds
              against the CPU build's (tools/cpu_page_seconds.json), and the device its models ran on
the run "speed" (`--only bench`)
  bench       ANDREA's step against the torch-modules reference (andrea.views.bench_gpu), eager and
              compiled, B=16 and B=32, and the cheap levers one by one at B=32 eager
the run "long" (`--only train-long`)
  train-long  about 3 minutes of `python -m andrea.training.train --preset andrea-120m --compile` on the
              manuals: tokens/s, held-out loss against steps, the best held-out loss against chapter 8's
              model and the manuals' unigram level, one sample

This file is the driver (the command line, each step in a child process, the log and the table). Beside it:
gpu_common.py (the plan above: STEPS, RUNS, TIMEOUTS, BUDGET_S and the rest; the child processes), and the
steps with their CPU stand-ins by subject: gpu_steps_device.py (tests, agreement, train-120m, ddp, explorer),
gpu_steps_pages.py (chapters), gpu_steps_bench.py (bench), gpu_steps_long.py (train-long). Every name they
define stays importable from gpu_check.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # the steps' modules, beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))

# The plan, the child processes, and the steps with their stand-ins, from the modules beside this file; every
# name stays importable from here (the tests, tools/gpu_wheels.py).
from gpu_common import (  # noqa: E402, F401 - re-exported
    AGREE,
    BENCH_LEVERS,
    BF16_PEAK,
    BUDGET_S,
    CPU_SECONDS,
    DDP_TIMEOUT,
    DEVICE_TIMEOUT_S,
    LONG,
    LONG_STAND_IN,
    OPTIONAL_IMPORTS,
    PAGE_THREADS,
    PY,
    REHEARSE_TIMEOUTS,
    ROOT,
    RUNS,
    SETUP_ALLOWANCE_S,
    SHORT_DEVICE_TIMEOUT_S,
    STEPS,
    TIMEOUTS,
    _last_error,
    _text,
    child_env,
    imports_in,
    kill_tree,
    peak_for,
    results_in,
    run_bounded,
)
from gpu_steps_bench import bench_goals, bench_plan, rehearse_bench, run_bench, step_bench  # noqa: E402, F401
from gpu_steps_device import (  # noqa: E402, F401 - re-exported
    _corpus,
    ddp_command,
    rehearse_agreement,
    rehearse_ddp,
    rehearse_explorer,
    rehearse_tests,
    step_agreement,
    step_ddp,
    step_explorer,
    step_tests,
    step_train_120m,
)
from gpu_steps_long import (  # noqa: E402, F401 - re-exported
    long_command,
    long_figures,
    long_levels,
    read_long,
    rehearse_train_long,
    run_long,
    step_train_long,
)
from gpu_steps_pages import (  # noqa: E402, F401 - re-exported
    andrea_imports,
    book_pages,
    chapter_imports,
    cpu_seconds,
    execute,
    execute_page,
    pages_report,
    pin_kernel,
    rehearse_chapters,
    rel,
    run_pages,
    step_chapters,
    warm_cache,
)

STEP_FUNCS = {
    "tests": step_tests,
    "agreement": step_agreement,
    "train-120m": step_train_120m,
    "ddp": step_ddp,
    "explorer": step_explorer,
    "chapters": step_chapters,
    "bench": step_bench,
    "train-long": step_train_long,
}


# ---------------------------------------------------------------------------------------------
# The rehearsal (--rehearse): what each step imports and starts, on the CPU
# ---------------------------------------------------------------------------------------------
def step_imports(name: str) -> list:
    """The modules a step's function imports, read from its source: the rehearsal imports exactly these."""
    return imports_in(ast.parse(textwrap.dedent(inspect.getsource(STEP_FUNCS[name]))))


REHEARSE_FUNCS = {
    "tests": rehearse_tests,
    "agreement": rehearse_agreement,
    "ddp": rehearse_ddp,
    "explorer": rehearse_explorer,
    "chapters": rehearse_chapters,
    "bench": rehearse_bench,
    "train-long": rehearse_train_long,
}


def rehearse(name: str) -> dict:
    """Import what the step imports, then run its CPU stand-in (if it has one)."""
    mods = step_imports(name)
    for m in mods:
        importlib.import_module(m)
    figures = [f"imported {', '.join(mods)}" if mods else "imports nothing itself"]
    if name in REHEARSE_FUNCS:
        figures.append(REHEARSE_FUNCS[name]())
    return {"ok": True, "figures": "; ".join(figures)}


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------
def versions() -> str:
    """What this machine has, said before anything else: python, torch, CUDA, the GPU."""
    head = f"python {platform.python_version()} ({PY}), {platform.machine()}"
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - reported
        return f"{head}; torch not importable: {type(e).__name__}: {e}"
    return f"{head}; torch {torch.__version__}, CUDA {torch.version.cuda}"


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def carried_report(site: str) -> list:
    """The packages installed from the carried wheels into `site`, and any requirement of theirs that this
    python does not meet (missing, or at another version): said before the steps run."""
    from importlib import metadata

    try:
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name
    except ImportError:
        return [f"carried packages in {site}: not checked (no 'packaging' here)"]
    have: dict = {}
    for d in metadata.distributions():  # in sys.path order: the first is the one imported
        have.setdefault(canonicalize_name(d.metadata["Name"] or ""), d.version)
    carried = list(metadata.distributions(path=[site]))
    problems = []
    for d in carried:
        for spec in d.requires or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            got = have.get(canonicalize_name(req.name))
            if got is None:
                problems.append(f"{d.metadata['Name']} needs {req}, which this python lacks")
            elif req.specifier and not req.specifier.contains(got, prereleases=True):
                problems.append(f"{d.metadata['Name']} needs {req}; this python has {req.name} {got}")
    head = f"carried: {len(carried)} packages in {site}"
    return [head + ("; every requirement of theirs is met" if not problems else "; WARNING:"), *problems]


def run_step(name: str, timeout: float, runner=None, rehearse: bool = False) -> dict:
    """Run one step in a child process; a crash or a timeout becomes a FAIL row, never an exception."""
    t0 = time.perf_counter()
    cmd = [PY, __file__, "--step", name] + (["--rehearse"] if rehearse else [])
    runner = runner or (lambda: run_bounded(cmd, timeout))
    output = ""
    try:
        r = runner()
        output = (r.stdout or "") + (r.stderr or "")
        found = results_in(r.stdout or "")
        res = found[-1] if found else {"ok": False, "figures": "no result", "log": (r.stderr or "")[-3000:]}
        if r.returncode != 0 and res.get("ok"):
            res = {"ok": False, "figures": f"exit status {r.returncode}", "log": r.stderr[-3000:]}
    except subprocess.TimeoutExpired as e:
        output = _text(e.output) + _text(e.stderr)
        so_far = results_in(_text(e.output))
        figures = f"timed out after {timeout:.0f} s" + (f"; so far: {so_far[-1].get('figures')}" if so_far else "")
        res = {"ok": False, "figures": figures, "log": output[-3000:]}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["status"] = "pass" if res.get("ok") else "FAIL"
    res["output"] = output[-20000:]
    return res


def table(rows: dict) -> str:
    """The summary table: step, status, seconds, figures."""
    w = max(len(k) for k in rows) if rows else 4
    lines = [f"{'step':<{w}}  {'status':<18}  {'time':>7}  figures", "-" * (w + 60)]
    for name, r in rows.items():
        secs = f"{r['seconds']:.0f} s" if r.get("seconds") is not None else "-"
        lines.append(f"{name:<{w}}  {r['status']:<18}  {secs:>7}  {r.get('figures', '')}")
        lines += [f"{'':<{w}}    {ln}" for ln in r.get("lines") or []]  # a step's own table (bench, chapters)
    return "\n".join(lines)


class Log:
    """Says each line on stdout and appends it to the log file at once (a run stopped half-way still left
    its log); `quiet` writes to the file only (a step's full output)."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def quiet(self, text: str) -> None:
        with self.path.open("a") as f:
            f.write(text + "\n")

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.quiet(text)


def report_path(out: str | None) -> Path:
    if out:
        return Path(out)
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"]) / "gpu-check.log"
    return Path(tempfile.mkdtemp(prefix="andrea-gpu-check-")) / "gpu-check.log"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    p.add_argument("--page", type=Path, help=argparse.SUPPRESS)
    p.add_argument(
        "--only",
        nargs="+",
        choices=STEPS,
        help=f"run these steps (default: the run 'check', {' '.join(RUNS['check'])})",
    )
    p.add_argument("--out", help="the log file (default: $OUT/gpu-check.log, else a new temp folder)")
    p.add_argument("--rehearse", action="store_true", help="also import and start what each step needs, on the CPU")
    p.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds for all steps (default {BUDGET_S})")
    p.add_argument("--timeout", nargs="+", default=[], metavar="STEP=S", help="another timeout for a step")
    a = p.parse_args(argv)
    if a.page:  # inside a child process of the chapters step: one page
        print(json.dumps(execute_page(a.page.resolve())), flush=True)
        return 0
    if a.step:  # inside a child process
        os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]  # the kernels and torchrun's workers inherit it
        try:
            res = rehearse(a.step) if a.rehearse else STEP_FUNCS[a.step]()
        except Exception as e:  # noqa: BLE001 - reported as the step's result
            res = {
                "ok": False,
                "figures": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}",
                "log": traceback.format_exc()[-3000:],
            }
        print(json.dumps(res))
        return 0
    timeouts = dict(TIMEOUTS)
    for item in a.timeout:
        step, _, secs = item.partition("=")
        if step not in timeouts or not secs.replace(".", "", 1).isdigit():
            p.error(f"--timeout takes STEP=SECONDS with STEP one of {', '.join(STEPS)}: {item!r}")
        timeouts[step] = float(secs)
    # the default: the run "check"; a rehearsal (on the CPU) covers the steps of every run
    steps = a.only or list(STEPS if a.rehearse else RUNS["check"])
    report = report_path(a.out)
    table_file = report.with_name(report.stem + "-table.txt")
    log = Log(report)
    log.say(f"andrea gpu-check: {versions()}")
    if os.environ.get("GPU_CHECK_SITE"):  # set by tools/gpu_device.sh
        try:
            lines = carried_report(os.environ["GPU_CHECK_SITE"])
        except Exception as e:  # noqa: BLE001 - a report only: the steps still run
            lines = [f"carried packages: not checked ({type(e).__name__}: {e})"]
        for line in lines:
            log.say(line)

    def record(title: str, name: str, row: dict) -> None:
        log.say(f"   {row['status']}: {row.get('figures', '')}")
        if row["status"] != "pass" and row.get("log"):
            log.say("   " + row["log"].strip().replace("\n", "\n   "))
        if row.get("output"):
            log.quiet(f"   ---- full output of {title} {name} ----\n{row['output'].rstrip()}\n   ---- end ----")

    def save_tables() -> None:
        text = table(rows) + (f"\n\nrehearsal\n{table(rehearsed)}" if rehearsed else "")
        table_file.write_text(text + "\n")

    rows: dict = {}
    rehearsed: dict = {}
    if not cuda_available():
        log.say("No CUDA device is present on this machine: every step is skipped (nothing was run).")
        rows = {s: {"status": "skipped: no CUDA", "seconds": None, "figures": ""} for s in steps}
    else:
        import torch

        log.say(f"CUDA device: {torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})")
        t_start = time.perf_counter()
        for s in steps:
            left = a.budget - (time.perf_counter() - t_start)
            if left < 5:
                rows[s] = {
                    "status": "FAIL",
                    "seconds": None,
                    "figures": f"not run: the {a.budget:.0f} s budget is spent",
                }
                log.say(f"-- {s}: not run, the budget is spent")
                save_tables()
                continue
            t = min(timeouts[s], left)
            log.say(f"-- {s} (timeout {t:.0f} s)")
            rows[s] = run_step(s, t)
            record("step", s, rows[s])
            save_tables()
    if a.rehearse:
        log.say("Rehearsal: each step's imports and a CPU stand-in, in this python")
        for s in a.only or list(STEPS):  # the second run's too
            log.say(f"-- rehearse {s} (timeout {REHEARSE_TIMEOUTS[s]} s)")
            rehearsed[s] = run_step(s, REHEARSE_TIMEOUTS[s], rehearse=True)
            record("rehearsal", s, rehearsed[s])
            save_tables()
    log.say()
    log.say(table(rows))
    if rehearsed:
        log.say()
        log.say("rehearsal")
        log.say(table(rehearsed))
    save_tables()
    print(f"\nreport written to {report} (table: {table_file})")
    return 0 if all(r["status"] != "FAIL" for r in [*rows.values(), *rehearsed.values()]) else 1


if __name__ == "__main__":
    # A stop from outside (SIGTERM) unwinds like Ctrl-C: the running step's processes are killed, and the
    # log and the table so far are already on disk.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
