"""One prepared check of every CUDA path in andrea, for the first machine with a GPU (`make gpu-check`).

    make gpu-check                     # or: .venv/bin/python tools/gpu_check.py [--only STEP ...]

Each step runs in its own process with its own timeout; a failing step prints its error and the
check goes on. At the end one table says, per step, pass / FAIL / skipped and the figures measured,
and the whole output is also written to a file whose path is printed last. On a machine without
CUDA every step says "skipped: no CUDA" and the exit status is 0. Nothing here downloads anything.

The steps (about 5 minutes on one H100/H200-class GPU):
  tests       the device-generic tests (tests/test_device.py) on cuda
  agreement   CPU vs CUDA: the same seed and batch give the same gradient_flow report (fp32, TF32
              off), and the same first 20 training losses (the CUDA run uses bf16 autocast)
  train-120m  ANDREA-120M training steps in bf16 autocast, without and with torch.compile:
              tokens/s, MFU against the GPU's bf16 peak, peak memory
  ddp         torchrun --nproc_per_node=1 with NCCL for a few steps (and 2 processes on one GPU)
  explorer    the live explorer's probe at width 768, depth 96
  chapter     one chapter executed end to end in a kernel; the device it picked by itself
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

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
STEPS = ("tests", "agreement", "train-120m", "ddp", "explorer", "chapter")
TIMEOUTS = {"tests": 180, "agreement": 120, "train-120m": 240, "ddp": 120, "explorer": 120, "chapter": 300}


def peak_for(name: str):
    """(FLOP/s, the key used) for a device name, or (None, None) when it is not in the table."""
    for key in sorted(BF16_PEAK, key=len, reverse=True):
        if key.lower() in name.lower():
            return BF16_PEAK[key], key
    return None, None


# ---------------------------------------------------------------------------------------------
# Steps (each runs in its own process: `gpu_check.py --step NAME` prints one JSON line)
# ---------------------------------------------------------------------------------------------
def step_tests() -> dict:
    env = dict(os.environ, ANDREA_TEST_DEVICE="cuda")
    r = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_device.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
    return {"ok": r.returncode == 0, "figures": tail[0], "log": (r.stdout + r.stderr)[-4000:]}


def step_agreement() -> dict:
    import numpy as np
    import torch

    from andrea import Andrea, AndreaConfig, gradient_flow, random_batch
    from andrea.data import load_token_data
    from andrea.train import TrainConfig, train

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
    tc = TrainConfig(steps=20, batch_size=16, seq_len=64, lr=3e-3, warmup=5, eval_every=1000)
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
    from andrea.bench import step_flops
    from andrea.train import TrainConfig, make_optimizer

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
    used = f"{name}, bf16 peak {peak / 1e12:.0f} TFLOP/s ({key})" if peak else f"{name}: peak unknown, MFU not computed"
    return {"ok": ok, "figures": "; ".join(parts) + f" [{used}]"}


def step_ddp() -> dict:
    out = []
    ok = True
    corpus = Path(tempfile.mkdtemp()) / "corpus.txt"
    corpus.write_text("LayerNorm standardises each token; GELU is smooth; residuals add. " * 400)
    for n in (1, 2):
        d = tempfile.mkdtemp()
        cmd = [
            PY,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={n}",
            "--master_port=29561",
            "-m",
            "andrea.train",
            "--preset",
            "tiny-bytes",
            "--corpus",
            str(corpus),
            "--steps",
            "5",
            "--device",
            "cuda",
            "--out",
            d,
            "--samples",
            "0",
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=100, cwd=ROOT)
        good = r.returncode == 0 and "done: step 5" in r.stdout
        why = "" if good else ": " + (r.stderr.strip().splitlines() or ["?"])[-1][:150]
        out.append(f"{n} process{'es' if n > 1 else ''} on one GPU: {'ok' if good else 'failed'}{why}")
        ok = ok and (good or n == 2)  # NCCL may refuse two ranks on one GPU: reported, not a failure
    return {"ok": ok, "figures": "; ".join(out)}


def step_explorer() -> dict:
    import statistics

    import torch

    from andrea import explorer as E

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


def step_chapter() -> dict:
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    nb = jupytext.read(ROOT / "book" / "01_residual.md")
    nb.cells.append(nbformat.v4.new_code_cell("print('ANDREA-DEVICE', device)"))
    t0 = time.perf_counter()
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "book")}}
    ).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    device = text.split("ANDREA-DEVICE", 1)[1].split()[0] if "ANDREA-DEVICE" in text else "?"
    return {
        "ok": not errors and device == "cuda",
        "figures": f"chapter 1 executed in {time.perf_counter() - t0:.0f} s; it picked device {device!r}",
    }


STEP_FUNCS = {
    "tests": step_tests,
    "agreement": step_agreement,
    "train-120m": step_train_120m,
    "ddp": step_ddp,
    "explorer": step_explorer,
    "chapter": step_chapter,
}


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------
def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def run_step(name: str, timeout: float, runner=None) -> dict:
    """Run one step in a child process; a crash or a timeout becomes a FAIL row, never an exception."""
    t0 = time.perf_counter()
    runner = runner or (
        lambda: subprocess.run(
            [PY, __file__, "--step", name], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
    )
    try:
        r = runner()
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        res = json.loads(lines[-1]) if lines else {"ok": False, "figures": "no result", "log": r.stderr[-3000:]}
        if r.returncode != 0 and res.get("ok"):
            res = {"ok": False, "figures": f"exit status {r.returncode}", "log": r.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        res = {"ok": False, "figures": f"timed out after {timeout:.0f} s"}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["status"] = "pass" if res.get("ok") else "FAIL"
    return res


def table(rows: dict) -> str:
    """The summary table: step, status, seconds, figures."""
    w = max(len(k) for k in rows) if rows else 4
    lines = [f"{'step':<{w}}  {'status':<18}  {'time':>7}  figures", "-" * (w + 60)]
    for name, r in rows.items():
        secs = f"{r['seconds']:.0f} s" if r.get("seconds") is not None else "-"
        lines.append(f"{name:<{w}}  {r['status']:<18}  {secs:>7}  {r.get('figures', '')}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    p.add_argument("--only", nargs="+", choices=STEPS, help="run only these steps")
    p.add_argument("--out", help="where to write the report (default: a new file in the temp folder)")
    a = p.parse_args(argv)
    if a.step:  # inside a child process
        try:
            res = STEP_FUNCS[a.step]()
        except Exception as e:  # noqa: BLE001 - reported as the step's result
            res = {
                "ok": False,
                "figures": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}",
                "log": traceback.format_exc()[-3000:],
            }
        print(json.dumps(res))
        return 0
    steps = a.only or list(STEPS)
    report = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="andrea-gpu-check-")) / "gpu-check.txt"
    log = []

    def say(text=""):
        print(text, flush=True)
        log.append(text)

    import platform

    say(f"andrea gpu-check: python {platform.python_version()}, {platform.machine()}")
    rows = {}
    if not cuda_available():
        say("No CUDA device is present on this machine: every step is skipped (nothing was run).")
        rows = {s: {"status": "skipped: no CUDA", "seconds": None, "figures": ""} for s in steps}
    else:
        import torch

        say(f"CUDA device: {torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})")
        for s in steps:
            say(f"-- {s} (timeout {TIMEOUTS[s]} s)")
            rows[s] = run_step(s, TIMEOUTS[s])
            say(f"   {rows[s]['status']}: {rows[s].get('figures', '')}")
            if rows[s]["status"] != "pass" and rows[s].get("log"):
                say("   " + rows[s]["log"].strip().replace("\n", "\n   "))
    say()
    say(table(rows))
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n".join(log) + "\n")
    print(f"\nreport written to {report}")
    return 0 if all(r["status"] != "FAIL" for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
