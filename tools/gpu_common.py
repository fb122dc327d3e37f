"""What tools/gpu_check.py and its steps share: the plan (the steps, the device runs, each step's timeout
and the budget), the GPUs' bf16 peaks, and the child processes (this checkout on their PYTHONPATH, a
timeout that kills every process a child started, the JSON result lines a child prints).

The steps themselves live beside this file, grouped by subject: gpu_steps_device.py (the device tests,
CPU vs CUDA agreement, ANDREA-120M training steps, DDP, the explorer's probe), gpu_steps_pages.py (the
book's pages executed), gpu_steps_bench.py (the bench against torch's modules), gpu_steps_long.py (the
long run on the manuals); each with its CPU stand-in for the rehearsal.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
if str(ROOT) not in sys.path:  # andrea from this checkout, also where it is not installed (the GPU machine)
    sys.path.insert(0, str(ROOT))
SCRIPT = Path(__file__).resolve().with_name("gpu_check.py")  # what a step's or a page's child process runs


# Dense bf16 tensor-core peaks (no sparsity), from the vendors' data sheets, in FLOP/s.
BF16_PEAK = {
    "H200": 989e12,
    "H100 SXM": 989e12,
    "H100 PCIe": 756e12,
    "H100": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "A10G": 70e12,
    "L4": 121e12,
    "RTX 4090": 165e12,
    "V100": 125e12,
}
AGREE = {"gradient_flow_rtol": 1e-3, "loss_atol_bf16": 0.05}  # stated tolerances (see step_agreement)
STEPS = ("tests", "agreement", "train-120m", "ddp", "explorer", "chapters", "bench", "train-long")
# Three device commands, each within BUDGET_S: `bash tools/gpu_device.sh` runs "check" (`timeout_s`
# DEVICE_TIMEOUT_S); `... --only bench` runs "speed" and `... --only train-long` runs "long" (each `timeout_s`
# SHORT_DEVICE_TIMEOUT_S; README, "On a GPU"). With the machine's start-up (2-3 min), one 15-minute lease holds
# "check" and one of the other two when nothing needs a rerun; a session runs them in the order the issue needs.
RUNS = {
    "check": ("tests", "agreement", "train-120m", "ddp", "explorer", "chapters"),
    "speed": ("bench",),
    "long": ("train-long",),
}
# Sized for the lent machine's lease (15 minutes of device time, all tries together): each run's steps fit in
# BUDGET_S; with the install of the carried wheels and two imports of torch the device command ends within
# 8 minutes, under its timeout_s of DEVICE_TIMEOUT_S, which leaves a rerun of the failed steps room.
# Measured on an H200 (2026-12-04, torch 2.11): tests 12 s, agreement 19, train-120m 34, ddp 32,
# explorer 10, chapter 1 alone 129 (its many small models on cuda, bound by kernel launches on a GPU).
# Again on a freshly started H200 (2026-12-04): tests over 20 s (timed out at 25; 17 s on the warm machine),
# agreement 16, train-120m 58, ddp 32, explorer 17, chapter 1 alone 133.
# chapters and bench are ESTIMATES until they are measured on the device (no GPU was lent when they were
# written): chapters, the CPU build's 475 s of page time (22 pages, longest 60 s) on 8 lanes of the device's
# 16 cores, the pages' models on the CPU, plus kernel starts: about 90 s; bench, 4 compiles of a 120M
# model (25-45 s each, from train-120m's 34-58 s for one) and 7 eager rows of 13 steps of under 0.1 s: about
# 150-210 s.
# train-long: an estimate until measured, from the H200 figures of issue 50 (ANDREA-120M compiled at
# B=32 x 1024: 545-600 k tok/s, about 17 steps/s): 10 s to import torch and andrea, 20 s to tokenize the
# manuals and count the unigram and bigram levels, 10 s for the command line to start, its --time-limit
# of LONG["time_limit"] s (compilation, about 40 s, included), 15 s for the last checkpoint and the sample.
TIMEOUTS = {
    "tests": 45,
    "agreement": 30,
    "train-120m": 80,
    "ddp": 65,
    "explorer": 25,
    "chapters": 150,
    "bench": 240,
    "train-long": 240,
}
BUDGET_S = 420  # a run stops here: a step gets min(its timeout, what is left)
DEVICE_TIMEOUT_S = 540  # the run's timeout_s (README); the command itself ends by 480 s
SETUP_ALLOWANCE_S = 60  # the device command before the steps: torch imported twice, the wheels installed
SHORT_DEVICE_TIMEOUT_S = 330  # "speed" and "long": the step's timeout and SETUP_ALLOWANCE_S, rounded up
REHEARSE_TIMEOUTS = {
    "tests": 300,
    "agreement": 180,
    "train-120m": 180,
    "ddp": 240,
    "explorer": 180,
    "chapters": 300,
    "bench": 300,
    "train-long": 300,
}
BENCH_LEVERS = ("pad-vocab", "cudnn-attention", "chunked-loss")  # cheap: eager, B=32 (max-autotune is not)
PAGE_THREADS = 2  # torch threads per page in the chapters step (the CPU build: 1, two pages at a time)
CPU_SECONDS = ROOT / "tools" / "cpu_page_seconds.json"  # tools/execute_pages.py --record
# The long run: the preset's batch (32 x 1024) and schedule cut to LONG["steps"]; --time-limit stops it
# (saving last.pt) if the GPU is slower than estimated. At 17 steps/s, 1,800 steps take about 110 s.
LONG = {"steps": 1800, "eval_every": 200, "time_limit": 160}
# Its CPU stand-in (--rehearse): the same command line on a tiny model, a few steps, no compilation.
LONG_STAND_IN = {"steps": 6, "eval_every": 2, "time_limit": 200, "batch_size": 4}
OPTIONAL_IMPORTS = {"myst_nb"}  # andrea imports it only inside try/except ImportError (the book's glue)
DDP_TIMEOUT = 30  # each torchrun in the ddp step


def peak_for(name: str):
    """(FLOP/s, the key used) for a device name, or (None, None) when it is not in the table."""
    for key in sorted(BF16_PEAK, key=len, reverse=True):
        if key.lower() in name.lower():
            return BF16_PEAK[key], key
    return None, None


def child_env(**extra: str) -> dict:
    """The environment for a child process: this checkout first on PYTHONPATH, so andrea imports from it."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        paths.insert(0, str(ROOT))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), **extra)


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a child and everything it started, also what runs in a session of its own (jupyter kernels,
    torchrun's workers), so that nothing of a timed-out step holds the GPU during the next one."""
    try:
        import psutil

        kids = psutil.Process(proc.pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - no psutil, or the child is gone: kill what we can
        kids = []
    for p in [proc, *kids]:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass


def run_bounded(cmd: list, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """subprocess.run(capture_output=True, text=True, cwd=ROOT) that, on its timeout, kills the whole tree
    and raises TimeoutExpired carrying the output so far."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env or child_env()
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a grandchild still holds the pipes: give up on its output
            out, err = "", ""
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    except BaseException:
        kill_tree(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _last_error(stderr: str) -> str:
    """The line of a failed child's stderr that says why: the last one naming an error, else the last
    one that is not a rule of '=' or '-' (torchrun ends its report with one)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip().strip("=-")]
    named = [ln for ln in lines if "Error" in ln or "error:" in ln]
    return ((named or lines or ["?"])[-1])[:150]


def results_in(stdout: str) -> list:
    """The JSON result lines a step printed (the last one is its result; earlier ones are partial)."""
    found = []
    for ln in stdout.splitlines():
        if ln.startswith("{"):
            try:
                found.append(dict(json.loads(ln)))
            except (ValueError, TypeError):
                pass
    return found


def _text(x) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


def imports_in(tree: ast.AST) -> list:
    """The absolute module names imported anywhere in a syntax tree (inside functions too), in order."""
    names: list = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [n for n in dict.fromkeys(names) if n != "__future__"]
