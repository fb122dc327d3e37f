"""The results store: every stored grid is current (made by today's code) and reproduces.

`make test` re-runs, from scratch, the first 20 training steps of the seed run of every arm that
decides a verdict (each grid's ``decisions``), natively and under torch's portable kernels (another
CPU, emulated): they must match the stored losses within ``andrea.evidence.store.TOLERANCE``. It then re-runs a
sample of those runs in full, natively and emulated (``rerun.full_sample``: drawn from the commit's
hash, about 35 s of stored training per commit, so that over commits every deciding run up to 35 s
is re-run): each re-run must match its stored twin (the stored run, and its stored emulated copy) within
the tolerance of its kind of CPU (``rerun.final_tolerance``: what the stored native/emulated pairs of its
arm show). ``python -m andrea.experiments --reproduce`` re-runs
every deciding run in full (the longer ones only there). The test also fails when a grid's stored
key (the hash of the code that trains a cell, and of the grid's specification) no longer matches
the code: then `make experiments` must be run and the results committed. A changed rule (the
comparisons, the verdict code, the emulation) re-runs nothing, and marks the verdicts it gives.
"""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from andrea.evidence import evaluation, grids, rerun, store

GRIDS = sorted(grids.GRIDS)


def _write(name, blob):
    """Store ``blob`` as grid ``name``'s results file, as ``store.run`` writes one (each emulated copy stamped,
    the whole file under its digest): a file made with other numbers, not a hand edit."""
    import copy
    import json

    from andrea.evidence import seal

    sealed = copy.deepcopy(blob)
    for field, part in (("compute_seconds", "result"), ("emulated_seconds", "emulated")):  # as store.run sums them
        sealed[field] = round(sum(c[part].get("seconds", 0.0) for c in sealed["cells"] if part in c), 1)
    seal.seal(sealed, [c.key() for c in grids.grid(name).cells])
    store.path(name).write_text(json.dumps(sealed))


@pytest.mark.parametrize("name", GRIDS)
def test_stored_results_are_current_and_complete(name):
    blob = store.load(grids.grid(name), same_torch=True)  # StoreError (naming the file) if stale or malformed
    assert blob["torch"] and blob["device"] == "cpu" and blob["seconds"] > 0
    rows = evaluation.results(name)
    assert len(rows) == len(grids.grid(name).cells)
    assert all(len(r["loss"]) == len(r["steps"]) for r in rows)


def _first_steps(name):
    return name, rerun.reproduce_first_steps(grids.grid(name))


def _full(job):
    name, i = job
    return job, rerun.reproduce(grids.grid(name), only=[i])


def _pool():
    return ProcessPoolExecutor(max_workers=store.workers(), mp_context=multiprocessing.get_context("spawn"))


@pytest.fixture(scope="module")
def first_steps():
    with _pool() as pool:
        return dict(pool.map(_first_steps, GRIDS))


SAMPLE = rerun.full_sample(rerun.deciding_seconds([grids.grid(n) for n in GRIDS]), rerun.sample_seed())


@pytest.fixture(scope="module")
def full_runs():
    with _pool() as pool:
        return dict(pool.map(_full, SAMPLE))


@pytest.mark.store
@pytest.mark.parametrize("name", GRIDS)
def test_the_first_steps_of_every_deciding_run_reproduce_natively_and_on_portable_kernels(first_steps, name):
    r = first_steps[name]
    print(
        f"{name}: first {store.EARLY_STEPS} steps re-run\n"
        + "\n".join(f"  {c['label']}: native {c.get('native')}, portable {c.get('emulated')}" for c in r["cells"])
    )
    assert r["cells"], f"{name} declares no deciding arm"
    assert r["ok"], f"{name}: {r['problems']}"


@pytest.mark.store
@pytest.mark.parametrize("job", SAMPLE, ids=[f"{n}-cell{i}" for n, i in SAMPLE])
def test_a_sample_of_deciding_runs_reproduces_in_full_natively_and_on_portable_kernels(full_runs, job):
    r = full_runs[job]
    [c] = r["cells"]
    m, e = c["margin"], c.get("emulated", {})
    if m["kind"] == "interval":
        room = (
            f"verdict {m['label']}, {m['distance']:.4f} from flipping"
            if m["distance"] is not None
            else f"verdict {m['label']} (a deciding run diverged)"
        )
    else:
        room = f"an event count ({m['events']} of {m['runs']} runs)"
    print(
        f"{job[0]} (sample of commit {rerun.sample_seed()[:12]}): {c['label']}: native vs stored "
        f"{c['native']['final_val_loss']} ({'bit-identical' if c['native']['identical'] else 'not identical'}; "
        f"{'the same' if c['native']['same_cpu'] else 'another'} kind of CPU, tolerance {c['native']['tolerance']}), "
        f"emulated vs its stored {e.get('twin')} twin {e.get('final_val_loss')} (tolerance {e.get('tolerance')}); "
        f"the arm's stored pairs differ by up to {c['spread']}; {room}"
    )
    assert r["ok"], f"{job[0]}: {r['problems']}"


