"""Chapter 8's probes in words: the source's claim that blocks specialise, task by task (``ProbeReport``).

This module does not import ``andrea.trained`` (the views sit below it in the package's layers): the probes'
rule arrives as an argument, the module ``andrea.trained.probes``, with the stored results it decided. The
lesson gives one plain sentence per verdict (``sentences``, ``overall_sentence``); the evidence page the
tasks, the calibrations, the declared rule and its history, and every comparison with its interval after
Holm's correction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..lesson import Markdown, paragraphs
from ..notebook import Claim, table

# How the tasks' labels make the whole claim's label (the rule of ``probes.decide_claim``), said per label
RULE_WORDS = {
    "confirmed": "every task sits in its band",
    "qualified": "some tasks sit in their bands and others show the opposite",
    "not reproduced": "no task sits in its band and at least one is read better in another band than in its own, "
    "even a qualified one; undecided or untestable tasks cannot change that",
    "not testable": "no task could be tested",
    "inconclusive": "no task shows the opposite but not every one sits in its band",
}
ANCHORS = {
    "position": "ev-ch8-position",
    "syntax (lexical)": "ev-ch8-syntax-lexical",
    "syntax (contextual)": "ev-ch8-syntax-contextual",
    "phrase structure": "ev-ch8-phrase-structure",
    "meaning": "ev-ch8-meaning",
    "the claim": "ev-ch8-specialisation",
}
# The source's words for each task (chapter 6 quotes them).
CLAIMS = {
    "position": "Early blocks (1-3) carry position.",
    "syntax (lexical)": "Early blocks (1-3) carry syntax (token types).",
    "syntax (contextual)": "Early blocks (1-3) carry syntax (what a name is doing).",
    "phrase structure": "Middle blocks (4-8) carry relations between words and phrase boundaries.",
    "meaning": "Late blocks (9-12) carry meaning.",
}
BLOCKS = {"early": "blocks 1–3", "middle": "blocks 4–8", "late": "blocks 9–12"}
UNITS = {"token": "token id", "previous": "token before", "position": "position", "file": "file"}
# What each calibration's property is, in a phrase.
CALIBRATION_WORDS = {
    "current token": "the current token's own category",
    "planted": "a bit planted by block 4",
    "next token": "the next token's category",
}


# The probe rule's history, from the commits that made it (tests/test_pages_ch8.py checks them against git):
# version 3's outcome on the shipped model, then version 4's declaration on the same model and evaluation set.
HISTORY = {
    3: {"commit": "114bedf", "at": "2026-12-02 19:41:59", "claim": "qualified"},
    4: {"commit": "05e27ce", "at": "2026-12-02 19:47:47"},
}


def minutes_between(version_a: int, version_b: int) -> float:
    from datetime import datetime

    at = {v: datetime.fromisoformat(HISTORY[v]["at"]) for v in (version_a, version_b)}
    return (at[version_b] - at[version_a]).total_seconds() / 60


# The verdict labels that book/glossary.md defines ("qualified": glossary-ch13.md, merged with these chapters)
GLOSSED = ("inconclusive", "qualified", "not testable", "depends on the machine")


def label_md(label: str) -> str:
    """A verdict label as the lesson prints it (MyST): a glossary link where the glossary defines it, else bold."""
    return f"{{term}}`{label}`" if label in GLOSSED else f"**{label}**"


def _evidence(name: str) -> str:
    return f"{{ref}}`evidence <{ANCHORS[name]}>`"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _count(n: int) -> str:
    return ("none", "one", "two", "three", "four", "five", "six", "seven", "eight")[n] if n < 9 else str(n)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --- the probes ------------------------------------------------------------------------------------


class ProbeReport:
    """The probes' stored results and their verdicts, in the chapter's words.

    ``rule`` is ``andrea.trained.probes`` (its tasks, bands, calibrations and ``decide_claim``), ``found``
    the stored ``probes.run_probes`` results, ``decided`` ``probes.decide_all(found)``."""

    def __init__(self, rule: Any, found: dict, decided: dict):
        missing = [t.name for t in rule.TASKS if t.name not in found or t.name not in decided]
        if missing:
            raise ValueError(f"no probe results or verdicts for the tasks {missing}; the rule has {rule.TASKS}")
        self.rule, self.found, self.decided = rule, found, decided
        self.tasks = {t.name: t for t in rule.TASKS}
        calibrations = set(rule.CALIBRATIONS.values())
        self.claim_tasks = [t for t in rule.TASKS if t.name not in calibrations]
        self.overall = rule.decide_claim({t.name: decided[t.name] for t in self.claim_tasks})

    # the numbers
    def band(self, name: str, model: str = "trained", what: str = "task") -> dict:
        """The mean accuracy of each band, over the probe seeds."""
        m = self.rule.band_means(self.found[name][model][what])
        return {k: float(v.mean()) for k, v in m.items()}

    def lead(self, name: str) -> float:
        """How much more the predicted band leads the nearest other band in the trained model than in the
        untrained one (mean over probe seeds)."""
        b = self.tasks[name].band
        tr, un = self.band(name), self.band(name, "untrained")
        return min((tr[b] - tr[o]) - (un[b] - un[o]) for o in tr if o != b)

    def calibrations(self) -> dict:
        """Each band's calibration label."""
        return {b: self.decided[n][0].label for b, n in self.rule.CALIBRATIONS.items()}

    # the lesson
    def verdict_sentence(self, name: str) -> str:
        """What the probes found for a task decided in its band, in plain words with its numbers (no label;
        ``sentences`` adds it): where it is read better or worse than in its predicted blocks."""
        b = self.tasks[name].band
        v, regimes = self.decided[name]
        tr = self.band(name)
        if v.label == "confirmed":
            return (
                f"read best there ({tr[b]:.2f}), more clearly than in the untrained model, and better than its "
                "control task"
            )
        above: list[str] = []
        below: list[str] = []
        unclear: list[str] = []
        for other in BLOCKS:
            r = regimes.get(f"{b} over {other}")
            if r is not None:
                where = f"{BLOCKS[other]} ({tr[other]:.2f})"
                {"confirmed": above, "not reproduced": below}.get(r.label, unclear).append(where)
        parts = []
        if above:
            parts.append(f"read better there ({tr[b]:.2f}) than in {' and '.join(above)}")
        if below:
            parts.append(f"{'but ' if above else f'read at {tr[b]:.2f} there, '}lower than in {' and '.join(below)}")
        if unclear:
            at = "" if parts else f" ({tr[b]:.2f})"
            parts.append(f"{'and ' if parts else ''}not clearly better there{at} than in {' and '.join(unclear)}")
        if not parts:
            training = [k for k, r in regimes.items() if k.startswith("training") and r.label != "confirmed"]
            control = regimes.get("above its control")
            if training:
                parts.append(f"read best there ({tr[b]:.2f}), but not clearly more than in the untrained model")
            elif control is not None and control.label != "confirmed":
                parts.append(f"read best there ({tr[b]:.2f}), but not clearly better than its control task")
        return ", ".join(parts)

    def sentences(self) -> Markdown:
        """The lesson's verdicts, one sentence per claim: its label (a glossary link where the glossary defines
        it) and a link to its evidence section; the tasks of a band whose calibration failed share one
        sentence."""
        lines = []
        untestable: dict[str, list] = {}
        for t in self.claim_tasks:
            if self.decided[t.name][0].label == "not testable":
                untestable.setdefault(t.band, []).append(t)
        for band, tasks in untestable.items():
            named = [f"**{_cap(t.name) if i == 0 else t.name}** ({_evidence(t.name)})" for i, t in enumerate(tasks)]
            cal = self.rule.CALIBRATIONS.get(band, "")
            said = f"- {_and(named)}, predicted for {BLOCKS[band]}, {'are' if len(tasks) > 1 else 'is'} "
            said += f"{label_md('not testable')}: the probes could not place even {CALIBRATION_WORDS.get(cal, cal)}, "
            lines.append(said + f"a known answer, there, so they cannot place anything in {BLOCKS[band]}.")
        for t in self.claim_tasks:
            v = self.decided[t.name][0]
            if v.label == "not testable":
                continue
            lines.append(
                f"- **{_cap(t.name)}** ({_evidence(t.name)}), predicted for {BLOCKS[t.band]}, is "
                f"{label_md(v.label)}: {self.verdict_sentence(t.name)}."
            )
        return Markdown("\n".join(lines))

    def untrained_words(self) -> str:
        """A sentence on the tasks the untrained model reads better than the trained one in their predicted band
        (empty if none): the control then says the architecture, not training, put the property there."""
        names, numbers = [], []
        for t in self.claim_tasks:
            tr, un = self.band(t.name)[t.band], self.band(t.name, "untrained")[t.band]
            if un > tr:
                names.append(t.name)
                numbers.append(f"{un:.2f} against {tr:.2f} in {BLOCKS[t.band]}")
        if not names:
            return ""
        return (
            f"The untrained model reads {_and(names)} better than the trained one ({'; '.join(numbers)}): that comes "
            "with the architecture, not from training."
        )

    def against_words(self, name: str) -> str:
        """How a task went against the prediction, in a phrase: read better in other blocks, or not made by
        training, or not above its control."""
        b = self.tasks[name].band
        v, regimes = self.decided[name]
        lower = [o for o in BLOCKS if getattr(regimes.get(f"{b} over {o}"), "label", "") == "not reproduced"]
        if lower:
            return f"read better in {' and '.join(BLOCKS[o] for o in lower)} than in its predicted {BLOCKS[b]}"
        if any(k.startswith("training") and r.label == "not reproduced" for k, r in regimes.items()):
            return "put in its predicted blocks less by training than by the architecture"
        return "read no better than its control task"

    def overall_sentence(self) -> str:
        """The source's whole claim, in one sentence: its label and how the tasks fell, grouped as the rule
        (``decide_claim``) groups them."""
        held, against, undecided, untestable = [], [], [], []
        for t in self.claim_tasks:
            v, regimes = self.decided[t.name]
            if v.label == "confirmed":
                held.append(t.name)
            elif v.label == "not testable":
                untestable.append(t.name)
            elif v.label == "not reproduced" or any(r.label == "not reproduced" for r in regimes.values()):
                against.append(t.name)
            else:
                undecided.append(t.name)
        n = len(self.claim_tasks)
        head = (
            f"{_and(held)} sat where the source says"
            if held
            else f"none of the {_count(n)} tasks sat where the source says"
        )
        parts = [f"{k} was {self.against_words(k)}" for k in against]
        if undecided:
            parts.append(f"{_and(undecided)} {'was' if len(undecided) == 1 else 'were'} undecided")
        if untestable:
            parts.append(f"{_count(len(untestable))} could not be tested")
        rule = RULE_WORDS.get(self.overall.label, "")
        return (
            f"Taken together, the source's division of labour is {label_md(self.overall.label)} in this model "
            f"({{ref}}`evidence <{ANCHORS['the claim']}>`): {head}" + (f"; {_and(parts)}." if parts else ".")
        ) + (f" The rule gives that label when {rule}." if rule else "")

    def found_sentence(self) -> str:
        """The probes' verdict for "What we found", with the number that weighs most against (or for) it."""
        o = self.overall
        said = "The source's claim that blocks specialise in order (syntax first, meaning last) is " + (
            label_md(o.label) if o.label in GLOSSED else f"{{doc}}`{o.label} <checking>`"
        )
        against = [
            t
            for t in self.claim_tasks
            if self.decided[t.name][0].label in ("not reproduced", "qualified")
            and any(r.label == "not reproduced" for r in self.decided[t.name][1].values())
        ]
        if against:
            t = against[0]
            tr = self.band(t.name)
            top = max(tr, key=lambda k: tr[k])
            said += (
                f" in this model: {t.name}, predicted for {BLOCKS[t.band]}, is read best in {BLOCKS[top]} "
                f"({tr[top]:.2f} against {tr[t.band]:.2f}, in accuracy)"
            )
        elif o.label == "confirmed":
            said += " in this model: every task is read best in its predicted blocks, and training put it there"
        return said + "."

    # the evidence page
    def tasks_table(self):
        """The tasks, their text, labels, controls and bands."""
        cal = set(self.rule.CALIBRATIONS.values())
        return table(
            [
                {
                    "task": t.name,
                    "text": "held-out manuals" if t.text == "prose" else "standard-library code",
                    "labels": ", ".join(t.classes),
                    "control's unit": UNITS[t.control],
                    "band": t.band + (" (calibration)" if t.name in cal else " (the source)"),
                }
                for t in self.rule.TASKS
            ],
            ["task", "text", "labels", "control's unit", "band"],
        )

    def bands_table(self):
        """Per task: mean accuracy per band, the untrained model's and the control's in the predicted band,
        training's lead, the peak and the verdict."""
        rows = []
        for t in self.rule.TASKS:
            acc = self.found[t.name]["trained"]["task"]
            rows.append(
                {
                    "task": t.name,
                    "band": t.band,
                    "trained: early / middle / late": " / ".join(f"{x:.2f}" for x in self.band(t.name).values()),
                    "untrained": f"{self.band(t.name, 'untrained')[t.band]:.2f}",
                    "training's lead": f"{self.lead(t.name):+.2f}",
                    "control": f"{self.band(t.name, 'trained', 'control')[t.band]:.2f}",
                    "peak": f"block {self.rule.peak_boundary(acc)}",
                    "verdict": self.decided[t.name][0].label,
                }
            )
        return table(rows, list(rows[0]))

    def regimes_table(self, name: str):
        """A task's comparisons: the difference's mean and 95 % interval over probe seeds, and each one's label
        after Holm's correction over the task's comparisons."""
        _, regimes = self.decided[name]
        return table(
            [
                {
                    "comparison": k,
                    "difference, mean [95 % interval]": r.interval.format(".3f") if r.interval else "-",
                    "label after Holm": r.label,
                }
                for k, r in regimes.items()
            ],
            ["comparison", "difference, mean [95 % interval]", "label after Holm"],
        )

    def task_words(self, name: str) -> str:
        """A task's label and band means, in one sentence (the evidence page)."""
        t = self.tasks[name]
        tr, un = self.band(name), self.band(name, "untrained")
        ctl = self.band(name, "trained", "control")[t.band]
        top = max(tr, key=lambda k: tr[k])
        v = self.decided[name][0]
        said = f"**{v.label}**: highest in the {top} band ({tr[top]:.2f})"
        if t.band != top:
            said += f", {tr[t.band]:.2f} in the {t.band} band"
        said += f"; there the untrained model scores {un[t.band]:.2f} and the control task {ctl:.2f}. "
        return said + f"The rule's reason: {v.reason}."

    def calibration_words(self) -> str:
        """What the three calibrations say about where the rule can place a task."""
        calib = self.calibrations()
        passed = [b for b, lab in calib.items() if lab == "confirmed"]
        failed = [b for b in calib if b not in passed]
        if not failed:
            said = (
                "All three calibrations pass: the rule finds the current token early, the planted bit in the middle "
                "and the next token late, so it can place a task in any band."
            )
        else:
            said = (
                f"The {' and '.join(passed) or 'no'} calibration"
                + ("s pass" if len(passed) > 1 else " passes" if passed else "s pass")
                + f"; the {' and '.join(failed)} "
                + ("ones do" if len(failed) > 1 else "one does")
                + " not, so a task predicted there is not testable by this rule."
            )
        if calib.get("early") != "confirmed":
            cur = self.band(self.rule.CALIBRATIONS["early"])
            said += (
                f" The current token's category is still read at {cur['middle']:.2f} in the middle band, against "
                f"{cur['early']:.2f} early: a residual stream keeps what its embeddings put in, so a property present "
                "from the start does not fade fast enough for this rule to call it early."
            )
        planted = self.band(self.rule.CALIBRATIONS["middle"])
        return (
            said + f" The planted bit is read at {planted['middle']:.2f} in the middle band and {planted['late']:.2f} "
            "in the late band, where the blocks after block 4 carried it."
        )

    def rule_words(self) -> Markdown:
        """The declared rule, with its settings from the rule's module."""
        r = self.rule
        return paragraphs(
            "**The rule.** For each task and probe seed, average the balanced accuracy (the mean recall over the "
            "labels, so that guessing the commonest label scores one over their number) over the boundaries of "
            f"each band (boundary 0, the embeddings, belongs to none). The task lives where the source says if, "
            f"over {r.PROBE_SEEDS} probe seeds, three things hold, each by more than {r.MARGIN} in balanced "
            "accuracy: its predicted band beats each other band; that lead is larger in the trained model than in "
            "the untrained one (training's lead: training, not the architecture, made it); and the task beats its "
            "control there. Each comparison is a paired interval over the probe seeds, Holm's correction runs over "
            "the task's five comparisons, and all of them are required. A band's tasks are decided only if the "
            "band's calibration passes.",
            "A probe seed draws which held-out files train the probe and which test it (half each, within each "
            f"manual), the probe's training and test tokens from them ({r.N_PROBE_TRAIN} and {r.N_PROBE_TEST}, or "
            "all there are), and the control task's labels. The probes are ridge regressions onto one-hot labels, "
            "solved exactly in float64, so no optimiser's luck enters and every CPU gives the same answer. Reading "
            "the stream of both models at every boundary takes a few minutes on a CPU, so the pages read the "
            "probes' results from a file that `probes.run_probes` wrote for these very weights (`make test` runs a "
            "part of them again and compares).",
            f"This is the rule's version {r.RULE_VERSION}, written down before its probe seeds ran; each earlier "
            "version was run once and then reviewed, and each version ran on new probe seeds. The second version "
            "decided on the task's accuracy *minus* its control's; control accuracy falls from early to late in "
            "every task, so that subtraction lifted every late band. The third decided on accuracy itself, but "
            "compared the untrained model by its level only (in the untrained model too, accuracy on the manual "
            "rises with depth, by more than in the trained one), let differences of a few thousandths decide, and "
            "planted its calibration bit at boundaries 4-8 only, so that it could not fail.",
        )

    def history_words(self, share: float) -> Markdown:
        """When this version was written, what version 3 had said, and which version will decide (evidence page);
        ``share``: the share of a probe's rise that locates it under version 5 (``locate.SHARE``)."""
        v3, v4 = HISTORY[3], HISTORY[4]
        return paragraphs(
            f"Version 3 gave the source's whole claim **{v3['claim']}** on this model (commit `{v3['commit']}`). "
            f"Version {self.rule.RULE_VERSION} was committed {minutes_between(3, 4):.0f} minutes later (commit "
            f"`{v4['commit']}`), after that result, on the same trained model and the same evaluation set; only its "
            f"probe seeds were new. Its label, **{self.overall.label}**, is the one these pages print, so it comes "
            "from a rule written after this model's readings had been seen: by the book's own standard it decides "
            "nothing on them.",
            "Version 5 (`andrea/trained/locate.py`) was declared before the models it decides on were trained. It "
            f"locates where a block *adds* a label (the first boundary at which a probe reaches {share:.0%} of its "
            "rise from the embeddings), not where the label is still readable; it has a calibration that this "
            "statistic can pass in each band; and it decides on two newly trained models, not on this one, whose "
            "readings every earlier version saw. Its verdicts will replace these once both models are trained and "
            "probed.",
        )

    def history_sentence(self) -> str:
        """The lesson's one sentence on the rule's history, linked to the evidence page."""
        return (
            f"These labels come from version {self.rule.RULE_VERSION} of the probes' rule, written after version 3's "
            "result on this same model; a version fixed before its two new models were trained is waiting for them "
            "({ref}`the rule's history <ev-ch8-rule>`)."
        )

    def planted_words(self) -> str:
        """How the middle calibration is planted."""
        p = self.rule.PLANT
        return (
            f"No property of text is known to be computed in this model's middle blocks, so the middle calibration "
            f"is made by hand: block {p['block']}, the middle band's first, plants a random bit per token in the "
            "trained model's stream, along one random direction, just strong enough that a reader of that direction "
            f"alone would be right 75 % of the time ({p['z']} standard deviations). Blocks {p['block'] + 1} to 12 "
            f"then run on the changed stream, as they would on anything block {p['block']} computed. It calibrates "
            "the rule, not the model: can the rule place in the middle band a property that appears there and is "
            "then carried on?"
        )


