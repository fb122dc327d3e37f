"""The model: ``config`` (``AndreaConfig``, its switches and presets), ``layers`` (LayerNorm, GELU,
attention, the MLP, LayerScale, the Block: readable formulas beside the fused modules) and
``transformer`` (``Andrea``, ``count_parameters``, safe save/load).

    from andrea.model import Andrea, AndreaConfig
"""

from .config import ANDREA_120M, AndreaConfig
from .transformer import Andrea, count_layer_norms, count_parameters

__all__ = ["ANDREA_120M", "Andrea", "AndreaConfig", "count_layer_norms", "count_parameters"]
