"""andrea: the ANDREA-120M transformer, its parts, and the probes the book measures it with.

    from andrea import AndreaConfig, Andrea, ANDREA_120M, count_parameters, gradient_flow, pick_device

The package, by concept (each layer imports only the ones above it in this list, never one below):

* ``files``, ``device``, ``progress``: caches, atomic writes and source hashes; where to run;
  progress bars.
* ``model/``: ``config`` (``AndreaConfig``, its switches and presets), ``layers`` (LayerNorm, GELU,
  attention, the MLP, LayerScale, the Block: readable formulas beside the fused modules),
  ``transformer`` (``Andrea``, ``count_parameters``, safe save/load).
* ``training/``: ``data`` (Python's docs as a corpus, tokenizers), ``optimizer`` (AdamW),
  ``checkpoint`` (a run's folder: lock, atomic checkpoints, resume checks), ``train`` (training,
  sampling, the command line ``python -m andrea.training.train``).
* ``measure/``: ``probe`` (``gradient_flow``: the stream and its gradient at every block boundary),
  ``analysis`` (the chapters' measurements), ``papers`` (the appendix's reproductions),
  ``runstats`` (statistics of a stored run).
* ``evidence/``: ``runs`` (what one stored run computes), ``store`` (the committed results store,
  ``results/``), ``verdict`` (the book's one rule for verdicts), ``grids/`` (the named training
  grids behind the verdicts, one module per chapter), ``evaluation`` (their declared rules applied).
* ``views/``: ``notebook`` (glue, claim tables, ``setup``), ``plots``, ``diagrams``, ``legibility``,
  ``phone`` and ``figure_png`` (every figure), ``explorer``, ``widgets`` and ``static_explorer`` (the
  gradient-flow explorer), ``checks``, ``exercises`` and ``exercises_inside`` (the checkers),
  ``bench`` (``make bench``).
* ``trained/``: the shipped 12-block model, its corpus, probes and figures (chapter 8).
* ``web/``: what the in-page explorer (TensorFlow.js) is tested against.
* ``experiments``: the command line that runs the grids, the trained model and the explorer's
  shipped measurements (``python -m andrea.experiments``).

``andrea.layers`` is kept as another name for ``andrea.model.layers`` (readers write
``from andrea.layers import layer_norm, gelu``): the very same module, registered under both names.
"""

import sys

from .device import pick_device
from .measure.probe import GradientReport, gradient_flow, random_batch
from .model import layers
from .model.config import ANDREA_120M, AndreaConfig
from .model.transformer import Andrea, count_layer_norms, count_parameters

sys.modules[__name__ + ".layers"] = layers  # `import andrea.layers` is `andrea.model.layers`

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
