"""Chapter 8's probe rule, version 5 (``andrea.trained.locate``), on made-up accuracy curves whose right
answer is known: the statistic locates where a label is added, every control can fail, and every task
can come out confirmed and not reproduced (issue 49)."""

import numpy as np
import pytest

from andrea.trained import locate, probes


def _curve(start: float, top: float, at: int, n: int = 13, fade: float = 0.0) -> np.ndarray:
    """Accuracy at boundaries 0..12: ``start`` until block ``at``, ``top`` from it on, fading by ``fade``
    per block after it."""
    c = np.full(n, start)
    for b in range(at, n):
        c[b] = top - fade * (b - at)
    return c


def _result(trained: np.ndarray, untrained: np.ndarray, control: np.ndarray, seeds: int = 5) -> dict:
    def tile(c):
        return np.tile(c, (seeds, 1))

    return {"trained": {"task": tile(trained), "control": tile(control)}, "untrained": {"task": tile(untrained)}}


def test_the_statistic_locates_where_a_label_is_added_not_where_it_is_readable():
    assert locate.located(_curve(0.5, 0.9, 3))[0] == 3
    # a label built in blocks 4-8 and kept by the later blocks is located in the middle band
    built = np.array([0.5, 0.5, 0.55, 0.75, 0.8, 0.85, 0.9, 0.92, 0.925, 0.925, 0.925, 0.925, 0.925])
    assert locate.band_of(locate.located(built)[0]) == "middle"
    # a planted bit that fades after block 4 (version 4's: 0.994 at block 4, 0.845 at 12) is located at 4
    assert locate.located(_curve(0.5, 0.994, 4, fade=0.0186))[0] == 4
    assert locate.located(_curve(0.9, 0.8, 2))[0] is None  # nothing added after the embeddings
    with pytest.raises(ValueError, match="finite vector"):
        locate.located(np.array([0.5, np.nan]))


def _task(name):
    return next(t for t in locate.tasks() if t.name == name)


def test_a_task_can_be_confirmed_or_not_reproduced_and_every_control_can_fail():
    t = _task("phrase structure")  # the source's middle band
    flat, chance = _curve(0.5, 0.5, 1), _curve(0.5, 0.5, 1)
    assert locate.reading(t, _result(_curve(0.5, 0.9, 5), flat, chance)).label == "confirmed"
    assert locate.reading(t, _result(_curve(0.5, 0.9, 10), flat, chance)).label == "not reproduced"
    no_rise = locate.reading(t, _result(_curve(0.5, 0.51, 5), flat, chance))
    assert no_rise.label == "inconclusive" and "the blocks add" in no_rise.reason
    untrained_too = locate.reading(t, _result(_curve(0.5, 0.9, 5), _curve(0.5, 0.9, 5), chance))
    assert untrained_too.label == "inconclusive" and "training adds" in untrained_too.reason
    control_too = locate.reading(t, _result(_curve(0.5, 0.9, 5), flat, _curve(0.5, 0.9, 5)))
    assert control_too.label == "inconclusive" and "its control" in control_too.reason


def test_the_meaning_task_has_a_control_that_can_fail():
    meaning = _task("meaning")
    assert meaning.control == "token" and meaning.band == "late"
    assert {t.name for t in locate.tasks()} >= set(locate.CALIBRATIONS.values())


def _model(where: dict) -> dict:
    """One made-up model's readings: every task's rise located at ``where[task]`` (default: its band's)."""
    first = {"early": 2, "middle": 6, "late": 10}
    flat = _curve(0.5, 0.5, 1)
    out = {}
    for t in locate.tasks():
        at = where.get(t.name, first[t.band])
        out[t.name] = locate.reading(t, _result(_curve(0.5, 0.9, at), flat, flat))
    return out


def test_a_label_stands_where_both_models_give_it_and_the_claim_goes_both_ways():
    per_task, claim = locate.decide([_model({}), _model({})])
    assert claim.label == "confirmed"
    _, claim = locate.decide([_model({n: 11 for n in locate.CLAIM_TASKS[:4]} | {"meaning": 2})] * 2)
    assert claim.label == "not reproduced"
    per_task, claim = locate.decide([_model({}), _model({"phrase structure": 11})])
    assert per_task["phrase structure"].label == "inconclusive" and "disagree" in per_task["phrase structure"].reason
    with pytest.raises(ValueError, match="two models"):
        locate.decide([_model({})])


def test_a_calibration_not_located_in_its_band_makes_that_bands_tasks_not_testable():
    per_task, claim = locate.decide([_model({"planted at block 6": 10}), _model({})])
    assert per_task["planted at block 6"].label == "inconclusive"
    _, claim = locate.decide([_model({"planted at block 6": 10})] * 2)
    assert "not testable for phrase structure" in claim.reason


def test_version_5_is_declared_apart_from_version_4():
    assert locate.RULE_VERSION == probes.RULE_VERSION + 1 and locate.SEED_BASE != probes.SEED_BASE
    assert 0 not in locate.MODEL_SEEDS  # the shipped model (seed 0) decides nothing


def test_the_rule_was_committed_before_any_model_it_decides_on_was_probed():
    """A rule written after seeing the data it decides on decides nothing on them: the last commit that changed
    ``locate.py`` must be older than the first commit that added a new model's probes."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists() or shutil.which("git") is None:
        assert not os.environ.get("CI"), "CI runs on a clone: its history must be there"
        pytest.skip("no git history here")

    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout
        return out.split()

    rule = git("log", "-1", "--format=%ct", "--", "andrea/trained/locate.py")
    probed = git("log", "--diff-filter=A", "--format=%ct", "--", "andrea/results/replicas/seed-*/probes*.json")
    assert rule, "locate.py has no commit"
    assert probed, "no new model's probes are committed"
    assert int(rule[0]) < min(map(int, probed)), "locate.py changed after a new model's probes were committed"
