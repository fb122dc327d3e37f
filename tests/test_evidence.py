"""The declared rule of a grid applied to made-up runs whose right answer is known
(``andrea.evidence.evaluation.evaluate``): calibration, Holm across the deciding regimes, controls."""

import random
from dataclasses import replace

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


# ---------------------------------------------------------------------------------------------
# Every deciding comparison can come out either way under its rule (issue 49)
# ---------------------------------------------------------------------------------------------
_EVENTS = ("diverged", "failed", "learned", "late_break", "reached_level", "escaped")


def _made_up_run(cell: store.Cell, field: str, level, value, seed: int) -> dict:
    """A made-up stored run of ``cell`` whose statistic ``field`` (at ``level``) is ``value``: an event
    (True/False) or a number (a final loss, a gain, a step)."""
    steps = list(range(1, cell.train["steps"] + 1))
    unigram = 3.28
    r = {"steps": steps, "loss": [2.5] * len(steps), "diverged": False, "diverged_at": None, "unigram_ce": unigram}
    r["final_val_loss"] = 2.5
    if field == "final_val_loss":
        r["final_val_loss"] = value
    elif field == "gain_over_unigram":
        r["final_val_loss"] = unigram - value
    elif field == "diverged":
        r.update(diverged=value, diverged_at=50 if value else None, final_val_loss=None if value else 2.5)
    elif field in ("failed", "learned"):
        fails = value if field == "failed" else not value
        r["final_val_loss"] = unigram - (level - 0.2 if fails else level + 0.5)
    elif field == "late_break":
        at = int(level) + 50 if value else 20  # one spike after a stable stretch, or one at the start
        r["loss"] = [40.0 if s == at else 2.5 for s in steps]
    elif field == "steps_to_level":  # the 10-step mean first goes below the level at step `value`
        r["loss"] = [level - 0.5 if s > value - 10 else level + 10.0 for s in steps]
    else:
        raise AssertionError(f"no made-up run for the statistic {field!r}: add one")
    return {**cell.label, **r, "seed": seed, "model": cell.model, "train": cell.train}


def _made_up_rows(g: store.Grid, d: store.Decision, confirm: bool) -> list[dict]:
    """Made-up runs of ``g`` on which ``d`` must come out confirmed (``confirm``) or the opposite."""
    numeric = d.field not in _EVENTS
    rng = random.Random(1)
    lo, hi = (False, True) if not numeric else (None, None)

    def value(high: bool):
        if not numeric:
            return hi if high else lo
        if d.field == "steps_to_level":
            return (300 if high else 100) + rng.randint(0, 5)
        base = (d.level or 0.0) if d.test == "level" else 2.5
        return base + (1.0 if high else -1.0) + rng.gauss(0, 0.01)

    up = d.predicted == "positive" if d.test not in ("fisher", "every") else True
    if not confirm:
        up = not up
    rows = []
    for c in g.cells:
        if d.seeds and c.label["seed"] not in d.seeds:
            continue
        in_arm = store.pick([c.label], **d.arm) != []
        in_against = d.against is not None and store.pick([c.label], **d.against) != []
        if d.test == "interaction":  # arm's change between the contrast's settings, against against's
            base = store.pick([c.label], **d.contrast[0]) != []
            v = value(up) if (in_arm and base) else 2.5 + rng.gauss(0, 0.01)
            if in_against and not base:
                v = value(up)  # against's treated arm moves as arm's base does: the gains differ by 2 nats
        elif in_arm:
            v = value(up)
        elif in_against:
            v = value(not up)
        else:
            continue
        rows.append(_made_up_run(c, d.field, d.level, v, c.label["seed"]))
    return rows


def _labels(g: store.Grid, d: store.Decision) -> set:
    """The labels ``d`` gives, after Holm's correction over the grid's deciding regimes, on made-up runs
    that must confirm it and on made-up runs that must refute it."""
    from andrea.evidence import twoway, verdict

    family = max(1, sum(x.role == "decides" for x in g.decisions))
    out = set()
    for confirm in (True, False):
        v = twoway.raw(_made_up_rows(g, d, confirm), d, family)[0]
        others = {f"other {i}": verdict.Verdict("inconclusive", "", None, 0.5, 0.5) for i in range(family - 1)}
        out.add(verdict.decide({d.what: v, **others}, g.rule)[1][d.what].label)
    return out


def test_every_deciding_comparison_can_come_out_either_way():
    """Issue 49: no printed label may rest on a test that could not return the opposite label. Each
    deciding comparison of every grid, stored or declared, is fed made-up runs that must confirm it and
    made-up runs that must refute it; both labels must come out, after Holm's correction."""
    for name in sorted(grids.GRIDS) + sorted(grids.DECLARED):
        g = grids.grid(name)
        for d in g.decisions:
            if d.role == "decides":
                assert _labels(g, d) == {"confirmed", "not reproduced"}, (name, d.what, _labels(g, d))


