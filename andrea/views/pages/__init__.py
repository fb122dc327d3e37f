"""Each chapter's words computed from its measurements: one module per chapter (``ch1.py`` ... ``ch8.py``).

A lesson imports its module (``from andrea.views.pages import ch1 as page``) and calls it: ``page.found()``
for "What we found", ``page.claims()`` for the claims table, and the values it glues. The chapter's evidence
page calls the same module for the apparatus: each claim's reasons, the grids' declared rules, both
machines' readings, Holm's correction and the detailed tables. No lesson cell builds a sentence itself
(tests/test_lessons.py).
"""
