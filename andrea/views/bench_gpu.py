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

The levers the issue names are measured one by one, as rows of their own beside the plain rows
(``LEVERS``; ``--levers``): each changes one thing in both models' step at one batch size and mode, so
that the device run tells which of them pays before any of them goes into the model.

    python -m andrea.views.bench_gpu --levers pad-vocab,cudnn-attention,chunked-loss   # B=32, eager
    python -m andrea.views.bench_gpu --levers max-autotune --modes compiled           # minutes to compile

``tools/gpu_check.py`` runs it as its ``bench`` step; ``make gpu-rehearse`` runs the stand-in.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea
from .bench import step_flops

STAND_IN = replace(ANDREA_120M, d_model=64, n_layer=2, n_head=4, context_length=64)
MODES = ("eager", "compiled")
# One lever at a time, applied to both models' step (the model code itself is not changed: see each line).
LEVERS = {
    "pad-vocab": "the vocabulary padded to a multiple of 64 (8449 -> 8512) by the config, the logits cut back "
    "to the real tokens before the loss (the extra rows are never indexed; FLOPs counted on the real ones)",
    "cudnn-attention": "scaled_dot_product_attention restricted to torch's cuDNN backend (CUDA only)",
    "chunked-loss": f"the tied head and the loss over {4} chunks of tokens, each chunk recomputed in the "
    "backward pass, so that the (B*T, V) fp32 logits never exist at once",
    "max-autotune": "torch.compile(mode='max-autotune'): autotuned kernels and CUDA graphs (minutes of compiling)",
}
LOSS_CHUNKS = 4
PAD_MULTIPLE = 64


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

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """The final LayerNorm's output (B, T, C): everything but the head."""
        T = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        return self.norm(self.blocks(x, mask=mask, is_causal=True))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.features(idx) @ self.tok.weight.T  # tied head


class Features(nn.Module):
    """A model without its head: the input of the chunked loss. For ANDREA, its forward's own parts in its
    order (its input check included), read from the module, not a copy of its code."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        m: Any = self.model
        if isinstance(m, TorchModulesGPT):
            return m.features(idx)
        m.check_input(idx)
        x = m.embed(idx)  # (B, T, C)
        for block in m.blocks:
            x = block(x)
        return m.final_norm(x)  # (B, T, C)


def head_weight(model: nn.Module) -> torch.Tensor:
    """The tied head's (V, C) weight: the token embedding."""
    m: Any = model
    return m.tok.weight if isinstance(m, TorchModulesGPT) else m.token_embedding.weight


