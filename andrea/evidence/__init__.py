"""Evidence: ``runs`` (what one training run of a grid computes), ``store`` (the committed results
store in ``andrea/results``, keyed by the code and the grid's spec), ``verdict`` (the book's one rule
for verdicts), ``grids`` (the grids behind the verdicts, one module per chapter) and ``evaluation``
(the stored results by name, and each grid's declared rule applied to them)."""
