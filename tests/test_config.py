import math
from dataclasses import FrozenInstanceError, replace

import pytest

from andrea import ANDREA_120M, AndreaConfig


def test_preset_matches_design():
    c = ANDREA_120M
    assert (c.d_model, c.n_layer, c.n_head, c.d_hidden, c.vocab_size, c.context_length) == (
        768,
        12,
        12,
        3072,
        8449,
        1024,
    )
    assert (c.norm, c.activation, c.residual, c.layerscale, c.bias, c.ln_eps) == (
        "pre",
        "gelu_tanh",
        True,
        None,
        True,
        1e-5,
    )


def test_frozen_and_replace():
    with pytest.raises(FrozenInstanceError):
        ANDREA_120M.d_model = 1
    small = replace(ANDREA_120M, d_model=128, n_head=4)
    assert small.d_hidden == 512  # mlp_dim=None follows the width
    assert replace(ANDREA_120M, activation="swiglu").d_hidden == 2048  # 8/3 * 768


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(d_model=100, n_head=12), ["d_model=100", "n_head=12"]),
        (dict(n_layer=0), ["n_layer", "0"]),
        (dict(d_model=-8), ["d_model", "-8"]),
        (dict(layerscale=-1e-6), ["layerscale", "-1e-06", ">= 0"]),
        (dict(layerscale=math.nan), ["layerscale", "nan"]),
        (dict(layerscale=math.inf), ["layerscale", "inf"]),
        (dict(norm="middle"), ["norm", "'middle'", "'pre'", "'post'", "'none'"]),
        (dict(activation="tanh"), ["activation", "'tanh'", "gelu_tanh"]),
        (dict(mlp_dim=0), ["mlp_dim", "0"]),
        (dict(dropout=1.5), ["dropout", "1.5"]),
        (dict(residual="yes"), ["residual", "'yes'"]),
        (dict(vocab_size=2.5), ["vocab_size", "2.5"]),
    ],
)
def test_bad_configs_name_field_value_and_allowed(kwargs, words):
    with pytest.raises(ValueError) as e:
        AndreaConfig(**kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