def test_the_full_sample_is_drawn_from_the_commit_and_covers_every_short_run_over_commits():
    seconds = rerun.deciding_seconds([grids.grid(n) for n in GRIDS])
    a, b = rerun.full_sample(seconds, "commit-a"), rerun.full_sample(seconds, "commit-b")
    assert a == rerun.full_sample(seconds, "commit-a") and a != b
    for sample in (a, b):
        assert sum(seconds[j] for j in sample) <= rerun.FULL_SAMPLE_BUDGET_S or len(sample) == 1
        assert all(seconds[j] <= rerun.FULL_SAMPLE_LONGEST_S for j in sample)
    covered = set()
    for k in range(200):
        covered |= set(rerun.full_sample(seconds, f"commit-{k}"))
    short = {j for j, s in seconds.items() if s <= rerun.FULL_SAMPLE_LONGEST_S}
    assert covered == short and len(short) >= len(seconds) // 2  # the rest: `--reproduce` (README)


def test_changed_first_steps_are_caught(tmp_path, monkeypatch):
    """The first-steps check can fail: with a stored early loss nudged beyond the tolerance, or a
    re-run that diverges where the stored one did not, it does."""
    import copy
    import json

    name = "ch2_norm_lr"
    g = grids.grid(name)
    real = json.loads(store.path(name).read_text())
    [(_, i), *_] = rerun.deciding_cells(g)
    original = copy.deepcopy(real)

    def fresh(cell, steps=store.EARLY_STEPS):  # what a re-run gives (it is deterministic): the stored start
        return {"loss": original["cells"][g.cells.index(cell)]["result"]["loss"][:steps], "diverged": False}

    monkeypatch.setattr(rerun, "run_prefix", fresh)
    monkeypatch.setattr(
        rerun, "run_prefixes_emulated", lambda cells, steps=store.EARLY_STEPS: [fresh(c) for c in cells]
    )
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    _write(name, real)
    assert rerun.reproduce_first_steps(g)["ok"]
    real["cells"][i]["result"]["loss"][5] += 10 * store.TOLERANCE["early_loss"]
    _write(name, real)
    r = rerun.reproduce_first_steps(g)
    assert not r["ok"] and "first 20 losses differ" in r["problems"][0] and "(native)" in r["problems"][0]
    real["cells"][i]["result"]["loss"][5] -= 10 * store.TOLERANCE["early_loss"]
    _write(name, real)
    monkeypatch.setattr(
        rerun,
        "run_prefixes_emulated",
        lambda cells, steps=store.EARLY_STEPS: [{**fresh(c), "diverged": True} for c in cells],
    )
    r = rerun.reproduce_first_steps(g)
    assert not r["ok"] and "(emulated)" in r["problems"][0] and "diverged: True" in r["problems"][0]


def test_a_changed_result_is_caught(tmp_path, monkeypatch):
    """The reproduction check can fail: with a stored loss nudged beyond the tolerance, it does."""
    import copy
    import json

    name = "ch5_activation"
    g = grids.grid(name)
    real = json.loads(store.path(name).read_text())
    i = g.index(g.decisions[0].rerun_label())
    fresh = copy.deepcopy(real["cells"][i]["result"])  # what a re-run would give (it is deterministic)
    real["cells"][i]["result"]["loss"][3] += 10 * store.TOLERANCE["early_loss"]
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    _write(name, real)
    monkeypatch.setattr(rerun, "run_cell", lambda cell, threads=1: copy.deepcopy(fresh))
    r = rerun.reproduce(g, emulate=False)
    assert not r["ok"] and "first 20 losses differ" in r["problems"][0]
    # ... and an emulated re-run that ends further from its stored emulated twin than the tolerance
    real["cells"][i]["result"]["loss"][3] -= 10 * store.TOLERANCE["early_loss"]
    real["cells"][i]["emulated"] = {**copy.deepcopy(fresh), "cpu": "some processor, DEFAULT"}
    moved = {**copy.deepcopy(fresh), "cpu": "some processor, DEFAULT"}
    moved["final_val_loss"] += 2 * store.TOLERANCE["final_val_loss"]
    monkeypatch.setattr(rerun, "start_emulated", lambda cell: "started")
    monkeypatch.setattr(rerun, "finish_emulated", lambda proc, cell: moved if proc == "started" else None)
    _write(name, real)
    r = rerun.reproduce(g, only=[i])
    assert not r["ok"] and "(emulated)" in r["problems"][0] and "the same kind of CPU" in r["problems"][0]
    assert r["cells"][0]["emulated"]["twin"] == "emulated"


