"""Chapter 7's words (andrea.views.pages.ch7, ch7_training): the explorer's instruction starts where the explorer
opens, and each verdict is said once, in plain words that agree with its stored label (issue 47's second reader)."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext

from andrea.views.pages import ch7 as page

LESSON = Path(__file__).resolve().parents[1] / "book" / "07_layerscale.md"


def test_the_explorer_instruction_starts_at_the_explorers_opening_value():
    """The reader was told to drag λ₀ up from 10⁻⁶ while the explorer opened at 1e-5: the sentence is built
    from ``page.EXPLORER``, and the lesson opens both explorers with it."""
    look = page.explorer_look()
    assert f"opens at λ₀ = {page.sci(page.EXPLORER['layerscale'])}" in look, look
    assert "10⁻⁶" not in look or page.EXPLORER["layerscale"] == 1e-6
    cells = [c.source for c in jupytext.read(LESSON).cells if c.cell_type == "code"]
    assert any("StaticExplorer(**page.EXPLORER" in c for c in cells)
    assert any("GradientFlowExplorer(**page.EXPLORER)" in c for c in cells)


def test_the_80_block_sentence_prints_the_stored_label_once_and_links_the_glossary():
    label = page.ev(page.DEEP80).verdict.label
    for said in (page.deep80_sentence(), page.deep80_short()):
        labels = re.findall(r"\{term\}`([^`]+)`|\*\*([^*]+)\*\*", said)
        assert [a or b for a, b in labels] == [label], said
        assert page.label_md(label) in said
    assert "depends on the recipe" not in page.deep80_sentence()  # that reads as "qualified", not this label
    assert "(evidence <ev-ch7-deep80>)" not in page.deep80_said().text
    assert "{ref}`evidence <ev-ch7-deep80>`" in page.deep80_said().text


def test_the_noise_sentence_prints_its_label_as_a_glossary_term_where_there_is_one():
    survival, _ = page.noise_profiles()
    label = page.noise_verdict(survival).label
    said = page.noise_sentence(survival).text
    assert page.label_md(label) in said and "{ref}`evidence <ev-ch7-noise>`" in said
    assert page.label_md("qualified") == "{term}`qualified`" and page.label_md("confirmed") == "**confirmed**"
