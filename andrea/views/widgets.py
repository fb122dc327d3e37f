"""The gradient-flow explorer: ipywidgets controls over ``andrea.views.explorer`` and ``andrea.views.plots``.

    from andrea.views.widgets import GradientFlowExplorer
    GradientFlowExplorer(depth=48, layerscale=1e-6)

The widget is a thin view: every number comes from ``explorer.probe`` (cached per setting, and
shipped with the package for the static grid) and every picture from ``plots.ExplorerFigure``.
Sliders update on release, not while dragging, so a slow setting never queues up work; the figure
is an ``Image`` swapped in place (no flicker). A value a control cannot take is refused with a
message in the widget, and the control goes back to the last good value.
"""

from __future__ import annotations

import time
from typing import Optional

import ipywidgets as W

from ..device import check_device, pick_device
from ..measure.probe import GradientReport
from . import explorer as E
from .plots import ExplorerFigure
from .static_explorer import grid_extent

LABEL_WIDTH = "130px"


def _lambda_options():
    # "off" (no LayerScale) is a string: ipywidgets' selection sliders cannot hold None.
    return [("off", "off")] + [(f"{v:g}", v) for v in E.LAMBDA_CHOICES[1:]]


def _row(label: str, control: W.Widget) -> W.HBox:
    """A control with its label in a fixed-width column, so every row lines up."""
    return W.HBox([W.Label(label, layout=W.Layout(width=LABEL_WIDTH)), control], layout=W.Layout(align_items="center"))


