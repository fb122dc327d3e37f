"""The built site, opened in a real headless Chromium with the network blocked.

Needs _build/html (``make test`` builds it first) and Debian's chromium (``.ci/run`` installs it;
on a laptop: ``sudo apt-get install chromium``).
"""

import re
import sys
import time
from html import unescape
from html.parser import HTMLParser
from urllib.parse import unquote, urlparse

import pytest

from conftest import ROOT, SITE

sys.path.insert(0, str(ROOT / "tools"))
from pagemodel import Served, localhost_only, set_setting, wait_drawn  # noqa: E402


def site_pages():
    if not SITE.exists():
        return []
    return sorted(
        str(p.relative_to(SITE)) for p in list(SITE.glob("book/*.html")) + list(SITE.glob("notebooks/*.html"))
    )


@pytest.fixture(scope="module")
def server(site):
    with Served(site) as served:
        yield served.base


class Page:
    """A page opened with every non-localhost request blocked and recorded."""

    def __init__(self, browser, base, path, width: int = 1280):
        self.ctx = browser.new_context(viewport={"width": width, "height": 900})
        self.external, self.errors, self.failed = [], [], []
        self.ctx.route("**/*", localhost_only(base, self.external))
        self.page = self.ctx.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        self.page.goto(base + path, wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def close(self):
        self.ctx.close()


@pytest.mark.parametrize("path", site_pages() or ["book/intro.html"])
def test_page_offline_clean(browser, server, path):
    p = Page(browser, server, path)
    try:
        pg = p.page
        if pg.locator(".math").count() or pg.locator("div.math").count():
            pg.wait_for_function("document.querySelectorAll('mjx-container').length > 0", timeout=20000)
            assert pg.locator("mjx-container").count() >= pg.locator("span.math, div.math").count()
            assert pg.locator("mjx-merror").count() == 0
        imgs = pg.locator("main img")
        for i in range(imgs.count()):
            img = imgs.nth(i)
            assert (img.get_attribute("alt") or "").strip(), f"image without alt text: {img.get_attribute('src')}"
            assert img.evaluate("i => i.complete && i.naturalWidth > 0"), (
                f"image did not load: {img.get_attribute('src')}"
            )
        for el in pg.locator(".andrea-explorer").all():
            pg.wait_for_function("e => e.getAttribute('data-ready') === '1'", arg=el.element_handle(), timeout=20000)
        assert p.external == [], f"requests left localhost: {p.external}"
        assert p.failed == [], f"failed requests: {p.failed}"
        assert p.errors == [], f"console errors: {p.errors}"
    finally:
        p.close()


def test_chapter_figures_are_numbered_with_captions(site):
    for name in ("book/01_residual.html", "book/03_prenorm_postnorm.html", "book/07_layerscale.html"):
        html = (site / name).read_text()
        assert re.search(r'<span class="caption-number">Fig\. \d+\.\d+ </span>', html), name


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def test_every_internal_link_resolves(site):
    parsed = {}

    def parse(path):
        if path not in parsed:
            p = _Links()
            p.feed(path.read_text(errors="replace"))
            parsed[path] = p
        return parsed[path]

    broken = []
    pages = list(site.glob("*.html")) + list(site.glob("book/*.html")) + list(site.glob("notebooks/*.html"))
    for page in pages:
        for href in parse(page).links:
            u = urlparse(href)
            if u.scheme or href.startswith("mailto:") or href.startswith("javascript:"):
                continue
            target = page if not u.path else (page.parent / unquote(u.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {href}")
                continue
            if u.fragment and target.suffix == ".html" and u.fragment not in parse(target).ids:
                broken.append(f"{page.relative_to(site)} -> {href} (no such anchor)")
    assert broken == []


def test_search_works_offline(browser, server):
    p = Page(browser, server, "search.html?q=LayerNorm")
    try:
        p.page.wait_for_selector("#search-results li", timeout=20000)
        assert p.page.locator("#search-results li").count() >= 3
        assert p.external == []
    finally:
        p.close()


def _wait_for_text(pg, el_id, text):
    """Wait (up to 10 s) until the explorer's readout shows ``text``: Vega re-renders asynchronously."""
    pg.wait_for_function(
        """([id, text]) => [...document.getElementById(id).querySelectorAll('g.mark-text.role-mark text')]
                               .some(t => t.textContent.includes(text))""",
        arg=[el_id, text],
        timeout=10000,
    )


def _explorer_state(pg, el_id):
    return pg.evaluate(
        """id => {
        const el = document.getElementById(id);
        const lines = [...el.querySelectorAll('g.mark-line.role-mark path')].map(p => p.getAttribute('d'));
        const text = [...el.querySelectorAll('g.mark-text.role-mark text')].map(t => t.textContent).join(' ');
        const points = el.querySelectorAll('g.mark-symbol.role-mark path').length;
        return {lines, text, points};
    }""",
        el_id,
    )


def test_static_explorer_controls_change_the_plotted_data(browser, server):
    """Settings on the shipped grid are drawn from the shipped torch rows, at once."""
    from andrea.views.static_explorer import cached_grid_rows

    rows = cached_grid_rows()
    expected = {(r["lam"], r["depth"], r["norm"], r["res"]): r["ratio"] for r in rows if r["boundary"] == 0}
    expected.update({k[:3]: v for k, v in expected.items() if k[3] == "on"})
    p = Page(browser, server, "book/07_layerscale.html")
    try:
        pg = p.page
        el_id = "andrea-explorer-ch7"
        pg.wait_for_function(f"document.getElementById('{el_id}').getAttribute('data-ready') === '1'", timeout=20000)
        s0 = _explorer_state(pg, el_id)
        assert f"{expected[('1e-05', 24, 'pre')]:.3g}" in s0["text"]
        assert s0["points"] == 2 * (24 + 1)  # two panels, one point per boundary of the current setting

        set_setting(pg, el_id, loglam="off")
        assert wait_drawn(pg, el_id) == "shipped"
        s1 = _explorer_state(pg, el_id)
        assert s1["lines"] != s0["lines"], "moving the λ control did not change the plotted curves"
        assert f"{expected[('off', 24, 'pre')]:.3g}" in s1["text"]

        set_setting(pg, el_id, depth=8)
        assert wait_drawn(pg, el_id) == "shipped"
        s2 = _explorer_state(pg, el_id)
        assert s2["lines"] != s1["lines"], "moving the depth control did not change the plotted curves"
        assert s2["points"] == 2 * (8 + 1)
        assert f"{expected[('off', 8, 'pre')]:.3g}" in s2["text"]

        set_setting(pg, el_id, norm="post")
        assert wait_drawn(pg, el_id) == "shipped"
        s3 = _explorer_state(pg, el_id)
        assert s3["lines"] != s2["lines"]
        assert f"{expected[('off', 8, 'post')]:.3g}" in s3["text"]
        assert "measured in PyTorch when the book was built" in pg.inner_text(f"#{el_id} .andrea-explorer-provenance")

        # the residual switch and norm "none" (chapter 1 and lab 1 ask for both); a vanished
        # gradient reads as its status, not a number
        set_setting(pg, el_id, norm="none", res="off", depth=4)
        assert wait_drawn(pg, el_id) == "shipped"
        want = expected[("off", 4, "none", "off")]
        _wait_for_text(pg, el_id, f"{want:.3g}" if want else "VANISHED")
        s4 = _explorer_state(pg, el_id)
        assert s4["lines"] != s3["lines"] and s4["points"] == 2 * (4 + 1)
        assert p.errors == [] and p.external == []
    finally:
        p.close()


def _y_ticks(pg, el_id):
    """The tick labels of the explorer's y-axes (Vega names each axis group "Y-axis ..." for readers)."""
    return pg.evaluate(
        """id => [...document.getElementById(id).querySelectorAll('g.role-axis')]
            .filter(a => (a.getAttribute('aria-label') || '').startsWith('Y-axis'))
            .map(a => [...a.querySelectorAll('g.role-axis-label text')].map(t => t.textContent).join(' '))""",
        el_id,
    )


def _y_ticks_change(pg, el_id, before, timeout_s=10.0):
    """The y-axes' tick labels once they differ from ``before`` (Vega redraws asynchronously)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        now = _y_ticks(pg, el_id)
        if now != before:
            return now
        pg.wait_for_timeout(100)
    raise AssertionError(f"the y-axes did not change from {before}")


def test_the_explorers_y_axes_can_be_held_fixed(browser, server):
    """With the y-axes fixed, changing the setting leaves both axes where they are (the grid's range);
    fitted again, they follow the setting."""
    p = Page(browser, server, "book/07_layerscale.html")
    try:
        pg, el_id = p.page, "andrea-explorer-ch7"
        pg.wait_for_function(f"document.getElementById('{el_id}').getAttribute('data-ready') === '1'", timeout=20000)
        fitted = _y_ticks(pg, el_id)
        assert len(fitted) == 2 and all(fitted), fitted
        set_setting(pg, el_id, yfix="fixed")
        fixed = _y_ticks_change(pg, el_id, fitted)
        set_setting(pg, el_id, depth=1)  # one block: its values span far less than the grid's range
        assert wait_drawn(pg, el_id) == "shipped"
        pg.wait_for_timeout(300)
        assert _y_ticks(pg, el_id) == fixed, "the fixed y-axes moved with the setting"
        set_setting(pg, el_id, yfix="fit")  # the same setting, fitted: narrower axes
        _y_ticks_change(pg, el_id, fixed)
        assert p.errors == [] and p.external == []
    finally:
        p.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_explorers_readout_fits_the_screen(browser, server, width):
    """At 1280 px the readout names both ends of the ratio in full; on a phone (390 px) the page sets the
    chart's readout parameter to the short form (andrea.views.static_explorer.READOUT_SHORT)."""
    from andrea.views.static_explorer import READOUT, READOUT_SHORT

    p = Page(browser, server, "book/07_layerscale.html", width=width)
    try:
        pg, el_id = p.page, "andrea-explorer-ch7"
        pg.wait_for_function(f"document.getElementById('{el_id}').getAttribute('data-ready') === '1'", timeout=20000)
        text = _explorer_state(pg, el_id)["text"]
        assert (READOUT_SHORT if width < 640 else READOUT).strip() in text, text
        assert (READOUT if width < 640 else READOUT_SHORT).strip() not in text, text
    finally:
        p.close()


EXPLORER_PAGES = [
    ("book/01_residual.html", "andrea-explorer-ch1"),
    ("book/03_prenorm_postnorm.html", "andrea-explorer-ch3"),
    ("book/07_layerscale.html", "andrea-explorer-ch7"),
]


@pytest.mark.parametrize("path, el_id", EXPLORER_PAGES, ids=[p for p, _ in EXPLORER_PAGES])
def test_static_explorer_computes_settings_off_the_grid_in_the_page(browser, server, path, el_id):
    """λ₀ = 3.16e-5, depth 37, width 64, seed 3: on no grid, so the page's model measures it (in its
    Web Worker, the network blocked) and the chart redraws from that measurement."""
    p = Page(browser, server, path)
    try:
        pg = p.page
        pg.wait_for_function(f"document.getElementById('{el_id}').getAttribute('data-ready') === '1'", timeout=20000)
        pg.evaluate(_WATCH_LONG_TASKS)
        set_setting(pg, el_id, loglam=-4.5, depth=37, width=64, seed=3, norm="pre", res="on")
        assert pg.get_attribute(f"#{el_id}", "data-state") == "computing"
        assert "Computing" in pg.inner_text(f"#{el_id} .andrea-explorer-provenance")
        assert wait_drawn(pg, el_id) == "live", pg.inner_text(f"#{el_id} .andrea-explorer-provenance")
        assert pg.get_attribute(f"#{el_id}", "data-setting") == "3.16e-05|37|pre|on|64|3"
        s = _explorer_state(pg, el_id)
        assert s["points"] == 2 * (37 + 1)
        assert len(s["lines"]) == 4  # this setting and its reference, in both panels
        # what is drawn is what the page's model computed for this setting
        ratio = pg.evaluate(
            """id => window.andreaExplorers[id].data("rows").filter(r => r.lam === "3.16e-05" && r.depth === 37
                 && r.width === 64 && r.seed === 3 && r.boundary === 0)[0].ratio""",
            el_id,
        )
        shown = re.search(r"= ([0-9.e+-]+)×", s["text"])
        assert shown and float(shown.group(1)) == pytest.approx(ratio, rel=5e-3), s["text"]
        prov = pg.inner_text(f"#{el_id} .andrea-explorer-provenance")
        assert "computed in this page by TensorFlow.js" in prov and "WebAssembly backend" in prov
        # the computation ran off the main thread: TensorFlow.js never loaded there, and no task there
        # lasted as long as one of the computations did (both timed in this run, under the same load)
        assert pg.evaluate("() => typeof window.tf") == "undefined"
        compute = min(float(ms) for ms in re.findall(r"in (\d+) ms", prov))
        longest = pg.evaluate("() => Math.max(0, ...window.andreaLongTasks)")
        assert longest < compute, (
            f"the main thread was blocked for {longest:.0f} ms, one computation took {compute:.0f} ms"
        )
        # a bad seed is refused by name, and nothing is computed
        set_setting(pg, el_id, seed=20000)
        assert pg.get_attribute(f"#{el_id}", "data-state") == "error"
        assert 'seed must be a whole number from 0 to 10000, got "20000"' in pg.inner_text(
            f"#{el_id} .andrea-explorer-provenance"
        )
        assert p.external == [], f"requests left localhost: {p.external}"
        assert p.errors == [], f"console errors: {p.errors}"
    finally:
        p.close()


def test_attention_viewer_runs_on_the_built_site(browser, server):
    """Issue 33: the attention chapter's viewer computes a head's weights on the reader's own text in the
    page (the network blocked): typing redraws the map with the book's tokens, the main thread stays free."""
    from andrea.training.data import get_tokenizer

    p = Page(browser, server, "book/attention.html")
    try:
        pg = p.page
        el_id = pg.locator(".andrea-attention").first.get_attribute("id")
        drawn = "([id, n]) => { const e = document.getElementById(id); return e.getAttribute('data-state') === 'drawn'"
        pg.wait_for_function(drawn + " && e.getAttribute('data-tokens') !== n; }", arg=[el_id, ""], timeout=60000)
        assert pg.get_attribute(f"#{el_id}", "data-model") == "trained"
        pg.evaluate(_WATCH_LONG_TASKS)
        text = "for key in sorted(d): print(key, d[key])"
        n = len(get_tokenizer("bpe").encode(text))
        pg.fill(f"#{el_id} textarea", text)
        pg.wait_for_function(drawn + " && e.getAttribute('data-tokens') === n; }", arg=[el_id, str(n)], timeout=60000)
        assert pg.locator(f"#{el_id} rect[data-q]").count() == n * (n + 1) // 2  # causal: t sees 0..t
        longest = pg.evaluate("() => Math.max(0, ...window.andreaLongTasks)")
        assert longest < 250, f"the main thread was blocked for {longest:.0f} ms"
        assert p.external == [], f"requests left localhost: {p.external}"
        assert p.failed == [] and p.errors == [], (p.failed, p.errors)
    finally:
        p.close()


@pytest.mark.parametrize("path", ["book/03_prenorm_postnorm.html", "book/07_layerscale.html"])
def test_the_training_panel_trains_on_the_built_site(browser, server, path):
    """Issue 34: the chapter's "train it yourself" panel, on the built page (the network blocked), opens
    with torch's curves and its grid's verdict, and trains both runs in a Web Worker when its controls are
    driven (a short run: three steps of a one-block stack), off the main thread; Stop pauses a run and
    Resume goes on, Reset brings the defaults back, and a bad setting is refused by name."""
    p = Page(browser, server, path)
    try:
        pg = p.page
        pg.wait_for_selector(".andrea-train-go", timeout=20000)
        assert pg.locator(".andrea-train-chart path").count() == 2  # torch's two reference curves
        assert "which reads confirmed" in pg.text_content(".andrea-train ~ .andrea-explorer-note")
        # the |λ| chart takes room only once a run with LayerScale has trained (none has yet)
        assert not pg.locator(".andrea-train-lambda").is_visible()
        for run in "AB":
            for field, value in (("steps", 3), ("depth", 1), ("warmup", 1 if run == "B" else 0)):
                pg.locator(f"fieldset[data-run={run}] [name={field}]").fill(str(value))
        pg.click(".andrea-train-go")
        pg.wait_for_function(
            "() => document.querySelector('.andrea-train-status').textContent.includes('done')", timeout=120_000
        )
        for run in "AB":
            d = pg.get_attribute(f"path.andrea-train-curve[data-run={run}]", "d")
            assert d is not None and d.count("L") == 2, d  # three steps drawn
        assert "unigram level" in pg.text_content(".andrea-train-legend")  # named under the chart, not over it
        assert pg.evaluate("() => typeof window.tf") == "undefined"  # TensorFlow.js only in the worker
        # a long run stops between two steps and resumes; reset drops the curves and brings the defaults back
        pg.locator("fieldset[data-run=A] [name=steps]").fill("400")
        pg.locator("fieldset[data-run=B] [name=steps]").fill("400")
        pg.click(".andrea-train-go")
        pg.wait_for_function(
            "() => /A: step [1-9]/.test(document.querySelector('.andrea-train-status').textContent)", timeout=120_000
        )
        pg.click(".andrea-train-stop")
        pg.wait_for_timeout(500)
        before = pg.text_content(".andrea-train-status")
        pg.wait_for_timeout(1500)
        assert pg.text_content(".andrea-train-status") == before, "training went on after Stop"
        pg.click(".andrea-train-stop")  # Resume
        pg.wait_for_function(
            f"() => document.querySelector('.andrea-train-status').textContent !== {before!r}", timeout=60_000
        )
        pg.click(".andrea-train-reset")
        assert pg.locator("path.andrea-train-curve").count() == 0
        assert pg.input_value("fieldset[data-run=A] [name=depth]") != "1"  # the defaults are back
        # a bad setting is refused by name, and nothing trains
        pg.locator("fieldset[data-run=A] [name=lr]").fill("abc")
        pg.click(".andrea-train-go")
        assert 'run A: peak learning rate must be a number from 0.00001 to 0.03, got "abc"' in pg.text_content(
            ".andrea-train-status"
        )
        assert pg.locator("path.andrea-train-curve").count() == 0
        assert p.external == [], f"requests left localhost: {p.external}"
        assert p.failed == [] and p.errors == [], (p.failed, p.errors)
    finally:
        p.close()


# Watch the main thread's long tasks (over 50 ms) from the moment the page has settled: MathJax has
# typeset the page's mathematics and the fonts have loaded, work that runs on the main thread by design
# and that, on a loaded machine, can still be going on when the explorer is ready.
_WATCH_LONG_TASKS = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  await new Promise(ok => requestAnimationFrame(() => requestAnimationFrame(ok)));
  window.andreaLongTasks = [];
  new PerformanceObserver(l => l.getEntries().forEach(e => window.andreaLongTasks.push(e.duration)))
    .observe({type: "longtask", buffered: false});
}"""


def test_build_log_is_clean(site):
    log = (site.parent / "book-build.log").read_text()
    assert (site.parent / "book-build.ok").exists(), "the last build did not finish"
    sphinx_warnings = [line for line in log.splitlines() if "WARNING" in line and "IPKernelApp" not in line]
    assert sphinx_warnings == []
    assert "Executing notebook failed" not in log


def test_launch_buttons_open_notebooks_that_exist(site):
    """Binder opens the page's source (jupytext reads the .md chapters); Colab only opens .ipynb."""
    import yaml

    repo = yaml.safe_load((SITE.parents[1] / "_config.yml").read_text())["repository"]["url"].rstrip("/")
    gh = repo.replace("https://github.com/", "")
    root = SITE.parents[1]
    pages = list(site.glob("book/0*.html")) + list(site.glob("notebooks/*.html"))
    pages += [site / "book" / "attention.html", site / "book" / "checking.html"]
    assert pages
    for page in pages:
        html = page.read_text()
        colab = re.findall(
            r'href="https://colab\.research\.google\.com/github/' + re.escape(gh) + r'/blob/main/([^"]+)"', html
        )
        binder = re.findall(
            r'href="https://mybinder\.org/v2/gh/' + re.escape(gh) + r'/main\?urlpath=lab/tree/([^"]+)"', html
        )
        assert colab and binder, page.name
        for path in colab:
            assert path.endswith(".ipynb") and (root / path).is_file(), f"{page.name}: Colab link to {path}"
        for path in binder:
            assert (root / path).is_file(), f"{page.name}: Binder link to {path}"


def test_exercises_are_numbered_with_folded_solutions(browser, server, site):
    """Every chapter shows at least three numbered exercises; each solution starts folded and opens
    when the reader clicks it."""
    chapters = sorted(site.glob("book/0*.html"))
    assert len(chapters) == 8
    for page in chapters:
        html = page.read_text()
        n_ex = len(re.findall(r'<div class="exercise[^"]*admonition[^"]*"', html))
        n_sol = len(re.findall(r'<div class="solution[^"]*dropdown[^"]*"', html))
        assert n_ex >= 3, f"{page.name}: {n_ex} exercises"
        assert n_sol == n_ex, f"{page.name}: {n_ex} exercises but {n_sol} folded solutions"
        assert re.search(r"Exercise \d+\.\d+", html) or re.search(r"Exercise \d+", html), page.name
    p = Page(browser, server, "book/02_layernorm.html")
    try:
        pg = p.page
        sol = pg.locator("div.solution.dropdown").first
        body = sol.locator("p:not(.admonition-title)").first
        assert not body.is_visible(), "a solution is open before the reader asks for it"
        sol.locator(".admonition-title").click()
        body.wait_for(state="visible", timeout=5000)
        assert p.errors == []
    finally:
        p.close()


# ---------------------------------------------------------------------------------------------
# A student's reading: the evidence folded, tables that fit, prose without walls of statistics
# ---------------------------------------------------------------------------------------------
TRAINING_PAGES = {
    "book/evidence/01_residual_evidence.html": ["ch1_residual"],  # issue 47: the grid's evidence, shown open
    "book/evidence/02_layernorm_evidence.html": ["ch2_norm_lr", "ch2_final_ln", "ch2_source_arm", "ch2_held_lr"],
    "book/evidence/03_prenorm_postnorm_evidence.html": [  # shown open
        "ch3_warmup",
        "ch3_warmup_round2",
        "ch3_warmup_round3",
        "ch3_panel",
    ],
    "book/evidence/05_gelu_evidence.html": ["ch5_activation", "ch5_activation_round2", "ch5_activation_round3"],
    "book/evidence/07_layerscale_evidence.html": [
        "ch7_layerscale",
        "ch7_layerscale_round2",
        "ch7_layerscale_round3",
        "ch7_deep_80_round2",
        "ch7_deep_80",
    ],
    "book/papers.html": ["app_rezero", "app_layerscale_kind"],
}
_INTERVAL = re.compile(r"\[\s*[−+-]?\d[\d.e−+-]*\s*,\s*[−+-]?\d[\d.e−+-]*\s*\]")


class _Paragraphs(HTMLParser):
    """The text of every <p> in the article that is not inside a fold, a table or a figure."""

    def __init__(self):
        super().__init__()
        self.paragraphs, self._stack, self._p = [], [], None

    def handle_starttag(self, tag, attrs):
        self._stack.append(tag)
        if tag == "p" and not {"details", "table", "figure"} & set(self._stack[:-1]):
            self._p = []

    def handle_endtag(self, tag):
        while self._stack:
            if self._stack.pop() == tag:
                break
        if tag == "p" and self._p is not None:
            self.paragraphs.append("".join(self._p))
            self._p = None

    def handle_data(self, data):
        if self._p is not None:
            self._p.append(data)


@pytest.mark.parametrize("path", site_pages() or ["book/intro.html"])
def test_no_paragraph_carries_more_than_three_intervals(site, path):
    p = _Paragraphs()
    p.feed((site / path).read_text(errors="replace"))
    walls = [t[:120] for t in p.paragraphs if len(_INTERVAL.findall(t)) > 3]
    assert walls == [], f"{path}: paragraphs with more than three intervals (put them in a table or the fold): {walls}"


_RAW_MARKUP = re.compile(r"\*\*\S|\S\*\*|\{(?:term|doc|ref|glue:text|cite)\}`")


def _with_evidence() -> list[str]:
    """The site's pages and the evidence pages."""
    return site_pages() + (sorted(str(p.relative_to(SITE)) for p in SITE.glob("book/evidence/*.html")))


@pytest.mark.parametrize("path", _with_evidence() or ["book/intro.html"])
def test_no_paragraph_shows_unrendered_markup(site, path):
    """Markdown or MyST roles inside a glued string reach the page as text ("**confirmed**"): a glued
    sentence is plain text, and its emphasis or links belong in the page's own Markdown."""
    p = _Paragraphs()
    p.feed((site / path).read_text(errors="replace"))
    raw = [t[:120] for t in p.paragraphs if _RAW_MARKUP.search(t)]
    assert raw == [], f"{path}: paragraphs that show Markdown or MyST markup as text: {raw}"


def test_the_unrendered_markup_check_can_fail():
    assert _RAW_MARKUP.search("from round 3: **confirmed**.") and _RAW_MARKUP.search("see {term}`nats` here")
    assert not _RAW_MARKUP.search("2 ** 8 = 256 and a * b")


@pytest.mark.parametrize("path", site_pages() or ["book/intro.html"])
def test_no_table_repeats_its_header_in_its_body(site, path):
    """A table whose rows print the column names (a row given in a form the table did not read) is broken."""
    html = (site / path).read_text(errors="replace")
    for table in re.findall(r"<table[^>]*>(.*?)</table>", html, re.S):
        head = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
        body = table.split("</thead>", 1)[-1]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
            cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            assert not head or cells != head, f"{path}: a table's row repeats its header {head}"


_BOOKKEEPING = re.compile(r"\b(glue|show_source|evidence|ClaimsTable|Claim)\(|\bverdict\b")
_HIDDEN_INPUT = ("tag_hide-input", "tag_hide-cell", "tag_remove-input", "tag_remove-cell")


def _visible_code(html: str) -> list[str]:
    """The code of every cell whose input a reader sees without opening a toggle."""
    out = []
    starts = [m for m in re.finditer(r'<div class="(cell(?: [^"]*)?)"', html)]
    for i, m in enumerate(starts):
        classes = m.group(1).split()
        if classes[0] != "cell" or any(t in classes for t in _HIDDEN_INPUT):
            continue
        end = starts[i + 1].start() if i + 1 < len(starts) else len(html)
        block = html[m.end() : end]
        inp = re.search(r'<div class="cell_input[^"]*">(.*?)</pre>', block, re.S)
        if inp:
            out.append(unescape(re.sub(r"<[^>]+>", "", inp.group(1))))
    return out


@pytest.mark.parametrize("path", site_pages() or ["book/intro.html"])
def test_no_visible_code_calls_the_books_bookkeeping(site, path):
    """Issue 33: code a student sees is what they would type to explore; gluing values into the prose,
    deciding verdicts and listing the package's source happen in cells behind a toggle."""
    code = _visible_code((site / path).read_text(errors="replace"))
    bad = [c.strip().splitlines()[0][:80] for c in code if _BOOKKEEPING.search(c)]
    assert bad == [], f"{path}: visible code cells call the bookkeeping helpers: {bad}"


_STAT_TERMS = re.compile(r"\b(intervals?|Holm|Fisher|TOST|calibrations?|nats|KL|inconclusive)\b", re.I)
_NOT_STUDENT_PAGES = ("book/checking.html", "book/notation.html", "book/references.html", "book/sources.html")


def _outside_folds(html: str) -> str:
    """The page's article with its folds (<details>), code, scripts and styles taken out."""
    body = html[html.find("<article") :] if "<article" in html else html
    for tag in ("script", "style"):
        body = re.sub(rf"<{tag}\b.*?</{tag}>", " ", body, flags=re.S)
    while True:  # innermost folds first, so that nested ones go too
        cut = re.sub(r"<details\b(?:(?!<details\b).)*?</details>", " ", body, flags=re.S)
        if cut == body:
            break
        body = cut
    return re.sub(r'<div class="cell_input.*?</pre>', " ", body, flags=re.S)


@pytest.mark.parametrize("path", [p for p in site_pages() if p not in _NOT_STUDENT_PAGES] or ["book/intro.html"])
def test_no_statistics_word_before_the_page_links_to_the_primer(site, path):
    """Issue 33: a student meets interval, Holm, calibration, nats ... only after the page has pointed
    to "How this book checks a claim" (the folds, for readers who open them, may use them freely)."""
    body = _outside_folds((site / path).read_text(errors="replace"))
    link = re.search(r'href="[^"]*checking\.html', body)
    before = unescape(re.sub(r"<[^>]+>", " ", body[: link.start() if link else len(body)]))
    words = sorted({m.group(0) for m in _STAT_TERMS.finditer(before)})
    assert words == [], f"{path}: {words} appear before the page links to the primer (book/checking.md)"


def test_the_visible_code_reader_sees_hidden_and_shown_cells():
    html = (
        '<div class="cell docutils container"><div class="cell_input docutils container"><pre>x = 1\n</pre></div></div>'
        '<div class="cell tag_hide-cell docutils container"><div class="cell_input docutils container">'
        "<pre>glue(&quot;a&quot;, 1)</pre></div></div>"
        '<div class="cell docutils container"><div class="cell_input docutils container">'
        "<pre><span>glue</span>(&quot;b&quot;, 2)</pre></div></div>"
    )
    code = _visible_code(html)
    assert code == ["x = 1\n", 'glue("b", 2)'] and [c for c in code if _BOOKKEEPING.search(c)] == ['glue("b", 2)']


@pytest.mark.parametrize("path", sorted(TRAINING_PAGES))
def test_training_verdicts_show_their_evidence_folded(site, path):
    """Each training verdict's page shows the declared rule's evidence in a fold, with its calibration
    and deciding regimes (issues 19 and 20): closed on a lesson, open on an evidence page (issue 47)."""
    html = (site / path).read_text(errors="replace")
    folds = re.findall(r"<details class=.andrea-evidence.(?: open)?>(.*?)</details>", html, re.S)
    assert len(folds) >= len(TRAINING_PAGES[path]), f"{path}: {len(folds)} evidence folds"
    for fold in folds:
        for words in ("Declared ", "calibration", "deciding regime", "Holm", "emulated CPU"):
            assert words in fold, f"{path}: an evidence fold lacks {words!r}"


def test_the_block_is_drawn_in_the_introduction_and_at_the_top_of_the_chapters(site):
    intro = (site / "book/intro.html").read_text()
    assert intro.count("<svg") >= 2 and "one block, pre-norm" in intro and "one block, post-norm" in intro
    for name in (
        "01_residual",
        "02_layernorm",
        "03_prenorm_postnorm",
        "04_mlp",
        "05_gelu",
        "06_stack",
        "07_layerscale",
        "08_trained",
    ):
        assert "class='andrea-diagram'" in (site / f"book/{name}.html").read_text(), name


@pytest.mark.parametrize("width", [1280, 390])
def test_pages_do_not_overflow_sideways(browser, server, width):
    """Tables, code and outputs fit the column or scroll inside their own box: the page itself never
    scrolls sideways, on a desktop or on a 390 px phone."""
    bad = []
    for path in site_pages():
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        pg = ctx.new_page()
        pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(server) else r.abort())
        pg.goto(server + path, wait_until="load")
        over = pg.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if over > 1:
            bad.append(f"{path}: {over} px")
        ctx.close()
    assert bad == [], f"pages wider than a {width} px window: {bad}"


def test_claims_tables_name_their_columns_for_a_reader(site):
    lesson = (site / "book/07_layerscale.html").read_text()
    assert "<th>The source says</th><th>We measured</th><th>Verdict</th></tr>" in lesson
    evidence = (site / "book/evidence/07_layerscale_evidence.html").read_text()
    assert "<th>The source says</th><th>We measured</th><th>Verdict</th><th>Why</th>" in evidence


@pytest.mark.parametrize("width", [1280, 390])
def test_claims_tables_are_cards_with_the_verdict_first_on_a_phone(browser, server, width):
    """Issue 33: on a phone (390 px) each claim is a card that starts with its verdict and fits the column
    (no sideways scrolling inside the table's box); on a desktop, the four columns in their order."""
    ctx, pg = _open(browser, server, "book/07_layerscale.html", width)
    try:
        rows = pg.evaluate(
            """() => [...document.querySelectorAll('table.claims-table tbody tr')].map(tr => {
                 const v = tr.querySelector('td.claims-verdict').getBoundingClientRect();
                 const c = tr.cells[0].getBoundingClientRect(), box = tr.closest('.andrea-evidence-scroll');
                 return {verdictFirst: v.bottom <= c.top + 1, sameLine: Math.abs(v.top - c.top) < 2,
                         scroll: box.scrollWidth - box.clientWidth,
                         label: getComputedStyle(tr.cells[0], '::before').content};
               })"""
        )
    finally:
        ctx.close()
    assert len(rows) >= 3
    if width == 390:
        assert all(r["verdictFirst"] and r["scroll"] <= 1 for r in rows), rows
        assert rows[0]["label"] == '"The source says"', rows[0]
    else:
        assert all(r["sameLine"] for r in rows), rows


def _figures(pg):
    """Every figure image of the page's content: the file the browser shows (a phone source on a phone),
    its path on the site, natural and shown width, the width of its box, how far that box scrolls
    sideways, and whether it has a phone source."""
    return pg.evaluate(
        """() => [...document.querySelectorAll('main div.cell_output img, main figure img')]
            .filter(i => i.src.endsWith('.png'))
            .map(i => { const box = i.closest('figure') || i.closest('div.cell_output');
                        return {src: new URL(i.currentSrc || i.src).pathname, natural: i.naturalWidth,
                                shown: i.getBoundingClientRect().width, column: box.clientWidth,
                                scroll: box.scrollWidth - box.clientWidth,
                                phone: !!i.closest('picture')}; })"""
    )


def _open(browser, server, path, width, dark=False):
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme="dark" if dark else "light")
    pg = ctx.new_page()
    pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(server) else r.abort())
    pg.goto(server + path, wait_until="load")
    if dark:
        pg.evaluate("document.documentElement.dataset.theme = 'dark'")
    return ctx, pg


