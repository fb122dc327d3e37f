"""The live explorer, driven through its controls as a reader would (no browser needed)."""

import json

import numpy as np
import pytest
import traitlets

from andrea import explorer as E
from andrea.widgets import GradientFlowExplorer


@pytest.fixture(scope="module")
def w():
    return GradientFlowExplorer(depth=12, width=64)


def test_initial_state(w):
    assert set(w.controls) == {"layerscale", "depth", "norm", "residual", "width", "seed"}
    assert w.report is not None and w.report.act_rms.shape == (13,)
    assert w.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert "gradient RMS at the embeddings" in w.readout.value
    assert all(getattr(c, "continuous_update", False) is False for c in (w.controls["depth"], w.controls["layerscale"]))


@pytest.mark.parametrize(
    "name, value, field",
    [
        ("depth", 24, "depth"),
        ("norm", "post", "norm"),
        ("residual", False, "residual"),
        ("layerscale", 1e-4, "layerscale"),
        ("seed", 3, "seed"),
        ("width", 128, "width"),
    ],
)
def test_each_control_drives_the_display(w, name, value, field):
    before_png, before_grad = w.image.value, w.figure_data["grad_rms"].copy()
    w.controls[name].value = value
    s = w.figure_data["setting"]
    assert getattr(s, field) == value
    assert len(w.figure_data["grad_rms"]) == s.depth + 1
    assert w.image.value != before_png
    assert not (
        len(before_grad) == len(w.figure_data["grad_rms"]) and np.array_equal(before_grad, w.figure_data["grad_rms"])
    )
    # what is drawn is exactly the probe of the displayed setting
    expected = E.probe(s, cache=None)
    assert np.allclose(w.figure_data["grad_rms"], expected.grad_rms, rtol=1e-6)
    assert w.report is w.cache.get((s, w.device)) or np.allclose(w.report.grad_rms, expected.grad_rms)


def test_readout_shows_the_ratio_of_the_displayed_report():
    w = GradientFlowExplorer(depth=8, width=64)
    assert f"= {w.report.grad_ratio:.3g}×" in w.readout.value
    w.controls["depth"].value = 40
    assert f"= {w.report.grad_ratio:.3g}×" in w.readout.value and w.report.n_layer == 40


def test_reference_curve_is_plain_prenorm_same_depth():
    w = GradientFlowExplorer(depth=12, width=64, layerscale=1e-6, norm="post")
    ref = E.probe(E.Setting(depth=12, width=64), cache=None)
    assert np.allclose(w.figure_data["reference_grad_rms"], ref.grad_rms)


@pytest.mark.parametrize(
    "settings, allowed",
    [
        ({"norm": "post", "depth": 96}, {"ok", "diverged", "vanished"}),
        ({"layerscale": 1.0, "depth": 96}, {"ok", "diverged", "vanished"}),
        ({"residual": False, "depth": 96, "norm": "none"}, {"vanished", "diverged"}),
    ],
)
def test_extreme_settings_render_instead_of_raising(settings, allowed):
    w = GradientFlowExplorer(width=64)
    for k, v in settings.items():
        w.controls[k].value = v
    assert w.report.status in allowed
    assert w.image.value[:4] == b"\x89PNG"
    if w.report.status != "ok":
        assert w.report.status in w.readout.value


def test_vanished_gradient_is_labelled():
    w = GradientFlowExplorer(width=64, depth=96, norm="none", residual=False)
    assert w.report.status == "vanished" and "vanished" in w.readout.value


def test_seen_setting_is_served_from_cache():
    w = GradientFlowExplorer(depth=4, width=64)
    w.controls["depth"].value = 6
    hits = w.cache.hits
    w.controls["depth"].value = 4
    assert w.cache.hits == hits + 1
    assert "from cache" in w.status.value


def test_bad_values_are_refused_with_clear_messages():
    with pytest.raises(ValueError, match="depth must be an integer from 1 to 96, got 200"):
        GradientFlowExplorer(depth=200)
    with pytest.raises(ValueError, match="norm must be one of"):
        GradientFlowExplorer(norm="sandwich")
    with pytest.raises(ValueError, match="layerscale must be None or one of"):
        GradientFlowExplorer(layerscale=0.5)
    with pytest.raises(ValueError, match="width must be one of"):
        GradientFlowExplorer(width=768, device="cpu")
    w = GradientFlowExplorer(depth=2, width=64)
    with pytest.raises(traitlets.TraitError):
        w.controls["layerscale"].value = 0.123
    w.controls["depth"].value = 500  # the slider clamps to its range rather than failing
    assert w.controls["depth"].value == 96 and w.report.n_layer == 96


def test_static_grid_and_spec():
    import altair as alt

    from andrea.static_explorer import StaticExplorer, cached_grid_rows

    rows = cached_grid_rows()
    n_settings = len(E.GRID_LAMBDAS) * len(E.GRID_DEPTHS) * len(E.GRID_NORMS)
    assert len({(r["lam"], r["depth"], r["norm"]) for r in rows}) == n_settings
    assert len(rows) == sum(d + 1 for d in E.GRID_DEPTHS) * len(E.GRID_LAMBDAS) * len(E.GRID_NORMS)
    ex = StaticExplorer(depth=12)
    html = ex.html()
    assert len(html.encode()) < 1_000_000  # the whole grid stays under 1 MB of page weight
    assert alt.SCHEMA_VERSION.startswith("v6.")  # tools/vendor_js.py ships vega-lite 6
    assert "vega-lite/v6" in json.dumps(ex.spec["$schema"])
    with pytest.raises(ValueError, match="static explorer only has"):
        StaticExplorer(depth=13)
