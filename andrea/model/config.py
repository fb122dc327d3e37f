"""The model's configuration: one frozen dataclass, the ANDREA-120M preset, and validation.

Every variant the book needs (post-norm, DeepNorm, no residual, LayerScale, ReZero, ReLU, SwiGLU,
another initialisation, any depth or width) is the same code with different switches here.
Variants are made with ``dataclasses.replace``::

    from dataclasses import replace
    deep = replace(ANDREA_120M, d_model=128, n_head=4, n_layer=48, layerscale=1e-6)

Where the source documents are silent we follow GPT-2 (heads, context, biases, epsilon, init).
Every field is checked when the config is made; a bad value raises ``ValueError`` naming the
field, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Optional

NORMS = ("pre", "post", "none", "deepnorm", "final")
ACTIVATIONS = ("gelu_tanh", "gelu", "relu", "swiglu")
INITS = ("gpt2", "normal", "xavier", "deepnorm")
LAYERSCALE_KINDS = ("channel", "scalar")
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class AndreaConfig:
    vocab_size: int = 8449  # BPE vocabulary of the documents' ANDREA-120M
    context_length: int = 1024  # longest sequence; learned position embeddings (GPT-2)
    d_model: int = 768  # width of the residual stream
    n_layer: int = 12  # number of blocks
    n_head: int = 12  # attention heads (GPT-2); d_model must divide by it
    mlp_dim: Optional[int] = None  # MLP hidden width; None: 4*d_model (8/3*d_model for swiglu)
    # Wiring of each sublayer f (see layers.Block):
    #   "pre": x + f(LN(x))   "post": LN(x + f(x))   "none": x + f(x)
    #   "deepnorm": LN(alpha * x + f(x)) with alpha = (2 n_layer)^(1/4) (Wang et al. 2022, decoder-only)
    #   "final": x + f(x), as "none", but the stack keeps its final LayerNorm (chapter 2's control)
    norm: str = "pre"
    residual: bool = True  # False drops the "x +" of every sublayer
    layerscale: Optional[float] = None  # None, or the initial value of LayerScale's lambda (0: ReZero)
    layerscale_kind: str = "channel"  # "channel": a vector lambda (CaiT); "scalar": one alpha (ReZero)
    activation: str = "gelu_tanh"  # "gelu_tanh" | "gelu" (exact erf) | "relu" | "swiglu"
    dropout: float = 0.0  # dropout probability on the residual branches and attention
    bias: bool = True  # biases in Linear layers and LayerNorms (GPT-2)
    ln_eps: float = 1e-5  # LayerNorm epsilon (GPT-2)
    # Initialisation of the weights (model.Andrea._init_weights); biases always start at 0:
    #   "gpt2":     N(0, init_std^2), the residual output projections N(0, init_std^2 / (2 n_layer))
    #   "normal":   N(0, init_std^2) everywhere, no depth scaling
    #   "xavier":   Xavier/Glorot uniform for every matrix (q, k, v as three d x d matrices), no depth
    #               scaling, as in the 2017 Transformer and Xiong et al. 2020; embeddings N(0, init_std^2)
    #   "deepnorm": Xavier normal, with gain beta = (8 n_layer)^(-1/4) on v, the attention output and
    #               both MLP matrices, gain 1 on q and k (Wang et al. 2022); embeddings N(0, init_std^2)
    init: str = "gpt2"
    init_std: float = 0.02  # the std of "gpt2" and "normal", and of the embeddings in every scheme

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

    @property
    def deepnorm_alpha(self) -> float:
        """DeepNorm's up-weighting of the residual path, (2N)^(1/4) for a decoder of N blocks."""
        return (2 * self.n_layer) ** 0.25

    @property
    def deepnorm_beta(self) -> float:
        """DeepNorm's initialisation gain, (8N)^(-1/4) for a decoder of N blocks."""
        return (8 * self.n_layer) ** -0.25

    def to_dict(self) -> dict:
        return asdict(self)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _validate(c: AndreaConfig) -> None:
    for name in ("vocab_size", "context_length", "d_model", "n_layer", "n_head"):
        v = getattr(c, name)
        if not _is_int(v) or v < 1:
            raise ValueError(f"AndreaConfig.{name} must be a positive integer, got {v!r}")
    if c.mlp_dim is not None and (not _is_int(c.mlp_dim) or c.mlp_dim < 1):
        raise ValueError(f"AndreaConfig.mlp_dim must be None or a positive integer, got {c.mlp_dim!r}")
    if c.d_model % c.n_head != 0:
        divisors = [h for h in range(1, min(c.d_model, 64) + 1) if c.d_model % h == 0]
        raise ValueError(
            f"AndreaConfig.d_model={c.d_model} is not divisible by n_head={c.n_head}; "
            f"allowed n_head values for this width: {divisors}"
        )
    for name, allowed in (
        ("norm", NORMS),
        ("activation", ACTIVATIONS),
        ("init", INITS),
        ("layerscale_kind", LAYERSCALE_KINDS),
    ):
        v = getattr(c, name)
        if v not in allowed:
            raise ValueError(f"AndreaConfig.{name} must be one of {allowed}, got {v!r}")
    for name in ("residual", "bias"):
        v = getattr(c, name)
        if not isinstance(v, bool):
            raise ValueError(f"AndreaConfig.{name} must be True or False, got {v!r}")
    if c.norm == "deepnorm" and not c.residual:
        raise ValueError("AndreaConfig.norm='deepnorm' up-weights the residual path, so it needs residual=True")
    if c.layerscale is not None:
        ls = c.layerscale
        if not _is_real(ls) or not math.isfinite(ls) or not 0 <= ls <= FLOAT32_MAX:
            raise ValueError(
                "AndreaConfig.layerscale must be None or a number >= 0 and <= 3.4e38 (lambda's initial value, "
                f"stored in float32), got {ls!r}"
            )
    if not _is_real(c.dropout) or not 0.0 <= c.dropout < 1.0:
        raise ValueError(f"AndreaConfig.dropout must be a number in [0, 1), got {c.dropout!r}")
    if not _is_real(c.ln_eps) or not math.isfinite(c.ln_eps) or not 0 < c.ln_eps <= 1:
        raise ValueError(f"AndreaConfig.ln_eps must be a number in (0, 1], got {c.ln_eps!r}")
    if not _is_real(c.init_std) or not math.isfinite(c.init_std) or not 0 < c.init_std <= 10:
        raise ValueError(f"AndreaConfig.init_std must be a number in (0, 10], got {c.init_std!r}")


def rezero(config: AndreaConfig) -> AndreaConfig:
    """ReZero (Bachlechner et al. 2020) as switches: no LayerNorm, one scalar alpha per sublayer,
    initialised at exactly 0, so every block starts as the identity."""
    return replace(config, norm="none", layerscale=0.0, layerscale_kind="scalar")


def deepnet(config: AndreaConfig) -> AndreaConfig:
    """DeepNet (Wang et al. 2022), decoder-only: DeepNorm wiring and its beta-scaled Xavier init."""
    return replace(config, norm="deepnorm", init="deepnorm")


# The model the documents define: 12 pre-norm blocks of width 768, GELU (tanh), tied embeddings.
ANDREA_120M = AndreaConfig()
