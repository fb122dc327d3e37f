"""Training: ``data`` (Python's docs as a corpus, tokenizers), ``optimizer`` (AdamW, decay on matrices
only), ``checkpoint`` (a run's folder: lock, atomic checkpoints, resume checks) and ``train`` (the
training loop, sampling, and the command line ``python -m andrea.training.train``)."""
