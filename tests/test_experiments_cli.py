"""`python -m andrea.experiments`: contradictory or empty requests are refused by name, and a run stopped by a
full disk or a signal says so in one message, not after a traceback (issue 48: C14, B14, B19)."""

import errno

import pytest

from andrea import experiments
from andrea.trained import model as trained


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--second-cpu", "--reproduce", "explorer"], "do different things: give one of them"),
        (["--reproduce", "explorer"], "--reproduce works on the grids' deciding runs, and 'explorer' is not a grid"),
        (["--second-cpu", "trained", "explorer"], "'trained' and 'explorer' are not grids"),
    ],
)
def test_a_request_with_nothing_to_do_is_refused(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        experiments.main(argv)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def _fail_with(exc):
    def run(*a, **k):
        raise exc

    return run


def test_a_stopped_retrain_and_a_full_disk_give_one_message(monkeypatch, capsys):
    """The trained model's retrain, stopped by SIGTERM, or a checkpoint that cannot be written (the message the
    package composes, with the free space): one line on stderr and an exit code, no traceback. An OSError of
    another kind (a bug) still raises."""
    monkeypatch.setattr(trained, "status", lambda: "stale")
    monkeypatch.setattr(trained, "status_detail", lambda: ("stale", "made by other code"))
    stop = trained.Interrupted("retrain: stopped by SIGTERM at step 6 of 400; ... resumes it from there")
    monkeypatch.setattr(trained, "retrain", _fail_with(stop))
    assert experiments.main(["trained"]) == 130
    err = capsys.readouterr().err
    assert "stopped by SIGTERM at step 6" in err and "Traceback" not in err
    full = OSError("could not write the checkpoint 'runs/trained/last.pt' (0.0 MiB free on its disk; ...)")
    monkeypatch.setattr(trained, "retrain", _fail_with(full))
    assert experiments.main(["trained"]) == 1
    assert "could not write the checkpoint" in capsys.readouterr().err
    monkeypatch.setattr(trained, "retrain", _fail_with(OSError(errno.ENOSPC, "No space left on device", "x.json")))
    assert experiments.main(["trained"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    monkeypatch.setattr(trained, "retrain", _fail_with(FileNotFoundError(errno.ENOENT, "gone", "y")))
    with pytest.raises(FileNotFoundError):
        experiments.main(["trained"])
    monkeypatch.setattr(trained, "retrain", _fail_with(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        experiments.main(["trained"])
