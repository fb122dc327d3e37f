"""The GPU benchmark's reference and its CPU stand-in (issue 50): what can be checked without a GPU."""

from __future__ import annotations

import pytest
import torch

from andrea import ANDREA_120M, Andrea
from andrea.views import bench_gpu as B


@pytest.mark.parametrize("c", [B.STAND_IN, ANDREA_120M], ids=["stand-in", "andrea-120m"])
def test_the_reference_has_andreas_shape(c):
    """Same parameters, one for one (92,331,264 at ANDREA-120M), the head tied to the token embedding."""
    ours, ref = Andrea(c), B.TorchModulesGPT(c)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters())
    assert ref.tok.weight.data_ptr() == next(ref.tok.parameters()).data_ptr()
    idx = torch.randint(0, c.vocab_size, (2, 8))
    assert ref(idx).shape == ours(idx).shape == (2, 8, c.vocab_size)


def test_the_reference_is_causal():
    """A later token does not change an earlier position's logits (the mask is applied)."""
    torch.manual_seed(0)
    ref = B.TorchModulesGPT(B.STAND_IN).eval()
    idx = torch.randint(0, 256, (1, 10))
    other = idx.clone()
    other[0, -1] = (idx[0, -1] + 1) % 256
    with torch.no_grad():
        assert torch.allclose(ref(idx)[0, :-1], ref(other)[0, :-1], atol=1e-6)
        assert not torch.allclose(ref(idx)[0, -1], ref(other)[0, -1])


def test_the_stand_in_times_both_models_and_reports_the_ratio():
    rows = B.compare(B.STAND_IN, "cpu", (2,), 16, ("eager",), reps=2, warmup=1, progress=lambda s: None)
    (r,) = rows
    assert r.andrea_tok_s > 0 and r.reference_tok_s > 0
    assert r.ratio == pytest.approx(r.andrea_tok_s / r.reference_tok_s)
    assert r.mfu_datasheet is None  # no peak given: not computed, not made up
    text = B.table(rows)
    assert "| 2 x 16 | eager |" in text and "n/a" in text


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r"'fast'"):
        B.compare(B.STAND_IN, "cpu", (2,), 16, ("eager", "fast"))
    with pytest.raises(ValueError, match="seq 100 exceeds the context length 64"):
        B.compare(B.STAND_IN, "cpu", (2,), 100, ("eager",))