def test_a_final_loss_is_held_to_the_stored_runs_kind_of_cpu(tmp_path, monkeypatch):
    """On the kind of CPU that trained the stored run, a re-run's final loss must match it closely; on
    another kind (or one not recorded), it may move as far as a change of CPU moved the stored pairs of
    its arm (native against emulated), and no arm's pairs yet: the same event."""
    import copy
    import json

    tol = store.TOLERANCE["final_val_loss"]
    assert rerun.final_tolerance(0.3, same_cpu=True) == tol
    assert rerun.final_tolerance(0.3, same_cpu=False) == 0.3
    assert rerun.final_tolerance(0.001, same_cpu=False) == tol  # never below the same-CPU tolerance
    assert rerun.final_tolerance(None, same_cpu=False) is None
    assert rerun.final_tolerance(0.3, same_cpu=False, kind="count") is None  # a counted event must be the same
    name = "ch5_activation"
    g = grids.grid(name)
    real = json.loads(store.path(name).read_text())
    i = g.index(g.decisions[0].rerun_label())
    fresh = copy.deepcopy(real["cells"][i]["result"])
    fresh["final_val_loss"] += 2 * tol
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    monkeypatch.setattr(rerun, "run_cell", lambda cell, threads=1: copy.deepcopy(fresh))
    real["cells"][i]["result"]["cpu"] = store.cpu_identity()  # stored on this very kind of CPU
    _write(name, real)
    r = rerun.reproduce(g, emulate=False, only=[i])
    assert not r["ok"] and "the same kind of CPU" in r["problems"][0], r["problems"]
    real["cells"][i]["result"]["cpu"] = "another processor, AVX2"
    for spread in (tol, 3 * tol):  # the arm's stored pair: emulated ends `spread` from native
        real["cells"][i]["emulated"] = {**real["cells"][i]["result"]}
        real["cells"][i]["emulated"]["final_val_loss"] = real["cells"][i]["result"]["final_val_loss"] + spread
        _write(name, real)
        r = rerun.reproduce(g, emulate=False, only=[i])
        c = r["cells"][0]
        assert c["native"]["same_cpu"] is False and abs(c["spread"] - spread) < 1e-9
        assert r["ok"] == (spread >= 2 * tol), (spread, r["problems"])


def test_on_another_cpu_a_counted_event_must_be_the_same_whatever_the_final_loss(tmp_path, monkeypatch):
    import copy
    import json

    g = grids.grid("ch2_norm_lr")
    dec, i = rerun.deciding_cells(g)[0]
    assert dec.test == "fisher" and dec.field == "diverged"
    real = json.loads(store.path(g.name).read_text())
    stored = real["cells"][i]["result"]
    fresh = copy.deepcopy(stored)
    fresh["final_val_loss"] += 1.0  # far off, and the same event: another CPU may
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    monkeypatch.setattr(rerun, "run_cell", lambda cell, threads=1: copy.deepcopy(fresh))
    stored["cpu"] = "another processor, AVX2"
    _write(g.name, real)
    r = rerun.reproduce(g, emulate=False, only=[i])
    assert r["ok"] and r["cells"][0]["native"]["tolerance"] is None, r["problems"]
    fresh.update(diverged=not stored["diverged"])  # another event: the verdict's count would change
    r = rerun.reproduce(g, emulate=False, only=[i])
    assert not r["ok"] and any("the verdict counts this event" in p or "diverged" in p for p in r["problems"])
    stored["cpu"] = store.cpu_identity()  # on the stored run's own kind of CPU the loss must match too
    fresh.update(diverged=stored["diverged"])
    _write(g.name, real)
    r = rerun.reproduce(g, emulate=False, only=[i])
    assert not r["ok"] and "the same kind of CPU" in r["problems"][0], r["problems"]


