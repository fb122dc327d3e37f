import pytest
import torch

from andrea.training.data import ANDREA_VOCAB, BPETokenizer, ByteTokenizer, get_tokenizer, load_text, load_token_data

SAMPLES = [
    "Hello, world!",
    "tabs\tand\nnewlines\r\n",
    "ünïcödé 日本語 🎉",
    "\x00\x01\x7f control",
    "",
    "  leading spaces",
    "def f(x):\n    return x ** 2  # GELU(x) = x·Φ(x)",
]


@pytest.fixture(scope="module")
def bpe():
    return get_tokenizer("bpe")


def test_bpe_vocab_is_andreas(bpe):
    assert bpe.vocab_size == ANDREA_VOCAB == 8449


@pytest.mark.parametrize("text", SAMPLES)
def test_bpe_round_trip(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_cached_and_reloaded(bpe, tmp_path):
    bpe.save(tmp_path / "t.json")
    again = BPETokenizer.load(tmp_path / "t.json")
    assert again.encode("LayerNorm and GELU") == bpe.encode("LayerNorm and GELU")
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BPETokenizer.load(tmp_path / "nope.json")


def test_bpe_bad_ids(bpe):
    with pytest.raises(ValueError, match="token id 9000 is outside the vocabulary"):
        bpe.decode([1, 9000])


@pytest.mark.parametrize("text", SAMPLES)
def test_byte_round_trip(text):
    t = ByteTokenizer()
    assert t.decode(t.encode(text)) == text


def test_byte_tokenizer_never_crashes_on_invalid_utf8():
    t = ByteTokenizer()
    assert isinstance(t.decode([0xFF, 0xFE, 65]), str)  # replacement characters, no exception
    with pytest.raises(ValueError, match="256"):
        t.decode([256])


def test_load_text_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_text(tmp_path / "missing.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00" * 1000)
    with pytest.raises(ValueError, match="not UTF-8"):
        load_text(tmp_path / "bin.txt")
    (tmp_path / "short.txt").write_text("too short")
    with pytest.raises(ValueError, match="at least 1000"):
        load_text(tmp_path / "short.txt")
    with pytest.raises(ValueError, match="not a file"):
        load_text(tmp_path)


def test_split_is_deterministic_and_batches_are_windows():
    a, b = load_token_data("bytes"), load_token_data("bytes")
    assert torch.equal(a.train, b.train) and torch.equal(a.val, b.val)
    assert len(a.val) / (len(a.train) + len(a.val)) == pytest.approx(0.1, abs=1e-3)
    x, y = a.batch("train", 4, 16, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 16) and torch.equal(x[:, 1:], y[:, :-1])
    with pytest.raises(ValueError, match="split"):
        a.batch("test", 1, 4, torch.Generator())


def test_custom_corpus(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("The quick brown fox jumps over the lazy dog. " * 100)
    d = load_token_data("bytes", p)
    assert d.vocab_size == 256 and len(d.train) > 0


def test_the_corpus_is_the_shipped_text_whatever_python_runs_it(monkeypatch, bpe):
    """The chapters' corpus ships (Python 3.11's docs): with the installed standard library and pydoc's
    topics made unreadable, the text is the same, and so is the BPE trained on it, which is the trained
    model's own tokenizer (chapter 8 and the attention page use that one)."""
    import hashlib
    import sys
    import sysconfig

    from andrea.trained import model as trained
    from andrea.training import data

    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"stdlib": "/nowhere"})
    monkeypatch.setitem(sys.modules, "pydoc_data", None)  # import pydoc_data now fails
    text = data.python_docs_corpus()
    assert (
        hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] == "ec3c2f6a0436216d"
    )  # what Python 3.11 gave before it shipped
    assert bpe._tok.to_str() == trained.TOKENIZER.read_text(encoding="utf-8")


def test_an_altered_or_missing_corpus_file_is_refused_by_name(monkeypatch, tmp_path):
    from andrea.training import data

    blob = data.DOCS_TEXT.read_bytes()
    bad = tmp_path / "docs.txt.xz"
    monkeypatch.setattr(data, "DOCS_TEXT", bad)
    bad.write_bytes(blob[:100])
    with pytest.raises(ValueError, match="docs.txt.xz.*altered.*git checkout"):
        data.python_docs_corpus()
    bad.unlink()
    with pytest.raises(FileNotFoundError, match="docs.txt.xz.*restore it from git"):
        data.python_docs_corpus()
