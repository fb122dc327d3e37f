"""tools/gpu_check.py's long run (the run "long"): a few minutes of the training command line on the
manuals, read against chapter 8's model and the manuals' unigram level; and its CPU stand-in."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time

from gpu_common import LONG, LONG_STAND_IN, PY, REHEARSE_TIMEOUTS, TIMEOUTS, _text, child_env, run_bounded


def long_command(device: str, preset: str, settings: dict, out: str, compile: bool) -> list:
    """The training command line on the manuals with the given settings (train-long and its stand-in)."""
    cmd = [PY, "-m", "andrea.training.train", "--preset", preset, "--data", "manuals", "--device", device]
    for key, value in settings.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd + ["--out", out, "--samples", "1", "--overwrite"] + (["--compile"] if compile else [])


def read_long(stdout: str) -> dict:
    """What the training command line said at its end: tokens/s (over the run, and after its first step), the
    held-out curve, the best step and loss, how it ended, and the first sample."""
    said: dict = {"curve": [], "sample": ""}
    lines = stdout.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("held-out loss by step: "):
            pairs = [p.split() for p in ln.split(": ", 1)[1].split(", ") if len(p.split()) == 2]
            said["curve"] = [(int(s), float(v)) for s, v in pairs]
        elif ln.startswith("after the first step: "):
            said["steady"] = float(ln.split(": ", 1)[1].split()[0].replace(",", ""))
        elif ln.startswith(("done: ", "stopped ", "interrupted ", "diverged ")):
            said["end"] = ln.split(";")[0]
            found = re.search(r"([\d,]+) tokens/s", ln)
            if found:
                said["overall"] = float(found.group(1).replace(",", ""))
        if "best held-out loss " in ln:
            found = re.search(r"best held-out loss ([\d.]+) at step (\d+)", ln)
            if found:
                said["best"] = (int(found.group(2)), float(found.group(1)))
        if ln == "--- sample 1 ---":
            said["sample"] = "\n".join(lines[i + 1 :]).strip()
    return said


def run_long(device: str, preset: str, settings: dict, timeout: float, compile: bool) -> tuple:
    """Run the long training command; (its words, its return code, its output's last lines)."""
    cmd = long_command(device, preset, settings, tempfile.mkdtemp(prefix="andrea-long-"), compile)
    try:
        r = run_bounded(cmd, timeout, env=child_env(PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired as e:
        bar = [ln for ln in re.split(r"[\r\n]", _text(e.stderr)) if "step/s" in ln or "s/step" in ln]
        return {"curve": [], "sample": ""}, None, f"timed out after {timeout:.0f} s; last: {(bar or ['?'])[-1].strip()}"
    return read_long(r.stdout), r.returncode, (r.stdout + r.stderr)[-3000:]


def long_figures(said: dict, levels: dict, what: str) -> str:
    """The table's words for a long run."""
    parts = [what]
    if "steady" in said:
        parts.append(f"{said['steady']:,.0f} tok/s after step 1 ({said.get('overall', float('nan')):,.0f} with it)")
    curve = said["curve"]
    if curve:
        parts.append("held-out by step: " + ", ".join(f"{s} {v:.2f}" for s, v in curve))
    if "best" in said:
        parts.append(
            f"best {said['best'][1]:.3f} at step {said['best'][0]} vs chapter 8's model {levels['chapter8']:.2f} "
            f"and the unigram level {levels['unigram']:.2f}"
        )
    parts.append(said.get("end", "no end line"))
    if said["sample"]:
        parts.append("sample: " + repr(said["sample"][:160]))
    return "; ".join(parts)


def long_levels() -> dict:
    """What the long run's held-out loss is read against: chapter 8's final held-out loss, from its stored
    training log, and the manuals' unigram level (cross-entropy of the training split's token frequencies on
    the held-out split), computed here."""
    from andrea.trained import model as trained
    from andrea.training import manuals

    return {
        "chapter8": float(trained.log()["history"]["val_loss"][-1]),
        "unigram": trained.baselines(manuals.load())["unigram_ce"],
    }


def step_train_long() -> dict:
    t0 = time.perf_counter()
    levels = long_levels()
    print(json.dumps({"ok": False, "figures": f"levels {levels}; the training command did not end"}), flush=True)
    left = TIMEOUTS["train-long"] - (time.perf_counter() - t0) - 5
    said, rc, tail = run_long("cuda", "andrea-120m", LONG, left, compile=True)
    best = said.get("best", (0, float("nan")))[1]
    ok = rc == 0 and best < levels["unigram"]
    what = f"andrea-120m --compile, B=32 x 1024, up to {LONG['steps']} steps or {LONG['time_limit']} s"
    res = {"ok": ok, "figures": long_figures(said, levels, what)}
    if not ok:
        res["log"] = tail
    return res


def rehearse_train_long() -> str:
    """train-long's code on the CPU: the same levels, the same command line on the manuals, a tiny model."""
    levels = long_levels()
    said, rc, tail = run_long("cpu", "tiny", LONG_STAND_IN, REHEARSE_TIMEOUTS["train-long"] - 60, compile=False)
    if rc != 0 or len(said["curve"]) != LONG_STAND_IN["steps"] // LONG_STAND_IN["eval_every"] or not said["sample"]:
        raise RuntimeError(f"the long run's stand-in failed (exit {rc}): {said}\n{tail}")
    return long_figures(said, levels, f"tiny on the CPU, {LONG_STAND_IN['steps']} steps, no compilation")