def claim_rows(report: ProbeReport) -> list[Claim]:
    """The chapter's claims: one per probing task, then the source's whole claim."""
    r = report.rule
    rows = []
    for t in report.claim_tasks:
        v, _ = report.decided[t.name]
        b = report.band(t.name)
        rows.append(
            Claim(
                CLAIMS.get(t.name, f"The {t.band} blocks carry {t.name}."),
                "accuracy early / middle / late: " + " / ".join(f"{x:.2f}" for x in b.values()),
                v,
                "linear probes, trained model against the untrained one and a control task, "
                f"{r.PROBE_SEEDS} fresh probe seeds",
                anchor=ANCHORS.get(t.name, ANCHORS["the claim"]),
            )
        )
    rows.append(
        Claim(
            "Layers specialise in this order, and training, not the architecture, makes them so.",
            "the five tasks together; calibrations: "
            + ", ".join(f"{b} {lab}" for b, lab in report.calibrations().items()),
            report.overall,
            "every task must sit in its band by more than the untrained model's contrast and beat its control "
            "there; a band's calibration must pass for its tasks to count",
            anchor=ANCHORS["the claim"],
        )
    )
    return rows


def calibration_table(report: ProbeReport):
    """Each calibration's comparisons: the difference's mean and 95 % interval, and its label after Holm."""
    rows = []
    for band, name in report.rule.CALIBRATIONS.items():
        for k, r in report.decided[name][1].items():
            rows.append(
                {
                    "calibration": f"{name} ({band})",
                    "comparison": k,
                    "difference, mean [95 % interval]": r.interval.format(".3f") if r.interval else "-",
                    "label after Holm": r.label,
                }
            )
    return table(rows, list(rows[0]))


