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

PACKAGE = Path(__file__).resolve().parent.parent  # andrea/

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
    """Seed everything, keep torch to the machine's cores; returns the device the page's models run on.

    That device is ``andrea.device.book_device()`` (the CPU, where the book's many small models run fastest,
    also on a machine with a GPU), not ``pick_device()``, which stays the choice for a reader's own model
    (the introduction glues both).

    ``threads`` (or ``$ANDREA_THREADS``; default: the machine's cores, at most 4) sets torch's thread
    count: ``tools/portable.py`` uses it to run the book as a machine with fewer cores would."""
    import os
    import random

    import matplotlib.pyplot as plt

    from ..device import book_device
    from .plots import STYLE

    device = book_device()

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
    except ImportError:  # plain Python: no inline figures to format
        return device
    ip = get_ipython()
    if ip is not None and type(ip).__name__ == "ZMQInteractiveShell":  # a Jupyter kernel: inline figures
        # Not cosmetic: the site's tests read the legibility audit this formatter writes into each PNG,
        # so a failure here is raised, not hidden.
        ip.run_line_magic("config", "InlineBackend.figure_formats = ['png']")
        ip.run_line_magic("config", "InlineBackend.rc = {'figure.dpi': 100}")
        from .figure_png import show_legibly

        plt.close(plt.figure())  # the inline backend registers its formatter on the first figure
        show_legibly(ip)  # ... which this replaces: legible fonts, and an audit the site's tests read
    return device


# A claims table's own label, not a verdict: a pattern that exploration runs show and that no rule,
# declared before fresh seeds, has tested (the primer's "Exploration, then fresh seeds").
EXPLORED = "explored only"


