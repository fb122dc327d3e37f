"""Training in the page (book/_static/andrea_train.js, TensorFlow.js on WebAssembly) against
``andrea.training.train``, in a real headless Chromium with the network blocked.

Torch's own training run (``andrea.web.export.training_case``: its initial weights, the batch of
every step as ``train`` draws it, its loss at every step and AdamW's moments from its checkpoint) is
repeated in the page from the same weights and batches. The rule, fixed before the runs:

* the page's training loss at each of 20 steps equals torch's within 1e-3, relative;
* AdamW's first and second moments after 5 steps equal torch's within 1e-4 (the largest difference
  over a tensor, relative to that tensor's largest magnitude).

Negative controls show that the comparison can fail: the page with AdamW's beta2 changed from 0.95
to 0.999, and the page with weight decay on every parameter (LayerNorm gains and biases included,
which andrea never decays).
"""

from __future__ import annotations

import base64
import re
import sys
from dataclasses import replace

import numpy as np
import pytest

from conftest import ROOT, model_page

sys.path.insert(0, str(ROOT / "tools"))
from pagemodel import LOAD_TF  # noqa: E402

from andrea import ANDREA_120M  # noqa: E402
from andrea.training.train import TrainConfig  # noqa: E402
from andrea.web.export import training_case  # noqa: E402

LOSS_RTOL = 1e-3
MOMENT_TOL = 1e-4
# A small post-norm-capable model on the chapters' byte corpus; warmup and clipping both active
MODEL = replace(ANDREA_120M, vocab_size=256, context_length=64, d_model=64, n_head=4, n_layer=3)
TRAIN = TrainConfig(steps=20, batch_size=4, seq_len=32, lr=3e-3, warmup=5, grad_clip=1.0, seed=1)

# Train in the page on a case's weights and batches; returns the losses, and the moments when asked.
LOAD_TRAIN = """() => new Promise((ok, bad) => { const s = document.createElement("script");
  s.src = "/_static/andrea_train.js"; s.onload = () => ok(typeof AndreaTrain);
  s.onerror = () => bad(new Error("could not load andrea_train.js")); document.head.appendChild(s); })"""
RUN = """async ([c, train, opts, moments]) => {
  const w = {};
  for (const [k, b64] of Object.entries(c.weights)) {
    const s = atob(b64), u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    w[k] = new Float32Array(u.buffer);
  }
  const run = AndreaTrain.Trainer(c.model, w, train, opts);
  const losses = [];
  for (const b of c.batches) losses.push(run.step(b).loss);
  const out = {losses};
  if (moments) {
    for (const part of ["exp_avg", "exp_avg_sq"]) {
      out[part] = {};
      for (const [k, a] of Object.entries(run.read(part))) out[part][k] = Array.from(a);
    }
  }
  run.dispose();
  return out;
}"""


def _f32(b64: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), dtype=np.float32)


@pytest.fixture(scope="module")
def page():
    yield from model_page((LOAD_TF, "wasm"), (LOAD_TRAIN, "object"))


@pytest.fixture(scope="module")
def twenty():
    return training_case(MODEL, TRAIN, "bytes")


@pytest.fixture(scope="module")
def five():
    return training_case(MODEL, replace(TRAIN, steps=5), "bytes")


def _loss_gap(js: list, torch_losses: list) -> float:
    a, b = np.asarray(js), np.asarray(torch_losses)
    assert len(a) == len(b)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def _moment_gap(js: dict, torch_moments: dict) -> float:
    worst = 0.0
    for name, b64 in torch_moments.items():
        t, j = _f32(b64), np.asarray(js[name], dtype=np.float64)
        scale = float(np.abs(t).max()) or 1.0
        worst = max(worst, float(np.abs(j - t).max()) / scale)
    return worst


def test_twenty_steps_of_training_in_the_page_equal_torchs(page, twenty):
    js = page.evaluate(RUN, [twenty, twenty["train"], None, False])
    gap = _loss_gap(js["losses"], twenty["torch"]["loss"])
    assert gap <= LOSS_RTOL, f"largest relative loss difference over 20 steps: {gap:.2e}"
    assert twenty["torch"]["loss"][-1] < twenty["torch"]["loss"][0] - 0.3  # it trains: the test has teeth


