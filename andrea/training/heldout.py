"""Held-out loss on a schedule: the best checkpoint kept, and an early stop when the held-out loss keeps rising.

``train()`` already validates every ``eval_every`` steps (``history["val_loss"]``). ``HeldOutWatch`` rides on
its two hooks, so that the training loop itself (whose syntax tree is part of every stored result's key)
stays as it is:

* as ``callback(step, loss)`` it learns which step the loop is at;
* as ``monitor(model)``, called at every validation, it computes the held-out loss with the loop's own
  ``evaluate`` (the same fixed batches, the same model: the same number the loop records, at the cost of
  one more pass over ``eval_batches`` batches), writes ``best.pt`` beside ``last.pt`` whenever that loss is
  the lowest so far, and after ``patience`` evaluations in a row whose loss rose above the one before it
  asks the loop to stop, as Ctrl-C would: the loop stops before its next step and saves ``last.pt``.

With ``time_limit``, the callback asks the same once that many seconds have passed since the watch was made
(a compilation included). Under DDP both decisions are taken at validations, where every process is, and
agreed by an all-reduce: one process stopping a step before the others would leave them waiting for it.
``fresh`` removes another run's ``best.pt`` at the first step (the lock then held).

``best.pt`` holds the weights and config (``Andrea.load`` reads it) with ``extra``: the step, its held-out
loss, the training settings and the corpus digest. It is for using the model; ``--resume`` continues from
``last.pt``.
"""

from __future__ import annotations

import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

import torch

from ..model.transformer import Andrea, read_checkpoint
from .train import TrainConfig, _StopRequest, evaluate

BEST = "best.pt"


class StopTraining(Exception):
    """Raised by the watch when it cannot ask the loop to stop between two steps (``train`` running outside
    the main thread, where it installs no signal handler)."""


