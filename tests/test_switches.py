"""The config switches the papers need, each with the exact property its paper states."""

import math
from dataclasses import replace

import pytest
import torch

from andrea import Andrea, AndreaConfig, count_parameters, gradient_flow, random_batch
from andrea.model.config import deepnet, rezero

C = AndreaConfig(vocab_size=97, context_length=16, d_model=64, n_head=4, n_layer=6)


def fresh(cfg, seed=0):
    torch.manual_seed(seed)
    return Andrea(cfg)


def test_gpt2_init_scales_the_residual_projections_by_depth():
    for n in (6, 24):
        m = fresh(replace(C, n_layer=n))
        b = m.blocks[0]
        assert abs(b.attn.qkv.weight.std().item() - 0.02) < 0.002
        for proj in (b.attn.proj, b.mlp.proj):
            assert abs(proj.weight.std().item() / (0.02 / math.sqrt(2 * n)) - 1) < 0.1
        assert float(b.mlp.fc.bias.abs().max()) == 0.0


def test_normal_init_has_no_depth_scaling():
    m = fresh(replace(C, n_layer=24, init="normal", init_std=0.05))
    for w in (m.blocks[3].attn.proj.weight, m.blocks[3].mlp.fc.weight, m.token_embedding.weight):
        assert abs(w.std().item() / 0.05 - 1) < 0.05


def test_xavier_init_treats_q_k_v_as_three_square_matrices():
    m = fresh(replace(C, init="xavier"))
    d = C.d_model
    bound = math.sqrt(6 / (d + d))  # Xavier uniform for a d x d matrix
    for part in m.blocks[0].attn.qkv.weight.chunk(3, 0):
        assert float(part.abs().max()) <= bound and abs(part.std().item() / (bound / math.sqrt(3)) - 1) < 0.1
    fc = m.blocks[0].mlp.fc.weight  # (4d, d)
    assert abs(fc.std().item() / math.sqrt(2 / (d + 4 * d)) - 1) < 0.05


def test_deepnorm_alpha_beta_and_init():
    for n in (6, 48):
        c = deepnet(replace(C, n_layer=n))
        assert c.norm == "deepnorm" and c.init == "deepnorm"
        assert c.deepnorm_alpha == (2 * n) ** 0.25 and c.deepnorm_beta == (8 * n) ** -0.25
        m = fresh(c)
        q, k, v = m.blocks[0].attn.qkv.weight.chunk(3, 0)
        d = C.d_model
        xavier = math.sqrt(2 / (d + d))
        assert abs(q.std().item() / xavier - 1) < 0.1 and abs(k.std().item() / xavier - 1) < 0.1
        assert abs(v.std().item() / (c.deepnorm_beta * xavier) - 1) < 0.1
        assert abs(m.blocks[0].attn.proj.weight.std().item() / (c.deepnorm_beta * xavier) - 1) < 0.1


def test_deepnorm_block_computes_ln_of_alpha_x_plus_f():
    m = fresh(deepnet(C)).eval()
    b = m.blocks[0]
    x = torch.randn(2, 5, C.d_model)
    with torch.no_grad():
        h = b.ln_1(C.deepnorm_alpha * x + b.attn(x))
        want = b.ln_2(C.deepnorm_alpha * h + b.mlp(h))
        assert torch.allclose(b(x), want, atol=1e-6)


def test_rezero_is_the_identity_at_zero_and_only_alpha_gets_a_gradient():
    c = rezero(C)
    assert (c.norm, c.layerscale, c.layerscale_kind) == ("none", 0.0, "scalar")
    m = fresh(c)
    assert count_parameters(m)["layerscale"] == 2 * C.n_layer  # one scalar per sublayer
    idx, tgt = random_batch(97, 2, 8)
    with torch.no_grad():
        x = m.embed(idx)
        y = x
        for b in m.blocks:
            y = b(y)
    assert torch.equal(x, y)  # exactly the identity
    r = gradient_flow(m, idx, tgt)
    assert float(r.weight_grad_norm["attn"].max()) == 0 and float(r.weight_grad_norm["mlp"].max()) == 0
    alphas = [p for n, p in m.named_parameters() if ".ls_" in n]
    grads = torch.autograd.grad(m.loss(idx, tgt), alphas)
    assert all(float(g.abs().sum()) > 0 for g in grads)


def test_layerscale_scalar_and_channel_shapes():
    for kind, shape in (("channel", (C.d_model,)), ("scalar", (1,))):
        m = fresh(replace(C, layerscale=1e-3, layerscale_kind=kind))
        assert tuple(m.blocks[0].ls_1.scale.shape) == shape and float(m.blocks[0].ls_1.scale[0]) == pytest.approx(1e-3)


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(init="he"), ["init", "'he'", "'gpt2'"]),
        (dict(norm="sandwich"), ["norm", "'deepnorm'"]),
        (dict(layerscale_kind=3), ["layerscale_kind", "3"]),
        (dict(norm="deepnorm", residual=False), ["residual=True"]),
    ],
)
def test_bad_switch_values_get_clear_errors(kw, words):
    with pytest.raises(ValueError) as e:
        replace(C, **kw)
    for w in words:
        assert w in str(e.value)


def test_old_checkpoints_with_scale_residual_init_still_load(tmp_path):
    m = fresh(C)
    blob = {
        "format": "andrea-checkpoint",
        "version": 1,
        "config": {**C.to_dict(), "scale_residual_init": False},
        "state_dict": m.state_dict(),
        "extra": {},
    }
    del blob["config"]["init"]
    torch.save(blob, tmp_path / "old.pt")
    assert Andrea.load(tmp_path / "old.pt").config.init == "normal"
