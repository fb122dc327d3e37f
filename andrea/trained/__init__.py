"""A trained ANDREA that ships with the book, and the instruments that look inside it.

* ``corpus`` (``andrea.training.manuals``, where the training command line reads it too): the training text
  (Python's full manuals, Debian's ``python3.11-doc``), split by file;
* ``model``: the trained model's configuration, training, and the shipped weights (safetensors);
* ``inside``: what the book measures on it: the logit lens, attention heads, MLP and LayerNorm;
* ``probes``: linear probes with control tasks at every boundary of the residual stream.
"""
