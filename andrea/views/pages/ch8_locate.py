"""Chapter 8's probe rule version 5 in words: where a block *adds* each label, on the two models that decide.

The rule (``andrea.trained.locate``) and the readings arrive as arguments: this module does not import
``andrea.trained`` (the views sit below it in the package's layers). ``LocateReport`` holds, per task, each
deciding model's reading (``locate.Reading``: the located block boundary, the rise, the controls), the shipped
model's reading beside them (its data were seen by versions 2-4, so it decides nothing), the task's verdict and
the claim's. The lesson gives one plain sentence per task (``sentences``); the evidence page the table, the
curves and the rule's history (``history``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..lesson import Markdown, paragraphs
from ..notebook import Table, table
from .ch8_probes import ANCHORS, BLOCKS, label_md

# The source's words for what each task reads, as a sentence's subject.
SUBJECTS = {
    "position": "Position",
    "syntax (lexical)": "A token's type",
    "syntax (contextual)": "What a name is doing",
    "phrase structure": "Phrase structure",
    "meaning": "Which manual a page comes from",
}


def _at(r: Any) -> str:
    """Where a reading locates its rise: "block 5 (middle)", or why it does not."""
    if r.boundary is None:
        return "no rise"
    return f"block {r.boundary} ({_band(r.boundary)})"


def _band(boundary: int) -> str:
    for band, blocks in {"early": range(1, 4), "middle": range(4, 9), "late": range(9, 13)}.items():
        if boundary in blocks:
            return band
    raise ValueError(f"a block boundary is 1..12, got {boundary}")


@dataclass(frozen=True)
class LocateReport:
    rule: Any  # andrea.trained.locate
    per_model: list  # the deciding models' readings, each {task name: locate.Reading}, in rule.MODEL_SEEDS order
    verdicts: dict  # {task name: Verdict}, from rule.decide
    overall: Any  # the claim's Verdict
    shipped: Optional[dict] = None  # the shipped model's readings (decides nothing)

    def __post_init__(self):
        if len(self.per_model) != len(self.rule.MODEL_SEEDS):
            raise ValueError(
                f"version {self.rule.RULE_VERSION} decides on {len(self.rule.MODEL_SEEDS)} models, "
                f"got readings of {len(self.per_model)}"
            )
        names = {t.name for t in self.rule.tasks()}
        missing = {f"model {i + 1}": sorted(names - set(m)) for i, m in enumerate(self.per_model) if names - set(m)}
        if names - set(self.verdicts):
            missing["verdicts"] = sorted(names - set(self.verdicts))
        if missing:
            raise ValueError(f"readings missing for some tasks: {missing}")

    # --- the evidence page ---------------------------------------------------------------------------
    def table(self) -> Table:
        """Per task: the band the source (or the calibration) names, where each model's probe reached
        ``SHARE`` of its rise and its label there, the shipped model's reading, and the verdict."""
        rows = []
        for t in self.rule.tasks():
            row = {"task": t.name, "predicted": f"{t.band} ({BLOCKS[t.band]})"}
            for seed, m in zip(self.rule.MODEL_SEEDS, self.per_model):
                r = m[t.name]
                row[f"model seed {seed}"] = f"{_at(r)}: {r.label}"
            if self.shipped is not None:
                r = self.shipped[t.name]
                row["shipped model (decides nothing)"] = f"{_at(r)}: {r.label}"
            row["verdict"] = self.verdicts[t.name].label
            rows.append(row)
        return table(rows, list(rows[0]))

    def calibrations(self) -> dict[str, str]:
        """Each band's calibration and its label over the deciding models."""
        return {band: self.verdicts[name].label for band, name in self.rule.CALIBRATIONS.items()}

    def controls_failed(self) -> list[str]:
        """Every deciding reading whose controls failed: "task, model seed s: reason"."""
        return [
            f"{name}, model seed {seed}: {m[name].reason}"
            for seed, m in zip(self.rule.MODEL_SEEDS, self.per_model)
            for name in m
            if m[name].label == "inconclusive"
        ]

    # --- the lesson --------------------------------------------------------------------------------------
    def sentence(self, name: str) -> str:
        """One plain sentence: where the deciding models add task ``name``'s label, and its verdict."""
        task = next(t for t in self.rule.tasks() if t.name == name)
        v = self.verdicts[name]
        rs = [m[name] for m in self.per_model]
        where = " and ".join(_at(r) for r in rs)
        subject = SUBJECTS.get(name, name[:1].upper() + name[1:])
        ref = f"({{ref}}`evidence <{ANCHORS.get(name, ANCHORS['the claim'])}>`)"
        if v.label == "confirmed":
            said = (
                f"is added in {BLOCKS[task.band]}, as the source says: the probes reach most of their rise at {where}"
            )
        elif v.label == "not reproduced":
            bands = sorted({_band(r.boundary) for r in rs if r.boundary is not None})
            said = (
                f"is added in the {' and '.join(bands)} blocks, not in {BLOCKS[task.band]} as the source says: "
                f"the probes reach most of their rise at {where}"
            )
        elif v.label == "not testable":
            said = f"could not be placed: the {task.band} calibration was not found in {BLOCKS[task.band]}"
        elif len({r.label for r in rs}) > 1:
            said = f"is placed differently by the two models ({where}), so it stays undecided"
        else:
            said = "stays undecided: a check that the probes read something training added failed"
        return f"{subject} {said}: {label_md(v.label)} {ref}."

    def sentences(self) -> Markdown:
        return Markdown("\n".join(f"- {self.sentence(n)}" for n in self.rule.CLAIM_TASKS))

    # --- the rule's history ----------------------------------------------------------------------------
    def history(self, v3: str, v4: str, minutes_after: float) -> Markdown:
        """Why version 5 decides: version 3's and version 4's labels on the shipped model, the minutes between
        version 3's outcome and version 4's rule, and what version 5 changed."""
        n = len(self.rule.MODEL_SEEDS)
        return paragraphs(
            f"Version 3 of the probe rule gave the source's claim **{v3}** on the shipped model. Version 4 was "
            f"written {minutes_after:.0f} minutes after that outcome, on the same model and the same evaluation "
            f"set, and gave **{v4}**: a rule written after seeing the data it decides on decides nothing on them.",
            f"Version 5 was committed before either of the {n} models it decides on was trained (training seeds "
            f"{', '.join(map(str, self.rule.MODEL_SEEDS))}). It locates where a block adds a label (the first "
            f"block boundary at which a probe reaches {self.rule.SHARE:.0%} of its rise from the embeddings), "
            "not where the label is still readable; its calibrations are a bit planted at block 2 and at block 6 "
            "and the next token, one per band; and a task's label stands only where every new model gives it. "
            f"Its verdict on the claim: **{self.overall.label}**. The shipped model's readings are shown beside "
            "them and decide nothing.",
        )


