"""The same book on every machine: every page re-run as another CPU would run it says the same.

`make test` builds the book natively first (this machine's vector kernels, one torch thread per page,
two pages at a time: tools/execute_pages.py); here every page is executed again in fresh kernels with
torch's portable kernels (``ATEN_CPU_CAPABILITY=default``) and MKL's AVX2 path, also one thread per
page and two pages at a time, with an empty cache. (Another thread count: ``make check-portable
THREADS=2``.) Every glued value, verdict and exercise check is compared with the native build
(``tools/portable.py``: the rules and tolerances are stated there). A difference fails the test and
is listed with both readings. The first tests check that the comparison itself can fail.
"""

import fnmatch
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import portable  # noqa: E402


def _cmp(a: dict, b: dict):
    return portable.compare(a, b)[0]


def test_numbers_agree_within_their_kind_and_words_must_be_identical():
    page = "01_residual_evidence"
    same = {page: {"glue kl_max": "0.8234", "glue res_words": "This is an identity.", "verdict 1 (c)": "confirmed"}}
    assert not _cmp(same, same)
    rounded = {page: {**same[page], "glue kl_max": "0.8235"}}  # one unit of the last digit
    assert not _cmp(same, rounded)
    moved = {page: {**same[page], "glue kl_max": "0.8300"}}
    [d] = _cmp(same, moved)
    assert d.key == "glue kl_max" and d.a == "0.8234" and d.b == "0.8300" and "exact tolerance" in d.why
    words = {page: {**same[page], "glue res_words": "This is not an identity."}}
    [d] = _cmp(same, words)
    assert "words differ" in d.why


def test_a_flipped_verdict_or_check_or_an_error_is_a_difference():
    a = {"p": {"verdict 1 (the claim)": "confirmed", "check 1": "✓ check_x: all 2 cases pass"}}
    b = {"p": {"verdict 1 (the claim)": "inconclusive", "check 1": "✓ check_x: all 2 cases pass"}}
    [d] = _cmp(a, b)
    assert d.kind == "label" and (d.a, d.b) == ("confirmed", "inconclusive")
    c = {"p": {**a["p"], "error 1": "TypeError: unsupported operand"}}
    [d] = _cmp(a, c)
    assert d.key == "error 1" and "one run only" in d.why
    assert _cmp(a, {})[0].key == "(page)"


def test_trained_rounding_and_timing_values_have_their_own_tolerances():
    k = portable.kind_of
    assert k("07_layerscale", "glue growth_max_end") == "trained"
    assert k("01_residual", "glue sum_err32") == "rounding"
    assert k("papers", "glue time_admin") == "timing"
    assert k("07_layerscale", "verdict 3 (x)") == "label"
    assert k("01_residual", "glue rank_res_48") == "exact"
    assert k("02_layernorm", "measured 2 (y = gamma * (x - mean(x)))") == "rounding"
    assert k("02_layernorm", "measured 3 (something else)") == "exact"
    t = portable.TOLERANCES
    assert t["trained"].allows(0.1015, 0.0935, 0.01) and not t["trained"].allows(0.10, 0.05, 0.01)
    assert t["rounding"].allows(1.2e-7, 2.4e-7, 1e-8) and not t["rounding"].allows(1.2e-7, 2.4e-5, 1e-8)
    assert t["timing"].allows(1.0, 7.0, 0.1)


def test_a_rounding_error_is_compared_by_size_whatever_machine_reads_it():
    """A head computed by hand against the fused kernel (chapter 6's, before the attention chapter
    took it over) read 4.5e-08 on an AVX-512 machine, 6e-08 natively and 7e-08 on portable kernels on
    an AVX2 machine: the same rounding error, in size."""
    assert portable.kind_of("attention", "glue hand_diff") == "rounding"
    for a, b in [("4e-08", "7e-08"), ("6e-08", "7e-08"), ("0", "0")]:
        assert not _cmp({"attention": {"glue hand_diff": a}}, {"attention": {"glue hand_diff": b}})
    [d] = _cmp({"attention": {"glue hand_diff": "4e-08"}}, {"attention": {"glue hand_diff": "4e-06"}})
    assert "rounding tolerance" in d.why


def test_a_glued_value_without_a_declared_kind_is_a_difference():
    a = {"01_residual": {"glue brand_new_value": "0.5"}}
    [d] = _cmp(a, a)
    assert d.kind == "undeclared" and "GLUE_KINDS" in d.why
    assert portable.undeclared(a) == ["01_residual: glue brand_new_value"]


@pytest.mark.book
def test_every_glued_value_of_the_native_build_has_a_declared_kind():
    """A new glue key must be classified when it is written (exact, rounding, trained or timing)."""
    if not (ROOT / "_build" / "jupyter_execute").is_dir():
        if os.environ.get("CI"):
            pytest.fail("no native build in _build: `make test` builds the book before the tests")
        pytest.skip("no native build in _build: run `make book` first")
    readings = portable.read_build()
    assert len(readings) >= 9 and sum(len(r) for r in readings.values()) > 400
    missing = portable.undeclared(readings)
    assert not missing, "declare a kind in tools/portable.py GLUE_KINDS for: " + ", ".join(missing)
    stale = [
        f"{page}: {name}"
        for page, kinds in portable.GLUE_KINDS.items()
        for names in kinds.values()
        for name in names.split()
        if not any(fnmatch.fnmatchcase(k, "glue " + name) for k in readings.get(page, {}))
    ]
    assert not stale, "GLUE_KINDS declares names no page glues: " + ", ".join(stale)


@pytest.mark.book
def test_no_page_of_the_native_build_shows_an_error():
    """An exception raised while a figure is formatted (``book_png``'s legibility audit, for one) does not
    stop a cell: IPython shows it as an error output and goes on. So the build's pages are read for one."""
    if not (ROOT / "_build" / "jupyter_execute").is_dir():
        if os.environ.get("CI"):
            pytest.fail("no native build in _build: `make test` builds the book before the tests")
        pytest.skip("no native build in _build: run `make book` first")
    errors = [
        f"{page}: {v}" for page, r in portable.read_build().items() for k, v in r.items() if k.startswith("error")
    ]
    assert not errors, errors


def test_numbers_are_read_with_the_precision_the_page_prints():
    text, nums = portable.numbers("−0.135 [−0.225, +0.0445] at 1,536 and 2.0e-07")
    assert text == "# [#, #] at # and #"
    assert nums == [(-0.135, 0.001), (-0.225, 0.001), (0.0445, 0.0001), (1536.0, 1.0), (2.0e-07, pytest.approx(1e-8))]


def _portable(threads: int):
    if not (ROOT / "_build" / "jupyter_execute").is_dir():
        if os.environ.get("CI"):
            pytest.fail("no native build in _build: `make test` builds the book before the tests")
        pytest.skip("no native build in _build: run `make book` first")
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "portable.py"), "--threads", str(threads), "--stating"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    report = "\n".join(ln for ln in r.stdout.splitlines() if "Kernel is running over TCP" not in ln)
    print(report)
    return r.returncode, report


@pytest.mark.book
@pytest.mark.slow
def test_the_book_says_the_same_on_portable_kernels():
    """One emulated pass: portable kernels against the native build's vector kernels."""
    rc, report = _portable(1)
    assert rc == 0, report[-6000:]
    assert "No reading differs beyond its tolerance" in report
    # every page that states something was executed and compared; the ones left out state nothing
    assert "20 pages state something" in report and "['lab1_gradient_flow', 'lab2_training']" in report
