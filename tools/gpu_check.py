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
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
if str(ROOT) not in sys.path:  # andrea from this checkout, also where it is not installed (the GPU machine)
    sys.path.insert(0, str(ROOT))

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


# ---------------------------------------------------------------------------------------------
# Steps (each runs in its own process: `gpu_check.py --step NAME` prints one JSON line)
# ---------------------------------------------------------------------------------------------
def step_tests() -> dict:
    r = run_bounded(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_device.py")],
        TIMEOUTS["tests"] - 5,
        env=child_env(ANDREA_TEST_DEVICE="cuda"),
    )
    tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
    return {"ok": r.returncode == 0, "figures": tail[0], "log": (r.stdout + r.stderr)[-4000:]}


def step_agreement() -> dict:
    import numpy as np
    import torch

    from andrea import Andrea, AndreaConfig, gradient_flow, random_batch
    from andrea.training.data import load_token_data
    from andrea.training.train import TrainConfig, train

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = AndreaConfig(d_model=256, n_head=8, n_layer=12, context_length=64)
    reports = {}
    for dev in ("cpu", "cuda"):
        torch.manual_seed(0)
        m = Andrea(cfg)  # the same weights: built on the CPU, then moved
        idx, tgt = random_batch(cfg.vocab_size, 4, 64, seed=0)
        reports[dev] = gradient_flow(m.to(dev), idx.to(dev), tgt.to(dev))
    a, b = reports["cpu"], reports["cuda"]
    rel = max(
        float(np.abs((a.grad_rms - b.grad_rms) / a.grad_rms).max()),
        float(np.abs((a.act_rms - b.act_rms) / a.act_rms).max()),
    )
    data = load_token_data("bytes")
    mc = AndreaConfig(vocab_size=256, context_length=64, d_model=128, n_head=4, n_layer=4)
    # lr 1e-3, where the 20 fp32 losses on the CPU fall smoothly (5.48 -> 3.59). At 3e-3 the CPU run
    # itself spikes (3.33 -> 10.16 at step 12, then back), and where a spike lands moves with any
    # rounding: the first try on an H200 differed by 1.21 nats there, a measure of chaos, not of
    # agreement.
    tc = TrainConfig(steps=20, batch_size=16, seq_len=64, lr=1e-3, warmup=5, eval_every=1000)
    losses = {dev: train(mc, tc, data, device=dev, progress=False).history["loss"] for dev in ("cpu", "cuda")}
    dl = max(abs(x - y) for x, y in zip(losses["cpu"], losses["cuda"]))
    ok = rel <= AGREE["gradient_flow_rtol"] and dl <= AGREE["loss_atol_bf16"]
    return {
        "ok": ok,
        "figures": f"gradient_flow max rel diff {rel:.1e} (tol {AGREE['gradient_flow_rtol']:g}); "
        f"20 losses max |diff| {dl:.3f} (tol {AGREE['loss_atol_bf16']:g}, bf16 on cuda)",
    }


def step_train_120m() -> dict:
    import statistics

    import torch
    import torch.nn.functional as F

    from andrea import ANDREA_120M, Andrea, random_batch
    from andrea.training.train import TrainConfig, make_optimizer
    from andrea.views.bench import step_flops

    name = torch.cuda.get_device_name()
    peak, key = peak_for(name)
    B, T = 16, 1024
    parts = []
    ok = True
    for compiled in (False, True):
        torch.manual_seed(0)
        torch.cuda.reset_peak_memory_stats()
        m = Andrea(ANDREA_120M).cuda()
        opt = make_optimizer(m, TrainConfig())
        net = torch.compile(m) if compiled else m
        idx, tgt = random_batch(ANDREA_120M.vocab_size, B, T, device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = net(idx)
            F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), tgt.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(3):  # warm up (and compile)
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        t = statistics.median(times)
        mfu = step_flops(ANDREA_120M, B, T) / t / peak if peak else float("nan")
        mem = torch.cuda.max_memory_allocated() / 2**30
        parts.append(
            f"{'compiled' if compiled else 'eager'}: {B * T / t:,.0f} tok/s, MFU {mfu:.0%}, peak {mem:.1f} GiB"
        )
        if compiled and peak and mfu < 0.5:
            parts.append("(below the 50 % goal)")
        if not compiled:  # what a timeout during the compilation still reports
            print(json.dumps({"ok": False, "figures": parts[0]}), flush=True)
    used = f"{name}, bf16 peak {peak / 1e12:.0f} TFLOP/s ({key})" if peak else f"{name}: peak unknown, MFU not computed"
    return {"ok": ok, "figures": "; ".join(parts) + f" [{used}]"}


