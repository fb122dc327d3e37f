"""The attention viewer (book/_static/andrea_attention.js and its Web Worker) in a real headless Chromium,
with every request off the local server blocked.

No book build is needed: a temporary folder holds the viewer's JavaScript and stylesheet, the files the
book's Sphinx extension writes into the built site (``_static/andrea/``: written here by the
extension's own hook), and one page with the viewer as ``andrea.web.attention`` writes it.

* the page's tokenizer gives Hugging Face's ids on prose, code, numbers, punctuation, whitespace runs and
  non-ASCII text;
* the page's trained model gives torch's attention maps (``analysis.attention_maps``) in every block and
  head within ATOL, and the comparison can fail: the maps without the 1/sqrt(head_dim) scaling, without
  the causal mask, or of post-norm blocks differ from torch's by far more;
* the untrained model's maps are causal rows of sum 1 spread almost evenly (mean normalised entropy
  above 0.9), the trained model's are not (some head far below);
* the viewer redraws for a new text, block, head and model, and says in the page what is wrong with an
  empty or a too long text; nothing logs a console error or leaves localhost; at a 390 px phone nothing
  scrolls sideways and the labels stay at 10 px or more.
"""

import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from conftest import ROOT, need

sys.path.insert(0, str(ROOT / "tools"))
from pagemodel import Served, localhost_only  # noqa: E402

from andrea.measure import analysis  # noqa: E402
from andrea.web import attention as SA  # noqa: E402

STATIC = ROOT / "book" / "_static"
SCRIPTS = ("andrea_flow.js", "andrea_attention.js", "andrea_attention_worker.js", "andrea.css")
ATOL = 1e-4  # float32 weights, float64 sums in the page, float32 in torch: they differ by about 2e-6
SENTENCE = "The model reads each word of the sentence, then looks back at the words before it."
EL = ""  # the viewer's element id on the test page (set by the pages fixture)
MEASURED: dict = {}  # what the tests measured, printed at the end of the module (pytest -s)

STRINGS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "A list is a mutable sequence; a tuple is not.",
    "Python's manuals describe the language and its library.",
    "don't, won't, I'll, we've, you're, she'd, it's",
    "DON'T SHOUT'S",
    "Attention is all you need",
    "    indented four spaces",
    "trailing spaces    ",
    "two  spaces   three    four",
    "tab\tseparated\tvalues",
    "\t\tleading tabs",
    "line one\nline two\n\nline four",
    "\r\nwindows line end\r\n",
    "mixed \t \n whitespace \n\t ",
    "def f(x):\n    return x ** 2 + 1\n",
    "for i in range(10):\n\tprint(i, end='')",
    "class Foo(Bar):\n    def __init__(self, *args, **kwargs):\n        super().__init__()",
    "import numpy as np; a = np.zeros((3, 4), dtype=np.float32)",
    "x = {'a': 1, \"b\": [2, 3]}  # a comment",
    "if x >= 0 and y != 1 or not z: pass",
    "lambda a, b=2: a if a else b",
    "@decorator\nasync def main() -> None: await asyncio.sleep(0.5)",
    'print(f"{value!r:>10}")',
    "0 1 12 123 1234 12345 123456 1234567",
    "3.14159 2.71828 1e-5 6.02e23 -42 +7",
    "0x1F 0o17 0b1010 1_000_000",
    "2024-01-31T12:34:56Z",
    "$1,234.56 and 50% off",
    "!!!",
    "???!!!...",
    "...---...",
    "((([[[{{{}}}]]])))",
    "a--b==c!=d<=e>=f->g=>h",
    "#!/usr/bin/env python3",
    "/* C comment */ // line comment",
    "https://docs.python.org/3/library/stdtypes.html#str.split",
    "user@example.com",
    "naïve café",
    "Crème brûlée à la française",
    "Straße, Ärger, Öl, Übermut",
    "Ελληνικά γράμματα",
    "Русский текст здесь",
    "日本語のテキスト",
    "中文分词测试",
    "한국어 문장",
    "emoji 😀 and 👍🏽 thumbs",
    "🎉🎉🎉",
    "family 👨‍👩‍👧 joined",
    "math: ∀x ∈ ℝ, x² ≥ 0 ⇒ √(x²) = |x|",
    "quotes “curly” ‘single’ «guillemets»",
    "dash — en – hyphen -",
    "non\u00a0breaking\u2003em space\u3000ideographic",
    "zero\u200bwidth and bom\ufeffinside",
    "nel\x85char and \x1cfile separator",
    "<|endoftext|>",
    "before<|endoftext|>after",
    "a",
    " ",
    "\n",
    "",
]