def claim_evidence(report: ProbeReport, es: dict, log: dict, n_params: int) -> Markdown:
    """The source's whole claim: its label and reason, and the four cautions that keep it to its size."""
    o = report.overall
    n_pages = len(np.unique(es["prose_file"]))
    n_modules = len(np.unique(es["code_file"]))
    return paragraphs(
        f"{report.overall_sentence()} The rule's reason: {o.label}, {o.reason}. Calibrations: "
        + ", ".join(f"{b} {lab}" for b, lab in report.calibrations().items())
        + ".",
        "Four cautions keep the verdict to its size. This is one trained model of "
        f"{n_params / 1e6:.1f} million parameters, not ANDREA-120M, and the probe seeds vary the probes and the "
        f"split of the {n_pages} held-out pages whose windows the probes read (of the "
        f"{log['corpus']['val']['files']} held out) and {n_modules} modules, not the training run, so the verdict "
        "is about this model on this text. The labels are proxies the text provides: Python's token types and a "
        "name's neighbour for syntax, brackets for phrase structure, the manual for meaning. A linear probe finds "
        'what is *linearly* available; a property held in another form is missed. And "carries" had to be made a '
        "number, the band with the highest mean accuracy; a residual stream keeps what it was given, so a property "
        "written early can stay readable to the top, and another choice, such as the first boundary where a probe "
        "nears its best, could order the tasks differently.",
    )