@pytest.mark.parametrize("width", [1280, 390])
def test_figure_text_is_at_least_min_font_px_as_shown(site, browser, server, width):
    """Every figure's smallest text (recorded in the PNG by andrea.views.figure_png.book_png), at the size
    the page shows the figure: at least legibility.MIN_FONT_PX on a desktop and on a phone."""
    from andrea.views.figure_png import png_audit
    from andrea.views.legibility import MIN_FONT_PX

    small, unaudited, n = [], [], 0
    for path in site_pages():
        ctx, pg = _open(browser, server, path, width)
        for f in _figures(pg):
            n += 1
            audit = png_audit((site / unquote(f["src"]).lstrip("/")).read_bytes())
            if not audit:
                unaudited.append(f"{path}: {f['src']}")
                continue
            shown = float(audit["andrea:min-font-px"]) * f["shown"] / f["natural"]
            if shown < MIN_FONT_PX - 0.05:
                small.append(f"{path}: {f['src'][-20:]} {shown:.1f} px")
        ctx.close()
    assert n > 20, f"only {n} figures found"
    assert unaudited == [], f"figures not drawn through andrea.views.figure_png.book_png: {unaudited}"
    assert small == [], f"figure text below {MIN_FONT_PX} px at {width} px: {small}"


def test_on_a_phone_every_figures_narrowest_plotted_area_is_at_least_min_plot_px_as_shown(site, browser, server):
    """Issue 47: "no plotted area narrower than 200 px at 390 px". Each figure's narrowest panel (recorded in
    the PNG by andrea.views.figure_png.book_png / phone.phone_png, andrea:min-plot-px), at the size the page
    shows the figure on a phone, is at least legibility.MIN_PLOT_PX wide (Fig 4.2's bars were a 10 px strip)."""
    from andrea.views.figure_png import png_audit
    from andrea.views.legibility import MIN_PLOT_PX

    narrow, unaudited, n = [], [], 0
    for path in site_pages():
        ctx, pg = _open(browser, server, path, 390)
        for f in _figures(pg):
            n += 1
            audit = png_audit((site / unquote(f["src"]).lstrip("/")).read_bytes())
            if "andrea:min-plot-px" not in audit:
                unaudited.append(f"{path}: {f['src'][-24:]}")
                continue
            shown = float(audit["andrea:min-plot-px"]) * f["shown"] / f["natural"]
            if shown < MIN_PLOT_PX:
                narrow.append(f"{path}: {f['src'][-24:]} {shown:.0f} px")
        ctx.close()
    assert n > 20, f"only {n} figures found"
    assert unaudited == [], f"figures without andrea:min-plot-px (drawn before it was recorded): {unaudited}"
    assert narrow == [], f"plotted areas narrower than {MIN_PLOT_PX:.0f} px at 390 px: {narrow}"