def _with_copies(g, real, rule, shift=0.0):
    """Give every run ``g`` decides on an emulated copy (its stored run, its final loss moved by
    ``shift`` in the arms LayerScale is on) made under ``rule``."""
    import copy

    from andrea.evidence import emulate

    for i in g.decision_cells():
        c = real["cells"][i]
        c["result"]["rule"] = rule
        c["emulated"] = {**copy.deepcopy(c["result"]), "rule": rule, "cpu": "emulated, DEFAULT"}
        c["emulated"]["emulation"] = emulate.procedure_hash()
        if c["label"].get("layerscale") not in (None, "off"):
            c["emulated"]["final_val_loss"] += shift


def test_each_comparison_is_decided_on_both_machines_and_a_disagreement_is_said(tmp_path, monkeypatch):
    """The label is the one both machines' runs give; where the emulated runs say otherwise, the
    comparison (and the claim) 'depends on the machine', and the fold shows both readings."""
    import json

    from andrea.views.notebook import evidence

    g = grids.grid("ch7_layerscale")
    real = json.loads(store.path(g.name).read_text())
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    _with_copies(g, real, g.rule_hash())
    _write(g.name, real)
    same = evaluation.evidence(g.name)
    assert same.missing_emulated == 0 and same.verdict.label == same.native.label == same.emulated.label
    assert all(f.emulated is not None and f.emulated.measured == f.measured for f in same.findings)
    _with_copies(g, real, g.rule_hash(), shift=1.0)  # LayerScale a full nat worse on the other CPU
    _write(g.name, real)
    ev = evaluation.evidence(g.name)
    post = ev.regime("post-norm, Xavier init, lr 1e-3")
    assert post.native.label == "confirmed" and post.emulated.verdict.label == "not reproduced"
    assert post.verdict.label == ev.verdict.label == "depends on the machine"
    fold = evidence(g.name)._repr_html_()
    assert "depends on the machine" in fold and post.emulated.measured in fold and post.measured in fold


def test_a_claim_both_machines_label_alike_names_the_regime_that_depends_on_the_machine():
    """ch7's round 2: the claim is confirmed on both machines' runs, but the pre-norm regime is not
    testable on this machine's (its calibration inconclusive) and confirmed on the emulated CPU's. The
    claim's reason, printed in the fold's summary and the chapter's claims table, must say so, not
    repeat this machine's 'not testable' beside a table that says 'depends on the machine'."""
    from andrea.views.notebook import evidence

    ev = evaluation.evidence("ch7_layerscale_round2")
    assert ev.native.label == ev.emulated.label == ev.verdict.label
    hinge = [f for f in ev.role("decides") if f.verdict.label == "depends on the machine"]
    assert [f.decision.what for f in hinge] == ["pre-norm, lr 0.003"]
    assert "not testable at this scale in pre-norm" in ev.native.reason  # this machine's reason alone
    assert "not testable at this scale in" not in ev.verdict.reason
    assert "depends on the machine in pre-norm, lr 0.003: not testable on this machine's runs" in ev.verdict.reason
    assert ev.verdict.reason in evidence("ch7_layerscale_round2")._repr_html_().replace("&#x27;", "'")
    same = evaluation.evidence("ch7_layerscale")  # where the regimes agree, this machine's reason stands
    assert all(f.verdict.label != "depends on the machine" for f in same.role("decides"))
    assert same.verdict.reason == same.native.reason


def test_a_changed_rule_marks_the_verdicts_and_trains_nothing(tmp_path, monkeypatch, capsys):
    """Changed verdict code, or a changed emulation, leaves the runs current (nothing is re-trained) and
    marks the grid's verdicts as decided by a rule changed after its runs, in the fold and in --list."""
    import json

    from andrea import experiments
    from andrea.evidence import emulate
    from andrea.views.notebook import evidence

    g = grids.grid("ch2_norm_lr")
    real = json.loads(store.path(g.name).read_text())
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    made_under = g.rule_hash()
    _with_copies(g, real, made_under)
    _write(g.name, real)
    assert evaluation.evidence(g.name).rule_status == store.BEFORE
    from andrea.evidence import declare

    real_hash = declare.source_hash
    with monkeypatch.context() as m:  # verdict.py edited
        m.setattr(
            declare, "source_hash", lambda mods: real_hash(mods) + ("+" if tuple(mods) == store.RULE_MODULES else "")
        )
        ev = evaluation.evidence(g.name)
        assert ev.rule_status == store.CHANGED and "changed after" in evidence(g.name)._repr_html_()
    with monkeypatch.context() as m:  # another emulation
        m.setattr(emulate, "EMULATED", {**emulate.EMULATED, "ATEN_CPU_CAPABILITY": "avx2"})
        assert evaluation.evidence(g.name).rule_status == store.CHANGED
        assert evaluation.status(g.name) == "current"  # the runs are not stale

        def no_training(*a, **k):
            raise AssertionError("a changed rule must not re-train a run")

        m.setattr(emulate, "start", no_training)
        m.setattr(store, "ProcessPoolExecutor", no_training)
        store.run(g, 1)  # rewrites the file: every run, both machines, reused
        after = json.loads(store.path(g.name).read_text())["cells"][g.decision_cells()[0]]
        assert "emulated" in after and after["result"]["rule"] == made_under  # the stamp it was made under
        capsys.readouterr()
        experiments.main(["--list", g.name])
        assert "rule changed after its runs" in capsys.readouterr().out


