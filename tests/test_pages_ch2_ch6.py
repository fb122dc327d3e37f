"""Chapters 2 and 6's words (andrea.views.pages.ch2, ch6): the verdicts they compute can come out either way."""

from __future__ import annotations

import numpy as np

from andrea.views.pages import ch2, ch6


def _sweep(pre_finite, none_finite):
    scales = [1, 2, 4, 8]
    return {
        "pre": {"scale": scales, "act_top": [1.0] * 4, "finite": pre_finite},
        "none": {"scale": scales, "act_top": [1.0] * 4, "finite": none_finite},
    }


def test_the_overflow_verdict_follows_which_stack_overflows_first():
    def label(pre, none):
        return ch2.overflow_verdict(_sweep(pre, none)).label

    assert label([True] * 4, [True, True, False, False]) == "confirmed"
    assert label([True, True, True, False], [True, True, False, False]) == "confirmed"
    assert label([True, False, False, False], [True, True, False, False]) == "not reproduced"
    assert label([True] * 4, [True] * 4) == "inconclusive"


def test_blocks_are_alike_only_without_a_trend_along_the_stack():
    flat = np.array([[2.64 + 0.001 * ((i * 7 + s) % 3) for i in range(12)] for s in range(3)])
    rising = np.array([[1.0 + 0.1 * i + 0.001 * s for i in range(12)] for s in range(3)])
    assert ch6.alike(flat).label == "confirmed" and ch6.trend_words(flat) == "no trend"
    assert ch6.alike(rising).label == "not reproduced" and ch6.trend_words(rising) == "a trend"


def test_the_budget_counts_the_tied_embedding_once_and_the_documents_twice():
    from andrea import ANDREA_120M, count_parameters

    counts = count_parameters(ANDREA_120M)
    b = ch6.budget(counts)
    assert b["emb_doc"] == 2 * b["emb"] and b["untied"] == counts["total"] + b["emb"]
    found = ch6.what_we_found(counts).text
    assert f"{counts['total'] / 1e6:.1f} M parameters" in found and "**corrected**" in found
    rows = ch6.budget_table(counts).rows
    assert rows[-1][:2] == ["total", f"{counts['total']:,}"]
    assert not any("_" in str(cell) for row in rows for cell in row), "code names in the budget table's cells"
