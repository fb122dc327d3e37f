"""Small helpers the chapters use: gluing computed numbers into the prose, and claim tables.

Everything works outside the book too (Colab, Binder, JupyterLab): without myst-nb, ``glue`` just
keeps the value.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

GLUED: dict = {}


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


def glue(name: str, value: Any, fmt: str | None = None) -> None:
    """Make ``value`` available to the prose as {glue:text}`name` (formatted with ``fmt`` if given)."""
    value = _plain(value)
    shown = format(value, fmt) if fmt else value
    GLUED[name] = shown
    try:
        from myst_nb import glue as _glue
    except ImportError:  # not building the book: nothing to paste into
        return
    _glue(name, shown, display=False)


def show_progress() -> bool:
    """Progress bars for readers running a notebook, not in the book's build (which sets
    ANDREA_BOOK_BUILD=1) where they would end up as text in the page."""
    import os

    return os.environ.get("ANDREA_BOOK_BUILD") != "1"


def setup(seed: int = 0, threads: int | None = None) -> str:
    """Seed everything, keep torch to the machine's cores, pick the device; returns the device."""
    import os
    import random

    from .device import pick_device

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads or max(1, min(4, os.cpu_count() or 1)))
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is not None:
            ip.run_line_magic("config", "InlineBackend.figure_formats = ['png']")
            ip.run_line_magic("config", "InlineBackend.rc = {'figure.dpi': 100}")
    except Exception:  # pragma: no cover - only cosmetics
        pass
    return pick_device()


@dataclass
class Claim:
    """One statement from the source documents, the measurement that tests it, and the verdict."""

    claim: str  # what the document says (paraphrased in English)
    measured: str  # what the code measured
    verdict: str  # "confirmed", "corrected", "qualified", "not testable here"
    evidence: str = ""  # where the measurement comes from / why


class ClaimsTable:
    """Renders a list of claims as an HTML table (used in every "Checking the claims" section)."""

    COLOURS = {"confirmed": "#009E73", "corrected": "#D55E00", "qualified": "#E69F00", "not reproduced": "#D55E00",
               "not testable here": "#666666"}

    def __init__(self, claims: list[Claim]):
        self.claims = claims

    def _repr_html_(self) -> str:
        rows = []
        for c in self.claims:
            col = self.COLOURS.get(c.verdict, "#333")
            rows.append(
                f"<tr><td>{html.escape(c.claim)}</td><td>{html.escape(c.measured)}</td>"
                f"<td><b style='color:{col}'>{html.escape(c.verdict)}</b></td><td>{html.escape(c.evidence)}</td></tr>"
            )
        return ("<table class='claims-table table'><thead><tr><th>The document says</th><th>Measured here</th>"
                "<th>Verdict</th><th>Evidence</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")

    def __repr__(self) -> str:
        return "\n".join(f"[{c.verdict}] {c.claim} -> {c.measured}" for c in self.claims)