def ddp_command(n: int, device: str, steps: int, corpus: Path, out: str, port: int) -> list:
    """torchrun with n processes training the tiny-bytes preset for a few steps."""
    return [
        PY,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={n}",
        f"--master_port={port}",
        "-m",
        "andrea.training.train",
        "--preset",
        "tiny-bytes",
        "--corpus",
        str(corpus),
        "--steps",
        str(steps),
        "--device",
        device,
        "--out",
        out,
        "--samples",
        "0",
    ]


def _corpus() -> Path:
    corpus = Path(tempfile.mkdtemp()) / "corpus.txt"
    corpus.write_text("LayerNorm standardises each token; GELU is smooth; residuals add. " * 400)
    return corpus


def _last_error(stderr: str) -> str:
    """The line of a failed child's stderr that says why: the last one naming an error, else the last
    one that is not a rule of '=' or '-' (torchrun ends its report with one)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip().strip("=-")]
    named = [ln for ln in lines if "Error" in ln or "error:" in ln]
    return ((named or lines or ["?"])[-1])[:150]


def step_ddp() -> dict:
    out = []
    ok = True
    corpus = _corpus()
    for n in (1, 2):
        try:
            r = run_bounded(ddp_command(n, "cuda", 5, corpus, tempfile.mkdtemp(), 29561), DDP_TIMEOUT)
            good = r.returncode == 0 and "done: step 5" in r.stdout
            why = "" if good else ": " + _last_error(r.stderr)
        except subprocess.TimeoutExpired:
            good, why = False, f": timed out after {DDP_TIMEOUT} s"
        out.append(f"{n} process{'es' if n > 1 else ''} on one GPU: {'ok' if good else 'failed'}{why}")
        ok = ok and (good or n == 2)  # NCCL may refuse two ranks on one GPU: reported, not a failure
    return {"ok": ok, "figures": "; ".join(out)}


def step_explorer() -> dict:
    import statistics

    import torch

    from andrea.views import explorer as E

    s = E.Setting(depth=96, width=768)
    E.measure(s, "cuda")
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        r = E.measure(s, "cuda")
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return {
        "ok": r.finite,
        "figures": f"fresh model + probe at width 768, depth 96: "
        f"{statistics.median(times) * 1e3:.0f} ms (status {r.status})",
    }


def pin_kernel() -> None:
    """Make the kernel 'python3' this very interpreter (a spec found first, through JUPYTER_PATH), whatever
    other kernel specs the machine has: on the GPU machine the carried ipykernel has no spec installed."""
    d = Path(tempfile.mkdtemp(prefix="andrea-kernel-"))
    spec = d / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [PY, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join([str(d), *[p for p in [os.environ.get("JUPYTER_PATH")] if p]])


def execute(client) -> None:
    """Run a notebook client; a failing cell is raised as its error's name and value (first line), the
    cell and its traceback after."""
    from nbclient.exceptions import CellExecutionError

    try:
        client.execute()
    except CellExecutionError as e:
        cell = re.sub(r"\x1b\[[0-9;]*m", "", str(e))[-2500:]  # the traceback without its colours
        raise RuntimeError(f"a cell raised {e.ename}: {e.evalue}\n{cell}") from None


def book_pages() -> list:
    """Every page of the book that has code (tools/portable.py's list: the lessons, evidence pages, labs)."""
    sys.path.insert(0, str(ROOT / "tools"))
    from portable import pages

    return pages()


def execute_page(page: Path) -> dict:
    """(In a child process.) Execute one page in a fresh kernel of this python, in the page's folder:
    its seconds, the device its models ran on (the page's `device`, "-" where it has none), or its error."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    pin_kernel()
    nb = jupytext.read(page)
    nb.cells.append(
        nbformat.v4.new_code_cell("print('ANDREA-DEVICE', globals().get('device', '-'))", metadata={"tags": []})
    )
    t0 = time.perf_counter()
    client = NotebookClient(
        nb, timeout=600, startup_timeout=90, kernel_name="python3", resources={"metadata": {"path": str(page.parent)}}
    )
    try:
        execute(client)
    except Exception as e:  # noqa: BLE001 - the page's error, reported in its row
        return {"page": rel(page), "seconds": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    device = text.rsplit("ANDREA-DEVICE", 1)[1].split()[0] if "ANDREA-DEVICE" in text else "?"
    return {"page": rel(page), "seconds": round(time.perf_counter() - t0, 1), "device": device}


def rel(page: Path) -> str:
    return str(Path(page).resolve().relative_to(ROOT))


def cpu_seconds() -> dict:
    """The CPU build's seconds per page (tools/cpu_page_seconds.json, written by execute_pages.py --record)."""
    return json.loads(CPU_SECONDS.read_text())["seconds"]


def run_pages(pages: list, jobs: int, threads: int, budget: float, emit=None) -> list:
    """Execute ``pages`` ``jobs`` at a time, each in a child (`--page`) with ``threads`` torch threads, the
    longest on the CPU first, all within ``budget`` seconds; one result per page, in the order they ended.
    ``emit(results)`` is called after each page (the step prints what it has so far)."""
    from concurrent.futures import ThreadPoolExecutor

    known = cpu_seconds() if CPU_SECONDS.is_file() else {}
    order = sorted(pages, key=lambda q: -known.get(rel(q), 0))
    n = str(threads)
    env = child_env(ANDREA_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, ANDREA_BOOK_BUILD="1")
    t_end = time.perf_counter() + budget
    results: list = []

    def one(page: Path) -> None:
        left = t_end - time.perf_counter()
        if left < 5:
            res = {"page": rel(page), "seconds": None, "error": "not started: the step's time is spent"}
        else:
            try:
                r = run_bounded([PY, __file__, "--page", str(page)], left, env=env)
                found = results_in(r.stdout)
                res = found[-1] if found else {"page": rel(page), "seconds": None, "error": _last_error(r.stderr)}
            except subprocess.TimeoutExpired:
                res = {"page": rel(page), "seconds": None, "error": f"timed out after {left:.0f} s"}
        results.append(res)
        if emit:
            emit(results)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, order))
    return results


