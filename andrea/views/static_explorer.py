"""The gradient-flow explorer without a kernel: the same measurements, chosen with controls in the page.

The rows come from ``explorer.grid_rows()``: every setting of the static grid, measured with the
real model by ``make experiments`` and shipped with the package (so nothing is computed here when
the shipped file is current). This module turns them into a Vega-Lite chart (written with Altair)
whose controls select from the grid in the browser, and displays it in the way each place can:

* on the book's site: an HTML snippet that hands the spec to vega-embed, whose JavaScript (Vega,
  Vega-Lite, vega-embed) the site serves itself from ``_static/vendor`` (tools/vendor_js.py);
* in a notebook (JupyterLab, Notebook 7, VS Code, Colab): the ``application/vnd.vegalite.v5+json``
  MIME type, which those front ends draw themselves, with no network.
"""

from __future__ import annotations

import html
import json
import math
import os
from typing import Optional

import altair as alt

from . import explorer as E
from .plots import PALETTE, REFERENCE_GREY

VEGALITE_MIME = "application/vnd.vegalite.v5+json"
VEGALITE_V5_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
SITE_WIDTHS = (32, 64, 96, 128)  # the widths the page's model (book/_static/andrea_flow.js) takes


def cached_grid_rows() -> list[dict]:
    """The chart's rows (shipped measurements; measured live only when the shipped file is stale)."""
    return E.grid_rows()


def grid_extent(rows: list[dict], residual: bool = True) -> dict:
    """{"grad": (lo, hi), "act": (lo, hi)}: the smallest and largest finite positive value of each panel
    over the settings of ``rows`` (``explorer.grid_rows``) with the residual path on (or off), padded a
    little: the fixed y-axes that let a reader compare settings by eye. (With the path off, gradients
    fall by up to 45 decades; with it on, they stay within two, so the two are held apart.)"""
    out = {}
    res = "on" if residual else "off"
    for field in ("grad", "act"):
        v = [r[field] for r in rows if r["res"] == res and r[field] is not None]
        v = [x for x in v if math.isfinite(x) and x > 0]
        if not v:
            raise ValueError(f"grid_extent: no finite positive {field!r} value with the residual path {res}")
        lo, hi = min(v), max(v)
        pad = (hi / lo) ** 0.04 if hi > lo else 2.0
        out[field] = (lo / pad, hi * pad)
    return out


def _grid_note_lines(width: int = E.DEFAULT_WIDTH) -> list[str]:
    """What the shipped settings were measured with; ``width``: the width the explorer opens at (measured when
    the page is built if it is not the shipped grid's)."""
    lams = ", ".join(E.lambda_label(v) for v in E.GRID_LAMBDAS)
    batch = f"{E.BATCH * E.SEQ} random tokens"
    grid = (
        f"λ₀ ∈ {{{lams}}}, depth ∈ {{{', '.join(map(str, E.GRID_DEPTHS))}}}, "
        f"norm {'/'.join(E.GRID_NORMS)} and the residual path on/off"
    )
    if width == E.DEFAULT_WIDTH:
        return [
            f"Measured with the real model (width {E.DEFAULT_WIDTH}, a fresh initialisation, seed 0, {batch})",
            f"for {grid}.",
        ]
    return [
        f"Measured with the real model (a fresh initialisation, seed 0, {batch}): the opening setting and its "
        f"reference at width {width}, when this page was built,",
        f"and every setting with {grid} at width {E.DEFAULT_WIDTH}.",
    ]


def _grid_note(width: int = E.DEFAULT_WIDTH) -> str:
    return " ".join(_grid_note_lines(width))


READOUT = "gradient RMS at the embeddings / at the top of the stack = "
READOUT_SHORT = "embeddings / top gradient RMS = "
COLUMNS = ("lam", "depth", "norm", "res", "width", "boundary", "grad", "act", "status", "ratio")
NUMERIC = ("depth", "width", "boundary", "grad", "act", "ratio")


