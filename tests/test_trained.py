"""The trained ANDREA that ships with the book: its files, its first steps, its instruments."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from andrea.trained import inside, probes
from andrea.trained import model as trained
from andrea.training import manuals as corpus


@pytest.fixture(scope="module")
def models():
    return trained.load(), trained.untrained()


@pytest.fixture(scope="module")
def es():
    return trained.eval_set()


def test_weights_are_shipped_small_and_match_their_hash():
    blob = trained.WEIGHTS.read_bytes()
    assert len(blob) <= 25e6, f"{len(blob) / 1e6:.1f} MB: the issue allows 25 MB"
    assert hashlib.sha256(blob).hexdigest() == trained.log()["weights_sha256"]
    assert trained.status() == "current", "the stored log was made by other training code: make experiments"


def test_an_altered_weights_file_is_refused(tmp_path):
    bad = tmp_path / "model.safetensors"
    data = bytearray(trained.WEIGHTS.read_bytes())
    data[-1] ^= 1
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="altered"):
        trained.load(bad)
    with pytest.raises(trained.NotShipped, match="make experiments"):
        trained.load(tmp_path / "missing.safetensors")


def test_a_log_edited_or_damaged_by_hand_is_refused_by_name(tmp_path, monkeypatch):
    """The log's configs are covered: another activation in trained.json would build another model from
    the same weights; a truncated log is named, and status() says "altered" instead of crashing."""
    import json

    real = json.loads(trained.LOG.read_text())
    log = tmp_path / "trained.json"
    monkeypatch.setattr(trained, "LOG", log)
    log.write_text(json.dumps({**real, "model_config": {**real["model_config"], "activation": "relu"}}))
    with pytest.raises(ValueError, match="trained.json.*model_config.activation: 'relu'"):
        trained.load()
    assert trained.status() == "altered"
    log.write_text(json.dumps(real)[:500])
    with pytest.raises(ValueError, match="trained.json.*not readable JSON"):
        trained.load()
    assert trained.status() == "altered"
    log.write_text(json.dumps(real))
    assert trained.status() == "current" and trained.load() is not None


def test_an_altered_evaluation_set_is_refused_by_name(tmp_path, monkeypatch):
    """The held-out windows and the probes' labels are checked against the SHA-256 in the log: altered
    labels, or a truncated file, are refused naming the file (they were read as they were)."""
    data = bytearray(trained.EVAL.read_bytes())
    bad = tmp_path / "eval.npz"
    monkeypatch.setattr(trained, "EVAL", bad)
    for broken in (bytes(data[: len(data) // 2]), bytes(data[:-1]) + bytes([data[-1] ^ 1])):
        bad.write_bytes(broken)
        with pytest.raises(ValueError, match="eval.npz.*altered"):
            trained.eval_set()
    bad.unlink()
    with pytest.raises(trained.NotShipped, match="eval.npz"):
        trained.eval_set()


def test_the_shipped_model_beats_both_baselines(models, es):
    m, u = models
    ids = torch.from_numpy(es["prose_ids"][:16].astype(np.int64))
    with torch.no_grad():
        loss = float(m.loss(ids[:, :-1], ids[:, 1:]))
        loss_u = float(u.loss(ids[:, :-1], ids[:, 1:]))
    b = trained.log()["baselines"]
    assert loss < b["bigram_ce"] < b["unigram_ce"] < loss_u


def test_the_stored_probes_were_made_from_the_shipped_weights_and_todays_code(monkeypatch, tmp_path):
    assert trained.probes_status() == "current", "probes.json is stale: python -m andrea.trained.model --probes"
    found = trained.probe_results()
    assert set(found) == {t.name for t in probes.TASKS}
    assert found["position"]["trained"]["task"].shape == (probes.PROBE_SEEDS, trained.CONFIG.n_layer + 1)
    # another evaluation set (or other weights, or other code) makes the file stale: then it is not read
    monkeypatch.setattr(trained, "EVAL", tmp_path / "eval.npz")
    (tmp_path / "eval.npz").write_bytes(trained.RESULTS.joinpath("eval.npz").read_bytes() + b"\0")
    assert trained.probes_status() == "stale"


PROBES_TOLERANCE = 0.002  # balanced accuracy: a few of the 4000 test tokens per class set


def _probe_differences(stored: dict, fresh: dict) -> float:
    return max(
        float(np.max(np.abs(stored[t][m][k] - fresh[t][m][k])))
        for t in fresh
        for m in fresh[t]
        for k in ("task", "control")
    )


def test_a_part_of_the_probes_is_named():
    with pytest.raises(ValueError, match="part must be one of"):
        trained.run_probes(("trained", "poetry"))


@pytest.mark.slow
def test_the_stored_probes_reproduce_natively_and_on_portable_kernels():
    """The chapter reads probes.json; here one part of the probes (a model and a text, drawn from the
    commit's hash: over commits, all four) runs again from the shipped weights, in this process and, at
    the same time, in a child on torch's portable kernels (another CPU, emulated). Every accuracy must
    agree within PROBES_TOLERANCE, and every task's verdict, with that part replaced, must be the same.
    (``python -m andrea.trained.model --probes`` re-runs them all.)"""
    import json
    import os
    import subprocess
    import sys

    from andrea.evidence.rerun import sample_seed
    from andrea.evidence.store import EMULATED

    part = trained.PROBE_PARTS[int(hashlib.sha256(sample_seed().encode()).hexdigest(), 16) % 4]
    code = f"import json; from andrea.trained import model as M; print(json.dumps(M._to_json(M.run_probes({part!r}))))"
    env = dict(os.environ, **EMULATED, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        native = trained.run_probes(part)
    finally:
        torch.set_num_threads(threads)
    out, err = child.communicate(timeout=1200)
    assert child.returncode == 0, err.decode()[-2000:]
    emulated = trained._from_json(json.loads(out.decode().strip().splitlines()[-1]))
    stored = trained.probe_results()
    labels = {k: v.label for k, (v, _) in probes.decide_all(stored).items()}
    for name, fresh in (("native", native), ("portable kernels", emulated)):
        diff = _probe_differences(stored, fresh)
        print(f"probes {part}, {name} vs stored: largest difference in balanced accuracy {diff:.2g}")
        assert diff <= PROBES_TOLERANCE, f"{name}: probes {part} differ from probes.json by up to {diff:.3g}"
        merged = {t: {**stored[t], **fresh.get(t, {})} for t in stored}
        assert {k: v.label for k, (v, _) in probes.decide_all(merged).items()} == labels, name


def test_an_altered_or_missing_tokenizer_is_refused_by_name(tmp_path, monkeypatch):
    """The tokenizer the weights were trained with ships beside them, checked against the log's SHA-256:
    another one (a fresh BPE trained on another Python's docs, say) would feed the model ids it never
    learned, without any error."""
    real = trained.TOKENIZER.read_bytes()
    bad = tmp_path / "tokenizer.json"
    monkeypatch.setattr(trained, "TOKENIZER", bad)
    bad.write_bytes(real.replace(b'"the"', b'"teh"', 1))
    with pytest.raises(ValueError, match="tokenizer.json.*not the tokenizer the model was trained with"):
        trained.tokenizer()
    bad.unlink()
    with pytest.raises(trained.NotShipped, match="tokenizer.json"):
        trained.tokenizer()


def test_the_trained_model_reads_its_own_tokenizer_whatever_python_runs_it(monkeypatch):
    """On another Python (Colab's 3.12) the installed docs differ, so ``get_tokenizer("bpe")`` trains
    another vocabulary. The trained model's text must not go through it: here the docs are replaced by
    other text, and the shipped tokenizer still gives the ids the held-out windows were made with."""
    from andrea.training import data

    monkeypatch.setattr(data, "python_docs_corpus", lambda *a, **k: "other text, " * 5000)
    tok = trained.tokenizer()
    assert tok.vocab_size == trained.CONFIG.vocab_size
    window = trained.eval_set()["prose_ids"][0].astype(np.int64).tolist()
    text = tok.decode(window)
    again = tok.encode(text)
    inner = window[4:-4]  # the window's edges may cut a word, and so re-tokenize differently
    assert any(again[i : i + len(inner)] == inner for i in range(len(again) - len(inner) + 1))


def test_first_steps_match_the_log():
    ok, fresh, logged = trained.first_steps_match()
    assert ok, f"first {len(logged)} losses re-run {np.round(fresh, 4)} vs logged {np.round(logged, 4)}"


def test_held_out_windows_never_occur_in_training():
    docs = corpus.manual_docs()
    assert {d.path for d in docs if d.held_out}.isdisjoint({d.path for d in docs if not d.held_out})
    train = corpus.token_data(trained.tokenizer(), docs).train.numpy()
    n = 24
    seen = {hash(train[i : i + n].tobytes()) for i in range(0, len(train) - n)}
    windows = trained.eval_set()["prose_ids"].astype(np.int64)
    hits = sum(hash(w[j : j + n].tobytes()) in seen for w in windows for j in range(0, len(w) - n, 64))
    assert hits <= 0.02 * len(windows) * 4, f"{hits} held-out 24-token runs also occur in the training text"


def test_logit_lens_at_the_top_is_the_model(models, es):
    m, _ = models
    ids = torch.from_numpy(es["prose_ids"][:4].astype(np.int64))
    lens = inside.logit_lens(m, ids)
    with torch.no_grad():
        acc = float((m(ids)[:, :-1].argmax(-1) == ids[:, 1:]).double().mean())
    assert lens["kl"][-1] < 1e-9 and abs(lens["accuracy"][-1] - acc) < 1e-12
    assert lens["kl"][0] > lens["kl"][-1]


def test_induction_scores_read_the_right_positions():
    """Hand-made attention patterns through the function the chapter calls (``inside.induction_scores``):
    an induction head (t -> t - L + 1 in the second copy, t -> t - 1 before it) scores 1 on induction and
    (L - 1) / (2L - 1) on previous-token; a previous-token head scores 1 and 0."""
    L = 6
    induction_head = torch.zeros(2 * L, 2 * L)
    previous_head = torch.zeros(2 * L, 2 * L)
    for t in range(2 * L):
        induction_head[t, t - L + 1 if t >= L else max(0, t - 1)] = 1.0
        previous_head[t, max(0, t - 1)] = 1.0
    maps = [torch.stack([induction_head, previous_head])[None], torch.stack([previous_head, induction_head])[None]]
    prev, ind = inside.induction_scores(maps, L)
    assert prev.shape == ind.shape == (2, 2)
    assert ind[0, 0] == ind[1, 1] == 1.0 and ind[0, 1] == ind[1, 0] == 0.0
    assert prev[0, 1] == prev[1, 0] == 1.0 and prev[0, 0] == pytest.approx((L - 1) / (2 * L - 1))
    ids = inside.repeated_random_tokens(100, batch=2, length=L)
    assert torch.equal(ids[:, :L], ids[:, L:])


def test_ridge_probe_reads_a_linear_label_and_not_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 16))
    y = (x @ rng.normal(size=(16, 3))).argmax(1)  # a linear label
    pred = probes.ridge_probe(x[:1000], [np.eye(3)[y[:1000]]], x[1000:])[0]
    assert probes.balanced_accuracy(pred, y[1000:], 3) > 0.85
    noise = rng.integers(0, 3, size=2000)
    pred = probes.ridge_probe(x[:1000], [np.eye(3)[noise[:1000]]], x[1000:])[0]
    assert abs(probes.balanced_accuracy(pred, noise[1000:], 3) - 1 / 3) < 0.06


def test_control_task_labels_token_types(es):
    feats = np.random.default_rng(0).normal(size=(13, es["prose_ids"].size, 8)).astype(np.float32)
    r = probes.probe_task(probes.TASKS[0], es, feats, seeds=2, n_train=500, n_test=500)
    # random features: the task and its control sit at chance (1/8) at every boundary
    assert np.abs(r["task"] - 1 / 8).max() < 0.06 and np.abs(r["control"] - 1 / 8).max() < 0.06


def test_a_names_role_comes_from_its_neighbour():
    # ids: 0 "foo" (no leading space), 1 " def", 2 ".", 3 " bar"; kinds: 0 name, 1 keyword, 2 operator
    es = {
        "token_defines": np.array([False, True, False, False]),
        "token_dot": np.array([False, False, True, False]),
        "token_space": np.array([False, True, False, True]),
    }
    ids = np.array([[3, 1, 3, 0, 2, 0, 3]])
    kind = np.array([[0, 1, 0, 0, 2, 0, 0]])
    # the window's first name has no neighbour; " bar" after def is defined and "foo" continues it;
    # "foo" after the dot is an attribute; " bar" after a name is another use
    assert probes.name_roles(ids, kind, es).tolist() == [[-1, -1, 0, -1, -1, 1, 2]]


def test_each_control_scrambles_its_own_unit():
    rng = np.random.default_rng(0)
    ids, files, freq = rng.integers(0, 50, size=(6, 16)), np.array([0, 0, 1, 1, 2, 2]), np.full(4, 0.25)
    by = {t.control: t for t in probes.TASKS}
    tok = probes.control_labels(by["token"], ids, files, freq, np.random.default_rng(1))
    pos = probes.control_labels(by["position"], ids, files, freq, np.random.default_rng(1))
    per_file = probes.control_labels(by["file"], ids, files, freq, np.random.default_rng(1))
    assert all(len(set(tok[ids == i])) == 1 for i in np.unique(ids))  # one label per token id
    assert (pos == pos[0]).all() and len(set(pos[0])) > 1  # one label per position
    assert (per_file[0] == per_file[0, 0]).all() and (per_file[0] == per_file[1]).all()  # one per file
    prev = probes.control_labels(by["previous"], ids, files, freq, np.random.default_rng(1))
    assert (prev[:, 1:][ids[:, :-1] == ids[0, 0]] == prev[0, 1]).all()  # one label per token before
    with pytest.raises(ValueError, match="control must be token, previous, position or file"):
        probes.control_labels(probes.Task("x", "early", "prose", ("a",), "word"), ids, files, freq, rng)


def test_the_planted_bit_enters_at_its_block_and_flows_on():
    """Boundaries before the planting block are untouched; at it the stream moves by exactly +-m
    along the planted direction; the blocks after it run on the changed stream."""
    from andrea import Andrea, AndreaConfig

    torch.manual_seed(0)
    model = Andrea(AndreaConfig(vocab_size=64, context_length=16, d_model=32, n_head=4, n_layer=6)).eval()
    ids = np.random.default_rng(0).integers(0, 64, size=(3, 16))
    bits = np.random.default_rng(1).integers(0, 2, size=(3, 16))
    clean = probes.features(model, ids, batch=2)
    planted = probes.planted_features(model, ids, bits, batch=2)
    k = probes.PLANT["block"]
    assert np.array_equal(clean[:k], planted[:k])
    u = probes.plant_direction(32)
    m = probes.PLANT["z"] * (clean[k].astype(np.float64) @ u).std()
    moved = (planted[k] - clean[k]).astype(np.float64)
    assert np.allclose(moved, np.outer(m * (2 * bits.reshape(-1) - 1), u), atol=1e-5)
    assert not np.allclose(clean[k + 1], planted[k + 1], atol=1e-4)


def test_eval_set_labels_are_consistent(es):
    assert es["prose_ids"].shape[1] == probes.WINDOW == es["code_ids"].shape[1]
    assert set(np.unique(es["prose_manual"])) == set(range(len(probes.MANUALS)))
    assert set(np.unique(es["prose_half"])) == {0, 1} and set(np.unique(es["code_half"])) == {0, 1}
    kinds = es["code_type"][es["code_type"] >= 0]
    assert set(np.unique(kinds)) == set(range(len(probes.CODE_TYPES)))
    assert probes.prose_category(" the") == 0 and probes.prose_category("ing") == 1
    assert probes.prose_category(",") == 2 and probes.prose_category(" 42") == 3 and probes.prose_category("\n") == 4


def test_code_labels_follow_tokenize():
    kind, depth = probes._code_labels("f(a, 'x')  # c\n")
    assert kind[0] == 0 and kind[1] == 2 and kind[5] == 3 and kind[11] == 5
    assert depth[2] == 1 and depth[0] == 0


def test_the_shipped_manuals_are_the_text_the_model_was_trained_on():
    """The manuals ship with the book (no apt package, the same text on every Python): the file gives
    the corpus digest, the files and the token counts that the training log recorded."""
    docs = corpus.manual_docs()
    log = trained.log()["corpus"]
    assert corpus.corpus_digest(docs) == log["digest"]
    assert corpus.describe(docs)["train"] == log["train"] and corpus.describe(docs)["val"] == log["val"]
    data = corpus.token_data(trained.tokenizer(), docs)
    assert {"train": len(data.train), "val": len(data.val)} == log["tokens"]


def test_an_altered_or_missing_corpus_is_refused_by_name(monkeypatch, tmp_path):
    blob = corpus.SHIPPED.read_bytes()
    bad = tmp_path / "manuals.jsonl.xz"
    monkeypatch.setattr(corpus, "SHIPPED", bad)
    bad.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(ValueError, match="manuals.jsonl.xz.*altered.*git checkout"):
        corpus.manual_docs()
    bad.unlink()
    with pytest.raises(FileNotFoundError, match="manuals.jsonl.xz.*restore it from git"):
        corpus.manual_docs()


def test_a_retrain_resumes_only_its_own_unfinished_run(tmp_path, capsys):
    """A second retrain into the same folder is no dead end: a finished run, or one made by other code,
    is moved aside with a message and a fresh run starts; an unfinished run of this code resumes."""
    from andrea import Andrea, AndreaConfig

    out = tmp_path / "trained"
    assert trained.prepare_run_dir(out) is False and (out / "KEY").read_text().strip() == trained.key()
    tiny = Andrea(AndreaConfig(vocab_size=16, context_length=8, d_model=8, n_head=2, n_layer=1))
    tiny.save(out / "last.pt", extra={"step": 100})
    assert trained.prepare_run_dir(out) is True  # ours, unfinished: resume
    tiny.save(out / "last.pt", extra={"step": trained.TRAIN.steps})
    assert trained.prepare_run_dir(out) is False  # finished: moved aside
    assert "it finished" in capsys.readouterr().out and not (out / "last.pt").exists()
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("trained.")]  # the finished run
    assert len(moved) == 1 and (moved[0] / "last.pt").is_file()
    tiny.save(out / "last.pt", extra={"step": 100})
    (out / "KEY").write_text("other-code\n")
    assert trained.prepare_run_dir(out) is False and "other code" in capsys.readouterr().out


def test_a_kill_at_any_point_of_a_publish_leaves_a_loadable_model(tmp_path, monkeypatch):
    """The weights, the evaluation set and the log are published as one unit (a staged folder, two
    renames): killed at any point, the next read finds the old model or the new one, whole."""
    import json
    import shutil

    from andrea.files import json_digest

    class Killed(BaseException):
        pass

    results = tmp_path / "trained"
    shutil.copytree(trained.RESULTS, results)
    for name in ("WEIGHTS", "LOG", "EVAL", "PROBES", "TOKENIZER"):
        monkeypatch.setattr(trained, name, results / getattr(trained, name).name)
    monkeypatch.setattr(trained, "RESULTS", results)
    points = ("staged", "old moved aside", "new in place")
    for point in points + (None,):
        stage = trained._stage()
        for f in results.iterdir():
            if f.name != trained.LOG.name:
                shutil.copy2(f, stage / f.name)
        log = {**json.loads(trained.LOG.read_text()), "published": point or "whole"}  # a new model's log,
        log["digest"] = json_digest(log)  # with its digest, as retrain writes one
        (stage / trained.LOG.name).write_text(json.dumps(log))

        def kill(where, point=point):
            if where == point:
                raise Killed(where)

        monkeypatch.setattr(trained, "_kill_point", kill)
        before = json.loads(trained.LOG.read_text()).get("published")
        try:
            trained.publish(stage)
        except Killed:
            pass
        assert trained.load() is not None and trained.status() == "current", point
        now = json.loads(trained.LOG.read_text()).get("published")
        assert now in (before, point or "whole"), (point, before, now)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["trained"]  # nothing left beside it
    assert json.loads(trained.LOG.read_text())["published"] == "whole"
    stage = trained._stage()  # a stage without its log is never published
    with pytest.raises(ValueError, match="incomplete"):
        trained.publish(stage)
