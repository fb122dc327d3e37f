"""Issue 47: the built site's layout, checked for classes of defect on every page at 1280 and 390 px.

- no table cell whose text runs out of the cell (over its neighbour);
- on a phone, no word broken mid-word in prose or a table;
- a table wider than its column says that it scrolls;
- a displayed formula wider than its column is never clipped: it scrolls in its box, which says so;
- no plotted area (an explorer's panel, a training chart, a figure) narrower than 200 px;
- no text under 10 px as shown: the page's own text, and the text inside the explorers' and the
  training panels' charts (figures drawn as PNG are checked from their audit in tests/test_site.py).

Each page is opened once per width and audited in the browser; the tests read that audit.
"""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT, SITE

WIDTHS = (1280, 390)
MIN_TEXT_PX = 10.0
MIN_PLOT_PX = 200.0

AUDIT = r"""
() => {
  const main = document.querySelector('main') || document.body;
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const name = e => (e.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 50);
  const out = {cells: [], words: [], scroll: [], maths: [], plots: [], text: []};
  const skip = 'pre, code, mjx-container, .MathJax, .highlight, script, style, svg, button, select, input';

  // 1. table cells whose content runs out of the cell
  for (const td of main.querySelectorAll('td, th')) {
    if (!shown(td)) continue;
    const cell = td.getBoundingClientRect(), range = document.createRange();
    range.selectNodeContents(td);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
    if (!rects.length) continue;
    const right = Math.max(...rects.map(r => r.right)), left = Math.min(...rects.map(r => r.left));
    const over = Math.max(right - cell.right, cell.left - left);
    if (over > 1) out.cells.push(`${name(td)} (by ${Math.round(over)} px)`);
  }

  // 2. words broken across lines (prose and tables)
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip) || !parent.closest('p, li, td, th, figcaption, caption, dd, dt')) continue;
    // an address or a path (a link's text such as owner/repository) may wrap at any point
    if (/https?:\/\/|www\./.test(node.textContent) || (parent.closest('a') && /\//.test(node.textContent))) continue;
    if (!shown(parent)) continue;
    for (const m of node.textContent.matchAll(/[A-Za-z0-9][\w'’.,-]*[A-Za-z0-9]/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top / 4)));
      if (tops.size > 1 && !/[-/.]/.test(m[0])) out.words.push(m[0]);
    }
  }

  // 3. tables wider than their column: the box scrolls, and says so
  for (const box of main.querySelectorAll('*')) {
    if (!box.querySelector('table') || !shown(box)) continue;
    const ox = getComputedStyle(box).overflowX;
    if (!['auto', 'scroll'].includes(ox) || box.scrollWidth <= box.clientWidth + 1) continue;
    if (box.parentElement && box.parentElement.closest('.andrea-scrolls')) continue;  // an outer box says it
    const hint = box.classList.contains('andrea-scrolls') &&
      [...box.parentElement.querySelectorAll('.andrea-scroll-hint')].some(h => shown(h));
    if (!hint) out.scroll.push(`${name(box.querySelector('table'))} (${box.scrollWidth} px in ${box.clientWidth})`);
  }

  // 3b. displayed formulas (MathJax) wider than their column: cut off unless the formula scrolls in a
  // box (itself or an ancestor) that is shaded and has a visible hint line above it
  const col = main.getBoundingClientRect();
  for (const m of main.querySelectorAll('mjx-container[display="true"]')) {
    if (!shown(m)) continue;
    let box = null;
    for (let e = m; e && e !== main; e = e.parentElement)
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) { box = e; break; }
    const inner = m.firstElementChild ? m.firstElementChild.getBoundingClientRect().width : 0;
    const width = Math.max(m.scrollWidth, inner), seen = box ? box.clientWidth : m.getBoundingClientRect().width;
    const off = m.getBoundingClientRect().right > Math.max(col.right, window.innerWidth) + 1;
    if (width <= seen + 1 && !off) continue;
    const hinted = box && box.scrollWidth > box.clientWidth + 1 && box.classList.contains('andrea-scrolls') &&
      [...box.parentElement.querySelectorAll('.andrea-scroll-hint')].some(h => shown(h));
    if (!hinted) out.maths.push(`${name(m)} (${Math.round(width)} px in ${Math.round(seen)})`);
  }

  // 4. plotted areas: the explorers' panels (Vega), the training charts, the figures
  for (const svg of main.querySelectorAll('.vega-embed svg')) {
    const cells = [...svg.querySelectorAll('g.mark-group.role-scope')]
      .filter(g => /(^|\s)(concat_\d+_group|cell)$/.test(g.getAttribute('class')));
    const frames = cells.length ? cells : [svg];
    for (const g of frames) {
      const bg = g === svg ? svg : g.querySelector(':scope > g > path.background');
      const w = bg ? bg.getBoundingClientRect().width : 0;
      if (bg && shown(bg) && w < MIN_PLOT) out.plots.push(`an explorer panel ${Math.round(w)} px wide`);
    }
  }
  for (const svg of main.querySelectorAll('svg.andrea-train-chart')) {
    const w = svg.getBoundingClientRect().width, vb = svg.viewBox.baseVal;
    const plot = vb && vb.width ? (vb.width - 64) * w / vb.width : w;
    if (shown(svg) && plot < MIN_PLOT) out.plots.push(`a training chart's plot ${Math.round(plot)} px wide`);
  }
  for (const img of main.querySelectorAll('figure img, div.cell_output img')) {
    if (shown(img) && img.getBoundingClientRect().width < MIN_PLOT && img.naturalWidth >= MIN_PLOT)
      out.plots.push(`a figure shown ${Math.round(img.getBoundingClientRect().width)} px wide`);
  }

  // 5. text under the minimum, as shown: HTML text, and the charts' SVG text at the size they are drawn
  const seen = new Set();
  const walker2 = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker2.nextNode(); node; node = walker2.nextNode()) {
    const el = node.parentElement;
    if (!el || !node.textContent.trim() || el.closest('mjx-container, .MathJax, script, style') || !shown(el)) continue;
    let px = parseFloat(getComputedStyle(el).fontSize);
    const svg = el.closest('svg');
    if (svg) {
      const vb = svg.viewBox && svg.viewBox.baseVal, w = svg.getBoundingClientRect().width;
      if (vb && vb.width) px *= w / vb.width;
    }
    if (px < MIN_TEXT - 0.05) {
      const key = `${el.tagName.toLowerCase()}.${(el.getAttribute('class') || '').split(' ')[0]}: ${name(el)}`;
      if (!seen.has(key)) { seen.add(key); out.text.push(`${key} (${px.toFixed(1)} px)`); }
    }
  }
  return out;
}
""".replace("MIN_PLOT", str(MIN_PLOT_PX)).replace("MIN_TEXT", str(MIN_TEXT_PX))


