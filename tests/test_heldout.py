"""Held-out loss on a schedule, the best checkpoint and the early stop (andrea/training/heldout.py), and the
command line that trains ``--preset andrea-120m`` on the manuals (issue 50, "The full model on real text")."""

import threading
from dataclasses import replace

import pytest
import torch

from andrea import Andrea, AndreaConfig
from andrea.model.transformer import read_checkpoint
from andrea.training import cli, heldout, manuals
from andrea.training.data import load_token_data
from andrea.training.train import TrainConfig, evaluate, train
from conftest import ROOT

CFG = AndreaConfig(vocab_size=256, context_length=32, d_model=32, n_layer=2, n_head=2)
T = TrainConfig(steps=12, batch_size=4, seq_len=16, lr=3e-3, warmup=2, eval_every=2, eval_batches=2)


@pytest.fixture(scope="module")
def data():
    return load_token_data("bytes")


def scripted(losses):
    """An evaluate() that returns the given held-out losses in turn (a curve chosen by the test)."""
    it = iter(losses)
    return lambda model, data, t, device: next(it)


def test_the_watch_records_the_loops_own_held_out_loss_and_changes_nothing_else(data, tmp_path):
    plain = train(CFG, T, data, device="cpu", progress=False)
    watch = heldout.HeldOutWatch(data, T, "cpu", tmp_path, patience=0)
    run = train(CFG, T, data, device="cpu", out_dir=tmp_path, progress=False, **hooks(watch))
    assert run.history["loss"] == plain.history["loss"]  # the extra evaluation draws no random number
    assert [v for _, v in watch.curve] == run.history["val_loss"] == plain.history["val_loss"]
    assert [s for s, _ in watch.curve] == run.history["val_step"] == [2, 4, 6, 8, 10, 12]
    step, loss = min(watch.curve, key=lambda c: c[1])
    assert watch.best == (step, loss)
    best = read_checkpoint(tmp_path / "best.pt")
    assert best["extra"]["step"] == step and best["extra"]["val_loss"] == loss
    assert best["extra"]["data_digest"] == data.digest
    reloaded = Andrea.load(tmp_path / "best.pt")
    assert evaluate(reloaded, data, T, torch.device("cpu")) == pytest.approx(loss, abs=1e-6)  # its weights


def hooks(watch):
    return {"callback": watch.callback, "monitor": watch.monitor}


def test_early_stop_after_patience_rises_in_a_row_keeps_the_best_and_last(data, tmp_path):
    # evaluations at steps 2, 4, ...: lowest at step 4, then a dip that is no new best, then three rises
    curve = [5.0, 4.0, 4.5, 4.2, 4.3, 4.4, 4.6]
    long = replace(T, steps=100)
    watch = heldout.HeldOutWatch(data, long, "cpu", tmp_path, patience=3, evaluate_fn=scripted(curve))
    run = train(CFG, long, data, device="cpu", out_dir=tmp_path, progress=False, **hooks(watch))
    assert watch.stopped_at == 14 and run.steps_done == 14 and run.interrupted  # no step after the third rise
    assert watch.best == (4, 4.0) and watch.rises == 3
    assert read_checkpoint(tmp_path / "best.pt")["extra"]["step"] == 4
    assert read_checkpoint(tmp_path / "last.pt")["extra"]["step"] == 14
    said = watch.summary()
    assert "stopped early at step 14" in said and "rose 3 evaluations in a row (--patience 3)" in said
    assert "best held-out loss 4.000 at step 4" in said


def test_no_early_stop_without_patience_or_when_the_rises_are_broken(data, tmp_path):
    watch = heldout.HeldOutWatch(data, T, "cpu", None, patience=0, evaluate_fn=scripted([1.0, 2, 3, 4, 5, 6]))
    assert train(CFG, T, data, device="cpu", progress=False, **hooks(watch)).steps_done == 12
    assert watch.stopped_at is None and watch.best == (2, 1.0)
    # two rises, a fall, two rises: never three in a row
    watch = heldout.HeldOutWatch(data, T, "cpu", None, patience=3, evaluate_fn=scripted([5.0, 5.1, 5.2, 5, 5.1, 5.2]))
    assert train(CFG, T, data, device="cpu", progress=False, **hooks(watch)).steps_done == 12
    assert watch.stopped_at is None and "stopped" not in watch.summary()


def test_the_time_limit_stops_the_run_and_says_so(data, tmp_path):
    long = replace(T, steps=50)
    watch = heldout.HeldOutWatch(data, long, "cpu", tmp_path, time_limit=1e-9)
    run = train(CFG, long, data, device="cpu", out_dir=tmp_path, progress=False, **hooks(watch))
    assert run.steps_done == 1 and watch.stopped_at == 1 and watch.why == "time"
    assert "the time limit of 1e-09 s was reached" in watch.summary()
    assert read_checkpoint(tmp_path / "last.pt")["extra"]["step"] == 1


