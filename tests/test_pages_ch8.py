"""Chapter 8's words (andrea.views.pages.ch8, ch8_probes): every verdict is said once, with the label the
probes' rule decided, and linked to its section of the evidence page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from andrea.views.pages import ch8 as page

EVIDENCE = Path(__file__).resolve().parents[1] / "book" / "evidence" / "08_trained_evidence.md"


@pytest.fixture(scope="module")
def report():
    from andrea.trained import model as trained
    from andrea.trained import probes

    found = trained.probe_results()  # shipped with the package
    return page.ProbeReport(probes, found, probes.decide_all(found))


def test_each_claim_is_said_once_with_its_label_and_its_evidence(report):
    said = report.sentences().text
    for t in report.claim_tasks:
        v = report.decided[t.name][0]
        links = re.findall(rf"\{{ref\}}`([^`<]+) <{page.ANCHORS[t.name]}>`", said)
        assert links == [v.label], f"{t.name}: links {links}, the rule says {v.label!r}"
    overall = page.overall(report).text
    assert f"{{ref}}`{report.overall.label} <{page.ANCHORS['the claim']}>`" in overall


def test_every_claim_links_to_a_section_of_the_evidence_page(report):
    labels = set(re.findall(r"^\(([a-z0-9-]+)\)=$", EVIDENCE.read_text(), flags=re.M))
    anchors = {c.anchor for c in page.claim_rows(report)}
    assert anchors and anchors <= labels, sorted(anchors - labels)
    assert [c.label for c in page.claim_rows(report)][-1] == report.overall.label


def test_the_report_refuses_results_without_every_task(report):
    partial = {k: v for k, v in report.found.items() if k != "meaning"}
    with pytest.raises(ValueError, match="meaning"):
        page.ProbeReport(report.rule, partial, report.decided)


def test_copying_is_said_from_the_losses():
    import numpy as np

    heads = {page.PROSE: {"trained": {"loss_second": 3.0, "induction": np.array([[0.1, 0.7]])}}}
    assert "does not copy" in page.copies(heads, {"loss_second": 2.9})
    assert "no head gives even half" not in page.copies(heads, {"loss_second": 3.2})
    heads[page.PROSE]["trained"]["induction"] = np.array([[0.1, 0.2]])
    assert "no head gives even half" in page.copies(heads, {"loss_second": 3.2})
