"""The explorer's in-page model (book/_static/andrea_flow.js, TensorFlow.js on WebAssembly) against
the torch model, in a real headless Chromium with the network blocked.

The same weights and batch go into both (andrea.web.export.case); act_rms and grad_rms must agree
at every block boundary to RTOL, a float32-sized tolerance (the two run the same float32 arithmetic
in a different order). A negative control shows the comparison can fail: post-norm wiring in the
page against pre-norm in torch. The page's own seeded initialisation cannot equal torch's draw
(another generator), so over 8 seeds each its mean profile must agree with torch's within the
seed-to-seed spread (4 standard errors at every boundary), and a wrongly wired page must not.
"""

import sys

import numpy as np
import pytest

from conftest import ROOT, model_page

sys.path.insert(0, str(ROOT / "tools"))
from pagemodel import LOAD_TF, RUN_CASE  # noqa: E402

from andrea.views.explorer import Setting, measure  # noqa: E402
from andrea.web.export import case, relative_difference  # noqa: E402

RTOL = 1e-3
TRY = "{{ try {{ {}; return 'no error'; }} catch (e) {{ return e.message; }} }}"  # the error's message

CASES = [
    Setting(width=64, depth=8),
    Setting(width=64, depth=8, norm="post"),
    Setting(width=64, depth=8, norm="none"),
    Setting(width=64, depth=8, residual=False),
    Setting(width=64, depth=8, layerscale=1e-3),
    Setting(width=32, depth=48, norm="post", layerscale=0.1),
    Setting(width=128, depth=4, norm="none", residual=False, seed=7),
    Setting(width=96, depth=96, norm="pre", layerscale=1.0),
]


@pytest.fixture(scope="module")
def page():
    yield from model_page((LOAD_TF, "wasm"))


@pytest.mark.parametrize("setting", CASES, ids=lambda s: s.label())
def test_page_model_equals_torch(page, setting):
    c = case(setting)
    js = page.evaluate(RUN_CASE, [c, None])
    assert js["status"] == c["torch"]["status"]
    for stat in ("act", "grad"):
        d = relative_difference(js[stat], c["torch"][stat])
        assert len(js[stat]) == setting.depth + 1
        assert d.max() <= RTOL, f"{stat}: largest relative difference {d.max():.2e} at boundary {d.argmax()}"
    assert js["loss"] == pytest.approx(c["torch"]["loss"], rel=1e-5)


def test_negative_control_post_norm_in_the_page_against_pre_norm_in_torch(page):
    c = case(Setting(width=64, depth=8))
    js = page.evaluate(RUN_CASE, [c, "post"])
    worst = max(relative_difference(js[s], c["torch"][s]).max() for s in ("act", "grad"))
    assert worst > 100 * RTOL, f"the comparison cannot tell post-norm from pre-norm ({worst:.2e})"


SEEDS = range(8)


def _spread_ok(js_profiles: np.ndarray, torch_profiles: np.ndarray, z: float = 4.0) -> bool:
    """The rule, fixed before the runs: at every boundary the page's seed-mean of log RMS lies within
    z standard errors of torch's seed-mean (the standard error from both sets of seeds)."""
    a, b = np.log(js_profiles), np.log(torch_profiles)
    se = np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
    return bool((np.abs(a.mean(0) - b.mean(0)) <= z * se).all())


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_seeded_page_initialisation_is_within_torch_seed_spread(page, norm):
    base = Setting(width=64, depth=12, norm=norm, layerscale=1e-2 if norm == "pre" else None)
    torch_runs = [measure(Setting(**{**base.__dict__, "seed": s})) for s in SEEDS]
    js_runs = [page.evaluate("s => AndreaFlow.measure(s)", {**_js(base), "seed": s}) for s in SEEDS]
    for stat, attr in (("act", "act_rms"), ("grad", "grad_rms")):
        t = np.array([getattr(r, attr) for r in torch_runs])
        j = np.array([r[stat] for r in js_runs])
        assert _spread_ok(j, t), f"{norm}-norm {stat}: the page's seeds fall outside torch's spread"
    # ... and the rule can fail: the page wired otherwise (post for pre, none for post) against torch
    wrong = [
        page.evaluate(
            "([s, w]) => AndreaFlow.gradientFlow(s, AndreaFlow.initWeights(s), AndreaFlow.randomBatch(s.seed),"
            " {wiring: w})",
            [{**_js(base), "seed": s}, "post" if norm == "pre" else "none"],
        )
        for s in SEEDS
    ]
    t_act = np.array([r.act_rms for r in torch_runs])
    assert not _spread_ok(np.array([r["act"] for r in wrong]), t_act)