def curve_panels(rule: Any, curves: list[dict], shipped: Optional[dict] = None):
    """A figure: for each of version 5's tasks, the trained probe's accuracy over the block boundaries (0: the
    embeddings) on each deciding model (and the shipped model, grey), with the located boundary marked and
    the predicted band shaded. ``curves``: per deciding model, {task name: accuracy per boundary}."""
    import matplotlib.pyplot as plt

    from .. import plots

    tasks = rule.tasks()
    cols = 4
    rows = -(-len(tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.2 * rows), sharex=True, squeeze=False)
    for ax in axes.flat[len(tasks) :]:
        ax.set_visible(False)
    bands = {"early": (1, 3), "middle": (4, 8), "late": (9, 12)}
    for ax, t in zip(axes.flat, tasks):
        lo, hi = bands[t.band]
        ax.axvspan(lo - 0.5, hi + 0.5, color="#eeeeee", zorder=0)
        series = [(f"seed {s}", c[t.name], plots.PALETTE[i]) for i, (s, c) in enumerate(zip(rule.MODEL_SEEDS, curves))]
        if shipped is not None:
            series.append(("shipped", shipped[t.name], plots.REFERENCE_GREY))
        for label, c, colour in series:
            c = np.asarray(c, dtype=float)
            ax.plot(range(len(c)), c, color=colour, lw=1.4, label=label)
            b, _ = rule.located(c)
            if b is not None:
                ax.plot([b], [c[b]], marker="o", color=colour, ms=5)
        ax.set_title(t.name, fontsize=9)
        ax.tick_params(labelsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("block boundary", fontsize=8)
    axes[0][0].set_ylabel("balanced accuracy", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
