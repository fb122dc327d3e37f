"""A training run's folder: one writer at a time, checked before step 1, checkpoints that resume exactly.

``RunDir(out)`` is what ``andrea.training.train`` uses for ``--out``:

* it makes sure the folder can be written before any training happens (a file in its place, a
  read-only or uncreatable path is a ``ValueError`` at once, not at the first save);
* it takes a lock (``out/.lock``), so a second run into the same folder is refused with the first
  run's process id instead of both writing the same ``last.pt``;
* ``save`` writes ``last.pt`` atomically (``Andrea.save``: a unique temporary file, then a rename);
* ``resume_state`` reads ``last.pt`` back and checks that it is a training checkpoint made with the
  same model, training settings and corpus, naming every field that differs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import IO, Optional

from ..files import temporary_name
from ..model.config import AndreaConfig
from ..model.transformer import read_checkpoint

try:  # POSIX advisory locks; on other systems runs are not locked (one writer is then up to you)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

TRAINING_KEYS = ("step", "history", "optimizer", "generator", "train_config")


def config_changes(old: dict, new: dict, skip: tuple = ()) -> list[str]:
    """'name: old -> new' for every key whose value differs (keys in ``skip`` are ignored)."""
    out = []
    for k in sorted(set(old) | set(new)):
        if k in skip:
            continue
        a, b = old.get(k, "(absent)"), new.get(k, "(absent)")
        if a != b:
            out.append(f"{k}: {a!r} (checkpoint) -> {b!r} (now)")
    return out


class RunDir:
    """The folder of one training run (see the module docstring)."""

    def __init__(self, out: os.PathLike | str):
        self.path = Path(out)
        self.checkpoint = self.path / "last.pt"
        self._lock_file: Optional[IO[str]] = None
        self._check_writable()

    def _check_writable(self) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise ValueError(f"--out {str(p)!r} is a file, not a folder: choose a folder for the checkpoints")
        try:
            p.mkdir(parents=True, exist_ok=True)
            probe = temporary_name(p / "write-test")
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise ValueError(
                f"--out {str(p)!r} cannot be written ({e.strerror or type(e).__name__}): "
                "choose a folder you can write to"
            ) from None

    # -- one writer per folder --------------------------------------------------------------------
    def lock(self) -> None:
        """Take the folder's lock, or raise ValueError naming the process that holds it."""
        if fcntl is None or self._lock_file is not None:
            return
        f = open(self.path / ".lock", "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            f.close()
            raise ValueError(
                f"another training run (process {holder}) is writing to {str(self.path)!r}; "
                "wait for it to finish, or choose another --out"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._lock_file = f
        self.remove_stray_temporaries()

    def remove_stray_temporaries(self) -> list[Path]:
        """Delete the temporary files of saves that were killed before their rename (SIGKILL, power loss):
        with the lock held no other process writes here, so every one left is stray. Says what it removed."""
        stray = sorted(q for q in self.path.glob(".*.tmp") if q.is_file())
        for q in stray:
            q.unlink(missing_ok=True)
        if stray:
            names = ", ".join(q.name for q in stray)
            print(f"removed {len(stray)} temporary file(s) left by an interrupted save: {names}", file=sys.stderr)
        return stray

    def unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> "RunDir":
        self.lock()
        return self

    def __exit__(self, *exc) -> None:
        self.unlock()

    # -- starting fresh or resuming -----------------------------------------------------------------
    def check_fresh(self, overwrite: bool) -> None:
        """A fresh run must not silently replace an existing checkpoint."""
        if self.checkpoint.exists() and not overwrite:
            raise ValueError(
                f"{str(self.checkpoint)!r} already holds a checkpoint: pass --resume to continue "
                "that run, --overwrite to replace it, or choose another --out"
            )

    def resume_state(self, model_cfg: AndreaConfig, train_cfg, data_digest: str, allow_changes: bool) -> dict:
        """The checkpoint's contents, after checking it can continue this run exactly."""
        if not self.checkpoint.exists():
            raise FileNotFoundError(f"--resume: no checkpoint at {str(self.checkpoint)!r} to resume from")
        verify_bytes(self.checkpoint)
        blob = read_checkpoint(self.checkpoint)
        extra = blob["extra"]
        missing = [k for k in TRAINING_KEYS if k not in extra]
        if missing:
            raise ValueError(
                f"--resume: {str(self.checkpoint)!r} holds model weights but no training state "
                f"(no {', '.join(missing)}), as Andrea.save writes; load its weights with "
                "Andrea.load(path), or start a fresh run with --overwrite"
            )
        model_changes = config_changes(blob["config"], model_cfg.to_dict())
        if model_changes:  # another model cannot continue these weights, whatever the flags
            raise ValueError(
                f"--resume: the checkpoint at {str(self.checkpoint)!r} holds a different model: "
                + "; ".join(model_changes)
                + ". Use the same preset and model settings, or another --out"
            )
        now = asdict(train_cfg)
        changes = [f"training {c}" for c in config_changes(extra["train_config"], now, skip=("steps", "compile"))]
        if extra.get("data_digest", data_digest) != data_digest:
            changes.append(f"corpus: {extra.get('data_digest')!r} (checkpoint) -> {data_digest!r} (now)")
        if changes and not allow_changes:
            raise ValueError(
                f"--resume: this run differs from the checkpoint at {str(self.checkpoint)!r}: "
                + "; ".join(changes)
                + ". Resume with the checkpoint's settings, or pass "
                "--allow-changes to continue with the new ones"
            )
        _check_training_state(self.checkpoint, blob, model_cfg, train_cfg)
        bad = non_finite(blob["state_dict"])
        if bad:
            raise ValueError(
                f"--resume: {str(self.checkpoint)!r} holds non-finite weights ({bad}): the run had diverged "
                "when it was saved, so there is nothing good to continue; start again with --overwrite and a "
                "lower --lr"
            )
        step = int(extra["step"])
        if step >= train_cfg.steps:
            raise ValueError(
                f"--resume: the checkpoint is already at step {step}, so --steps {train_cfg.steps} "
                f"would train nothing: pass --steps larger than {step}"
            )
        blob["changes"] = changes
        return blob


def _check_training_state(path: Path, blob: dict, model_cfg: AndreaConfig, train_cfg) -> None:
    """Everything a resume will load must load: the optimizer state, the batch sampler's state, the
    history. A hostile or damaged checkpoint is a ValueError here, not a traceback at step 1."""
    import torch

    from ..model.transformer import Andrea
    from .optimizer import make_optimizer

    extra = blob["extra"]
    where = f"--resume: {str(path)!r}"
    if not isinstance(extra["step"], int) or isinstance(extra["step"], bool) or extra["step"] < 0:
        raise ValueError(f"{where} has a malformed step {extra['step']!r}")
    history = extra["history"]
    if not isinstance(history, dict) or not all(isinstance(history.get(k), list) for k in ("step", "loss", "val_loss")):
        raise ValueError(f"{where} has a malformed training history")
    per_step = {k: len(history.get(k) or []) for k in ("step", "loss", "lr", "grad_norm")}
    last = history["step"][-1] if history["step"] else 0
    if (
        len(set(per_step.values())) != 1
        or len(history.get("val_step") or []) != len(history["val_loss"])
        or last != extra["step"]
    ):
        raise ValueError(
            f"{where} has a training history out of line with its step {extra['step']} (values per step: "
            f"{per_step}, last logged step {last}; validations: {len(history.get('val_step') or [])} steps, "
            f"{len(history['val_loss'])} losses): resumed, its curves would be misaligned for good; start again "
            "with --overwrite"
        )
    try:
        torch.Generator().set_state(extra["generator"])
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"{where} has an unusable batch-sampler state ({type(e).__name__})") from None
    model = Andrea(AndreaConfig(**blob["config"]))
    model.load_state_dict(blob["state_dict"])
    try:
        make_optimizer(model, train_cfg).load_state_dict(extra["optimizer"])
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise ValueError(
            f"{where} has an optimizer state that does not fit the model ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:120] if str(e) else ''})"
        ) from None


def verify_bytes(path: Path) -> None:
    """A checkpoint is a zip archive (``torch.save``) with a CRC-32 checksum per member, which
    ``torch.load`` does not check: a flipped bit in the weights would load silently. Check every
    member's bytes against its checksum; a ValueError names the file and the member that differs.
    It guards against damage (a bad disk, a broken copy), not against someone who rewrites the sums."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except zipfile.BadZipFile:
        return  # not a zip archive: read_checkpoint says what it is
    except OSError as e:
        raise ValueError(f"{str(path)!r} cannot be read: {e.strerror or type(e).__name__}") from None
    if bad is not None:
        raise ValueError(
            f"{str(path)!r} is corrupted: the bytes of {bad!r} do not match the checksum stored in the file "
            "(a flipped bit, a bad disk or an interrupted copy); restore a copy, or start again with --overwrite"
        )


def non_finite(state_dict: dict) -> str:
    """The names of the tensors that hold NaN or infinity (the first three, and how many), or ''."""
    import torch

    bad = [k for k, v in state_dict.items() if torch.is_tensor(v) and v.is_floating_point() and not v.isfinite().all()]
    return "" if not bad else ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")


def describe(path: Optional[Path]) -> str:
    """'last.pt (step N)' for a readable training checkpoint with finite weights, else what it is."""
    if path is None or not path.exists():
        return "no checkpoint was written"
    try:
        verify_bytes(path)
        blob = read_checkpoint(path)
    except (ValueError, OSError):
        return f"{path} (unreadable)"
    step = blob["extra"].get("step")
    if non_finite(blob["state_dict"]):
        return f"{path} (step {step}, but its weights are not finite: not a good checkpoint)"
    return f"{path} (step {step})"