@pytest.mark.parametrize(
    "norm, init, layerscale",
    [("post", "xavier", None), ("post", "xavier", 1e-4)],
    ids=["post-norm, Xavier (ch3's panel)", "post-norm, Xavier, LayerScale 1e-4 (ch7's panel)"],
)
def test_twenty_steps_of_the_panels_models_in_the_page_equal_torchs(page, norm, init, layerscale):
    """The panels train post-norm stacks with Xavier's initialisation, ch7's with LayerScale: each, too,
    trains in the page as in torch, step by step (the same rule as above)."""
    c = training_case(replace(MODEL, norm=norm, init=init, layerscale=layerscale), TRAIN, "bytes")
    js = page.evaluate(RUN, [c, c["train"], None, False])
    gap = _loss_gap(js["losses"], c["torch"]["loss"])
    assert gap <= LOSS_RTOL, f"largest relative loss difference over 20 steps: {gap:.2e}"
    assert c["torch"]["loss"][-1] < c["torch"]["loss"][0] - 0.3  # it trains: the test has teeth


def test_adamw_moments_after_five_steps_equal_torchs(page, five):
    js = page.evaluate(RUN, [five, five["train"], None, True])
    for part in ("exp_avg", "exp_avg_sq"):
        gap = _moment_gap(js[part], five["torch"][part])
        assert gap <= MOMENT_TOL, f"{part}: largest difference {gap:.2e} of the tensor's scale"


def test_negative_control_another_beta2_fails(page, twenty, five):
    js = page.evaluate(RUN, [five, {**five["train"], "beta2": 0.999}, None, True])
    assert _moment_gap(js["exp_avg_sq"], five["torch"]["exp_avg_sq"]) > 10 * MOMENT_TOL
    js = page.evaluate(RUN, [twenty, {**twenty["train"], "beta2": 0.999}, None, False])
    assert _loss_gap(js["losses"], twenty["torch"]["loss"]) > LOSS_RTOL


def test_negative_control_decay_on_layernorm_gains_fails(page, five):
    # decay moves the weights, not the moments of step 1; by step 5 the gradients differ too
    js = page.evaluate(RUN, [five, five["train"], {"decayAll": True}, True])
    assert _moment_gap(js["exp_avg"], five["torch"]["exp_avg"]) > MOMENT_TOL


@pytest.mark.parametrize(
    "train, message",
    [
        ({"lr": 0}, "lr must be a finite number > 0, got 0"),
        ({"beta2": 1}, "beta2 must be a number in [0, 1), got 1"),
        ({"warmup": -1}, "warmup must be an integer >= 0, got -1"),
        ({"gradClip": 0}, "gradClip must be null (none) or a number > 0, got 0"),
        ({"lr": float("nan")}, "lr must be a finite number > 0, got NaN"),
        ({"stepz": 3}, 'unknown training setting "stepz"; allowed: steps, batchSize'),
        ({"seqLen": 65}, "seqLen 65 exceeds the model's context 64"),
        ({"batchSize": 200000}, "batchSize must be an integer from 1 to 256 (a page's memory), got 200000"),
        ({"steps": 1e15, "warmup": 1e15}, "steps must be an integer from 1 to 100000, got 1000000000000000"),
        ({"steps": 10, "warmup": 20}, "warmup (20) must not exceed the steps (10)"),
    ],
)
def test_bad_training_settings_are_named(page, five, train, message):
    got = page.evaluate(
        "async ([c, t]) => { try { AndreaTrain.Trainer(c.model, null, t); return 'no error'; }"
        " catch (e) { return e.message; } }",
        [five, train],
    )
    assert message in got


