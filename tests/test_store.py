"""The results store: every stored grid is current (made by today's code) and reproduces.

`make test` re-runs one cell of every stored grid from scratch (two at a time, one CPU thread each)
and compares it with the stored numbers within ``andrea.store.TOLERANCE``; it fails when a grid's
stored key (the hash of the code that trains a cell, and of the grid's specification) no longer
matches the code: then `make experiments` must be run and the results committed.
"""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from andrea import experiments, store

GRIDS = sorted(experiments.GRIDS)


@pytest.mark.parametrize("name", GRIDS)
def test_stored_results_are_current_and_complete(name):
    blob = store.load(experiments.grid(name))  # StoreError (naming the file) if stale or malformed
    assert blob["torch"] and blob["device"] == "cpu" and blob["seconds"] > 0
    rows = experiments.results(name)
    assert len(rows) == len(experiments.grid(name).cells)
    assert all(len(r["loss"]) == len(r["steps"]) for r in rows)


def _reproduce(name):
    return name, store.reproduce(experiments.grid(name))


@pytest.fixture(scope="module")
def reproductions():
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=store.workers(), mp_context=ctx) as pool:
        return dict(pool.map(_reproduce, GRIDS))


@pytest.mark.store
@pytest.mark.parametrize("name", GRIDS)
def test_one_cell_of_each_grid_reproduces_from_scratch(reproductions, name):
    r = reproductions[name]
    assert r["ok"], f"{name} {r['label']}: {r['problems']}"


def test_a_changed_result_is_caught(tmp_path, monkeypatch):
    """The reproduction check can fail: with a stored loss nudged beyond the tolerance, it does."""
    import copy
    import json

    name = "ch5_activation"
    g = experiments.grid(name)
    real = json.loads(store.path(name).read_text())
    i = real.get("check", g.check)
    fresh = copy.deepcopy(real["cells"][i]["result"])  # what a re-run would give (it is deterministic)
    real["cells"][i]["result"]["loss"][3] += 10 * store.TOLERANCE["early_loss"]
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.path(name).write_text(json.dumps(real))
    monkeypatch.setattr(store, "run_cell", lambda cell, threads=1: copy.deepcopy(fresh))
    r = store.reproduce(g)
    assert not r["ok"] and "first 20 losses differ" in r["problems"][0]


def test_the_explorers_shipped_measurements_are_current_and_exact():
    from andrea import explorer as E

    E._SHIPPED = None
    assert E.shipped().problem is None, E.shipped().problem
    for s in (E.Setting(depth=12), E.Setting(depth=48, norm="post", layerscale=1e-6), E.Setting(depth=37)):
        shipped, live = E.shipped().get(s), E.measure(s)
        assert shipped is not None
        assert np.allclose(shipped.grad_rms, live.grad_rms, rtol=1e-6) and np.allclose(
            shipped.act_rms, live.act_rms, rtol=1e-6
        )
