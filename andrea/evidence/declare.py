"""What a grid declares: its runs (``Cell``), its rule (``Decision``), the grid (``Grid``), and the keys that
say whether stored results are still today's.

A *grid* is a named list of training runs: a model config, a training config, the corpus, and a label that
says how a chapter groups the run (``{"norm": "post", "lr": 1e-3, "seed": 0}``), with the rule that decides
the chapter's claim on them, fixed before the runs. Two hashes come from here: the runs' key (the code that
trains a cell, ``CODE_MODULES``, and the grid's own specification), and the rule's (``Grid.rule_hash``),
kept apart, so that a changed rule re-runs nothing but is said beside its verdicts (``rule_status``).
``andrea.evidence.store`` runs the grids and keeps their results; ``andrea/evidence/grids/`` declares them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Optional

from ..files import source_hash
from . import emulate

# The modules whose code decides a training cell's numbers (the key changes when any of them does),
# by their names under andrea/ (files.source_hash).
CODE_MODULES = (
    "model.config",
    "model.layers",
    "model.transformer",
    "training.train",
    "training.optimizer",
    "training.data",
    "measure.probe",
    "evidence.runs",
)


def code_hash() -> str:
    import torch

    return f"{source_hash(CODE_MODULES)}-torch{torch.__version__.split('+')[0]}"


@dataclass(frozen=True)
class Cell:
    label: dict  # how a chapter groups the run, e.g. {"norm": "post", "lr": 0.001, "seed": 0}
    model: dict  # AndreaConfig fields
    train: dict  # TrainConfig fields
    tokenizer: str = "bytes"
    monitor: Optional[str] = None  # a name in MONITORS, recorded at every validation

    def spec(self) -> dict:
        return {
            "label": self.label,
            "model": self.model,
            "train": self.train,
            "tokenizer": self.tokenizer,
            "monitor": self.monitor,
        }

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:20]

    def steps(self) -> int:
        """How many steps the run trains: a whole run diverges or reaches this step (``seal.short_run``)."""
        from ..training.train import TrainConfig

        return TrainConfig(**self.train).steps


ROLES = ("decides", "calibration", "control")
TESTS = ("paired t", "fisher", "equivalence", "level", "every")
# tests of ``evidence.twoway``: only a grid that lists it in ``Grid.rule_modules`` may use them
TWOWAY_TESTS = ("interaction", "majority", "detectable")


@dataclass(frozen=True)
class Decision:
    """One comparison of a grid's declared rule, fixed (and hashed with the grid) before any run.

    ``arm`` and ``against`` are label matches (e.g. ``{"norm": "post", "warmup": 0}``); the
    statistic is ``field``, a run's result field or one of ``measure.runstats.STATISTICS`` (``level`` is
    its threshold where it needs one). ``test`` says how it is decided:

    * ``"paired t"``: ``arm`` minus ``against``, paired by seed, lies beyond ``margin`` on the
      ``predicted`` side ("positive" or "negative"; Student's t, one-sided at 2.5 %);
    * ``"fisher"``: the event ``field`` (true or false per run) is more frequent in ``arm`` than in
      ``against`` (Fisher's exact test, one-sided at 2.5 %);
    * ``"equivalence"``: ``arm`` minus ``against`` lies within ±``margin`` (TOST);
    * ``"level"``: ``arm``'s statistic minus ``level`` lies on the ``predicted`` side (one-sample t);
    * ``"every"``: every run of ``arm`` shows the event ``field``.

    ``role``: ``"decides"`` (a regime of the claim: the claim's label comes from these, with Holm's
    correction), ``"calibration"`` (a known-good comparison that must pass the same kind of
    criterion at this budget, or the claim is not testable here) or ``"control"`` (reported beside
    the claim). ``seeds``: the seeds that decide, none of which had run when the rule was fixed
    (empty: every seed of the arm). `make test` re-runs each deciding arm's first seed."""

    what: str  # the regime or comparison, in words
    arm: dict
    against: Optional[dict] = None
    predicted: str = "negative"
    field: str = "final_val_loss"
    test: str = "paired t"
    role: str = "decides"
    margin: float = 0.0
    level: Optional[float] = None
    seeds: tuple = ()
    calibrates: str = ""  # for a calibration: the deciding regime (``what``) it calibrates; "" = all
    # for an "interaction" (evidence.twoway): the two label matches (without, with) of the treatment whose
    # effect on ``arm`` and on ``against`` is compared; left out of ``spec`` when None (older rules' hashes)
    contrast: Optional[tuple] = None

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"decision {self.what!r}: role must be one of {ROLES}, got {self.role!r}")
        if self.test not in TESTS + TWOWAY_TESTS:
            raise ValueError(f"decision {self.what!r}: test must be one of {TESTS + TWOWAY_TESTS}, got {self.test!r}")
        if (self.test == "interaction") != (self.contrast is not None and len(self.contrast) == 2):
            raise ValueError(f"decision {self.what!r}: an interaction (only) needs a contrast of 2 matches")
        if self.predicted not in ("positive", "negative"):
            raise ValueError(f"decision {self.what!r}: predicted must be 'positive' or 'negative'")
        if self.test in ("paired t", "fisher", "equivalence", "interaction", "detectable") and self.against is None:
            raise ValueError(f"decision {self.what!r}: a {self.test} test needs an `against` arm")

    @property
    def event(self) -> str:  # the result field that a count test counts
        return self.field

    def spec(self) -> dict:
        out = {**asdict(self), "seeds": list(self.seeds)}
        if self.contrast is None:
            del out["contrast"]  # a field added later: the rules written before it keep their hash
        return out

    def rerun_label(self) -> dict:
        base = self.contrast[0] if self.contrast else {}
        return {**self.arm, **base, "seed": self.seeds[0] if self.seeds else 0}


@dataclass(frozen=True)
class Grid:
    name: str  # the file name under andrea/results
    title: str  # one line for a reader
    prediction: str  # what the claim predicts, stated before any run
    cells: tuple = field(default_factory=tuple)
    decisions: tuple = field(default_factory=tuple)  # Decision: the declared rule (see Decision)
    rule: str = "every"  # how the deciding regimes make the claim's label (verdict.decide)
    # When the rule was written: "before the runs" (its deciding seeds had not run), or, for a rule
    # written after the runs it decides on, a sentence that says so (the book prints it).
    declared: str = "before the runs"
    # Modules of rule code beyond RULE_MODULES that this grid's rule needs (``evidence.twoway``): in this
    # grid's rule hash only, so that adding them marks no other grid's rule as changed.
    rule_modules: tuple = ()

    def __post_init__(self):
        from . import twoway

        if twoway.uses(self) and twoway.MODULE not in self.rule_modules:
            raise ValueError(f"grid {self.name!r} uses {twoway.MODULE}'s tests: list it in rule_modules")
        if set(self.rule_modules) - {twoway.MODULE}:
            raise ValueError(
                f"grid {self.name!r}: unknown rule modules {self.rule_modules}; allowed: {[twoway.MODULE]}"
            )

    def decision_cells(self) -> list[int]:
        """The positions of every run that a declared comparison reads (both arms, its seeds): the runs
        the book decides on, natively and on the emulated second CPU (``emulate``)."""
        out: set[int] = set()
        for d in self.decisions:
            for arm in (d.arm, d.against):
                if arm is None:
                    continue
                out.update(
                    i
                    for i, c in enumerate(self.cells)
                    if all(c.label.get(k) == v for k, v in arm.items()) and (not d.seeds or c.label["seed"] in d.seeds)
                )
        return sorted(out)

    def index(self, label: dict) -> int:
        """The position of the cell whose label matches ``label`` in every key given."""
        hits = [i for i, c in enumerate(self.cells) if all(c.label.get(k) == v for k, v in label.items())]
        if len(hits) != 1:
            raise ValueError(f"grid {self.name!r}: {len(hits)} cells match {label}, expected exactly one")
        return hits[0]

    def spec_hash(self) -> str:
        """The hash of the runs (their configs and seeds): a changed run makes the results stale."""
        blob = json.dumps({"cells": [c.spec() for c in self.cells]}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def key(self) -> str:
        return f"{code_hash()}-{self.spec_hash()}"

    def rule_hash(self) -> str:
        """The hash of the declared rule: the prediction, the comparisons and how they combine, the code
        that decides them (``RULE_MODULES``) and how the second machine is emulated. Kept apart from the
        runs' hash: a changed rule re-runs nothing, but the verdicts it gives on runs made under another
        rule are marked as decided by a rule changed after its runs (``rule_status``)."""
        parts = {
            "rule": self.rule,
            "declared": self.declared,
            "decisions": [d.spec() for d in self.decisions],
            "prediction": self.prediction,
            "code": source_hash(RULE_MODULES),
            "emulation": emulate.EMULATED,
        }
        if self.rule_modules:  # only where listed: the other grids' hashes stay as they were
            parts["extra code"] = source_hash(self.rule_modules)
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# The modules whose code turns stored runs into verdicts (part of every grid's rule_hash).
RULE_MODULES = ("evidence.verdict", "evidence.rule", "measure.runstats")
BEFORE = "declared before its runs"
CHANGED = "rule changed after its runs"


def rule_status(grid: Grid, blob: dict) -> tuple[str, str]:
    """(``BEFORE`` or ``CHANGED``, why): whether every run the grid decides on (``decision_cells``, both
    machines) was made under the rule in force now. Each run records the rule hash it was trained under;
    runs stored before that was recorded count as made under another rule."""
    now = grid.rule_hash()
    stamps = []
    for i in grid.decision_cells():
        c = blob["cells"][i]
        stamps.append(c["result"].get("rule"))
        if "emulated" in c:
            stamps.append(c["emulated"].get("rule"))
    other = [s for s in stamps if s != now]
    stale = sum(
        1
        for i in grid.decision_cells()
        if "emulated" in blob["cells"][i] and blob["cells"][i]["emulated"].get("emulation") != emulate.procedure_hash()
    )
    if stale:
        other.append("emulation")
    if not other:
        return BEFORE, f"all {len(stamps)} runs it decides on were made under the rule in force (rule {now})"
    unknown = sum(s is None for s in other)
    said = f"{len(other) - bool(stale)} of the {len(stamps)} runs it decides on were made under another rule"
    if unknown:
        said += f" ({unknown} before runs recorded their rule)"
    if stale:
        said += f"; {stale} emulated copies were made by another emulation than today's"
    return CHANGED, said + f"; the rule now is {now}"
