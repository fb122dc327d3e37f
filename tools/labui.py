"""Drive the labs in a real JupyterLab, in headless Chromium, as a reader would.

Used by tests/test_lab_ui.py (does the explorer work in JupyterLab?) and by `make bench`
(how long from releasing a control to the new image?):

    .venv/bin/python tools/labui.py --bench      # prints release-to-image times at depths 12, 48, 96

``JupyterLab`` starts the project's own JupyterLab on a free port, serving a temporary copy of
notebooks/ (so the repository's labs are never saved over), and stops it and every kernel on exit,
whatever happened. ``Lab1`` opens lab 1, runs all its cells and drives the explorer's controls with
real mouse and keyboard events.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """A JupyterLab server for one session (a context manager)."""

    def __init__(self, notebooks=("lab1_gradient_flow.ipynb",), timeout: float = 90):
        self.notebooks = notebooks
        self.timeout = timeout
        self.proc = None
        self.dir = None

    def __enter__(self) -> "JupyterLab":
        self.dir = Path(tempfile.mkdtemp(prefix="andrea-lab-"))
        for name in self.notebooks:
            shutil.copy(ROOT / "notebooks" / name, self.dir / name)
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(self.dir / "jupyterlab.log", "w")
        env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1")
        cmd = [
            str(ROOT / ".venv" / "bin" / "jupyter"),
            "lab",
            "--no-browser",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            f"--ServerApp.token={self.token}",
            f"--ServerApp.root_dir={self.dir}",
            f"--config={ROOT / 'tools' / 'jupyter_lab_config.py'}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--ServerApp.disable_check_xsrf=False",
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.dir, start_new_session=True
        )
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited ({self.proc.returncode}): {self.read_log()[-2000:]}")
            try:
                self.api("GET", "/api/status")
                return self
            except OSError:
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"JupyterLab did not answer within {self.timeout} s: {self.read_log()[-2000:]}")

    def api(self, method: str, path: str):
        req = urllib.request.Request(self.base + path, method=method, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def url(self, notebook: str) -> str:
        return f"{self.base}/lab/tree/{notebook}?token={self.token}&reset"

    def read_log(self) -> str:
        try:
            return (self.dir / "jupyterlab.log").read_text()
        except OSError:
            return ""

    def kernels(self) -> list:
        return self.api("GET", "/api/kernels") or []

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                for k in self.kernels():
                    self.api("DELETE", f"/api/kernels/{k['id']}")
                self.api("POST", "/api/shutdown")
                self.proc.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                pass
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
        try:  # kernels started by the server live in its process group: none may survive it
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, AttributeError, TypeError):
            pass
        if self.dir is not None:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


class Lab1:
    """Lab 1 open in a Chromium page: run it, then drive the explorer."""

    EXPLORER = ".jp-OutputArea-output .widget-vbox:has(.widget-image)"

    def __init__(self, page, lab: JupyterLab):
        self.page, self.lab = page, lab
        self.console_errors: list[str] = []
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console_errors.append(str(e)))

    def open_and_run_all(self, timeout_s: float = 300) -> None:
        pg = self.page
        pg.goto(self.lab.url("lab1_gradient_flow.ipynb"), wait_until="domcontentloaded")
        pg.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        # The kernel is ready when the status bar names it and says Idle.
        pg.wait_for_function(
            "() => [...document.querySelectorAll('.jp-StatusBar-TextItem, .jp-StatusBar-Item')]"
            ".some(e => /\\|\\s*Idle/.test(e.textContent))",
            timeout=90_000,
        )
        deadline = time.time() + timeout_s
        for attempt in range(3):
            # Run > Run All Cells, with the mouse, as a reader would. If the kernel's session is
            # still settling (it can restart once just after the page opens), some cells are left
            # unrun: then run all again (the lab's cells can run twice).
            pg.get_by_role("menuitem", name="Run", exact=True).click()
            pg.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            state = pg.wait_for_function(
                """() => {
                const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                    .map(p => p.textContent);
                const busy = prompts.some(t => t.includes('*'));
                const done = prompts.length > 0 && prompts.every(t => /\\[\\d+\\]/.test(t));
                if (done) return 'done';
                const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
                const idle = ind && ind.getAttribute('data-status') === 'idle';
                if (!busy && idle) { window.__idleSince = window.__idleSince || performance.now(); }
                else { window.__idleSince = null; }
                return window.__idleSince && performance.now() - window.__idleSince > 8000 ? 'stalled' : false;
            }""",
                timeout=max(1, deadline - time.time()) * 1000,
                polling=500,
            ).json_value()
            if state == "done":
                return
            pg.evaluate("() => { window.__idleSince = null; }")
        raise RuntimeError("Run All Cells left cells unrun three times")

    def error_outputs(self) -> list[str]:
        return self.page.eval_on_selector_all(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'], "
            ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']",
            "els => els.map(e => e.textContent.slice(0, 300))",
        )

    # -- the explorer's parts ------------------------------------------------------------------
    def explorer(self):
        return self.page.locator(self.EXPLORER).first

    def image_src(self) -> str:
        return self.explorer().locator(".widget-image img, img.widget-image").first.get_attribute("src") or ""

    def readout(self) -> str:
        return self.explorer().locator(".widget-html").nth(0).inner_text()

    def slider(self, index: int):
        """0: LayerScale lambda (a selection slider), 1: depth."""
        return self.explorer().locator(".widget-slider").nth(index)

    def slider_value(self, index: int) -> str:
        return self.slider(index).locator(".widget-readout").inner_text()

    def _arm_timer(self) -> None:
        """Record when the next user event happens and when the image changes after it."""
        self.page.evaluate(
            """() => {
            window.__andrea = {t0: null, t1: null};
            const img = document.querySelector('%s img');
            const mark = () => { if (window.__andrea.t0 === null) window.__andrea.t0 = performance.now(); };
            for (const ev of ['mouseup', 'keydown', 'click'])
                document.addEventListener(ev, mark, {capture: true, once: true});
            const obs = new MutationObserver(() => {
                if (window.__andrea.t1 === null) { window.__andrea.t1 = performance.now(); obs.disconnect(); }
            });
            obs.observe(img, {attributes: true, attributeFilter: ['src']});
        }"""
            % self.EXPLORER
        )

    def _wait_image(self, before: str, timeout_s: float = 30) -> float:
        self.page.wait_for_function(
            "before => { const i = document.querySelector('%s img'); return i && i.src !== before; }" % self.EXPLORER,
            arg=before,
            timeout=timeout_s * 1000,
        )
        t = self.page.evaluate("() => window.__andrea")
        return (t["t1"] - t["t0"]) / 1000 if t and t["t0"] is not None and t["t1"] is not None else float("nan")

    def press_on_slider(self, index: int, key: str) -> float:
        """Focus a slider's handle with a real click, then press ``key``; seconds to the new image."""
        handle = self.slider(index).locator(".noUi-handle")
        handle.focus()
        before = self.image_src()
        self._arm_timer()
        self.page.keyboard.press(key)
        return self._wait_image(before)

    def drag_slider_to(self, index: int, fraction: float) -> float:
        """Drag a slider's handle with the mouse to ``fraction`` of its track and release."""
        track = self.slider(index).locator(".noUi-target").bounding_box()
        handle = self.slider(index).locator(".noUi-handle").bounding_box()
        before = self.image_src()
        pg = self.page
        pg.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
        pg.mouse.down()
        pg.mouse.move(track["x"] + fraction * track["width"], track["y"] + track["height"] / 2, steps=8)
        self._arm_timer()
        pg.mouse.up()
        return self._wait_image(before)

    def click_toggle(self, text: str) -> float:
        before = self.image_src()
        self._arm_timer()
        self.explorer().locator("button.widget-toggle-button", has_text=text).click()
        return self._wait_image(before)


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def bench(depths=(12, 48, 96), changes: int = 3) -> list[tuple]:
    """Release-to-image times in the real UI: for each depth, ``changes`` new (uncached) settings
    reached with the keyboard next to it, and the same for on-grid settings shipped with the package."""
    from playwright.sync_api import sync_playwright

    rows = []
    with JupyterLab() as lab, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        ui = Lab1(page, lab)
        ui.open_and_run_all()
        page.locator(Lab1.EXPLORER).first.scroll_into_view_if_needed()
        for depth in depths:
            # Walk the depth slider to depth - changes in pre-norm (shipped at every depth as the
            # reference curve, so the walk is quick and probes nothing), switch to post-norm there,
            # then step up: post-norm is shipped only at the grid depths, so every step before the
            # grid depth is a setting never probed before, computed live (the status line is checked).
            target = depth - changes
            if "post" in ui.explorer().locator("button.widget-toggle-button.mod-active").all_inner_texts():
                ui.click_toggle("pre")
            while int(ui.slider_value(1)) != target:
                ui.press_on_slider(1, "ArrowRight" if int(ui.slider_value(1)) < target else "ArrowLeft")
            ui.click_toggle("post")
            times = []
            for _ in range(changes):
                times.append(ui.press_on_slider(1, "ArrowRight"))
                status = ui.explorer().inner_text()
                for _ in range(50):  # the status line is written just after the image
                    if "computing" not in status:
                        break
                    page.wait_for_timeout(100)
                    status = ui.explorer().inner_text()
                live = int(ui.slider_value(1)) in (12, 24, 48, 96) or "computed in" in status
                if not live:
                    raise RuntimeError(f"bench: depth {ui.slider_value(1)} was not computed live: {status!r}")
            off = times[:-1] if depth in (12, 24, 48, 96) else times  # the last step lands on the grid depth
            rows.append(
                (
                    f"release to image, post-norm, depth {depth - changes + 1}..{depth - 1} (computed live), median",
                    f"{statistics.median(off) * 1000:.0f} ms",
                )
            )
            if depth in (12, 24, 48, 96):
                shipped = f"{times[-1] * 1000:.0f} ms"
                rows.append((f"release to image, post-norm, depth {depth} (shipped grid setting)", shipped))
        browser.close()
    return rows


if __name__ == "__main__":
    if "--bench" in sys.argv:
        if not Path(CHROMIUM).exists():
            print(f"skipped: the JupyterLab timings need {CHROMIUM} (sudo apt-get install chromium)")
            sys.exit(0)
        for name, value in bench():
            print(f"{name:<70} {value:>10}")