class GradientFlowExplorer(W.VBox):
    """Vary LayerScale lambda, depth, norm placement, residual path, width and seed; watch the
    gradient RMS at every block boundary (and the residual stream's size) of a fresh model.
    ``fixed_y``: hold both y-axes at the range of the shipped grid's settings with the same residual path
    (``static_explorer.grid_extent``), so that two settings can be compared by eye; off, each axis fits
    the setting shown."""

    def __init__(
        self,
        depth: int = 12,
        layerscale: Optional[float] = None,
        norm: str = "pre",
        residual: bool = True,
        width: int = E.DEFAULT_WIDTH,
        seed: int = 0,
        device: Optional[str] = None,
        fixed_y: bool = False,
    ):
        self.device = str(check_device(device)) if device is not None else pick_device()
        widths = E.WIDTH_CHOICES_GPU if self.device.startswith("cuda") else E.WIDTH_CHOICES_CPU
        E.Setting(layerscale=layerscale, depth=depth, norm=norm, residual=residual, width=width, seed=seed)  # validates
        if layerscale is not None and layerscale not in E.LAMBDA_CHOICES:
            raise ValueError(
                f"layerscale must be None or one of the slider's values {E.LAMBDA_CHOICES[1:]}, got {layerscale!r}"
            )
        if width not in widths:
            raise ValueError(f"width must be one of {widths} on {self.device}, got {width!r}")
        wide = W.Layout(width="300px")
        self.controls = {
            "layerscale": W.SelectionSlider(
                options=_lambda_options(),
                value="off" if layerscale is None else layerscale,
                continuous_update=False,
                layout=wide,
            ),
            "depth": W.IntSlider(
                value=depth, min=E.DEPTH_RANGE[0], max=E.DEPTH_RANGE[1], continuous_update=False, layout=wide
            ),
            "norm": W.ToggleButtons(options=list(E.NORM_CHOICES), value=norm, style={"button_width": "64px"}),
            "residual": W.Checkbox(value=residual, indent=False),
            "width": W.Dropdown(options=list(widths), value=width, layout=W.Layout(width="120px")),
            "seed": W.IntText(value=seed, layout=W.Layout(width="120px")),
            "fixed_y": W.Checkbox(value=fixed_y, description="the grid's range", indent=False),
        }
        labels = {
            "layerscale": "LayerScale λ₀",
            "depth": "depth (blocks)",
            "norm": "norm placement",
            "residual": "residual path",
            "width": "width d_model",
            "seed": "seed",
            "fixed_y": "fixed y-axes",
        }
        self.image = W.Image(format="png", layout=W.Layout(width="100%", max_width="900px"))
        self.readout = W.HTML()
        self.status = W.HTML()
        self.cache = E.ProbeCache()
        self.report: Optional[GradientReport] = None
        self.reference: Optional[GradientReport] = None
        self.figure_data: dict = {}
        self._figure = ExplorerFigure()
        self._png: dict = {}  # rendered figure per (setting, fixed axes): a setting seen before is shown instantly
        self._extent: dict = {}  # the shipped grid's range per residual path, for the fixed y-axes
        self._last_good = E.Setting(
            layerscale=layerscale, depth=depth, norm=norm, residual=residual, width=width, seed=seed
        )
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        c = self.controls
        left = W.VBox([_row(labels[k], c[k]) for k in ("layerscale", "depth", "norm")])
        right = W.VBox([_row(labels[k], c[k]) for k in ("residual", "width", "seed", "fixed_y")])
        super().__init__(
            [
                W.HBox([left, right], layout=W.Layout(flex_flow="row wrap", grid_gap="8px 24px")),
                self.image,
                self.readout,
                self.status,
            ]
        )
        self.update()

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):  # what a viewer without a kernel (or a reopened notebook) shows
            bundle["text/plain"] = "Gradient-flow explorer (interactive): run this cell in a live kernel to start it."
        return bundle

    @property
    def setting(self) -> E.Setting:
        c = self.controls
        lam = c["layerscale"].value
        return E.Setting(
            layerscale=None if lam == "off" else lam,
            depth=c["depth"].value,
            norm=c["norm"].value,
            residual=c["residual"].value,
            width=c["width"].value,
            seed=c["seed"].value,
        )

    def _on_change(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Probe the current setting (and its reference), redraw, and refresh the readout."""
        try:
            s = self.setting
        except ValueError as e:  # e.g. a seed typed out of range: go back to the last good value, say why
            self.controls["seed"].value = self._last_good.seed  # (redraws the last good setting)
            self.status.value = f"<span style='color:#D55E00'>{e}; kept {self._last_good.seed}</span>"
            return
        self._last_good = s
        self.status.value = "<i>computing…</i>"
        t0 = time.perf_counter()
        hits = self.cache.hits
        shipped = self.device == "cpu" and E.shipped().get(s) is not None
        r = self.report = E.probe(s, self.device, self.cache)
        self.reference = E.probe(s.reference(), self.device, self.cache) if s.reference() != s else None
        cached = self.cache.hits - hits == (2 if self.reference is not None else 1)
        fixed = self.controls["fixed_y"].value
        drawn = self._png.get((s, fixed)) if cached else None
        if drawn is None:
            ylims = None
            if fixed:
                if s.residual not in self._extent:  # once per residual path: the shipped grid's settings
                    self._extent[s.residual] = grid_extent(E.grid_rows(), s.residual)
                ext = self._extent[s.residual]
                ylims = {"grad_rms": ext["grad"], "act_rms": ext["act"]}
            self._figure.update(r, self.reference, title=s.label(), device=self.device, seed=s.seed, ylims=ylims)
            drawn = self._png[s, fixed] = (self._figure.png(), [ax.get_ylim() for ax in self._figure.axes])
            if len(self._png) > self.cache.maxsize:
                self._png.pop(next(iter(self._png)))  # drop the oldest
        png, ylims_shown = drawn
        self.figure_data = {
            "setting": s,
            "grad_rms": r.grad_rms.copy(),
            "act_rms": r.act_rms.copy(),
            "status": r.status,
            "reference_grad_rms": None if self.reference is None else self.reference.grad_rms.copy(),
            "ylims": ylims_shown,  # each panel's (bottom, top), as drawn
        }
        colour = {"ok": "#0072B2", "diverged": "#D55E00", "vanished": "#D55E00"}[r.status]
        self.readout.value = f"<b style='color:{colour}'>{E.summary(r)}</b>"
        # the image last: the front end applies the messages in order, so a new image means a new readout
        self.image.value = png
        how = "from cache" if cached else ("from the shipped measurements" if shipped else "computed")
        self.status.value = (
            f"<span style='color:#666;font-size:85%'>{how} in "
            f"{(time.perf_counter() - t0) * 1000:.0f} ms on {self.device}</span>"
        )
