"""What the book prints from a file is the file's own, whole: the trained model's publish touches only what
it made, and the stored results (the grids' files, trained.json, probes.json) refuse an edit by name.

The digests catch accidents and edits that do not recompute them; an edit that recomputes them is caught
by the re-runs (``make test``: the first steps of every deciding run, a sample in full). What is checked
here without a re-run: a run's values have the types and ranges a run gives, no two seeds carry the same
run, a native run and its emulated copy each carry their own stamp, and the header is under the digest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from andrea.evidence import grids, store
from andrea.files import json_digest
from andrea.trained import model as trained

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# The trained model's publish: only what it made
# ---------------------------------------------------------------------------------------------
def _sandbox(tmp_path, monkeypatch) -> Path:
    """A copy of the shipped trained model under ``tmp_path/trained``, which the module then reads."""
    results = tmp_path / "trained"
    shutil.copytree(trained.RESULTS, results)
    for name in ("WEIGHTS", "LOG", "EVAL", "PROBES", "TOKENIZER"):
        monkeypatch.setattr(trained, name, results / getattr(trained, name).name)
    monkeypatch.setattr(trained, "RESULTS", results)
    return results


def _interrupted_publish(monkeypatch, point: str) -> None:
    """A publish of the same model, stopped at ``point`` (as a SIGKILL there would stop it)."""

    class Killed(BaseException):
        pass

    stage = trained._stage()
    for f in trained.RESULTS.iterdir():
        if f.is_file():
            shutil.copy2(f, stage / f.name)

    def kill(where):
        if where == point:
            raise Killed(where)

    with monkeypatch.context() as m:
        m.setattr(trained, "_kill_point", kill)
        with pytest.raises(Killed):
            trained.publish(stage)


def test_a_readers_folders_beside_the_model_are_left_alone(tmp_path, monkeypatch, capsys):
    """A reader's backup named trained.old, a copy named trained.new, a symlink or a plain file under
    those names: a read leaves each as it is and says so, naming the path; a publish refuses to start
    rather than remove them."""
    results = _sandbox(tmp_path, monkeypatch)
    old, new = tmp_path / "trained.old", tmp_path / "trained.new"
    shutil.copytree(results, old)
    (old / "NOTES.txt").write_text("my notes")
    shutil.copytree(results, new)
    assert trained.load() is not None and trained.status() == "current"
    assert (old / "NOTES.txt").read_text() == "my notes" and (new / "trained.json").is_file()
    err = capsys.readouterr().err
    assert str(old) in err and str(new) in err and "left" in err
    with pytest.raises(ValueError, match="trained.new"):
        trained._stage()
    assert (new / "trained.json").is_file()
    # with no shipped folder, a folder a person put there is not taken for the model either
    shutil.move(str(results), str(tmp_path / "elsewhere"))
    assert trained.status() == "missing" and (old / "NOTES.txt").is_file() and not results.exists()
    shutil.move(str(tmp_path / "elsewhere"), str(results))
    shutil.rmtree(new)
    shutil.rmtree(old)
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("x")
    new.symlink_to(target)
    old.write_text("a plain file")
    assert trained.load() is not None and trained.status() == "current"
    assert (target / "keep.txt").is_file() and new.is_symlink() and old.read_text() == "a plain file"


def test_an_interrupted_publish_is_still_finished_or_undone(tmp_path, monkeypatch):
    """What a publish made (its stage, the previous model moved aside) is still cleaned up."""
    _sandbox(tmp_path, monkeypatch)
    for point in ("staged", "old moved aside", "new in place"):
        _interrupted_publish(monkeypatch, point)
        assert trained.load() is not None and trained.status() == "current", point
        assert sorted(p.name for p in tmp_path.iterdir()) == ["trained"], point


_CHILD = """
import sys, time
from pathlib import Path
from andrea.trained import model as M
results = Path(sys.argv[1])
for name in ("WEIGHTS", "LOG", "EVAL", "PROBES", "TOKENIZER"):
    setattr(M, name, results / getattr(M, name).name)
