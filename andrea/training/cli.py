"""The training command line: ``python -m andrea.training.train`` (or ``python -m andrea.training.cli``).

    python -m andrea.training.train --preset tiny            # ~1 minute on a laptop CPU, then prints samples
    python -m andrea.training.train --preset andrea-120m     # the full model on Python's manuals (meant for a GPU)
    torchrun --nproc_per_node=2 -m andrea.training.train --preset tiny --device cpu   # DistributedDataParallel

Every option is checked before training starts, and a bad one is named with what is allowed (rc 2): the
learning rate, batch size and seed within bounds (a batch that cannot fit in memory is refused, not left to
the kernel's out-of-memory killer), the corpus a readable file, the output folder named. A disk that fills
while a checkpoint is written stops the run with its message (rc 1), the checkpoint already there kept.

The text: the tiny presets train on the chapters' corpus (Python's docstrings, 0.47 M tokens); ``andrea-120m``
on the manuals (``manuals``: 2.6 M training tokens, 0.32 M held out by file, in the tokenizer chapter 8's model
was trained with), which twelve blocks of width 768 do not memorise within a few hundred steps. ``--data``
chooses either for any BPE preset; ``--corpus FILE`` trains on a file of your own instead.

Held-out loss is computed every ``--eval-every`` steps; ``best.pt`` beside ``last.pt`` keeps the weights of the
lowest so far, and ``--patience N`` stops the run once it has risen N evaluations in a row (``heldout``).
``--time-limit S`` stops it (saving ``last.pt``) after S seconds, compilation included.

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
from .heldout import BEST, HeldOutWatch
from .train import PRESETS, _dist_info, sample, train

EXIT_DIVERGED = 3
MAX_BATCH = 1024  # sequences per step: more does not fit in memory at these sizes (use more steps instead)
MAX_LR = 1e4  # AdamW's peak learning rate: room for a run made to diverge (tests/test_faults.py uses 1000);
# the presets use 6e-4 to 3e-3, and 1e308 overflows
MAX_SEED = 2**63 - 1  # torch.manual_seed takes a 64-bit seed
DATA = {"andrea-120m": "manuals"}  # the text a preset trains on without --data or --corpus (else "docs")
PATIENCE = {"andrea-120m": 3}  # --patience's default: 0 (never stop early) for the tiny demos
DATA_NAMES = {
    "docs": "the chapters' corpus (Python 3.11's docstrings and help topics)",
    "manuals": "the manuals (Python 3.11's reStructuredText manuals, chapter 8's text, held out by file)",
}


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
    if a.patience is not None and a.patience < 0:
        bad.append(f"--patience must be an integer >= 0 (evaluations in a row; 0: never stop early), got {a.patience}")
    if a.time_limit is not None and not (math.isfinite(a.time_limit) and a.time_limit > 0):
        bad.append(f"--time-limit must be a number of seconds greater than 0, got {a.time_limit:g}")
    if a.data is not None and a.corpus is not None:
        bad.append(f"--data {a.data} and --corpus name two texts: choose one")
    if a.data == "manuals" and PRESETS[a.preset][2] != "bpe":
        bad.append(
            f"--data manuals needs a BPE preset (the manuals come in chapter 8's 8449-token BPE); "
            f"--preset {a.preset} uses {PRESETS[a.preset][2]}: choose tiny or andrea-120m"
        )
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
    p.add_argument("--corpus", help="a UTF-8 text file to train on instead of the preset's text")
    p.add_argument(
        "--data",
        choices=sorted(DATA_NAMES),
        help="the book's text to train on: docs (the chapters' corpus) or manuals (chapter 8's); "
        "default: manuals for andrea-120m, docs otherwise",
    )
    p.add_argument(
        "--patience",
        type=int,
        help="stop when the held-out loss has risen this many evaluations in a row (0: never; "
        "default: 3 for andrea-120m, else 0)",
    )
    p.add_argument("--time-limit", type=float, help="stop after this many seconds of training (saving last.pt)")
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
            check_best(out, a.resume, a.overwrite)
        data, which, tok_words = read_data(a, tok)
        model_cfg = replace(model_cfg, vocab_size=data.vocab_size)
        if rank == 0:
            n = sum(q.numel() for q in Andrea(model_cfg).parameters()) if model_cfg.d_model < 512 else None
            print(
                f"preset {a.preset}: d_model={model_cfg.d_model} n_layer={model_cfg.n_layer} "
                f"{'params=' + format(n, ',') + ' ' if n else ''}device={device} processes={world} out={out}\n"
                f"corpus: {which}; train tokens={len(data.train):,} held-out tokens={len(data.val):,}; "
                f"tokenizer: {tok_words}",
                file=sys.stderr,
            )
        patience = a.patience if a.patience is not None else PATIENCE.get(a.preset, 0)
        watch = HeldOutWatch(
            data, train_cfg, device, out if rank == 0 else None, patience, a.time_limit, fresh=not a.resume
        )
        if a.resume and rank == 0:
            watch.resume_from(out)
        result = train(
            model_cfg,
            train_cfg,
            data,
            device=device,
            out_dir=out,
            resume=a.resume,
            overwrite=a.overwrite,
            allow_changes=a.allow_changes,
            callback=watch.callback,
            monitor=watch.monitor,
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
    if result.interrupted and watch.stopped_at is not None:  # the watch asked the loop to stop
        print(f"{watch.summary()}; {val}, {tok_s}; checkpoint: {ckpt}")
    elif result.interrupted:
        print(
            f"interrupted by {result.signal} at step {result.steps_done}, {val}, {tok_s}; checkpoint: {ckpt}; "
            f"continue with --resume --out {out}"
        )
        return 128 + int(getattr(signal, result.signal or "SIGINT"))
    else:
        print(f"done: step {result.steps_done}, {val}, {tok_s}; checkpoint: {ckpt}")
        print(watch.summary())
    print(f"held-out loss by step: {watch.curve_text()}")
    steady = watch.steady_tokens_per_s(train_cfg.batch_size * train_cfg.seq_len * world)
    if math.isfinite(steady):
        print(f"after the first step: {steady:,.0f} tokens/s (evaluations and checkpoints included)")
    model = result.model
    if a.samples and watch.best is not None and watch.path is not None and watch.best[0] != result.steps_done:
        model = Andrea.load(watch.path, map_location=result.model.device)
        print(f"samples from {BEST} (step {watch.best[0]}):")
    for i in range(a.samples):
        print(f"--- sample {i + 1} ---")
        print(sample(model, data.tokenizer, "The ", max_new_tokens=60, seed=i))
    return 0


def read_data(a: argparse.Namespace, tokenizer: str):
    """The token data the options name, with a few words saying which text and which tokenizer it is."""
    name = a.data or DATA.get(a.preset, "docs")
    if a.corpus is None and name == "manuals":
        from . import manuals

        data = manuals.load()
        return (
            data,
            DATA_NAMES[name],
            f"chapter 8's byte-level BPE, {data.vocab_size:,} tokens ({manuals.TOKENIZER.name})",
        )
    data = load_token_data(tokenizer, a.corpus)
    which = _shown_path(a.corpus) if a.corpus is not None else DATA_NAMES[name]
    kind = "byte-level BPE" if tokenizer == "bpe" else "one token per byte"
    trained_on = f", trained on {'that file' if a.corpus is not None else 'it'}" if tokenizer == "bpe" else ""
    return data, which + " (the last 10 % held out)", f"{kind}, {data.vocab_size:,} tokens{trained_on}"


def check_best(out: Path, resume: bool, overwrite: bool) -> None:
    """A fresh run does not put its last.pt beside another run's best.pt: refused unless --overwrite (then the
    watch removes it once the run holds the folder's lock, before its first step)."""
    best = out / BEST
    if not resume and not overwrite and best.exists():
        raise ValueError(
            f"{str(best)!r} holds another run's best checkpoint: pass --overwrite to replace it, "
            "or choose another --out"
        )


if __name__ == "__main__":
    sys.exit(main())