def _js(s: Setting) -> dict:
    return {
        "width": s.width,
        "depth": s.depth,
        "norm": s.norm,
        "residual": s.residual,
        "layerscale": s.layerscale,
        "seed": s.seed,
    }


# The explorer's moves, each from the one before: lambda_0, norm and residual reuse the held model; a
# shallower and then a deeper model (blocks drawn before and blocks drawn anew), another width, another seed.
MOVES = [
    {"depth": 5, "width": 64, "seed": 3, "layerscale": 1e-3},
    {"depth": 5, "width": 64, "seed": 3, "layerscale": 0.5},
    {"depth": 5, "width": 64, "seed": 3, "norm": "post"},
    {"depth": 5, "width": 64, "seed": 3, "norm": "none", "residual": False},
    {"depth": 2, "width": 64, "seed": 3},
    {"depth": 9, "width": 64, "seed": 3, "norm": "post", "layerscale": 1e-2},
    {"depth": 9, "width": 96, "seed": 3},
    {"depth": 9, "width": 96, "seed": 4},
]


def test_the_explorers_held_model_gives_exactly_a_fresh_draws_numbers(page):
    """AndreaFlow.measure keeps the last seed's weights between moves; each move's numbers must be
    bit-identical to a model drawn afresh (initWeights, randomBatch) and run by gradientFlow, and the held
    tensors must not pile up: after the moves, one more seed holds no more tensors than the first did."""
    fresh = "s => AndreaFlow.gradientFlow(s, AndreaFlow.initWeights(s), AndreaFlow.randomBatch(s.seed || 0))"
    for move in MOVES:
        held = page.evaluate("s => AndreaFlow.measure(s)", move)
        assert held == page.evaluate(fresh, move), move
    count = "s => { AndreaFlow.measure(s); return tf.memory().numTensors; }"
    first = page.evaluate(count, {"depth": 9, "width": 96, "seed": 5})
    assert page.evaluate(count, {"depth": 9, "width": 96, "seed": 6}) == first
    # ... and a stale held model would be caught: the same move after another seed's differs
    assert page.evaluate("s => AndreaFlow.measure(s)", {**MOVES[0], "seed": 7}) != page.evaluate(fresh, MOVES[0])


def test_normals_steps_the_seeded_generator_exactly_as_next_does(page):
    """normals writes mulberry32's steps out in its loop: its draws must be the polar method on next()'s
    own sequence, and next() must go on from where normals left the generator."""
    same = page.evaluate(
        """() => {
      const polar = (n, next) => { const out = [];
        while (out.length < n) { const u = 2 * next() - 1, v = 2 * next() - 1, q = u * u + v * v;
          if (q >= 1 || q === 0) continue; const f = Math.sqrt(-2 * Math.log(q) / q);
          out.push(Math.fround(u * f)); if (out.length < n) out.push(Math.fround(v * f)); }
        return out; };
      const a = AndreaFlow.rng(5), b = AndreaFlow.rng(5);
      const got = Array.from(AndreaFlow.normals(1001, 1, a)).concat([a(), a()]);
      const want = polar(1001, b).concat([b(), b()]);
      const other = Array.from(AndreaFlow.normals(1001, 1, AndreaFlow.rng(6)));
      return [got.every((x, i) => x === want[i]), other.some((x, i) => x !== want[i])];
    }"""
    )
    assert same == [True, True]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"depth": 0}, "depth must be an integer from 1 to 96, got 0"),
        ({"width": 48}, "width must be 32, 64, 96 or 128, got 48"),
        ({"norm": "deepnorm"}, 'norm must be one of pre, post, none, got "deepnorm"'),
        ({"layerscale": 2}, "layerscale must be null (off) or a number from 0 (ReZero's start) to 1, got 2"),
        ({"seed": -1}, "seed must be an integer from 0 to 10000, got -1"),
        (
            {"layerscale": float("nan")},
            "layerscale must be null (off) or a number from 0 (ReZero's start) to 1, got NaN",
        ),
        ({"depth": float("inf")}, "depth must be an integer from 1 to 96, got Infinity"),
    ],
)
def test_bad_settings_are_named(page, bad, message):
    got = page.evaluate(f"s => {TRY.format('AndreaFlow.measure(s)')}", bad)
    assert message in got


