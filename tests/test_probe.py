from dataclasses import replace

import numpy as np
import pytest
import torch

from andrea import Andrea, AndreaConfig, gradient_flow, random_batch

CFG = AndreaConfig(vocab_size=101, context_length=32, d_model=32, n_layer=6, n_head=4)


def model(**kw):
    torch.manual_seed(0)
    return Andrea(replace(CFG, **kw))


def hooks_left(m):
    return sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) for mod in m.modules())


def test_report_shapes_and_no_hooks_left():
    m = model()
    idx, tgt = random_batch(101, 2, 16)
    r = gradient_flow(m, idx, tgt)
    assert r.act_rms.shape == (7,) and r.grad_rms.shape == (7,)
    assert r.weight_grad_norm["attn"].shape == (6,) and r.weight_grad_norm["mlp"].shape == (6,)
    assert r.finite and np.isfinite(r.loss) and r.status == "ok"
    assert hooks_left(m) == 0
    assert all(p.grad is None for p in m.parameters())  # the probe never touches .grad


def test_boundaries_are_what_the_design_says():
    m = model()
    idx, tgt = random_batch(101, 2, 16)
    r = gradient_flow(m, idx, tgt)
    with torch.no_grad():
        x = m.embed(idx)
        assert np.isclose(r.act_rms[0], float(x.pow(2).mean().sqrt()), rtol=1e-6)
        for blk in m.blocks:
            x = blk(x)
        assert np.isclose(r.act_rms[-1], float(x.pow(2).mean().sqrt()), rtol=1e-6)
    # gradient at the top boundary, computed independently
    x = m.embed(idx)
    for blk in m.blocks:
        x = blk(x)
    x.retain_grad()
    loss = torch.nn.functional.cross_entropy(
        (m.final_norm(x) @ m.token_embedding.weight.T).reshape(-1, 101), tgt.reshape(-1)
    )
    loss.backward()
    assert np.isclose(r.grad_rms[-1], float(x.grad.pow(2).mean().sqrt()), rtol=1e-5)
    assert np.isclose(r.loss, loss.item(), rtol=1e-6)


def test_hooks_removed_and_state_restored_when_forward_raises():
    m = model()
    m.train()
    m.blocks[0].attn.qkv.weight.requires_grad_(False)
    with pytest.raises(ValueError):
        gradient_flow(m, torch.tensor([[1, 500]]), torch.tensor([[1, 2]]))
    assert hooks_left(m) == 0
    assert m.training
    assert m.blocks[0].attn.qkv.weight.requires_grad is False
    r = gradient_flow(m, *random_batch(101, 2, 8))  # frozen weights still get their gradient measured
    assert r.weight_grad_norm["attn"][0] > 0
    assert m.blocks[0].attn.qkv.weight.requires_grad is False and m.training


def test_same_seed_same_report():
    reports = [gradient_flow(model(layerscale=1e-2), *random_batch(101, 2, 16, seed=3)) for _ in range(2)]
    a, b = reports
    assert np.array_equal(a.act_rms, b.act_rms) and np.array_equal(a.grad_rms, b.grad_rms) and a.loss == b.loss


def test_non_finite_run_is_reported_not_raised():
    m = model(norm="none")
    with torch.no_grad():
        for blk in m.blocks:
            blk.mlp.fc.weight.fill_(1e30)
    r = gradient_flow(m, *random_batch(101, 2, 8))
    assert r.finite is False and r.status == "diverged"
    assert r.act_rms.shape == (7,)


def test_residual_path_keeps_gradient_reaching_embeddings():
    deep = dict(n_layer=24)
    with_res = gradient_flow(model(**deep), *random_batch(101, 2, 16))
    without = gradient_flow(model(**deep, residual=False), *random_batch(101, 2, 16))
    assert with_res.grad_rms[0] > 100 * without.grad_rms[0]