def test_outside_the_main_thread_the_stop_is_an_exception_not_a_lost_request(data):
    watch = heldout.HeldOutWatch(data, T, "cpu", None, patience=1, evaluate_fn=scripted([5.0, 6.0]))
    raised = []

    def run():
        try:
            train(CFG, T, data, device="cpu", progress=False, **hooks(watch))
        except heldout.StopTraining as e:
            raised.append(e)

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert raised and watch.stopped_at == 4


def test_bad_settings_of_the_watch_are_all_named(data):
    with pytest.raises(ValueError, match=r"patience must be an integer >= 0 .*got -1; time_limit must be .*got 0"):
        heldout.HeldOutWatch(data, T, "cpu", patience=-1, time_limit=0)


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ["--patience", "-2"],
            "--patience must be an integer >= 0 (evaluations in a row; 0: never stop early), got -2",
        ),
        (["--time-limit", "0"], "--time-limit must be a number of seconds greater than 0, got 0"),
        (["--time-limit", "nan"], "--time-limit must be a number of seconds greater than 0, got nan"),
        (["--data", "manuals", "--corpus", "x.txt"], "--data manuals and --corpus name two texts: choose one"),
        (["--data", "manuals"], "--data manuals needs a BPE preset"),
    ],
)
def test_bad_options_are_named_before_anything_runs(args, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--preset", "tiny-bytes", "--samples", "0", "--out", str(tmp_path / "run"), *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_every_bad_option_is_named_at_once(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--preset", "tiny-bytes", "--patience", "-1", "--time-limit", "-5", "--data", "manuals"])
    err = capsys.readouterr().err
    assert "--patience must" in err and "--time-limit must" in err and "--data manuals needs" in err


def test_the_full_model_trains_on_the_manuals_in_chapter_8s_tokenizer(monkeypatch):
    import argparse

    from andrea.trained import model as trained

    a = argparse.Namespace(preset="andrea-120m", corpus=None, data=None)
    data, which, tok = cli.read_data(a, "bpe")
    assert "manuals" in which and "chapter 8's byte-level BPE, 8,449 tokens" in tok
    assert {"train": len(data.train), "val": len(data.val)} == trained.log()["corpus"]["tokens"]
    assert data.digest == trained.log()["corpus"]["digest"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{len(data.train) / 1e6:.1f} M training tokens, {len(data.val) / 1e6:.2f} M held out by file" in readme
    assert cli.PATIENCE["andrea-120m"] >= 1  # it stops early by default
    a = argparse.Namespace(preset="tiny", corpus=None, data=None)
    assert "docstrings" in cli.read_data(a, "bpe")[1]


def test_the_start_line_names_the_corpus_its_split_and_the_tokenizer(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text to train on, and more of it. " * 400)
    out = tmp_path / "run"
    argv = ["--preset", "tiny-bytes", "--corpus", str(corpus), "--steps", "2", "--eval-every", "1", "--samples", "0"]
    argv += ["--batch-size", "2"]
    assert cli.main([*argv, "--out", str(out), "--device", "cpu"]) == 0
    said = capsys.readouterr()
    n = len(corpus.read_bytes())
    cut = int(n * 0.9)
    assert f"train tokens={cut:,} held-out tokens={n - cut:,}" in said.err
    assert "tokenizer: one token per byte, 256 tokens" in said.err and str(corpus) in said.err
    assert "best held-out loss" in said.out and (out / "best.pt").exists()
    # a fresh run into that folder: best.pt is another run's now, refused by name unless --overwrite
    (out / "last.pt").unlink()
    with pytest.raises(SystemExit):
        cli.main([*argv, "--out", str(out), "--device", "cpu"])
    assert "best.pt' holds another run's best checkpoint" in capsys.readouterr().err


def test_an_altered_tokenizer_is_refused_by_name(tmp_path, monkeypatch):
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(manuals.TOKENIZER.read_bytes().replace(b'"the"', b'"teh"', 1))
    monkeypatch.setattr(manuals, "TOKENIZER", bad)
    with pytest.raises(ValueError, match="tokenizer.json.*not the tokenizer chapter 8's model was trained with"):
        manuals.book_tokenizer()
    bad.unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json.*is missing"):
        manuals.book_tokenizer()


def test_under_ddp_every_process_stops_at_the_same_step(tmp_path):
    """Two processes (gloo on the CPU): the time limit is agreed at the first validation, so neither process
    waits for a step the other never takes (the test would hang until its timeout)."""
    import os
    import subprocess
    import sys

    corpus = tmp_path / "c.txt"
    corpus.write_text("residual streams add; LayerNorm standardises; GELU is smooth. " * 300)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29541"]
    argv = ["-m", "andrea.training.train", "--preset", "tiny-bytes", "--corpus", str(corpus), "--device", "cpu"]
    argv += ["--steps", "50", "--eval-every", "2", "--batch-size", "2", "--time-limit", "0.001", "--samples", "0"]
    r = subprocess.run(
        [*torchrun, *argv, "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("stopped at step 2: the time limit of 0.001 s was reached") == 1, r.stdout
    assert read_checkpoint(tmp_path / "run" / "last.pt")["extra"]["step"] == 2
