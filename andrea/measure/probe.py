"""Per-layer statistics of the residual stream and its gradient, from one forward+backward pass.

In the style of TransformerLens: hooks are attached inside a context manager and always removed,
even when the forward pass raises. Gradients are taken with ``torch.autograd.grad``, so the
model's ``.grad`` fields are never touched, and the model's train/eval mode and ``requires_grad``
flags are restored afterwards.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch

from ..model.transformer import Andrea


@dataclass
class GradientReport:
    """What ``gradient_flow`` measured. Boundary i: index 0 is the embedding output (the input to
    block 1), index i the output of block i, index n_layer the last block's output (before the
    final LayerNorm)."""

    act_rms: np.ndarray  # (n_layer + 1,) RMS of the residual stream at each boundary
    grad_rms: np.ndarray  # (n_layer + 1,) RMS of dLoss/d(residual stream) at each boundary
    weight_grad_norm: dict = field(default_factory=dict)  # {"attn": (n_layer,), "mlp": (n_layer,)}
    loss: float = float("nan")
    finite: bool = True

    @property
    def n_layer(self) -> int:
        return len(self.act_rms) - 1

    @property
    def grad_ratio(self) -> float:
        """grad RMS at the embeddings / grad RMS at the top of the stack (1 = perfectly even)."""
        top = self.grad_rms[-1]
        return float(self.grad_rms[0] / top) if top != 0 else float("nan")

    @property
    def status(self) -> str:
        """ "ok", "diverged" (something non-finite) or "vanished" (gradient at the embeddings is 0)."""
        if not self.finite:
            return "diverged"
        if not self.grad_rms[0] > 0:
            return "vanished"
        return "ok"


@contextlib.contextmanager
def capture_residual_stream(model: Andrea):
    """Record the residual stream at every block boundary while the context is open.

    Yields a list that fills with n_layer+1 tensors during a forward pass: the input of block 1
    (the embedding output) and the output of every block. All hooks are removed on exit.
    """
    boundaries: list[torch.Tensor] = []
    handles = []

    def save_input(module, args):
        boundaries.append(args[0])

    def save_output(module, args, output):
        boundaries.append(output)

    try:
        handles.append(model.blocks[0].register_forward_pre_hook(save_input))
        for block in model.blocks:
            handles.append(block.register_forward_hook(save_output))
        yield boundaries
    finally:
        for h in handles:
            h.remove()


def _rms(t: torch.Tensor) -> float:
    return float(t.detach().double().pow(2).mean().sqrt())


def gradient_flow(model: Andrea, idx: torch.Tensor, targets: torch.Tensor, weights: bool = True) -> GradientReport:
    """One forward+backward on (idx, targets); residual-stream and gradient RMS per boundary.

    Runs in eval mode (no dropout), so two calls on the same model and batch agree exactly, and
    with gradients enabled whatever the caller's ``torch.no_grad()`` state.
    A run that produces inf/NaN is returned with ``finite=False`` and the values it got.
    ``weights=False`` skips the weight gradients (``weight_grad_norm`` is then empty): the
    backward pass computes only the stream's gradient, about half the work.
    """
    was_training = model.training
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    n = len(model.blocks)
    try:
        model.eval()
        for p in params:
            p.requires_grad_(True)
        # enable_grad: the probe works even when called inside a reader's ``torch.no_grad()``.
        with torch.enable_grad(), capture_residual_stream(model) as stream:
            loss = model.loss(idx, targets)
        attn = [list(b.attn.parameters()) for b in model.blocks] if weights else []  # type: ignore[union-attr]
        mlp = [list(b.mlp.parameters()) for b in model.blocks] if weights else []  # type: ignore[union-attr]
        flat = [p for group in attn + mlp for p in group]
        grads = torch.autograd.grad(loss, list(stream) + flat, allow_unused=True)
        g_stream, g_params = grads[: len(stream)], grads[len(stream) :]

        def group_norms(groups, offset):
            out, i = [], offset
            for group in groups:
                sq = 0.0
                for _ in group:
                    g = g_params[i]
                    i += 1
                    if g is not None:
                        sq += float(g.detach().double().pow(2).sum())
                out.append(np.sqrt(sq))
            return np.array(out), i

        attn_norm, k = group_norms(attn, 0)
        mlp_norm, _ = group_norms(mlp, k)
        act = np.array([_rms(t) for t in stream])
        grad = np.array([_rms(g) if g is not None else 0.0 for g in g_stream])
        loss_value = float(loss.detach())
        assert len(act) == n + 1
        finite = bool(
            np.isfinite(act).all()
            and np.isfinite(grad).all()
            and np.isfinite(loss_value)
            and np.isfinite(attn_norm).all()
            and np.isfinite(mlp_norm).all()
        )
        wgn = {"attn": attn_norm, "mlp": mlp_norm} if weights else {}
        return GradientReport(act_rms=act, grad_rms=grad, weight_grad_norm=wgn, loss=loss_value, finite=finite)
    finally:
        for p, f in zip(params, flags):
            p.requires_grad_(f)
        model.train(was_training)


def random_batch(vocab_size: int, batch: int, seq: int, seed: int = 0, device="cpu"):
    """A seeded batch of uniformly random token ids and next-token targets, (B, T) each.

    At initialisation the per-layer statistics barely depend on which tokens go in, so the
    explorers use this; the training chapters use real text (``andrea.training.data``).
    """
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (batch, seq + 1), generator=g)
    return ids[:, :-1].to(device), ids[:, 1:].to(device)
