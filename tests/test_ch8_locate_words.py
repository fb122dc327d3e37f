"""Chapter 8's version-5 words (andrea.views.pages.ch8_locate) on made-up readings whose right answer is known:
each task's sentence follows its verdict (confirmed, not reproduced, the models disagree, a control failed,
not testable), and the table has a row per task with each model's reading."""

import numpy as np
import pytest

from andrea.trained import locate
from andrea.views.pages.ch8_locate import LocateReport

BAND_AT = {"early": 2, "middle": 6, "late": 10}


def _curve(top_at: int, top: float = 0.9, n: int = 13) -> np.ndarray:
    c = np.full(n, 0.5)
    c[top_at:] = top
    return c


def _result(trained, untrained=None, control=None, seeds: int = 5) -> dict:
    flat = np.full(13, 0.5)

    def tile(c):
        return np.tile(c, (seeds, 1))

    return {
        "trained": {"task": tile(trained), "control": tile(flat if control is None else control)},
        "untrained": {"task": tile(flat if untrained is None else untrained)},
    }


def _model(where: dict) -> dict:
    """Readings of every version-5 task, each located at ``where.get(name)`` (default: its own band)."""
    out = {}
    for t in locate.tasks():
        at = where.get(t.name, BAND_AT[t.band])
        out[t.name] = locate.reading(t, _result(_curve(at)) if at is not None else _result(np.full(13, 0.5)))
    return out


def _report(*models) -> LocateReport:
    per_model = list(models)
    verdicts, overall = locate.decide(per_model)
    return LocateReport(locate, per_model, verdicts, overall, shipped=per_model[0])


def test_every_task_sits_in_its_band_and_the_words_say_so():
    r = _report(_model({}), _model({}))
    assert r.overall.label == "confirmed"
    for name in locate.CLAIM_TASKS:
        said = r.sentence(name)
        assert "as the source says" in said and "{term}`confirmed`" in said, said
    assert len(r.table().rows) == len(locate.tasks())


def test_a_task_added_elsewhere_is_not_reproduced_and_named_where():
    r = _report(_model({"phrase structure": 10}), _model({"phrase structure": 11}))
    said = r.sentence("phrase structure")
    assert (
        "{term}`not reproduced`" in said
        and "late blocks" in said
        and "block 10 (late) in one and block 11 (late) in the other" in said
    )


def test_models_that_disagree_leave_a_task_undecided():
    r = _report(_model({"phrase structure": 10}), _model({}))
    said = r.sentence("phrase structure")
    assert "{term}`inconclusive`" in said and "placed differently" in said, said


def test_a_failed_control_and_a_failed_calibration_are_said_as_such():
    r = _report(_model({"meaning": None}), _model({"meaning": None}))
    assert "no block adds it, so it cannot be placed" in r.sentence("meaning"), r.sentence("meaning")
    assert any(x.startswith("meaning, model seed") for x in r.controls_failed())
    meaning = next(t for t in locate.tasks() if t.name == "meaning")
    untrained_too = locate.reading(meaning, _result(_curve(10), untrained=_curve(10)))  # training adds nothing
    m1, m2 = _model({}), _model({})
    m1["meaning"] = m2["meaning"] = untrained_too
    r = _report(m1, m2)
    assert "the untrained model shows the same rise, so training did not add it" in r.sentence("meaning")
    beaten = locate.reading(meaning, _result(_curve(10), control=_curve(10, top=0.95)))  # its control reads better
    m1["meaning"] = m2["meaning"] = beaten
    said = _report(m1, m2).sentence("meaning")
    assert "a random label per token id is read better" in said, said
    m1["meaning"] = untrained_too  # one model fails one check, the other another
    said = _report(m1, m2).sentence("meaning")
    assert "a check that the probes read something training added failed" in said, said
    r = _report(_model({"planted at block 2": 10}), _model({"planted at block 2": 10}))
    said = r.sentence("position")
    assert "{term}`not testable`" in said and "early calibration" in said, said


def test_the_report_refuses_missing_readings():
    m = _model({})
    with pytest.raises(ValueError, match="decides on 2 models"):
        LocateReport(locate, [m], {}, None)
    short = {k: v for k, v in m.items() if k != "meaning"}
    verdicts, overall = locate.decide([m, m])
    with pytest.raises(ValueError, match="meaning"):
        LocateReport(locate, [m, short], verdicts, overall)


def test_the_two_machines_decide_apart_and_a_difference_is_said():
    """The second CPU's readings are decided on their own: the same readings leave every label as it is; a task
    placed elsewhere on one machine depends on the machine; a calibration missed on one machine leaves its
    band's tasks not testable."""
    same = locate.decide([_model({}), _model({})], [_model({}), _model({})])
    assert {v.label for v in same[0].values()} == {"confirmed"} and same[1].label == "confirmed"
    verdicts, _ = locate.decide([_model({}), _model({})], [_model({"meaning": 6}), _model({"meaning": 6})])
    assert verdicts["meaning"].label == "depends on the machine", verdicts["meaning"]
    verdicts, claim = locate.decide([_model({}), _model({})], [_model({"next token": 6}), _model({})])
    assert verdicts["meaning"].label == "not testable" and claim.label != "confirmed"
    r = LocateReport(
        locate,
        [_model({}), _model({})],
        *locate.decide([_model({}), _model({})]),
        second=[_model({"meaning": 6}), _model({})],
    )
    t = r.table()
    row = dict(zip(t.columns, next(x for x in t.rows if x[0] == "meaning")))
    assert "second CPU: block 6 (middle)" in row["model seed 1"] and "second CPU: the same" in row["model seed 2"]
    with pytest.raises(ValueError, match="cover 1 models"):
        locate.decide([_model({}), _model({})], [_model({})])


def test_the_models_losses_are_said_with_their_largest_gap():
    r = _report(_model({}), _model({}))
    said = r.models_words({1: 3.301, 2: 3.295, "shipped": 3.300})
    assert "3.301 (seed 1) and 3.295 (seed 2)" in said and "at 3.300" in said and "0.006 apart" in said, said


def test_a_place_its_control_task_shares_is_said_with_that_caveat():
    """Reviewer's point on contextual syntax: a task whose control task rises as much as it does may be placed
    where the control's unit becomes readable; the sentence says so, and does not where the control stays flat."""
    name = "phrase structure"
    task = next(t for t in locate.tasks() if t.name == name)
    found = {t.name: _result(_curve(BAND_AT[t.band])) for t in locate.tasks()}
    found[name] = _result(
        _curve(6, top=0.9), control=_curve(6, top=0.6)
    )  # the control rises less (+0.1, the task +0.4)
    flat = LocateReport.from_found(locate, [found, found])
    assert "rises as much" not in flat.sentence(name)
    found[name] = _result(_curve(6, top=0.9), control=np.where(np.arange(13) >= 6, 0.85, 0.40))  # +0.45
    shared = LocateReport.from_found(locate, [found, found])
    assert shared.verdicts[name].label == "confirmed" and task.band == "middle"
    assert "its control task (a random label per token id) rises as much" in shared.sentence(name), shared.sentence(
        name
    )
