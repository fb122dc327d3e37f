"""A results file's integrity: its digest, its emulated copies' stamps, and the checks ``store.load`` makes on
what it reads.

* The digest (``digest``: ``files.json_digest``) covers the whole file, the header included (the prediction
  the chapters print, torch, the date, the machine, the runs ``make test`` re-runs), all but the key, which is
  checked against the code instead. It detects damage and edits that do not recompute it; an edit that
  recomputes it is caught by the re-runs (``rerun``), not here.
* Each emulated copy carries its own stamp (``stamp``: a hash of its cell and of its own values): a native run
  swapped with its copy, or one seed's copy given to another seed, no longer matches, and a native run never
  carries a copy's stamp.
* What can be checked without a re-run is (``problems``): every run's values have the types and ranges a run
  gives (a loss is a finite number of nats, not ``"3.1"``, NaN or a list), no two runs of a file are the same
  run (one seed copied over the others), and the header's derived fields are what its runs give.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Optional

from ..files import json_digest

RESULT_FIELDS = (
    "steps",
    "loss",
    "grad_norm",
    "val_step",
    "val_loss",
    "diverged",
    "diverged_at",
    "final_val_loss",
    "final_train_loss",
    "unigram_ce",
    "kl_unigram",
    "monitor",
)
RESTORE = "restore it from git (git checkout -- andrea/results) or run `make experiments`"
LARGEST_FINAL_LOSS = 1e6  # nats: a finished run's loss is a few nats; beyond this it is no measurement


class StoreError(ValueError):
    """A results file that cannot be used: missing, malformed, incomplete or made by other code."""


def digest(blob: dict) -> str:
    """The digest of a results file (a JSON object): everything in it but ``digest`` and ``key``."""
    return json_digest(blob)


def stamp(cell_key: str, run: dict) -> str:
    """An emulated copy's own stamp: its cell (``Cell.key``) and its values, without the stamp."""
    body = {k: v for k, v in run.items() if k != "copy"}
    return hashlib.sha256(json.dumps({"cell": cell_key, "copy": body}, sort_keys=True).encode()).hexdigest()[:16]


def seal(blob: dict, cell_keys: list) -> dict:
    """Stamp every emulated copy of ``blob`` and write its digest, as ``store.run`` writes a file."""
    for key, c in zip(cell_keys, blob["cells"]):
        if "emulated" in c:
            c["emulated"] = {**{k: v for k, v in c["emulated"].items() if k != "copy"}}
            c["emulated"]["copy"] = stamp(key, c["emulated"])
    blob["digest"] = digest(blob)
    return blob


def _number(x, low: float = -math.inf, high: float = math.inf) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and low <= x <= high


def _int(x, low: int = 0) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def _series(xs, ok) -> Optional[str]:
    if not isinstance(xs, list):
        return f"a list, got {type(xs).__name__}"
    bad = [(j, x) for j, x in enumerate(xs) if not ok(x)]
    return None if not bad else f"entry {bad[0][0]} is {bad[0][1]!r}"


def short_run(run: dict, steps) -> Optional[str]:
    """Why ``run`` is not a whole run of a cell trained for ``steps`` steps, or None. A run either diverges or
    trains every step; one that did neither was stopped part-way (a signal: SIGTERM or SIGHUP at a session's
    end make training stop between two steps and return what it has), and its numbers measure a shorter run."""
    if not isinstance(steps, int) or run.get("diverged") is not False or not isinstance(run.get("steps"), list):
        return None  # a diverged run stops early by design; malformed values are run_problems' to name
    last = run["steps"][-1] if run["steps"] else 0
    if last == steps:
        return None
    return (
        f"steps: it ends at step {last} of {steps} and did not diverge (stopped part-way, by a signal?); "
        "a run must diverge or train every step"
    )


def whole(row: dict, steps: int, what: str) -> dict:
    """``row``, a finished training of ``steps`` steps; StoreError naming ``what`` (nothing is cached or stored)
    if it was stopped part-way (``short_run``)."""
    short = short_run(row, steps)
    if short:
        raise StoreError(f"{what} is not stored: {short}")
    return row


