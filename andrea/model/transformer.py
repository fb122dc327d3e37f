"""The whole model: embeddings, a stack of blocks, a final LayerNorm, and the tied output head.

The forward pass is the documents' six lines::

    x = token_embed(ids) + position_embed(positions)
    for block in blocks:
        x = block(x)
    x = LayerNorm(x)
    logits = x @ token_embed.T

Why tied weights count once: the output projection *is* the token-embedding matrix (the same
tensor, transposed), so it adds no parameters. ``count_parameters`` counts it under
``token_embedding`` only.
"""

from __future__ import annotations

import math
import os
from dataclasses import fields
from pathlib import Path
from typing import Union

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..files import temporary_name
from .config import AndreaConfig
from .layers import Block, LayerNorm, LayerScale

CHECKPOINT_FORMAT = "andrea-checkpoint"
CHECKPOINT_VERSION = 1


class Andrea(nn.Module):
    """ANDREA: token and position embeddings, ``n_layer`` blocks, a final LayerNorm (pre-norm only)
    and an output head tied to the token embedding.

    Build it from an ``AndreaConfig``; every variant the book studies is a config switch. The
    weights are initialised in one place, ``_init_weights``, by the scheme ``config.init`` names.
    ``model(idx)`` maps token ids (B, T) to logits (B, T, vocab_size); ``model.loss(idx, targets)``
    is the mean next-token cross-entropy. Token ids are checked before any indexing, so a bad id is
    a ``ValueError`` naming it, never an index error deep inside torch.
    """

    def __init__(self, config: AndreaConfig):
        super().__init__()
        if not isinstance(config, AndreaConfig):
            raise TypeError(f"Andrea(config) needs an AndreaConfig, got {type(config).__name__}")
        self.config = config
        c = config
        device = torch.get_default_device()  # honours a caller's `with torch.device(...)`
        # The modules are built on the "meta" device (shapes only, no memory, no default init,
        # which torch would otherwise run and we would then overwrite) and materialised once.
        with torch.device("meta"):
            self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)  # (V, C), also the output head
            self.position_embedding = nn.Embedding(c.context_length, c.d_model)  # (T_max, C)
            self.drop = nn.Dropout(c.dropout)
            self.blocks = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
            # Post-norm and DeepNorm blocks already end in a LayerNorm, and "none" has no norms at
            # all: only the pre-norm stack needs a final one (the 25th LayerNorm of ANDREA-120M).
            self.final_norm = LayerNorm(c.d_model, c.bias, c.ln_eps) if c.norm == "pre" else nn.Identity()
            if c.norm == "final":  # no LayerNorm in the blocks, and this one kept (chapter 2's control)
                self.final_norm = LayerNorm(c.d_model, c.bias, c.ln_eps)
        self.to_empty(device=device)
        self.apply(self._init_weights)

    # -- initialisation, in one place -----------------------------------------------------------
    def _init_weights(self, module: nn.Module) -> None:
        c = self.config
        if isinstance(module, LayerNorm):  # gamma = 1, beta = 0: a plain standardisation at first
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, LayerScale):
            nn.init.constant_(module.scale, c.layerscale)  # type: ignore[arg-type]
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=c.init_std)
        elif isinstance(module, nn.Linear):
            if module.bias is not None:
                nn.init.zeros_(module.bias)
            if c.init == "gpt2":
                # Each block adds two outputs to the residual stream; scaling their projections by
                # 1/sqrt(2 * n_layer) keeps the stream's added variance from growing with depth.
                scaled = getattr(module, "residual_output", False)
                nn.init.normal_(
                    module.weight, mean=0.0, std=c.init_std / math.sqrt(2 * c.n_layer) if scaled else c.init_std
                )
            elif c.init == "normal":
                nn.init.normal_(module.weight, mean=0.0, std=c.init_std)
            else:
                # Xavier needs each matrix's own fan-out: a fused projection (q, k, v in one Linear;
                # SwiGLU's gate and up) is initialised as the separate matrices it stands for.
                parts = getattr(module, "parts", (None,))
                for part, w in zip(parts, module.weight.data.chunk(len(parts), dim=0)):
                    if c.init == "xavier":
                        nn.init.xavier_uniform_(w)
                    else:  # "deepnorm": Xavier normal, gain 1 on q and k, beta on v, outputs and the MLP
                        nn.init.xavier_normal_(w, gain=1.0 if part in ("q", "k") else c.deepnorm_beta)

    # -- forward ---------------------------------------------------------------------------------
    def check_input(self, idx: torch.Tensor) -> None:
        """Raise ValueError for anything that would index out of range (before any indexing)."""
        if not isinstance(idx, torch.Tensor):
            raise ValueError(f"token ids must be a torch.LongTensor of shape (B, T), got {type(idx).__name__}")
        if idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"token ids must be integers (torch.long), got dtype {idx.dtype}")
        if idx.dim() != 2:
            raise ValueError(f"token ids must have shape (B, T), got shape {tuple(idx.shape)}")
        T = idx.size(1)
        if T > self.config.context_length:
            raise ValueError(f"sequence length {T} exceeds the context length {self.config.context_length}")
        if idx.numel() == 0:
            raise ValueError(f"token ids are empty (shape {tuple(idx.shape)})")
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= self.config.vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"token id {bad} is outside the vocabulary [0, {self.config.vocab_size})")

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        return self.drop(self.token_embedding(idx) + self.position_embedding(pos))  # (B, T, C)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.check_input(idx)
        x = self.embed(idx)  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        x = self.final_norm(x)  # (B, T, C)
        return x @ self.token_embedding.weight.T  # (B, T, V): tied output head

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy (nats). targets: (B, T) token ids, same range as idx."""
        logits = self(idx)
        if not isinstance(targets, torch.Tensor) or targets.shape != idx.shape:
            shape = tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise ValueError(f"targets must have the shape of idx {tuple(idx.shape)}, got {shape}")
        self.check_input(targets)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    @property
    def device(self) -> torch.device:
        return self.token_embedding.weight.device

    # -- save / load -----------------------------------------------------------------------------
    def save(self, path: Union[str, Path], extra: dict | None = None) -> Path:
        """Store the config and weights (and optional plain-data ``extra``) in one file, atomically:
        the bytes go to a uniquely named temporary file that then replaces ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        blob = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "config": self.config.to_dict(),
            "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
            "extra": extra or {},
        }
        tmp = temporary_name(path)
        try:
            torch.save(blob, tmp)
            os.replace(tmp, path)
        except (OSError, RuntimeError) as e:  # a full disk: torch's writer says "unexpected pos ..."
            raise _write_error(path, e) from e
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    @classmethod
    def load(cls, path: Union[str, Path], map_location=None) -> "Andrea":
        blob = read_checkpoint(path, map_location)
        model = cls(AndreaConfig(**blob["config"]))
        model.load_state_dict(blob["state_dict"])
        return model.to(map_location) if map_location is not None else model