def test_a_bad_token_id_is_named(page, five):
    got = page.evaluate(
        "async ([c, t]) => { const r = AndreaTrain.Trainer(c.model, null, t);"
        " const b = {idx: c.batches[0].idx.slice(), targets: c.batches[0].targets};"
        " b.idx[3] = 300; try { r.step(b); return 'no error'; } catch (e) { return e.message; }"
        " finally { r.dispose(); } }",
        [five, five["train"]],
    )
    assert "token id 300 is outside the vocabulary [0, 256)" in got


# The training worker, driven as the panel drives it: messages in, messages collected in window.trainMsgs.
WORKER = """() => { window.trainMsgs = []; window.trainWorker = new Worker("/_static/andrea_train_worker.js");
  trainWorker.onmessage = (e) => trainMsgs.push(e.data); return true; }"""
SMALL = {"vocab": 256, "context": 32, "width": 32, "heads": 2, "depth": 2, "norm": "post", "seed": 3}


def _send(page, msg):
    page.evaluate("m => trainWorker.postMessage(m)", msg)


def _msgs(page):
    return page.evaluate("() => trainMsgs")


def _wait(page, test: str, seconds: float = 120):
    page.wait_for_function(f"() => trainMsgs.some(m => {test})", timeout=seconds * 1000)


def _train(id_, steps, **over):
    runs = [
        {"name": "A", "model": SMALL, "train": {"steps": steps, "batchSize": 2, "seqLen": 16, "warmup": 0}},
        {"name": "B", "model": SMALL, "train": {"steps": steps, "batchSize": 2, "seqLen": 16, "warmup": 3}},
    ]
    for name, t in over.items():
        runs[0 if name == "A" else 1]["train"].update(t)
    return {"type": "train", "id": id_, "corpus": "/_static/andrea/train_corpus.bin", "runs": runs}


def test_the_worker_trains_two_runs_side_by_side(page):
    page.evaluate(WORKER)
    _send(page, _train(1, 6))
    _wait(page, "m.type === 'done' && m.name === 'B'")
    _wait(page, "m.type === 'done' && m.name === 'A'")
    got = _msgs(page)
    ready = [m for m in got if m["type"] == "ready"]
    assert ready and ready[0]["backend"] == "wasm" and 2.0 < ready[0]["unigram"] < 5.6  # bytes: at most ln 256
    for name in "AB":
        steps = [m for m in got if m["type"] == "step" and m["name"] == name]
        assert [m["step"] for m in steps] == list(range(1, 7))
        assert all(np.isfinite(m["loss"]) for m in steps)
    lr_a = [m["lr"] for m in got if m["type"] == "step" and m["name"] == "A"]
    lr_b = [m["lr"] for m in got if m["type"] == "step" and m["name"] == "B"]
    assert lr_a[0] == pytest.approx(3e-3) and lr_b[0] == pytest.approx(1e-3)  # B warms up over 3 steps


def test_the_worker_stops_resumes_resets_and_the_newest_request_wins(page):
    page.evaluate(WORKER)
    _send(page, _train(1, 500))
    _wait(page, "m.type === 'step' && m.step >= 3")
    _send(page, {"type": "stop", "id": 1})
    _wait(page, "m.type === 'stopped'")
    before = len(_msgs(page))
    page.wait_for_timeout(1500)
    after = len(_msgs(page))
    assert after - before <= 2, "steps went on after stop"  # at most the step that was running
    _send(page, {"type": "resume", "id": 1})
    page.wait_for_function(f"() => trainMsgs.length > {after + 4}", timeout=60_000)
    _send(page, _train(2, 500))  # a newer request replaces the run in progress
    _wait(page, "m.type === 'ready' && m.id === 2")
    n = len(_msgs(page))
    page.wait_for_function(f"() => trainMsgs.length > {n + 4}", timeout=60_000)
    later = _msgs(page)[n:]
    assert later and all(m["id"] == 2 for m in later)
    _send(page, {"type": "reset", "id": 2})
    _wait(page, "m.type === 'reset'")
    n = len(_msgs(page))
    page.wait_for_timeout(1000)
    assert all(m["type"] == "reset" for m in _msgs(page)[n - 1 :])