def pages_report(results: list, known: dict, wall: float, jobs: int, threads: int) -> dict:
    """The chapters step's row: ok when every page ran; the issue's goal (each page at most its CPU-build
    seconds) said as met or not, naming the pages that missed it; one line per page."""
    failed = [r for r in results if r.get("seconds") is None]
    slower = [r for r in results if r.get("seconds") is not None and r["seconds"] > known.get(r["page"], float("inf"))]
    unknown = [r["page"] for r in results if r["page"] not in known]
    devices = sorted({r.get("device", "?") for r in results if r.get("seconds") is not None})
    goal = "met" if not slower and not failed else f"NOT met ({len(slower)} slower, {len(failed)} not run)"
    figures = (
        f"{len(results) - len(failed)} of {len(results)} pages in {wall:.0f} s ({jobs} at a time, {threads} "
        f"threads each); models on {', '.join(devices) or '-'}; goal (each page <= its CPU-build seconds): {goal}"
    )
    if slower:
        figures += "; slower: " + ", ".join(
            f"{Path(r['page']).stem} {r['seconds']:.0f}/{known[r['page']]:.0f} s" for r in slower
        )
    if unknown:
        figures += f"; no CPU figure for {', '.join(unknown)}"
    lines = []
    for r in sorted(results, key=lambda r: r["page"]):
        cpu = known.get(r["page"])
        if r.get("seconds") is None:
            lines.append(f"{r['page']:<45} FAIL  {r.get('error', '')}")
        else:
            ratio = f"x{r['seconds'] / cpu:.2f}" if cpu else "   -"
            cpu_s = f"{cpu:.0f} s" if cpu else "-"
            lines.append(f"{r['page']:<45} {r['seconds']:5.0f} s  CPU build {cpu_s:>5}  {ratio}  on {r.get('device')}")
    return {"ok": not failed, "figures": figures, "lines": lines}


