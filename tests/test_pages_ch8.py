"""Chapter 8's words (andrea.views.pages.ch8, ch8_locate, ch8_probes): every verdict is said once, with the
label rule version 5 decided on the two new models, and linked to its section of the evidence page; version 4's
record on the shipped model and the rule's history say what they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from andrea.views.pages import ch8 as page

EVIDENCE = Path(__file__).resolve().parents[1] / "book" / "evidence" / "08_trained_evidence.md"


@pytest.fixture(scope="module")
def report():
    """Version 4 on the shipped model (the evidence page's record)."""
    from andrea.trained import model as trained
    from andrea.trained import probes

    found = trained.probe_results()  # shipped with the package
    return page.ProbeReport(probes, found, probes.decide_all(found))


@pytest.fixture(scope="module")
def located():
    """Version 5 on the two new models (both machines) and the shipped one: the chapter's verdicts."""
    from andrea.trained import locate, replicas

    v5 = replicas.stored()  # shipped with the package
    return page.LocateReport.from_found(locate, v5["models"], v5["shipped"], v5["second_cpu"])


def _labels(line: str) -> list[str]:
    """The verdict labels a sentence prints: glossary links and bold labels."""
    known = ("confirmed", "qualified", "not reproduced", "inconclusive", "not testable", "depends on the machine")
    said = re.findall(r"\{term\}`([^`<]+)`|\*\*([^*]+)\*\*", line)
    return [a or b for a, b in said if (a or b) in known]


def test_each_claim_is_said_once_with_its_label_and_its_evidence(located):
    said = located.sentences().text
    for name in located.rule.CLAIM_TASKS:
        v = located.verdicts[name]
        links = re.findall(rf"\{{ref\}}`evidence <{page.ANCHORS[name]}>`", said)
        assert len(links) == 1, f"{name}: {len(links)} links to its evidence"
        line = next(ln for ln in said.splitlines() if f"<{page.ANCHORS[name]}>" in ln)
        assert _labels(line) == [v.label], f"{name}: says {_labels(line)}, the rule says {v.label!r}"
        if v.label in page.GLOSSED:  # the label links its glossary entry
            assert f"{{term}}`{v.label}`" in line, line
    overall = page.overall(located).text
    assert f"{{ref}}`evidence <{page.ANCHORS['the claim']}>`" in overall
    assert _labels(overall) == [located.overall.label], overall


def test_the_overall_sentence_says_each_task_once_as_the_rule_groups_it(located):
    """Issue 47's reader met "qualified" for a task and then "went against it" for the same task: the whole
    claim's sentence names each decided task once, in words that do not contradict its own label."""
    overall = located.overall_sentence()
    for name in located.rule.CLAIM_TASKS:
        if located.verdicts[name].label != "not testable":
            assert overall.count(name) == 1, (name, overall)


def test_every_claim_links_to_a_section_of_the_evidence_page(located):
    labels = set(re.findall(r"^\(([a-z0-9-]+)\)=$", EVIDENCE.read_text(), flags=re.M))
    rows = located.claim_rows()
    assert {c.anchor for c in rows} <= labels, sorted({c.anchor for c in rows} - labels)
    assert [c.label for c in rows][-1] == located.overall.label
    assert [c.label for c in rows][:-1] == [located.verdicts[n].label for n in located.rule.CLAIM_TASKS]


def test_the_lesson_states_the_rule_that_decides(located):
    """The lesson says the rule's share and planted blocks in words: they must be version 5's."""
    text = " ".join((EVIDENCE.parents[1] / "08_trained.md").read_text().split())
    r = located.rule
    assert text.count(f"{r.SHARE:.0%}".replace("%", " %")) >= 2, "the lesson's share is not locate.SHARE"
    early, middle = (b for b, band in sorted(r.PLANTS.items()))
    assert f"planted by hand at block {early} must come out early, one at block {middle} in the middle" in text
    assert len(r.MODEL_SEEDS) == 2 and "two new models" in text


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


def test_the_rule_history_matches_the_commits_that_made_it(report, located):
    """The evidence page says when version 4 was written against version 3's result (issue 49): the commits,
    their times and version 3's label are the ones git recorded."""
    import os
    import shutil
    import subprocess

    from andrea.views.pages.ch8_probes import HISTORY, minutes_between

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists() or shutil.which("git") is None:
        assert not os.environ.get("CI"), "CI runs on a clone: its history must be there"
        pytest.skip("no git history here")
    for version, h in HISTORY.items():
        out = subprocess.run(
            ["git", "show", "-s", "--format=%ad%n%s", "--date=format:%Y-%m-%d %H:%M:%S", h["commit"]],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert out[0] == h["at"], (version, out)
        assert f"version {version}" in out[1], (version, out[1])
        if "claim" in h:
            assert f"(claim: {h['claim']})" in out[1], out[1]
    said = page.history(located, report).text
    assert f"{minutes_between(3, 4):.0f} minutes after" in said and 0 < minutes_between(3, 4) < 10
    assert f"**{report.overall.label}**" in said and f"**{HISTORY[3]['claim']}**" in said and "90 %" in said
    assert f"**{located.overall.label}**" in said
    assert "version" not in page.overall(located).text  # the lesson leaves the rule's history to the evidence page
