"""Diagrams of the block and the stack, drawn from a config (so that they say what the code builds):
SVG shown inline in the book, on a light card, legible in both themes.

    diagrams.block_diagram(highlight="layernorm")      # one block of ANDREA-120M, LayerNorm highlighted
    diagrams.stack_diagram(ANDREA_120M)                # embeddings, the blocks on the stream, the head
"""

from __future__ import annotations

from typing import Optional, Sequence

_INK, _STREAM, _HI, _BOX = "#222222", "#0072B2", "#E69F00", "#f4f4f4"


class Diagram:
    """An SVG drawing shown inline in the book (on a light card, legible in both themes)."""

    def __init__(self, svg: str, alt: str):
        self.svg, self.alt = svg, alt

    def _repr_html_(self) -> str:
        return f"<div class='andrea-diagram' role='img' aria-label='{self.alt}'>{self.svg}</div>"

    def __repr__(self) -> str:
        return f"<diagram: {self.alt}>"


def diagrams(*ds: Diagram) -> Diagram:
    """Several diagrams side by side (they wrap onto the next line on a narrow screen)."""
    return Diagram(
        "<div style='display:flex;flex-wrap:wrap;gap:8px'>" + "".join(d.svg for d in ds) + "</div>",
        "; ".join(d.alt for d in ds),
    )


def _box(x, y, w, h, text, hi=False) -> str:
    fill = _HI if hi else _BOX
    return (
        f"<rect x='{x - w / 2}' y='{y - h / 2}' width='{w}' height='{h}' rx='5' fill='{fill}' "
        f"stroke='{_INK}' stroke-width='1.2'/><text x='{x}' y='{y + 4.5}' text-anchor='middle' "
        f"font-size='13' fill='{_INK}'>{text}</text>"
    )


def _line(points, color=_INK, width=1.4, arrow=True) -> str:
    d = " ".join(f"{x},{y}" for x, y in points)
    end = " marker-end='url(#arr)'" if arrow else ""
    return f"<polyline points='{d}' fill='none' stroke='{color}' stroke-width='{width}'{end}/>"


