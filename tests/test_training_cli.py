"""The training command line (andrea/training/cli.py, run as ``python -m andrea.training.train``): every bad
option named with what is allowed before anything is read or trained (issue 48: C3, C4, C5, C8, C9, B14)."""

import errno
import subprocess
import sys

import pytest

from andrea.training import cli
from conftest import ROOT


@pytest.mark.parametrize(
    "args, says",
    [
        (["--batch-size", "100000000"], "--batch-size must be an integer from 1 to 1024"),
        (["--batch-size", "0"], "--batch-size must be an integer from 1 to 1024 (sequences per step"),
        (
            ["--lr", "1e308"],
            "--lr must be a number greater than 0 and at most 10000 (the presets use 6e-4 to 3e-3), got 1e+308",
        ),
        (["--lr", "nan"], "--lr must be a number greater than 0 and at most 1"),
        (["--lr=-3e-3"], "got -0.003"),
        (["--seed", "99999999999999999999"], "--seed must be an integer from 0 to 9223372036854775807 (2**63 - 1)"),
        (["--seed", "-1"], "--seed must be an integer from 0"),
        (
            ["--corpus", "x" * 300],
            "--corpus 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (300 characters)",
        ),
        (["--corpus", "/no/such/file.txt"], "'/no/such/file.txt' does not exist"),
        (["--out", ""], "--out must name a folder for the checkpoints, got ''"),
        (["--steps", "0"], "--steps must be a positive integer, got 0"),
        (["--resume", "--overwrite"], "--resume and --overwrite contradict each other"),
    ],
)
def test_a_bad_option_is_named_before_anything_runs(args, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--preset", "tiny-bytes", "--samples", "0", "--out", str(tmp_path / "run"), *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_every_bad_option_is_named_at_once(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--lr", "1e308", "--seed", "-1", "--out", ""])
    err = capsys.readouterr().err
    assert "--lr must" in err and "--seed must" in err and "--out must" in err


def test_a_full_disk_gives_its_message_and_how_to_continue(tmp_path, monkeypatch, capsys):
    """B14: the checkpoint writer's message (the file, the free space, the checkpoint kept), then how to continue,
    with no traceback; an OSError of another kind (a bug) still raises."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last.pt").write_bytes(b"an earlier checkpoint")
    full = OSError("could not write the checkpoint 'run/last.pt' (0.0 MiB free on its disk; ...); the checkpoint")

    def train(*a, **k):
        raise full

    monkeypatch.setattr(cli, "train", train)
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text to train on. " * 400)
    argv = ["--preset", "tiny-bytes", "--samples", "0", "--corpus", str(corpus), "--out", str(tmp_path / "run")]
    assert cli.main(argv + ["--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "could not write the checkpoint" in err and f"--resume --out {tmp_path / 'run'}" in err, err

    def bug(*a, **k):
        raise OSError(errno.EIO, "a bug", "x")

    monkeypatch.setattr(cli, "train", bug)
    with pytest.raises(OSError, match="a bug"):
        cli.main(argv + ["--overwrite"])


def test_the_module_still_runs_as_the_command_line():
    r = subprocess.run(
        [sys.executable, "-m", "andrea.training.train", "--lr", "1e308"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "--lr must be a number greater than 0" in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "andrea.training.train", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 0 and "--preset" in r.stdout
