"""Reading minutes of each built page, as issue 47's student reader counted them.

The method: the narrative words a reader meets with every fold closed, at 150 words a minute, plus
1 minute per figure, plus the time each interactive element takes (an explorer 2 minutes, a training
panel 1.5, the attention viewer 3).

- Narrative words: the article's prose, headings, captions, list items and table cells, including
  the sentences and tables the chapters compute at build time (they are cell outputs). Left out:
  code (a reader skims it), plain-text code output, closed folds (`<details>`), hidden cells,
  exercise solutions, the margin provenance lines.
- A figure: an `<img>` in the article (a measured plot), or a drawn diagram (`andrea-diagram`).
- A formula: inline maths counts as one word; displayed maths is looked at like code, not counted.
- Interactive elements are found by their classes (`andrea-explorer`, `andrea-train`,
  `andrea-attention`).

    python tools/reading_time.py            # one line per page; the lessons over 20 minutes flagged

`tests/test_lessons.py` holds every chapter lesson to LESSON_LIMIT minutes with this count.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
WPM = 150
FIGURE_MINUTES = 1.0
INTERACTIVE_MINUTES = {"andrea-explorer": 2.0, "andrea-train": 1.5, "andrea-attention": 3.0}
LESSON_LIMIT = 20.0
SKIP_TAGS = {"pre", "script", "style", "nav", "footer", "header", "button", "details", "svg", "math"}
SKIP_CLASS = (
    "cell_input",
    "toggle-hidden",
    "admonition-solution",
    "solution",
    "dropdown",
    "andrea-provenance",
    "headerlink",
    "output text_plain",
    "output stream",
)
VOID = {"img", "br", "hr", "meta", "link", "input", "source", "wbr", "col", "area", "base", "embed", "param"}
WORD = re.compile(r"\S*[A-Za-z0-9]\S*")


@dataclass
class Reading:
    words: int
    figures: int
    interactive: dict[str, int]

    @property
    def minutes(self) -> float:
        extra = sum(INTERACTIVE_MINUTES[k] * n for k, n in self.interactive.items())
        return self.words / WPM + self.figures * FIGURE_MINUTES + extra


class Narrative(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []
        self.skip = self.article = 0
        self.words = self.figures = 0
        self.interactive = dict.fromkeys(INTERACTIVE_MINUTES, 0)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class") or ""
        is_article = tag == "article" or a.get("role") == "main"
        if self.article and not self.skip:
            for name in INTERACTIVE_MINUTES:
                if name in cls.split():
                    self.interactive[name] += 1
            if tag == "img" or "andrea-diagram" in cls.split():
                self.figures += 1
            if tag == "span" and "math" in cls.split():  # inline maths: one word, its source not read
                self.words += 1
        if tag in VOID:
            return
        skip = tag in SKIP_TAGS or any(c in cls for c in SKIP_CLASS) or "math" in cls.split()
        self.stack.append((tag, skip, is_article))
        self.skip += skip
        self.article += is_article

    def handle_endtag(self, tag):
        if tag in VOID or all(t != tag for t, _, _ in self.stack):
            return
        while self.stack:
            t, skip, is_article = self.stack.pop()
            self.skip -= skip
            self.article -= is_article
            if t == tag:
                break

    def handle_data(self, data):
        if self.article and not self.skip:
            self.words += len(WORD.findall(data))


def reading(path: Path) -> Reading:
    p = Narrative()
    p.feed(path.read_text(errors="replace"))
    return Reading(p.words, p.figures, {k: n for k, n in p.interactive.items() if n})


def lesson_pages(site: Path = SITE) -> list[Path]:
    """The chapter lessons (book/0N_*.html), the pages held to LESSON_LIMIT."""
    return sorted(site.glob("book/0[0-9]_*.html"))


def main() -> int:
    pages = sorted(SITE.glob("book/*.html")) + sorted(SITE.glob("book/evidence/*.html"))
    pages += sorted(SITE.glob("notebooks/*.html"))
    if not pages:
        print("no built site in _build/html: run `make book` first", file=sys.stderr)
        return 1
    lessons = set(lesson_pages())
    for page in pages:
        r = reading(page)
        inter = ", ".join(f"{k.removeprefix('andrea-')} {n}" for k, n in r.interactive.items())
        flag = "  OVER 20" if page in lessons and r.minutes > LESSON_LIMIT else ""
        print(
            f"{page.relative_to(SITE)!s:45s} {r.minutes:5.1f} min  {r.words:5d} words  "
            f"{r.figures} figures  {inter}{flag}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