@pytest.mark.parametrize("bad, shown", [("5", "5"), ("null", "null"), ("[12]", "[12]"), ("'deep'", '"deep"')])
def test_a_setting_that_is_not_an_object_is_named_not_replaced_by_the_default(page, bad, shown):
    got = page.evaluate(f"() => {TRY.format(f'AndreaFlow.measure({bad})')}")
    assert f'a setting must be an object such as {{depth: 12, norm: "pre"}}, got {shown}' in got, got


def test_bad_token_id_is_named(page):
    c = case(Setting(width=32, depth=1))
    c["batch"]["idx"][3] = 8449
    got = page.evaluate(f"c => {TRY.format(f'({RUN_CASE})([c, null])')}", c)
    assert "token id 8449 is outside the vocabulary [0, 8449)" in got


@pytest.mark.parametrize(
    "bad, says",
    [
        (1.5, "token id 1.5 (batch.idx[3]) is not an integer: token ids are integers from 0 to 8448"),
        ("3", 'token id "3" (batch.idx[3]) is a string, not a number: token ids are integers from 0 to 8448'),
        (True, "token id true (batch.idx[3]) is a boolean, not a number: token ids are integers from 0 to 8448"),
    ],
)
def test_a_token_id_that_is_not_an_integer_is_named(page, bad, says):
    """Issue 48 (B18): 1.5 (which int32 would truncate to 1), "3" and true are refused, not used."""
    c = case(Setting(width=32, depth=1))
    c["batch"]["idx"][3] = bad
    got = page.evaluate(f"c => {TRY.format(f'({RUN_CASE})([c, null])')}", c)
    assert says in got, got


def test_token_ids_are_checked_before_any_computation_in_node():
    """The same check on andrea_flow.js's gradientFlow in Node, with no TensorFlow.js (the ids are checked
    before it is used): each bad id is named with its place, and plain integer ids pass the check."""
    import json
    import shutil
    import subprocess

    from conftest import need

    need(shutil.which("node") is not None, "node is not installed: sudo apt-get install nodejs (make book needs it)")
    script = """
      const m = require(process.argv[1]), F = m.AndreaFlow;
      m.tf = {};  // no TensorFlow.js: the checks come first
      const s = {width: 32, depth: 1}, w = {}, N = F.BATCH * F.SEQ, out = {};
      F.shapes(F.checkSetting(s)).forEach(e => { w[e[0]] = new Float32Array(e[1].reduce((a, b) => a * b, 1)); });
      const err = f => { try { f(); return "no error"; } catch (e) { return e.message; } };
      for (const v of [1.5, "3", true, 8449, -1, null]) {
        const idx = Array(N).fill(0); idx[3] = v;
        out[JSON.stringify(v)] = err(() => F.gradientFlow(s, w, {idx, targets: Array(N).fill(0)}));
      }
      out.plain = err(() => F.gradientFlow(s, w, {idx: new Int32Array(N), targets: new Int32Array(N)}));
      out.notArray = err(() => F.gradientFlow(s, w, {idx: 5, targets: []}));
      console.log(JSON.stringify(out));
    """
    flow = ROOT / "book" / "_static" / "andrea_flow.js"
    r = subprocess.run(["node", "-e", script, str(flow)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert "token id 1.5 (batch.idx[3]) is not an integer" in got["1.5"]
    assert 'token id "3" (batch.idx[3]) is a string, not a number' in got['"3"']
    assert "token id true (batch.idx[3]) is a boolean, not a number" in got["true"]
    assert "token id null (batch.idx[3]) is null, not a number" in got["null"]
    assert "token id 8449 is outside the vocabulary [0, 8449)" in got["8449"]
    assert "token id -1 is outside the vocabulary" in got["-1"]
    assert "batch.idx must be an array of 64 token ids, got 5" in got["notArray"]
    assert "token id" not in got["plain"]  # the ids pass; the stub TensorFlow.js is what stops it


def test_lambda_labels_read_like_python(page):
    values = [1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 3.16e-05, 0.000178, 0.0562]
    got = page.evaluate("vs => vs.map(AndreaFlow.formatG)", values)
    assert got == [f"{v:g}" for v in values]
