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


# ---------------------------------------------------------------------------------------------
# The levers, one row each (issue 50): what they compute is checked here, what they gain on a GPU
# ---------------------------------------------------------------------------------------------
def test_the_chunked_loss_equals_the_plain_loss_and_its_gradient():
    torch.manual_seed(0)
    h = torch.randn(3, 10, 16, requires_grad=True)
    w = torch.randn(50, 16, requires_grad=True)
    tgt = torch.randint(0, 50, (3, 10))
    plain = torch.nn.functional.cross_entropy((h @ w.T).reshape(-1, 50), tgt.reshape(-1))
    g_plain = torch.autograd.grad(plain, (h, w))
    chunked = B.chunked_loss(h, w, tgt, chunks=4)  # 30 tokens: chunks of 8, 8, 8, 6
    g_chunked = torch.autograd.grad(chunked, (h, w))
    assert chunked.item() == pytest.approx(plain.item(), rel=1e-6)
    for a, b in zip(g_plain, g_chunked):
        assert torch.allclose(a, b, atol=1e-6)


def test_the_features_are_the_models_forward_without_its_head():
    torch.manual_seed(0)
    c = B.STAND_IN
    idx = torch.randint(0, c.vocab_size, (2, 8))
    for model in (Andrea(c).eval(), B.TorchModulesGPT(c).eval()):
        with torch.no_grad():
            h = B.Features(model)(idx)
            assert torch.allclose(h @ B.head_weight(model).T, model(idx), atol=1e-5)
    with pytest.raises(ValueError, match="token id 9000 is outside the vocabulary"):
        B.Features(Andrea(c))(torch.tensor([[9000]]))  # ANDREA's own input check still runs


def test_the_padded_vocabulary_is_the_next_multiple_of_64():
    assert B.padded(ANDREA_120M).vocab_size == 8512
    assert B.padded(B.STAND_IN, 64).vocab_size % 64 == 0
    assert B.padded(B.padded(ANDREA_120M)).vocab_size == 8512


def test_lever_rows_report_their_gain_over_the_plain_row():
    rows = B.compare(B.STAND_IN, "cpu", (2,), 16, ("eager",), reps=1, warmup=0, progress=lambda s: None)
    for lever in ("pad-vocab", "chunked-loss"):
        rows += B.compare(
            B.STAND_IN, "cpu", (2,), 16, ("eager",), reps=1, warmup=0, progress=lambda s: None, lever=lever
        )
    g = B.gains(rows)
    assert set(g) == {("pad-vocab", 2, "eager"), ("chunked-loss", 2, "eager")}
    ours, ref = g[("pad-vocab", 2, "eager")]
    assert ours == pytest.approx(rows[1].andrea_tok_s / rows[0].andrea_tok_s)
    assert ref == pytest.approx(rows[1].reference_tok_s / rows[0].reference_tok_s)
    assert "| pad-vocab |" in B.table(rows) and "pad-vocab (B=2 eager) andrea x" in B.summary(rows)


def test_bad_levers_are_named():
    with pytest.raises(ValueError, match="lever must be one of .*got 'faster'"):
        B.compare(B.STAND_IN, "cpu", (2,), 16, ("eager",), lever="faster")
    with pytest.raises(ValueError, match="'max-autotune' is a compile mode: it needs mode 'compiled', got 'eager'"):
        B.compare(B.STAND_IN, "cpu", (2,), 16, ("eager",), lever="max-autotune")
    with pytest.raises(ValueError, match="'cudnn-attention' needs CUDA .*got device 'cpu'"):
        B.compare(B.STAND_IN, "cpu", (2,), 16, ("eager",), lever="cudnn-attention")
    with pytest.raises(ValueError, match="got 'fast', 'x'"):
        B.parse_levers("pad-vocab,fast,x")
