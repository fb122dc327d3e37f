"""Chapter 8's probe rule, version 5: where a block *adds* a label, decided on two newly trained models.

Declared before either model was trained or probed (issue 49). Version 4 (``probes``) read a band's mean
probe accuracy on the cumulative residual stream: that says where a label is still readable, not where a
block adds it, so its early calibration (the current token's category, held by the embeddings) failed by
construction, a feature that fades passed the middle one, and a label built in blocks 4-8 and kept by the
later blocks counted against the middle band. It was also written six minutes after version 3's outcome,
on the same model and evaluation set, and everything rested on one trained model.

Version 5:

* **The unit of replication is the model.** Two models of chapter 8's configuration (``model.CONFIG``,
  ``model.TRAIN``) are trained from the seeds ``MODEL_SEEDS``; they decide. The shipped model (seed 0,
  whose readings versions 2-4 saw) is read the same way and shown beside them; it decides nothing.
* **The statistic locates the rise** (``located``): on a task's accuracy curve over the boundaries
  (0: the embeddings, b: block b's output; mean over the probe seeds), the first block boundary at which
  the probe reaches ``SHARE`` (90 %) of its rise from the embeddings to its highest point. A label present
  in the embeddings has no rise to locate; a label built in blocks 4-8 and kept after them is located in
  the middle band, wherever it stays readable.
* **Three calibrations it can pass**, one per band, with known answers: a bit planted on the output of
  block 2 (early) and of block 6 (middle) (``PLANTS``, as ``probes.planted_features`` plants version 4's
  at block 4), and the next token's category, which the stack computes at its top (late). A band whose
  calibration is not located in it on both new models decides nothing.
* **Controls that can fail for every task** (``reading``): the rise is at least ``MARGIN``; training adds
  it (the trained rise exceeds the untrained model's by ``MARGIN``); and at the located boundary the probe
  reads the task better than its control task by ``MARGIN``. The meaning task's control scrambles its
  label per token id (``CONTROLS``), not per file: a per-file label is at chance by construction on files
  the probe has not seen, so that control could not fail.
* **Per model**, a task is "confirmed" where every control passes and its rise is located in the band the
  source gives it, "not reproduced" where every control passes and it is located in another band, and
  "inconclusive" where a control fails. **A task's label stands where both new models give it**;
  otherwise it is inconclusive ("the models disagree"). The claim is ``probes.decide_claim`` over the
  tasks' labels.
* **Both machines** (added before any new model was probed): each new model is probed again on the emulated
  second CPU (``evidence.emulate.EMULATED``). Each machine's readings are decided on their own; a task
  whose label differs between the machines is "depends on the machine" (``evidence.verdict.agree``), and a
  band's calibration must be located in it on both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from . import probes

RULE_VERSION = 5
MODEL_SEEDS = (1, 2)  # training seeds of the two models that decide (the shipped model: seed 0)
SEED_BASE = 5000  # probe seed s draws with 5000 + s (version 2: 1000, 3: 2000, 4: 4000)
SHARE = 0.9  # the share of the rise from the embeddings that locates it
MARGIN = probes.MARGIN  # balanced accuracy
# The calibrations' planted bits: block -> band (z and direction as version 4's, probes.PLANT).
PLANTS = {2: "early", 6: "middle"}
CALIBRATIONS = {"early": "planted at block 2", "middle": "planted at block 6", "late": "next token"}
# The control unit of each claim task (probes.Task.control), where it differs from version 4's.
CONTROLS = {"meaning": "token"}
CLAIM_TASKS = ("position", "syntax (lexical)", "syntax (contextual)", "phrase structure", "meaning")


def tasks() -> tuple[probes.Task, ...]:
    """Version 5's tasks: version 4's claim tasks (the meaning task with a per-token control), the two
    planted calibrations and the next token's category."""
    by_name = {t.name: t for t in probes.TASKS}
    out = [replace(by_name[n], control=CONTROLS.get(n, by_name[n].control)) for n in CLAIM_TASKS]
    planted = by_name["planted"]
    out += [replace(planted, name=f"planted at block {b}", band=band) for b, band in PLANTS.items()]
    out.append(by_name["next token"])
    return tuple(out)


def band_of(boundary: int) -> str:
    """The band of block boundary ``boundary`` (1..12)."""
    for band, bs in probes.BANDS.items():
        if boundary in bs:
            return band
    raise ValueError(f"boundary must be a block output in 1..12, got {boundary}")


