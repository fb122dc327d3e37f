"""Progress bars for long runs: shown to a reader running a notebook or a command, never in the
book's build (which sets ``ANDREA_BOOK_BUILD=1``), where they would end up as text in the page."""

from __future__ import annotations

import os
import sys


def show_progress() -> bool:
    return os.environ.get("ANDREA_BOOK_BUILD") != "1"


def bar(total: int, desc: str, unit: str = "it", **kw):
    """A tqdm bar on stderr, disabled in the book's build."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total, desc=desc, unit=unit, disable=not show_progress(), file=sys.stderr, dynamic_ncols=True, **kw
    )
