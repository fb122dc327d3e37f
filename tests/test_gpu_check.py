"""`make gpu-check` on a machine without CUDA, and its table and failure handling (no GPU needed)."""

import subprocess
import sys
import types

import pytest

from conftest import ROOT, need

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
    for step in gpu_check.RUNS["check"]:  # the default run
        assert f"{step}" in r.stdout
    assert r.stdout.count("skipped: no CUDA") == len(gpu_check.RUNS["check"])
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


# ---------------------------------------------------------------------------------------------
# The lent GPU machine: the lease, the log under $OUT, the carried wheels, the rehearsal
# ---------------------------------------------------------------------------------------------
sys.path.insert(0, str(ROOT / "tools"))
import gpu_wheels  # noqa: E402


def on_a_gpu_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## On a GPU", 1)[1].split("\n## ", 1)[0]


def test_the_device_command_fits_the_lease_and_the_readme_gives_it_exactly():
    assert set(gpu_check.TIMEOUTS) == set(gpu_check.STEPS) == set(gpu_check.REHEARSE_TIMEOUTS)
    # every step in exactly one device run, and each run's steps within the budget
    runs = list(gpu_check.RUNS.values())
    assert sorted(s for run in runs for s in run) == sorted(gpu_check.STEPS)
    for run in runs:
        assert sum(gpu_check.TIMEOUTS[s] for s in run) <= gpu_check.BUDGET_S, run
    assert gpu_check.BUDGET_S + gpu_check.SETUP_ALLOWANCE_S <= 8 * 60 < gpu_check.DEVICE_TIMEOUT_S <= 600
    # one full run and a rerun of its longest step fit in the 15 minutes, with 2 minutes to start a machine
    check = gpu_check.RUNS["check"]
    assert 120 + 8 * 60 + max(gpu_check.TIMEOUTS[s] for s in check) + 60 <= 15 * 60
    # the other commands ("speed", "long"): each within its timeout_s with the setup; after "check" in the same
    # lease (when nothing needs a rerun), or in a lease of their own twice
    for name, run in gpu_check.RUNS.items():
        if name == "check":
            continue
        short = sum(gpu_check.TIMEOUTS[s] for s in run) + gpu_check.SETUP_ALLOWANCE_S
        assert short <= gpu_check.SHORT_DEVICE_TIMEOUT_S <= 600, name
        assert 120 + 8 * 60 + short <= 15 * 60 and 120 + 2 * short <= 15 * 60, name
    assert 2 * gpu_check.DDP_TIMEOUT < gpu_check.TIMEOUTS["ddp"]
    readme = on_a_gpu_section()
    assert "`command`: `bash tools/gpu_device.sh`" in readme
    assert '`carry`: `[".whl"]`' in readme and f"`timeout_s`: `{gpu_check.DEVICE_TIMEOUT_S}`" in readme
    assert f"within {gpu_check.BUDGET_S} s" in readme
    for name, run in gpu_check.RUNS.items():  # the README gives each run's command and timeout_s
        cmd = "`bash tools/gpu_device.sh`" if name == "check" else f"`bash tools/gpu_device.sh --only {' '.join(run)}`"
        assert cmd in readme, cmd
    assert f"`timeout_s`: `{gpu_check.SHORT_DEVICE_TIMEOUT_S}`" in readme
    assert f"{gpu_check.TIMEOUTS['train-long']} s" in readme and f"{gpu_check.LONG['time_limit']} s" in readme
    n = len(gpu_wheels.carried())
    assert f"the {n} wheels of `tools/gpu_wheels.txt`" in readme


def test_a_step_that_times_out_keeps_what_it_measured_so_far():
    def late():
        raise subprocess.TimeoutExpired("x", 120, output='{"ok": false, "figures": "eager: 9 tok/s"}\n{not json\n')

    row = gpu_check.run_step("train-120m", 120, runner=late)
    assert row["status"] == "FAIL" and row["figures"] == "timed out after 120 s; so far: eager: 9 tok/s"
    noisy = types.SimpleNamespace(returncode=0, stdout='{"ok": true, "figures": "a"}\n{1: 2}\n', stderr="")
    assert gpu_check.run_step("x", 10, runner=lambda: noisy)["figures"] == "a"


