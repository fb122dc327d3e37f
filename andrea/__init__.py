"""andrea: the ANDREA-120M transformer, its parts, and the probes the book measures it with.

    from andrea import AndreaConfig, Andrea, ANDREA_120M, count_parameters, gradient_flow, pick_device
"""

from .config import ANDREA_120M, AndreaConfig
from .device import pick_device
from .model import Andrea, count_layer_norms, count_parameters
from .probe import GradientReport, gradient_flow, random_batch

__all__ = [
    "ANDREA_120M",
    "Andrea",
    "AndreaConfig",
    "GradientReport",
    "count_layer_norms",
    "count_parameters",
    "gradient_flow",
    "pick_device",
    "random_batch",
]
__version__ = "0.1.0"