def test_the_worker_names_a_bad_setting_and_its_run(page):
    page.evaluate(WORKER)
    _send(page, _train(1, 5, B={"lr": 0}))
    _wait(page, "m.type === 'error'")
    err = [m for m in _msgs(page) if m["type"] == "error"][0]["error"]
    assert err == "run B: andrea_train: lr must be a finite number > 0, got 0"


# The panel, as chapter 7 writes it (tools/pagemodel.train_page), driven through its controls.
def _panel(page, name="train"):
    pg = page.context.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.goto(page.url.rsplit("/", 1)[0] + f"/book/{name}.html", wait_until="load")
    pg.wait_for_selector(".andrea-train-go")
    return pg


def _set(pg, run, field, value):
    pg.locator(f"fieldset[data-run={run}] [name={field}]").fill(str(value))


def test_the_panel_trains_both_runs_and_stops_and_resets(page):
    pg = _panel(page)
    for run in "AB":
        _set(pg, run, "steps", 4)
        _set(pg, run, "depth", 2)
    pg.click(".andrea-train-go")
    pg.wait_for_function(
        "() => document.querySelector('.andrea-train-status').textContent.includes('done')", timeout=120_000
    )
    for run in "AB":  # each run's curve is drawn, through its four steps
        d = pg.get_attribute(f"path.andrea-train-curve[data-run={run}]", "d")
        assert d is not None and d.count("L") == 3
    assert pg.locator(".andrea-train-lambda path").count() == 1  # B has LayerScale: its |λ| per block
    # its log axis: at least three labels, in the explorers' one format (1e-7 ... 1), and B's λ₀ dotted
    labels = pg.evaluate(
        """() => [...document.querySelectorAll('.andrea-train-lambda text[text-anchor=end]')]
             .map(t => t.textContent).filter(t => !t.startsWith('λ'))"""
    )
    assert len(labels) >= 3 and all(re.fullmatch(r"[125](e-?\d+)?", t) for t in labels), labels
    assert pg.locator(".andrea-train-lambda .andrea-train-lambda0").count() == 1
    assert "at the latest step" in pg.text_content(".andrea-train-lambdanote")
    assert pg.locator(".andrea-train-chart .andrea-train-unigram").count() == 1  # named in the legend below
    assert "unigram level" in pg.text_content(".andrea-train-legend")
    pg.click(".andrea-train-reset")
    assert pg.locator("path.andrea-train-curve").count() == 0
    assert pg.input_value("fieldset[data-run=A] [name=steps]") == "300"  # the defaults are back
    # a long run stops and resumes
    pg.click(".andrea-train-go")
    pg.wait_for_function(
        "() => /A: step [1-9]/.test(document.querySelector('.andrea-train-status').textContent)", timeout=120_000
    )
    pg.click(".andrea-train-stop")
    assert pg.text_content(".andrea-train-stop") == "Resume"
    pg.wait_for_timeout(500)
    before = pg.text_content(".andrea-train-status")
    pg.wait_for_timeout(1500)
    assert pg.text_content(".andrea-train-status") == before, "training went on after Stop"
    pg.click(".andrea-train-stop")
    pg.wait_for_function(
        f"() => document.querySelector('.andrea-train-status').textContent !== {before!r}", timeout=60_000
    )
    pg.click(".andrea-train-reset")
    assert pg.errors == [], pg.errors
    pg.close()


@pytest.mark.parametrize(
    "run, field, value, message",
    [
        ("A", "lr", "abc", 'run A: peak learning rate must be a number from 0.00001 to 0.03, got "abc"'),
        ("B", "depth", "0", 'run B: depth must be an integer from 1 to 24, got "0"'),
        (
            "B",
            "layerscale",
            "2",
            'run B: LayerScale λ₀ (empty: off) must be empty (off) or a number from 0 to 1, got "2"',
        ),
        ("A", "warmup", "400", "run A: warmup steps (400) must not exceed the steps (300)"),
    ],
)
def test_the_panel_refuses_a_bad_setting_by_name(page, run, field, value, message):
    pg = _panel(page)
    _set(pg, run, field, value)
    pg.click(".andrea-train-go")
    assert pg.get_attribute(".andrea-train", "data-error") == message
    assert pg.text_content(".andrea-train-status") == message
    assert pg.locator("path.andrea-train-curve").count() == 0  # nothing trains
    pg.close()