def _one_way_grid(**kw) -> store.Grid:
    """A made-up grid of two arms over eight seeds whose one deciding comparison is given by ``kw``."""
    from andrea.evidence.grids.base import BASE, BASE_TRAIN, _cell

    cells = tuple(
        _cell({"act": a, "seed": s}, BASE, replace(BASE_TRAIN, seed=s)) for a in ("relu", "gelu") for s in range(8)
    )
    d = store.Decision("made up", arm={"act": "relu"}, against={"act": "gelu"}, seeds=tuple(range(8)), **kw)
    return store.Grid("made_up", "t", "p", cells, (d,), rule_modules=("evidence.twoway",))


def test_a_deciding_comparison_that_cannot_refute_fails_the_check():
    both = _one_way_grid(predicted="positive")
    assert _labels(both, both.decisions[0]) == {"confirmed", "not reproduced"}
    one_way = _one_way_grid(test="detectable", level=0.014)  # a power check: the same label on either side
    assert _labels(one_way, one_way.decisions[0]) != {"confirmed", "not reproduced"}


def test_the_later_grids_tests_are_in_their_rule_hash_only():
    """evidence.twoway is part of the rule hash of the grids that list it, and of no other: a grid may not
    use its tests without listing it, and no stored grid before issue 49 lists it."""
    import dataclasses

    import pytest

    g = _one_way_grid(test="interaction", predicted="positive", contrast=({"seed": 0}, {"seed": 1}))
    plain = _one_way_grid(predicted="positive")
    assert dataclasses.replace(plain, rule_modules=()).rule_hash() != plain.rule_hash()
    with pytest.raises(ValueError, match="rule_modules"):
        dataclasses.replace(g, rule_modules=())
    with pytest.raises(ValueError, match="unknown rule modules"):
        dataclasses.replace(plain, rule_modules=("evidence.rule",))
    for name in grids.GRIDS:
        if not grids.grid(name).rule_modules:
            assert not twoway_uses(grids.grid(name)), name


def twoway_uses(g: store.Grid) -> bool:
    from andrea.evidence import twoway

    return twoway.uses(g)


def test_the_late_break_reading_goes_both_ways_on_real_stored_runs():
    """ch2_source_arm's reading of 'accumulate', on ch2_held_lr's stored runs at 1e-2 (explored before it was
    declared): no pre-norm run breaks late, and some runs without any LayerNorm do."""
    from andrea.evidence import twoway

    rs = evaluation.results("ch2_held_lr")
    pre = [twoway.statistic(r, "late_break", 300) for r in store.pick(rs, norm="pre", lr=1e-2)]
    none = [twoway.statistic(r, "late_break", 300) for r in store.pick(rs, norm="none", lr=1e-2)]
    assert not any(pre) and any(none) and not all(none)


def test_a_declared_grid_runs_stores_and_is_decided_under_the_rule_it_was_declared_with(tmp_path, monkeypatch):
    """The path a declared grid's runs take (issue 49): trained runs (here made up, put in the cell cache
    as training leaves them, both machines), stored by ``store.run``, decided by ``evaluation.evidence`` on
    both machines, with every run stamped with the rule declared before it."""
    import json

    from andrea import files
    from andrea.evidence import emulate
    from andrea.training import data

    name = "ch3_warmup_round3"
    g = grids.grid(name)
    interaction = next(d for d in g.decisions if d.test == "interaction")
    monkeypatch.setenv("ANDREA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(data, "load_token_data", lambda tok: None)
    monkeypatch.setattr(store, "code_hash", lambda: "made-up-code")  # hashing the code is slow, and not tested here
    rows = {(r["norm"], r["warmup"], r["seed"]): r for r in _made_up_rows(g, interaction, confirm=True)}
    extra = {"grad_norm": [], "val_step": [], "val_loss": [], "final_train_loss": 2.5, "kl_unigram": 0.0}
    extra["monitor"] = []  # as a run without a monitor stores it (evidence.runs)
    for i, c in enumerate(g.cells):
        r = rows[(c.label["norm"], c.label["warmup"], c.label["seed"])]
        run = {k: r[k] for k in store.RESULT_FIELDS if k in r} | extra | {"seconds": 1.0, "rule": g.rule_hash()}
        run["final_val_loss"] = r["final_val_loss"]
        # each run its own curve, as real seeds give (the store refuses two identical runs as one copied)
        run["loss"] = [x + 1e-6 * i for x in run.get("loss", [])]
        code = store.code_hash()
        files.write_cached(store._cell_cache(c), json.dumps({**run, "cpu": "made up"}).encode(), code)
        files.write_cached(emulate._cache(c, code), json.dumps(run).encode(), code)
    store.run(g, 1, emulated=True, cached_only=True)
    ev = evaluation.evidence(name)
    assert ev.rule_status == store.BEFORE and ev.missing_emulated == 0
    assert ev.regime(interaction.what).verdict.label == "confirmed"
    assert ev.native is not None and ev.emulated is not None and ev.native.label == ev.emulated.label
