import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def need(condition: bool, what: str):
    """Skip on a laptop with a message saying what to install; fail under CI, where nothing may be missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"missing under CI: {what}")
    pytest.skip(what)


@pytest.fixture(scope="session")
def site() -> Path:
    need((SITE / "index.html").is_file(), f"the built book ({SITE}); run 'make book' first")
    return SITE
