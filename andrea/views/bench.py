"""Benchmarks (``make bench``): ratios against references measured in the same run.

These machines are shared and noisy, so every speed is reported next to a reference measured
alternately in the same process, and as a ratio.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import sys
import time
from dataclasses import replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..measure.probe import gradient_flow, random_batch
from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea


def _timeit(fn, warmup=2, reps=7):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _alternate(fa, fb, rounds=5, warmup=2):
    for _ in range(warmup):
        fa(), fb()
    ta, tb = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t0)  # noqa: E702
        t0 = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t0)  # noqa: E702
    return statistics.median(ta), statistics.median(tb)


class ReferenceStack(nn.Module):
    """torch.nn.TransformerEncoderLayer(norm_first=True, gelu) x n with a causal mask, plus the same
    embeddings and tied head as Andrea: the reference the benchmark compares against."""

    def __init__(self, c: AndreaConfig):
        super().__init__()
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.context_length, c.d_model)
        self.layers = nn.ModuleList(
            [
                nn.TransformerEncoderLayer(
                    c.d_model, c.n_head, c.d_hidden, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
                )
                for _ in range(c.n_layer)
            ]
        )
        self.norm = nn.LayerNorm(c.d_model)

    def forward(self, idx):
        T = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.norm(x) @ self.tok.weight.T


def step_flops(c: AndreaConfig, B: int, T: int) -> float:
    """Matmul FLOPs of one forward+backward (3x forward): projections, attention, MLP, head."""
    d, h, L, V = c.d_model, c.d_hidden, c.n_layer, c.vocab_size
    per_token_layer = 2 * (4 * d * d + 2 * d * h) + 2 * 2 * T * d  # weights + attention scores/values (full T)
    fwd = B * T * (L * per_token_layer + 2 * d * V)
    return 3.0 * fwd


def matmul_peak(n=2048, reps=5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    t = statistics.median(_timeit(lambda: torch.mm(a, b), reps=reps))
    return 2 * n**3 / t


def bench_vs_reference(rows):
    c = replace(ANDREA_120M, n_layer=2)
    B, T = 4, 256
    torch.manual_seed(0)
    ours, ref = Andrea(c), ReferenceStack(c)
    idx, tgt = random_batch(c.vocab_size, B, T)

    def step(model):
        def run():
            logits = model(idx)
            F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1)).backward()
            model.zero_grad(set_to_none=True)

        return run

    t_ours, t_ref = _alternate(step(ours), step(ref), rounds=7)
    peak = matmul_peak()
    flops = step_flops(c, B, T)
    rows.append(("fwd+bwd tokens/s, Andrea (d768, L2, T256, B4)", f"{B * T / t_ours:,.0f}", ""))
    rows.append(("fwd+bwd tokens/s, nn.TransformerEncoderLayer reference", f"{B * T / t_ref:,.0f}", ""))
    rows.append(
        (
            "  ratio Andrea / reference (goal >= 1.0)",
            f"{t_ref / t_ours:.2f}",
            "PASS" if t_ref / t_ours >= 1.0 else "below goal",
        )
    )
    rows.append(("fp32 matmul peak (2048^3 torch.mm), GFLOP/s", f"{peak / 1e9:,.1f}", ""))
    rows.append(("Andrea step GFLOP/s", f"{flops / t_ours / 1e9:,.1f}", ""))
    rows.append(
        (
            "  fraction of matmul peak (goal >= 0.8)",
            f"{flops / t_ours / peak:.2f}",
            "PASS" if flops / t_ours / peak >= 0.8 else "below goal",
        )
    )


def bench_probe(rows):
    cfg = AndreaConfig(d_model=128, n_layer=48, n_head=4, context_length=64)
    torch.manual_seed(0)
    m = Andrea(cfg)
    idx, tgt = random_batch(cfg.vocab_size, 4, 64)
    t = statistics.median(_timeit(lambda: gradient_flow(m, idx, tgt), reps=9))
    rows.append(
        (
            "gradient_flow latency, depth 48, d128, T64, B4 (goal < 250 ms)",
            f"{t * 1e3:.0f} ms",
            "PASS" if t < 0.25 else "above goal",
        )
    )


def bench_explorer(rows):
    from . import explorer as E
    from .widgets import GradientFlowExplorer

    for depth in (12, 48, 96):
        s = E.Setting(depth=depth - 1, norm="post")  # not shipped: a fresh model and a probe
        t = statistics.median(_timeit(lambda: E.measure(s), warmup=1, reps=5))
        rows.append(
            (
                f"explorer probe (fresh model + gradient_flow), post-norm, depth {depth - 1}, width {E.DEFAULT_WIDTH}",
                f"{t * 1e3:.0f} ms",
                "",
            )
        )
    # Post-norm: the shipped measurements hold it only at the grid depths (pre-norm without LayerScale
    # is shipped at every depth, as the reference curve), so the depths next to a grid depth are
    # computed live; the status line says so, and is checked.
    w = GradientFlowExplorer(depth=12, norm="post")
    for depth in (12, 48, 96):
        times = []
        for d in (depth - 3, depth - 2, depth - 1):  # never seen before, off the grid
            t0 = time.perf_counter()
            w.controls["depth"].value = d
            times.append(time.perf_counter() - t0)
            if ">computed in" not in w.status.value:
                raise RuntimeError(f"bench: depth {d} was not computed live: {w.status.value}")
        t_off = statistics.median(times)
        t0 = time.perf_counter()
        w.controls["depth"].value = depth  # on the shipped grid
        t_on = time.perf_counter() - t0
        rows.append(
            (
                f"widget update incl. figure, post-norm, depth {depth - 3}..{depth - 1} (computed; goal < 0.5 s at 96)",
                f"{t_off * 1e3:.0f} ms",
                "PASS" if depth < 96 or t_off < 0.5 else "above goal",
            )
        )
        rows.append((f"widget update, depth {depth} (shipped grid setting)", f"{t_on * 1e3:.0f} ms", ""))
    t0 = time.perf_counter()
    w.controls["depth"].value = 95
    rows.append(("widget update, setting seen before (cache)", f"{(time.perf_counter() - t0) * 1e3:.0f} ms", ""))
    t0 = time.perf_counter()
    grid = E.grid_rows()
    t_grid = time.perf_counter() - t0
    size = len(json.dumps(grid, separators=(",", ":")))
    from .static_explorer import StaticExplorer

    rows.append(("static explorer rows from the shipped measurements", f"{t_grid * 1e3:.0f} ms", ""))
    rows.append(
        (
            "static explorer: grid JSON / whole embed (goal < 1 MB)",
            f"{size / 1e3:.0f} kB / {len(StaticExplorer().html()) / 1e3:.0f} kB",
            "",
        )
    )


def bench_120m(rows):
    c = ANDREA_120M
    torch.manual_seed(0)
    gc.collect()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    m = Andrea(c)
    idx, tgt = random_batch(c.vocab_size, 4, 256)

    def run():
        m.loss(idx, tgt).backward()
        m.zero_grad(set_to_none=True)

    t = statistics.median(_timeit(run, warmup=1, reps=3))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows.append(("ANDREA-120M fwd+bwd, B4 T256, CPU", f"{t:.2f} s ({4 * 256 / t:,.0f} tok/s)", ""))
    rows.append(
        ("  peak RSS of the process after it", f"{rss / 1024:,.0f} MB (before the model: {rss0 / 1024:,.0f} MB)", "")
    )


def bench_train_tiny(rows):
    from ..training.data import load_token_data
    from ..training.train import PRESETS, train

    mc, tc, tok = PRESETS["tiny"]
    data = load_token_data(tok)
    res = train(
        replace(mc, vocab_size=data.vocab_size),
        replace(tc, steps=30, eval_every=1000),
        data,
        device="cpu",
        progress=False,
    )
    rows.append(("training tokens/s, tiny preset, CPU", f"{res.tokens_per_s:,.0f}", ""))


def bench_gpu(rows):
    if not torch.cuda.is_available():
        rows.append(("GPU benchmarks (ANDREA-120M bf16 training step, torch.compile)", "skipped: no CUDA device", ""))
        return
    c = ANDREA_120M
    dev = "cuda"
    B, T = 16, 1024
    for compiled in (False, True):
        torch.manual_seed(0)
        m = Andrea(c).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        net = torch.compile(m) if compiled else m
        idx, tgt = random_batch(c.vocab_size, B, T, device=dev)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = net(idx)
            F.cross_entropy(logits.float().reshape(-1, c.vocab_size), tgt.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()

        t = statistics.median(_timeit(step, warmup=3, reps=10))
        rows.append(
            (
                f"ANDREA-120M train step, bf16 autocast{', torch.compile' if compiled else ''} "
                f"({torch.cuda.get_device_name()})",
                f"{B * T / t:,.0f} tok/s",
                "",
            )
        )


def main() -> int:
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(
        f"andrea benchmarks: torch {torch.__version__}, {torch.get_num_threads()} threads, {sys.platform}", flush=True
    )
    rows: list = []
    for fn in (bench_vs_reference, bench_probe, bench_explorer, bench_120m, bench_train_tiny, bench_gpu):
        print(f"  running {fn.__name__} ...", flush=True)
        fn(rows)
    w = max(len(r[0]) for r in rows)
    print()
    for name, value, verdict in rows:
        print(f"{name:<{w}}  {value:>28}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
