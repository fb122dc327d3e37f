"""The declared rule of a grid applied to made-up runs whose right answer is known
(``andrea.evidence.evaluation.evaluate``): calibration, Holm across the deciding regimes, controls."""

import random

from andrea.evidence import evaluation, grids, store


def _rows(effects: dict, seeds=range(5), noise=0.01, base=2.8):
    """Made-up stored runs: one row per (regime, arm, seed); ``effects[regime]`` is how much worse
    the plain arm ends than LayerScale's (nats)."""
    rng = random.Random(0)
    out = []
    for regime, gap in effects.items():
        for s in seeds:
            shared = rng.gauss(0, 0.05)  # what the arms of a seed share
            for arm, extra in (("off", gap), ("ls", 0.0)):
                v = base + shared + extra + rng.gauss(0, noise)
                out.append({"regime": regime, "ls": arm, "seed": s, "final_val_loss": v, "unigram_ce": 3.28})
    return out


def _grid(calibration_regime="healthy", rule="some"):
    decs = [
        store.Decision(r, arm={"regime": r, "ls": "off"}, against={"regime": r, "ls": "ls"}, predicted="positive")
        for r in ("a", "b")
    ]
    decs.append(
        store.Decision(
            "healthy beats plain",
            arm={"regime": calibration_regime, "ls": "off"},
            against={"regime": calibration_regime, "ls": "ls"},
            predicted="positive",
            role="calibration",
            calibrates="a",
        )
    )
    return store.Grid("made_up", "t", "p", (), tuple(decs), rule=rule)


def test_a_clear_effect_in_one_regime_confirms_a_some_claim():
    ev = evaluation.evaluate(_grid(), _rows({"a": 0.3, "b": 0.0, "healthy": 0.5}))
    assert ev.calibrated and ev.verdict.label == "confirmed"
    assert ev.regime("a").verdict.label == "confirmed" and ev.regime("b").verdict.label == "inconclusive"


def test_every_needs_each_deciding_regime():
    ev = evaluation.evaluate(_grid(rule="every"), _rows({"a": 0.3, "b": 0.0, "healthy": 0.5}))
    assert ev.verdict.label == "inconclusive"


def test_the_opposite_in_another_regime_makes_it_qualified():
    ev = evaluation.evaluate(_grid(), _rows({"a": 0.3, "b": -0.3, "healthy": 0.5}))
    assert ev.verdict.label == "qualified"
    assert ev.regime("b").verdict.label == "not reproduced"


def test_a_failed_calibration_makes_its_regime_not_testable():
    ev = evaluation.evaluate(_grid(), _rows({"a": 0.3, "b": 0.0, "healthy": 0.0}))
    assert not ev.calibrated
    assert ev.regime("a").verdict.label == "not testable"
    assert ev.verdict.label == "inconclusive"  # decided on b alone, which shows nothing
    assert "not testable at this scale in a" in ev.verdict.reason


def test_a_grid_wide_calibration_that_fails_makes_the_claim_not_testable():
    g = _grid()
    decs = list(g.decisions)
    decs[-1] = store.Decision(**{**decs[-1].__dict__, "calibrates": ""})
    g = store.Grid("made_up", "t", "p", (), tuple(decs), rule="some")
    ev = evaluation.evaluate(g, _rows({"a": 0.3, "b": 0.3, "healthy": 0.0}))
    assert ev.verdict.label == "not testable" and "calibration failed" in ev.verdict.reason


def test_holm_is_applied_across_the_deciding_regimes():
    # a weak effect decisive in a regime alone is not, once the claim has two regimes to pass
    rows = _rows({"a": 0.02, "b": 0.0, "healthy": 0.5}, noise=0.012)
    g = _grid()
    one = store.Grid("made_up", "t", "p", (), (g.decisions[0], g.decisions[2]), rule="some")
    alone = evaluation.evaluate(one, rows)
    assert alone.regime("a").verdict.p is not None
    both = evaluation.evaluate(_grid(), rows)
    assert both.regime("a").verdict.p >= alone.regime("a").verdict.p  # adjusted upwards


def test_the_rule_has_its_own_hash_apart_from_the_runs():
    import dataclasses

    g = grids.grid("ch7_layerscale")
    for changed in (
        dataclasses.replace(g, decisions=g.decisions[:1]),
        dataclasses.replace(g, rule="every"),
        dataclasses.replace(g, declared="after the runs"),
    ):
        assert changed.rule_hash() != g.rule_hash() and changed.key() == g.key()  # no run is stale
    fewer = dataclasses.replace(g, cells=g.cells[:-1])
    assert fewer.key() != g.key() and fewer.rule_hash() == g.rule_hash()


def test_every_deciding_arm_has_five_fresh_seeds_or_its_grid_says_why():
    for name in grids.GRIDS:
        g = grids.grid(name)
        for d in g.decisions:
            if d.role != "decides":
                continue
            seeds = d.seeds or sorted({c.label["seed"] for c in g.cells if store.pick([c.label], **d.arm)})
            assert len(seeds) >= 5 or name == "app_layerscale_kind", (name, d.what, seeds)


def test_a_declared_grid_has_no_results_yet_and_fresh_seeds():
    """A grid in DECLARED has its rule committed before its runs: it has no stored results (once it has,
    it moves to GRIDS), and none of its deciding seeds ran in the stored grid it repeats."""
    assert not set(grids.DECLARED) & set(grids.GRIDS)
    for name in grids.DECLARED:
        g = grids.grid(name)
        assert not store.path(name).exists(), f"{name} has results: move it from DECLARED to GRIDS"
        assert g.decisions and g.declared == "before the runs"
        stored_seeds = {c.label["seed"] for n in grids.GRIDS for c in grids.grid(n).cells if n in name}
        for d in g.decisions:
            assert d.seeds and not set(d.seeds) & stored_seeds, (name, d.what, d.seeds)
