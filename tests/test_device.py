"""Device-generic tests: the model, its layers, the probe and save/load on one device.

They run on the CPU in `make test`; `make gpu-check` runs this file with ANDREA_TEST_DEVICE=cuda.
"""

import os

import pytest
import torch
import torch.nn.functional as F

from andrea import Andrea, AndreaConfig, gradient_flow, random_batch
from andrea.model.layers import gelu, layer_norm

DEVICE = os.environ.get("ANDREA_TEST_DEVICE", "cpu")
CFG = AndreaConfig(vocab_size=128, context_length=32, d_model=64, n_head=4, n_layer=3)
TOL = 1e-4 if DEVICE == "cpu" else 2e-3  # float32 on the CPU; CUDA kernels sum in other orders


@pytest.fixture(scope="module")
def dev():
    if DEVICE != "cpu" and not torch.cuda.is_available():
        pytest.skip(f"ANDREA_TEST_DEVICE={DEVICE} but no CUDA device here")
    if DEVICE.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
    return torch.device(DEVICE)


@pytest.mark.parametrize(
    "kw",
    [{}, {"norm": "post"}, {"layerscale": 1e-4}, {"activation": "swiglu"}, {"norm": "deepnorm", "init": "deepnorm"}],
)
def test_forward_backward_on_device(dev, kw):
    torch.manual_seed(0)
    with torch.device(dev):
        m = Andrea(AndreaConfig(**{**CFG.to_dict(), **kw}))
    assert m.device.type == dev.type
    idx, tgt = random_batch(CFG.vocab_size, 2, 16, device=dev)
    loss = m.loss(idx, tgt)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)


def test_readable_formulas_match_fused_kernels_on_device(dev):
    x = torch.randn(4, 7, 64, device=dev)
    g, b = torch.randn(64, device=dev), torch.randn(64, device=dev)
    assert torch.allclose(layer_norm(x, g, b, 1e-5), F.layer_norm(x, (64,), g, b, 1e-5), atol=TOL)
    assert torch.allclose(gelu(x, "tanh"), F.gelu(x, approximate="tanh"), atol=TOL)
    assert torch.allclose(gelu(x, "none"), F.gelu(x), atol=TOL)


def test_probe_on_device_agrees_with_the_cpu(dev):
    torch.manual_seed(0)
    m = Andrea(CFG)
    idx, tgt = random_batch(CFG.vocab_size, 2, 16)
    on_cpu = gradient_flow(m, idx, tgt)
    on_dev = gradient_flow(m.to(dev), idx.to(dev), tgt.to(dev))
    assert on_dev.finite
    for a, b in ((on_cpu.grad_rms, on_dev.grad_rms), (on_cpu.act_rms, on_dev.act_rms)):
        assert abs((a - b) / a).max() < TOL * 10


def test_save_on_device_load_elsewhere_and_back(dev, tmp_path):
    torch.manual_seed(0)
    with torch.device(dev):
        m = Andrea(CFG).eval()
    idx, _ = random_batch(CFG.vocab_size, 2, 16, device=dev)
    with torch.no_grad():
        want = m(idx).cpu()
    m.save(tmp_path / "m.pt")
    cpu = Andrea.load(tmp_path / "m.pt", map_location="cpu").eval()
    with torch.no_grad():
        got_cpu = cpu(idx.cpu())
    assert torch.allclose(got_cpu, want, atol=TOL, rtol=TOL)
    cpu.save(tmp_path / "m2.pt")
    back = Andrea.load(tmp_path / "m2.pt", map_location=dev).eval()
    with torch.no_grad():
        assert torch.equal(back(idx).cpu(), want) or torch.allclose(back(idx).cpu(), want, atol=TOL)


def test_a_few_training_steps_on_device(dev):
    from andrea.training.data import load_token_data
    from andrea.training.train import TrainConfig, train

    data = load_token_data("bytes")
    cfg = AndreaConfig(vocab_size=256, context_length=32, d_model=32, n_head=2, n_layer=2)
    res = train(
        cfg,
        TrainConfig(steps=8, batch_size=4, seq_len=16, warmup=2, eval_every=4, eval_batches=2),
        data,
        device=str(dev),
        progress=False,
    )
    assert not res.diverged and res.history["loss"][-1] < res.history["loss"][0]
    assert next(res.model.parameters()).device.type == dev.type
