"""Chapter 8's probe rule version 5 in words: where a block *adds* each label, on the two models that decide.

The rule (``andrea.trained.locate``) and the readings arrive as arguments: this module does not import
``andrea.trained`` (the views sit below it in the package's layers). ``LocateReport`` holds, per task, each
deciding model's reading (``locate.Reading``: the located block boundary, the rise, the controls), the shipped
model's reading beside them (its data were seen by versions 2-4, so it decides nothing), the task's verdict and
the claim's. The lesson gives one plain sentence per task (``sentences``) and one on the whole claim
(``overall_sentence``); the evidence page the table, each task's readings (``task_words``) and the rule's
history (``history``). The figure is ``andrea.trained.figures.located_figure``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..lesson import Markdown, paragraphs
from ..notebook import Claim, Table, table
from .ch8_probes import ANCHORS, BLOCKS, CLAIMS, UNITS, _and, _cap, _count, label_md, tasks_table

# The source's words for what each task reads, as a sentence's subject.
SUBJECTS = {
    "position": "Position",
    "syntax (lexical)": "A token's type",
    "syntax (contextual)": "What a name is doing",
    "phrase structure": "Phrase structure",
    "meaning": "Which manual a page comes from",
}


def _at(r: Any, band_of: Any) -> str:
    """Where a reading locates its rise: "block 5 (middle)", or why it does not (``band_of``: the rule's)."""
    if r.boundary is None:
        return "no rise"
    return f"block {r.boundary} ({band_of(r.boundary)})"


def _where(readings: list, band_of: Any) -> str:
    """Where the deciding models place a task, said once when they agree."""
    places = {r.boundary for r in readings}
    if places == {None}:
        return f"no rise above the embeddings on {'either' if len(readings) == 2 else 'any'} model"
    if len(places) == 1:
        n = len(readings)
        return f"{_at(readings[0], band_of)} on {'both' if n == 2 else 'every'} model{'s' if n > 1 else ''}"
    if len(readings) == 2:
        return f"{_at(readings[0], band_of)} in one and {_at(readings[1], band_of)} in the other"
    return " and ".join(_at(r, band_of) for r in readings)


# How the tasks' labels make the whole claim's label under version 5 (``probes.decide_claim``), per label.
RULE_WORDS_5 = {
    "confirmed": "every property is added in its band",
    "qualified": "some properties are added in their bands and others in other bands",
    "not reproduced": "no property is added in its band and at least one is added in another; undecided or "
    "untestable ones cannot change that",
    "not testable": "no property could be tested",
    "inconclusive": "no property is added in another band but not every one is added in its own",
}


def _share(rule: Any) -> str:
    return f"{100 * rule.SHARE:.0f} %"


@dataclass(frozen=True)
class LocateReport:
    rule: Any  # andrea.trained.locate
    per_model: list  # the deciding models' readings, each {task name: locate.Reading}, in rule.MODEL_SEEDS order
    verdicts: dict  # {task name: Verdict}, from rule.decide
    overall: Any  # the claim's Verdict
    shipped: Optional[dict] = None  # the shipped model's readings (decides nothing)
    second: Optional[list] = None  # the deciding models' readings on the emulated second CPU
    # per deciding model, {task: (the control task's rise from the embeddings, whether the control is read at
    # least as well as the task at every boundary)}, from the stored probes
    controls: Optional[list] = None

    @classmethod
    def from_found(
        cls, rule: Any, models: list, shipped: Optional[dict] = None, second_cpu: Optional[list] = None
    ) -> "LocateReport":
        """The report from stored probes (``andrea.trained.replicas.stored``): ``models``, per deciding model,
        {task: {"trained": ..., "untrained": ...}}; ``shipped`` the same for the shipped model; ``second_cpu``
        the deciding models' probes on the emulated second CPU."""

        def read(found: dict) -> dict:
            return {t.name: rule.reading(t, found[t.name]) for t in rule.tasks()}

        def controls(found: dict) -> dict:
            out = {}
            for t in rule.tasks():
                task = found[t.name]["trained"]["task"].mean(0)
                ctl = found[t.name]["trained"]["control"].mean(0)
                out[t.name] = (float(ctl[1:].max() - ctl[0]), bool((ctl >= task).all()))
            return out

        per_model = [read(f) for f in models]
        second = None if second_cpu is None else [read(f) for f in second_cpu]
        verdicts, overall = rule.decide(per_model, second)
        ship = None if shipped is None else read(shipped)
        return cls(rule, per_model, verdicts, overall, ship, second, [controls(f) for f in models])

    def _control_rises_as_much(self, name: str) -> bool:
        """Whether the task's control task rises at least as much as the task on every deciding model: then the
        place found may be where the control's unit becomes readable, not the property."""
        return self.controls is not None and all(
            c[name][0] >= m[name].rise > 0 for c, m in zip(self.controls, self.per_model)
        )

    def _control_beats_everywhere(self, name: str) -> bool:
        return self.controls is not None and all(c[name][1] for c in self.controls)

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
            for i, (seed, m) in enumerate(zip(self.rule.MODEL_SEEDS, self.per_model)):
                r = m[t.name]
                row[f"model seed {seed}"] = f"{_at(r, self.rule.band_of)}: {r.label}"
                if self.second is not None:
                    o = self.second[i][t.name]
                    same = (o.boundary, o.label) == (r.boundary, r.label)
                    row[f"model seed {seed}"] += "; second CPU: " + (
                        "the same" if same else f"{_at(o, self.rule.band_of)}: {o.label}"
                    )
            if self.shipped is not None:
                r = self.shipped[t.name]
                row["shipped model (decides nothing)"] = f"{_at(r, self.rule.band_of)}: {r.label}"
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
        where = _where(rs, self.rule.band_of)
        subject = SUBJECTS.get(name, name[:1].upper() + name[1:])
        ref = f"({{ref}}`evidence <{ANCHORS.get(name, ANCHORS['the claim'])}>`)"
        if v.label == "confirmed":
            said = (
                f"is added in {BLOCKS[task.band]}, as the source says: {_share(self.rule)} of the rise comes at {where}"
            )
        elif v.label == "not reproduced":
            bands = sorted({self.rule.band_of(r.boundary) for r in rs if r.boundary is not None})
            said = (
                f"is added in the {' and '.join(bands)} blocks, not in {BLOCKS[task.band]} as the source says: "
                f"{_share(self.rule)} of the rise comes at {where}"
            )
        elif v.label == "not testable":
            said = f"could not be placed: the {task.band} calibration was not found in {BLOCKS[task.band]}"
        elif v.label == "depends on the machine":
            said = "is placed differently on the two machines, so it stays undecided"
        elif len({r.label for r in rs}) > 1:
            said = f"is placed differently by the two models ({where}), so it stays undecided"
        elif all(r.rise <= 0 for r in rs):
            said = "is read best at the embeddings themselves: no block adds it, so it cannot be placed"
        elif all(r.rise < self.rule.MARGIN for r in rs):
            said = "gains almost nothing above the embeddings: no block adds it, so it cannot be placed"
        elif all("beats its control" in r.reason for r in rs):
            unit = UNITS[task.control]
            at = "at every boundary" if self._control_beats_everywhere(name) else f"at {where}, where it is placed"
            said = (
                f"stays undecided: {at}, a random label per {unit} is read better, so the probes may be reading {unit}s"
            )
        elif all("training adds" in r.reason for r in rs):
            said = "stays undecided: the untrained model shows the same rise, so training did not add it"
        else:
            said = "stays undecided: a check that the probes read something training added failed"
        if v.label in ("confirmed", "not reproduced") and self._control_rises_as_much(name):
            unit = UNITS[task.control]
            said += (
                f"; but its control task (a random label per {unit}) rises as much, so this may place where the "
                f"{unit} becomes readable"
            )
        return f"{subject} {said}: {label_md(v.label)} {ref}."

    def sentences(self) -> Markdown:
        return Markdown("\n".join(f"- {self.sentence(n)}" for n in self.rule.CLAIM_TASKS))

    def _grouped(self) -> tuple[list, list, list, list]:
        """The claim's tasks as ``probes.decide_claim`` groups them: held, against, undecided, untestable."""
        held: list[str] = []
        against: list[str] = []
        undecided: list[str] = []
        untestable: list[str] = []
        for name in self.rule.CLAIM_TASKS:
            label = self.verdicts[name].label
            {"confirmed": held, "not reproduced": against, "not testable": untestable}.get(label, undecided).append(
                name
            )
        return held, against, undecided, untestable

    def overall_sentence(self, rule_words: bool = True) -> str:
        """The source's whole claim on the new models, in one sentence, as the rule groups the tasks (with
        ``rule_words``, a second sentence saying when the rule gives that label)."""
        held, against, undecided, untestable = self._grouped()
        n = len(self.rule.CLAIM_TASKS)
        parts = [f"{_and(held)} {'is' if len(held) == 1 else 'are'} added where the source says" if held else ""]
        if against:
            parts.append(f"{_and(against)} {'is' if len(against) == 1 else 'are'} added in other blocks")
        if undecided:
            parts.append(f"{_and(undecided)} {'stays' if len(undecided) == 1 else 'stay'} undecided")
        if untestable:
            parts.append(f"{_count(len(untestable))} could not be placed")
        if not held:
            parts[0] = f"none of the {_count(n)} properties is added where the source says"
        rule = RULE_WORDS_5.get(self.overall.label, "")
        return (
            f"Taken together, on the {_count(len(self.per_model))} new models the source's division of labour is "
            f"{label_md(self.overall.label)} ({{ref}}`evidence <{ANCHORS['the claim']}>`): {_and(parts)}."
            + (f" The rule gives that label when {rule}." if rule_words and self.overall.label != "confirmed" else "")
        )

    def found_sentence(self) -> str:
        """The verdict for "What we found", with where the new models add the first task that goes against."""
        said = (
            "The source's claim that blocks specialise in order (syntax first, meaning last) is "
            f"{label_md(self.overall.label)} on {_count(len(self.per_model))} newly trained models"
        )
        held, against, _, _ = self._grouped()
        if against:
            name = against[0]
            task = next(t for t in self.rule.tasks() if t.name == name)
            at = _where([m[name] for m in self.per_model], self.rule.band_of)
            said += f": {name}, predicted for {BLOCKS[task.band]}, is added at {at}"
        elif self.overall.label == "confirmed":
            said += ": each property is added in the blocks the source names"
        return said + "."

    def claim_rows(self) -> list:
        """The chapter's claims under version 5: one per task, then the source's whole claim."""
        seeds = " / ".join(map(str, self.rule.MODEL_SEEDS))
        how = (
            f"linear probes on {_count(len(self.per_model))} newly trained models (seeds {seeds}); the untrained "
            "model and a control task as controls; rule version "
            f"{self.rule.RULE_VERSION}, declared before the models were trained"
        )
        rows = []
        for name in self.rule.CLAIM_TASKS:
            rs = [m[name] for m in self.per_model]
            where = _where(rs, self.rule.band_of)
            if all(r.label == "inconclusive" and r.boundary is not None for r in rs):
                measured = f"not placed: at {where} a check failed"
            else:
                measured = where if where.startswith("no rise") else f"placed at {where}"
            rows.append(
                Claim(CLAIMS[name], measured, self.verdicts[name], how, anchor=ANCHORS.get(name, ANCHORS["the claim"]))
            )
        rows.append(
            Claim(
                "Layers specialise in this order, and training, not the architecture, makes them so.",
                "the five properties together; calibrations: "
                + ", ".join(f"{b} {lab}" for b, lab in self.calibrations().items()),
                self.overall,
                "a property's label stands where both new models give it; a band's calibration must be located "
                "in that band for its properties to count",
                anchor=ANCHORS["the claim"],
            )
        )
        return rows

    def task_words(self, name: str) -> str:
        """The evidence page's paragraph for one task: each model's reading under version 5, and the verdict."""
        seeds = self.rule.MODEL_SEEDS
        each = [f"new model seed {s}: {m[name].label} ({m[name].reason})" for s, m in zip(seeds, self.per_model)]
        if self.shipped is not None:
            r = self.shipped[name]
            each.append(f"shipped model, which decides nothing: {r.label} ({r.reason})")
        v = self.verdicts[name]
        return (
            f"**Version {self.rule.RULE_VERSION}.** {_cap('; '.join(each))}. Verdict: **{v.label}**"
            + (f" ({v.reason})" if v.label == "not testable" else "")
            + "."
        )

    def tasks_table(self) -> Table:
        """Version 5's tasks: their text, labels, control unit and the band the source (or a calibration) gives."""
        return tasks_table(self.rule.tasks(), self.rule.CALIBRATIONS)

    def rule_words(self, plant: dict, probe_seeds: int) -> Markdown:
        """Version 5, declared: the statistic, the calibrations, the controls and how the models and machines
        combine. ``plant``: how a bit is planted (``probes.PLANT``: its strength ``z``)."""
        r = self.rule
        blocks = " and ".join(f"block {b} ({band})" for b, band in r.PLANTS.items())
        return paragraphs(
            f"**The rule (version {r.RULE_VERSION}).** For each task, average the probe's balanced accuracy over "
            f"{probe_seeds} probe seeds at every boundary. The *rise* is the highest accuracy after the embeddings "
            f"minus the accuracy at the embeddings (boundary 0); the task is placed at the first boundary where the "
            f"accuracy has made {_share(r)} of its rise. A label the embeddings already hold has no rise to "
            "place, and one built in blocks 4-8 and kept by the later blocks is placed in the middle, wherever it "
            "stays readable.",
            f"Three checks, each by at least {r.MARGIN} in balanced accuracy, must pass for a reading to count: "
            "the blocks add something (the rise); training adds it (the trained rise beats the untrained model's); "
            "and at the placed boundary the probe reads the task better than its control task. The meaning task's "
            "control gives each token id a random manual: a random manual per file, as in version 4, is at chance "
            "by construction on files the probe never saw, so it could not fail. A reading whose checks pass is "
            "confirmed if it is placed in the task's band and not reproduced if it is placed in another; a failed "
            "check leaves it inconclusive.",
            f"The calibrations are known answers, one per band: a random bit planted on the output of {blocks}, "
            f"{plant['z']} standard deviations along one random direction (a reader of that direction alone is "
            "right 75 % of the time), which the later blocks then carry; and the next token's category, which "
            "the stack computes at its top (late). A band whose calibration is not placed in it decides nothing.",
            f"The unit of replication is the model: {_count(len(r.MODEL_SEEDS))} models of this chapter's recipe, "
            f"trained from seeds {_and([str(x) for x in r.MODEL_SEEDS])}, are probed on this machine and again on "
            "the emulated second CPU. A task's label stands where every new model gives it (else inconclusive: "
            "the models disagree) and both machines give the same label (else it depends on the machine).",
        )

    def models_words(self, losses: dict) -> str:
        """How well each model learned, so that the new models are seen to be the shipped model's kind: ``losses``
        maps each deciding model's seed and "shipped" to its held-out loss (nats per token)."""
        seeds = self.rule.MODEL_SEEDS
        new = _and([f"{losses[s]:.3f} (seed {s})" for s in seeds])
        spread = max(losses.values()) - min(losses.values())
        return (
            f"The new models learned as the shipped one did: on the held-out pages they end at {new} nats per "
            f"token, the shipped model at {losses['shipped']:.3f}, {spread:.3f} apart at most."
        )

    def claim_evidence(self, n_params: int, n_pages: int, n_modules: int) -> Markdown:
        """The source's whole claim under version 5: its label and reason, the calibrations, and the cautions
        that keep it to its size."""
        o = self.overall
        failed = self.controls_failed()
        return paragraphs(
            f"{self.overall_sentence()} The rule's reason: {o.label}, {o.reason}. Calibrations: "
            + ", ".join(f"{b} {lab}" for b, lab in self.calibrations().items())
            + "."
            + (f" Readings whose checks failed: {'; '.join(failed)}." if failed else " Every reading's checks passed."),
            "Three cautions keep the verdict to its size. These are small models of "
            f"{n_params / 1e6:.1f} million parameters, not ANDREA-120M, trained the same way on the same text, so "
            f"the verdict is about this recipe; the probes read {n_pages} held-out pages and {n_modules} modules. The "
            "labels are proxies the text provides: Python's token types and a name's neighbour for syntax, brackets "
            "for phrase structure, the manual for meaning. And a linear probe finds what is *linearly* available; "
            "a property held in another form is missed.",
        )

    # --- the rule's history ----------------------------------------------------------------------------
    def history(self, v3: str, v4: str, minutes_after: float) -> Markdown:
        """Why version 5 decides: version 3's and version 4's labels on the shipped model, the minutes between
        version 3's outcome and version 4's rule, and what version 5 changed."""
        n = len(self.rule.MODEL_SEEDS)
        return paragraphs(
            f"Version 3 of the probe rule gave the source's claim **{v3}** on the shipped model. Version 4 was "
            f"written {minutes_after:.0f} minutes after that outcome, on the same model and the same evaluation "
            f"set, and gave **{v4}**: a rule written after seeing the data it decides on decides nothing on them.",
            f"Version 5 was committed before either of the {_count(n)} models it decides on was trained (training "
            f"seeds {_and([str(x) for x in self.rule.MODEL_SEEDS])}). It locates where a block adds a label (the first "
            f"block boundary at which a probe reaches {_share(self.rule)} of its rise from the embeddings), "
            "not where the label is still readable; its calibrations are a bit planted at "
            + " and at ".join(f"block {b}" for b in self.rule.PLANTS)
            + " and the next token, one per band; and a task's label stands only where every new model gives it, on "
            "this machine and on the emulated second CPU. "
            f"Its verdict on the claim: **{self.overall.label}**. The shipped model's readings are shown beside "
            "them and decide nothing.",
            "Two limits of that declaration. Version 5 was amended twice after it was first committed, both times "
            "before any new model was probed and both times stricter: a band whose calibration fails now makes its "
            "tasks not testable in their own verdicts too (commit 4489c04), and the second machine was added (commit "
            "e40d434, while the first new model was training). And version 5 was written after version 4's "
            "readings of a model of the same recipe had been seen: declaring it before training guards against "
            "fitting it to the two new models, not to the recipe.",
        )
