"""ANDREA's training step against a reference built from torch's own modules, in one process (issue 50).

The reference (``TorchModulesGPT``) has ANDREA's shape: token and position embeddings,
``nn.TransformerEncoderLayer`` blocks (``norm_first=True``, GELU with the tanh approximation, biases, no
dropout) under a causal mask, a final LayerNorm and an output head tied to the token embedding. Both
models take the same batch and the same optimizer (AdamW, fused on CUDA), alternately, so that both
see the same machine; each step is timed to a synchronisation, and the median of ``reps`` steps is
reported. Printed per batch size and mode (eager, compiled): tokens/s of each model, their ratio, and
ANDREA's model-FLOP utilisation (MFU) against the GPU's datasheet bf16 peak and against a bf16 matrix
product measured in the same run (what this GPU really reaches).

    python -m andrea.views.bench_gpu                    # on CUDA: ANDREA-120M at B=16 and B=32, T=1024
    python -m andrea.views.bench_gpu --stand-in         # on the CPU: a small model, the same code path

``tools/gpu_check.py`` runs it as its ``bench-ref`` step; ``make gpu-rehearse`` runs the stand-in.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea
from .bench import step_flops

STAND_IN = replace(ANDREA_120M, d_model=64, n_layer=2, n_head=4, context_length=64)


class TorchModulesGPT(nn.Module):
    """The reference: ANDREA's shape from torch's own modules (see the module's docstring)."""

    def __init__(self, c: AndreaConfig):
        super().__init__()
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.context_length, c.d_model)
        layer = nn.TransformerEncoderLayer(
            c.d_model,
            c.n_head,
            c.d_hidden,
            dropout=0.0,
            activation=nn.GELU(approximate="tanh"),
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(layer, c.n_layer, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(c.d_model)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.norm(x) @ self.tok.weight.T  # tied head


@dataclass
class Row:
    batch: int
    seq: int
    mode: str
    andrea_tok_s: float
    reference_tok_s: float
    mfu_datasheet: float | None  # against the datasheet's bf16 peak (None: the GPU is not in the table)
    mfu_measured: float | None  # against the bf16 matrix product measured in this run

    @property
    def ratio(self) -> float:
        return self.andrea_tok_s / self.reference_tok_s


def matmul_bf16(device: str, n: int = 8192, reps: int = 10) -> float:
    """FLOP/s of an n x n x n bf16 matrix product on ``device`` (median of ``reps``)."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    times = []
    for i in range(reps + 2):
        _sync(device)
        t0 = time.perf_counter()
        torch.mm(a, b)
        _sync(device)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _stepper(model: nn.Module, device: str, compiled: bool, idx: torch.Tensor, tgt: torch.Tensor):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    net = torch.compile(model) if compiled else model

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = net(idx)
        F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), tgt.reshape(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def compare(
    c: AndreaConfig,
    device: str,
    batches: tuple[int, ...],
    seq: int,
    modes: tuple[str, ...] = ("eager", "compiled"),
    reps: int = 10,
    warmup: int = 3,
    peak: float | None = None,
    measured_peak: float | None = None,
    progress=print,
) -> list[Row]:
    """Time ANDREA's step and the reference's, alternately, for every batch size and mode."""
    bad = [m for m in modes if m not in ("eager", "compiled")]
    if bad or not modes:
        raise ValueError(f"modes must be some of 'eager', 'compiled', got {list(modes)!r}")
    if seq > c.context_length:
        raise ValueError(f"seq {seq} exceeds the context length {c.context_length}")
    rows = []
    for B in batches:
        for mode in modes:
            progress(f"  B={B} T={seq} {mode}: building and warming up both models")
            torch.manual_seed(0)
            g = torch.Generator().manual_seed(B)
            idx = torch.randint(0, c.vocab_size, (B, seq), generator=g).to(device)
            tgt = torch.randint(0, c.vocab_size, (B, seq), generator=g).to(device)
            steps = {
                name: _stepper(make(c).to(device), device, mode == "compiled", idx, tgt)
                for name, make in (("andrea", Andrea), ("reference", TorchModulesGPT))
            }
            for _ in range(warmup):
                for step in steps.values():
                    step()
            times: dict[str, list[float]] = {name: [] for name in steps}
            for _ in range(reps):
                for name, step in steps.items():
                    _sync(device)
                    t0 = time.perf_counter()
                    step()
                    _sync(device)
                    times[name].append(time.perf_counter() - t0)
            t_ours, t_ref = (statistics.median(times[k]) for k in ("andrea", "reference"))
            flops = step_flops(c, B, seq) / t_ours
            rows.append(
                Row(
                    B,
                    seq,
                    mode,
                    B * seq / t_ours,
                    B * seq / t_ref,
                    flops / peak if peak else None,
                    flops / measured_peak if measured_peak else None,
                )
            )
            del steps
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


def table(rows: list[Row]) -> str:
    def pct(x):
        return "n/a" if x is None else f"{x:.1%}"

    head = "| B x T | mode | ANDREA tok/s | reference tok/s | ratio | MFU (datasheet) | MFU (measured matmul) |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.batch} x {r.seq} | {r.mode} | {r.andrea_tok_s:,.0f} | {r.reference_tok_s:,.0f} | {r.ratio:.3f} "
            f"| {pct(r.mfu_datasheet)} | {pct(r.mfu_measured)} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea.views.bench_gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--stand-in", action="store_true", help="a small model on the CPU (the rehearsal)")
    p.add_argument("--modes", default="eager,compiled", help="comma-separated: eager, compiled")
    p.add_argument("--reps", type=int, default=10, help="timed steps per model (median reported)")
    p.add_argument("--peak-tflops", type=float, help="the datasheet dense bf16 peak (tools/gpu_check.py BF16_PEAK)")
    a = p.parse_args(argv)
    modes = tuple(m for m in a.modes.split(",") if m)
    if a.stand_in:
        rows = compare(STAND_IN, "cpu", (2, 4), 64, modes, reps=a.reps, warmup=1)
        print(table(rows))
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: run with --stand-in for the CPU rehearsal", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    peak = a.peak_tflops * 1e12 if a.peak_tflops else None
    measured = matmul_bf16("cuda")
    said = f"{a.peak_tflops:g} TFLOP/s" if peak else "not given (--peak-tflops), MFU against it not computed"
    print(f"{name}: datasheet bf16 peak {said}; bf16 matmul 8192^3 measured {measured / 1e12:.0f} TFLOP/s")
    rows = compare(ANDREA_120M, "cuda", (16, 32), 1024, modes, reps=a.reps, peak=peak, measured_peak=measured)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