def located(curve: np.ndarray, share: float = SHARE) -> tuple[Optional[int], float]:
    """(the first block boundary at which ``curve`` reaches ``share`` of its rise from the embeddings,
    the rise): ``curve`` is a probe's accuracy at boundaries 0..n (mean over probe seeds). Without a rise
    (the highest point is the embeddings) the location is None."""
    c = np.asarray(curve, dtype=float)
    if c.ndim != 1 or len(c) < 2 or not np.all(np.isfinite(c)):
        raise ValueError(f"an accuracy curve is a finite vector over at least two boundaries, got {c!r}")
    rise = float(c[1:].max() - c[0])
    if rise <= 0:
        return None, rise
    return int(np.flatnonzero(c[1:] - c[0] >= share * rise)[0]) + 1, rise


@dataclass(frozen=True)
class Reading:
    """One task on one model: where its rise is located, and whether each control passed."""

    task: str
    band: str  # where the source (or the calibration) puts it
    boundary: Optional[int]
    rise: float
    trained_over_untrained: float  # the trained rise minus the untrained model's
    over_control: Optional[float]  # task minus control accuracy at the located boundary
    label: str
    reason: str


def reading(task: probes.Task, result: dict) -> Reading:
    """Version 5's reading of ``task`` on one model: ``result`` is ``probes.probe_task``'s output for the
    trained model and the untrained one ({"trained": {"task", "control"}, "untrained": {"task", ...}})."""
    tr = result["trained"]["task"].mean(0)
    un = result["untrained"]["task"].mean(0)
    ctl = result["trained"]["control"].mean(0)
    b, rise = located(tr)
    un_rise = located(un)[1]
    added = rise - max(un_rise, 0.0)
    over = None if b is None else float(tr[b] - ctl[b])
    failed = []
    if rise < MARGIN:
        failed.append(f"the blocks add {rise:+.3f} (less than {MARGIN:g})")
    if added < MARGIN:
        failed.append(f"training adds {added:+.3f} to the rise (less than {MARGIN:g})")
    if over is not None and over < MARGIN:
        failed.append(f"at block {b} the task beats its control by {over:+.3f} (less than {MARGIN:g})")
    if failed:
        return Reading(task.name, task.band, b, rise, added, over, "inconclusive", "; ".join(failed))
    where = band_of(b)  # type: ignore[arg-type]
    label = "confirmed" if where == task.band else "not reproduced"
    said = f"{SHARE:.0%} of its rise ({rise:+.3f}) reached at block {b}, in the {where} band"
    return Reading(task.name, task.band, b, rise, added, over, label, said)


def agree(readings: list[Reading]) -> tuple[str, str]:
    """(label, reason) of one task over the deciding models: the label they all give, else inconclusive."""
    labels = {r.label for r in readings}
    said = "; ".join(f"model {i + 1}: {r.label} ({r.reason})" for i, r in enumerate(readings))
    if len(labels) == 1:
        return readings[0].label, said
    return "inconclusive", "the models disagree: " + said


def _decide_one(per_model: list[dict]) -> dict:
    from ..evidence import verdict as V

    if len(per_model) < 2:
        raise ValueError(f"version 5 decides on at least two models, got {len(per_model)}")
    return {t.name: V.Verdict(*agree([m[t.name] for m in per_model])) for t in tasks()}


def decide(per_model: list[dict], second: Optional[list[dict]] = None):
    """The claim from the deciding models' readings (each {task name: Reading}, from ``reading``), and, where
    given, the same models' readings on the second machine: ({task: Verdict} for every task, the claim's
    verdict (``probes.decide_claim``)). A task whose label differs between the machines depends on the
    machine. A band whose calibration is not confirmed (on both machines) makes its claim tasks not
    testable, in the claim and in their own verdicts."""
    from ..evidence import verdict as V

    out = _decide_one(per_model)
    if second is not None:
        if len(second) != len(per_model):
            raise ValueError(f"the second machine's readings cover {len(second)} models, not {len(per_model)}")
        other = _decide_one(second)
        out = {name: V.agree(v, other[name]) for name, v in out.items()}
    calibrated = {band: out[name].label == "confirmed" for band, name in CALIBRATIONS.items()}
    decided = {}
    for t in tasks():
        if t.name not in CLAIM_TASKS:
            continue
        v = out[t.name]
        if not calibrated[t.band]:
            v = V.not_testable(f"the {t.band} calibration ({CALIBRATIONS[t.band]}) was not located {t.band}")
            out[t.name] = v
        decided[t.name] = (v, {t.name: v})
    return out, probes.decide_claim(decided)
