"""Issue 47: the built site's layout, checked for classes of defect on every page at 1280 and 390 px.

- no table cell whose text runs out of the cell (over its neighbour);
- on a phone, no word broken mid-word in prose or a table;
- a table wider than its column says that it scrolls;
- a displayed formula wider than its column is never clipped: it scrolls in its box, which says so;
- no plotted area (an explorer's panel, a training chart, a figure) narrower than 200 px;
- no text under 10 px as shown: the page's own text, and the text inside the explorers' and the
  training panels' charts (figures drawn as PNG are checked from their audit in tests/test_site.py);
- no chart (the explorers' Vega SVG, the training panels' SVG charts), chart text or line of text cut
  off at the side by a box that clips it without saying that it scrolls, or by the window.

Each page is opened once per width and audited in the browser; the tests read that audit. The same
audit runs without a built site on chapter 7's explorer in a book-like column (tools/pagemodel.Site),
opened at a phone's or a desktop's width or resized to it, along with its log axes' tick labels.
"""

from __future__ import annotations

import re
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
  const out = {cells: [], words: [], scroll: [], maths: [], plots: [], text: [], clipped: []};
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

  // 6. charts and lines of text cut off at the side: the box of a chart (an explorer's Vega SVG or
  // canvas, a training panel's SVG chart), of a chart's SVG text, or of a line of HTML text, that runs
  // past the window or past the visible box of an ancestor that clips it (overflow hidden or clip, or
  // auto or scroll where neither it nor a box around it says that it scrolls: 'andrea-scrolls'). Code blocks scroll
  // as code does everywhere, formulas are 3b's, and a box 2 px wide or less is a screen reader's.
  const view = document.documentElement.clientWidth;
  const clip = e => {  // [left, right] of what can be seen of e's box, however its boxes are scrolled
    let lo = -Infinity, hi = Infinity;
    for (let a = e.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'visible') continue;
      // a box that says it scrolls: what lies in it is seen by scrolling it, wherever the window is
      if (['auto', 'scroll'].includes(ox) && a.closest('.andrea-scrolls')) return [lo, hi];
      if (a.clientWidth <= 2) return null;
      const left = a.getBoundingClientRect().left + a.clientLeft;
      lo = Math.max(lo, left); hi = Math.min(hi, left + a.clientWidth);
    }
    return [Math.max(lo, 0), Math.min(hi, view)];
  };
  const cutBy = (r, e) => {
    const box = clip(e);
    return box ? Math.max(r.right - box[1], box[0] - r.left) : 0;
  };
  const charts = '.vega-embed svg, .vega-embed canvas, svg.andrea-train-chart, svg.andrea-train-lambda';
  for (const c of main.querySelectorAll(charts)) {
    if (!shown(c)) continue;
    const by = cutBy(c.getBoundingClientRect(), c);
    const what = `${c.tagName.toLowerCase()}.${c.getAttribute('class') || ''}`;
    if (by > 1) out.clipped.push(`a chart (${what}) cut by ${Math.round(by)} px`);
    for (const t of c.querySelectorAll('text')) {
      const r = t.getBoundingClientRect(), tb = r.width > 0 ? cutBy(r, t) : 0;
      if (tb > 1) out.clipped.push(`chart text "${name(t)}" cut by ${Math.round(tb)} px`);
    }
  }
  const noLines = 'pre, code, .highlight, mjx-container, .MathJax, script, style, svg, select, option, textarea';
  const walker3 = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker3.nextNode(); node; node = walker3.nextNode()) {
    const el = node.parentElement;
    if (!el || !node.textContent.trim() || el.closest(noLines) || !shown(el)) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;  // e.g. a closed drawer
    const range = document.createRange();
    range.selectNodeContents(node);
    const by = Math.max(0, ...[...range.getClientRects()].filter(r => r.width > 0).map(r => cutBy(r, el)));
    if (by > 1) out.clipped.push(`a line of "${name(el)}" cut by ${Math.round(by)} px`);
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


@pytest.mark.parametrize("width", WIDTHS)
def test_no_chart_or_line_of_text_is_cut_off(audits, width):
    bad = _found(audits, width, "clipped")
    assert bad == [], f"{len(bad)} charts or lines of text cut off at the side at {width} px: {bad[:20]}"


# The same audit without a built site: chapter 7's explorer in a column like the book's (tools/pagemodel.Site).
EXPLORER = "andrea-explorer-bench"


@pytest.fixture(scope="module")
def explorer_site():
    from conftest import need

    need((ROOT / "book/_static/vendor/vega.min.js").exists(), "the vendored Vega and TensorFlow.js (make vendor)")
    sys.path.insert(0, str(ROOT / "tools"))
    from pagemodel import Site

    with Site() as served:
        yield served


def _explorer_ready(page) -> None:
    page.wait_for_function(f"document.getElementById('{EXPLORER}').getAttribute('data-ready') === '1'", timeout=30000)
    page.wait_for_timeout(300)


def _settled(page) -> None:
    """After the window changed width: the chart redrawn for it (or, if the page never redraws, as it is)."""
    page.wait_for_timeout(600)
    page.wait_for_function(
        f"document.getElementById('{EXPLORER}').getAttribute('data-relayout') !== 'drawing'", timeout=30000
    )
    page.wait_for_timeout(300)


def _readout(page) -> str:
    return page.evaluate(
        f"""() => [...document.querySelectorAll('#{EXPLORER} g.mark-text.role-mark text')]
                   .map(t => t.textContent).filter(t => t.includes('×')).join(' | ')"""
    )


@pytest.mark.parametrize("opened", ["at this width", "at the other width, then resized"])
@pytest.mark.parametrize("width", (320, *WIDTHS))
def test_the_explorer_shows_both_charts_and_its_readout_at_any_width(explorer_site, browser, width, opened):
    """Nothing of the explorer is cut off in a phone's column or a desktop's, whether the page opened at
    that width or the window changed to it afterwards (a phone turned, a window narrowed); at 390 px and
    up each plotted area is at least 200 px wide. At 320 px the readout is wrapped to fit."""
    other = 1280 if width < 700 else 390
    page = explorer_site.open(browser, "book/explorer-column.html", width=width if opened == "at this width" else other)
    try:
        _explorer_ready(page)
        if opened != "at this width":
            page.set_viewport_size({"width": width, "height": 900})
            _settled(page)
        found = page.evaluate(AUDIT)
        assert "×" in _readout(page), "the readout (the gradient ratio) is not drawn"
        assert found["clipped"] == [], f"cut off at {width} px ({opened}): {found['clipped']}"
        if width >= 390:
            assert found["plots"] == [], f"plots narrower than {MIN_PLOT_PX:.0f} px at {width} px: {found['plots']}"
        assert page.errors == [] and page.external == []
    finally:
        page.context.close()


TICK = re.compile(r"^[125](e-?\d+)?$")  # the book's one format: the training panel's λ chart labels it so


def _y_tick_labels(page) -> list[list[str]]:
    """Each y-axis's drawn tick labels (Vega names an axis group "Y-axis ..." for screen readers)."""
    return page.evaluate(
        f"""() => [...document.querySelectorAll('#{EXPLORER} g.role-axis')]
            .filter(a => (a.getAttribute('aria-label') || '').startsWith('Y-axis'))
            .map(a => [...a.querySelectorAll('g.role-axis-label text')].map(t => t.textContent.trim())
                            .filter(Boolean))"""
    )


def test_the_explorers_log_axes_label_decades_only(explorer_site, browser):
    """Driving the controls through settings whose y-axes span one to forty decades, every drawn tick
    label is 1, 2 or 5 times a power of ten, in one format; an axis over several decades labels its
    decades only, and an axis over a single decade its two ends and 2 and 5 between them (both kinds are
    met); and the labels follow the setting."""
    sys.path.insert(0, str(ROOT / "tools"))
    from pagemodel import set_setting, wait_drawn

    page = explorer_site.open(browser, "book/explorer-column.html", width=1280)
    try:
        _explorer_ready(page)
        seen, kinds = [], set()
        settings = [{}, {"loglam": "off", "depth": 1}, {"depth": 48, "res": "off"}, {"depth": 96, "norm": "post"}]
        for change in settings:
            if change:
                set_setting(page, EXPLORER, **change)
                assert wait_drawn(page, EXPLORER) == "shipped"
                page.wait_for_timeout(400)
            axes = _y_tick_labels(page)
            assert len(axes) == 2 and all(axes), f"{change}: no tick labels drawn: {axes}"
            for labels in axes:
                bad = [t for t in labels if not TICK.match(t)]
                assert bad == [], f"{change}: tick labels not in the book's format: {bad} (of {labels})"
                decades = [t for t in labels if t[0] == "1"]
                if len(decades) >= 3:
                    assert labels == decades, f"{change}: minor ticks labelled beside {len(decades)} decades: {labels}"
                    kinds.add("decades only")
                elif len(decades) == 2:
                    assert {t[0] for t in labels} == {"1", "2", "5"}, f"{change}: a single decade, unread: {labels}"
                    kinds.add("one decade, with 2 and 5")
            seen.append(axes)
        assert len({str(a) for a in seen}) > 1, f"the tick labels never changed with the setting: {seen}"
        assert kinds == {"decades only", "one decade, with 2 and 5"}, f"axes met: {kinds} ({seen})"
        assert page.errors == [] and page.external == []
    finally:
        page.context.close()


def test_a_setting_computed_in_the_page_is_still_drawn_after_the_window_narrows(explorer_site, browser):
    """The chart drawn again for a phone's column keeps the rows the page's model measured: the same
    readout, both curves in both panels."""
    sys.path.insert(0, str(ROOT / "tools"))
    from pagemodel import set_setting, wait_drawn

    page = explorer_site.open(browser, "book/explorer-column.html", width=1280)
    try:
        _explorer_ready(page)
        set_setting(page, EXPLORER, depth=5, seed=2)
        assert wait_drawn(page, EXPLORER) == "live", page.inner_text(f"#{EXPLORER} .andrea-explorer-provenance")
        page.wait_for_timeout(300)
        before = _readout(page)
        ratio = re.search(r"= ([0-9.e+-]+)×", before)
        assert ratio, before
        assert page.get_attribute(f"#{EXPLORER}", "data-layout") == "wide"
        page.set_viewport_size({"width": 390, "height": 900})
        page.wait_for_function(f"document.getElementById('{EXPLORER}').getAttribute('data-layout') === 'narrow'")
        _settled(page)
        after = _readout(page)
        assert f"= {ratio.group(1)}×" in after, (before, after)
        lines = page.locator(f"#{EXPLORER} g.mark-line.role-mark path").count()
        assert lines == 4, f"{lines} curves drawn after the relayout (this setting and its reference, twice)"
        assert page.evaluate(AUDIT)["clipped"] == []
        assert page.errors == [] and page.external == []
    finally:
        page.context.close()
