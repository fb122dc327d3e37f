import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Two cores in all. Under pytest-xdist (`make test`: two workers) each worker, and what it starts, computes
# on one thread: a second thread per worker would oversubscribe the cores, and torch's threads then wait
# on each other (measured: a chapter 7 checker took 330 s beside the other worker, 62 s alone).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = max(1, min(2, os.cpu_count() or 1) // _WORKERS)
if _WORKERS > 1:
    os.environ.update(OMP_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
torch.set_num_threads(THREADS)


def need(condition: bool, what: str):
    """Skip on a laptop with a message saying what to install; fail under CI, where nothing may be missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"missing under CI: {what}")
    pytest.skip(what)


@pytest.fixture(scope="session")
def site() -> Path:
    need((SITE / "index.html").is_file(), f"the built book ({SITE}); run 'make book' first")
    return SITE


# `make test` runs the tests two at a time (pytest-xdist, `-n 2 --dist loadscope`: a module's tests stay
# on one worker with its fixtures). The modules start longest first, so that the two workers finish
# together: seconds measured with two workers (2 cores); the others follow in file order.
MODULE_SECONDS = {
    "test_store.py": 376,
    "test_figure_room.py": 95,
    "test_faults.py": 345,
    "test_portable.py": 272,
    "test_site.py": 229,
    "test_gpu_check.py": 146,
    "test_trained.py": 95,
    "test_exercises.py": 80,
    "test_page_model.py": 42,
    "test_attention_page.py": 60,
    "test_lab_ui.py": 41,
    "test_train.py": 40,
    "test_labs.py": 30,
}


def pytest_collection_modifyitems(items):
    order = {name: -secs for name, secs in MODULE_SECONDS.items()}
    items.sort(key=lambda item: order.get(Path(str(item.fspath)).name, 0))  # stable: file order otherwise


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, driven by Playwright (never `playwright install`), with the book's flags
    (tools/labui.py): one browser per test module."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from labui import CHROMIUM, CHROMIUM_ARGS

    need(Path(CHROMIUM).exists(), f"{CHROMIUM} (install it: sudo apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "playwright for Python (pip install playwright; never 'playwright install')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def model_page(*loads):
    """The page's model in a real headless Chromium, the network blocked (tools/pagemodel.Site serves
    book/_static); each (script, expected) in `loads` is evaluated and checked first. Yields the page
    and, on leaving, checks that nothing left localhost and the console stayed free of errors. For a
    module fixture: `yield from model_page((LOAD_TF, "wasm"))`."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from pagemodel import Site

    from labui import CHROMIUM, launch_browser

    need((ROOT / "book/_static/vendor/tfjs/tf.min.js").exists(), "the vendored TensorFlow.js (make vendor)")
    need(Path(CHROMIUM).exists(), f"{CHROMIUM} (install it: sudo apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "playwright for Python (pip install playwright; never 'playwright install')")
    with Site() as site, sync_playwright() as p:
        browser = launch_browser(p)
        pg = site.open(browser)
        for script, expected in loads:
            assert pg.evaluate(script) == expected
        yield pg
        assert pg.external == [], f"requests left localhost: {pg.external}"
        assert pg.errors == [], f"console errors: {pg.errors}"
        browser.close()
