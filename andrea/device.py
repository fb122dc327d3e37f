"""Where to run: the GPU when there is one, else Apple's MPS, else the CPU."""

from __future__ import annotations

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