def test_on_a_phone_every_figure_fits_the_column_without_sideways_scrolling(browser, server):
    """Issue 33: at 390 px each figure shows its phone rendering (panels stacked), no wider than the
    column, in a box that does not scroll sideways."""
    bad, n = [], 0
    for path in site_pages():
        ctx, pg = _open(browser, server, path, 390)
        for f in _figures(pg):
            n += 1
            if not f["phone"] or not f["src"].endswith(".phone.png"):
                bad.append(f"{path}: {f['src'][-24:]} has no phone rendering")
            elif f["shown"] > f["column"] + 1 or f["scroll"] > 1:
                bad.append(f"{path}: {f['src'][-24:]} {f['shown']:.0f} px in a {f['column']} px column")
        ctx.close()
    assert n > 20, f"only {n} figures found"
    assert bad == [], bad


def test_no_figure_legend_covers_its_data(site):
    """No legend is drawn over plotted points (andrea.views.legibility.legends_on_data, recorded in each
    PNG after book_png moved what it could to a free corner or outside the axes)."""
    import json

    from andrea.views.figure_png import png_audit

    bad, n = [], 0
    for png in sorted((site / "_images").glob("*.png")):
        audit = png_audit(png.read_bytes())
        if audit:
            n += 1
            if json.loads(audit["andrea:legend-on-data"]):
                bad.append(f"{png.name[:12]}: {audit['andrea:legend-on-data']}")
    assert n > 20, f"only {n} audited figures found"
    assert bad == [], f"legends over the data: {bad}"


