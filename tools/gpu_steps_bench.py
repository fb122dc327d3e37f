"""tools/gpu_check.py's bench (the run "speed"): ANDREA's training step against the torch-modules reference
(andrea.views.bench_gpu), eager and compiled, and the cheap levers one by one; and its CPU stand-in."""

from __future__ import annotations

import json

from gpu_common import BENCH_LEVERS, peak_for


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


def rehearse_bench() -> str:
    from andrea.views import bench_gpu as G

    res = run_bench(G.STAND_IN, "cpu", bench_plan(True), 64, None, None, 2, 1)
    if len(res["lines"]) != 2 + len(bench_plan(True)):
        raise RuntimeError(f"the stand-in bench left rows out: {res['figures']}")
    return "stand-in model on the CPU: " + res["figures"]
