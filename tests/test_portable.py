"""The same book on every machine: every page re-run as another CPU would run it says the same.

`make test` builds the book natively first; here every page is executed again in fresh kernels with
torch's portable kernels (``ATEN_CPU_CAPABILITY=default``), on one thread and on two, with an empty
cache, and every glued value, verdict and exercise check is compared with the native build
(``tools/portable.py``: the rules and tolerances are stated there). A difference fails the test and
is listed with both readings. The first tests check that the comparison itself can fail.
"""

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
    same = {"01_residual": {"glue x": "0.8234", "glue w": "This is an identity.", "verdict 1 (c)": "confirmed"}}
    assert not _cmp(same, same)
    rounded = {"01_residual": {**same["01_residual"], "glue x": "0.8235"}}  # one unit of the last digit
    assert not _cmp(same, rounded)
    moved = {"01_residual": {**same["01_residual"], "glue x": "0.8300"}}
    [d] = _cmp(same, moved)
    assert d.key == "glue x" and d.a == "0.8234" and d.b == "0.8300" and "exact tolerance" in d.why
    words = {"01_residual": {**same["01_residual"], "glue w": "This is not an identity."}}
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
    assert k("01_residual", "glue rank_12") == "exact"
    t = portable.TOLERANCES
    assert t["trained"].allows(0.1015, 0.0935, 0.01) and not t["trained"].allows(0.10, 0.05, 0.01)
    assert t["rounding"].allows(1.2e-7, 2.4e-7, 1e-8) and not t["rounding"].allows(1.2e-7, 2.4e-5, 1e-8)
    assert t["timing"].allows(1.0, 7.0, 0.1)


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
        [sys.executable, str(ROOT / "tools" / "portable.py"), "--threads", str(threads)],
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
@pytest.mark.parametrize("threads", [1, 2])
def test_the_book_says_the_same_on_portable_kernels(threads):
    rc, report = _portable(threads)
    assert rc == 0, report[-6000:]
    assert "No reading differs beyond its tolerance" in report