def test_the_panel_names_every_bad_setting_of_both_runs(page):
    """Issue 47: a reader who mistyped three fields is told about all three, not only the first."""
    pg = _panel(page)
    _set(pg, "A", "lr", "abc")
    _set(pg, "A", "steps", "0")
    _set(pg, "B", "depth", "99")
    pg.click(".andrea-train-go")
    error = pg.get_attribute(".andrea-train", "data-error")
    for said in ('peak learning rate must be a number from 0.00001 to 0.03, got "abc"',
                 'steps must be an integer from 1 to 2000, got "0"',
                 'run B: depth must be an integer from 1 to 24, got "99"'):  # fmt: skip
        assert said in error, error
    assert pg.locator("path.andrea-train-curve").count() == 0
    pg.close()


def test_the_panel_takes_rezeros_start_lambda_zero(page):
    """Issue 47: λ₀ = 0 (ReZero's start, which chapter 7 discusses) trains; it is not refused."""
    pg = _panel(page)
    for run in "AB":
        _set(pg, run, "steps", 3)
        _set(pg, run, "depth", 2)
    _set(pg, "B", "layerscale", "0")
    pg.click(".andrea-train-go")
    pg.wait_for_function(
        "() => document.querySelector('.andrea-train-status').textContent.includes('done')", timeout=120_000
    )
    assert pg.get_attribute(".andrea-train", "data-error") is None
    assert pg.locator("path.andrea-train-curve[data-run=B]").count() == 1
    assert pg.errors == [], pg.errors
    pg.close()


def test_the_torch_reference_follows_the_readers_settings(page):
    """Issue 47: torch's thin reference curves are for the defaults; once the reader changes a run's settings
    its reference disappears, with a note saying why, and Reset brings it back."""
    pg = _panel(page)
    refs = "() => document.querySelectorAll('.andrea-train-chart path:not(.andrea-train-curve)').length"
    assert pg.evaluate(refs) == 2
    _set(pg, "A", "lr", "0.001")
    assert pg.evaluate(refs) == 1
    assert "run A is hidden" in pg.text_content(".andrea-train-refnote")
    _set(pg, "B", "depth", "3")
    assert pg.evaluate(refs) == 0
    assert "run A and B is hidden" in pg.text_content(".andrea-train-refnote")
    pg.click(".andrea-train-reset")
    assert pg.evaluate(refs) == 2
    assert "the defaults" in pg.text_content(".andrea-train-refnote")
    pg.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_panels_chart_text_is_legible_and_off_the_curves(page, width):
    """Issue 47: every text of the panel's charts is at least 10 px as shown, on a phone too, and the
    unigram level is named in the legend under the chart, not over the curves."""
    pg = _panel(page)
    pg.set_viewport_size({"width": width, "height": 900})
    pg.wait_for_timeout(300)
    sizes = pg.evaluate(
        """() => [...document.querySelectorAll('.andrea-train-chart')].flatMap(svg => {
             const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
             const size = t => Number(t.getAttribute('font-size')) * scale;
             return [...svg.querySelectorAll('text')].map(t => [t.textContent, size(t)]);
           })"""
    )
    assert sizes and min(s for _, s in sizes) >= 10, sorted(sizes, key=lambda x: x[1])[:3]
    assert not any("unigram" in text for text, _ in sizes)
    assert "unigram level" in pg.text_content(".andrea-train-legend")
    pg.close()


