"""A chapter as a lesson and its evidence page: the views that keep the two apart.

A lesson (``book/0N_*.md``) opens with "What we found" (``found``): two or three plain sentences, computed
from the results. It ends with its claims table (``lesson_claims``): one row per claim, the claim, what was
measured in a phrase, and the label, which links to the claim's section on the chapter's evidence page. The
lesson's own code cells are what a reader would type to explore; every sentence, table and fold is built by
the chapter's module in ``andrea.views.pages``.

The evidence page (``book/evidence/0N_*_evidence.md``, in the "Evidence" part of the table of contents) holds the
apparatus: each claim's full row with its reason (``evidence_claims``), each grid's declared rule, its
calibrations and controls, both machines' readings and Holm's correction (``grid_evidence``), and the detailed
tables and procedure paragraphs a referee needs.
"""

from __future__ import annotations

import html
from pathlib import Path

from .notebook import Claim, ClaimsTable, EvidenceFold

EVIDENCE_DIR = "evidence"  # the evidence pages' folder, beside the lessons in book/


def evidence_href(chapter: str, anchor: str) -> str:
    """The link from lesson ``chapter`` (its file stem, "01_residual") to a section of its evidence page."""
    if not anchor:
        raise ValueError(f"a claim of {chapter} has no evidence anchor: every claims-table row links to its evidence")
    return f"{EVIDENCE_DIR}/{Path(chapter).stem}_evidence.html#{anchor}"


class Markdown:
    """Prose computed from the results, rendered as MyST Markdown (glossary and section links allowed)."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def found(*sentences: str) -> Markdown:
    """ "What we found": the lesson's opening, one plain sentence per verdict that matters (one to four),
    rendered as Markdown (a sentence may link a glossary term with {term}`...` or a section with {ref}`...`)."""
    if not 1 <= len(sentences) <= 4:
        raise ValueError(f"'What we found' takes one to four sentences, got {len(sentences)}")
    return Markdown(" ".join(s.strip() for s in sentences))


class LessonClaims:
    """The lesson's claims table: the claim, what was measured, and the label linked to its evidence.

    The reason behind each label (the interval, the test) is on the evidence page (``evidence_claims``)."""

    def __init__(self, chapter: str, claims: list[Claim]):
        self.chapter = chapter
        self.claims = claims
        for c in claims:
            c.label  # noqa: B018 - validates the verdict now, not when the page renders
            evidence_href(chapter, c.anchor)

    def _repr_html_(self) -> str:
        e = html.escape
        rows = []
        for c in self.claims:
            col = ClaimsTable.COLOURS[c.label]
            href = e(evidence_href(self.chapter, c.anchor))
            rows.append(
                f"<tr><td data-label='The source says'>{e(c.claim)}</td>"
                f"<td data-label='We measured'>{e(c.measured)}</td>"
                f"<td data-label='Verdict' class='claims-verdict'><a class='claims-evidence' href='{href}'>"
                f"<b style='color:{col}'>{e(c.label)}</b><span class='claims-evidence-link'>evidence</span>"
                "</a></td></tr>"
            )
        return (
            "<div class='andrea-evidence-scroll'><table class='claims-table claims-lesson table'><thead><tr>"
            "<th>The source says</th><th>We measured</th><th>Verdict</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table></div>"
        )

    def __repr__(self) -> str:
        return "\n".join(f"[{c.label}] {c.claim} -> {c.measured} ({c.anchor})" for c in self.claims)


def lesson_claims(chapter: str, claims: list[Claim]) -> LessonClaims:
    return LessonClaims(chapter, claims)


def evidence_claims(claims: list[Claim]) -> ClaimsTable:
    """The evidence page's copy of the claims table: every column, the reasons and numbers included."""
    return ClaimsTable(claims)


class GridEvidence(EvidenceFold):
    """A grid's evidence, shown open on the evidence page (the same content as the lesson's old fold)."""

    def _repr_html_(self) -> str:
        folded = "<details class='andrea-evidence'>"
        return super()._repr_html_().replace(folded, "<details class='andrea-evidence' open>", 1)


def grid_evidence(name: str) -> GridEvidence:
    """The declared rule, calibrations, controls, both machines' readings and Holm for stored grid ``name``."""
    from ..evidence import evaluation

    return GridEvidence(evaluation.evidence(name))


def ref(anchor: str, words: str = "the evidence") -> str:
    """A MyST cross-reference to a labelled section (``(anchor)=``), shown as ``words``."""
    return f"{{ref}}`{words} <{anchor}>`"


def paragraphs(*texts: str) -> Markdown:
    """Evidence-page paragraphs computed from the results, one string each."""
    return Markdown("\n\n".join(t.strip() for t in texts))
