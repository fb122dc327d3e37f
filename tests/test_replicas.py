"""Chapter 8's version-5 runner (``andrea.trained.replicas``): it probes as version 4 does, with version 5's
probe seeds and the planted bit at another block, and leaves version 4's settings as they were."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from andrea.model.config import AndreaConfig
from andrea.model.transformer import Andrea
from andrea.trained import locate, probes, replicas


def _tiny():
    torch.manual_seed(0)
    return Andrea(AndreaConfig(vocab_size=64, context_length=16, d_model=16, n_layer=6, n_head=2)).eval()


def test_planting_at_block_4_is_version_4s_planting_and_another_block_differs():
    m = _tiny()
    ids = np.random.default_rng(0).integers(0, 64, size=(4, 16))
    bits = np.random.default_rng(1).integers(0, 2, size=(4, 16))
    assert np.array_equal(replicas.planted_at(m, ids, bits, 4), probes.planted_features(m, ids, bits))
    at2 = replicas.planted_at(m, ids, bits, 2)
    clean = probes.features(m, ids)
    assert np.array_equal(at2[:2], clean[:2]) and not np.array_equal(at2[2], clean[2])
    assert probes.PLANT["block"] == 4  # version 4's setting is left as it was


def test_version_5s_probes_use_its_own_probe_seeds_and_the_planted_labels(monkeypatch):
    es = {"prose_ids": np.random.default_rng(2).integers(0, 64, size=(12, 16)), "prose_file": np.arange(12)}
    es["prose_manual"] = np.arange(12) % 3
    feats = np.random.default_rng(3).standard_normal((3, 12 * 16, 4)).astype(np.float32)
    task = next(t for t in locate.tasks() if t.name == "planted at block 2")
    got = replicas.probe_task(task, es, feats, seeds=2)
    assert probes.SEED_BASE == 4000 and probes.task_data.__name__ == "task_data"  # restored
    monkeypatch.setattr(probes, "SEED_BASE", locate.SEED_BASE)
    want = probes.probe_task(replace(task, name="planted"), es, feats, seeds=2)
    assert np.array_equal(got["task"], want["task"]) and np.array_equal(got["control"], want["control"])


def test_a_replica_seed_must_be_a_declared_one():
    with pytest.raises(ValueError, match="must be one of"):
        replicas.folder(0)  # the shipped model's seed decides nothing


def test_stored_probes_name_a_missing_file_another_version_and_other_weights(tmp_path, monkeypatch):
    import json

    from andrea.trained import replicas

    monkeypatch.setattr(replicas, "REPLICAS", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"seed-1/probes.json.*replicas probe 1"):
        replicas.stored()
    for seed in locate.MODEL_SEEDS:
        (tmp_path / f"seed-{seed}").mkdir()
        (tmp_path / f"seed-{seed}" / "trained.json").write_text(json.dumps({"weights_sha256": "a" * 64}))
        for name in ("probes.json", "probes-second-cpu.json"):
            blob = {"rule_version": locate.RULE_VERSION, "seed": seed, "weights_sha256": "a" * 64, "found": {}}
            (tmp_path / f"seed-{seed}" / name).write_text(json.dumps(blob))
    with pytest.raises(FileNotFoundError, match=r"shipped/probes.json.*probe-shipped"):
        replicas.stored()
    (tmp_path / "shipped").mkdir()
    (tmp_path / "shipped" / "probes.json").write_text(json.dumps({"rule_version": 4, "seed": 0, "found": {}}))
    with pytest.raises(ValueError, match="version 4's probes of seed 0; expected version 5"):
        replicas.stored()
    (tmp_path / "shipped" / "probes.json").write_text(json.dumps({"rule_version": 5, "seed": 0, "found": {}}))
    assert len(replicas.stored()["second_cpu"]) == len(locate.MODEL_SEEDS)
    (tmp_path / "seed-2" / "trained.json").write_text(json.dumps({"weights_sha256": "b" * 64}))
    with pytest.raises(ValueError, match="seed-2/probes.json.*not made from the weights"):
        replicas.stored()
