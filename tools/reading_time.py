"""Reading time of each built page's narrative: the words a reader meets with every fold closed.

Counts the words of the article's prose (paragraphs, lists, headings, captions) in _build/html,
leaving out code, code output, tables, the evidence folds and collapsed cells, at 180 words a
minute (a careful reading of technical prose).

    python tools/reading_time.py            # one line per page, and the pages over 20 minutes
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
WPM = 180
SKIP = {"pre", "code", "table", "details", "script", "style", "nav", "footer", "header", "button"}
SKIP_CLASS = ("cell_output", "cell_input", "toggle-hidden", "admonition-solution", "solution", "dropdown")


class Narrative(HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth_skip, self.in_article, self.words, self.stack = 0, 0, 0, []

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        skip = tag in SKIP or any(c in cls for c in SKIP_CLASS)
        self.stack.append((tag, skip))
        if tag == "article" or 'role="main"' in str(attrs) or dict(attrs).get("role") == "main":
            self.in_article += 1
        if skip:
            self.depth_skip += 1

    def handle_endtag(self, tag):
        while self.stack:
            t, skip = self.stack.pop()
            if skip:
                self.depth_skip -= 1
            if t == "article":
                self.in_article -= 1
            if t == tag:
                break

    def handle_data(self, data):
        if self.in_article and not self.depth_skip:
            self.words += len(re.findall(r"\w+", data))


def minutes(path: Path) -> float:
    p = Narrative()
    p.feed(path.read_text(errors="replace"))
    return p.words / WPM


def main() -> int:
    pages = sorted(SITE.glob("book/*.html")) + sorted(SITE.glob("notebooks/*.html"))
    if not pages:
        print("no built site in _build/html: run `make book` first", file=sys.stderr)
        return 1
    for page in pages:
        m = minutes(page)
        print(f"{page.relative_to(SITE)!s:40s} {m:5.1f} min{'  (over 20)' if m > 20 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