def chunked_loss(h: torch.Tensor, weight: torch.Tensor, tgt: torch.Tensor, chunks: int = LOSS_CHUNKS):
    """Mean cross-entropy of ``h @ weight.T`` against ``tgt``, over ``chunks`` slices of the tokens, each
    slice's logits recomputed in the backward pass instead of kept: equal to the plain loss (tested)."""

    def part(hc: torch.Tensor, tc: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy((hc @ weight.T).float(), tc, reduction="sum")

    h2, t2 = h.reshape(-1, h.size(-1)), tgt.reshape(-1)
    total = sum(checkpoint(part, hc, tc, use_reentrant=False) for hc, tc in zip(h2.chunk(chunks), t2.chunk(chunks)))
    return total / t2.numel()


def padded(c: AndreaConfig, multiple: int = PAD_MULTIPLE) -> AndreaConfig:
    """``c`` with its vocabulary rounded up to a multiple of ``multiple`` (8449 -> 8512)."""
    return replace(c, vocab_size=-(-c.vocab_size // multiple) * multiple)


@dataclass
class Row:
    batch: int
    seq: int
    mode: str
    andrea_tok_s: float
    reference_tok_s: float
    mfu_datasheet: float | None  # against the datasheet's bf16 peak (None: the GPU is not in the table)
    mfu_measured: float | None  # against the bf16 matrix product measured in this run
    lever: str = ""  # one of LEVERS, or "" for the plain step

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


def _stepper(model: nn.Module, device: str, mode: str, idx: torch.Tensor, tgt: torch.Tensor, lever: str, vocab: int):
    """One training step of ``model`` (forward in bf16 autocast on CUDA, loss, backward, AdamW) with ``lever``."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    body: Any = Features(model) if lever == "chunked-loss" else model
    if mode == "compiled":
        # static shapes: a row at another batch size compiles its own graph, not a dynamic-shape one
        body = torch.compile(body, mode="max-autotune" if lever == "max-autotune" else None, dynamic=False)
    weight = head_weight(model)

    def attention():
        if lever != "cudnn-attention":
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.CUDNN_ATTENTION)

    def step() -> None:
        with attention(), torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            out = body(idx)
            if lever == "chunked-loss":
                loss = chunked_loss(out, weight, tgt)
            else:
                logits = out[..., :vocab]  # the padded vocabulary's extra logits cut off (else a no-op)
                loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def check_lever(lever: str, mode: str, device: str) -> None:
    """A ValueError naming a lever that does not exist, or cannot run in this mode or on this device."""
    if lever and lever not in LEVERS:
        raise ValueError(f"lever must be one of {list(LEVERS)}, got {lever!r}")
    if lever == "max-autotune" and mode != "compiled":
        raise ValueError(f"lever 'max-autotune' is a compile mode: it needs mode 'compiled', got {mode!r}")
    if lever == "cudnn-attention" and device != "cuda":
        raise ValueError(f"lever 'cudnn-attention' needs CUDA (cuDNN), got device {device!r}")


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
    lever: str = "",
) -> list[Row]:
    """Time ANDREA's step and the reference's, alternately, for every batch size and mode (with ``lever``,
    one of LEVERS, applied to both)."""
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"modes must be some of {', '.join(map(repr, MODES))}, got {list(modes)!r}")
    for mode in modes:
        check_lever(lever, mode, device)
    if seq > c.context_length:
        raise ValueError(f"seq {seq} exceeds the context length {c.context_length}")
    built = padded(c) if lever == "pad-vocab" else c
    rows = []
    for B in batches:
        for mode in modes:
            progress(f"  B={B} T={seq} {mode}{' ' + lever if lever else ''}: building and warming up both models")
            torch.manual_seed(0)
            g = torch.Generator().manual_seed(B)
            idx = torch.randint(0, c.vocab_size, (B, seq), generator=g).to(device)
            tgt = torch.randint(0, c.vocab_size, (B, seq), generator=g).to(device)
            steps = {
                name: _stepper(make(built).to(device), device, mode, idx, tgt, lever, c.vocab_size)
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
                    lever,
                )
            )
            del steps
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


def table(rows: list[Row]) -> str:
    def pct(x):
        return "n/a" if x is None else f"{x:.1%}"

    head = "| B x T | mode | lever | ANDREA tok/s | reference tok/s | ratio | MFU (datasheet) | MFU (measured matmul) |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.batch} x {r.seq} | {r.mode} | {r.lever or '-'} | {r.andrea_tok_s:,.0f} "
            f"| {r.reference_tok_s:,.0f} | {r.ratio:.3f} | {pct(r.mfu_datasheet)} | {pct(r.mfu_measured)} |"
        )
    return "\n".join(lines)


def gains(rows: list[Row]) -> dict[tuple[str, int, str], tuple[float, float]]:
    """For each lever row: (ANDREA's, the reference's) tokens/s over their plain row at the same batch and
    mode, keyed (lever, batch, mode). A lever without its plain row beside it is left out."""
    plain = {(r.batch, r.mode): r for r in rows if not r.lever}
    out = {}
    for r in rows:
        base = plain.get((r.batch, "compiled" if r.lever == "max-autotune" else r.mode))
        if r.lever and base is not None:
            out[(r.lever, r.batch, r.mode)] = (
                r.andrea_tok_s / base.andrea_tok_s,
                r.reference_tok_s / base.reference_tok_s,
            )
    return out


def summary(rows: list[Row]) -> str:
    """One line for a table cell: each plain row's ratio (and MFU), each lever's gain."""
    parts = []
    for r in rows:
        if not r.lever:
            mfu = "" if r.mfu_datasheet is None else f", MFU {r.mfu_datasheet:.1%}"
            parts.append(f"B={r.batch} {r.mode} x{r.ratio:.3f}{mfu}")
    for (lever, b, mode), (ours, ref) in gains(rows).items():
        parts.append(f"{lever} (B={b} {mode}) andrea x{ours:.3f} ref x{ref:.3f}")
    return "; ".join(parts)


def parse_levers(text: str) -> tuple[str, ...]:
    levers = tuple(x for x in text.split(",") if x)
    bad = [x for x in levers if x not in LEVERS]
    if bad:
        raise ValueError(f"--levers takes some of {', '.join(LEVERS)}, got {', '.join(map(repr, bad))}")
    return levers


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea.views.bench_gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--stand-in", action="store_true", help="a small model on the CPU (the rehearsal)")
    p.add_argument("--modes", default="eager,compiled", help="comma-separated: eager, compiled")
    p.add_argument("--reps", type=int, default=10, help="timed steps per model (median reported)")
    p.add_argument("--peak-tflops", type=float, help="the datasheet dense bf16 peak (tools/gpu_check.py BF16_PEAK)")
    p.add_argument("--levers", default="", help=f"comma-separated, each a row of its own: {', '.join(LEVERS)}")
    p.add_argument("--lever-batch", type=int, default=32, help="the batch size of the lever rows (default 32)")
    a = p.parse_args(argv)
    modes = tuple(m for m in a.modes.split(",") if m)
    try:
        levers = parse_levers(a.levers)
    except ValueError as e:
        p.error(str(e))
    if a.stand_in:
        c, device, batches, seq, lever_batch, warm, peak, measured = STAND_IN, "cpu", (2, 4), 64, 2, 1, None, None
    elif not torch.cuda.is_available():
        print("no CUDA device: run with --stand-in for the CPU rehearsal", file=sys.stderr)
        return 2
    else:
        c, device, batches, seq, lever_batch, warm = ANDREA_120M, "cuda", (16, 32), 1024, a.lever_batch, 3
        peak = a.peak_tflops * 1e12 if a.peak_tflops else None
        measured = matmul_bf16("cuda")
        said = f"{a.peak_tflops:g} TFLOP/s" if peak else "not given (--peak-tflops), MFU against it not computed"
        name = torch.cuda.get_device_name()
        print(f"{name}: datasheet bf16 peak {said}; bf16 matmul 8192^3 measured {measured / 1e12:.0f} TFLOP/s")
    kw = dict(reps=a.reps, warmup=warm, peak=peak, measured_peak=measured)
    rows = compare(c, device, batches, seq, modes, **kw)
    for lever in levers:
        lever_modes = ("compiled",) if lever == "max-autotune" else modes
        rows += compare(c, device, (lever_batch,), seq, lever_modes, lever=lever, **kw)
    print(table(rows))
    if levers:
        print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