def _load_extension():
    spec = importlib.util.spec_from_file_location("andrea_site", ROOT / "book" / "_ext" / "andrea_site.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def page_html(body: str) -> str:
    scripts = "".join(f'<script src="../_static/{s}"></script>' for s in ("andrea_flow.js", "andrea_attention.js"))
    return (
        '<!doctype html><html lang="en" data-content_root="../"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="../_static/andrea.css">'
        f"{scripts}</head><body style='max-width: 900px; margin: 8px auto; padding: 0 8px'>{body}</body></html>"
    )


def _with_nan(blob: bytes, every: int = 70) -> bytes:
    """A float16 safetensors file of the same size, one value in ``every`` set to NaN (0x7e00)."""
    n = int.from_bytes(blob[:8], "little")
    start = 8 + n
    data = bytearray(blob)
    for at in range(start, len(blob) - 1, 2 * every):
        data[at : at + 2] = b"\x00\x7e"
    return bytes(data)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("attention-site")
    (d / "_static").mkdir()
    for name in SCRIPTS:
        shutil.copy2(STATIC / name, d / "_static" / name)
    # the files of _static/andrea/, written by the book's extension as at the end of a build
    _load_extension()._page_assets(SimpleNamespace(builder=SimpleNamespace(format="html"), outdir=str(d)), None)
    from andrea.web.training import CORPUS_FILE  # the training panel's corpus is written there too

    assert sorted(p.name for p in (d / "_static" / "andrea").iterdir()) == sorted((*SA.ASSETS, CORPUS_FILE))
    viewer = SA.viewer_html(SENTENCE)
    global EL
    EL = re.search(r'id="(andrea-attention-\d+)"', viewer).group(1)
    (d / "book").mkdir()
    (d / "book" / "attention.html").write_text(page_html(viewer))
    (d / "book" / "blank.html").write_text(page_html(""))
    # three broken sites: no _static/andrea/ at all, a truncated weights file, and one with NaN in it
    for name in ("missing", "truncated", "nan"):
        (d / name / "book").mkdir(parents=True)
        shutil.copytree(d / "_static", d / name / "_static", ignore=shutil.ignore_patterns("andrea"))
        (d / name / "book" / "attention.html").write_text(page_html(viewer))
    blob = (d / "_static" / "andrea" / "trained.safetensors").read_bytes()
    for name in ("truncated", "nan"):
        (d / name / "_static" / "andrea").mkdir()
        for f in ("config.json", "tokenizer.json"):
            shutil.copy2(d / "_static" / "andrea" / f, d / name / "_static" / "andrea" / f)
    (d / "truncated" / "_static" / "andrea" / "trained.safetensors").write_bytes(blob[: len(blob) // 2])
    (d / "nan" / "_static" / "andrea" / "trained.safetensors").write_bytes(_with_nan(blob))
    with Served(d) as served:
        yield SimpleNamespace(base=served.base, dir=d)


@pytest.fixture(scope="module", autouse=True)
def _print_measured():
    yield
    if MEASURED:
        print("\nattention viewer, measured:", json.dumps(MEASURED, indent=1))


class Page:
    """A page with every non-localhost request blocked and recorded, console errors recorded."""

    def __init__(self, browser, base: str, path: str, width: int = 1000, dark: bool = False):
        scheme = "dark" if dark else "light"
        self.ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        self.external: list = []
        self.errors: list = []
        self.ctx.route("**/*", localhost_only(base, self.external))
        self.page = self.ctx.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(base + path, wait_until="load")

    def clean(self) -> None:
        assert self.external == [], f"requests left localhost: {self.external}"
        assert self.errors == [], f"console errors: {self.errors}"

    def close(self) -> None:
        self.ctx.close()


@pytest.fixture(scope="module")
def hf():
    return SA._tokenizer()


@pytest.fixture(scope="module")
def torch_model():
    from andrea.trained import model as trained

    return trained.load()


def wait_state(pg, states=("drawn",), timeout_ms: int = 60_000) -> str:
    pg.wait_for_function(
        "([id, s]) => s.includes(document.getElementById(id).getAttribute('data-state'))",
        arg=[EL, list(states)],
        timeout=timeout_ms,
    )
    return pg.get_attribute(f"#{EL}", "data-state") or ""


def shown(pg) -> dict:
    """What the viewer drew from: its tokens and every block's and head's maps (T x T each)."""
    r = pg.evaluate(
        """id => { const r = document.getElementById(id).andreaAttention;
             return {tokens: r.tokens, T: r.T, L: r.n_layer, H: r.n_head, maps: Array.from(r.maps), ms: r.ms,
                     loadMs: r.loadMs, model: r.model}; }""",
        EL,
    )
    r["maps"] = np.array(r["maps"], dtype=np.float64).reshape(r["L"], r["H"], r["T"], r["T"])
    return r


def torch_maps(model, ids) -> np.ndarray:
    with torch.no_grad():
        maps = analysis.attention_maps(model, torch.tensor([ids]))
    return torch.stack([m[0] for m in maps]).double().numpy()  # (L, H, T, T)


def entropy(maps: np.ndarray) -> np.ndarray:
    """Each head's mean normalised entropy (analysis.normalised_entropy): (L, H)."""
    return analysis.normalised_entropy(torch.from_numpy(maps)).mean(-1).numpy()


# ---------------------------------------------------------------------------------------------------
def test_tokenizer_equals_hugging_face(browser, pages, hf):
    assert len([s for s in STRINGS if s]) >= 50
    p = Page(browser, pages.base, "book/blank.html")
    try:
        got = p.page.evaluate(
            """async strings => {
                 const tok = AndreaAttention.tokenizer(await (await fetch("../_static/andrea/tokenizer.json")).text());
                 return strings.map(s => tok.encode(s)); }""",
            STRINGS,
        )
        bad = [(s, g, hf.encode(s)) for s, g in zip(STRINGS, got) if g != hf.encode(s)]
        assert bad == [], f"{len(bad)} of {len(STRINGS)} strings tokenized differently (text, page, HF): {bad[:3]}"
        MEASURED["tokenizer_strings_equal_to_hf"] = len(STRINGS)
        p.clean()
    finally:
        p.close()


def test_trained_maps_in_the_page_equal_torch(browser, pages, hf, torch_model):
    p = Page(browser, pages.base, "book/attention.html")
    try:
        pg = p.page
        assert wait_state(pg, ("drawn", "error")) == "drawn", pg.inner_text(f"#{EL}")
        r = shown(pg)
        ids = [t["id"] for t in r["tokens"]]
        assert ids == hf.encode(SENTENCE) and 16 <= len(ids) <= 24
        ref = torch_maps(torch_model, ids)
        diff = np.abs(r["maps"] - ref)
        worst = np.unravel_index(diff.argmax(), diff.shape)
        assert diff.max() <= ATOL, f"page vs torch: {diff.max():.2e} at block {worst[0] + 1}, head {worst[1] + 1}"
        MEASURED["trained_max_abs_diff_vs_torch"] = float(diff.max())
        MEASURED["trained_tokens"] = len(ids)
        MEASURED["worker_forward_ms"] = round(r["ms"], 1)
        MEASURED["worker_load_ms (config, tokenizer, 14 MB weights)"] = round(r["loadMs"], 1)
        # the heatmap shows block 1, head 1: its cells are those weights, and nothing above the diagonal
        cells = pg.eval_on_selector_all(
            f"#{EL} rect[data-q]", "rs => rs.map(r => [+r.dataset.q, +r.dataset.k, +r.dataset.w])"
        )
        T = len(ids)
        assert len(cells) == T * (T + 1) // 2 and all(k <= q for q, k, _ in cells)
        assert max(abs(w - ref[0, 0, q, k]) for q, k, w in cells) <= ATOL
        labels = pg.eval_on_selector_all(f"#{EL} .andrea-attention-qlabel", "ts => ts.map(t => t.textContent)")
        assert labels[0] == "The" and "␣model" in labels
        look = pg.inner_text(f"#{EL} .andrea-attention-look")
        assert "trained ANDREA" in look and "What to look for" in look and f"{T} tokens" in look
        p.clean()
    finally:
        p.close()


def test_negative_controls_fail_the_comparison(browser, pages, hf, torch_model):
    """The page's own forward pass on its main thread: exact as shipped, and far off with the scaling,
    the causal mask or the pre-norm wiring changed (so the comparison above can fail). Also times a
    64-token forward pass in Chromium."""
    ids = hf.encode(SENTENCE)
    long_ids = hf.encode(" ".join(["the model reads the text"] * 20))[:64]
    p = Page(browser, pages.base, "book/blank.html")
    try:
        out = p.page.evaluate(
            """async ([ids, longIds]) => {
                 const A = AndreaAttention;
                 const cfg = await (await fetch("../_static/andrea/config.json")).json();
                 const blob = await (await fetch("../_static/andrea/trained.safetensors")).arrayBuffer();
                 const w = A.weightsOf(A.readSafetensors(blob));
                 const res = {};
                 for (const [name, opts] of [["as shipped", {}], ["no 1/sqrt(d) scaling", {scale: false}],
                                             ["no causal mask", {causal: false}], ["post-norm", {wiring: "post"}]])
                   res[name] = Array.from(A.attend(cfg, w, ids, opts).maps);
                 const ms = [];
                 for (let i = 0; i < 3; i++) {
                   const t = performance.now(); A.attend(cfg, w, longIds); ms.push(performance.now() - t); }
                 return {res, ms}; }""",
            [ids, long_ids],
        )
        ref = torch_maps(torch_model, ids)
        diffs = {k: float(np.abs(np.array(v).reshape(ref.shape) - ref).max()) for k, v in out["res"].items()}
        assert diffs["as shipped"] <= ATOL, diffs
        for name in ("no 1/sqrt(d) scaling", "no causal mask", "post-norm"):
            assert diffs[name] > 1000 * ATOL, f"the comparison cannot tell {name!r} from the model: {diffs}"
        MEASURED["negative_controls_max_abs_diff"] = diffs
        MEASURED["main_thread_forward_64_tokens_ms"] = [round(m) for m in out["ms"]]
        MEASURED["median_forward_64_tokens_ms"] = round(statistics.median(out["ms"]))
        p.clean()
    finally:
        p.close()


def test_untrained_maps_are_near_uniform_and_trained_are_not(browser, pages, hf):
    p = Page(browser, pages.base, "book/attention.html")
    try:
        pg = p.page
        assert wait_state(pg) == "drawn"
        trained = shown(pg)["maps"]
        pg.select_option(f"#{EL} select[name=model]", "untrained")
        assert wait_state(pg, ("drawn", "error")) == "drawn", pg.inner_text(f"#{EL}")
        r = shown(pg)
        assert r["model"] == "untrained" and pg.get_attribute(f"#{EL}", "data-model") == "untrained"
        assert "untrained ANDREA" in pg.inner_text(f"#{EL} .andrea-attention-look")
        for name, maps in (("untrained", r["maps"]), ("trained", trained)):
            T = maps.shape[-1]
            assert np.all(maps[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0), f"{name}: not causal"
            assert np.abs(maps.sum(-1) - 1).max() < 1e-5, f"{name}: rows do not sum to 1"
        e_untrained, e_trained = entropy(r["maps"]), entropy(trained)
        assert e_untrained.mean() > 0.9 and e_untrained.min() > 0.9, e_untrained
        assert e_trained.min() < 0.6 and e_trained.mean() < e_untrained.mean() - 0.05, e_trained
        MEASURED["entropy"] = {
            "untrained mean, min head": [round(float(e_untrained.mean()), 4), round(float(e_untrained.min()), 4)],
            "trained mean, min head": [round(float(e_trained.mean()), 4), round(float(e_trained.min()), 4)],
        }
        # the page's untrained draw has GPT-2's spread: 0.02, and 0.02 / sqrt(2 * 12) on the output projections
        std = pg.evaluate(
            """async () => { const cfg = await (await fetch("../_static/andrea/config.json")).json();
                 const w = AndreaAttention.untrainedWeights(cfg, 0);
                 const sd = a => { let s = 0, q = 0; for (const x of a) { s += x; q += x * x; }
                                   return Math.sqrt(q / a.length - (s / a.length) ** 2); };
                 return [sd(w["blocks.0.attn.qkv.weight"]), sd(w["blocks.5.attn.proj.weight"]),
                         sd(w["blocks.11.mlp.proj.weight"]), sd(w["token_embedding.weight"]),
                         w["blocks.0.ln_1.weight"].every(v => v === 1),
                         w["blocks.0.mlp.fc.bias"].every(v => v === 0)]; }"""
        )
        assert std[0] == pytest.approx(0.02, rel=0.01) and std[3] == pytest.approx(0.02, rel=0.01)
        assert std[1] == pytest.approx(0.02 / 24**0.5, rel=0.02) and std[2] == pytest.approx(0.02 / 24**0.5, rel=0.02)
        assert std[4] and std[5]
        p.clean()
    finally:
        p.close()


def test_the_viewer_redraws_and_explains_bad_input(browser, pages, hf):
    p = Page(browser, pages.base, "book/attention.html")
    try:
        pg = p.page
        assert wait_state(pg) == "drawn"
        text = "def add(a, b):\n    return a + b"
        pg.fill(f"#{EL} textarea", text)
        assert wait_state(pg, ("drawn", "error")) == "drawn"
        r = shown(pg)
        assert [t["id"] for t in r["tokens"]] == hf.encode(text)
        labels = pg.eval_on_selector_all(f"#{EL} .andrea-attention-qlabel", "ts => ts.map(t => t.textContent)")
        assert labels[:3] == ["def", "␣add", "("], labels
        assert pg.get_attribute(f"#{EL}", "data-tokens") == str(len(hf.encode(text)))

        def cells():
            return pg.eval_on_selector_all(f"#{EL} rect[data-q]", "rs => rs.map(r => +r.dataset.w)")

        before = cells()
        pg.select_option(f"#{EL} select[name=block]", "5")
        pg.select_option(f"#{EL} select[name=head]", "3")
        assert (pg.get_attribute(f"#{EL}", "data-block"), pg.get_attribute(f"#{EL}", "data-head")) == ("5", "3")
        T = r["T"]
        want = [r["maps"][4, 2, q, k] for q in range(T) for k in range(q + 1)]
        assert np.abs(np.array(cells()) - want).max() < 1e-5 and cells() != before
        assert "Block 5, head 3" in pg.inner_text(f"#{EL} .andrea-attention-look")
        pg.select_option(f"#{EL} select[name=model]", "untrained")
        assert wait_state(pg) == "drawn" and pg.get_attribute(f"#{EL}", "data-model") == "untrained"
        assert np.abs(np.array(cells()) - want).max() > 0.01  # another model's weights

        pg.fill(f"#{EL} textarea", "   ")
        assert wait_state(pg, ("drawn", "error")) == "error"
        assert "empty" in pg.inner_text(f"#{EL} .andrea-attention-error")
        assert pg.locator(f"#{EL} rect[data-q]").count() == 0
        long = " ".join(f"word{i}" for i in range(100))
        n = len(hf.encode(long))
        assert n >= 200
        pg.fill(f"#{EL} textarea", long)
        assert wait_state(pg, ("drawn", "error")) == "error"
        msg = pg.inner_text(f"#{EL} .andrea-attention-error")
        assert f"has {n} tokens" in msg and "at most 64" in msg, msg
        pg.fill(f"#{EL} textarea", "Back to a short text.")
        assert wait_state(pg, ("drawn", "error")) == "drawn"
        assert [t["id"] for t in shown(pg)["tokens"]] == hf.encode("Back to a short text.")
        p.clean()
    finally:
        p.close()


def test_the_worker_answers_the_newest_request(browser, pages, hf):
    p = Page(browser, pages.base, "book/blank.html")
    try:
        replies = p.page.evaluate(
            """() => new Promise(done => {
                 const w = new Worker("../_static/andrea_attention_worker.js"), got = {};
                 w.onmessage = e => { got[e.data.id] = e.data.superseded ? "superseded" : e.data.error ? e.data.error
                                                       : e.data.tokens.map(t => t.id);
                                      if (Object.keys(got).length === 4) { w.terminate(); done(got); } };
                 ["first text", "second text", "third text"].forEach(
                   (text, i) => w.postMessage({id: i + 1, text, model: "trained"}));
                 setTimeout(() => w.postMessage({id: 4, text: "x", model: "big"}), 3000);
               })"""
        )
        assert replies["3"] == hf.encode("third text") and "superseded" in (replies["1"], replies["2"]), replies
        assert replies["4"] == 'model must be "trained" or "untrained", got "big"', replies
        p.clean()
    finally:
        p.close()


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_phone_width_fits_and_stays_readable(browser, pages, hf, dark):
    words = "the model reads each word then looks back at those before it".split()
    longest = "The"
    for i in range(200):  # the longest text the viewer takes: 64 tokens
        if len(hf.encode(longest + " " + words[i % len(words)])) > 64:
            break
        longest += " " + words[i % len(words)]
    assert len(hf.encode(longest)) == 64
    p = Page(browser, pages.base, "book/attention.html", width=390, dark=dark)
    try:
        pg = p.page
        assert wait_state(pg) == "drawn"
        for text in (SENTENCE, longest):
            pg.fill(f"#{EL} textarea", text)
            assert wait_state(pg, ("drawn", "error")) == "drawn"
            geo = pg.evaluate(
                """id => { const el = document.getElementById(id), svg = el.querySelector("svg");
                     const sizes = [...svg.querySelectorAll(".andrea-attention-qlabel, .andrea-attention-klabel")]
                                   .map(t => parseFloat(getComputedStyle(t).fontSize));
                     const box = el.getBoundingClientRect(), s = svg.getBoundingClientRect();
                     return {scroll: document.documentElement.scrollWidth, view: window.innerWidth, sizes,
                             card: getComputedStyle(el).backgroundColor, ink: getComputedStyle(el).color,
                             inside: s.left >= box.left - 0.5 && s.right <= box.right + 0.5,
                             legend: !!svg.querySelector("linearGradient")
                                     && svg.textContent.includes("attention weight")}; }""",
                EL,
            )
            assert geo["scroll"] <= geo["view"], f"the page scrolls sideways at 390 px: {geo['scroll']} px wide"
            assert geo["inside"] and geo["legend"]
            assert geo["sizes"] and min(geo["sizes"]) >= 10, geo["sizes"]
            # a light card in both themes
            assert geo["card"] == "rgb(255, 255, 255)" and geo["ink"] == "rgb(34, 34, 34)"
        p.clean()
    finally:
        p.close()


@pytest.mark.parametrize("touch", [True, False], ids=["phone", "desktop"])
def test_a_tap_or_click_on_a_cell_shows_its_tokens(browser, pages, hf, touch):
    """Issue 47: a touch screen has no hover, so the viewer says "tap" there ("hover over or click" with a
    mouse), and a tap or a click on a cell writes that cell's query, key and weight under the heatmap."""
    ctx = browser.new_context(viewport={"width": 390 if touch else 1000, "height": 900}, has_touch=touch,
                              is_mobile=touch)  # fmt: skip
    ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith(pages.base) else r.abort())
    pg = ctx.new_page()
    try:
        pg.goto(pages.base + "book/attention.html", wait_until="load")
        long = " ".join(["the model reads each word then looks back"] * 4)  # enough tokens to label one in two
        pg.fill(f"#{EL} textarea", long)
        assert wait_state(pg, ("drawn", "error")) == "drawn"
        said = pg.text_content(f"#{EL} .andrea-attention-look")
        # the hint is given where only one token in two or more is labelled (a narrow screen, or many tokens)
        assert ("tap a cell" in said) == touch and ("tap" not in said or touch), said
        cell = pg.locator(f"#{EL} rect[data-q='5'][data-k='2']")
        cell.tap() if touch else cell.click()
        picked = pg.text_content(f"#{EL} .andrea-attention-picked")
        assert picked.startswith("query 6 ") and "→ key 3 " in picked, picked
    finally:
        ctx.close()


def test_bad_options_and_files_are_reported_not_thrown(browser, pages):
    p = Page(browser, pages.base, "book/blank.html")
    try:
        msgs = p.page.evaluate(
            """() => {
                 const A = AndreaAttention, out = [];
                 for (const opts of [{block: 13}, {head: 0}, {model: "big"}, {text: ""}]) {
                   const el = document.createElement("div"); document.body.appendChild(el);
                   A.mount(el, opts);
                   out.push([el.getAttribute("data-state"), el.querySelector(".andrea-attention-look").textContent]);
                 }
                 const err = f => { try { f(); return "no error"; } catch (e) { return e.message; } };
                 const header = JSON.stringify({x: {dtype: "I8", shape: [2], data_offsets: [0, 2]}});
                 const buf = new Uint8Array(8 + header.length + 2);
                 new DataView(buf.buffer).setUint32(0, header.length, true);
                 buf.set(new TextEncoder().encode(header), 8);
                 out.push(err(() => A.readSafetensors(new ArrayBuffer(3))));
                 out.push(err(() => A.readSafetensors(buf.buffer)));
                 out.push(err(() => A.readSafetensors(buf.buffer.slice(0, 20))));
                 const cfg = {d_model: 192, n_head: 5, n_layer: 1, vocab_size: 10, context_length: 8};
                 out.push(err(() => A.attend(cfg, {}, [1])));
                 return out; }"""
        )
        assert msgs[0] == ["error", "block must be an integer from 1 to 12, got 13"]
        assert msgs[1] == ["error", "head must be an integer from 1 to 6, got 0"]
        assert msgs[2] == ["error", 'model must be "trained" or "untrained", got "big"']
        assert msgs[3][0] == "error" and "empty" in msgs[3][1]
        assert "fewer than its 8-byte header length" in msgs[4]
        assert 'has dtype "I8"; this reader takes F16 and F32' in msgs[5]
        assert "but the file has 20 bytes" in msgs[6]
        assert "not divisible by config.n_head 5" in msgs[7]
        p.clean()
    finally:
        p.close()


def test_missing_or_damaged_files_are_said_in_the_viewer(browser, pages):
    p = Page(browser, pages.base, "missing/book/attention.html")
    try:
        assert wait_state(p.page, ("drawn", "error")) == "error"
        msg = p.page.inner_text(f"#{EL} .andrea-attention-error")
        assert "could not load the viewer's file _static/andrea/" in msg and "(HTTP 404)" in msg, msg
        assert p.external == [] and all("404" in e for e in p.errors), p.errors  # the browser logs the 404s
    finally:
        p.close()
    p = Page(browser, pages.base, "truncated/book/attention.html")
    try:
        assert wait_state(p.page, ("drawn", "error")) == "error"
        msg = p.page.inner_text(f"#{EL} .andrea-attention-error")
        assert msg.startswith("safetensors: tensor") and "truncated?" in msg, msg
        p.page.select_option(f"#{EL} select[name=model]", "untrained")  # needs no weights file: it is drawn
        assert wait_state(p.page, ("drawn", "error")) == "drawn"
        p.clean()
    finally:
        p.close()


def test_a_long_text_with_no_space_and_a_weights_file_with_nan_are_named(browser, pages):
    """Issue 48 (W5, W9): 300,000 characters with no space give the token-limit message (not "Maximum call
    stack size exceeded"), and the viewer then draws a short text again; a weights file with NaN in it is
    named instead of leaving the viewer at "Loading the model…"."""
    p = Page(browser, pages.base, "book/attention.html")
    try:
        assert wait_state(p.page, ("drawn", "error")) == "drawn"
        for n in (300_000, 1_000_000):
            p.page.fill(f"#{EL} textarea", "a" * n)
            assert wait_state(p.page, ("drawn", "error")) == "error"
            msg = p.page.inner_text(f"#{EL} .andrea-attention-error")
            assert "tokens; the viewer takes at most 64" in msg and "call stack" not in msg, msg
        p.page.fill(f"#{EL} textarea", "Back to a short text.")
        assert wait_state(p.page, ("drawn", "error")) == "drawn"
        p.clean()
    finally:
        p.close()
    p = Page(browser, pages.base, "nan/book/attention.html")
    try:
        assert wait_state(p.page, ("drawn", "error")) == "error"
        msg = p.page.inner_text(f"#{EL} .andrea-attention-error")
        assert "non-finite values (NaN or infinity)" in msg and "damaged" in msg, msg
        p.page.select_option(f"#{EL} select[name=model]", "untrained")  # needs no weights file: it is drawn
        assert wait_state(p.page, ("drawn", "error")) == "drawn"
        p.clean()
    finally:
        p.close()


def test_a_long_text_and_non_finite_weights_are_named_in_node():
    """The same checks as the page's, on the pure functions in Node (no browser): the token limit for a long
    run with no space (exact counts kept for ordinary text), non-finite weights and maps named."""
    need(shutil.which("node") is not None, "node is not installed: sudo apt-get install nodejs (make book needs it)")
    script = """
      const [dir, tokfile] = process.argv.slice(1), A = require(dir + "/andrea_attention.js"), fs = require("fs");
      const tok = A.tokenizer(fs.readFileSync(tokfile, "utf8"));
      const err = f => { try { f(); return "no error"; } catch (e) { return e.message; } };
      const cfg = {d_model: 16, n_head: 2, n_layer: 2, vocab_size: 20, context_length: 8};
      const w = A.untrainedWeights(cfg, 0), file = {tensors: {}};
      for (const k in w) file.tensors[k] = {data: Float32Array.from(w[k])};
      file.tensors["blocks.1.mlp.fc.weight"].data[3] = NaN;
      const bad = Object.assign({}, w, {"blocks.0.attn.qkv.weight": Float32Array.from(w["blocks.0.attn.qkv.weight"])});
      bad["blocks.0.attn.qkv.weight"][0] = NaN;
      const t0 = Date.now(), long = [300000, 1000000].map(n => err(() => A.prepare(tok, "a".repeat(n))));
      console.log(JSON.stringify({long, ms: Date.now() - t0, words: err(() => A.prepare(tok, "word ".repeat(100))),
        whole: tok.encode("ab".repeat(50000)).length, nanFile: err(() => A.weightsOf(file)),
        nanMaps: err(() => A.attend(cfg, bad, [1, 2, 3])), colour: err(() => A.colour(NaN))}));
    """
    tokfile = ROOT / "andrea" / "results" / "trained" / "tokenizer.json"
    out = subprocess.run(["node", "-e", script, str(STATIC), str(tokfile)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for msg in got["long"]:
        assert msg.startswith("Your text has at least ") and "the viewer takes at most 64" in msg, msg
    assert got["ms"] < 5000, got["ms"]  # no BPE of a 1 MB word
    assert "text has 101 tokens; the viewer takes at most 64" in got["words"]  # ordinary text: counted exactly
    assert got["whole"] > 64  # without the viewer's cap, a long word is encoded in full (no stack overflow)
    assert "holds 1 non-finite value (NaN or infinity)" in got["nanFile"] and "blocks.1.mlp.fc.weight" in got["nanFile"]
    assert "came out as NaN (block 1)" in got["nanMaps"]
    assert "must be a number from 0 to 1, got NaN" in got["colour"]


def test_viewer_checks_its_arguments():
    html = SA.viewer_html("a </script><script>alert(1)</script> text", block=12, head=6, model="untrained")
    assert html.count("</script>") == 1 and "AndreaAttention.mount" in html and '"block": 12' in html
    for kwargs, says in (
        ({"text": ""}, "text is empty"),
        ({"text": " \n "}, "text is empty"),
        ({"text": 3}, "text must be a string"),
        ({"text": "word " * 100}, "text has 101 tokens; the viewer takes at most 64"),
        ({"block": 0}, "block must be an integer from 1 to 12, got 0"),
        ({"block": 13}, "block must be an integer from 1 to 12, got 13"),
        ({"block": True}, "block must be an integer from 1 to 12, got True"),
        ({"head": 7}, "head must be an integer from 1 to 6, got 7"),
        ({"head": 1.0}, "head must be an integer from 1 to 6, got 1.0"),
        ({"model": "big"}, "model must be one of ('trained', 'untrained'), got 'big'"),
    ):
        with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
            SA.viewer(**kwargs)
    os.environ["ANDREA_BOOK_BUILD"] = "1"
    try:
        assert "AndreaAttention.mount" in SA.viewer()._repr_mimebundle_()["text/html"]  # the site
    finally:
        del os.environ["ANDREA_BOOK_BUILD"]
    assert "runs on the book's site" in SA.viewer()._repr_mimebundle_()["text/plain"]  # a notebook


def test_the_model_runs_in_node(pages):
    need(shutil.which("node") is not None, "node is not installed: sudo apt-get install nodejs (make book needs it)")
    script = """
      const dir = process.argv[1], A = require(dir + "/andrea_attention.js"), fs = require("fs");
      const tok = A.tokenizer(fs.readFileSync(dir + "/andrea/tokenizer.json", "utf8"));
      const cfg = JSON.parse(fs.readFileSync(dir + "/andrea/config.json", "utf8"));
      const ids = tok.encode("Hello there"), r = A.attend(cfg, A.untrainedWeights(cfg, 0), ids);
      console.log(JSON.stringify({ids, T: r.T, n: r.maps.length}));
    """
    out = subprocess.run(["node", "-e", script, str(pages.dir / "_static")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["ids"] == SA._tokenizer().encode("Hello there") and got["n"] == 12 * 6 * got["T"] ** 2
