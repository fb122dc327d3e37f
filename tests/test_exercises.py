"""Every exercise checker accepts a correct answer and rejects a wrong one."""

import math

import pytest
import torch
import torch.nn.functional as F

from andrea import analysis, exercises as X
from andrea.model import count_parameters


def _decompose(model, idx):
    emb, deltas, _ = analysis.stream_contributions(model, idx)
    return [emb] + deltas


def _emb_grad(model, idx, tgt):
    from andrea import gradient_flow
    return float(gradient_flow(model, idx, tgt).grad_rms[0])


CASES = [
    (X.check_stream_decomposition, _decompose, lambda m, i: _decompose(m, i)[1:]),
    (X.check_embedding_gradient, _emb_grad, lambda m, i, t: 2 * _emb_grad(m, i, t)),
    (X.check_layer_norm, lambda x, g, b, e: F.layer_norm(x, (x.shape[-1],), g, b, e),
     lambda x, g, b, e: g * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + e) + b),  # unbiased std: wrong
    (X.check_count_layer_norms, lambda c: 0 if c.norm == "none" else 2 * c.n_layer + (c.norm == "pre"),
     lambda c: 2 * c.n_layer + 1),
    (X.check_post_norm_sublayer, lambda x, f, ln: ln(x + f(x)), lambda x, f, ln: x + f(ln(x))),
    (X.check_lr_schedule,
     lambda s, n, w, lr, r: lr * (s + 1) / w if w and s < w else lr * (r + (1 - r) * 0.5 * (1 + math.cos(math.pi * min(1.0, (s - w) / max(1, n - w))))),
     lambda s, n, w, lr, r: lr),
    (X.check_mlp_params, lambda d, h, b: 2 * d * h + (h + d) * b, lambda d, h, b: 2 * d * h),
    (X.check_mlp_forward, lambda x, W1, b1, W2, b2: F.gelu(x @ W1 + b1, approximate="tanh") @ W2 + b2,
     lambda x, W1, b1, W2, b2: F.relu(x @ W1 + b1) @ W2 + b2),
    (X.check_gelu, lambda x: x * 0.5 * (1 + torch.erf(x / math.sqrt(2))), lambda x: F.gelu(x, approximate="tanh")),
    (X.check_gelu_derivative,
     lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi),
     lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2)))),
    (X.check_parameter_count, lambda c: count_parameters(c)["total"],
     lambda c: count_parameters(c)["total"] + c.vocab_size * c.d_model),  # counts the tied head twice
    (X.check_six_line_forward, lambda m, i: m(i),
     lambda m, i: (m.embed(i)) @ m.token_embedding.weight.T),  # forgets the blocks
    (X.check_cait_init, analysis.cait_init, lambda d: 1e-4),
    (X.check_layerscale_sublayer, lambda x, f, ln, lam: x + lam * f(ln(x)), lambda x, f, ln, lam: x + lam.mean() * f(ln(x))),
]


@pytest.mark.parametrize("checker, right, wrong", CASES, ids=[c[0].__name__ for c in CASES])
def test_checker_accepts_right_and_rejects_wrong(checker, right, wrong):
    ok = checker(right)
    assert ok, repr(ok)
    bad = checker(wrong)
    assert not bad and repr(bad).startswith("✗")


def test_checker_reports_an_exception_in_the_readers_code():
    def broken(x, gamma, beta, eps):
        raise RuntimeError("oops")

    res = X.check_layer_norm(broken)
    assert not res and "raised RuntimeError: oops" in repr(res)
