"""The model's configuration: one frozen dataclass, the ANDREA-120M preset, and validation.

Every variant the book needs (post-norm, no residual, LayerScale, ReLU, SwiGLU, any depth or width)
is the same code with different switches here. Variants are made with ``dataclasses.replace``::

    from dataclasses import replace
    deep = replace(ANDREA_120M, d_model=128, n_head=4, n_layer=48, layerscale=1e-6)

Where the source documents are silent we follow GPT-2 (heads, context, biases, epsilon, init).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional

NORMS = ("pre", "post", "none")
ACTIVATIONS = ("gelu_tanh", "gelu", "relu", "swiglu")


@dataclass(frozen=True)
class AndreaConfig:
    vocab_size: int = 8449  # BPE vocabulary of the documents' ANDREA-120M
    context_length: int = 1024  # longest sequence; learned position embeddings (GPT-2)
    d_model: int = 768  # width of the residual stream
    n_layer: int = 12  # number of blocks
    n_head: int = 12  # attention heads (GPT-2); d_model must divide by it
    mlp_dim: Optional[int] = None  # MLP hidden width; None: 4*d_model (8/3*d_model for swiglu)
    norm: str = "pre"  # "pre": x + f(LN(x)); "post": LN(x + f(x)); "none": x + f(x)
    residual: bool = True  # False drops the "x +" of every sublayer
    layerscale: Optional[float] = None  # None, or the initial value of LayerScale's lambda
    activation: str = "gelu_tanh"  # "gelu_tanh" | "gelu" (exact erf) | "relu" | "swiglu"
    dropout: float = 0.0  # dropout probability on the residual branches and attention
    bias: bool = True  # biases in Linear layers and LayerNorms (GPT-2)
    ln_eps: float = 1e-5  # LayerNorm epsilon (GPT-2)
    init_std: float = 0.02  # N(0, init_std) for weights (GPT-2)
    scale_residual_init: bool = True  # residual output projections get init_std / sqrt(2 * n_layer) (GPT-2)

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def d_hidden(self) -> int:
        """The MLP hidden width actually used (resolves ``mlp_dim=None``)."""
        if self.mlp_dim is not None:
            return self.mlp_dim
        if self.activation == "swiglu":
            # Three matrices instead of two: 8/3 keeps the parameter count of the 4x MLP.
            return int(round(8 * self.d_model / 3))
        return 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict:
        return asdict(self)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _validate(c: AndreaConfig) -> None:
    for name in ("vocab_size", "context_length", "d_model", "n_layer", "n_head"):
        v = getattr(c, name)
        if not _is_int(v) or v < 1:
            raise ValueError(f"AndreaConfig.{name} must be a positive integer, got {v!r}")
    if c.mlp_dim is not None and (not _is_int(c.mlp_dim) or c.mlp_dim < 1):
        raise ValueError(f"AndreaConfig.mlp_dim must be None or a positive integer, got {c.mlp_dim!r}")
    if c.d_model % c.n_head != 0:
        raise ValueError(
            f"AndreaConfig.d_model={c.d_model} is not divisible by n_head={c.n_head}; "
            f"allowed n_head values for this width: {[h for h in range(1, min(c.d_model, 64) + 1) if c.d_model % h == 0]}"
        )
    if c.norm not in NORMS:
        raise ValueError(f"AndreaConfig.norm must be one of {NORMS}, got {c.norm!r}")
    if c.activation not in ACTIVATIONS:
        raise ValueError(f"AndreaConfig.activation must be one of {ACTIVATIONS}, got {c.activation!r}")
    if not isinstance(c.residual, bool):
        raise ValueError(f"AndreaConfig.residual must be True or False, got {c.residual!r}")
    if not isinstance(c.scale_residual_init, bool):
        raise ValueError(f"AndreaConfig.scale_residual_init must be True or False, got {c.scale_residual_init!r}")
    if not isinstance(c.bias, bool):
        raise ValueError(f"AndreaConfig.bias must be True or False, got {c.bias!r}")
    if c.layerscale is not None:
        ls = c.layerscale
        if isinstance(ls, bool) or not isinstance(ls, (int, float)) or not math.isfinite(ls) or ls < 0:
            raise ValueError(
                f"AndreaConfig.layerscale must be None or a finite number >= 0 (lambda's initial value), got {ls!r}"
            )
    if not isinstance(c.dropout, (int, float)) or not 0.0 <= c.dropout < 1.0:
        raise ValueError(f"AndreaConfig.dropout must be in [0, 1), got {c.dropout!r}")
    if not isinstance(c.ln_eps, (int, float)) or not c.ln_eps > 0 or not math.isfinite(c.ln_eps):
        raise ValueError(f"AndreaConfig.ln_eps must be a finite number > 0, got {c.ln_eps!r}")
    if not isinstance(c.init_std, (int, float)) or not c.init_std > 0 or not math.isfinite(c.init_std):
        raise ValueError(f"AndreaConfig.init_std must be a finite number > 0, got {c.init_std!r}")


# The model the documents define: 12 pre-norm blocks of width 768, GELU (tanh), tied embeddings.
ANDREA_120M = AndreaConfig()
