"""The live explorer, driven through its controls as a reader would (no browser needed)."""

import json

import numpy as np
import pytest
import traitlets

from andrea.views import explorer as E
from andrea.views.static_explorer import grid_extent
from andrea.views.widgets import GradientFlowExplorer


@pytest.fixture(scope="module")
def w():
    return GradientFlowExplorer(depth=12, width=64)


def test_initial_state(w):
    assert set(w.controls) == {"layerscale", "depth", "norm", "residual", "width", "seed", "fixed_y"}
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


def test_fixed_y_axes_hold_the_whole_grids_range_across_settings():
    w = GradientFlowExplorer(depth=6, width=64)
    fitted = w.figure_data["ylims"]
    w.controls["fixed_y"].value = True
    ext = grid_extent(E.grid_rows(), residual=True)
    held = w.figure_data["ylims"]
    assert np.allclose(held, [ext["grad"], ext["act"]]) and not np.allclose(held, fitted)
    w.controls["depth"].value = 48  # another setting: the axes stay where they were
    assert np.allclose(w.figure_data["ylims"], held)
    # every shipped value of both panels lies inside them
    rows = [r for r in E.grid_rows() if r["res"] == "on"]
    for k, field in enumerate(("grad", "act")):
        v = [r[field] for r in rows if r[field] is not None]
        assert held[k][0] < min(v) and max(v) < held[k][1]
    w.controls["residual"].value = False  # the path off: the range of the grid's residual-free settings
    off = grid_extent(E.grid_rows(), residual=False)
    assert np.allclose(w.figure_data["ylims"], [off["grad"], off["act"]]) and off["grad"][0] < ext["grad"][0] / 1e30
    w.controls["fixed_y"].value = False  # off again: the axis fits the setting shown
    assert not np.allclose(w.figure_data["ylims"], held)


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

    from andrea.views.static_explorer import StaticExplorer, cached_grid_rows

    rows = cached_grid_rows()
    per_depth = len(E.GRID_LAMBDAS) * len(E.GRID_NORMS) * len(E.GRID_RESIDUALS)
    assert {r["norm"] for r in rows} == {"pre", "post", "none"} and {r["res"] for r in rows} == {"on", "off"}
    assert len({(r["lam"], r["depth"], r["norm"], r["res"]) for r in rows}) == per_depth * len(E.GRID_DEPTHS)
    assert len(rows) == sum(d + 1 for d in E.GRID_DEPTHS) * per_depth
    ex = StaticExplorer(depth=12)
    html = ex.html()
    assert len(html.encode()) < 1_000_000  # the whole grid stays under 1 MB of page weight
    assert alt.SCHEMA_VERSION.startswith("v6.")  # tools/vendor_js.py ships vega-lite 6
    assert "vega-lite/v6" in json.dumps(ex.spec["$schema"])
    assert list(ex.spec["datasets"]) == ["rows"]  # the name andrea_explorer.js adds live rows to
    with pytest.raises(ValueError, match="static explorer only has"):
        StaticExplorer(depth=13)
    with pytest.raises(ValueError, match="residual True/False; got off, 12, pre, 'no'"):
        StaticExplorer(depth=12, residual="no")


@pytest.mark.parametrize(
    "settings",
    [{}, {"depth": 96, "norm": "post"}, {"depth": 96, "norm": "none", "layerscale": 1.0}, {"residual": False}],
    ids=["default", "post-96", "none-96-lambda-1", "no-residual"],
)
def test_explorer_figure_keeps_every_label_inside_the_image(settings):
    """Issue 13, item 2: no axis label, tick label, title, legend or provenance text is cut off."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from andrea.views.plots import style

    w = GradientFlowExplorer(**settings)
    fig = w._figure.fig
    cut = []
    with style():  # as the widget's PNG is drawn
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer, box = canvas.get_renderer(), fig.bbox
        # what is drawn: each panel with its tick labels, axis labels and title, and the figure's texts
        parts = [(f"panel {i + 1}", ax.get_tightbbox(renderer)) for i, ax in enumerate(fig.axes)]
        parts += [(repr(t.get_text()), t.get_window_extent(renderer)) for t in fig.texts if t.get_text().strip()]
        parts += [("legend", lg.get_window_extent(renderer)) for lg in fig.legends]
        for name, e in parts:
            if e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
                cut.append(name)
    assert cut == [], f"text cut off at the image's edge: {cut}"