def test_the_pages_xavier_draw_has_torchs_scale_matrix_by_matrix(page):
    """The page cannot draw torch's numbers (another generator), so each matrix's spread and bound must
    be torch's: the largest |w| within Xavier's bound, the standard deviation within 5 % of torch's."""
    import torch

    from andrea.model.transformer import Andrea

    cfg = replace(MODEL, init="xavier", n_layer=2)
    js = page.evaluate(
        "m => { const w = AndreaFlow.initWeights(m); const out = {};"
        " for (const [k, a] of Object.entries(w)) out[k] = Array.from(a); return out; }",
        {"width": 64, "depth": 2, "norm": "pre", "vocab": 256, "context": 64, "init": "xavier", "seed": 1},
    )
    torch.manual_seed(0)
    ref = Andrea(cfg).state_dict()
    matrices = [k for k in ref if ref[k].dim() == 2 and "embedding" not in k]
    assert len(matrices) == 8
    for k in matrices:
        a, t = np.asarray(js[k]), ref[k].numpy()
        assert abs(a.std() / t.std() - 1) < 0.05, k
        assert np.abs(a).max() <= np.abs(t).max() * 1.02, k
    bad = page.evaluate(
        "() => { try { AndreaFlow.initWeights({width: 64, init: 'kaiming'}); return 'no error'; }"
        " catch (e) { return e.message; } }"
    )
    assert bad == 'andrea_flow: init must be gpt2 or xavier, got "kaiming"'


@pytest.mark.parametrize("chapter, name", [("ch3", "train3"), ("ch7", "train")])
def test_each_panel_opens_on_its_calibrated_setting_with_torchs_curves(page, chapter, name):
    """Each panel's defaults are the setting of the grid declared for them (ch3_panel: round 2's model,
    400 steps, lr 1e-3, batches of 8 x 32 bytes; ch7_panel_round2: 6 post-norm blocks at lr 3e-3, 300 steps,
    issue 47's faster defaults): torch's mean curves of the five deciding seeds are drawn before anything
    trains, and the note gives that grid's verdict on both machines' runs."""
    from andrea.web.training import CALIBRATED, TrainPanel

    grid_name, _ = CALIBRATED[chapter]
    panel = TrainPanel(chapter)
    pg = _panel(page, name)
    if chapter == "ch3":
        assert pg.input_value("fieldset[data-run=B] [name=warmup]") == "100"
        assert pg.input_value("fieldset[data-run=A] [name=init]") == "xavier"
    else:
        assert grid_name == "ch7_panel_round2"
        for run in "AB":  # 6 blocks (ch7_panel's 12 took the reader two minutes), 300 steps, lr 3e-3
            assert pg.input_value(f"fieldset[data-run={run}] [name=depth]") == "6"
            assert pg.input_value(f"fieldset[data-run={run}] [name=steps]") == "300"
            assert pg.input_value(f"fieldset[data-run={run}] [name=lr]") == "0.003"
        assert pg.input_value("fieldset[data-run=A] [name=layerscale]") == ""
        assert pg.input_value("fieldset[data-run=B] [name=layerscale]") == "0.0001"
    assert pg.locator(".andrea-train-chart path").count() == 2  # the two reference curves, thin
    note = pg.text_content(".andrea-explorer-note")
    assert "mean of 5 seeds" in note and grid_name in note
    assert f"reads {panel.verdict.verdict.label}. " in note and panel.evidence.missing_emulated == 0
    pg.close()


def test_the_bench_finds_the_step_from_which_the_effect_shows():
    """``make bench``'s "until the effect shows": the first step from which run A's torch curve stays at
    least 0.1 nats above run B's (a brief dip under it earlier does not count), or None if it never does."""
    from types import SimpleNamespace

    from pagemodel import effect_step

    a = [[0, 5.5], [50, 3.4], [100, 3.3], [150, 3.3], [200, 3.3]]
    b = [[0, 5.5], [50, 3.2], [100, 3.25], [150, 3.1], [200, 2.9]]  # apart at 50, not at 100, then for good
    assert effect_step(SimpleNamespace(references=[{"run": "A", "points": a}, {"run": "B", "points": b}])) == 150
    assert effect_step(SimpleNamespace(references=[{"run": "A", "points": a}, {"run": "B", "points": a}])) is None
    assert effect_step(SimpleNamespace(references=[])) is None
