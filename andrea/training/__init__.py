"""Training: ``data`` (Python's docs as a corpus, tokenizers), ``optimizer`` (AdamW, decay on matrices
only), ``checkpoint`` (a run's folder: lock, atomic checkpoints, resume checks), ``train`` (the training
loop and sampling), ``cli`` (the command line ``python -m andrea.training.train``, its options checked),
``heldout`` (the best checkpoint and the early stop, on the loop's hooks) and ``manuals`` (Python's manuals, the
text of chapter 8's model and of ``--preset andrea-120m``, in chapter 8's tokenizer)."""
