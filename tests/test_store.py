"""The results store: every stored grid is current (made by today's code) and reproduces.

`make test` re-runs, from scratch, the seed-0 run of every arm that decides a verdict (each grid's
``decisions``), natively and under torch's portable kernels (another CPU, emulated), two at a time,
one CPU thread each. Natively the re-run must match the stored numbers within
``andrea.evidence.store.TOLERANCE``; emulated, its final loss must stay within the grid's stated
``kernel_tolerance``, and that tolerance must be too small to move the deciding verdict across its
threshold. The test also fails when a grid's stored key (the hash of the code that trains a cell,
and of the grid's specification) no longer matches the code: then `make experiments` must be run
and the results committed.
"""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from andrea.evidence import evaluation, grids, store

GRIDS = sorted(grids.GRIDS)


@pytest.mark.parametrize("name", GRIDS)
def test_stored_results_are_current_and_complete(name):
    blob = store.load(grids.grid(name), same_torch=True)  # StoreError (naming the file) if stale or malformed
    assert blob["torch"] and blob["device"] == "cpu" and blob["seconds"] > 0
    rows = evaluation.results(name)
    assert len(rows) == len(grids.grid(name).cells)
    assert all(len(r["loss"]) == len(r["steps"]) for r in rows)


def _reproduce(name):
    return name, store.reproduce(grids.grid(name))


@pytest.fixture(scope="module")
def reproductions():
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=store.workers(), mp_context=ctx) as pool:
        return dict(pool.map(_reproduce, GRIDS))


@pytest.mark.store
@pytest.mark.parametrize("name", GRIDS)
def test_the_deciding_runs_of_each_grid_reproduce_natively_and_on_portable_kernels(reproductions, name):
    r = reproductions[name]
    g = grids.grid(name)
    lines = []
    for c in r["cells"]:
        m, e = c["margin"], c.get("emulated", {})
        if m["kind"] == "interval":
            room = (
                f"verdict {m['robust_label']} (raw {m['label']}), {m['distance']:.4f} from flipping; "
                f"another CPU's rounding widens it by {m['widening']:.4f}"
            )
        else:
            room = f"an event count ({m['events']} of {m['runs']} runs)"
        lines.append(
            f"  {c['label']}: native vs stored {c['native']['final_val_loss']}, portable kernels vs native "
            f"{e.get('spread')} (tolerance {g.kernel_tolerance}); {room}"
        )
    print(f"{name}: deciding runs re-run\n" + "\n".join(lines))
    assert r["cells"], f"{name} declares no deciding arm"
    assert r["ok"], f"{name}: {r['problems']}"


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
    store.path(name).write_text(json.dumps(real))
    monkeypatch.setattr(store, "run_cell", lambda cell, threads=1: copy.deepcopy(fresh))
    r = store.reproduce(g, emulate=False)
    assert not r["ok"] and "first 20 losses differ" in r["problems"][0]
    # ... and a portable-kernel run that ends further away than the grid's kernel tolerance is caught
    moved = copy.deepcopy(fresh)
    moved["final_val_loss"] += 2 * g.kernel_tolerance
    monkeypatch.setattr(store, "run_emulated", lambda cell: moved)
    real["cells"][i]["result"]["loss"][3] -= 10 * store.TOLERANCE["early_loss"]
    store.path(name).write_text(json.dumps(real))
    r = store.reproduce(g)
    assert not r["ok"] and any("kernel tolerance" in p for p in r["problems"]), r["problems"]


def test_a_verdict_closer_to_flipping_than_the_kernel_tolerance_is_reported_as_inconclusive():
    """Adding another CPU's rounding can bite: with a kernel tolerance as large as the deciding
    interval's distance from its threshold, the verdict the book draws from the stored runs is
    inconclusive, saying why."""
    import dataclasses

    from andrea.evidence import verdict

    g = grids.grid("ch1_residual")
    dec = g.decisions[0]
    m = store.margin(g, dec)
    assert m["label"] == m["robust_label"] == "confirmed" and m["distance"] > m["widening"]  # robust today
    wide = dataclasses.replace(g, kernel_tolerance=m["distance"])
    rows = store.rows(store.load(g), wide.kernel_tolerance)
    v = verdict.compare(store.paired(rows, dec.field, dec.against, dec.arm), dec.predicted)
    assert v.label == "inconclusive" and "another CPU" in v.reason
    assert store.margin(wide, dec)["robust_label"] == "inconclusive"


def test_results_of_another_torch_version_are_shown_with_a_warning_not_refused(tmp_path, monkeypatch):
    """A reader on Colab has another torch than the pinned one: the stored results still load (with a
    warning naming the torch that measured them); the tests' strict check refuses them."""
    import json

    name = "ch5_activation"
    g = grids.grid(name)
    blob = json.loads(store.path(name).read_text())
    blob["key"] = blob["key"].replace("-torch2.13.0-", "-torch2.9.1-")
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.path(name).write_text(json.dumps(blob))
    with pytest.warns(UserWarning, match="measured with torch"):
        store.load(g)
    with pytest.raises(store.StoreError, match="other code"):
        store.load(g, same_torch=True)
    blob["key"] = "0" * 16 + blob["key"][16:]  # other code: refused even for readers
    store.path(name).write_text(json.dumps(blob))
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