def site_pages() -> list[str]:
    if not SITE.exists():
        return []
    return sorted(
        str(p.relative_to(SITE))
        for p in [*SITE.glob("book/*.html"), *SITE.glob("book/evidence/*.html"), *SITE.glob("notebooks/*.html")]
    )


@pytest.fixture(scope="module")
def audits(site, browser):
    """{width: {page: the audit's findings}} for every page of the site, each opened once per width."""
    sys.path.insert(0, str(ROOT / "tools"))
    from pagemodel import Served

    out: dict = {}
    with Served(site) as served:
        for width in WIDTHS:
            out[width] = {}
            for path in site_pages():
                ctx = browser.new_context(viewport={"width": width, "height": 900})
                pg = ctx.new_page()
                pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(served.base) else r.abort())
                pg.goto(served.base + path, wait_until="load")
                pg.wait_for_load_state("networkidle")
                pg.wait_for_timeout(800)  # the explorers and panels draw after load
                out[width][path] = pg.evaluate(AUDIT)
                ctx.close()
    return out


def _found(audits, width: int, kind: str) -> list[str]:
    return [f"{page}: {x}" for page, found in audits[width].items() for x in found[kind]]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_table_cell_runs_over_its_neighbour(audits, width):
    bad = _found(audits, width, "cells")
    assert bad == [], f"{len(bad)} table cells whose text runs out of the cell at {width} px: {bad[:20]}"


def test_no_word_is_broken_mid_word_on_a_phone(audits):
    bad = _found(audits, 390, "words")
    assert bad == [], f"{len(bad)} words broken across lines at 390 px: {bad[:30]}"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_table_wider_than_the_column_says_it_scrolls(audits, width):
    bad = _found(audits, width, "scroll")
    assert bad == [], f"tables that scroll sideways without saying so at {width} px: {bad[:20]}"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_formula_wider_than_the_column_scrolls_and_says_so(audits, width):
    bad = _found(audits, width, "maths")
    assert bad == [], f"displayed formulas cut at the right edge (no hinted scroll) at {width} px: {bad[:20]}"


@pytest.mark.parametrize("width", WIDTHS)
def test_no_plotted_area_is_narrower_than_200_px(audits, width):
    bad = _found(audits, width, "plots")
    assert bad == [], f"plots narrower than {MIN_PLOT_PX:.0f} px at {width} px: {bad[:20]}"


@pytest.mark.parametrize("width", WIDTHS)
def test_no_text_is_smaller_than_10_px(audits, width):
    bad = _found(audits, width, "text")
    assert bad == [], f"{len(bad)} texts under {MIN_TEXT_PX:.0f} px at {width} px: {bad[:30]}"
