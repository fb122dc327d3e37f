"""The gradient-flow explorer for the static site: the same measurements, no kernel, no network.

At build time ``grid_rows`` (andrea.explorer) probes every setting of a fixed grid with the real
model; this module turns those rows into a Vega-Lite chart (written with Altair) whose controls
select from the grid in the browser. The chart's JavaScript (Vega, Vega-Lite, vega-embed) is
served by the site itself from ``_static/vendor`` (see tools/vendor_js.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Optional

import altair as alt

from . import explorer as E
from .data import cache_dir
from .plots import PALETTE, REFERENCE_GREY

GRID_VERSION = 1  # bump when the probe or the grid changes


def cached_grid_rows(progress=None) -> list[dict]:
    """``explorer.grid_rows()``, computed once per machine and cached (the book embeds it thrice)."""
    import torch

    key = json.dumps({"v": GRID_VERSION, "l": E.GRID_LAMBDAS, "d": E.GRID_DEPTHS, "n": E.GRID_NORMS,
                      "w": E.DEFAULT_WIDTH, "b": [E.BATCH, E.SEQ], "torch": torch.__version__})
    path = cache_dir() / f"explorer-grid-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.is_file():
        return json.loads(path.read_text())
    rows = E.grid_rows(progress)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, separators=(",", ":")))
    tmp.replace(path)
    return rows


def explorer_chart(rows: list[dict], depth: int = 12, layerscale: Optional[float] = None, norm: str = "pre") -> alt.VConcatChart:
    """A Vega-Lite chart with three bound controls (λ, depth, norm) over the precomputed rows."""
    lam0 = E.lambda_label(layerscale)
    if lam0 not in {E.lambda_label(v) for v in E.GRID_LAMBDAS} or depth not in E.GRID_DEPTHS or norm not in E.GRID_NORMS:
        raise ValueError(f"the static explorer only has λ in {[E.lambda_label(v) for v in E.GRID_LAMBDAS]}, "
                         f"depth in {list(E.GRID_DEPTHS)} and norm in {list(E.GRID_NORMS)}; got {lam0}, {depth}, {norm}")
    lam = alt.param(name="lam", value=lam0, bind=alt.binding_select(
        options=[E.lambda_label(v) for v in E.GRID_LAMBDAS], name="LayerScale λ₀ "))
    dep = alt.param(name="depth", value=depth, bind=alt.binding_select(options=list(E.GRID_DEPTHS), name="depth (blocks) "))
    nrm = alt.param(name="norm", value=norm, bind=alt.binding_radio(options=list(E.GRID_NORMS), name="norm placement "))

    base = alt.Chart(alt.Data(values=rows))
    current = base.transform_filter("datum.lam == lam && datum.depth == depth && datum.norm == norm") \
        .transform_calculate(series="'this setting'")
    reference = base.transform_filter("datum.lam == 'off' && datum.depth == depth && datum.norm == 'pre'") \
        .transform_calculate(series="'reference: pre-norm, no LayerScale'")
    color = alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom"),
                      scale=alt.Scale(domain=["reference: pre-norm, no LayerScale", "this setting"],
                                      range=[REFERENCE_GREY, PALETTE[0]]))
    x = alt.X("boundary:Q", title="block boundary (0 = embeddings)", axis=alt.Axis(tickMinStep=1))

    def panel(field: str, ytitle: str, title: str):
        y = alt.Y(f"{field}:Q", title=ytitle, scale=alt.Scale(type="log"))
        tip = [alt.Tooltip("boundary:Q"), alt.Tooltip(f"{field}:Q", format=".3g")]
        ref = reference.mark_line(strokeWidth=3, opacity=0.55).encode(x=x, y=y, color=color, tooltip=tip)
        cur = current.mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=18)).encode(x=x, y=y, color=color, tooltip=tip)
        return alt.layer(ref, cur).properties(width=300, height=220, title=title)

    readout = current.transform_filter("datum.boundary == 0").transform_calculate(
        text="datum.status == 'ok' ? 'gradient RMS at the embeddings / at the top of the stack = ' + "
             "format(datum.ratio, '.3g') + '×' : upper(datum.status)"
    ).mark_text(align="left", fontSize=13, fontWeight="bold", color=PALETTE[0]).encode(
        text="text:N", x=alt.value(0), y=alt.value(10)).properties(width=640, height=20)
    chart = alt.vconcat(
        alt.hconcat(panel("grad", "gradient RMS", "gradient reaching each boundary"),
                    panel("act", "residual-stream RMS", "size of the residual stream")),
        readout,
    ).add_params(lam, dep, nrm).configure_view(stroke=None).configure_axis(grid=True, gridOpacity=0.3)
    return chart


class StaticExplorer:
    """Displays as an HTML snippet: a div and a script that hands the spec to vegaEmbed."""

    def __init__(self, depth: int = 12, layerscale: Optional[float] = None, norm: str = "pre", name: str = "explorer"):
        self.rows = cached_grid_rows()
        self.spec = explorer_chart(self.rows, depth, layerscale, norm).to_dict()
        self.id = f"andrea-{name}"

    def html(self) -> str:
        spec = json.dumps(self.spec, separators=(",", ":"))
        lams = ", ".join(E.lambda_label(v) for v in E.GRID_LAMBDAS)
        return f"""<div class="andrea-explorer" id="{self.id}" role="figure"
 aria-label="Interactive chart: gradient RMS and residual-stream RMS at every block boundary, for the chosen LayerScale λ, depth and norm placement"></div>
<p class="andrea-explorer-note">Precomputed at build time with the real model (width {E.DEFAULT_WIDTH}, a fresh
initialisation, seed 0, {E.BATCH}×{E.SEQ} random tokens) for λ ∈ {{{lams}}}, depth ∈ {{{", ".join(map(str, E.GRID_DEPTHS))}}}
and pre/post-norm. For other values, the residual switch, other widths or seeds, launch this page as a notebook
(the rocket button above) and use the live explorer.</p>
<script>
(function() {{
  var el = document.getElementById("{self.id}");
  if (!window.vegaEmbed) {{ el.textContent = "(The chart needs the book's JavaScript: open this page on the built site.)"; return; }}
  vegaEmbed(el, {spec}, {{renderer: "svg", actions: false}}).then(function(r) {{
    window.andreaExplorers = window.andreaExplorers || {{}};
    window.andreaExplorers["{self.id}"] = r.view;
    el.setAttribute("data-ready", "1");
  }}).catch(function(err) {{ el.textContent = "Chart error: " + err; console.error(err); }});
}})();
</script>"""

    def _repr_html_(self) -> str:
        return self.html()
