"""The book's views: ``notebook`` (glue, claim tables, evidence folds, ``setup``), ``plots`` (the
figures), ``diagrams`` (the block and stack drawn from a config), ``legibility`` (what a figure must
be to be read), ``phone`` (a figure drawn for a phone), ``figure_png`` (the PNG the book shows),
``explorer`` (the gradient-flow explorer's logic and shipped measurements), ``widgets`` (its live
ipywidgets view), ``static_explorer`` (the same for the static site), ``checks``, ``exercises`` and
``exercises_inside`` (the exercises' checkers) and ``bench`` (``make bench``)."""