def step_chapters() -> dict:
    import jupytext  # noqa: F401 - what each page's child needs: missing, it fails here, once, by name
    import nbclient  # noqa: F401
    import nbformat  # noqa: F401

    known = cpu_seconds()
    pages = book_pages()
    jobs = max(1, min(len(pages), (os.cpu_count() or 2) // PAGE_THREADS))
    warm = warm_cache()
    t0 = time.perf_counter()

    def report(results) -> dict:
        res = pages_report(results, known, time.perf_counter() - t0, jobs, PAGE_THREADS)
        res["figures"] += f"; andrea's cache warmed first in {warm:.0f} s"
        return res

    def emit(results):  # what a timeout of the whole step still reports
        print(json.dumps(report(results)), flush=True)

    results = run_pages(pages, jobs, PAGE_THREADS, TIMEOUTS["chapters"] - 15 - warm, emit)
    return report(results)


def warm_cache() -> float:
    """Build what the pages read from andrea's cache (the tokenizer, the corpora's token ids) once, before
    they start: the CPU build found them built, and pages started together would each build them."""
    from andrea.training.data import get_tokenizer, load_token_data

    t0 = time.perf_counter()
    get_tokenizer()
    for kind in ("bpe", "bytes"):
        load_token_data(kind)
    return time.perf_counter() - t0


def bench_plan(stand_in: bool) -> list:
    """(batch, mode, lever) of every bench row, in the order they run: the eager rows and the cheap levers
    first (seconds each), the compiled rows last (each compiles two models), so that a timeout keeps most."""
    if stand_in:
        return [(2, "eager", ""), (2, "compiled", ""), (2, "eager", "pad-vocab"), (2, "eager", "chunked-loss")]
    plain = [(16, "eager", ""), (32, "eager", "")]
    return plain + [(32, "eager", lv) for lv in BENCH_LEVERS] + [(16, "compiled", ""), (32, "compiled", "")]


def bench_goals(rows: list) -> str:
    """The issue's goals, said from the rows: ANDREA >= 1.05 x the reference on every plain row measured,
    MFU >= 45 % at B=32 compiled."""
    plain = [r for r in rows if not r.lever]
    low = [f"B={r.batch} {r.mode} x{r.ratio:.3f}" for r in plain if r.ratio < 1.05]
    b32 = [r for r in plain if r.batch == 32 and r.mode == "compiled"]
    mfu = "not measured" if not b32 or b32[0].mfu_datasheet is None else f"{b32[0].mfu_datasheet:.1%}"
    ratio = "met" if plain and not low else f"not met ({', '.join(low) or 'no plain row'})"
    return f"goals: ratio >= 1.05 {ratio}; MFU at B=32 compiled {mfu} (goal 45 %)"


def run_bench(c, device: str, plan: list, seq: int, peak, measured, reps: int, warmup: int) -> dict:
    """The bench rows of ``plan``; a lever that fails on this machine is named in the figures, not fatal."""
    from andrea.views import bench_gpu as G

    rows: list = []
    errors: list = []
    head = f"bf16 matmul {measured / 1e12:.0f} TFLOP/s; " if measured else ""

    def result() -> dict:
        figures = head + G.summary(rows) + ("; " + "; ".join(errors) if errors else "")
        return {"ok": bool(rows), "figures": figures + "; " + bench_goals(rows), "lines": G.table(rows).splitlines()}

    for batch, mode, lever in plan:
        try:
            rows += G.compare(
                c, device, (batch,), seq, (mode,), reps=reps, warmup=warmup, peak=peak,
                measured_peak=measured, progress=lambda s: None, lever=lever,
            )  # fmt: skip
        except Exception as e:  # noqa: BLE001 - one failing lever is a figure, not the end of the step
            if not lever:
                raise
            errors.append(f"{lever} failed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}")
        print(json.dumps(result()), flush=True)  # what a timeout still reports
    return result()


def step_bench() -> dict:
    import torch

    from andrea import ANDREA_120M
    from andrea.views import bench_gpu

    peak, key = peak_for(torch.cuda.get_device_name())
    res = run_bench(ANDREA_120M, "cuda", bench_plan(False), 1024, peak, bench_gpu.matmul_bf16("cuda"), 10, 3)
    res["figures"] += f" [datasheet peak {peak / 1e12:.0f} TFLOP/s ({key})]" if peak else " [datasheet peak unknown]"
    return res


def long_command(device: str, preset: str, settings: dict, out: str, compile: bool) -> list:
    """The training command line on the manuals with the given settings (train-long and its stand-in)."""
    cmd = [PY, "-m", "andrea.training.train", "--preset", preset, "--data", "manuals", "--device", device]
    for key, value in settings.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd + ["--out", out, "--samples", "1", "--overwrite"] + (["--compile"] if compile else [])


def read_long(stdout: str) -> dict:
    """What the training command line said at its end: tokens/s (over the run, and after its first step), the
    held-out curve, the best step and loss, how it ended, and the first sample."""
    said: dict = {"curve": [], "sample": ""}
    lines = stdout.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("held-out loss by step: "):
            pairs = [p.split() for p in ln.split(": ", 1)[1].split(", ") if len(p.split()) == 2]
            said["curve"] = [(int(s), float(v)) for s, v in pairs]
        elif ln.startswith("after the first step: "):
            said["steady"] = float(ln.split(": ", 1)[1].split()[0].replace(",", ""))
        elif ln.startswith(("done: ", "stopped ", "interrupted ", "diverged ")):
            said["end"] = ln.split(";")[0]
            found = re.search(r"([\d,]+) tokens/s", ln)
            if found:
                said["overall"] = float(found.group(1).replace(",", ""))
        if "best held-out loss " in ln:
            found = re.search(r"best held-out loss ([\d.]+) at step (\d+)", ln)
            if found:
                said["best"] = (int(found.group(2)), float(found.group(1)))
        if ln == "--- sample 1 ---":
            said["sample"] = "\n".join(lines[i + 1 :]).strip()
    return said


def run_long(device: str, preset: str, settings: dict, timeout: float, compile: bool) -> tuple:
    """Run the long training command; (its words, its return code, its output's last lines)."""
    cmd = long_command(device, preset, settings, tempfile.mkdtemp(prefix="andrea-long-"), compile)
    try:
        r = run_bounded(cmd, timeout, env=child_env(PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired as e:
        bar = [ln for ln in re.split(r"[\r\n]", _text(e.stderr)) if "step/s" in ln or "s/step" in ln]
        return {"curve": [], "sample": ""}, None, f"timed out after {timeout:.0f} s; last: {(bar or ['?'])[-1].strip()}"
    return read_long(r.stdout), r.returncode, (r.stdout + r.stderr)[-3000:]


def long_figures(said: dict, levels: dict, what: str) -> str:
    """The table's words for a long run."""
    parts = [what]
    if "steady" in said:
        parts.append(f"{said['steady']:,.0f} tok/s after step 1 ({said.get('overall', float('nan')):,.0f} with it)")
    curve = said["curve"]
    if curve:
        parts.append("held-out by step: " + ", ".join(f"{s} {v:.2f}" for s, v in curve))
    if "best" in said:
        parts.append(
            f"best {said['best'][1]:.3f} at step {said['best'][0]} vs chapter 8's model {levels['chapter8']:.2f} "
            f"and the unigram level {levels['unigram']:.2f}"
        )
    parts.append(said.get("end", "no end line"))
    if said["sample"]:
        parts.append("sample: " + repr(said["sample"][:160]))
    return "; ".join(parts)


def long_levels() -> dict:
    """What the long run's held-out loss is read against: chapter 8's final held-out loss, from its stored
    training log, and the manuals' unigram level (cross-entropy of the training split's token frequencies on
    the held-out split), computed here."""
    from andrea.trained import model as trained
    from andrea.training import manuals

    return {
        "chapter8": float(trained.log()["history"]["val_loss"][-1]),
        "unigram": trained.baselines(manuals.load())["unigram_ce"],
    }


def step_train_long() -> dict:
    t0 = time.perf_counter()
    levels = long_levels()
    print(json.dumps({"ok": False, "figures": f"levels {levels}; the training command did not end"}), flush=True)
    left = TIMEOUTS["train-long"] - (time.perf_counter() - t0) - 5
    said, rc, tail = run_long("cuda", "andrea-120m", LONG, left, compile=True)
    best = said.get("best", (0, float("nan")))[1]
    ok = rc == 0 and best < levels["unigram"]
    what = f"andrea-120m --compile, B=32 x 1024, up to {LONG['steps']} steps or {LONG['time_limit']} s"
    res = {"ok": ok, "figures": long_figures(said, levels, what)}
    if not ok:
        res["log"] = tail
    return res


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
def imports_in(tree: ast.AST) -> list:
    """The absolute module names imported anywhere in a syntax tree (inside functions too), in order."""
    names: list = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [n for n in dict.fromkeys(names) if n != "__future__"]


def step_imports(name: str) -> list:
    """The modules a step's function imports, read from its source: the rehearsal imports exactly these."""
    return imports_in(ast.parse(textwrap.dedent(inspect.getsource(STEP_FUNCS[name]))))


def andrea_imports() -> list:
    """Every top-level module that andrea imports anywhere (lazily inside functions too), but andrea itself
    and OPTIONAL_IMPORTS: what the chapter's kernel must be able to import."""
    names: list = []
    for f in sorted((ROOT / "andrea").rglob("*.py")):
        names += [n.split(".")[0] for n in imports_in(ast.parse(f.read_text()))]
    return [n for n in dict.fromkeys(names) if n != "andrea" and n not in OPTIONAL_IMPORTS]


def chapter_imports(nb) -> list:
    """The chapter's own import statements, as source lines (its IPython magics left out)."""
    lines: list = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        src = "\n".join(ln for ln in c.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        lines += [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return list(dict.fromkeys(lines))


def rehearse_tests() -> str:
    r = run_bounded(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_device.py")],
        REHEARSE_TIMEOUTS["tests"] - 10,
        env=child_env(ANDREA_TEST_DEVICE="cpu"),
    )
    tail = ((r.stdout + r.stderr).strip().splitlines() or ["?"])[-1]
    if r.returncode != 0:
        raise RuntimeError(f"tests/test_device.py on the CPU: {tail}\n{(r.stdout + r.stderr)[-3000:]}")
    return f"tests/test_device.py on the CPU: {tail}"


def rehearse_agreement() -> str:
    from andrea.training.data import load_token_data

    return f"load_token_data('bytes'): {len(load_token_data('bytes').train):,} training tokens"


def rehearse_ddp() -> str:
    r = run_bounded(ddp_command(1, "cpu", 2, _corpus(), tempfile.mkdtemp(), 29562), REHEARSE_TIMEOUTS["ddp"] - 10)
    if r.returncode != 0 or "done: step 2" not in r.stdout:
        raise RuntimeError(f"torchrun on the CPU failed (exit {r.returncode})\n{(r.stdout + r.stderr)[-3000:]}")
    return "torchrun --nproc_per_node=1 trained 2 steps on the CPU"


def rehearse_explorer() -> str:
    from andrea.views import explorer as E

    r = E.measure(E.Setting(depth=2), "cpu")
    return f"probe at width {E.DEFAULT_WIDTH}, depth 2 on the CPU: status {r.status}"


def rehearse_chapters() -> str:
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    pin_kernel()
    own = list(dict.fromkeys(line for page in book_pages() for line in chapter_imports(jupytext.read(page))))
    lib = andrea_imports()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import sys, andrea\nprint('ANDREA-FROM', andrea.__file__, sys.executable)"),
        nbformat.v4.new_code_cell("\n".join(own)),
        nbformat.v4.new_code_cell(f"import importlib\nfor _m in {lib!r}:\n    importlib.import_module(_m)"),
        nbformat.v4.new_code_cell("print('ANDREA-REHEARSE', 1 + 1)"),
    ]
    execute(
        NotebookClient(
            nb,
            timeout=120,
            startup_timeout=90,
            kernel_name="python3",
            resources={"metadata": {"path": str(ROOT / "book")}},
        )
    )
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    where = text.split("ANDREA-FROM", 1)[1].split() if "ANDREA-FROM" in text else ["?", "?"]
    if not where[0].startswith(str(ROOT)) or where[1] != PY or "ANDREA-REHEARSE 2" not in text:
        raise RuntimeError(f"the kernel ran andrea {where[0]} under {where[1]}, not this checkout's under {PY}")
    warm = warm_cache()
    pages = [ROOT / "book" / "intro.md", ROOT / "book" / "evidence" / "05_gelu_evidence.md"]  # 3 s and 6 s on the CPU
    t0 = time.perf_counter()
    results = run_pages(pages, 2, 1, REHEARSE_TIMEOUTS["chapters"] - 120)
    report = pages_report(results, cpu_seconds(), time.perf_counter() - t0, 2, 1)
    if not report["ok"]:
        raise RuntimeError("two pages side by side: " + "; ".join(report["lines"]))
    return (
        f"a kernel of this python imported the pages' {len(own)} imports and andrea's {len(lib)}; a cell ran; "
        f"the cache warmed in {warm:.0f} s; " + report["figures"]
    )


def rehearse_bench() -> str:
    from andrea.views import bench_gpu as G

    res = run_bench(G.STAND_IN, "cpu", bench_plan(True), 64, None, None, 2, 1)
    if len(res["lines"]) != 2 + len(bench_plan(True)):
        raise RuntimeError(f"the stand-in bench left rows out: {res['figures']}")
    return "stand-in model on the CPU: " + res["figures"]


def rehearse_train_long() -> str:
    """train-long's code on the CPU: the same levels, the same command line on the manuals, a tiny model."""
    levels = long_levels()
    said, rc, tail = run_long("cpu", "tiny", LONG_STAND_IN, REHEARSE_TIMEOUTS["train-long"] - 60, compile=False)
    if rc != 0 or len(said["curve"]) != LONG_STAND_IN["steps"] // LONG_STAND_IN["eval_every"] or not said["sample"]:
        raise RuntimeError(f"the long run's stand-in failed (exit {rc}): {said}\n{tail}")
    return long_figures(said, levels, f"tiny on the CPU, {LONG_STAND_IN['steps']} steps, no compilation")


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
