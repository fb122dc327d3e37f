"""The book's views: ``notebook`` (glue, claim tables, evidence folds, ``setup``), ``plots`` (the
figures), ``diagrams`` (the block and stack drawn from a config), ``legibility`` (what a figure must
be to be read), ``explorer`` (the gradient-flow explorer's logic and shipped measurements),
``widgets`` (its live ipywidgets view), ``static_explorer`` (the same for the static site),
``checks`` and ``exercises`` (the exercises' checkers) and ``bench`` (``make bench``)."""
