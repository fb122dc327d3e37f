"""Lab 1 in a real JupyterLab, in headless Chromium: run all cells, then drive the explorer with real
mouse and keyboard events, as a reader would. Also: a saved and reopened lab shows a note, not an
error, where the live widget was; and nothing (server, kernel) is left running afterwards."""

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import ROOT, need

sys.path.insert(0, str(ROOT / "tools"))
import labui  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session():
    need(Path(labui.CHROMIUM).exists(), f"{labui.CHROMIUM} (install it: sudo apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "playwright for Python (pip install playwright; never 'playwright install')")
    with labui.JupyterLab() as lab, sync_playwright() as p:
        browser = labui.launch_browser(p)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        external = []

        def route(r):  # JupyterLab may not reach anything but its own server
            if r.request.url.startswith(lab.base) or r.request.url.startswith(("data:", "blob:")):
                r.continue_()
            else:
                external.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page = ctx.new_page()
        ui = labui.Lab1(page, lab)
        ui.open_and_run_all()
        page.locator(labui.Lab1.EXPLORER).first.scroll_into_view_if_needed()
        yield lab, page, ui, external
        browser.close()
        pids = [lab.proc.pid]
    for pid in pids:  # the server and its kernels are gone
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


def _state(ui):
    return ui.image_src(), ui.readout()


def test_run_all_has_no_errors(session):
    lab, page, ui, external = session
    assert ui.error_outputs() == []
    assert ui.image_src().startswith("blob:") or ui.image_src().startswith("data:")
    assert "gradient RMS at the embeddings" in ui.readout()
    assert external == [], f"requests left the server: {external[:5]}"


def test_depth_slider_keyboard_and_mouse(session):
    lab, page, ui, _ = session
    src0, text0 = _state(ui)
    d0 = int(ui.slider_value(1))
    ui.press_on_slider(1, "ArrowRight")
    assert int(ui.slider_value(1)) == d0 + 1
    src1, text1 = _state(ui)
    assert src1 != src0 and text1 != text0
    ui.drag_slider_to(1, 0.9)  # a real drag with the mouse, released far to the right
    d2 = int(ui.slider_value(1))
    assert d2 > d0 + 40
    src2, text2 = _state(ui)
    assert src2 != src1 and text2 != text1


def test_norm_toggle_with_the_mouse(session):
    lab, page, ui, _ = session
    src0, text0 = _state(ui)
    ui.click_toggle("post")
    src1, text1 = _state(ui)
    assert src1 != src0 and text1 != text0
    ui.click_toggle("pre")
    assert ui.image_src() != src1


def test_lambda_slider_keyboard(session):
    lab, page, ui, _ = session
    assert ui.slider_value(0) == "off"
    src0, text0 = _state(ui)
    ui.press_on_slider(0, "ArrowRight")
    assert ui.slider_value(0) == "1e-06"
    src1, text1 = _state(ui)
    assert src1 != src0 and text1 != text0


def test_static_chart_renders_natively_in_jupyterlab(session):
    lab, page, ui, _ = session
    chart = page.locator(".jp-RenderedVegaLite").first
    chart.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const c = document.querySelector('.jp-RenderedVegaLite');"
        " return c && c.querySelector('svg, canvas'); }",
        timeout=30_000,
    )
    assert "needs the book's JavaScript" not in page.content()
    assert chart.locator("select, input[type=radio]").count() >= 3  # its three bound controls


def test_no_console_errors(session):
    lab, page, ui, _ = session
    assert ui.console_errors == []


def test_norm_placement_label_sits_in_line_with_its_buttons(session):
    """Issue 13, item 6: the label is on the buttons' line, left of them, not on a line of its own."""
    lab, page, ui, _ = session
    label = ui.explorer().locator(".widget-label", has_text="norm placement").first.bounding_box()
    button = ui.explorer().locator("button.widget-toggle-button", has_text="pre").first.bounding_box()
    assert label and button
    centre = lambda b: b["y"] + b["height"] / 2  # noqa: E731
    assert abs(centre(label) - centre(button)) < 6, (label, button)
    assert label["x"] + label["width"] <= button["x"] + 1, (label, button)


def test_saved_and_reopened_lab_shows_a_note_not_an_error(session):
    lab, page, ui, _ = session
    page.locator(".jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    saved = lab.dir / "lab1_gradient_flow.ipynb"
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=20_000)
    nb = json.loads(saved.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert outputs, "the saved notebook has no outputs at all"
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert any("run this cell" in "".join(o.get("data", {}).get("text/plain", "")).lower() for o in outputs)
    page.reload(wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('.jp-OutputArea-output').length > 0", timeout=30_000)
    # JupyterLab renders a long notebook's cells lazily: scroll down until the explorer's cell shows
    page.wait_for_function(
        """phrase => {
            const nb = document.querySelector('.jp-Notebook');
            if (nb.innerText.includes(phrase)) return true;
            (nb.closest('.jp-WindowedPanel-outer') || nb.parentElement || nb).scrollBy(0, 400);
            return false;
        }""",
        arg="run this cell in a live kernel to start it",
        timeout=60_000,
        polling=250,
    )
    body = page.inner_text(".jp-Notebook")
    assert "Error displaying widget" not in body