@pytest.mark.parametrize("name", GRIDS)
def test_a_grid_run_under_its_declared_rule_still_has_that_rule(name):
    """A grid whose every deciding run recorded the rule it was trained under still has that rule: a
    refactor of the grids' code (a shared helper for their decisions, a moved constant) must leave each
    ``Decision.spec()``, and so ``rule_hash``, byte-identical, or the book would call a verdict declared
    before its runs "changed after its runs"."""
    g = grids.grid(name)
    blob = store.load(g)
    stamps = {
        run.get("rule")
        for i in g.decision_cells()
        for run in (blob["cells"][i]["result"], blob["cells"][i].get("emulated", {}))
        if run
    }
    if None in stamps:  # stored before runs recorded their rule: the book must say so, not call it declared before
        assert store.rule_status(g, blob)[0] == store.CHANGED
        return
    assert stamps == {g.rule_hash()}, f"{name}: runs made under {sorted(stamps)}, the rule now is {g.rule_hash()}"
    assert store.rule_status(g, blob)[0] == store.BEFORE


def test_results_of_another_torch_version_are_shown_with_a_warning_not_refused(tmp_path, monkeypatch):
    """A reader on Colab has another torch than the pinned one: the stored results still load (with a
    warning naming the torch that measured them); the tests' strict check refuses them."""
    import json

    name = "ch5_activation"
    g = grids.grid(name)
    blob = json.loads(store.path(name).read_text())
    blob["key"] = blob["key"].replace("-torch2.13.0-", "-torch2.9.1-")
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    _write(name, blob)
    with pytest.warns(UserWarning, match="measured with torch"):
        store.load(g)
    with pytest.raises(store.StoreError, match="other code"):
        store.load(g, same_torch=True)
    blob["key"] = "0" * 16 + blob["key"][16:]  # other code: refused even for readers
    _write(name, blob)
    with pytest.raises(store.StoreError, match="other code"):
        store.load(g)


def test_the_explorers_shipped_measurements_are_current_and_exact():
    from andrea.views import explorer as E

    E._SHIPPED = None
    assert E.shipped().problem is None, E.shipped().problem
    for s in (E.Setting(depth=12), E.Setting(depth=48, norm="post", layerscale=1e-6), E.Setting(depth=37)):
        shipped, live = E.shipped().get(s), E.measure(s)
        assert shipped is not None
        assert np.allclose(shipped.grad_rms, live.grad_rms, rtol=1e-6) and np.allclose(
            shipped.act_rms, live.act_rms, rtol=1e-6
        )


def test_the_explorers_shipped_measurements_hold_on_portable_kernels_too():
    """The same comparison as above, in a child process with torch's portable kernels (another CPU,
    emulated). Measured: the largest relative difference is about 5e-8 on both kernels (the shipped file
    keeps 8 significant digits), so rtol 1e-6 holds with a margin of 20."""
    import json
    import os
    import subprocess
    import sys

    code = """
import json, numpy as np
from andrea.views import explorer as E
worst = 0.0
for s in (E.Setting(depth=12), E.Setting(depth=48, norm="post", layerscale=1e-6), E.Setting(depth=37),
          E.Setting(depth=96, norm="post"), E.Setting(depth=96, layerscale=1.0)):
    shipped, live = E.shipped().get(s), E.measure(s)
    for a, b in ((live.grad_rms, shipped.grad_rms), (live.act_rms, shipped.act_rms)):
        worst = max(worst, float(np.max(np.abs(a - b) / np.abs(b))))
print(json.dumps(worst))
"""
    env = dict(os.environ, **store.EMULATED)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    worst = json.loads(r.stdout.strip().splitlines()[-1])
    assert worst < 1e-6, f"portable kernels: shipped vs live differ by up to {worst:.2g} (rtol 1e-6)"


