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