def test_no_figure_draws_text_over_text(site):
    """No figure, desktop or phone rendering, draws a text over another: a label over a tick label, a
    note over a bar's value, a phone's x label over the provenance line (andrea.views.legibility
    .texts_collide, recorded in each PNG)."""
    import json

    from andrea.views.figure_png import png_audit

    bad, n = [], 0
    for png in sorted((site / "_images").glob("*.png")):
        audit = png_audit(png.read_bytes())
        if audit:
            n += 1
            for c in json.loads(audit["andrea:text-collisions"]):
                bad.append(f"{png.name[:12]}{'.phone' if png.name.endswith('.phone.png') else ''}: {c}")
    assert n > 40, f"only {n} audited figures found"
    assert bad == [], f"texts drawn over each other: {bad}"


def test_figure_lines_are_told_apart(site):
    """No figure has two named lines of one axis in the same colour and style, or several kinds
    of line with nothing to name them (andrea.views.legibility.same_look, recorded in each PNG)."""
    import json

    from andrea.views.figure_png import png_audit

    bad = []
    for png in sorted((site / "_images").glob("*.png")):
        audit = png_audit(png.read_bytes())
        if audit and json.loads(audit["andrea:same-look"]):
            bad.append(f"{png.name[:12]}: {audit['andrea:same-look']}")
    assert bad == [], f"lines a reader cannot tell apart: {bad}"