M.RESULTS = results
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
M.recover()
print("ok")
"""


def test_two_processes_cleaning_up_at_once_do_not_crash(tmp_path, monkeypatch):
    """Pages are executed in parallel: several processes find the same leftover of an interrupted publish
    (a large one: the previous model, with extra files) and clean it up at once. None may fail."""
    results = _sandbox(tmp_path, monkeypatch)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for trial in range(3):
        _interrupted_publish(monkeypatch, "new in place")  # the previous model is left as trained.old
        old = tmp_path / "trained.old"
        assert old.is_dir()
        for k in range(200):
            (old / f"extra-{k}.bin").write_bytes(b"\0" * 20000)
        go = tmp_path / f"go-{trial}"
        kids = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(results), str(go)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        time.sleep(3.0)  # every child imported and waiting
        go.write_text("")
        for kid in kids:
            out, err = kid.communicate(timeout=120)
            assert kid.returncode == 0 and out.strip() == "ok", err[-1500:]
        assert not old.exists() and trained.status() == "current"


_SLOW_PUBLISHER = """
import shutil, sys, time
from pathlib import Path
from andrea.trained import model as M
results = Path(sys.argv[1])
for name in ("WEIGHTS", "LOG", "EVAL", "PROBES", "TOKENIZER"):
    setattr(M, name, results / getattr(M, name).name)
M.RESULTS = results
stage = M._stage()
for f in results.iterdir():
    if f.is_file():
        shutil.copy2(f, stage / f.name)
(stage / "published-by-the-child").write_text("")
def slow(where):
    if where == "old moved aside":
        Path(sys.argv[2]).write_text("")
        time.sleep(4.0)