def _csv(rows: list[dict]) -> str:
    """The rows as CSV text (a third of the size of JSON records; Vega parses it in the page)."""
    out = [",".join(COLUMNS)]
    for r in rows:
        out.append(",".join("" if r[c] is None else str(r[c]) for c in COLUMNS))
    return "\n".join(out)


def log_tick_label(scale: str) -> str:
    """A Vega label expression for a log axis on scale ``scale``: decades only (1e-3, 1e-2, 1e-1, 1),
    and 2 and 5 of a decade too where the axis spans a single decade (its domain is niced to whole
    decades, so a decade at either end would otherwise be all there is to read a value by). One format,
    as the training panel's λ chart writes it: a mantissa 1, 2 or 5, then "e" and the exponent unless
    it is 0 (``[125](e-?\\d+)?``). Every other tick keeps its mark and grid line, unlabelled."""
    # the exponent and mantissa of the tick (1e-9 guards against log10(1e-3) = -2.9999999999999996)
    e = "floor(log(datum.value) / LN10 + 1e-9)"
    m = f"round(datum.value / pow(10, {e}))"
    # how many powers of ten 10^k lie on the axis: two or fewer, and it spans a single decade
    d = f"domain('{scale}')"
    decades = f"(floor(log(peek({d})) / LN10 + 1e-9) - ceil(log({d}[0]) / LN10 - 1e-9) + 1)"
    shown = f"({m} == 1 || (({m} == 2 || {m} == 5) && {decades} <= 2))"
    return f"{shown} ? {m} + ({e} == 0 ? '' : 'e' + {e}) : ''"