def _contrast(fg, bg):
    def lum(c):
        def ch(v):
            v /= 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        r, g, b = c[:3]
        return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b)

    hi, lo = sorted([lum(fg), lum(bg)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


_COLOURS = """sel => [...document.querySelectorAll(sel)].slice(0, 6).map(e => {
    const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
    let bg = e, c = [0, 0, 0, 0];
    while (bg && (c.length < 3 || (c.length === 4 && c[3] === 0))) {
        c = rgb(getComputedStyle(bg).backgroundColor); bg = bg.parentElement; }
    return {fg: rgb(getComputedStyle(e).color), bg: c.length >= 3 ? c : [255, 255, 255]};
})"""


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_captions_have_text_contrast(browser, server, dark):
    """Figure captions and the explorer's note: at least 4.5:1 against what is behind them, in
    the light and the dark theme (WCAG AA for body text)."""
    low = []
    for path in ("book/01_residual.html", "book/07_layerscale.html", "book/03_prenorm_postnorm.html"):
        ctx, pg = _open(browser, server, path, 1280, dark)
        pairs = pg.evaluate(_COLOURS, "figcaption p, .andrea-explorer-note")
        assert pairs, f"{path}: no captions found"
        low += [f"{path}: {_contrast(p['fg'], p['bg']):.1f}:1" for p in pairs if _contrast(p["fg"], p["bg"]) < 4.5]
        if dark:
            filt = pg.evaluate("getComputedStyle(document.querySelector('figure img')).filter")
            assert filt == "none", f"{path}: figures dimmed in dark mode ({filt})"
        ctx.close()
    assert low == [], f"captions below 4.5:1: {low}"


def test_code_fits_the_column_and_outputs_wrap(browser, server):
    """At 1280 px every code cell (hidden ones opened), every output, every claims or evidence
    table and every display formula fits its box: nothing to scroll sideways in the text column."""
    wide = []
    for path in site_pages():
        ctx, pg = _open(browser, server, path, 1280)
        pg.evaluate("window.MathJax && MathJax.startup && MathJax.startup.promise")  # formulas typeset
        pg.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        wide += pg.evaluate(
            """p => [...document.querySelectorAll('main div.cell_input pre, main div.cell_output pre, '
                + 'main .andrea-evidence-scroll, main mjx-container[display="true"]')]
                .filter(e => e.offsetParent && e.scrollWidth > e.clientWidth + 1)
                .map(e => p + ': ' + e.textContent.split('\\n').sort((a, b) => b.length - a.length)[0]
                     .slice(0, 60) + ' (' + (e.scrollWidth - e.clientWidth) + ' px)')""",
            path,
        )
        ctx.close()
    assert wide == [], f"code or output wider than the column at 1280 px: {wide}"


def test_lab_two_shows_its_closing_figure(site):
    """Lab 2's questions read its last figure: gradient flow, trained vs untrained."""
    html = (site / "notebooks/lab2_training.html").read_text()
    part = html[html.index('<section id="gradient-flow-trained-vs-untrained"') :]
    part = part[: part.index("Questions")]
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", part)) == 1


_CODE_OR_TEX = re.compile(r"\w_\w|\|\||\^\{|\[[-+−]?\d[^\]]*,\s*[-+−]?\d")


@pytest.mark.parametrize("path", site_pages() or ["book/intro.html"])
def test_claims_tables_speak_words_not_code(site, path):
    """A claims table's cells (outside the folded 'the numbers') carry no code names, raw TeX or
    intervals: those sit in the fold and in the evidence."""
    import html as H

    page = (site / path).read_text(errors="replace")
    bad = []
    for table in re.findall(r"<table class='claims-table.*?</table>", page, re.S):
        for cell in re.findall(r"<td>(.*?)</td>", table, re.S):
            text = H.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<details.*?</details>", "", cell, flags=re.S)))
            if _CODE_OR_TEX.search(text):
                bad.append(text[:100])
    assert bad == [], f"{path}: claims-table cells with code, TeX or intervals: {bad}"


def _arm(label: str) -> str:
    """An arm's name as the book's figures spell it in either chapter ('pre-LN' = 'pre-norm')."""
    return re.sub(r"\b(pre|post)-LN\b", r"\1-norm", label.split(" (")[0]).strip()


def test_an_arm_has_one_colour_everywhere(site):
    """One palette mapping: a named line (an arm such as 'pre-norm, Xavier') is drawn in the same
    colour in every figure of the book that names it."""
    import json
    from collections import defaultdict

    from andrea.views.figure_png import png_audit

    seen = defaultdict(set)
    for png in sorted((site / "_images").glob("*.png")):
        for label, colour in json.loads(png_audit(png.read_bytes()).get("andrea:colours", "{}")).items():
            if "norm" in label or "LN" in label:  # the arms compared across chapters
                seen[_arm(label)].add(colour)
    assert seen, "no named norm arms found in the figures"
    mixed = {arm: sorted(c) for arm, c in seen.items() if len(c) > 1}
    assert mixed == {}, f"arms drawn in different colours in different figures: {mixed}"