class HeldOutWatch:
    """The ``callback`` and ``monitor`` of ``train()`` that keep the best checkpoint and stop early.

    ``patience`` 0 never stops early. ``out`` None keeps no file (under DDP, ranks other than 0)."""

    def __init__(
        self,
        data,
        train_cfg: TrainConfig,
        device,
        out: Optional[Path] = None,
        patience: int = 0,
        time_limit: Optional[float] = None,
        fresh: bool = False,
        evaluate_fn: Callable = evaluate,
    ):
        bad = []
        if not (isinstance(patience, int) and not isinstance(patience, bool) and patience >= 0):
            bad.append(f"patience must be an integer >= 0 (0: never stop early), got {patience!r}")
        if time_limit is not None and not (
            isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool) and 0 < time_limit < float("inf")
        ):
            bad.append(f"time_limit must be None or a number of seconds > 0, got {time_limit!r}")
        if bad:
            raise ValueError("; ".join(bad))
        self.data, self.t, self.device = data, train_cfg, torch.device(device)
        self.path = Path(out) / BEST if out is not None else None
        self.patience, self.time_limit, self._fresh = patience, time_limit, fresh
        self._t0 = time.perf_counter()
        self._evaluate = evaluate_fn
        self.step = 0
        self.curve: list[tuple[int, float]] = []  # (step, held-out loss) at each validation
        self.best: Optional[tuple[int, float]] = None  # (step, loss)
        self.rises = 0  # evaluations in a row whose loss rose above the previous one
        self.stopped_at: Optional[int] = None  # the step after which it asked the loop to stop
        self.why = ""  # and why: "rising" or "time"
        self._first: Optional[tuple[int, float]] = None  # (step, time) at the first and the latest step
        self._last: Optional[tuple[int, float]] = None

    def resume_from(self, out: Path) -> None:
        """Continue a resumed run's best: read ``out/best.pt``'s step and loss (its count of rises restarts)."""
        path = Path(out) / BEST
        if path.exists():
            extra = read_checkpoint(path)["extra"]
            self.best = (int(extra["step"]), float(extra["val_loss"]))

    def callback(self, step: int, loss: float) -> None:
        self.step = step
        now = time.perf_counter()
        self._last = (step, now)
        if self._first is None:
            self._first = (step, now)
        if self._fresh and self.path is not None:
            self.path.unlink(missing_ok=True)  # another run's, kept until this run held the folder's lock
            self._fresh = False
        if self.time_limit is not None and self.stopped_at is None and _world() == 1:  # DDP: at evaluations
            if time.perf_counter() - self._t0 >= self.time_limit:
                self._stop("time")

    def monitor(self, model: Andrea) -> dict:
        loss = self._evaluate(model, self.data, self.t, self.device)
        previous = self.curve[-1][1] if self.curve else None
        self.curve.append((self.step, loss))
        self.rises = self.rises + 1 if previous is not None and loss > previous else 0
        if self.best is None or loss < self.best[1]:
            self.best = (self.step, loss)
            if self.path is not None:
                model.save(
                    self.path,
                    extra={
                        "step": self.step,
                        "val_loss": loss,
                        "train_config": asdict(self.t),
                        "data_digest": getattr(self.data, "digest", ""),
                    },
                )
        rising = bool(self.patience) and self.rises >= self.patience
        late = self.time_limit is not None and time.perf_counter() - self._t0 >= self.time_limit
        if _world() > 1:  # every process validates at this step: they agree here on stopping, or none would
            rising, late = self._on_any_rank(rising, late)
        if self.stopped_at is None and (rising or late):
            self._stop("rising" if rising else "time")
        return {"val_loss": loss, "best_step": self.best[0], "best_val_loss": self.best[1], "rises": self.rises}

    def steady_tokens_per_s(self, tokens_per_step: int) -> float:
        """Tokens per second from the end of the first step (a compilation's) to the latest one, evaluations and
        checkpoints included; NaN before two steps."""
        if self._first is None or self._last is None or self._last[0] <= self._first[0]:
            return float("nan")
        return (self._last[0] - self._first[0]) * tokens_per_step / (self._last[1] - self._first[1])

    def curve_text(self) -> str:
        """The held-out losses so far, as 'step loss' pairs."""
        return ", ".join(f"{step} {loss:.3f}" for step, loss in self.curve) or "none yet"

    def _on_any_rank(self, *flags: bool) -> list:
        """Under DDP: each flag true if it is true in any process (an all-reduce, at a step all processes reach)."""
        import torch.distributed as dist

        where = self.device if dist.get_backend() == "nccl" else torch.device("cpu")
        t = torch.tensor([int(f) for f in flags], device=where)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [bool(v) for v in t.tolist()]

    def _stop(self, why: str) -> None:
        if self.step >= self.t.steps:  # the last step: the run ends here anyway
            return
        self.stopped_at, self.why = self.step, why
        _ask_to_stop()

    def summary(self) -> str:
        """One line: why the run stopped early (if it did) and the best step and loss."""
        best = f"best held-out loss {self.best[1]:.3f} at step {self.best[0]}" if self.best else "no validation yet"
        where = f" ({self.path})" if self.path is not None and self.best else ""
        if self.stopped_at is None:
            return best + where
        if self.why == "time":
            return (
                f"stopped at step {self.stopped_at}: the time limit of {self.time_limit:g} s was reached; {best}{where}"
            )
        return (
            f"stopped early at step {self.stopped_at}: the held-out loss rose {self.rises} evaluations in a row "
            f"(--patience {self.patience}); {best}{where}"
        )


def _world() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _ask_to_stop() -> None:
    """Ask ``train``'s loop to stop before its next step, as a stop signal would (it then saves last.pt)."""
    handler = signal.getsignal(signal.SIGTERM)
    request = getattr(handler, "__self__", None)
    if not isinstance(request, _StopRequest):
        raise StopTraining("the held-out loss kept rising; train() runs outside the main thread, so it stops here")
    request.signum = signal.SIGTERM