M._kill_point = slow
M.publish(stage)
print("published")
"""


def test_a_read_during_a_publish_never_crashes_the_publisher(tmp_path, monkeypatch):
    """A publisher stopped between its two renames (slowed down here: a microsecond window otherwise) and a
    reader that reads then: both succeed, and the new model is in place."""
    results = _sandbox(tmp_path, monkeypatch)
    mid = tmp_path / "mid-publish"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    kid = subprocess.Popen(
        [sys.executable, "-c", _SLOW_PUBLISHER, str(results), str(mid)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not mid.exists() and kid.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mid.exists(), kid.communicate()[1][-1500:]
    assert trained.load() is not None  # the reader, while the publisher is between its renames
    out, err = kid.communicate(timeout=120)
    assert kid.returncode == 0 and "published" in out, err[-1500:]
    assert (results / "published-by-the-child").is_file() and trained.status() == "current"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("trained")) == ["trained"]


# ---------------------------------------------------------------------------------------------
# trained.json and probes.json: every number covered
# ---------------------------------------------------------------------------------------------
def _edit_log(edit) -> None:
    blob = json.loads(trained.LOG.read_text())
    edit(blob)
    trained.LOG.write_text(json.dumps(blob, indent=1) + "\n")


@pytest.mark.parametrize(
    "what",
    ["final validation loss", "bigram baseline", "tokens per second", "corpus tokens"],
)
def test_an_edited_number_of_the_training_log_is_refused_by_name(tmp_path, monkeypatch, what):
    """Chapter 8 prints the log's numbers (the final validation loss, the baselines, the speed): an edit of
    any of them makes the log "altered", and every read names the file."""
    _sandbox(tmp_path, monkeypatch)
    edits = {
        "final validation loss": lambda b: b["history"]["val_loss"].__setitem__(-1, 2.0),
        "bigram baseline": lambda b: b["baselines"].__setitem__("bigram_ce", 9.9),
        "tokens per second": lambda b: b.__setitem__("tokens_per_s", b["tokens_per_s"] * 2),
        "corpus tokens": lambda b: b["corpus"]["tokens"].__setitem__("val", 1),
    }
    _edit_log(edits[what])
    assert trained.status() == "altered"
    for read in (trained.log, trained.load, trained.eval_set, trained.tokenizer):
        with pytest.raises(ValueError, match="trained.json"):
            read()


def test_an_edited_probe_result_is_refused_by_name(tmp_path, monkeypatch):
    _sandbox(tmp_path, monkeypatch)
    blob = json.loads(trained.PROBES.read_text())
    task = sorted(blob["found"])[0]
    blob["found"][task]["trained"]["task"][2][3] += 0.0003
    trained.PROBES.write_text(json.dumps(blob) + "\n")
    assert trained.probes_status() == "altered"
    with pytest.raises(ValueError, match="probes.json"):
        trained.probe_results()


def test_the_shipped_log_and_probes_carry_their_digest():
    for path in (trained.LOG, trained.PROBES):
        blob = json.loads(path.read_text())
        assert blob.get("digest") == json_digest(blob), path


@pytest.mark.parametrize(
    "field, value, named",
    [
        ("d_model", 192.0, "model_config.d_model: 192.0"),
        ("bias", 1, "model_config.bias: 1"),
        ("weights_sha256", 5, "weights_sha256"),
        ("eval_sha256", None, "eval_sha256"),
    ],
)
def test_a_log_field_of_the_wrong_type_is_named(tmp_path, monkeypatch, field, value, named):
    """Equal under ``==`` (192.0 and 192, 1 and True) is not the same config; a hash that is not one is
    named, not a bare TypeError; --list survives and says which file."""
    from andrea import experiments

    _sandbox(tmp_path, monkeypatch)

    def edit(b):
        if field in b["model_config"]:
            b["model_config"][field] = value
        else:
            b[field] = value
        b["digest"] = json_digest(b)  # recomputed: the type check stands on its own

    _edit_log(edit)
    assert trained.status() == "altered"
    with pytest.raises(ValueError, match=f"trained.json.*{named}"):
        trained.load()
    assert experiments.main(["--list", "ch3_panel"]) == 0


def test_the_list_survives_a_missing_or_damaged_trained_model_and_names_the_file(tmp_path, monkeypatch, capsys):
    from andrea import experiments

    _sandbox(tmp_path, monkeypatch)
    real = trained.WEIGHTS.read_bytes()
    weights = bytearray(real)
    weights[len(weights) // 2] ^= 1
    trained.WEIGHTS.write_bytes(bytes(weights))
    assert experiments.main(["--list", "ch3_panel"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("trained ")][0]
    assert "altered" in line and "model.safetensors" in line
    trained.WEIGHTS.write_bytes(real)
    for name in ("eval.npz", "trained.json"):
        (trained.RESULTS / name).unlink()
        assert experiments.main(["--list", "ch3_panel"]) == 0
        out = capsys.readouterr().out
        assert "missing" in out and name in out, out
    assert trained.status() == "missing" and trained.probes_status() == "missing"
    with pytest.raises(trained.NotShipped, match="trained.json"):
        trained.load()


# ---------------------------------------------------------------------------------------------
# The grids' results files: the whole file under the digest, each run's values checked
# ---------------------------------------------------------------------------------------------
GRID = "ch7_layerscale"


@pytest.fixture
def real(tmp_path, monkeypatch):
    blob = json.loads(store.path(GRID).read_text())
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    return blob


def _store(blob: dict, recompute: bool = True) -> None:
    """Write ``blob`` as the grid's file; with ``recompute``, its digest recomputed by the store's own
    function (what an edit made by someone who read the code does)."""
    if recompute:
        blob["digest"] = store.digest(blob)
    store.path(GRID).write_text(json.dumps(blob, indent=1) + "\n")


@pytest.mark.parametrize(
    "field, value",
    [
        ("prediction", "EDITED"),
        ("torch", "1.0.0"),
        ("created", "1999-01-01"),
        ("machine", "<script>alert(1)</script>"),
        ("checks", [0]),
        ("compute_seconds", 1.0),
    ],
)
def test_an_edit_of_the_header_is_refused(real, field, value):
    """The header (the prediction the chapters print as stated before the runs, the torch, the date, the
    machine, the runs make test re-runs) is under the digest."""
    real[field] = value
    _store(real, recompute=False)
    with pytest.raises(store.StoreError, match=f"{GRID}.json.*digest"):
        store.load(grids.grid(GRID))


@pytest.mark.parametrize("value", ["3.1", float("nan"), [1], -1e308, 1e308, True])
def test_a_runs_value_of_the_wrong_type_or_range_names_the_file_the_run_and_the_field(real, value):
    g = grids.grid(GRID)
    i = g.decision_cells()[0]
    real["cells"][i]["result"]["final_val_loss"] = value
    _store(real)
    with pytest.raises(store.StoreError, match=rf"{GRID}.json.*run {i} .*final_val_loss"):
        store.load(g)


def test_a_seed_copied_over_the_others_is_refused(real):
    """One seed's run copied over the other seeds of its arm (the interval then narrows to nothing)."""
    g = grids.grid(GRID)
    d = next(d for d in g.decisions if d.role == "decides")
    arm = [i for i, c in enumerate(g.cells) if all(c.label.get(k) == v for k, v in d.arm.items())]
    for i in arm[1:]:
        real["cells"][i]["result"] = json.loads(json.dumps(real["cells"][arm[0]]["result"]))
    _store(real)
    with pytest.raises(store.StoreError, match=rf"{GRID}.json.*runs {arm[0]} and {arm[1]}.*identical"):
        store.load(g)


