"""Training: ``data`` (Python's docs as a corpus, tokenizers), ``optimizer`` (AdamW, decay on matrices
only), ``checkpoint`` (a run's folder: lock, atomic checkpoints, resume checks), ``train`` (the training
loop and sampling) and ``cli`` (the command line ``python -m andrea.training.train``, its options checked)."""
