"""andrea: the ANDREA-120M transformer, its parts, and the probes the book measures it with.

    from andrea import AndreaConfig, Andrea, ANDREA_120M, count_parameters, gradient_flow, pick_device

The package, in the README's grouping:

* **The model**: ``config`` (``AndreaConfig``, its switches and presets), ``layers`` (LayerNorm, GELU,
  attention, the MLP, LayerScale, the Block: readable formulas beside the fused modules), ``model``
  (``Andrea``, ``count_parameters``, safe save/load), ``device`` (where to run).
* **The probes and analyses**: ``probe`` (``gradient_flow``: the stream and its gradient at every block
  boundary), ``analysis`` (the chapters' measurements), ``papers`` (the appendix's reproductions),
  ``verdict`` (the book's one rule for verdicts).
* **The explorer**: ``explorer`` (its logic and shipped measurements), ``widgets`` (the live ipywidgets
  view), ``static_explorer`` (the same for the static site), ``plots`` (every figure).
* **Training and data**: ``data`` (Python's docs as a corpus, tokenizers), ``train`` (AdamW training,
  sampling, the command line), ``checkpoint`` (a run's folder: lock, atomic checkpoints, resume
  checks), ``experiments`` (the named training grids behind the verdicts), ``store`` and ``runs`` (the
  committed results store and what one run computes), ``results/`` (the stored results).
* **Book support**: ``notebook`` (glue, claim tables, ``setup``), ``exercises`` (the checkers),
  ``bench`` (``make bench``), ``files`` and ``progress`` (caches, atomic writes, progress bars).
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
__version__ = "0.2.0"
