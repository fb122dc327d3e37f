"""Training ANDREA: AdamW, warmup then cosine decay, clipping, validation, checkpoints, sampling. Its command
line (below) is ``cli.main``, run by ``python -m andrea.training.train`` as before.

    python -m andrea.training.train --preset tiny            # ~1 minute on a laptop CPU, then prints samples
    python -m andrea.training.train --preset andrea-120m     # the full model (meant for a GPU)
    torchrun --nproc_per_node=2 -m andrea.training.train --preset tiny --device cpu   # DistributedDataParallel

On CUDA it uses bf16 autocast (and torch.compile with --compile); on the CPU, fp32.

Nothing is lost: everything that can be checked is checked before step 1 (the output folder, the
device, the corpus splits, a resume's settings); one run at a time writes a folder (a lock); Ctrl-C,
SIGTERM and SIGHUP stop the run between two steps and save a checkpoint from which ``--resume``
continues bit-identically (on the CPU); a run whose loss or gradient becomes non-finite stops with
"diverged at step N" and keeps its last good checkpoint.
"""

from __future__ import annotations

import math
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from ..device import check_device, pick_device
from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea
from .checkpoint import RunDir
from .data import TokenData
from .optimizer import make_optimizer

STOP_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 300  # optimizer steps
    batch_size: int = 16  # sequences per step (per process under DDP)
    seq_len: int = 64  # tokens per sequence
    lr: float = 3e-3  # peak learning rate
    warmup: int = 30  # linear warmup steps (0: none)
    min_lr_ratio: float = 0.1  # cosine decay ends at lr * min_lr_ratio
    weight_decay: float = 0.1  # AdamW decay, on matrices only (>= 2-D)
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: Optional[float] = 1.0  # max global gradient norm (None: no clipping)
    eval_every: int = 50  # validation every N steps (and at the end)
    eval_batches: int = 8
    seed: int = 0
    compile: bool = False  # torch.compile the model (CUDA)

    def __post_init__(self):
        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        def is_real(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        for name in ("steps", "batch_size", "seq_len", "eval_every", "eval_batches"):
            v = getattr(self, name)
            if not is_int(v) or v < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer, got {v!r}")
        for name in ("warmup", "seed"):
            v = getattr(self, name)
            if not is_int(v) or v < 0:
                raise ValueError(f"TrainConfig.{name} must be an integer >= 0, got {v!r}")
        if not is_real(self.lr) or self.lr <= 0:
            raise ValueError(f"TrainConfig.lr must be a finite number > 0, got {self.lr!r}")
        for name in ("min_lr_ratio", "beta1", "beta2"):
            v = getattr(self, name)
            if not is_real(v) or not 0 <= v < 1 + (name == "min_lr_ratio"):
                allowed = "[0, 1]" if name == "min_lr_ratio" else "[0, 1)"
                raise ValueError(f"TrainConfig.{name} must be a number in {allowed}, got {v!r}")
        if not is_real(self.weight_decay) or self.weight_decay < 0:
            raise ValueError(f"TrainConfig.weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if self.grad_clip is not None and (not is_real(self.grad_clip) or self.grad_clip <= 0):
            raise ValueError(f"TrainConfig.grad_clip must be None or a number > 0, got {self.grad_clip!r}")
        if not isinstance(self.compile, bool):
            raise ValueError(f"TrainConfig.compile must be True or False, got {self.compile!r}")


def lr_at(step: int, t: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warmup, then cosine to min_lr."""
    if t.warmup and step < t.warmup:
        return t.lr * (step + 1) / t.warmup
    decay_steps = max(1, t.steps - t.warmup)
    progress = min(1.0, (step - t.warmup) / decay_steps)
    return t.lr * (t.min_lr_ratio + (1 - t.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class TrainResult:
    model: Andrea
    history: dict = field(default_factory=dict)  # lists: step, loss, lr, grad_norm; val_step, val_loss; monitor
    diverged: bool = False  # the loss or the gradient became inf/NaN (training stopped there)
    diverged_at: Optional[int] = None  # the step whose loss or gradient was non-finite
    tokens_per_s: float = float("nan")
    interrupted: bool = False  # stopped by a signal (Ctrl-C, SIGTERM, SIGHUP)
    signal: Optional[str] = None  # its name
    start_step: int = 0  # 0, or the checkpoint's step when resumed
    checkpoint: Optional[Path] = None  # the last checkpoint this run wrote (None: none)

    @property
    def final_val_loss(self) -> float:
        v = self.history.get("val_loss", [])
        return v[-1] if v else float("nan")

    @property
    def steps_done(self) -> int:
        return self.history["step"][-1] if self.history.get("step") else self.start_step


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


@torch.no_grad()
def evaluate(model: torch.nn.Module, data: TokenData, t: TrainConfig, device: torch.device) -> float:
    """Mean validation loss over ``eval_batches`` fixed batches (same batches every call)."""
    was = model.training
    model.eval()
    g = torch.Generator().manual_seed(10_000 + t.seed)
    losses = []
    for _ in range(t.eval_batches):
        x, y = data.batch("val", t.batch_size, t.seq_len, g)
        with _autocast(device):
            logits = model(x.to(device))
        losses.append(float(F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.to(device).reshape(-1))))
    model.train(was)
    return float(np.mean(losses))


def _dist_info():
    import os

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return world, rank


class _StopRequest:
    """Turns Ctrl-C, SIGTERM and SIGHUP into a request that the loop honours between two steps, so
    a checkpoint is always a consistent state. A second Ctrl-C stops at once (nothing more saved)."""

    def __init__(self):
        self.signum: Optional[int] = None
        self._old: dict = {}

    def _handler(self, signum, frame):
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)

    @property
    def name(self) -> Optional[str]:
        return signal.Signals(self.signum).name if self.signum is not None else None


def train(
    model_cfg: AndreaConfig,
    train_cfg: TrainConfig,
    data: TokenData,
    device: Optional[str] = None,
    out_dir: Optional[str | Path] = None,
    resume: bool = False,
    overwrite: bool = False,
    allow_changes: bool = False,
    progress: bool = True,
    callback: Optional[Callable[[int, float], None]] = None,
    monitor: Optional[Callable[[Andrea], dict]] = None,
) -> TrainResult:
    """Train a fresh (or resumed) model; returns the model and its loss history.

    A non-finite loss or gradient stops training and returns ``diverged=True`` (it does not raise).
    With ``out_dir``, a checkpoint ``last.pt`` is written at every validation and when a signal
    stops the run; a fresh run refuses an ``out_dir`` that already holds one unless ``overwrite``.
    ``resume`` continues from it; settings that differ from the checkpoint's are refused (each is
    named) unless ``allow_changes``. ``monitor(model)`` is called at every validation and its
    values are recorded in ``history["monitor"]``. Under ``torchrun`` (WORLD_SIZE > 1) the model is
    wrapped in DistributedDataParallel; each process draws its own batches and rank 0 writes.
    """
    t = train_cfg
    if not isinstance(model_cfg, AndreaConfig):
        raise TypeError(f"train(model_cfg, ...) needs an AndreaConfig, got {type(model_cfg).__name__}")
    if not isinstance(t, TrainConfig):
        raise TypeError(f"train(..., train_cfg, ...) needs a TrainConfig, got {type(t).__name__}")
    if model_cfg.vocab_size != data.vocab_size:
        raise ValueError(f"model vocab_size {model_cfg.vocab_size} != tokenizer vocab_size {data.vocab_size}")
    if t.seq_len > model_cfg.context_length:
        raise ValueError(f"seq_len {t.seq_len} exceeds the model's context_length {model_cfg.context_length}")
    data.check_split("train", t.seq_len)
    data.check_split("val", t.seq_len)
    world, rank = _dist_info()
    dev = check_device(device or pick_device())
    run = RunDir(out_dir) if (out_dir is not None and rank == 0) else None
    blob = None
    if run is not None:
        run.lock()
    try:
        if resume and run is None and rank == 0:
            raise ValueError("resume=True needs out_dir (the folder holding last.pt)")
        if run is not None and resume:
            blob = run.resume_state(model_cfg, t, data.digest, allow_changes)
        elif run is not None:
            run.check_fresh(overwrite)
        return _train(model_cfg, t, data, dev, run, blob, world, rank, progress, callback, monitor)
    finally:
        if run is not None:
            run.unlock()


def _train(model_cfg, t, data, dev, run, blob, world, rank, progress, callback, monitor) -> TrainResult:
    if world > 1:
        import os

        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        if dev.type == "cuda":
            dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(dev)

    torch.manual_seed(t.seed)
    model = Andrea(model_cfg)
    history: dict = {"step": [], "loss": [], "lr": [], "grad_norm": [], "val_step": [], "val_loss": [], "monitor": []}
    gen = torch.Generator().manual_seed(t.seed * 1000 + rank)
    start_step = 0
    opt_state = None
    if blob is not None:
        model.load_state_dict(blob["state_dict"])
        extra = blob["extra"]
        start_step, opt_state = int(extra["step"]), extra["optimizer"]
        history.update(extra["history"])
        history.setdefault("monitor", [])
        gen.set_state(extra["generator"])
        if "torch_rng" in extra:
            torch.set_rng_state(extra["torch_rng"])
    model.to(dev)
    opt = make_optimizer(model, t)
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    net = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)  # type: ignore[assignment]
    if t.compile:
        net = torch.compile(net)  # type: ignore[assignment]

    result = TrainResult(model=model, history=history, start_step=start_step)

    def save(step: int) -> None:
        if run is None:
            return
        model.save(
            run.checkpoint,
            extra={
                "step": step,
                "history": history,
                "optimizer": opt.state_dict(),
                "generator": gen.get_state(),
                "torch_rng": torch.get_rng_state(),
                "train_config": asdict(t),
                "data_digest": data.digest,
            },
        )
        result.checkpoint = run.checkpoint

    bar = None
    if progress and rank == 0:
        from ..progress import bar as progress_bar

        bar = progress_bar(t.steps, "training", unit="step", initial=start_step, mininterval=1.0)
    tokens, t0 = 0, time.perf_counter()
    step = start_step
    net.train()
    with _StopRequest() as stop:
        try:
            while step < t.steps:
                if stop.signum is not None:  # between two steps: the state is consistent
                    result.interrupted, result.signal = True, stop.name
                    save(step)
                    break
                lr = lr_at(step, t)
                for group in opt.param_groups:
                    group["lr"] = lr
                x, y = data.batch("train", t.batch_size, t.seq_len, gen)
                if dev.type == "cuda":  # pinned host memory: the copy overlaps with the GPU's work
                    x, y = x.pin_memory().to(dev, non_blocking=True), y.pin_memory().to(dev, non_blocking=True)
                else:
                    x, y = x.to(dev), y.to(dev)
                with _autocast(dev):
                    logits = net(x)
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
                loss_value = loss.item()
                gnorm = float("nan")
                if math.isfinite(loss_value):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    max_norm = t.grad_clip if t.grad_clip is not None else float("inf")
                    gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
                if not (math.isfinite(loss_value) and math.isfinite(gnorm)):
                    # Stop before the optimizer writes inf/NaN into the weights; the last good
                    # checkpoint on disk is kept as it is.
                    result.diverged, result.diverged_at = True, step + 1
                    history["diverged_at"] = step + 1
                    break
                opt.step()
                step += 1
                tokens += x.numel()
                history["step"].append(step)
                history["loss"].append(loss_value)
                history["lr"].append(lr)
                history["grad_norm"].append(gnorm)
                if callback is not None:
                    callback(step, loss_value)
                if step % t.eval_every == 0 or step == t.steps:
                    history["val_step"].append(step)
                    history["val_loss"].append(evaluate(model, data, t, dev))
                    if monitor is not None:
                        history["monitor"].append({"step": step, **monitor(model)})
                    save(step)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tokens / (time.perf_counter() - t0):,.0f}")
        finally:
            if bar is not None:
                bar.close()
    elapsed = time.perf_counter() - t0
    result.tokens_per_s = tokens * world / elapsed if elapsed > 0 and tokens else float("nan")
    return result


# ---------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def sample(
    model: Andrea,
    tokenizer,
    prompt: str = "",
    max_new_tokens: int = 100,
    temperature: float = 0.8,
    top_k: Optional[int] = 50,
    seed: int = 0,
) -> str:
    """Continue ``prompt`` token by token; temperature > 0 scales the logits, top_k keeps the k best."""
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    if top_k is not None and not (isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if not (isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool) and max_new_tokens >= 0):
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    was = model.training
    model.eval()
    dev = model.device
    ids = tokenizer.encode(prompt) or [getattr(tokenizer, "eot_id", None) or 10]
    x = torch.tensor([ids], dtype=torch.long, device=dev)
    g = torch.Generator(device="cpu").manual_seed(seed)
    T = model.config.context_length
    for _ in range(max_new_tokens):
        logits = model(x[:, -T:])[0, -1].float().cpu() / temperature  # (V,)
        if not torch.isfinite(logits).all():
            raise ValueError("the model's logits are not finite (a diverged model): there is nothing to sample")
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
            logits[logits < kth] = -float("inf")
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
        x = torch.cat([x, nxt.view(1, 1).to(dev)], dim=1)
    model.train(was)
    return tokenizer.decode(x[0, len(ids) :].tolist())


# ---------------------------------------------------------------------------------------------
# The presets of the command line (cli.py)
# ---------------------------------------------------------------------------------------------
PRESETS = {
    # name: (model config, train config, tokenizer)
    "tiny": (
        replace(ANDREA_120M, d_model=128, n_layer=4, n_head=4, context_length=128),
        TrainConfig(steps=300, batch_size=16, seq_len=64, lr=3e-3, warmup=30, eval_every=100),
        "bpe",
    ),
    "tiny-bytes": (
        replace(ANDREA_120M, vocab_size=256, d_model=128, n_layer=4, n_head=4, context_length=256),
        TrainConfig(steps=300, batch_size=16, seq_len=128, lr=3e-3, warmup=30, eval_every=100),
        "bytes",
    ),
    "andrea-120m": (
        ANDREA_120M,
        TrainConfig(steps=5000, batch_size=32, seq_len=1024, lr=6e-4, warmup=200, eval_every=250, weight_decay=0.1),
        "bpe",
    ),
}
if __name__ == "__main__":  # the command line is in cli.py, which no stored result's key covers
    from .cli import main

    sys.exit(main())
