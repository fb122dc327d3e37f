"""Measurement: ``probe`` (``gradient_flow``: the stream and its gradient at every block boundary),
``analysis`` (the chapters' measurements), ``papers`` (the appendix's reproductions) and ``runstats``
(the statistics of one stored training run that the grids' rules decide on)."""