def fake_cuda(monkeypatch, clock: list):
    import torch

    monkeypatch.setattr(gpu_check, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    monkeypatch.setattr(gpu_check.time, "perf_counter", lambda: clock[0])


def test_log_and_table_are_on_disk_under_OUT_after_each_step_even_if_the_run_is_stopped(tmp_path, monkeypatch):
    clock = [0.0]
    fake_cuda(monkeypatch, clock)
    calls = []

    def step(name, timeout, runner=None, rehearse=False):
        calls.append(name)
        if len(calls) == 2:  # the run is stopped in its second step
            raise KeyboardInterrupt
        return {"ok": True, "status": "pass", "seconds": 3.0, "figures": "42 tok/s", "output": "full output"}

    monkeypatch.setattr(gpu_check, "run_step", step)
    monkeypatch.setenv("OUT", str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        gpu_check.main([])
    log = (tmp_path / "gpu-check.log").read_text().splitlines()
    assert log[0].startswith("andrea gpu-check: python ") and "torch " in log[0] and "CUDA " in log[0]
    assert "CUDA device: Fake GPU" in log[1]
    assert any("pass: 42 tok/s" in ln for ln in log) and "full output" in "\n".join(log)
    assert f"-- {gpu_check.STEPS[1]} (timeout" in log[-1]  # said before the step started
    rows = (tmp_path / "gpu-check-table.txt").read_text().splitlines()
    assert rows[2].split()[:2] == [gpu_check.STEPS[0], "pass"] and len(rows) == 3


def test_one_budget_bounds_the_whole_check(tmp_path, monkeypatch):
    clock = [0.0]
    fake_cuda(monkeypatch, clock)
    given = {}

    def step(name, timeout, runner=None, rehearse=False):
        given[name] = timeout
        clock[0] += timeout  # each step uses all of its time
        return {"ok": True, "status": "pass", "seconds": timeout, "figures": ""}

    monkeypatch.setattr(gpu_check, "run_step", step)
    assert gpu_check.main(["--out", str(tmp_path / "a.log")]) == 0
    check = gpu_check.RUNS["check"]
    assert given == {s: gpu_check.TIMEOUTS[s] for s in check}  # the default run; the budget holds each timeout
    given.clear()
    assert gpu_check.main(["--out", str(tmp_path / "c.log"), "--only", *gpu_check.RUNS["long"]]) == 0
    assert given == {s: gpu_check.TIMEOUTS[s] for s in gpu_check.RUNS["long"]}
    given.clear()
    clock[0] = 0.0
    # a budget that ends 5 s into the third step: it is cut to what is left, and the last three never start
    t = {**gpu_check.TIMEOUTS, "tests": 50}
    budget = t["tests"] + t["agreement"] + t["train-120m"] - 5
    args = ["--out", str(tmp_path / "b.log"), "--budget", str(budget), "--timeout", "tests=50"]
    assert gpu_check.main(args) == 1
    assert given == {"tests": 50, "agreement": t["agreement"], "train-120m": t["train-120m"] - 5}
    text = (tmp_path / "b-table.txt").read_text()
    assert text.count(f"not run: the {budget} s budget is spent") == len(check) - 3


def test_a_timed_out_child_is_killed_with_what_it_started_in_a_session_of_its_own(tmp_path):
    import psutil

    pidfile = tmp_path / "pid"
    child = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(subprocess.TimeoutExpired) as e:
        gpu_check.run_bounded([sys.executable, "-c", child], 3)
    assert "started" in e.value.output
    grandchild = int(pidfile.read_text())
    try:
        psutil.Process(grandchild).wait(timeout=5)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_the_rehearsal_imports_what_each_step_imports_and_what_andrea_imports():
    assert gpu_check.step_imports("chapters") == ["jupytext", "nbclient", "nbformat"]
    assert set(gpu_check.step_imports("chapters")) == set(
        gpu_check.imports_in(gpu_check.ast.parse(gpu_check.inspect.getsource(gpu_check.execute_page)))
    )  # what each page's child imports
    assert {"torch", "andrea.views"} <= set(gpu_check.step_imports("bench"))
    assert {"andrea.views.bench", "torch"} <= set(gpu_check.step_imports("train-120m"))
    lib = gpu_check.andrea_imports()
    assert {"torch", "numpy", "altair", "ipywidgets", "tokenizers", "tqdm", "IPython"} <= set(lib)
    assert "myst_nb" not in lib and "andrea" not in lib


def test_the_carried_list_is_pinned_not_on_the_device_and_its_folders_are_ignored():
    want = gpu_wheels.carried()  # raises SystemExit on an unpinned, a doubled or an already-there name
    assert {"jupytext", "nbformat", "nbclient", "ipykernel", "ipywidgets", "altair"} <= set(want)
    assert not set(want) & set(gpu_wheels.names_in(gpu_wheels.DEVICE_LIST))
    assert "torch" in gpu_wheels.names_in(gpu_wheels.DEVICE_LIST)
    for folder in (".whl/x.whl", ".whl-cp311/x.whl"):
        r = subprocess.run(["git", "check-ignore", "-q", folder], cwd=ROOT)
        assert r.returncode == 0, f"{folder} is not git-ignored"


@pytest.mark.slow
def test_the_rehearsal_passes_on_the_device_packages_and_fails_without_one_carried_wheel(tmp_path):
    """`make gpu-rehearse` (downloads what it needs), then a negative control without altair's wheel."""
    tool = [sys.executable, str(ROOT / "tools" / "gpu_wheels.py"), "rehearse"]
    r = subprocess.run([*tool, "--out", str(tmp_path / "ok")], capture_output=True, text=True, timeout=1500)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert gpu_wheels.folder_size(ROOT / ".whl-cp311") < 64 * 2**20
    head = out.split("andrea gpu-check:", 1)[1]
    assert "torch 2.13.0" in head.splitlines()[0] and "every requirement of theirs is met" in head
    tables = (tmp_path / "ok" / "gpu-check-table.txt").read_text()
    steps, rehearsal = tables.split("\nrehearsal\n")
    assert steps.count("skipped: no CUDA") == len(gpu_check.STEPS)  # a rehearsal covers every run's steps
    assert [ln.split()[1] for ln in rehearsal.splitlines()[2:]] == ["pass"] * len(gpu_check.STEPS)
    assert "kernel of this python imported the pages'" in rehearsal and "2 of 2 pages in" in rehearsal
    assert "stand-in model on the CPU: B=2 eager x" in rehearsal
    # the very folder that travels (.whl/, cp312) installs and imports on a Python 3.12, where there is one
    if gpu_wheels.find_python(gpu_wheels.DEVICE_PY):
        assert "modules of the carried wheels import, and a kernel ran a cell: pass" in out
    else:
        assert "no python3.12 here" in out
    r = subprocess.run(
        [*tool, "--without", "altair", "--only", "chapters"], capture_output=True, text=True, timeout=600
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "No module named 'altair'" in out, out[-6000:]
    need(gpu_wheels.find_python(gpu_wheels.DEVICE_PY) is not None, "a python3.12 (rehearses .whl/ itself)")


# ---------------------------------------------------------------------------------------------
# The run "speed" (bench) and the chapters step (issue 50): their rows and reports, on the CPU
# ---------------------------------------------------------------------------------------------
def test_a_steps_own_table_is_printed_under_its_row():
    rows = {"bench": {"status": "pass", "seconds": 3.0, "figures": "x1.02", "lines": ["| B x T |", "| 16 |"]}}
    lines = gpu_check.table(rows).splitlines()
    assert (
        lines[2].split()[:2] == ["bench", "pass"] and lines[3].strip() == "| B x T |" and lines[4].strip() == "| 16 |"
    )


def test_the_pages_report_compares_each_page_with_the_cpu_build_and_names_what_missed():
    known = {"book/a.md": 30.0, "book/b.md": 10.0}
    fast = [
        {"page": "book/a.md", "seconds": 20.0, "device": "cpu"},
        {"page": "book/b.md", "seconds": 9.0, "device": "cpu"},
    ]
    r = gpu_check.pages_report(fast, known, 25.0, 8, 2)
    assert r["ok"] and "2 of 2 pages in 25 s (8 at a time, 2 threads each); models on cpu" in r["figures"]
    assert "goal (each page <= its CPU-build seconds): met" in r["figures"]
    assert any("book/a.md" in ln and "x0.67" in ln for ln in r["lines"])
    slow = [{**fast[0], "seconds": 31.0}, {"page": "book/c.md", "seconds": None, "error": "a cell raised KeyError"}]
    r = gpu_check.pages_report(slow, known, 40.0, 8, 2)
    assert not r["ok"] and "NOT met (1 slower, 1 not run)" in r["figures"] and "slower: a 31/30 s" in r["figures"]
    assert any("book/c.md" in ln and "FAIL" in ln and "KeyError" in ln for ln in r["lines"])


def test_the_committed_cpu_figures_cover_every_page():
    known = gpu_check.cpu_seconds()
    pages = [gpu_check.rel(p) for p in gpu_check.book_pages()]
    assert sorted(known) == sorted(pages)
    assert all(s > 0 for s in known.values())


def test_the_cpu_figures_are_read_from_the_builds_log(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    import execute_pages as E

    log = tmp_path / "execute-pages.log"
    log.write_text(
        "execute_pages: 3 page(s), 2 at a time, one torch thread each\n  book/01_residual.md: 36 s\n"
        "  book/x.md: failed (the build runs it again and shows the error)\n  book/intro.md: 3 s\n"
        "execute_pages: 2 page(s) executed in 39 s (39 s of page time), 1 failed\n"
    )
    blob = E.record(log, tmp_path / "out.json")
    assert blob["seconds"] == {"book/01_residual.md": 36.0, "book/intro.md": 3.0} and blob["jobs"] == 2
    assert "cores" in blob["machine"]
    log.write_text("some other log\n")
    with pytest.raises(ValueError, match="not a log of tools/execute_pages.py"):
        E.record(log, tmp_path / "out.json")


def test_the_bench_runs_cheap_rows_first_and_a_failing_lever_is_a_figure_not_the_end():
    plan = gpu_check.bench_plan(False)
    modes = [m for _, m, _ in plan]
    assert modes.index("compiled") > max(i for i, m in enumerate(modes) if m == "eager")  # compiles last
    assert {lv for _, _, lv in plan} == {"", *gpu_check.BENCH_LEVERS}
    assert {(b, m) for b, m, lv in plan if not lv} == {(16, "eager"), (32, "eager"), (16, "compiled"), (32, "compiled")}
    from andrea.views import bench_gpu as G

    res = gpu_check.run_bench(
        G.STAND_IN, "cpu", [(2, "eager", ""), (2, "eager", "cudnn-attention")], 16, None, None, 1, 0
    )
    assert res["ok"] and "cudnn-attention failed: ValueError" in res["figures"]
    assert "goals: ratio >= 1.05" in res["figures"] and len(res["lines"]) == 3


def test_the_bench_goals_are_read_from_the_rows():
    from andrea.views.bench_gpu import Row

    good = [Row(16, 1024, m, 110.0, 100.0, 0.4, 0.5) for m in ("eager", "compiled")]
    good += [Row(32, 1024, "compiled", 110.0, 100.0, 0.46, 0.5)]
    assert gpu_check.bench_goals(good) == "goals: ratio >= 1.05 met; MFU at B=32 compiled 46.0% (goal 45 %)"
    bad = good[:2] + [Row(32, 1024, "compiled", 101.0, 100.0, 0.40, 0.5)]
    assert "not met (B=32 compiled x1.010)" in gpu_check.bench_goals(bad) and "40.0%" in gpu_check.bench_goals(bad)


# ---------------------------------------------------------------------------------------------
# train-long: the full model on the manuals for about 3 minutes (issue 50)
# ---------------------------------------------------------------------------------------------
STOPPED = """\
stopped early at step 1400: the held-out loss rose 3 evaluations in a row (--patience 3); best held-out loss \
3.412 at step 800 (/tmp/x/best.pt); val loss 3.598, 401,234 tokens/s; checkpoint: /tmp/x/last.pt (step 1400)
held-out loss by step: 200 5.101, 400 4.020, 600 3.600, 800 3.412, 1000 3.450, 1200 3.500, 1400 3.598
after the first step: 560,001 tokens/s (evaluations and checkpoints included)
samples from best.pt (step 800):
--- sample 1 ---
 the module
provides"""


def test_the_long_runs_words_are_read_from_the_command_lines_end():
    said = gpu_check.read_long(STOPPED)
    assert said["curve"][0] == (200, 5.101) and said["curve"][-1] == (1400, 3.598) and len(said["curve"]) == 7
    assert said["best"] == (800, 3.412) and said["steady"] == 560001 and said["overall"] == 401234
    assert said["end"].startswith("stopped early at step 1400") and said["sample"] == "the module\nprovides"
    words = gpu_check.long_figures(said, {"chapter8": 3.56, "unigram": 6.77}, "run")
    assert "560,001 tok/s after step 1 (401,234 with it)" in words
    assert "held-out by step: 200 5.10, 400 4.02" in words
    assert "best 3.412 at step 800 vs chapter 8's model 3.56 and the unigram level 6.77" in words
    assert gpu_check.read_long("Traceback ...")["curve"] == []


def test_the_long_runs_command_is_the_training_command_line_on_the_manuals():
    cmd = gpu_check.long_command("cuda", "andrea-120m", gpu_check.LONG, "/tmp/o", compile=True)
    assert cmd[1:5] == ["-m", "andrea.training.train", "--preset", "andrea-120m"]
    assert cmd[cmd.index("--data") + 1] == "manuals" and "--compile" in cmd
    assert cmd[cmd.index("--time-limit") + 1] == str(gpu_check.LONG["time_limit"])
    # its time limit, with the estimated start and end, fits the step's timeout
    assert gpu_check.LONG["time_limit"] + 10 + 20 + 10 + 15 <= gpu_check.TIMEOUTS["train-long"]


def test_the_long_runs_stand_in_trains_on_the_manuals_on_the_cpu():
    """--rehearse's stand-in: the levels, the command line on the manuals, a tiny model, 6 steps."""
    words = gpu_check.rehearse_train_long()
    assert "held-out by step: 2 " in words and ", 6 " in words and "unigram level 6.77" in words
    assert "chapter 8's model 3.56" in words and "sample: " in words and "done: step 6" in words
