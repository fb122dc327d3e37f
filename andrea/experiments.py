"""The named training runs the chapters cite, small enough for a laptop CPU, seeded and cached.

Each experiment returns a list of tidy rows (one per run) with the loss history, so a chapter can
plot them and state what they show. Results are cached in ``$ANDREA_CACHE/experiments`` keyed by
everything that defines the run (model and training config, data, code version), so rebuilding the
book does not retrain; delete the folder (or change anything) and the run happens again.

The runs use the byte tokenizer (vocabulary 256) on Python's documentation: the architecture
questions (norm placement, LayerScale, activation) do not need the 8449-token BPE, and a small
vocabulary keeps the output layer from dominating the cost of a narrow model.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from .config import AndreaConfig
from .data import cache_dir, load_token_data
from .train import TrainConfig, train

CACHE_VERSION = 2  # bump when training code changes in a way that changes results

BASE = AndreaConfig(vocab_size=256, context_length=128, d_model=64, n_layer=6, n_head=4)
BASE_TRAIN = TrainConfig(steps=400, batch_size=16, seq_len=64, lr=3e-3, warmup=50, eval_every=50, eval_batches=8)


def _key(model_cfg: AndreaConfig, train_cfg: TrainConfig, data_name: str) -> str:
    blob = json.dumps({"m": model_cfg.to_dict(), "t": asdict(train_cfg), "d": data_name, "v": CACHE_VERSION},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _path(model_cfg: AndreaConfig, train_cfg: TrainConfig, tokenizer: str) -> Path:
    folder = cache_dir() / "experiments"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{_key(model_cfg, train_cfg, tokenizer)}.json"


def _train_one(spec) -> dict:
    """Train one run (in a worker process, on one CPU thread) and cache its row."""
    import torch

    model_cfg, train_cfg, label, tokenizer = spec
    torch.set_num_threads(1)
    data = load_token_data(tokenizer)
    t0 = time.perf_counter()
    res = train(model_cfg, train_cfg, data, device="cpu", progress=False)
    h = res.history
    finite = [x for x in h["loss"] if math.isfinite(x)]
    row = {
        **label,
        "diverged": res.diverged,
        "steps": h["step"],
        "loss": [x if math.isfinite(x) else None for x in h["loss"]],
        "grad_norm": [x if math.isfinite(x) else None for x in h["grad_norm"]],
        "val_step": h["val_step"],
        "val_loss": h["val_loss"],
        "final_val_loss": h["val_loss"][-1] if h["val_loss"] and not res.diverged else None,
        "final_train_loss": (sum(finite[-20:]) / len(finite[-20:])) if finite and not res.diverged else None,
        "seconds": time.perf_counter() - t0,
        "model": model_cfg.to_dict(),
        "train": asdict(train_cfg),
    }
    path = _path(model_cfg, train_cfg, tokenizer)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(row))
    tmp.replace(path)
    return row


def run_all(specs: list, progress=None) -> list[dict]:
    """Rows for a list of runs (model config, train config, label[, tokenizer]), in order.

    Cached runs are read from disk; the others are trained in worker processes, one CPU thread
    each, as many at a time as there are cores (up to 4). Small models spend most of their time in
    per-operation overhead, which a second thread barely helps but a second process halves. Every
    run always trains on one thread, so a result does not depend on the machine's core count.
    """
    specs = [tuple(s) + ("bytes",) * (4 - len(s)) for s in specs]
    rows: list = [None] * len(specs)
    todo = []
    for i, (m, t, label, tok) in enumerate(specs):
        path = _path(m, t, tok)
        if path.is_file():
            rows[i] = {**json.loads(path.read_text()), **label}
        else:
            todo.append(i)
    if todo:
        load_token_data("bytes")  # build the shared caches once, before the workers start
        workers = max(1, min(4, os.cpu_count() or 1, len(todo)))
        ctx = multiprocessing.get_context("spawn")  # safe inside Jupyter kernels and threads
        from tqdm import tqdm

        from .notebook import show_progress

        bar = tqdm(total=len(todo), desc=f"training {len(todo)} runs ({workers} at a time)", unit="run",
                   disable=not show_progress(), file=sys.stderr)
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for i, row in zip(todo, pool.map(_train_one, [specs[i] for i in todo])):
                rows[i] = row
                bar.update(1)
                if progress:
                    progress(row)
        bar.close()
    return rows


def norm_and_warmup(lrs=(1e-3, 3e-3), n_layer: int = 6, progress=None) -> list[dict]:
    """Chapter 3: pre-norm vs post-norm, each with and without warmup, at two peak learning rates."""
    specs = [(replace(BASE, norm=norm, n_layer=n_layer), replace(BASE_TRAIN, lr=lr, warmup=warmup),
              {"norm": norm, "warmup": warmup, "lr": lr})
             for lr in lrs for norm in ("pre", "post") for warmup in (0, BASE_TRAIN.warmup)]
    return run_all(specs, progress)


def layerscale_depth(n_layer: int = 48, values=(None, 1e-1, 1e-4, 1e-6), progress=None) -> list[dict]:
    """Chapter 7: a deep, narrow pre-norm stack with LayerScale off and at several initial lambdas."""
    m0 = replace(BASE, d_model=32, n_head=2, n_layer=n_layer)
    t = replace(BASE_TRAIN, steps=250, lr=3e-3, warmup=20, seq_len=32, batch_size=16)
    specs = [(replace(m0, layerscale=lam), t, {"layerscale": "off" if lam is None else lam}) for lam in values]
    return run_all(specs, progress)


def gelu_vs_relu(progress=None) -> list[dict]:
    """Chapter 5: the same model with GELU (tanh) and with ReLU; equal parameter counts, two seeds."""
    specs = [(replace(BASE, activation=act, n_layer=4), replace(BASE_TRAIN, steps=300, seed=seed),
              {"activation": act, "seed": seed}) for act in ("gelu_tanh", "relu") for seed in (0, 1)]
    return run_all(specs, progress)
