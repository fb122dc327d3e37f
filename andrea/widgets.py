"""The gradient-flow explorer: ipywidgets controls over ``andrea.explorer`` and ``andrea.plots``.

    from andrea.widgets import GradientFlowExplorer
    GradientFlowExplorer(depth=48, layerscale=1e-6)

The widget is a thin view: every number comes from ``explorer.probe`` (cached per setting) and
every picture from ``plots.gradient_flow_figure``. Sliders update on release, not while dragging,
so a slow setting never queues up work; the figure is an ``Image`` swapped in place (no flicker).
"""

from __future__ import annotations

import time
from typing import Optional

import ipywidgets as W
import matplotlib.pyplot as plt

from . import explorer as E
from .device import pick_device
from .plots import fig_to_png, gradient_flow_figure


def _lambda_options():
    # "off" (no LayerScale) is a string: ipywidgets' selection sliders cannot hold None.
    return [("off", "off")] + [(f"{v:g}", v) for v in E.LAMBDA_CHOICES[1:]]


class GradientFlowExplorer(W.VBox):
    """Vary LayerScale lambda, depth, norm placement, residual path, width and seed; watch the
    gradient RMS at every block boundary (and the residual stream's size) of a fresh model."""

    def __init__(self, depth: int = 12, layerscale: Optional[float] = None, norm: str = "pre",
                 residual: bool = True, width: int = E.DEFAULT_WIDTH, seed: int = 0, device: Optional[str] = None):
        self.device = device or pick_device()
        widths = E.WIDTH_CHOICES_GPU if self.device == "cuda" else E.WIDTH_CHOICES_CPU
        E.Setting(layerscale=layerscale, depth=depth, norm=norm, residual=residual, width=width, seed=seed)  # validates
        if layerscale is not None and layerscale not in E.LAMBDA_CHOICES:
            raise ValueError(f"layerscale must be None or one of the slider's values {E.LAMBDA_CHOICES[1:]}, got {layerscale!r}")
        if width not in widths:
            raise ValueError(f"width must be one of {widths} on {self.device}, got {width!r}")
        style = {"description_width": "110px"}
        layout = W.Layout(width="420px")
        self.controls = {
            "layerscale": W.SelectionSlider(options=_lambda_options(), value="off" if layerscale is None else layerscale, description="LayerScale λ₀",
                                            continuous_update=False, style=style, layout=layout),
            "depth": W.IntSlider(value=depth, min=E.DEPTH_RANGE[0], max=E.DEPTH_RANGE[1], description="depth (blocks)",
                                 continuous_update=False, style=style, layout=layout),
            "norm": W.ToggleButtons(options=list(E.NORM_CHOICES), value=norm, description="norm placement", style=style),
            "residual": W.Checkbox(value=residual, description="residual path (x + …)", indent=False),
            "width": W.Dropdown(options=list(widths), value=width, description="width d_model", style=style),
            "seed": W.BoundedIntText(value=seed, min=0, max=10_000, description="seed", style=style,
                                     layout=W.Layout(width="200px")),
        }
        self.image = W.Image(format="png", layout=W.Layout(width="100%", max_width="900px"))
        self.readout = W.HTML()
        self.status = W.HTML()
        self.cache = E.ProbeCache()
        self.report = None
        self.reference = None
        self.figure_data: dict = {}
        self._png: dict = {}  # rendered figure per setting: a setting seen before is shown instantly
        self._fig = plt.figure(figsize=(9, 3.6))
        plt.close(self._fig)  # drawn into by us only; never shown by the inline backend
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        c = self.controls
        box = W.VBox([W.HBox([c["layerscale"], c["depth"]]), W.HBox([c["norm"], c["residual"]]),
                      W.HBox([c["width"], c["seed"]])])
        super().__init__([box, self.image, self.readout, self.status])
        self.update()

    @property
    def setting(self) -> E.Setting:
        c = self.controls
        lam = c["layerscale"].value
        return E.Setting(layerscale=None if lam == "off" else lam, depth=c["depth"].value, norm=c["norm"].value,
                         residual=c["residual"].value, width=c["width"].value, seed=c["seed"].value)

    def _on_change(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Probe the current setting (and its reference), redraw, and refresh the readout."""
        s = self.setting
        self.status.value = "<i>computing…</i>"
        t0 = time.perf_counter()
        hits = self.cache.hits
        self.report = E.probe(s, self.device, self.cache)
        self.reference = E.probe(s.reference(), self.device, self.cache) if s.reference() != s else None
        cached = self.cache.hits - hits == (2 if self.reference is not None else 1)
        png = self._png.get(s) if cached else None
        if png is None:
            fig = gradient_flow_figure(self.report, self.reference, title=s.label(), device=self.device, seed=s.seed,
                                       fig=self._fig)
            png = self._png[s] = fig_to_png(fig)
            if len(self._png) > self.cache.maxsize:
                self._png.pop(next(iter(self._png)))  # drop the oldest
        self.image.value = png
        r = self.report
        self.figure_data = {"setting": s, "grad_rms": r.grad_rms.copy(), "act_rms": r.act_rms.copy(),
                            "status": r.status,
                            "reference_grad_rms": None if self.reference is None else self.reference.grad_rms.copy()}
        colour = {"ok": "#0072B2", "diverged": "#D55E00", "vanished": "#D55E00"}[r.status]
        self.readout.value = f"<b style='color:{colour}'>{E.summary(r)}</b>"
        self.status.value = (f"<span style='color:#666;font-size:85%'>{'from cache' if cached else 'computed'} in "
                             f"{(time.perf_counter() - t0) * 1000:.0f} ms on {self.device}</span>")
