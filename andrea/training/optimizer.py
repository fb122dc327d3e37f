"""The optimizer of every training run: AdamW, with weight decay on matrices only.

Its own module so that ``train`` (which trains) and ``checkpoint`` (which checks that a saved
optimizer state loads before a resume) both build the same optimizer without importing each other.
"""

from __future__ import annotations

from typing import Protocol

import torch


class OptimizerSettings(Protocol):
    """What ``make_optimizer`` reads from a training config (``train.TrainConfig``)."""

    @property
    def lr(self) -> float: ...
    @property
    def weight_decay(self) -> float: ...
    @property
    def beta1(self) -> float: ...
    @property
    def beta2(self) -> float: ...


def make_optimizer(model: torch.nn.Module, t: OptimizerSettings) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (>= 2-D: linear weights, embeddings) only, not on
    biases, LayerNorm gains or LayerScale's lambda."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if all(p.is_cuda for p in decay + no_decay):
        # fused: one CUDA kernel updates every tensor (the fastest AdamW on a GPU)
        return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=True)
    # foreach: one vectorised update over all tensors (faster than a loop on the CPU too)
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), foreach=True)