def explorer_chart(
    rows: list[dict],
    depth: int = 12,
    layerscale: Optional[float] = None,
    norm: str = "pre",
    residual: bool = True,
    width: int = E.DEFAULT_WIDTH,
):
    """A Vega-Lite chart with five bound controls (λ, depth, norm, residual, and fixed or fitted
    y-axes) over the precomputed rows, opening at ``width`` (rows of that width must be among them)."""
    lam0 = E.lambda_label(layerscale)
    if (
        lam0 not in {E.lambda_label(v) for v in E.GRID_LAMBDAS}
        or depth not in E.GRID_DEPTHS
        or norm not in E.GRID_NORMS
        or residual not in E.GRID_RESIDUALS
    ):
        raise ValueError(
            f"the static explorer only has λ in {[E.lambda_label(v) for v in E.GRID_LAMBDAS]}, "
            f"depth in {list(E.GRID_DEPTHS)}, norm in {list(E.GRID_NORMS)} and residual "
            f"True/False; got {lam0}, {depth}, {norm}, {residual!r}"
        )
    lam = alt.param(
        name="lam",
        value=lam0,
        bind=alt.binding_select(options=[E.lambda_label(v) for v in E.GRID_LAMBDAS], name="LayerScale λ₀ "),
    )
    dep = alt.param(
        name="depth", value=depth, bind=alt.binding_select(options=list(E.GRID_DEPTHS), name="depth (blocks) ")
    )
    nrm = alt.param(name="norm", value=norm, bind=alt.binding_radio(options=list(E.GRID_NORMS), name="norm placement "))
    res = alt.param(
        name="res",
        value="on" if residual else "off",
        bind=alt.binding_radio(options=["on", "off"], name="residual path "),
    )
    yfix = alt.param(
        name="yfix", value="fit", bind=alt.binding_radio(options=["fit", "fixed"], name="y-axes ")
    )  # "fixed": both axes span the whole grid (grid_extent), so settings compare by eye
    # Unbound here: on the site, the page's controls set them and its model measures any setting
    # off the grid (book/_static/andrea_explorer.js); the shipped rows are width 128, seed 0, and a chapter
    # that opens at another width adds its setting's rows, measured when the page is built.
    # (not "width": that name is Vega's own signal for a view's width, so the model's width would size the plots)
    wid = alt.param(name="model_width", value=width)
    seed = alt.param(name="seed", value=0)
    prefix = alt.param(name="readout", value=READOUT)  # the page sets READOUT_SHORT on a phone

    data = alt.InlineData(values=_csv(rows), format={"type": "csv", "parse": {c: "number" for c in NUMERIC}})
    base = alt.Chart(data)
    same_model = f"(datum.width || {E.DEFAULT_WIDTH}) == model_width && (datum.seed || 0) == seed"
    current = base.transform_filter(
        f"datum.lam == lam && datum.depth == depth && datum.norm == norm && datum.res == res && {same_model}"
    ).transform_calculate(series="'this setting'")
    reference = base.transform_filter(
        f"datum.lam == 'off' && datum.depth == depth && datum.norm == 'pre' && datum.res == 'on' && {same_model}"
    ).transform_calculate(series="'reference: pre-norm, no LayerScale'")
    color = alt.Color(
        "series:N",
        title=None,
        legend=alt.Legend(orient="bottom"),
        scale=alt.Scale(
            domain=["reference: pre-norm, no LayerScale", "this setting"], range=[REFERENCE_GREY, PALETTE[0]]
        ),
    )
    x = alt.X("boundary:Q", title="block boundary (0 = embeddings)", axis=alt.Axis(tickMinStep=1))

    def panel(field: str, ytitle: str, title: str):
        # the book's one tick format (1e-3, 2e-3, 1: the training panel's λ chart too), decades only
        ticks = alt.Axis(labelExpr=log_tick_label(f"{field}_panel_y"))
        y = alt.Y(f"{field}:Q", title=ytitle, scale=alt.Scale(type="log"), axis=ticks)
        tip = [alt.Tooltip("boundary:Q"), alt.Tooltip(f"{field}:Q", format=".3g")]
        ref = reference.mark_line(strokeWidth=3, opacity=0.55).encode(x=x, y=y, color=color, tooltip=tip)
        cur = current.mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=18)).encode(
            x=x, y=y, color=color, tooltip=tip
        )
        # Two invisible points at the grid's range (its settings with this residual path), there only
        # while the axes are fixed: the y scale, shared by the layers, then spans them whatever is shown.
        bounds = (
            base.transform_filter(
                f"yfix == 'fixed' && datum.res == res && isFinite(datum.{field}) && datum.{field} > 0"
            )
            .transform_aggregate(lo=f"min({field})", hi=f"max({field})")
            .transform_fold(["lo", "hi"], as_=["end", field])
            .mark_point(opacity=0, size=1)
            .encode(y=y)
        )
        # named, so that its y scale is "<field>_panel_y" wherever the page places the panel
        return alt.layer(ref, cur, bounds).properties(name=f"{field}_panel", width=255, height=220, title=title)

    readout = (
        current.transform_filter("datum.boundary == 0")
        .transform_calculate(
            text="datum.status == 'ok' ? readout + format(datum.ratio, '.3g') + '×' : upper(datum.status)"
        )
        .mark_text(align="left", fontSize=13, fontWeight="bold", color=PALETTE[0])
        .encode(text="text:N", x=alt.value(0), y=alt.value(10))
        .properties(width=560, height=20)
    )
    chart = (
        alt.vconcat(
            alt.hconcat(
                panel("grad", "gradient RMS", "gradient reaching each boundary"),
                panel("act", "residual-stream RMS", "size of the residual stream"),
            ),
            readout,
        )
        .add_params(lam, dep, nrm, res, yfix, wid, seed, prefix)
        .configure_view(stroke=None)
        .configure_axis(grid=True, gridOpacity=0.3)
    )
    return chart


DATASET = "rows"  # the chart's data, by the name the page's script adds live rows to


