import pytest
import torch
import torch.nn.functional as F

from andrea import AndreaConfig
from andrea.model.layers import MLP, Block, CausalSelfAttention, LayerNorm, attention_reference, gelu, layer_norm


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_layer_norm_formula_matches_torch(dtype, tol):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 7, 64, generator=g, dtype=dtype) * 3 + 1
    gamma = torch.randn(64, generator=g, dtype=dtype)
    beta = torch.randn(64, generator=g, dtype=dtype)
    ref = torch.nn.functional.layer_norm(x, (64,), gamma, beta, 1e-5)
    mine = layer_norm(x, gamma, beta, 1e-5)
    assert (mine - ref).abs().max() <= tol * ref.abs().max()
    mod = LayerNorm(64).to(dtype)
    with torch.no_grad():
        mod.weight.copy_(gamma), mod.bias.copy_(beta)
    assert (mod(x) - mine).abs().max() <= tol * ref.abs().max()
    assert (
        torch.nn.LayerNorm(64, dtype=dtype)(x)
        - layer_norm(x, torch.ones(64, dtype=dtype), torch.zeros(64, dtype=dtype))
    ).abs().max() <= tol * 10


@pytest.mark.parametrize("approx", ["tanh", "none"])
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_gelu_formula_matches_torch(approx, dtype, tol):
    x = torch.linspace(-8, 8, 10001, dtype=dtype)
    ref = F.gelu(x, approximate=approx)
    assert (gelu(x, approx) - ref).abs().max() <= tol * ref.abs().max()


def test_gelu_bad_mode():
    with pytest.raises(ValueError, match="'sigmoid'"):
        gelu(torch.zeros(1), "sigmoid")


def test_sdpa_equals_explicit_causal_attention():
    torch.manual_seed(0)
    cfg = AndreaConfig(d_model=64, n_head=4, n_layer=1, vocab_size=50, context_length=32)
    attn = CausalSelfAttention(cfg).double()
    x = torch.randn(3, 17, 64, dtype=torch.float64)
    q, k, v = attn.split_heads(x)
    ref = attention_reference(q, k, v).transpose(1, 2).reshape(3, 17, 64)
    assert torch.allclose(attn(x), attn.proj(ref), atol=1e-12, rtol=0)


@pytest.mark.parametrize("act", ["gelu_tanh", "gelu", "relu", "swiglu"])
def test_mlp_shapes(act):
    cfg = AndreaConfig(d_model=48, n_head=4, activation=act)
    mlp = MLP(cfg)
    assert mlp(torch.randn(2, 5, 48)).shape == (2, 5, 48)
    assert mlp.proj.in_features == cfg.d_hidden


def test_lambda_zero_prenorm_block_is_identity():
    torch.manual_seed(0)
    blk = Block(AndreaConfig(d_model=32, n_head=4, layerscale=0.0))
    x = torch.randn(2, 9, 32)
    assert torch.equal(blk(x), x)


def test_small_lambda_is_near_identity_and_scales_linearly():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    moves = []
    for lam in (1e-2, 1e-4, 1e-6):
        torch.manual_seed(1)
        blk = Block(AndreaConfig(d_model=32, n_head=4, layerscale=lam)).double()
        with torch.no_grad():
            moves.append(float((blk(x) - x).norm() / x.norm()))
    assert moves[2] < 1e-5
    # the relative move shrinks ~100x per 100x smaller lambda (exactly linear to first order)
    assert 80 < moves[0] / moves[1] < 120 and 80 < moves[1] / moves[2] < 120


def test_norm_placements_differ_as_expected():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 32) * 5 + 3
    outs = {}
    for norm in ("pre", "post", "none"):
        torch.manual_seed(1)
        outs[norm] = Block(AndreaConfig(d_model=32, n_head=4, norm=norm))(x)
    # post-norm ends in a LayerNorm: every token has mean ~0 and variance ~1 (gamma=1, beta=0 at init)
    post = outs["post"]
    assert post.mean(-1).abs().max() < 1e-5 and (post.var(-1, unbiased=False) - 1).abs().max() < 1e-3
    # pre-norm leaves the stream unnormalised: it keeps the input's scale and offset
    assert outs["pre"].mean(-1).mean() > 2.0
    assert not torch.allclose(outs["pre"], outs["none"])
    # with the same weights, pre and none differ only by the LayerNorm in front of each sublayer
    torch.manual_seed(1)
    none_block = Block(AndreaConfig(d_model=32, n_head=4, norm="none"))
    assert torch.equal(none_block(x), outs["none"])


def test_residual_off_drops_the_input():
    torch.manual_seed(0)
    cfg = AndreaConfig(d_model=32, n_head=4, residual=False, layerscale=0.0)
    x = torch.randn(2, 5, 32)
    assert torch.equal(Block(cfg)(x), torch.zeros_like(x))  # lambda=0 and no "x +": nothing passes


def test_andrea_layers_is_kept_as_a_name_of_model_layers():
    """The documented import `from andrea.layers import layer_norm, gelu` still works after the
    package was grouped into subpackages: andrea.layers is andrea.model.layers itself."""
    import andrea.layers
    import andrea.model.layers
    from andrea.layers import gelu, layer_norm

    assert andrea.layers is andrea.model.layers
    assert layer_norm is andrea.model.layers.layer_norm and gelu is andrea.model.layers.gelu