@pytest.mark.parametrize("stamp", ["left", "moved"])
def test_a_native_run_swapped_with_its_emulated_copy_is_refused(real, stamp):
    """Each copy carries its own stamp; swapped with its native run (the emulation stamp left where it
    was, or moved along), the file is refused."""
    g = grids.grid(GRID)
    for i in g.decision_cells():
        c = real["cells"][i]
        c["result"], c["emulated"] = c["emulated"], c["result"]
        if stamp == "moved":
            for key in ("emulation", "copy"):
                if key in c["result"]:
                    c["emulated"][key] = c["result"].pop(key)
    _store(real)
    with pytest.raises(store.StoreError, match=rf"{GRID}.json.*run \d+ .*(emulated|copy)"):
        store.load(g)


def _stopped(run: dict, at: int) -> dict:
    """``run`` as a signal would have left it: its first ``at`` steps, not diverged (what training returns
    when SIGTERM or SIGHUP stops it between two steps)."""
    out = json.loads(json.dumps(run))
    for name in ("steps", "loss", "grad_norm"):
        out[name] = out[name][:at]
    keep = [j for j, s in enumerate(out["val_step"]) if s <= at] or [0]
    out["val_step"] = [out["val_step"][j] for j in keep]
    out["val_loss"] = [out["val_loss"][j] for j in keep]
    out["final_val_loss"] = out["val_loss"][-1]
    return out


@pytest.mark.parametrize("part", ["result", "emulated"])
def test_a_run_stopped_part_way_is_refused_by_name(real, part):
    """A run (or its emulated copy) that neither diverged nor trained every step was stopped by a signal:
    its loss measures a shorter run, so the file is refused, naming the run and the step it ended at."""
    g = grids.grid(GRID)
    i = next(i for i in g.decision_cells() if not real["cells"][i][part]["diverged"])
    steps = g.cells[i].steps()
    real["cells"][i][part] = _stopped(real["cells"][i][part], 212)
    if part == "emulated":
        store.seal.seal(real, [c.key() for c in g.cells])  # its stamp made anew: only the length is wrong
    _store(real)
    with pytest.raises(store.StoreError, match=rf"{GRID}.json.*run {i} .*ends at step 212 of {steps}"):
        store.load(g)