def test_the_full_reproduction_command_names_a_run_that_does_not_reproduce(monkeypatch, capsys):
    """`python -m andrea.experiments --reproduce` (every deciding run in full, where make test samples)."""
    from andrea import experiments

    fake = {"ok": False, "problems": ["x: final validation loss 3.1 vs stored 3.0"], "cells": []}
    monkeypatch.setattr(rerun, "reproduce", lambda g: fake)
    assert experiments.main(["--reproduce", "ch2_norm_lr"]) == 1
    out = capsys.readouterr().out
    assert "ch2_norm_lr: DOES NOT REPRODUCE: x: final validation loss 3.1" in out
    monkeypatch.setattr(rerun, "reproduce", lambda g: {"ok": True, "problems": [], "cells": []})
    assert experiments.main(["--reproduce", "ch2_norm_lr"]) == 0


def test_the_list_names_a_bad_worker_count_and_shows_the_trained_model(monkeypatch, capsys):
    from andrea import experiments

    monkeypatch.setenv("ANDREA_WORKERS", "abc")
    with pytest.raises(SystemExit) as e:
        experiments.main(["--list"])
    assert e.value.code == 2 and "ANDREA_WORKERS must be a positive integer, got 'abc'" in capsys.readouterr().err
    monkeypatch.delenv("ANDREA_WORKERS")
    assert experiments.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "trained " in out and "trained probes" in out and "explorer" in out


def test_make_experiments_leaves_the_second_cpus_copies_to_their_own_command(tmp_path, monkeypatch, capsys):
    """`make experiments` trains the book's runs alone (about 6 hours from nothing on 2 cores); the second
    CPU's copies, 3 to 4 times as costly, are `make experiments-second-cpu`, which trains only the grids
    whose copies are missing."""
    import json

    from andrea import experiments

    g = grids.grid("ch2_norm_lr")
    real = json.loads(store.path(g.name).read_text())
    whole = store.path("ch5_activation_round2").read_text()  # every copy made
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.path("ch5_activation_round2").write_text(whole)
    for i in g.decision_cells():
        real["cells"][i].pop("emulated", None)
    _write(g.name, real)
    assert len(store.emulated_missing(g, store.load(g))) == len(g.decision_cells())
    calls = []
    monkeypatch.setattr(
        store, "run", lambda grid, workers=None, emulated=True, **k: calls.append((grid.name, emulated))
    )
    with monkeypatch.context() as m:
        m.setattr(experiments, "status", lambda name: "stale")
        experiments.main([g.name])
    assert calls == [(g.name, False)]
    experiments.main(["--second-cpu", g.name, "ch5_activation_round2"])
    assert calls == [(g.name, False), (g.name, True)]
    out = capsys.readouterr().out
    assert f"{len(g.decision_cells())} copies made" in out and "every deciding run has its copy" in out


def test_each_second_cpu_copy_is_stored_as_it_finishes(tmp_path, monkeypatch):
    """A session that stops in the middle of the emulated copies (a grid's take 2 to 4 core-hours) keeps
    the copies it finished in the results file, which git keeps: the next session resumes from them. The
    verdicts stay this machine's alone until the last copy is there."""
    import json

    from andrea.evidence import emulate, evaluation

    g = grids.grid("ch2_norm_lr")
    real = json.loads(store.path(g.name).read_text())
    copies = {i: real["cells"][i].pop("emulated") for i in g.decision_cells()}
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    _write(g.name, real)
    first = g.decision_cells()[0]

    def stopped(cells, code, n_workers, rule, done):
        done(0, copies[first])  # one copy finishes, then the session stops
        raise KeyboardInterrupt

    monkeypatch.setattr(emulate, "train", stopped)
    with pytest.raises(KeyboardInterrupt):
        store.run(g, 1, emulated=True)
    blob = store.load(g)  # a whole file, its digest right
    assert "emulated" in blob["cells"][first]
    assert blob["cells"][first]["emulated"]["final_val_loss"] == copies[first]["final_val_loss"]
    assert len(store.emulated_missing(g, blob)) == len(g.decision_cells()) - 1
    assert [c["result"] for c in blob["cells"]] == [c["result"] for c in real["cells"]]
    assert evaluation.evidence(g.name).missing_emulated == len(g.decision_cells()) - 1
