"""The training command line: ``python -m andrea.training.train`` (or ``python -m andrea.training.cli``).

    python -m andrea.training.train --preset tiny            # ~1 minute on a laptop CPU, then prints samples
    python -m andrea.training.train --preset andrea-120m     # the full model (meant for a GPU)
    torchrun --nproc_per_node=2 -m andrea.training.train --preset tiny --device cpu   # DistributedDataParallel

Every option is checked before training starts, and a bad one is named with what is allowed (rc 2): the
learning rate, batch size and seed within bounds (a batch that cannot fit in memory is refused, not left to
the kernel's out-of-memory killer), the corpus a readable file, the output folder named. A disk that fills
while a checkpoint is written stops the run with its message (rc 1), the checkpoint already there kept.

It lives apart from ``train`` (the training loop), whose syntax tree is part of every stored result's key:
the command line computes none of them (``tools/rekey.py --moved-out``).
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from ..device import check_device, pick_device
from ..model.transformer import Andrea
from .checkpoint import RunDir, describe
from .data import load_token_data
from .train import PRESETS, _dist_info, sample, train

EXIT_DIVERGED = 3
MAX_BATCH = 1024  # sequences per step: more does not fit in memory at these sizes (use more steps instead)
MAX_LR = 1e4  # AdamW's peak learning rate: room for a run made to diverge (tests/test_faults.py uses 1000);
# the presets use 6e-4 to 3e-3, and 1e308 overflows
MAX_SEED = 2**63 - 1  # torch.manual_seed takes a 64-bit seed


def _shown_path(text: str) -> str:
    """A path as the reader typed it, shortened when long (a 300-character name is named, not printed)."""
    return repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text)} characters)"


def check_options(a: argparse.Namespace) -> None:
    """Every bad option named with what is allowed (ValueError), before anything is read or trained."""
    bad = []
    if a.batch_size is not None and not 1 <= a.batch_size <= MAX_BATCH:
        bad.append(
            f"--batch-size must be an integer from 1 to {MAX_BATCH} (sequences per step; a larger batch does not "
            f"fit in memory here: train more steps instead), got {a.batch_size}"
        )
    if a.lr is not None and not (math.isfinite(a.lr) and 0 < a.lr <= MAX_LR):
        bad.append(
            f"--lr must be a number greater than 0 and at most {MAX_LR:g} (the presets use 6e-4 to 3e-3), got {a.lr:g}"
        )
    if a.seed is not None and not 0 <= a.seed <= MAX_SEED:
        bad.append(f"--seed must be an integer from 0 to {MAX_SEED} (2**63 - 1), got {a.seed}")
    if a.steps is not None and a.steps < 1:
        bad.append(f"--steps must be a positive integer, got {a.steps}")
    if a.eval_every is not None and a.eval_every < 1:
        bad.append(f"--eval-every must be a positive integer, got {a.eval_every}")
    if a.samples < 0:
        bad.append(f"--samples must be >= 0, got {a.samples}")
    if a.out is not None and not a.out.strip():
        bad.append(f"--out must name a folder for the checkpoints, got {a.out!r}")
    if a.corpus is not None:
        if not a.corpus.strip():
            bad.append(f"--corpus must name a UTF-8 text file, got {a.corpus!r}")
        else:
            try:
                Path(a.corpus).exists()  # a missing or unusable file is named where it is read (data.py)
            except OSError as e:  # a name too long for the file system, a folder that cannot be searched
                bad.append(f"--corpus {_shown_path(a.corpus)} cannot be read: {e.strerror or e}")
    if a.resume and a.overwrite:
        bad.append("--resume and --overwrite contradict each other: choose one")
    if bad:
        raise ValueError("; ".join(bad))


# A disk that is full, over its quota or read-only, or a folder that cannot be written: said, not a traceback
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG}


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m andrea.training.train",
        description="Train ANDREA on Python's documentation (or any UTF-8 text).",
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny", help="model and schedule (default: tiny)")
    p.add_argument("--steps", type=int, help="optimizer steps (default: the preset's)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    p.add_argument("--batch-size", type=int, help="sequences per step (default: the preset's)")
    p.add_argument(
        "--eval-every", type=int, help="validate and save a checkpoint every N steps (default: the preset's)"
    )
    p.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: the best available)")
    p.add_argument("--out", help="folder for last.pt (default: runs/PRESET)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    p.add_argument("--overwrite", action="store_true", help="start afresh even if OUT/last.pt exists (replaces it)")
    p.add_argument(
        "--allow-changes",
        action="store_true",
        help="with --resume: continue even if settings differ from the checkpoint's",
    )
    p.add_argument("--corpus", help="a UTF-8 text file to train on instead of Python's docs")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (CUDA)")
    p.add_argument("--samples", type=int, default=2, help="samples to print at the end (default: 2)")
    p.add_argument("--seed", type=int, help="random seed (default: 0)")
    a = p.parse_args(argv)
    try:
        check_options(a)
    except ValueError as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    model_cfg, train_cfg, tok = PRESETS[a.preset]
    out = Path(a.out) if a.out is not None else Path("runs") / a.preset
    overrides = {
        k: v
        for k, v in {
            "steps": a.steps,
            "lr": a.lr,
            "batch_size": a.batch_size,
            "seed": a.seed,
            "eval_every": a.eval_every,
        }.items()
        if v is not None
    }
    world, rank = _dist_info()
    try:
        train_cfg = replace(train_cfg, compile=a.compile, **overrides)
        device = str(check_device(a.device, "--device")) if a.device is not None else pick_device()
        if rank == 0:  # checked before the corpus is even read: the folder can be written and is free
            early = RunDir(out)
            if not a.resume:
                early.check_fresh(a.overwrite)
        data = load_token_data(tok, a.corpus)
        model_cfg = replace(model_cfg, vocab_size=data.vocab_size)
        if rank == 0:
            n = sum(q.numel() for q in Andrea(model_cfg).parameters()) if model_cfg.d_model < 512 else None
            print(
                f"preset {a.preset}: d_model={model_cfg.d_model} n_layer={model_cfg.n_layer} "
                f"{'params=' + format(n, ',') + ' ' if n else ''}train tokens={len(data.train):,} "
                f"device={device} processes={world} out={out}",
                file=sys.stderr,
            )
        result = train(
            model_cfg,
            train_cfg,
            data,
            device=device,
            out_dir=out,
            resume=a.resume,
            overwrite=a.overwrite,
            allow_changes=a.allow_changes,
        )
    except (ValueError, FileNotFoundError) as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    except OSError as e:  # a full disk while a checkpoint is written (its message names the file and the space)
        if e.errno is not None and e.errno not in _DISK_ERRNOS:
            raise
        saved = out / "last.pt"
        then = f"; continue from it with --resume --out {out}" if os.path.exists(saved) else ""
        print(f"{p.prog}: error: {e}{then}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "\ninterrupted before training started (or by a second Ctrl-C): nothing new was saved; "
            f"checkpoint: {describe(out / 'last.pt')}",
            file=sys.stderr,
        )
        return 130
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    if rank != 0:
        return 0
    ckpt = describe(out / "last.pt")
    if result.diverged:
        print(
            f"diverged at step {result.diverged_at}: the loss or the gradient became inf/NaN. "
            f"Last good checkpoint: {ckpt}. Try a lower --lr."
        )
        return EXIT_DIVERGED
    tok_s = f"{result.tokens_per_s:,.0f} tokens/s" if math.isfinite(result.tokens_per_s) else "no steps run"
    val = f"val loss {result.final_val_loss:.3f}" if result.history["val_loss"] else "no validation yet"
    if result.interrupted:
        print(
            f"interrupted by {result.signal} at step {result.steps_done}, {val}, {tok_s}; checkpoint: {ckpt}; "
            f"continue with --resume --out {out}"
        )
        return 128 + int(getattr(signal, result.signal or "SIGINT"))
    print(f"done: step {result.steps_done}, {val}, {tok_s}; checkpoint: {ckpt}")
    for i in range(a.samples):
        print(f"--- sample {i + 1} ---")
        print(sample(result.model, data.tokenizer, "The ", max_new_tokens=60, seed=i))
    return 0


if __name__ == "__main__":
    sys.exit(main())