def _name_dataset(spec: dict) -> dict:
    """Give Altair's hashed dataset name a fixed one (andrea_explorer.js inserts rows into it)."""
    (old,) = spec["datasets"]
    spec["datasets"] = {DATASET: spec["datasets"][old]}

    def walk(o):
        if isinstance(o, dict):
            if o.get("name") == old:
                o["name"] = DATASET
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(spec)
    return spec


class StaticExplorer:
    """The precomputed explorer: an HTML snippet on the book's site, a Vega-Lite chart in a notebook."""

    def __init__(
        self,
        depth: int = 12,
        layerscale: Optional[float] = None,
        norm: str = "pre",
        name: str = "explorer",
        residual: bool = True,
        look: str = "",
        width: int = E.DEFAULT_WIDTH,
    ):
        """``look``: one sentence, shown above the chart, on what to look for in this chapter.
        ``width``: the model width it opens at (32, 64, 96 or 128). The shipped grid is width 128; at
        another width the opening setting and its reference are measured here, with the real model."""
        if width not in SITE_WIDTHS:
            raise ValueError(f"width must be one of {SITE_WIDTHS} (the widths the page's model takes), got {width!r}")
        self.look = look
        self.rows = cached_grid_rows()
        if width != E.DEFAULT_WIDTH:
            s = E.Setting(layerscale=layerscale, depth=depth, norm=norm, residual=residual, width=width)
            for x in (s, s.reference()):
                self.rows = self.rows + E.setting_rows(x, E.probe(x))
        self.spec = _name_dataset(explorer_chart(self.rows, depth, layerscale, norm, residual, width).to_dict())
        self.id = f"andrea-{name}"
        self.start = {"layerscale": layerscale, "depth": depth, "norm": norm, "residual": residual, "width": width}
        self.width = width

    def html(self) -> str:
        spec = json.dumps(self.spec, separators=(",", ":"))
        opts = json.dumps({"start": self.start, "readoutShort": READOUT_SHORT})
        look = f'<p class="andrea-explorer-look"><strong>What to look for:</strong> {html.escape(self.look)}</p>\n'
        return f"""{look if self.look else ""}<div class="andrea-explorer" id="{self.id}" role="figure"
 aria-label="Interactive chart: gradient RMS and residual-stream RMS at every block boundary,
 for the chosen LayerScale λ, depth, norm placement, residual path, width and seed"></div>
<p class="andrea-explorer-note">{_grid_note(self.width)} Any other setting is computed in your browser:
the same model, one forward and backward pass with TensorFlow.js, in a background thread.</p>
<script>
(function() {{
  var el = document.getElementById("{self.id}");
  if (!window.vegaEmbed || !window.AndreaExplorer) {{
    el.textContent = "(This chart is drawn by the book's JavaScript, which did not load.)";
    return;
  }}
  AndreaExplorer.mount(el, {spec}, {opts});
}})();
</script>"""

    def notebook_spec(self) -> dict:
        """The spec for a notebook's own Vega-Lite renderer (Vega-Lite 5), with the note as subtitle."""
        spec = dict(self.spec)
        spec["$schema"] = VEGALITE_V5_SCHEMA
        spec["title"] = {
            "text": "Precomputed explorer",
            "subtitle": ([f"What to look for: {self.look}"] if self.look else [])
            + _grid_note_lines(self.width)
            + ["For any other value, use the live explorer (andrea.views.widgets.GradientFlowExplorer)."],
            "anchor": "start",
            "fontSize": 12,
            "subtitleFontSize": 11,
        }
        return spec

    def _repr_mimebundle_(self, include=None, exclude=None):
        if os.environ.get("ANDREA_BOOK_BUILD") == "1":  # the book's site: its own vendored JavaScript
            return {"text/html": self.html()}
        return {
            VEGALITE_MIME: self.notebook_spec(),
            "text/plain": "Precomputed gradient-flow explorer (a Vega-Lite chart; " + _grid_note(self.width) + ")",
        }
