"""Training ANDREA: AdamW, warmup then cosine decay, clipping, validation, checkpoints, sampling.

    python -m andrea.train --preset tiny            # ~1 minute on a laptop CPU, then prints samples
    python -m andrea.train --preset andrea-120m     # the full model (meant for a GPU)
    torchrun --nproc_per_node=2 -m andrea.train --preset tiny --device cpu   # DistributedDataParallel

On CUDA it uses bf16 autocast (and torch.compile with --compile); on the CPU, fp32.
Ctrl-C saves a checkpoint before exiting; ``--resume`` continues from it bit-identically.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from .config import ANDREA_120M, AndreaConfig
from .data import TokenData, load_token_data
from .device import pick_device
from .model import Andrea, read_checkpoint


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
        for name in ("steps", "batch_size", "seq_len", "eval_every", "eval_batches"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer, got {v!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"TrainConfig.warmup must be an integer >= 0, got {self.warmup!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"TrainConfig.lr must be a finite number > 0, got {self.lr!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"TrainConfig.grad_clip must be None or > 0, got {self.grad_clip!r}")


def lr_at(step: int, t: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warmup, then cosine to min_lr."""
    if t.warmup and step < t.warmup:
        return t.lr * (step + 1) / t.warmup
    decay_steps = max(1, t.steps - t.warmup)
    progress = min(1.0, (step - t.warmup) / decay_steps)
    return t.lr * (t.min_lr_ratio + (1 - t.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: torch.nn.Module, t: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (>= 2-D: linear weights, embeddings) only, not on
    biases, LayerNorm gains or LayerScale's lambda."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # foreach: one fused update over all tensors (PyTorch's default on CUDA; faster on the CPU too)
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), foreach=True)


@dataclass
class TrainResult:
    model: Andrea
    history: dict = field(default_factory=dict)  # lists: step, loss, lr, grad_norm; val_step, val_loss
    diverged: bool = False  # the loss became inf/NaN (training stopped there)
    tokens_per_s: float = float("nan")
    interrupted: bool = False

    @property
    def final_val_loss(self) -> float:
        v = self.history.get("val_loss", [])
        return v[-1] if v else float("nan")


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
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return world, rank


