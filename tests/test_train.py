import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

from andrea import Andrea, AndreaConfig
from andrea.model.transformer import read_checkpoint
from andrea.training.data import load_token_data
from andrea.training.train import TrainConfig, lr_at, make_optimizer, sample, train

CFG = AndreaConfig(vocab_size=256, context_length=32, d_model=32, n_layer=2, n_head=2)
T = TrainConfig(steps=6, batch_size=4, seq_len=16, lr=3e-3, warmup=2, eval_every=3, eval_batches=2)


@pytest.fixture(scope="module")
def data():
    return load_token_data("bytes")


def test_steps_reduce_loss_on_a_fixed_batch(data):
    torch.manual_seed(0)
    m = Andrea(CFG)
    opt = make_optimizer(m, T)
    x, y = data.batch("train", 8, 16, torch.Generator().manual_seed(0))
    losses = []
    for _ in range(30):
        loss = m.loss(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_weight_decay_only_on_matrices():
    opt = make_optimizer(Andrea(replace(CFG, layerscale=0.1)), T)
    decay, no_decay = opt.param_groups
    assert all(p.dim() >= 2 for p in decay["params"]) and decay["weight_decay"] == T.weight_decay
    assert all(p.dim() < 2 for p in no_decay["params"]) and no_decay["weight_decay"] == 0


def test_lr_schedule_shape():
    t = TrainConfig(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, t) == pytest.approx(0.1) and lr_at(9, t) == pytest.approx(1.0)
    assert lr_at(10, t) == pytest.approx(1.0) and lr_at(100, t) == pytest.approx(0.1)
    assert all(lr_at(s, t) >= lr_at(s + 1, t) for s in range(10, 100))


def test_resume_is_bit_identical(data, tmp_path):
    full = train(CFG, T, data, device="cpu", out_dir=tmp_path / "full", progress=False)
    half = train(CFG, replace(T, steps=3), data, device="cpu", out_dir=tmp_path / "half", progress=False)
    assert half.history["step"][-1] == 3
    resumed = train(CFG, T, data, device="cpu", out_dir=tmp_path / "half", resume=True, progress=False)
    assert resumed.history["loss"] == full.history["loss"]
    assert resumed.history["val_loss"] == full.history["val_loss"]
    for (k, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), k


def test_divergence_is_reported_not_raised(data):
    res = train(
        replace(CFG, norm="none"), replace(T, lr=1e6, grad_clip=None, warmup=0), data, device="cpu", progress=False
    )
    assert res.diverged or res.history["loss"][-1] > 5  # a huge learning rate either blows up or goes nowhere


def test_sample(data):
    torch.manual_seed(0)
    text = sample(Andrea(CFG), data.tokenizer, "The ", max_new_tokens=10, seed=0)
    assert isinstance(text, str)
    with pytest.raises(ValueError, match="temperature"):
        sample(Andrea(CFG), data.tokenizer, "x", temperature=0)


def test_bad_train_config():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=-1.0)


def _cli(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "andrea.training.train", *args], capture_output=True, text=True, timeout=300, **kw
    )


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "small.txt"
    p.write_text("LayerNorm standardises each token; GELU is smooth; residuals add. " * 400)
    return p


def test_cli_help_and_bad_options(small_corpus):
    out = _cli("--help")
    assert out.returncode == 0 and "--preset" in out.stdout and "--resume" in out.stdout
    bad = _cli("--preset", "huge")
    assert bad.returncode == 2 and "invalid choice: 'huge'" in bad.stderr
    bad = _cli("--corpus", "/no/such/file.txt")
    assert bad.returncode == 2 and "/no/such/file.txt" in bad.stderr and "does not exist" in bad.stderr
    bad = _cli("--preset", "tiny-bytes", "--corpus", str(small_corpus), "--steps", "0")
    assert bad.returncode == 2 and "steps must be a positive integer" in bad.stderr
    bad = _cli("--preset", "tiny-bytes", "--corpus", str(small_corpus), "--device", "cuda:7")
    assert bad.returncode == 2 and "--device 'cuda:7'" in bad.stderr


def test_cli_trains_and_resumes(small_corpus, tmp_path):
    out = _cli(
        "--preset",
        "tiny-bytes",
        "--corpus",
        str(small_corpus),
        "--steps",
        "4",
        "--out",
        str(tmp_path),
        "--samples",
        "1",
    )
    assert out.returncode == 0, out.stderr
    assert "done: step 4" in out.stdout and "--- sample 1 ---" in out.stdout
    again = _cli(
        "--preset",
        "tiny-bytes",
        "--corpus",
        str(small_corpus),
        "--steps",
        "6",
        "--out",
        str(tmp_path),
        "--resume",
        "--samples",
        "0",
    )
    assert again.returncode == 0 and "done: step 6" in again.stdout
    assert read_checkpoint(tmp_path / "last.pt")["extra"]["step"] == 6


def test_ctrl_c_leaves_a_usable_checkpoint(small_corpus, tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "andrea.training.train",
            "--preset",
            "tiny-bytes",
            "--corpus",
            str(small_corpus),
            "--steps",
            "100000",
            "--out",
            str(tmp_path),
            "--samples",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (tmp_path / "last.pt").exists():
            time.sleep(0.5)  # the first checkpoint is written at the first validation (step 100)
        assert (tmp_path / "last.pt").exists(), "training never reached its first checkpoint"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted by SIGINT at step" in out and "--resume" in out
    blob = read_checkpoint(tmp_path / "last.pt")
    assert blob["extra"]["step"] >= 100
    Andrea.load(tmp_path / "last.pt")  # loads cleanly


@pytest.mark.slow
def test_ddp_two_processes_gloo(small_corpus, tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29533"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(
        torchrun
        + [
            "-m",
            "andrea.training.train",
            "--preset",
            "tiny-bytes",
            "--corpus",
            str(small_corpus),
            "--steps",
            "3",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
            "--samples",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "processes=2" in out.stderr and "done: step 3" in out.stdout
    assert out.stdout.count("done: step 3") == 1  # only rank 0 reports and saves
    assert read_checkpoint(tmp_path / "last.pt")["extra"]["step"] == 3
