"""Faults and bad input: nothing lost, nothing silently wrong, a one-line message instead of a traceback.

Real signals, concurrent runs, truncated and zero-byte files for each cache kind, hostile checkpoints.
"""

import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from andrea import Andrea, AndreaConfig, gradient_flow, random_batch
from andrea.model.transformer import read_checkpoint

PY = sys.executable


def cli(*args, cwd=None, timeout=300, env=None):
    return subprocess.run(
        [PY, "-m", "andrea.training.train", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "small.txt"
    p.write_text("LayerNorm standardises each token; GELU is smooth; residuals add. " * 400)
    return p


def base_args(corpus, out, steps=4, *extra):
    return [
        "--preset",
        "tiny-bytes",
        "--corpus",
        str(corpus),
        "--steps",
        str(steps),
        "--out",
        str(out),
        "--samples",
        "0",
        *extra,
    ]


# ---------------------------------------------------------------------------------------------
# Losing work
# ---------------------------------------------------------------------------------------------
def test_fresh_run_refuses_an_existing_checkpoint(corpus, tmp_path):
    assert cli(*base_args(corpus, tmp_path)).returncode == 0
    before = (tmp_path / "last.pt").read_bytes()
    again = cli(*base_args(corpus, tmp_path))
    assert again.returncode == 2 and "already holds a checkpoint" in again.stderr and "--resume" in again.stderr
    assert (tmp_path / "last.pt").read_bytes() == before  # untouched
    over = cli(*base_args(corpus, tmp_path, 4, "--overwrite", "--seed", "1"))
    assert over.returncode == 0 and (tmp_path / "last.pt").read_bytes() != before


def test_each_preset_has_its_own_default_out(corpus, tmp_path):
    a = cli("--preset", "tiny-bytes", "--corpus", str(corpus), "--steps", "2", "--samples", "0", cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    first = (tmp_path / "runs" / "tiny-bytes" / "last.pt").read_bytes()
    b = cli("--preset", "tiny", "--corpus", str(tmp_path / "missing.txt"), cwd=tmp_path)
    assert b.returncode == 2 and "missing.txt" in b.stderr
    assert (tmp_path / "runs" / "tiny").is_dir() and not (tmp_path / "runs" / "tiny" / "last.pt").exists()
    assert (tmp_path / "runs" / "tiny-bytes" / "last.pt").read_bytes() == first


def test_two_runs_into_one_out_the_second_is_refused(corpus, tmp_path):
    first = subprocess.Popen(
        [PY, "-m", "andrea.training.train", *base_args(corpus, tmp_path, 100000, "--eval-every", "100000")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        lock = tmp_path / ".lock"
        while time.time() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.2)
        second = cli(*base_args(corpus, tmp_path, 4, "--overwrite"))
        assert second.returncode == 2
        assert f"another training run (process {first.pid})" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGTERM
    Andrea.load(tmp_path / "last.pt")  # the first run's checkpoint is whole


def test_concurrent_saves_never_clash(tmp_path):
    m = Andrea(AndreaConfig(vocab_size=64, context_length=16, d_model=32, n_head=4, n_layer=2))
    errors = []

    def save_many():
        try:
            for _ in range(10):
                m.save(tmp_path / "same.pt")
        except Exception as e:  # noqa: BLE001 - any failure is the bug
            errors.append(e)

    threads = [threading.Thread(target=save_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    Andrea.load(tmp_path / "same.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["same.pt"]  # no temporary file left behind


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_save_a_checkpoint(corpus, tmp_path, sig):
    proc = subprocess.Popen(
        [PY, "-m", "andrea.training.train", *base_args(corpus, tmp_path, 100000, "--eval-every", "100000")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        err = b""
        while time.time() < deadline:  # wait until training has taken a few steps
            time.sleep(0.5)
            if proc.poll() is not None:
                break
            if not (tmp_path / ".lock").exists():
                continue
            time.sleep(3)
            break
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err[-2000:]
    assert f"interrupted by {signal.Signals(sig).name}" in out
    assert read_checkpoint(tmp_path / "last.pt")["extra"]["step"] >= 1


def test_unusable_out_is_refused_before_training(corpus, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for out, words in (
        (afile, "is a file"),
        (afile / "sub", "cannot be written"),
        (Path("/proc/andrea-cannot-exist"), "cannot be written"),
    ):
        t0 = time.time()
        r = cli(*base_args(corpus, out, 100000))
        assert r.returncode == 2 and words in r.stderr and "--out" in r.stderr, r.stderr
        assert time.time() - t0 < 60 and "training:" not in r.stderr  # refused before any step


def test_split_too_small_for_evaluation_is_refused_before_training(tmp_path):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("abcdefghij" * 110)  # 1100 bytes: the validation split has 110, a window needs 129
    r = cli(
        "--preset", "tiny-bytes", "--corpus", str(tiny), "--steps", "5", "--out", str(tmp_path / "o"), "--samples", "0"
    )
    assert r.returncode == 2 and "val split" in r.stderr and "too few" in r.stderr
    assert not (tmp_path / "o" / "last.pt").exists()


def _history(path):
    return read_checkpoint(path)["extra"]["history"]


def test_resume_is_bit_identical_after_real_signals_at_random_moments(corpus, tmp_path):
    # One math thread in every process: multi-threaded CPU kernels may sum in a different order from
    # run to run (float32 differences of ~1e-7 with no resume at all), which is not what this tests.
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    steps, every = 40, 10
    full = tmp_path / "full"
    assert cli(*base_args(corpus, full, steps, "--eval-every", str(every)), env=env).returncode == 0
    want = _history(full / "last.pt")
    rng = random.Random(1234)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        out = tmp_path / signal.Signals(sig).name
        proc = subprocess.Popen(
            [PY, "-m", "andrea.training.train", *base_args(corpus, out, steps, "--eval-every", str(every))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        time.sleep(rng.uniform(2.0, 8.0))  # anywhere: loading data, mid-step, mid-evaluation, mid-save
        proc.send_signal(sig)
        proc.communicate(timeout=120)
        for _ in range(3):  # continue until done, as a user would (fresh start if nothing was saved yet)
            ckpt = out / "last.pt"
            if ckpt.exists() and read_checkpoint(ckpt)["extra"]["step"] == steps:
                break
            resume = ["--resume"] if ckpt.exists() else []
            r = cli(*base_args(corpus, out, steps, "--eval-every", str(every)), *resume, env=env)
            assert r.returncode == 0, r.stderr[-2000:]
        got = _history(out / "last.pt")
        assert got["loss"] == want["loss"], signal.Signals(sig).name
        assert got["val_loss"] == want["val_loss"]
        a, b = Andrea.load(out / "last.pt"), Andrea.load(full / "last.pt")
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_resume_names_every_changed_setting_and_refuses(corpus, tmp_path):
    assert cli(*base_args(corpus, tmp_path, 4)).returncode == 0
    r = cli(*base_args(corpus, tmp_path, 8, "--resume", "--lr", "0.01", "--batch-size", "8"))
    assert r.returncode == 2
    assert "lr: 0.003 (checkpoint) -> 0.01 (now)" in r.stderr and "batch_size: 16 (checkpoint) -> 8 (now)" in r.stderr
    other = tmp_path.parent / "other-corpus.txt"
    other.write_text("A different text, long enough to train on. " * 400)
    r = cli(
        "--preset",
        "tiny-bytes",
        "--corpus",
        str(other),
        "--steps",
        "8",
        "--out",
        str(tmp_path),
        "--samples",
        "0",
        "--resume",
    )
    assert r.returncode == 2 and "corpus:" in r.stderr
    ok = cli(*base_args(corpus, tmp_path, 8, "--resume", "--lr", "0.01", "--allow-changes"))
    assert ok.returncode == 0 and "done: step 8" in ok.stdout


def test_resume_with_no_steps_left_says_why(corpus, tmp_path):
    assert cli(*base_args(corpus, tmp_path, 4)).returncode == 0
    r = cli(*base_args(corpus, tmp_path, 4, "--resume"))
    assert r.returncode == 2 and "already at step 4" in r.stderr and "--steps larger than 4" in r.stderr
    assert "nan" not in r.stdout + r.stderr


def test_divergence_stops_keeps_the_last_good_checkpoint_and_skips_sampling(corpus, tmp_path):
    r = cli(
        "--preset",
        "tiny-bytes",
        "--corpus",
        str(corpus),
        "--steps",
        "30",
        "--eval-every",
        "1",
        "--lr",
        "1000",
        "--out",
        str(tmp_path),
        "--samples",
        "2",
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert "diverged at step" in r.stdout and "--- sample" not in r.stdout
    step = read_checkpoint(tmp_path / "last.pt")["extra"]["step"]
    assert f"Last good checkpoint: {tmp_path / 'last.pt'} (step {step})" in r.stdout
    m = Andrea.load(tmp_path / "last.pt")
    assert all(torch.isfinite(p).all() for p in m.parameters())


# ---------------------------------------------------------------------------------------------
# Hostile and damaged checkpoints
# ---------------------------------------------------------------------------------------------
SMALL = AndreaConfig(vocab_size=256, context_length=32, d_model=32, n_head=4, n_layer=2)


def test_zero_byte_and_truncated_checkpoints(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="is empty"):
        Andrea.load(empty)
    good = Andrea(SMALL).save(tmp_path / "good.pt")
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[:500])
    with pytest.raises(ValueError, match="not a readable ANDREA checkpoint"):
        Andrea.load(cut)


def test_checkpoint_without_config_or_with_wrong_weights(tmp_path):
    good = Andrea(SMALL).save(tmp_path / "good.pt")
    blob = torch.load(good, weights_only=True)
    no_config = dict(blob)
    del no_config["config"]
    torch.save(no_config, tmp_path / "noconf.pt")
    with pytest.raises(ValueError, match="has no config"):
        Andrea.load(tmp_path / "noconf.pt")
    wrong = dict(blob, state_dict=dict(blob["state_dict"], **{"blocks.0.mlp.fc.weight": torch.zeros(3, 3)}))
    torch.save(wrong, tmp_path / "wrong.pt")
    with pytest.raises(ValueError, match="should be a float tensor of shape"):
        Andrea.load(tmp_path / "wrong.pt")


def test_resume_from_a_weights_only_file_says_so(corpus, tmp_path):
    Andrea(replace(SMALL, d_model=128, n_head=4, n_layer=4, context_length=256)).save(tmp_path / "last.pt")
    r = cli(*base_args(corpus, tmp_path, 4, "--resume"))
    assert r.returncode == 2 and "no training state" in r.stderr and "Andrea.load" in r.stderr
    assert "Traceback" not in r.stderr


def test_resume_with_a_hostile_optimizer_state(corpus, tmp_path):
    assert cli(*base_args(corpus, tmp_path, 4)).returncode == 0
    blob = torch.load(tmp_path / "last.pt", weights_only=True)
    blob["extra"]["optimizer"] = {"state": {}, "param_groups": [{"params": [0]}]}
    torch.save(blob, tmp_path / "last.pt")
    r = cli(*base_args(corpus, tmp_path, 8, "--resume"))
    assert r.returncode == 2 and "optimizer state" in r.stderr and "Traceback" not in r.stderr


def test_a_flipped_byte_in_a_checkpoint_is_refused_on_resume(corpus, tmp_path):
    """torch.load would read the damaged weights silently; the zip archive's CRC-32 sums catch it."""
    import zipfile

    assert cli(*base_args(corpus, tmp_path, 4)).returncode == 0
    ckpt = tmp_path / "last.pt"
    with zipfile.ZipFile(ckpt) as z:
        member = max(z.infolist(), key=lambda i: i.file_size)  # the largest tensor's bytes
    blob = bytearray(ckpt.read_bytes())
    blob[member.header_offset + 200 + member.file_size // 2] ^= 0x01
    ckpt.write_bytes(bytes(blob))
    torch.load(ckpt, weights_only=True)  # the damage is invisible to torch
    r = cli(*base_args(corpus, tmp_path, 8, "--resume"))
    assert r.returncode == 2 and "is corrupted" in r.stderr and "checksum" in r.stderr, r.stderr[-1500:]
    assert str(ckpt) in r.stderr and "Traceback" not in r.stderr


def test_a_checkpoint_with_non_finite_weights_is_neither_resumed_nor_called_good(corpus, tmp_path):
    from andrea.training.checkpoint import describe

    assert cli(*base_args(corpus, tmp_path, 4)).returncode == 0
    ckpt = tmp_path / "last.pt"
    assert describe(ckpt) == f"{ckpt} (step 4)"
    blob = torch.load(ckpt, weights_only=True)
    blob["state_dict"]["blocks.0.mlp.fc.weight"] = torch.full_like(
        blob["state_dict"]["blocks.0.mlp.fc.weight"], float("nan")
    )
    torch.save(blob, ckpt)
    assert "not a good checkpoint" in describe(ckpt)
    r = cli(*base_args(corpus, tmp_path, 8, "--resume"))
    assert r.returncode == 2 and "non-finite weights (blocks.0.mlp.fc.weight)" in r.stderr, r.stderr[-1500:]
    assert "Traceback" not in r.stderr


def test_a_pickle_that_runs_code_is_refused_and_never_executed(tmp_path):
    import pickle

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with open(tmp_path / "evil.pt", "wb") as f:
        pickle.dump({"format": "andrea-checkpoint", "x": Evil()}, f)
    with pytest.raises(ValueError):
        Andrea.load(tmp_path / "evil.pt")
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# One-line errors where tracebacks were
# ---------------------------------------------------------------------------------------------
def test_device_meta_and_unknown_devices(corpus, tmp_path):
    for dev in ("meta", "cuda:7", "gpu"):
        r = cli(*base_args(corpus, tmp_path / dev, 2, "--device", dev))
        assert r.returncode == 2 and f"--device '{dev}'" in r.stderr and "available here" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_gradient_flow_inside_no_grad():
    torch.manual_seed(0)
    m = Andrea(SMALL)
    idx, tgt = random_batch(256, 2, 8)
    want = gradient_flow(m, idx, tgt)
    with torch.no_grad():
        got = gradient_flow(m, idx, tgt)
    assert got.finite and (got.grad_rms == want.grad_rms).all()


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(layerscale=1e39), ["layerscale", "1e+39", "3.4e38"]),
        (dict(ln_eps=True), ["ln_eps", "True"]),
        (dict(init_std=True), ["init_std", "True"]),
        (dict(dropout=False), ["dropout", "False"]),
        (dict(init="kaiming"), ["init", "'kaiming'", "'xavier'"]),
        (dict(norm="deepnorm", residual=False), ["deepnorm", "residual=True"]),
        (dict(layerscale_kind="row"), ["layerscale_kind", "'row'", "'scalar'"]),
    ],
)
def test_config_refuses_values_the_model_cannot_hold(kw, words):
    with pytest.raises(ValueError) as e:
        AndreaConfig(**kw)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_widget_device_and_seed_are_checked():
    from andrea.views.widgets import GradientFlowExplorer

    for dev, words in (
        ("cuda", "'cuda' is not usable here"),
        ("meta", "cannot run the model"),
        ("tpu:0", "is not a device name"),
    ):
        if dev == "cuda" and torch.cuda.is_available():
            continue
        with pytest.raises(ValueError, match=words):
            GradientFlowExplorer(width=64, device=dev)
    with pytest.raises(ValueError, match="seed must be an integer from 0 to 10000, got 10001"):
        GradientFlowExplorer(width=64, seed=10001)
    w = GradientFlowExplorer(width=64, depth=2, seed=3)
    w.controls["seed"].value = 10001  # typed in the box: refused, said, and put back
    assert w.controls["seed"].value == 3 and "10001" in w.status.value and w.figure_data["setting"].seed == 3


# ---------------------------------------------------------------------------------------------
# Caches: written atomically, checked on read, rebuilt when bad
# ---------------------------------------------------------------------------------------------
DAMAGE = {"truncate": lambda d: d[: len(d) // 2], "zero": lambda d: b"", "garbage": lambda d: b"\x00not-it" * 50}


def _damage_and_reload(path, damage, reload):
    data = path.read_bytes()
    path.write_bytes(DAMAGE[damage](data))
    with pytest.warns(UserWarning, match=f"ignoring the cache file .*{path.name}"):
        value = reload()
    assert path.read_bytes() == data  # rebuilt, identical
    return value


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_cache_files_are_reported_and_rebuilt(tmp_path, monkeypatch, corpus, damage):
    monkeypatch.setenv("ANDREA_CACHE", str(tmp_path))
    from andrea.training import data as D

    small = corpus.read_text()
    tok = D.BPETokenizer.train(small, vocab_size=300)  # the tokenizer cache
    (tok_file,) = tmp_path.glob("bpe-300-*.json")
    again = _damage_and_reload(tok_file, damage, lambda: D.BPETokenizer.train(small, vocab_size=300))
    assert again.encode("residuals add") == tok.encode("residuals add")
    good = D.load_token_data("bytes", corpus)  # the token-id cache
    (ids_file,) = tmp_path.glob("ids-bytes-*.npy")
    again = _damage_and_reload(ids_file, damage, lambda: D.load_token_data("bytes", corpus))
    assert torch.equal(again.train, good.train) and torch.equal(again.val, good.val)


def test_a_save_killed_before_its_rename_leaves_no_file_forever(tmp_path, capsys):
    """A SIGKILL between writing a checkpoint's temporary file and renaming it leaves the file; the next
    run that takes the folder removes it and says so."""
    from andrea.files import temporary_name
    from andrea.training.checkpoint import RunDir

    stray = temporary_name(tmp_path / "last.pt")
    stray.write_bytes(b"half a checkpoint")
    keep = tmp_path / "notes.txt"
    keep.write_text("the reader's own file")
    with RunDir(tmp_path) as run:
        assert not stray.exists() and keep.exists()
        assert run.remove_stray_temporaries() == []
    assert f"removed 1 temporary file(s) left by an interrupted save: {stray.name}" in capsys.readouterr().err


def test_cache_writes_leave_no_temporary_files(tmp_path, monkeypatch):
    monkeypatch.setenv("ANDREA_CACHE", str(tmp_path))
    from andrea.training.data import load_token_data

    load_token_data("bytes")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_results_store_refuses_wrong_or_incomplete_files(tmp_path, monkeypatch):
    from andrea.evidence import evaluation, grids, store

    monkeypatch.setattr(store, "RESULTS", tmp_path)
    g = grids.grid("app_layerscale_kind")
    with pytest.raises(store.StoreError, match="no stored results"):
        store.load(g)
    store.path(g.name).write_text("{}")
    with pytest.raises(store.StoreError, match="is not the results file"):
        store.load(g)
    store.path(g.name).write_text("{not json")
    with pytest.raises(store.StoreError, match="not readable JSON"):
        store.load(g)
    real = json.loads((Path(evaluation.__file__).parents[1] / "results" / f"{g.name}.json").read_text())
    store.path(g.name).write_text(json.dumps(dict(real, cells=real["cells"][:2])))
    with pytest.raises(store.StoreError, match="has 2 runs"):
        store.load(g)
    broken = json.loads(json.dumps(real))
    del broken["cells"][3]["result"]["final_val_loss"]
    store.path(g.name).write_text(json.dumps(broken))
    with pytest.raises(store.StoreError, match="lacks"):
        store.load(g)
    store.path(g.name).write_text(json.dumps(dict(real, key="0-0")))
    with pytest.raises(store.StoreError, match="made by other code"):
        store.load(g)
    # a hand edit that keeps the key: one run's loss moved, or two runs' results swapped
    edited = json.loads(json.dumps(real))
    edited["cells"][4]["result"]["final_val_loss"] += 1.0
    swapped = json.loads(json.dumps(real))
    a, b = swapped["cells"][3], swapped["cells"][4]
    a["result"], b["result"] = b["result"], a["result"]
    for blob in (edited, swapped):
        store.path(g.name).write_text(json.dumps(blob))
        with pytest.raises(store.StoreError, match=f"{g.name}.json.*do not match the digest"):
            store.load(g)


def test_explorer_shipped_file_wrong_content_is_not_used(tmp_path, monkeypatch):
    from andrea.evidence import store
    from andrea.views import explorer as E

    real = json.loads(store.path(E.SHIPPED).read_text())
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    for content in ("{}", json.dumps(dict(real, settings=real["settings"][:2])), "garbage"):
        store.path(E.SHIPPED).write_text(content)
        monkeypatch.setattr(E, "_SHIPPED", None)  # restored after the test: later tests read the real file
        if content == "{}":
            assert len(E.shipped()) == 0 and E.shipped().problem  # other code's (no key): not used
            continue
        with pytest.warns(UserWarning, match="ignoring"):
            assert len(E.shipped()) == 0
    monkeypatch.setattr(E, "_SHIPPED", None)
    s = E.Setting(depth=2, width=64)
    assert math.isfinite(E.probe(s, cache=None).grad_ratio)  # measured live instead


# ---------------------------------------------------------------------------------------------
# Exercise checkers judge answers, not side effects
# ---------------------------------------------------------------------------------------------
def test_checkers_accept_in_place_answers_and_reject_mutating_cheats():
    from andrea.views import exercises as X

    def gelu_derivative_in_place(x):  # right answer, computed by overwriting its input
        cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
        phi = torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        return x.mul_(phi).add_(cdf)

    def zeroing_cheat(x, *rest):  # zeroes its inputs and returns zeros
        for t in (x, *rest):
            if isinstance(t, torch.Tensor):
                t.zero_()
        return torch.zeros_like(x)

    def rms_norm_in_place(x, g, e):
        return x.div_(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + e)).mul_(g)

    assert X.check_gelu_derivative(gelu_derivative_in_place)
    assert not X.check_gelu_derivative(zeroing_cheat)
    assert X.check_rms_norm(rms_norm_in_place)
    assert not X.check_rms_norm(zeroing_cheat)
    assert X.check_rms_norm(lambda x, g, e: g * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + e))


def test_a_killed_grid_leaves_no_idle_worker_behind(tmp_path):
    """SIGKILL runs no clean-up: the grid's worker processes must notice that their parent is gone."""
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import multiprocessing, os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from andrea.evidence.store import die_with_parent\n"
        "ctx = multiprocessing.get_context('spawn')\n"
        "pool = ProcessPoolExecutor(2, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),))\n"
        "list(pool.map(abs, [1, 2]))  # the workers have started\n"
        "print(' '.join(str(p.pid) for p in pool._processes.values()), flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    workers = [int(x) for x in proc.stdout.readline().split()]
    assert len(workers) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 15
    alive = workers
    while alive and time.time() < deadline:
        time.sleep(0.5)
        alive = [w for w in workers if _alive(w)]
    assert not alive, f"workers {alive} outlived their killed parent"


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