def train(
    model_cfg: AndreaConfig,
    train_cfg: TrainConfig,
    data: TokenData,
    device: Optional[str] = None,
    out_dir: Optional[str | Path] = None,
    resume: bool = False,
    progress: bool = True,
    callback: Optional[Callable[[int, float], None]] = None,
) -> TrainResult:
    """Train a fresh (or resumed) model; returns the model and its loss history.

    A non-finite loss stops training and returns ``diverged=True`` (it does not raise).
    With ``out_dir``, a checkpoint ``last.pt`` is written at every validation and on Ctrl-C.
    Under ``torchrun`` (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel; each
    process draws its own batches and rank 0 writes checkpoints and logs.
    """
    t = train_cfg
    if model_cfg.vocab_size != data.vocab_size:
        raise ValueError(f"model vocab_size {model_cfg.vocab_size} != tokenizer vocab_size {data.vocab_size}")
    if t.seq_len > model_cfg.context_length:
        raise ValueError(f"seq_len {t.seq_len} exceeds the model's context_length {model_cfg.context_length}")
    world, rank = _dist_info()
    dev = torch.device(device or pick_device())
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        if dev.type == "cuda":
            dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(dev)
    ckpt = Path(out_dir) / "last.pt" if out_dir is not None else None

    torch.manual_seed(t.seed)
    model = Andrea(model_cfg)
    history = {"step": [], "loss": [], "lr": [], "grad_norm": [], "val_step": [], "val_loss": []}
    gen = torch.Generator().manual_seed(t.seed * 1000 + rank)
    start_step = 0
    opt_state = None
    if resume:
        if ckpt is None or not ckpt.is_file():
            raise FileNotFoundError(f"--resume: no checkpoint at {ckpt} to resume from")
        blob = read_checkpoint(ckpt)
        if AndreaConfig(**blob["config"]) != model_cfg:
            raise ValueError(f"--resume: the checkpoint at {ckpt} was trained with a different model config")
        model.load_state_dict(blob["state_dict"])
        extra = blob["extra"]
        start_step, history, opt_state = extra["step"], extra["history"], extra["optimizer"]
        gen.set_state(extra["generator"])
    model.to(dev)
    opt = make_optimizer(model, t)
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    net = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    if t.compile:
        net = torch.compile(net)

    def save(step: int) -> None:
        if ckpt is None or rank != 0:
            return
        model.save(ckpt, extra={"step": step, "history": history, "optimizer": opt.state_dict(),
                                "generator": gen.get_state(), "train_config": asdict(t)})

    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=t.steps, initial=start_step, desc="training", unit="step", file=sys.stderr,
                   dynamic_ncols=True, mininterval=1.0)
    result = TrainResult(model=model, history=history)
    tokens, t0 = 0, time.perf_counter()
    step = start_step
    net.train()
    try:
        while step < t.steps:
            lr = lr_at(step, t)
            for group in opt.param_groups:
                group["lr"] = lr
            x, y = data.batch("train", t.batch_size, t.seq_len, gen)
            x, y = x.to(dev), y.to(dev)
            with _autocast(dev):
                logits = net(x)
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
            loss_value = loss.item()
            if not math.isfinite(loss_value):
                result.diverged = True
                history["step"].append(step)
                history["loss"].append(float("nan"))
                history["lr"].append(lr)
                history["grad_norm"].append(float("nan"))
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            max_norm = t.grad_clip if t.grad_clip is not None else float("inf")
            gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
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
                save(step)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tokens / (time.perf_counter() - t0):,.0f}")
    except KeyboardInterrupt:
        result.interrupted = True
        save(step)
        if rank == 0:
            print(f"\ninterrupted at step {step}; checkpoint saved to {ckpt}" if ckpt else "\ninterrupted", file=sys.stderr)
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
def sample(model: Andrea, tokenizer, prompt: str = "", max_new_tokens: int = 100, temperature: float = 0.8,
           top_k: Optional[int] = 50, seed: int = 0) -> str:
    """Continue ``prompt`` token by token; temperature > 0 scales the logits, top_k keeps the k best."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if top_k is not None and not (isinstance(top_k, int) and top_k >= 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    was = model.training
    model.eval()
    dev = model.device
    ids = tokenizer.encode(prompt) or [getattr(tokenizer, "eot_id", None) or 10]
    x = torch.tensor([ids], dtype=torch.long, device=dev)
    g = torch.Generator(device="cpu").manual_seed(seed)
    T = model.config.context_length
    for _ in range(max_new_tokens):
        logits = model(x[:, -T:])[0, -1].float().cpu() / temperature  # (V,)
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
            logits[logits < kth] = -float("inf")
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
        x = torch.cat([x, nxt.view(1, 1).to(dev)], dim=1)
    model.train(was)
    return tokenizer.decode(x[0, len(ids):].tolist())


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
PRESETS = {
    # name: (model config, train config, tokenizer)
    "tiny": (replace(ANDREA_120M, d_model=128, n_layer=4, n_head=4, context_length=128),
             TrainConfig(steps=300, batch_size=16, seq_len=64, lr=3e-3, warmup=30, eval_every=100), "bpe"),
    "tiny-bytes": (replace(ANDREA_120M, vocab_size=256, d_model=128, n_layer=4, n_head=4, context_length=256),
                   TrainConfig(steps=300, batch_size=16, seq_len=128, lr=3e-3, warmup=30, eval_every=100), "bytes"),
    "andrea-120m": (ANDREA_120M,
                    TrainConfig(steps=5000, batch_size=32, seq_len=1024, lr=6e-4, warmup=200, eval_every=250,
                                weight_decay=0.1), "bpe"),
}


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea.train", description="Train ANDREA on Python's documentation (or any UTF-8 text).")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny", help="model and schedule (default: tiny)")
    p.add_argument("--steps", type=int, help="optimizer steps (default: the preset's)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    p.add_argument("--batch-size", type=int, help="sequences per step (default: the preset's)")
    p.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: the best available)")
    p.add_argument("--out", default="runs/tiny", help="directory for last.pt (default: runs/tiny)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    p.add_argument("--corpus", help="a UTF-8 text file to train on instead of Python's docs")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (CUDA)")
    p.add_argument("--samples", type=int, default=2, help="samples to print at the end (default: 2)")
    p.add_argument("--seed", type=int, help="random seed (default: 0)")
    a = p.parse_args(argv)
    model_cfg, train_cfg, tok = PRESETS[a.preset]
    overrides = {k: v for k, v in {"steps": a.steps, "lr": a.lr, "batch_size": a.batch_size, "seed": a.seed}.items() if v is not None}
    try:
        train_cfg = replace(train_cfg, compile=a.compile, **overrides)
        if a.device is not None:
            try:
                torch.empty(0, device=a.device)
            except Exception as e:  # RuntimeError, or AssertionError from a torch built without CUDA
                raise ValueError(f"--device {a.device!r} is not usable here ({str(e).splitlines()[0]}); try cpu") from None
        data = load_token_data(tok, a.corpus)
        model_cfg = replace(model_cfg, vocab_size=data.vocab_size)
        world, rank = _dist_info()
        if rank == 0:
            n = sum(p.numel() for p in Andrea(model_cfg).parameters()) if model_cfg.d_model < 512 else None
            print(f"preset {a.preset}: d_model={model_cfg.d_model} n_layer={model_cfg.n_layer} "
                  f"{'params=' + format(n, ',') + ' ' if n else ''}train tokens={len(data.train):,} "
                  f"device={a.device or pick_device()} processes={world}", file=sys.stderr)
        result = train(model_cfg, train_cfg, data, device=a.device, out_dir=a.out, resume=a.resume)
    except (ValueError, FileNotFoundError) as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    if rank == 0:
        h = result.history
        status = "diverged" if result.diverged else ("interrupted" if result.interrupted else "done")
        print(f"{status}: step {h['step'][-1] if h['step'] else 0}, val loss {result.final_val_loss:.3f}, "
              f"{result.tokens_per_s:,.0f} tokens/s; checkpoint: {Path(a.out) / 'last.pt'}")
        for i in range(a.samples):
            print(f"--- sample {i + 1} ---")
            print(sample(result.model, data.tokenizer, "The ", max_new_tokens=60, seed=i))
    return 130 if result.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
