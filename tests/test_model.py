from dataclasses import replace
from pathlib import Path

import pytest
import torch

from andrea import ANDREA_120M, Andrea, AndreaConfig, count_layer_norms, count_parameters

TINY = AndreaConfig(vocab_size=97, context_length=16, d_model=32, n_layer=3, n_head=4)


def tiny(**kw):
    torch.manual_seed(0)
    return Andrea(replace(TINY, **kw))


def test_shapes():
    m = tiny()
    idx = torch.randint(0, 97, (2, 16))
    assert m(idx).shape == (2, 16, 97)
    assert m.loss(idx, idx).ndim == 0


def test_causality():
    m = tiny()
    idx = torch.randint(0, 97, (1, 16))
    base = m(idx)
    for t in (0, 7, 15):
        changed = idx.clone()
        changed[0, t] = (changed[0, t] + 1) % 97
        out = m(changed)
        assert torch.equal(out[0, :t], base[0, :t]), t
        assert not torch.allclose(out[0, t], base[0, t])


def test_tied_head_is_the_embedding():
    m = tiny()
    x = torch.randn(1, 1, 32)
    assert torch.allclose(x @ m.token_embedding.weight.T, torch.einsum("btc,vc->btv", x, m.token_embedding.weight))
    assert all(p is not m.token_embedding.weight for n, p in m.named_parameters() if n != "token_embedding.weight")


@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(norm="post"),
        dict(norm="none"),
        dict(norm="final"),
        dict(norm="final", bias=False),
        dict(layerscale=1e-4),
        dict(activation="swiglu"),
        dict(bias=False),
        dict(d_model=48, n_head=6, mlp_dim=100, n_layer=5),
        dict(activation="relu", norm="post", layerscale=0.1),
    ],
)
def test_parameter_count_numel_and_formula_agree(kw):
    m = tiny(**kw)
    by_model = count_parameters(m)
    by_formula = count_parameters(m.config)
    assert by_model == by_formula
    unique = {id(p): p.numel() for p in m.parameters()}
    assert by_model["total"] == sum(unique.values())


def test_andrea_120m_count_and_layer_norms():
    counts = count_parameters(ANDREA_120M)
    assert counts["per_block"]["mlp"] == 2 * 768 * 3072 + 3072 + 768
    assert counts["token_embedding"] == 8449 * 768
    m = Andrea(ANDREA_120M)
    assert count_parameters(m) == counts
    assert count_layer_norms(m) == 25
    assert count_layer_norms(Andrea(replace(ANDREA_120M, n_layer=2, norm="post"))) == 4
    assert count_layer_norms(Andrea(replace(ANDREA_120M, n_layer=2, norm="none"))) == 0
    assert count_layer_norms(Andrea(replace(ANDREA_120M, n_layer=2, norm="final"))) == 1


def test_final_is_none_with_the_final_layer_norm():
    """norm="final" (chapter 2's control) computes LN_final(stack of "none" blocks): with the same
    weights, its logits are the "none" model's with the last LayerNorm applied before the head."""
    torch.manual_seed(0)
    m_final = tiny(norm="final")
    torch.manual_seed(0)
    m_none = tiny(norm="none")
    assert {k for k in m_final.state_dict()} - {k for k in m_none.state_dict()} == {
        "final_norm.weight",
        "final_norm.bias",
    }
    for k, v in m_none.state_dict().items():
        assert torch.equal(v, m_final.state_dict()[k]), k  # the same draws: the LayerNorm takes no random numbers
    idx = torch.randint(0, m_none.config.vocab_size, (2, 8))
    x = m_none.drop(m_none.token_embedding(idx) + m_none.position_embedding(torch.arange(8)))
    for blk in m_none.blocks:
        x = blk(x)
    expected = (
        torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=m_none.config.ln_eps) @ m_none.token_embedding.weight.T
    )
    assert torch.allclose(m_final(idx), expected, atol=1e-5)
    assert not torch.allclose(m_none(idx), expected, atol=1e-3)


def test_init_is_gpt2():
    torch.manual_seed(0)
    m = Andrea(replace(ANDREA_120M, n_layer=12))
    assert abs(float(m.blocks[0].attn.qkv.weight.detach().std()) - 0.02) < 5e-4
    assert abs(float(m.blocks[0].mlp.proj.weight.detach().std()) - 0.02 / 24**0.5) < 2e-4
    assert float(m.blocks[0].mlp.fc.bias.detach().abs().max()) == 0.0


def test_bad_token_ids_and_lengths():
    m = tiny()
    with pytest.raises(ValueError, match=r"token id 97 is outside the vocabulary \[0, 97\)"):
        m(torch.tensor([[1, 97]]))
    with pytest.raises(ValueError, match=r"token id -1 is outside"):
        m(torch.tensor([[-1, 3]]))
    with pytest.raises(ValueError, match="sequence length 17 exceeds the context length 16"):
        m(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="shape"):
        m(torch.zeros(16, dtype=torch.long))
    with pytest.raises(ValueError, match="dtype"):
        m(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="targets"):
        m.loss(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long))


def test_save_load_roundtrip(tmp_path):
    m = tiny(layerscale=1e-3, norm="post")
    path = m.save(tmp_path / "ckpt" / "m.pt")
    back = Andrea.load(path)
    assert back.config == m.config
    idx = torch.randint(0, 97, (2, 8))
    assert torch.equal(back(idx), m(idx))


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        Andrea.load(tmp_path / "nope.pt")
    path = tiny().save(tmp_path / "m.pt")
    data = path.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable ANDREA checkpoint"):
        Andrea.load(tmp_path / "cut.pt")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.pt")
    with pytest.raises(ValueError, match="not an ANDREA checkpoint"):
        Andrea.load(tmp_path / "foreign.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(ValueError, match="not a readable ANDREA checkpoint"):
        Andrea.load(tmp_path / "text.pt")


class _Evil:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').write_text('x')",))


def test_load_never_runs_pickled_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.save({"format": "andrea-checkpoint", "evil": _Evil()}, tmp_path / "evil.pt")
    with pytest.raises(ValueError):
        Andrea.load(tmp_path / "evil.pt")
    assert not (tmp_path / "PWNED").exists()


def test_a_full_disk_names_the_file_and_the_free_space(tmp_path, monkeypatch):
    """Issue 32: torch's writer on a full disk says only "unexpected pos ..."; the error now names the
    checkpoint, the free space on its disk, and that the checkpoint already there is kept."""
    m = tiny()
    path = m.save(tmp_path / "last.pt")
    before = path.read_bytes()

    def full(obj, f, *a, **k):
        Path(f).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:778] . unexpected pos 5299072 vs 5298960")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(OSError) as e:
        m.save(path)
    text = str(e.value)
    assert str(path) in text and "MiB free" in text and "unexpected pos" in text
    assert "already there is kept" in text
    assert path.read_bytes() == before  # the old checkpoint is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no temporary file left
