"""Chapter 8's probes under rule version 4, on the shipped model (``ProbeReport``): the evidence page's record.

Version 4 was written after version 3's result on this same model, so it decides nothing; the chapter's
verdicts come from version 5 on two new models (``ch8_locate``). This module keeps what version 4 measured
(the tasks, the bands, the calibrations, every comparison with its interval after Holm's correction), the
rule's history (``HISTORY``) and the words both versions share (``ANCHORS``, ``CLAIMS``, ``BLOCKS``,
``label_md``). It does not import ``andrea.trained`` (the views sit below it in the package's layers): the
rule arrives as an argument, the module ``andrea.trained.probes``, with the stored results it decided.
"""

from __future__ import annotations

from typing import Any

from ..lesson import Markdown, paragraphs
from ..notebook import table

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


# The verdict labels that book/glossary.md defines, each a link to its entry where chapter 8 prints it
GLOSSED = ("confirmed", "not reproduced", "inconclusive", "qualified", "not testable", "depends on the machine")


def label_md(label: str) -> str:
    """A verdict label as the lesson prints it (MyST): a glossary link where the glossary defines it, else bold."""
    return f"{{term}}`{label}`" if label in GLOSSED else f"**{label}**"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _count(n: int) -> str:
    return ("none", "one", "two", "three", "four", "five", "six", "seven", "eight")[n] if n < 9 else str(n)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --- the probes ------------------------------------------------------------------------------------


def tasks_table(tasks, calibrations: dict):
    """A rule's probing tasks: their text, labels, control unit and the band the source (or a calibration,
    ``calibrations``: band -> task name) gives them."""
    cal = set(calibrations.values())
    rows = [
        {
            "task": t.name,
            "text": "held-out manuals" if t.text == "prose" else "standard-library code",
            "labels": ", ".join(t.classes),
            "control's unit": UNITS[t.control],
            "band": t.band + (" (calibration)" if t.name in cal else " (the source)"),
        }
        for t in tasks
    ]
    return table(rows, list(rows[0]))


class ProbeReport:
    """Version 4's stored results on the shipped model and their verdicts (they decide nothing), in words.

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

    # the evidence page
    def tasks_table(self):
        """The tasks, their text, labels, controls and bands."""
        return tasks_table(self.rule.TASKS, self.rule.CALIBRATIONS)

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
            "**The rule (version 4).** For each task and probe seed, average the balanced accuracy (the mean recall "
            "over the labels, so that guessing the commonest label scores one over their number) over the boundaries "
            f"of each band (boundary 0, the embeddings, belongs to none). The task lives where the source says if, "
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
