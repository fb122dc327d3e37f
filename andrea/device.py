"""Where to run: the GPU when there is one, else Apple's MPS, else the CPU."""

from __future__ import annotations

import torch


def pick_device() -> str:
    """"cuda" if available, else "mps", else "cpu". Every function in andrea takes a device."""
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"
