"""Where the book's pages run their small models (issue 50): the CPU, also where a GPU is present, while
pick_device() keeps choosing the GPU for a reader's own model."""

from __future__ import annotations

import pytest
import torch

from andrea import device as D
from andrea import pick_device
from andrea.views.notebook import setup


def test_the_pages_run_on_the_cpu_even_where_a_gpu_is_present(monkeypatch):
    monkeypatch.delenv(D.BOOK_DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == "cuda"  # a reader's own model: the GPU, as before
    assert D.book_device() == "cpu"
    assert setup(seed=0) == "cpu"  # what every page's `device = setup(seed=0)` passes to its models


def test_the_environment_can_send_the_pages_elsewhere_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv(D.BOOK_DEVICE_ENV, "auto")
    assert D.book_device() == pick_device()
    monkeypatch.setenv(D.BOOK_DEVICE_ENV, "cpu")
    assert D.book_device() == "cpu"
    monkeypatch.setenv(D.BOOK_DEVICE_ENV, "gpu")
    with pytest.raises(
        ValueError, match=r"ANDREA_BOOK_DEVICE must be one of \('cpu', 'cuda', 'mps', 'auto'\), got 'gpu'"
    ):
        D.book_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv(D.BOOK_DEVICE_ENV, "cuda")
        with pytest.raises(ValueError, match="ANDREA_BOOK_DEVICE 'cuda' is not usable here"):
            D.book_device()