@dataclass
class Claim:
    """One statement from the source documents, the measurement that tests it, and the verdict.

    ``verdict`` is a ``andrea.evidence.verdict.Verdict`` (decided from the numbers by the book's one rule,
    its reason shown as evidence) or, for facts of the code or the literature, a label string.
    """

    claim: str  # what the document says (paraphrased in English)
    measured: str  # what the code measured
    verdict: Any  # a Verdict, one of andrea.evidence.verdict.LABELS, or EXPLORED
    evidence: str = ""  # where the measurement comes from / why
    anchor: str = ""  # the section of the chapter's evidence page that holds this claim's evidence

    @property
    def label(self) -> str:
        from ..evidence.verdict import LABELS

        label = getattr(self.verdict, "label", self.verdict)
        if label not in (*LABELS, EXPLORED):
            raise ValueError(f"verdict must be one of {(*LABELS, EXPLORED)}, got {label!r}")
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
        "depends on the machine": "#CC79A7",
        EXPLORED: "#666666",
    }

    def __init__(self, claims: list[Claim]):
        self.claims = claims
        for c in claims:
            c.label  # noqa: B018 - validates the verdict now, not when the page renders

    def _repr_html_(self) -> str:
        rows = []
        for c in self.claims:
            col = self.COLOURS[c.label]
            reason = getattr(c.verdict, "reason", "")
            why = html.escape(c.evidence)  # in words; the statistic behind the label is folded under it
            if reason:
                why += f"<details class='claims-numbers'><summary>the numbers</summary>{html.escape(reason)}</details>"
            rows.append(
                # data-label: on a phone each row is a card, verdict first, each cell titled (andrea.css)
                f"<tr><td data-label='The source says'>{html.escape(c.claim)}</td>"
                f"<td data-label='We measured'>{html.escape(c.measured)}</td>"
                f"<td data-label='Verdict' class='claims-verdict'>"
                f"<b style='color:{col}'>{html.escape(c.label)}</b></td>"
                f"<td data-label='Why'>{why}</td></tr>"
            )
        return (
            "<div class='andrea-evidence-scroll'><table class='claims-table table'><thead><tr>"
            "<th>The source says</th><th>We measured</th><th>Verdict</th><th>Why</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table></div>"
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


_TESTS = {
    "paired t": "paired t",
    "fisher": "Fisher's exact",
    "equivalence": "equivalence (TOST)",
    "level": "one-sample t",
    "every": "every run",
    "interaction": "paired t on the difference of differences",
    "majority": "binomial against one half",
    "detectable": "detectable effect (80 % power)",
}
_ROLES = {"decides": "deciding", "calibration": "calibration", "control": "control"}
_FIELDS = {
    "final_val_loss": "final loss (nats)",
    "diverged": "runs that diverged",
    "escaped": "runs that left the plateau",
    "steps_to_level": "steps to the level",
    "reached_level": "runs that reached the level",
    "gain_over_unigram": "nats below the unigram entropy",
    "lambda_mean": "mean |λ| at the end",
    "late_break": "runs that break after a stable stretch",
}


class EvidenceFold:
    """ "The evidence" of a chapter's training verdict, folded: the rule declared before the runs (or
    that it changed after them), each comparison (deciding regimes, calibration, controls) with its
    seeds, its number on each machine's runs, test and verdict, and the claim's verdict. One component
    for every chapter: ``evidence(name)``."""

    def __init__(self, ev: Any):
        self.ev = ev

    def _rows(self) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        for role in ("calibration", "decides", "control"):
            for f in self.ev.role(role):
                d = f.decision
                test = _TESTS[d.test] + f" on {_FIELDS.get(d.field, d.field)}"
                if d.level is not None:
                    test += f" (level {d.level:g})"
                if d.margin:
                    test += f", margin {d.margin:g}"
                seeds = f"{f.seeds[0]}–{f.seeds[-1]}" if len(f.seeds) > 1 else str(f.seeds[0])
                measured = f.measured
                if d.against is not None:  # say which arm is subtracted from which
                    keys = [k for k in d.arm if d.against.get(k, d.arm[k]) != d.arm[k]]
                    keys += [k for k in d.against if k not in d.arm]
                    a = ", ".join(str(d.arm.get(k, "–")) for k in keys)
                    b = ", ".join(str(d.against.get(k, "–")) for k in keys)
                    pair = f"{a} {'vs' if d.test == 'fisher' else '−'} {b}"
                    if len(pair) <= 24:  # longer comparisons are named in the Comparison column
                        measured = f"{pair}: {measured}"
                mde = f"{f.detectable:.2g}" if f.detectable is not None else "–"
                other = "not run yet"
                if f.emulated is not None:
                    other = f.emulated.measured
                    if f.emulated.verdict.label != f.verdict.label:
                        other += f" ({f.emulated.verdict.label})"
                if f.native is not None and f.native.label != f.verdict.label:
                    measured += f" ({f.native.label})"
                row = (_ROLES[role], d.what, f"{len(f.seeds)} ({seeds})", measured, other, mde, test)
                out.append(row + (f.verdict.label,))  # "other": the emulated CPU's reading
        return out

    def rule(self) -> str:
        ev = self.ev
        k = len(ev.role("decides"))
        how = "in every deciding regime" if ev.rule == "every" else "in at least one deciding regime, refuted in none"
        return (
            f"The claim counts as confirmed if it is confirmed {how}. Each comparison is a one-sided test at "
            f"2.5 % (a 95 % interval beyond the margin), with Holm's correction across the {k} deciding "
            "regime"
            + ("s" if k != 1 else "")
            + "; a regime is decided only if its calibration passed. "
            + (
                "Every comparison is decided twice: on the runs as the machine that made them trained them, "
                "and on the same runs trained on an emulated second CPU (torch's portable kernels); a label "
                "is printed where both give it, and 'depends on the machine' where they do not."
                if not ev.missing_emulated
                else "The runs on an emulated second CPU (torch's portable kernels) are not all made yet, so "
                "these labels are decided on one machine's runs only."
            )
        )

    def declared(self) -> str:
        ev = self.ev
        if ev.rule_status == "declared before its runs":
            head = f"Declared {ev.declared}"
        else:
            head = f"Declared {ev.declared}, and changed after them"
        if ev.missing_emulated:
            head += f"; decided on one machine only ({ev.missing_emulated} runs on the emulated CPU are not made yet)"
        return head

    def _repr_html_(self) -> str:
        ev, e = self.ev, html.escape
        col = ClaimsTable.COLOURS[ev.verdict.label]

        def cells(r) -> str:  # the emulated CPU's reading under this machine's, in one column
            both = f"{e(r[3])}<br><span class='andrea-emulated'>emulated CPU: {e(r[4])}</span>"
            return "".join(f"<td>{c}</td>" for c in (e(r[0]), e(r[1]), e(r[2]), both, e(r[5]), e(r[6])))

        body = "".join(
            f"<tr>{cells(r)}<td><b style='color:{ClaimsTable.COLOURS[r[-1]]}'>{e(r[-1])}</b></td></tr>"
            for r in self._rows()
        )
        return (
            f"<details class='andrea-evidence'><summary>The evidence: <b style='color:{col}'>"
            f"{e(ev.verdict.label)}</b> ({e(ev.verdict.reason)})</summary>"
            f"<p><b>{e(self.declared())}</b> (grid <code>{e(ev.name)}</code> in "
            f"<code>{e(_grid_file(ev.name))}</code>): {e(ev.prediction)}</p><p>{e(self.rule())}</p>"
            + (f"<p class='andrea-evidence-note'>{e(ev.rule_note)}.</p>" if ev.rule_note else "")
            + "<div class='andrea-evidence-scroll'><table class='evidence-table table'><thead><tr><th>Role</th>"
            "<th>Comparison</th><th>Seeds</th><th>Measured</th><th>Detectable</th><th>Test</th>"
            f"<th>Verdict</th></tr></thead><tbody>{body}</tbody></table></div>"
            "<p class='andrea-evidence-note'>Measured: mean and 95 % interval over seeds (differences paired by "
            "seed), in the units of the test, on the runs as this machine trained them, and under it on the "
            "emulated CPU's: the same runs as torch's portable kernels train them (a real second machine can "
            "differ more: on an AMD EPYC one stored run ended 0.043 nats from its stored value, where the "
            "emulation moved it 0.007). Detectable: the smallest true effect the "
            "comparison would show four times in five at this noise (for a deciding regime, at the level "
            f"Holm's correction asks of the first). All runs of the grid: {ev.seconds / 3600:.1f} core-hours.</p>"
            "</details>"
        )

    def __repr__(self) -> str:
        lines = [f"The evidence ({self.ev.name}): {self.ev.verdict}", self.declared(), self.rule()]
        lines += [" | ".join(r) for r in self._rows()]
        return "\n".join(lines)


def evidence(name: str) -> EvidenceFold:
    """The folded evidence of stored grid ``name`` (``andrea.evidence.evaluation.evidence``), to display."""
    from ..evidence import evaluation

    return EvidenceFold(evaluation.evidence(name))


def machines_said(f: Any, unit: str = "nats") -> str:
    """One clause for a comparison whose label depends on the machine (``evaluation.Finding``): each
    machine's label and mean difference, e.g. "confirmed on the runs as this machine trained them
    (+0.17 nats), inconclusive on the emulated second CPU's (+0.09 nats)"."""
    e = f.emulated
    if e is None or f.native is None:
        raise ValueError(f"{f.decision.what!r} has no second machine's reading")

    def mean(v) -> str:
        return f" ({v.interval.mean:+.2f} {unit})" if v.interval is not None else ""

    return (
        f"{f.native.label} on the runs as this machine trained them{mean(f.native)}, "
        f"{e.verdict.label} on the emulated second CPU's{mean(e.verdict)}"
    )


def _grid_file(name: str) -> str:
    """The file that declares grid ``name`` (e.g. ``andrea/evidence/grids/ch1.py``)."""
    from ..evidence.grids import GRIDS

    module = GRIDS[name].__module__ if name in GRIDS else "andrea.evidence.grids"
    return module.replace(".", "/") + ".py"


class Table:
    """A small table of numbers or words for a chapter (``table(rows, columns)``): HTML in the
    book, text elsewhere; it scrolls inside its box on a narrow screen instead of overflowing."""

    def __init__(self, rows: list, columns: list[str], caption: str = ""):
        out = []
        for r in rows:
            if isinstance(r, dict):  # a row by column name: its cells in the columns' order
                missing = [c for c in columns if c not in r]
                if missing:
                    raise ValueError(f"a row lacks the columns {missing}: {r}")
                r = [r[c] for c in columns]
            if len(r) != len(columns):
                raise ValueError(f"a row has {len(r)} cells, the table has {len(columns)} columns: {r}")
            out.append(list(r))
        self.rows, self.columns, self.caption = out, columns, caption

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(f"<th>{e(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in self.rows)
        cap = f"<caption>{e(self.caption)}</caption>" if self.caption else ""
        return (
            f"<div class='andrea-evidence-scroll'><table class='andrea-table table'>{cap}<thead><tr>{head}"
            f"</tr></thead><tbody>{body}</tbody></table></div>"
        )

    def __repr__(self) -> str:
        lines = [" | ".join(map(str, self.columns))] + [" | ".join(map(str, r)) for r in self.rows]
        return "\n".join(([self.caption] if self.caption else []) + lines)


def table(rows: list, columns: list[str], caption: str = "") -> Table:
    """Display ``rows`` (lists of cells, or dicts by column name) under ``columns`` as a table."""
    return Table(rows, columns, caption)
