"""`make gpu-check` on a machine without CUDA, and its table and failure handling (no GPU needed)."""

import subprocess
import sys
import types

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import gpu_check  # noqa: E402


def test_without_cuda_every_step_is_skipped_and_the_exit_status_is_0(tmp_path):
    if gpu_check.cuda_available():
        pytest.skip("this machine has CUDA: the check would run for real")
    out = tmp_path / "report.txt"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0
    assert "No CUDA device is present" in r.stdout
    for step in gpu_check.STEPS:
        assert f"{step}" in r.stdout
    assert r.stdout.count("skipped: no CUDA") == len(gpu_check.STEPS)
    assert f"report written to {out}" in r.stdout and "skipped: no CUDA" in out.read_text()


def test_a_crash_or_a_timeout_becomes_a_fail_row_and_the_check_goes_on():
    ok = gpu_check.run_step(
        "x",
        10,
        runner=lambda: types.SimpleNamespace(
            returncode=0, stdout='noise\n{"ok": true, "figures": "42 tok/s"}\n', stderr=""
        ),
    )
    assert ok["status"] == "pass" and ok["figures"] == "42 tok/s"
    crash = gpu_check.run_step("x", 10, runner=lambda: types.SimpleNamespace(returncode=1, stdout="", stderr="boom"))
    assert crash["status"] == "FAIL" and "boom" in crash["log"]

    def slow():
        raise subprocess.TimeoutExpired("x", 10)

    late = gpu_check.run_step("x", 10, runner=slow)
    assert late["status"] == "FAIL" and "timed out after 10 s" in late["figures"]


def test_table_lists_every_step_with_status_time_and_figures():
    rows = {
        "tests": {"status": "pass", "seconds": 12.3, "figures": "9 passed"},
        "ddp": {"status": "FAIL", "seconds": 5.0, "figures": "NCCL error"},
        "chapter": {"status": "skipped: no CUDA", "seconds": None, "figures": ""},
    }
    t = gpu_check.table(rows)
    lines = t.splitlines()
    assert lines[0].split()[:3] == ["step", "status", "time"]
    assert "pass" in lines[2] and "12 s" in lines[2] and "9 passed" in lines[2]
    assert "FAIL" in lines[3] and "NCCL error" in lines[3]
    assert "skipped: no CUDA" in lines[4] and lines[4].split()[-1] == "-"


def test_peak_lookup_names_the_figure_used():
    assert gpu_check.peak_for("NVIDIA H200") == (989e12, "H200")
    assert gpu_check.peak_for("NVIDIA H100 PCIe")[1] == "H100 PCIe"
    assert gpu_check.peak_for("Some Future GPU") == (None, None)
