"""Where to run: the GPU when there is one, else Apple's MPS, else the CPU."""

from __future__ import annotations

import os

import torch

DEVICE_TYPES = ("cpu", "cuda", "mps")


def pick_device() -> str:
    """ "cuda" if available, else "mps", else "cpu". Every function in andrea takes a device."""
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


# The book's own pages: where their many small models run (issue 50). Each page trains or probes models of
# a few hundred thousand to a few million parameters, dozens of them, one after another: on a GPU their steps
# are bound by kernel launches, not arithmetic. Chapter 1 took 116 s on an H200 with pick_device()'s "cuda"
# and 35 s on one thread of a 2-core CPU. So the pages run them on the CPU wherever they are read, which also
# makes every page say the same numbers on every machine; a reader's own model keeps pick_device().
BOOK_DEVICE_ENV = "ANDREA_BOOK_DEVICE"
BOOK_DEVICE_DEFAULT = "cpu"


def book_device() -> str:
    """Where the book's pages run their small models: "cpu", unless ``$ANDREA_BOOK_DEVICE`` says otherwise
    ("cpu", "cuda", "mps", or "auto" for pick_device()), e.g. to time the pages on a GPU."""
    want = os.environ.get(BOOK_DEVICE_ENV, "").strip() or BOOK_DEVICE_DEFAULT
    if want == "auto":
        return pick_device()
    if want not in DEVICE_TYPES:
        raise ValueError(f"{BOOK_DEVICE_ENV} must be one of {(*DEVICE_TYPES, 'auto')}, got {want!r}")
    check_device(want, BOOK_DEVICE_ENV)
    return want


def available_devices() -> list[str]:
    out = ["cpu"]
    if torch.cuda.is_available():
        out += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out


def _why(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:120] if text else type(e).__name__


def check_device(device, what: str = "device") -> torch.device:
    """``device`` as a ``torch.device`` if this machine can run the model on it, else a ValueError
    that names it and lists what is available (never an AssertionError from deep inside torch)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(
            f"{what} {device!r} is not a device name ({_why(e)}); available here: {available_devices()}"
        ) from None
    if dev.type not in DEVICE_TYPES:
        raise ValueError(
            f"{what} {device!r} cannot run the model (allowed kinds: {DEVICE_TYPES}); "
            f"available here: {available_devices()}"
        )
    if dev.type == "mps" and "mps" not in available_devices():
        raise ValueError(
            f"{what} {device!r} is not available here (no Apple GPU); available here: {available_devices()}"
        )
    try:
        torch.empty(1, device=dev)
    except Exception as e:  # RuntimeError, or AssertionError from a torch built without CUDA
        raise ValueError(
            f"{what} {device!r} is not usable here ({_why(e)}); available here: {available_devices()}"
        ) from None
    return dev
