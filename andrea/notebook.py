"""Small helpers the chapters use: gluing computed numbers into the prose, and claim tables.

Everything works outside the book too (Colab, Binder, JupyterLab): without myst-nb, ``glue`` just
keeps the value.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

PACKAGE = Path(__file__).resolve().parent  # andrea/

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


def setup(seed: int = 0, threads: int | None = None) -> str:
    """Seed everything, keep torch to the machine's cores, pick the device; returns the device.

    ``threads`` (or ``$ANDREA_THREADS``; default: the machine's cores, at most 4) sets torch's thread
    count: ``tools/portable.py`` uses it to run the book as a machine with fewer cores would."""
    import os
    import random

    import matplotlib.pyplot as plt

    from .device import pick_device
    from .plots import STYLE

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    env = os.environ.get("ANDREA_THREADS", "")
    if env and (not env.isdigit() or int(env) < 1):
        raise ValueError(f"ANDREA_THREADS must be a positive integer, got {env!r}")
    torch.set_num_threads(threads or int(env or 0) or max(1, min(4, os.cpu_count() or 1)))
    plt.rcParams.update(STYLE)  # the book's look for the chapter's own figures (asked for, not imposed)
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
    """One statement from the source documents, the measurement that tests it, and the verdict.

    ``verdict`` is a ``andrea.verdict.Verdict`` (decided from the numbers by the book's one rule,
    its reason shown as evidence) or, for facts of the code or the literature, a label string.
    """

    claim: str  # what the document says (paraphrased in English)
    measured: str  # what the code measured
    verdict: Any  # a Verdict, or one of andrea.verdict.LABELS
    evidence: str = ""  # where the measurement comes from / why

    @property
    def label(self) -> str:
        from .verdict import LABELS

        label = getattr(self.verdict, "label", self.verdict)
        if label not in LABELS:
            raise ValueError(f"verdict must be one of {LABELS}, got {label!r}")
        return label

    @property
    def why(self) -> str:
        reason = getattr(self.verdict, "reason", "")
        return "; ".join(x for x in (reason, self.evidence) if x)


class ClaimsTable:
    """Renders a list of claims as an HTML table (used in every "Checking the claims" section)."""

    COLOURS = {
        "confirmed": "#009E73",
        "corrected": "#D55E00",
        "qualified": "#E69F00",
        "not reproduced": "#D55E00",
        "inconclusive": "#666666",
        "not testable": "#666666",
    }

    def __init__(self, claims: list[Claim]):
        self.claims = claims
        for c in claims:
            c.label  # noqa: B018 - validates the verdict now, not when the page renders

    def _repr_html_(self) -> str:
        rows = []
        for c in self.claims:
            col = self.COLOURS[c.label]
            rows.append(
                f"<tr><td>{html.escape(c.claim)}</td><td>{html.escape(c.measured)}</td>"
                f"<td><b style='color:{col}'>{html.escape(c.label)}</b></td><td>{html.escape(c.why)}</td></tr>"
            )
        return (
            "<table class='claims-table table'><thead><tr><th>The document says</th><th>Measured here</th>"
            "<th>Verdict</th><th>Why</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )

    def __repr__(self) -> str:
        return "\n".join(f"[{c.label}] {c.claim} -> {c.measured}" for c in self.claims)


def show_source(*objects) -> Any:
    """The source code of package functions or classes, shown highlighted in a notebook (and as
    plain text elsewhere): how the chapters let a reader open the code behind a figure."""
    import inspect

    from IPython.display import Markdown

    blocks = []
    for obj in objects:
        name = f"{obj.__module__}.{obj.__qualname__}"
        # unwrap decorators (torch.no_grad wraps a function in torch's own module)
        path = Path(str(inspect.getsourcefile(inspect.unwrap(obj)))).resolve()
        where = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path.name
        blocks.append(f"`{name}` ({where}):\n\n```python\n{inspect.getsource(obj).rstrip()}\n```")
    return Markdown("\n\n".join(blocks))


def settings(row: dict, *keys: str) -> dict:
    """Selected model and training settings of a stored run (e.g. ``settings(rows[0], "n_layer",
    "lr")``), so a chapter states the settings its runs actually used."""
    both = {**row["model"], **row["train"]}
    missing = [k for k in keys if k not in both]
    if missing:
        raise KeyError(f"no setting {missing} in the stored run")
    return {k: both[k] for k in keys}
