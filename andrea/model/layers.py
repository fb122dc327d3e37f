"""The parts of one block: LayerNorm, GELU, the MLP, causal self-attention, LayerScale, the Block.

Two kinds of code live here:

* ``layer_norm``, ``gelu`` and ``attention_reference`` are the formulas exactly as the book writes
  them, line by line, for reading. They are slow and clear.
* The modules (``LayerNorm``, ``MLP``, ``CausalSelfAttention``, ...) call torch's fused kernels
  (``F.layer_norm``, ``F.gelu``, ``F.scaled_dot_product_attention``) for speed. The tests prove the
  two agree to float precision, so what the book teaches is what the model computes.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import AndreaConfig


# ---------------------------------------------------------------------------------------------
# Readable formulas (what the chapters teach)
# ---------------------------------------------------------------------------------------------
def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """y = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta, over the last axis (d_model), per token."""
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1): one mean per token
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1): biased variance, as LayerNorm uses
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta


def gelu(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """GELU(x) = x * Phi(x), with Phi the standard normal CDF.

    approximate="none": Phi from the error function, Phi(x) = (1 + erf(x / sqrt(2))) / 2.
    approximate="tanh": Phi(x) ~ (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2, the documents' form.
    """
    if approximate == "none":
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if approximate == "tanh":
        return x * 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    raise ValueError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v, written out. q, k, v: (B, H, T, hs)."""
    T = q.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, T)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))  # token t may not look at t+1, t+2, ...
    return torch.softmax(scores, dim=-1) @ v  # (B, H, T, hs)


# ---------------------------------------------------------------------------------------------
# Modules (fast path)
# ---------------------------------------------------------------------------------------------
class LayerNorm(nn.Module):
    """LayerNorm with learnable gamma (``weight``) and beta (``bias``), each of shape (d_model,)."""

    def __init__(self, d_model: int, bias: bool = True, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None  # beta
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class MLP(nn.Module):
    """Expand d_model -> d_hidden, activate, contract d_hidden -> d_model.

    With ``activation="swiglu"`` the expansion makes two halves, a gate and a value:
    h = SiLU(x W_gate) * (x W_up), three matrices of width 8/3 d_model instead of two of 4 d_model.
    """

    def __init__(self, cfg: AndreaConfig):
        super().__init__()
        self.activation = cfg.activation
        h = cfg.d_hidden
        n_in = 2 * h if cfg.activation == "swiglu" else h
        self.fc = nn.Linear(cfg.d_model, n_in, bias=cfg.bias)  # W_1 (and W_gate for SwiGLU)
        if cfg.activation == "swiglu":
            self.fc.parts = ("gate", "up")  # type: ignore[assignment]  # two d x h matrices in one
        self.proj = nn.Linear(h, cfg.d_model, bias=cfg.bias)  # W_2, a residual output projection
        self.proj.residual_output = True  # type: ignore[assignment]  # scaled at init (Andrea._init_weights)
        self.dropout = nn.Dropout(cfg.dropout)

    def act(self, h: torch.Tensor) -> torch.Tensor:
        if self.activation == "gelu_tanh":
            return F.gelu(h, approximate="tanh")
        if self.activation == "gelu":
            return F.gelu(h)
        if self.activation == "relu":
            return F.relu(h)
        gate, up = h.chunk(2, dim=-1)  # swiglu
        return F.silu(gate) * up

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)  # (B, T, d_hidden) (or 2*d_hidden for SwiGLU)
        h = self.act(h)  # (B, T, d_hidden)
        return self.dropout(self.proj(h))  # (B, T, d_model)


class CausalSelfAttention(nn.Module):
    """Multi-head attention where token t sees tokens 0..t. One fused q,k,v projection (GPT-2)."""

    def __init__(self, cfg: AndreaConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        # q, k and v: three d x d matrices in one Linear (initialised one by one, see Andrea)
        self.qkv.parts = ("q", "k", "v")  # type: ignore[assignment]
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.proj.residual_output = True  # type: ignore[assignment]
        self.dropout_p = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def split_heads(self, x: torch.Tensor):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        # (B, T, C) -> (B, H, T, hs)
        return [t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.split_heads(x)
        p = self.dropout_p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, H, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble heads: (B, T, C)
        return self.resid_dropout(self.proj(y))


class LayerScale(nn.Module):
    """Multiply a sublayer's output by a learnable lambda before it joins the stream.

    ``kind="channel"``: a vector of length d_model, one gain per channel (CaiT, Touvron et al. 2021).
    ``kind="scalar"``: one number for the whole sublayer (ReZero's alpha, Bachlechner et al. 2020).
    """

    def __init__(self, d_model: int, init_value: float, kind: str = "channel"):
        super().__init__()
        shape = (d_model,) if kind == "channel" else (1,)
        self.scale = nn.Parameter(torch.full(shape, float(init_value)))  # lambda, (C,) or (1,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale  # (B, T, C) * (C,): channel c scaled by lambda_c


class Block(nn.Module):
    """One transformer block: an attention sublayer, then an MLP sublayer.

    For each sublayer f (with its own LayerNorm and, optionally, LayerScale lambda):
      norm="pre":   x = x + lambda * f(LN(x))       (ANDREA, GPT-2)
      norm="post":  x = LN(x + lambda * f(x))       (the 2017 Transformer)
      norm="none":  x = x + lambda * f(x)
      norm="deepnorm": x = LN(alpha * x + lambda * f(x)), alpha = (2 n_layer)^(1/4) (DeepNet)
      norm="final": as "none" (the stack keeps only its final LayerNorm)
    ``residual=False`` drops the "x +". Without LayerScale, lambda is 1 (and no parameter exists).
    """

    def __init__(self, cfg: AndreaConfig):
        super().__init__()
        self.norm = cfg.norm
        self.residual = cfg.residual
        self.alpha = cfg.deepnorm_alpha if cfg.norm == "deepnorm" else 1.0
        has_norm = cfg.norm != "none"
        if cfg.norm == "final":  # no LayerNorm in the block; the stack keeps its final one
            has_norm = False
        self.ln_1 = LayerNorm(cfg.d_model, cfg.bias, cfg.ln_eps) if has_norm else nn.Identity()
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = LayerNorm(cfg.d_model, cfg.bias, cfg.ln_eps) if has_norm else nn.Identity()
        self.mlp = MLP(cfg)
        if cfg.layerscale is not None:
            self.ls_1 = LayerScale(cfg.d_model, cfg.layerscale, cfg.layerscale_kind)
            self.ls_2 = LayerScale(cfg.d_model, cfg.layerscale, cfg.layerscale_kind)
        else:
            self.ls_1 = self.ls_2 = nn.Identity()  # type: ignore[assignment]

    def _sublayer(self, x, ln, f, ls):
        if self.norm == "deepnorm":
            return ln(self.alpha * x + ls(f(x)))
        if self.norm == "post":
            delta = ls(f(x))
            return ln(x + delta if self.residual else delta)
        delta = ls(f(ln(x)))  # pre (ln is LN) or none (ln is Identity)
        return x + delta if self.residual else delta

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        x = self._sublayer(x, self.ln_1, self.attn, self.ls_1)
        x = self._sublayer(x, self.ln_2, self.mlp, self.ls_2)
        return x