def run_problems(run: dict, steps=None) -> list[str]:
    """What in one stored run (native or emulated) is not what a run gives: 'field: what it is (allowed)'.
    With ``steps`` (its cell's training steps), a run stopped part-way is named too (``short_run``)."""
    out = []
    loss_or_none = lambda x: x is None or _number(x, 0.0)  # noqa: E731  (a diverged step is null)
    for name, ok, allowed in (
        ("steps", lambda x: _int(x), "whole numbers >= 0"),
        ("val_step", lambda x: _int(x), "whole numbers >= 0"),
        ("loss", loss_or_none, "losses >= 0 or null"),
        ("val_loss", loss_or_none, "losses >= 0 or null"),
        ("grad_norm", loss_or_none, "norms >= 0 or null"),
    ):
        why = _series(run[name], ok)
        if why:
            out.append(f"{name}: {why} (a list of {allowed})")
    if not out and (len(run["loss"]) != len(run["steps"]) or len(run["val_loss"]) != len(run["val_step"])):
        out.append("steps/loss/val_step/val_loss: their lengths differ (one loss per step, per validation)")
    if not isinstance(run["diverged"], bool):
        out.append(f"diverged: {run['diverged']!r} (true or false)")
    if not (run["diverged_at"] is None or _int(run["diverged_at"])):
        out.append(f"diverged_at: {run['diverged_at']!r} (a step, or null)")
    for name in ("final_val_loss", "final_train_loss"):
        v = run[name]
        if not (v is None or _number(v, 0.0, LARGEST_FINAL_LOSS)):
            out.append(f"{name}: {v!r} (a finite loss from 0 to {LARGEST_FINAL_LOSS:g} nats, or null: diverged)")
        elif name == "final_val_loss" and isinstance(run["diverged"], bool) and (v is None) != run["diverged"]:
            out.append(f"{name}: {v!r} with diverged {run['diverged']} (null exactly when the run diverged)")
    if not _number(run["unigram_ce"], 0.0):
        out.append(f"unigram_ce: {run['unigram_ce']!r} (a finite loss >= 0)")
    if not (run["kl_unigram"] is None or _number(run["kl_unigram"])):
        out.append(f"kl_unigram: {run['kl_unigram']!r} (a finite number, or null)")
    mon = run["monitor"]
    if not isinstance(mon, list) or not all(isinstance(m, dict) for m in mon):
        out.append("monitor: not a list of readings")
    else:
        flat = [x for m in mon for v in m.values() for x in (v if isinstance(v, list) else [v])]
        if not all(x is None or _number(x) for x in flat):
            out.append("monitor: a reading that is not a finite number or null")
    if "seconds" in run and not _number(run["seconds"], 0.0):
        out.append(f"seconds: {run['seconds']!r} (a finite number >= 0)")
    for name in ("cpu", "emulation", "copy"):
        if name in run and not isinstance(run[name], str):
            out.append(f"{name}: {run[name]!r} (a string)")
    if "rule" in run and not (run["rule"] is None or isinstance(run["rule"], str)):
        out.append(f"rule: {run['rule']!r} (a string, or null)")
    short = short_run(run, steps) if not out else None
    if short:
        out.append(short)
    return out


def values_problem(where: str, blob: dict) -> Optional[str]:
    """The first run of ``blob`` whose values are malformed, named with ``where`` (the file), or None."""
    for i, c in enumerate(blob["cells"]):
        for part in ("result", "emulated"):
            if part not in c:
                continue
            bad = run_problems(c[part], (c.get("train") or {}).get("steps"))
            if bad:
                what = "" if part == "result" else "'s emulated copy"
                return f"{where}: run {i} ({c.get('label')}){what}: {'; '.join(bad[:3])}: {RESTORE}"
    return None


def header_problem(where: str, blob: dict, checks: list) -> Optional[str]:
    """What in the header is not what the grid (``checks``: the runs make test re-runs) and the runs give."""
    bad = []
    for name in ("title", "prediction", "torch", "python", "rule"):
        if not isinstance(blob.get(name), str):
            bad.append(f"{name}: {blob.get(name)!r} (a string)")
    if not (isinstance(blob.get("created"), str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", blob["created"])):
        bad.append(f"created: {blob.get('created')!r} (a date, YYYY-MM-DD)")
    machine = blob.get("machine")
    if not (machine is None or (isinstance(machine, str) and re.fullmatch(r"[\w .()-]{1,100}", machine))):
        bad.append(f"machine: {machine!r} (a machine and system, as platform names them)")
    if blob.get("device") != "cpu" or blob.get("threads_per_run") != 1:
        bad.append(f"device, threads_per_run: {blob.get('device')!r}, {blob.get('threads_per_run')!r} ('cpu', 1)")
    if not (blob.get("seconds") is None or _number(blob.get("seconds"), 0.0)):
        bad.append(f"seconds: {blob.get('seconds')!r} (a finite number >= 0)")
    if blob.get("checks") != checks:
        bad.append(f"checks: {blob.get('checks')!r} (the grid's first deciding runs: {checks})")
    for name, part in (("compute_seconds", "result"), ("emulated_seconds", "emulated")):
        total = round(sum(c[part].get("seconds", 0.0) for c in blob["cells"] if part in c), 1)
        if not _number(blob.get(name)) or abs(blob[name] - total) > 0.051:
            bad.append(f"{name}: {blob.get(name)!r} (the sum of its runs' seconds: {total})")
    return f"{where}: its header is malformed ({'; '.join(bad[:3])}): {RESTORE}" if bad else None


def duplicate_problem(where: str, blob: dict) -> Optional[str]:
    """Two runs of one file with the same training losses, step for step (at least 10 of them finite): no
    two seeds or settings train alike, so one was copied over the other."""
    for part in ("result", "emulated"):
        seen: dict[str, int] = {}
        for i, c in enumerate(blob["cells"]):
            run = c.get(part)
            if run is None or sum(x is not None for x in run["loss"]) < 10:
                continue
            key = json.dumps(run["loss"])
            if key in seen:
                j = seen[key]
                what = "runs" if part == "result" else "emulated copies of runs"
                return (
                    f"{where}: {what} {j} and {i} ({blob['cells'][j]['label']}, {c['label']}) are identical, step "
                    f"for step ({len(run['loss'])} losses): two seeds or settings never train alike, so one was "
                    f"copied over the other; {RESTORE}"
                )
            seen[key] = i
    return None


def copy_problem(where: str, blob: dict, cell_keys: list) -> Optional[str]:
    """A native run that carries an emulated copy's stamp, or a copy whose stamp is not its own."""
    for i, (key, c) in enumerate(zip(cell_keys, blob["cells"])):
        native = c["result"]
        if "copy" in native or "emulation" in native:
            return (
                f"{where}: run {i} ({c['label']}): its native result carries an emulated copy's stamp "
                f"({'copy' if 'copy' in native else 'emulation'}): swapped with its copy? {RESTORE}"
            )
        if "emulated" in c and c["emulated"].get("copy") != stamp(key, c["emulated"]):
            return (
                f"{where}: run {i} ({c['label']})'s emulated copy does not carry its own stamp (swapped with its "
                f"native run or another run's copy, or edited): {RESTORE}"
            )
    return None
