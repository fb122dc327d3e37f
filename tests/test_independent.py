"""ANDREA against an implementation written independently of this book: Hugging Face's GPT-2.

The same weights are copied into a ``transformers.GPT2LMHeadModel`` built from a config (nothing is
downloaded); logits and loss must agree to float64 precision. Negative controls: variants that
differ from GPT-2 in one detail (the exact GELU instead of the tanh one; post-norm wiring; a weight
copied without its transpose) must *not* agree, so the comparison can fail.
"""

from dataclasses import replace

import pytest
import torch

from andrea import Andrea, AndreaConfig, random_batch

transformers = pytest.importorskip("transformers")  # a test dependency (requirements.txt)

CFG = AndreaConfig(vocab_size=211, context_length=24, d_model=48, n_head=4, n_layer=3)


def hf_twin(model: Andrea, transpose: bool = True):
    """A GPT2LMHeadModel holding ``model``'s weights (GPT-2 stores linear weights as (in, out))."""
    c = model.config
    hc = transformers.GPT2Config(
        vocab_size=c.vocab_size,
        n_positions=c.context_length,
        n_embd=c.d_model,
        n_layer=c.n_layer,
        n_head=c.n_head,
        n_inner=c.d_hidden,
        activation_function="gelu_new",
        layer_norm_epsilon=c.ln_eps,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
    )
    hf = transformers.GPT2LMHeadModel(hc).double().eval()
    t = (lambda w: w.T) if transpose else (lambda w: w)
    with torch.no_grad():
        tr = hf.transformer
        tr.wte.weight.copy_(model.token_embedding.weight)
        tr.wpe.weight.copy_(model.position_embedding.weight)
        for blk, h in zip(model.blocks, tr.h):
            for mine, theirs in ((blk.ln_1, h.ln_1), (blk.ln_2, h.ln_2)):
                theirs.weight.copy_(mine.weight)
                theirs.bias.copy_(mine.bias)
            for mine, theirs in (
                (blk.attn.qkv, h.attn.c_attn),
                (blk.attn.proj, h.attn.c_proj),
                (blk.mlp.fc, h.mlp.c_fc),
                (blk.mlp.proj, h.mlp.c_proj),
            ):
                w = t(mine.weight)
                if w.shape != theirs.weight.shape:  # the wrong mapping of a square matrix still fits...
                    w = w.reshape(theirs.weight.shape)  # ...and a non-square one is forced to
                theirs.weight.copy_(w)
                theirs.bias.copy_(mine.bias)
        tr.ln_f.weight.copy_(model.final_norm.weight)
        tr.ln_f.bias.copy_(model.final_norm.bias)
    return hf


def compare(model: Andrea, hf, idx):
    with torch.no_grad():
        ours = model.double().eval()(idx)
        theirs = hf(input_ids=idx).logits
        loss_ours = model.loss(idx[:, :-1], idx[:, 1:])
        loss_theirs = hf(input_ids=idx, labels=idx).loss
    return float((ours - theirs).abs().max()), abs(float(loss_ours) - float(loss_theirs))


@pytest.mark.parametrize("seed", [0, 1])
def test_andrea_equals_gpt2_written_by_others(seed):
    torch.manual_seed(seed)
    m = Andrea(CFG)
    idx, _ = random_batch(CFG.vocab_size, 3, CFG.context_length, seed=seed)
    d_logits, d_loss = compare(m, hf_twin(m), idx)
    # Logits in float64 agree to rounding; transformers computes its loss in float32 (it casts the
    # logits down), so the losses agree to float32 precision.
    assert d_logits < 1e-10 and d_loss < 1e-6, (d_logits, d_loss)


@pytest.mark.parametrize("variant", [{"activation": "gelu"}, {"norm": "post"}, "no transpose"])
def test_negative_controls_do_not_agree(variant):
    torch.manual_seed(0)
    idx, _ = random_batch(CFG.vocab_size, 3, CFG.context_length, seed=0)
    if variant == "no transpose":
        m = Andrea(CFG)
        hf = hf_twin(m, transpose=False)
    else:
        m = Andrea(replace(CFG, **variant))
        if m.config.norm == "post":  # post-norm has no final norm: give the twin an identity one
            m.final_norm = torch.nn.LayerNorm(CFG.d_model)
            m.final_norm.reset_parameters()
        hf = hf_twin(m)
        if m.config.norm == "post":
            m.final_norm = torch.nn.Identity()
    d_logits, _ = compare(m, hf, idx)
    assert d_logits > 1e-6, f"{variant}: a wrong model agreed with GPT-2 ({d_logits:.1e})"