def _write_error(path: Path, e: BaseException) -> OSError:
    """What a failed checkpoint write says: the file, the free space where it goes, and that the file
    already there (if any) is kept as it was."""
    import shutil

    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**20:,.1f} MiB free"
    except OSError:
        free = "free space unknown"
    kept = "the checkpoint already there is kept as it was" if path.exists() else "nothing was written"
    return OSError(
        f"could not write the checkpoint {str(path)!r} ({free} on its disk; {type(e).__name__}: "
        f"{str(e).strip()[:200]}); {kept}. Free some space (or choose another folder) and run again"
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:200]}" if text else type(e).__name__


def _migrate_config(config: dict) -> dict:
    """Configs written before ``init`` existed had ``scale_residual_init`` (True: "gpt2")."""
    config = dict(config)
    if "scale_residual_init" in config and "init" not in config:
        config["init"] = "gpt2" if config.pop("scale_residual_init") else "normal"
    return config


def read_checkpoint(path: Union[str, Path], map_location=None) -> dict:
    """Load a checkpoint dict safely (``weights_only=True``: no pickled code ever runs).

    Anything that is not a complete ANDREA checkpoint is a ``ValueError`` that names the file and
    what is wrong with it; a missing file is a ``FileNotFoundError``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no ANDREA checkpoint at {str(path)!r} (file not found)")
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is a directory, not an ANDREA checkpoint file")
    if path.stat().st_size == 0:
        raise ValueError(f"{str(path)!r} is empty (0 bytes): not an ANDREA checkpoint (an interrupted copy?)")
    try:
        blob = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # any failure to unpickle safely means: not a checkpoint we can read
        raise ValueError(
            f"{str(path)!r} is not a readable ANDREA checkpoint (truncated, corrupted or not made by "
            f"Andrea.save): {_first_line(e)}"
        ) from None
    if not isinstance(blob, dict) or blob.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{str(path)!r} is a torch file but not an ANDREA checkpoint (no 'format' marker)")
    if blob.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{str(path)!r} has checkpoint version {blob.get('version')!r}; this code reads {CHECKPOINT_VERSION}"
        )
    missing = [k for k in ("config", "state_dict") if not isinstance(blob.get(k), dict)]
    if missing:
        raise ValueError(f"{str(path)!r} is an incomplete ANDREA checkpoint: it has no {' and no '.join(missing)}")
    blob["config"] = _migrate_config(blob["config"])
    known = {f.name for f in fields(AndreaConfig)}
    unknown = set(blob["config"]) - known
    if unknown:
        raise ValueError(f"{str(path)!r} has config fields this version does not know: {sorted(unknown)}")
    try:
        config = AndreaConfig(**blob["config"])
    except (ValueError, TypeError) as e:
        raise ValueError(f"{str(path)!r} holds an invalid config: {e}") from None
    _check_state_dict(path, config, blob["state_dict"])
    if not isinstance(blob.get("extra", {}), dict):
        raise ValueError(f"{str(path)!r} has a malformed 'extra' section (expected a dict)")
    blob.setdefault("extra", {})
    return blob


def _check_state_dict(path: Path, config: AndreaConfig, state: dict) -> None:
    """The weights must be exactly the tensors a model of ``config`` has (names, shapes, floats)."""
    with torch.device("meta"):
        expected = {k: v.shape for k, v in Andrea(config).state_dict().items()}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{str(path)!r}: its weights do not fit its config (missing {missing[:3]}"
            f"{'...' if len(missing) > 3 else ''}, unexpected {unexpected[:3]}"
            f"{'...' if len(unexpected) > 3 else ''})"
        )
    for k, shape in expected.items():
        t = state[k]
        if not isinstance(t, torch.Tensor) or t.shape != shape or not t.is_floating_point():
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{str(path)!r}: weight {k!r} should be a float tensor of shape {tuple(shape)}, got {got}")


# ---------------------------------------------------------------------------------------------
# Parameter counting
# ---------------------------------------------------------------------------------------------
def _block_counts_formula(c: AndreaConfig) -> dict:
    d, h, b = c.d_model, c.d_hidden, int(c.bias)
    attention = d * 3 * d + b * 3 * d + d * d + b * d  # qkv and output projection
    n_in = 2 * h if c.activation == "swiglu" else h
    mlp = d * n_in + b * n_in + h * d + b * d  # W_1 (and W_gate), W_2
    norms = 0 if c.norm == "none" else 2 * (d + b * d)  # two LayerNorms, gamma (and beta)
    if c.norm == "final":
        norms = 0
    layerscale = 0 if c.layerscale is None else 2 * (d if c.layerscale_kind == "channel" else 1)  # two lambdas
    return {
        "attention": attention,
        "mlp": mlp,
        "norms": norms,
        "layerscale": layerscale,
        "total": attention + mlp + norms + layerscale,
    }


def _numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def count_parameters(model_or_config: Union[Andrea, AndreaConfig]) -> dict:
    """Parameters by part, tied weights counted once.

    Returns a dict with ``token_embedding``, ``position_embedding``, ``blocks`` (all blocks),
    ``final_norm``, ``total``; ``attention``, ``mlp``, ``norms``, ``layerscale`` summed over the
    blocks; and ``per_block``, the same four (and ``total``) for one block (all blocks are equal).
    Given a model, counts its tensors; given a config, uses the closed-form formula.
    """
    if isinstance(model_or_config, AndreaConfig):
        c = model_or_config
        per = _block_counts_formula(c)
        out = {
            "token_embedding": c.vocab_size * c.d_model,
            "position_embedding": c.context_length * c.d_model,
            "final_norm": (c.d_model + int(c.bias) * c.d_model) if c.norm == "pre" else 0,
        }
        if c.norm == "final":
            out["final_norm"] = c.d_model + int(c.bias) * c.d_model
        n = c.n_layer
    elif isinstance(model_or_config, Andrea):
        m = model_or_config
        blk = m.blocks[0]
        per = {
            "attention": _numel(blk.attn),  # type: ignore[arg-type]
            "mlp": _numel(blk.mlp),  # type: ignore[arg-type]
            "norms": _numel(blk.ln_1) + _numel(blk.ln_2),  # type: ignore[arg-type]
            "layerscale": _numel(blk.ls_1) + _numel(blk.ls_2),  # type: ignore[arg-type]
        }
        per["total"] = _numel(blk)
        out = {
            "token_embedding": m.token_embedding.weight.numel(),
            "position_embedding": m.position_embedding.weight.numel(),
            "final_norm": _numel(m.final_norm),
        }
        n = len(m.blocks)
        if any(_numel(b) != per["total"] for b in m.blocks):
            raise ValueError("count_parameters: blocks of this model differ in size")
    else:
        raise TypeError(
            f"count_parameters takes an Andrea model or an AndreaConfig, got {type(model_or_config).__name__}"
        )
    for k in ("attention", "mlp", "norms", "layerscale"):
        out[k] = n * per[k]
    out["blocks"] = n * per["total"]
    out["per_block"] = per  # type: ignore[assignment]
    out["total"] = out["token_embedding"] + out["position_embedding"] + out["blocks"] + out["final_norm"]
    return out


def count_layer_norms(model: nn.Module) -> int:
    """How many LayerNorm modules the model contains (found in the module tree, not computed)."""
    return sum(isinstance(m, (LayerNorm, nn.LayerNorm)) for m in model.modules())