def test_a_run_stopped_part_way_is_neither_cached_nor_stored_and_a_cached_one_is_trained_again(
    real, tmp_path, monkeypatch
):
    """Training returns what it has when a signal stops it; the grid's worker must not keep that as the run
    (natively and as the emulated copy), and a stopped run cached by older code is trained again."""
    from andrea.evidence import emulate

    monkeypatch.setenv("ANDREA_CACHE", str(tmp_path / "cache"))
    g = grids.grid(GRID)
    i = next(i for i in g.decision_cells() if not real["cells"][i]["result"]["diverged"])
    cell, whole = g.cells[i], real["cells"][i]["result"]
    short = _stopped(whole, 212)
    monkeypatch.setattr(store, "run_cell", lambda c, threads=1: json.loads(json.dumps(short)))
    with pytest.raises(store.StoreError, match=r"ends at step 212"):
        store._run_cached(cell)
    assert store._cached_run(cell) is None  # nothing was cached
    store.write_cached(store._cell_cache(cell), json.dumps(short).encode(), store.code_hash())
    assert store._cached_run(cell) is None  # a stopped run in the cache is no run
    monkeypatch.setattr(store, "run_cell", lambda c, threads=1: json.loads(json.dumps(whole)))
    assert store._run_cached(cell)["steps"][-1] == cell.steps()  # so it is trained again, whole
    monkeypatch.setattr(emulate, "finish", lambda proc, c: json.loads(json.dumps(short)))
    monkeypatch.setattr(emulate, "start", lambda c: None)
    with pytest.raises(store.StoreError, match=r"emulated copy .* ends at step 212"):
        emulate.run_one(cell, store.code_hash())
    assert emulate.cached(cell, store.code_hash()) is None


def test_every_stored_file_passes_every_check_and_the_list_is_current():
    """The committed files, as they are: whole, their values typed, every copy stamped."""
    for name in sorted(grids.GRIDS):
        store.load(grids.grid(name), same_torch=True)
    assert trained.status() == "current" and trained.probes_status() == "current"


def test_an_empty_loss_history_does_not_resume(tmp_path, capsys):
    """A checkpoint whose history lost its losses (while its step says 4) would resume with its step and
    loss lists out of line for good: refused, naming the file."""
    import torch

    from andrea.training.cli import main as train_main

    out = tmp_path / "run"
    args = ["--preset", "tiny-bytes", "--samples", "0", "--eval-every", "2", "--batch-size", "2", "--out", str(out)]
    assert train_main(args + ["--steps", "4"]) == 0
    ck = out / "last.pt"
    blob = torch.load(ck, weights_only=False)
    blob["extra"]["history"]["loss"] = []
    torch.save(blob, ck)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        train_main(args + ["--steps", "6", "--resume"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "last.pt" in err and "history out of line" in err, err


def test_a_stopped_or_failed_retrain_inside_make_experiments_is_one_message(monkeypatch, capsys):
    """``make experiments`` runs the retrain: a signal (its checkpoint saved) or a full disk is said in one
    line, with the exit status, not as a traceback."""
    from andrea import experiments

    monkeypatch.setattr(trained, "status_detail", lambda: ("stale", "made by other code"))
    stopped = "retrain: stopped by SIGTERM at step 6 of 2400; running it again resumes it from there"

    def stop():
        raise trained.Interrupted(stopped)

    monkeypatch.setattr(trained, "retrain", stop)
    assert experiments.main(["trained"]) == 130
    assert capsys.readouterr().err.strip() == f"trained: {stopped}"

    def full():
        raise OSError("could not write the checkpoint (0.0 MiB free on its disk)")

    monkeypatch.setattr(trained, "retrain", full)
    assert experiments.main(["trained"]) == 1
    assert "not retrained: could not write the checkpoint" in capsys.readouterr().err