def block_diagram(cfg=None, highlight: Optional[str] = None) -> Diagram:
    """One ANDREA block as its config wires it (``cfg``: an AndreaConfig; default ANDREA-120M's):
    the residual stream drawn as a thick vertical line, each sublayer as a branch that leaves it and
    is added back (pre-norm: LayerNorm inside the branch; post-norm: LayerNorm on the stream after
    the addition; LayerScale's lambda on the branch when the config has it; no addition without the
    residual path). ``highlight``: "layernorm", "attention", "mlp", "layerscale" or "residual"."""
    from ..model.config import ANDREA_120M

    c = cfg or ANDREA_120M
    allowed = (None, "layernorm", "attention", "mlp", "layerscale", "residual")
    if highlight not in allowed:
        raise ValueError(f"highlight must be one of {allowed}, got {highlight!r}")
    ls = c.layerscale is not None
    sx, bx = 70, 205  # x of the stream and of the branches
    parts = []
    stream_col = _HI if highlight == "residual" else _STREAM
    y = 0.0  # drawn upwards from the stream's input at y = 0, shifted into view below
    for name, label in (("attention", "attention"), ("mlp", "MLP")):
        boxes = ([("layernorm", "LayerNorm")] if c.norm == "pre" else []) + [(name, label)]
        boxes += [("layerscale", "× λ")] if ls else []
        y_split = y - 12
        centres = [y_split - 34 - 36 * k for k in range(len(boxes))]
        y_join = centres[-1] - 34
        if not c.residual:  # no residual path: everything goes through the sublayer
            parts.append(_line([(sx, y + 10 if name == "attention" else y + 14), (sx, y_split)], arrow=False))
        parts.append(_line([(sx, y_split), (bx, y_split), (bx, centres[0] + 13)]))
        for k, ((kind, text), yc) in enumerate(zip(boxes, centres)):
            if k:
                parts.append(_line([(bx, centres[k - 1] - 13), (bx, yc + 13)]))
            parts.append(_box(bx, yc, 118, 26, text, hi=highlight == kind))
        end = (sx + 11, y_join) if c.residual else (sx, y_join)
        parts.append(_line([(bx, centres[-1] - 13), (bx, y_join), end], arrow=c.residual))
        if c.residual:
            parts.append(
                f"<circle cx='{sx}' cy='{y_join}' r='10' fill='white' stroke='{_INK}' stroke-width='1.4'/>"
                f"<text x='{sx}' y='{y_join + 5}' text-anchor='middle' font-size='16' fill='{_INK}'>+</text>"
            )
        y = y_join - 14
        if c.norm == "post":
            parts.append(_box(sx, y_join - 32, 96, 24, "LayerNorm", hi=highlight == "layernorm"))
            y = y_join - 50
    if not c.residual:
        parts.append(_line([(sx, y + 14), (sx, y - 6)]))
    top = y - 6
    shift = -top + 52  # the stream's output label and the title above it
    bottom = shift + 10
    segs = []
    if c.residual:
        segs.append(
            f"<line x1='{sx}' y1='{bottom}' x2='{sx}' y2='{top + shift}' stroke='{stream_col}' stroke-width='7' "
            "stroke-linecap='round' opacity='0.85'/>"
        )
    parts = [f"<g transform='translate(0,{shift})'>" + "".join(parts) + "</g>"]
    top += shift
    head = (
        "<defs><marker id='arr' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
        f"orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='{_INK}'/></marker></defs>"
    )
    kind = {"pre": "pre-norm", "post": "post-norm", "none": "no normalisation"}[c.norm]
    title = f"one block, {kind}" + (", LayerScale" if ls else "") + ("" if c.residual else ", no residual")
    labels = (
        f"<text x='{sx}' y='{bottom + 22}' text-anchor='middle' font-size='12' fill='{_INK}'>stream in</text>"
        f"<text x='{sx}' y='{top - 10}' text-anchor='middle' font-size='12' fill='{_INK}'>stream out</text>"
        f"<text x='150' y='16' text-anchor='middle' font-size='13' font-weight='bold' fill='{_INK}'>{title}</text>"
    )
    h = bottom + 30
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 300 {h}' width='300' height='{h}' "
        f"font-family='sans-serif'>{head}<rect x='0' y='0' width='300' height='{h}' fill='white'/>"
        + "".join(segs + parts)
        + labels
        + "</svg>"
    )
    return Diagram(svg, f"Diagram of {title}: the residual stream runs bottom to top, each sublayer branches off it")


def stack_diagram(cfg=None, highlight_blocks: Sequence[int] = ()) -> Diagram:
    """The whole model as its config builds it: token and position embeddings, ``n_layer`` blocks on
    the residual stream, the final LayerNorm (pre-norm only) and the tied output head."""
    from ..model.config import ANDREA_120M

    c = cfg or ANDREA_120M
    n = c.n_layer
    row, w = 24, 300
    items = [("embeddings (token + position)", False)]
    items += [(f"block {i + 1}", (i + 1) in highlight_blocks) for i in range(n)]
    if c.norm == "pre":
        items.append(("final LayerNorm", False))
    items.append(("output head (tied to the token embedding)", False))
    h = row * len(items) + 40
    parts = [
        f"<line x1='40' y1='{h - 14}' x2='40' y2='26' stroke='{_STREAM}' stroke-width='7' opacity='0.85' "
        "stroke-linecap='round'/>"
    ]
    for k, (text, hi) in enumerate(items):
        y = h - 28 - k * row
        fill = _HI if hi else _BOX
        parts.append(
            f"<rect x='62' y='{y - 9}' width='230' height='18' rx='4' fill='{fill}' stroke='{_INK}' "
            f"stroke-width='1'/><text x='177' y='{y + 4.5}' text-anchor='middle' font-size='12' "
            f"fill='{_INK}'>{text}</text><line x1='44' y1='{y}' x2='62' y2='{y}' stroke='{_INK}'/>"
        )
    parts.append(
        f"<text x='150' y='14' text-anchor='middle' font-size='13' font-weight='bold' fill='{_INK}'>"
        f"the {n}-block stack, bottom to top</text>"
    )
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {w} {h}' width='{w}' height='{h}' "
        f"font-family='sans-serif'><rect width='{w}' height='{h}' fill='white'/>" + "".join(parts) + "</svg>"
    )
    return Diagram(svg, f"Diagram of the {n}-block stack: embeddings, {n} blocks on the residual stream, the head")
