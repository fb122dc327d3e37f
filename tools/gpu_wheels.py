"""The wheels the GPU check carries to the lent GPU machine, and the rehearsal of that check on the CPU.

    python tools/gpu_wheels.py download            # make gpu-wheels: .whl/ for the device (Python 3.12)
    python tools/gpu_wheels.py rehearse [--without NAME] [--only STEP ...]   # make gpu-rehearse

download: the packages in tools/gpu_wheels.txt, at the versions requirements.txt pins, as wheels for
CPython 3.12 on manylinux x86_64 (what the device runs), one file each and nothing else in the folder.
Then it checks that the list is closed: every requirement of a carried wheel (for that Python) is carried
too or is on the device's list (tools/gpu_device_packages.txt). A rerun with nothing changed does nothing.

rehearse: rebuilds the device's situation on this machine. Its Python is 3.11, not the device's 3.12, so
the same names and versions are downloaded again for cp311 into .whl-cp311/; a venv under
.cache/gpu-rehearse holds only packages on the device's list (torch==2.13.0 CPU standing in for the
device's 2.11 CUDA, and the device packages that andrea, pytest and the carried wheels need, at
requirements.txt's pins), checked to hold nothing else; then tools/gpu_device.sh runs in it exactly as on
the device (the wheels installed with --no-index into a fresh folder) with --rehearse: every CUDA step
says "skipped: no CUDA" and each step's imports and CPU stand-in must pass. Then, where this machine has a
python3.12 (pyenv's 3.12.1 here), the very folder that travels, .whl/, is installed the same way into a
3.12 venv of device packages (without torch: no CPU build of it for 3.12 lies here), and every top-level
module of its wheels is imported and a kernel runs a cell. --without NAME leaves one carried wheel out
(a negative control: the rehearsal must then fail).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CARRIED_LIST = ROOT / "tools" / "gpu_wheels.txt"
DEVICE_LIST = ROOT / "tools" / "gpu_device_packages.txt"
DEVICE_PY = "3.12"  # the device's python3 (3.12.3)
DEVICE_DIR = ROOT / ".whl"  # carried to the device: run(..., carry=[".whl"])
REHEARSAL = ROOT / ".cache" / "gpu-rehearse"
# The device packages the rehearsal takes at requirements.txt's pin rather than at the device's version.
KEEP_PIN = {
    "torch": "2.13.0 CPU (on this machine's disk) stands in for the device's 2.11.0+cu130",
    "numpy": "the device's 2.5.x needs Python 3.12",
}
# manylinux tags, newest first; pip matches each exactly. The device's python (3.12.3, glibc 2.39)
# runs all of them; 2.28 is as new as this list needs today.
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(28, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
MB = 2**20


def versions_in(path: Path) -> dict:
    """A one-name-a-line file (NAME or NAME==VERSION; comments, blank lines skipped): canonical name -> version
    or None."""
    lines = (ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines())
    pairs = (ln.partition("==") for ln in lines if ln)
    return {canonicalize_name(n.strip()): (v.strip() or None) for n, _, v in pairs}


def names_in(path: Path) -> list:
    """The canonical package names in such a file."""
    return list(versions_in(path))


def pins() -> dict:
    """requirements.txt's pins: canonical name -> version."""
    out = {}
    for ln in (ROOT / "requirements.txt").read_text().splitlines():
        ln = ln.split("#", 1)[0].strip()
        if "==" in ln:
            name, version = ln.split("==", 1)
            out[canonicalize_name(name)] = version.strip()
    return out


def carried() -> dict:
    """The carried packages, canonical name -> pinned version; checked against the pins and the device."""
    names, pinned, device = names_in(CARRIED_LIST), pins(), set(names_in(DEVICE_LIST))
    if len(set(names)) != len(names):
        raise SystemExit(f"{CARRIED_LIST.name}: a name is listed twice")
    unpinned = [n for n in names if n not in pinned]
    on_device = [n for n in names if n in device]
    if unpinned or on_device:
        raise SystemExit(
            f"{CARRIED_LIST.name}: "
            + (f"not pinned in requirements.txt: {', '.join(unpinned)}. " if unpinned else "")
            + (
                f"already on the device (carry one only for another version): {', '.join(on_device)}"
                if on_device
                else ""
            )
        )
    return {n: pinned[n] for n in names}


def marker_env(py: str) -> dict:
    """The marker environment of CPython `py` on Linux x86_64 (no extras)."""
    env = dict(default_environment())
    env.update(
        python_version=py,
        python_full_version=f"{py}.0",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        extra="",
    )
    return env


def wheel_requirements(wheel: Path, py: str) -> list:
    """The canonical names a wheel requires on CPython `py` (its extras left out)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = z.read(meta).decode()
    env = marker_env(py)
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                out.append(canonicalize_name(req.name))
    return out


def folder_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.glob("*.whl"))


def download(py: str = DEVICE_PY, dest: Path = DEVICE_DIR, quiet: bool = False) -> list:
    """Fill `dest` with exactly the carried wheels for CPython `py`; check the list is closed. Returns the
    device-list packages that the carried wheels require (what a rehearsal venv must hold)."""
    want = carried()
    device = set(names_in(DEVICE_LIST))
    dest.mkdir(parents=True, exist_ok=True)
    stamp = dest / ".stamp"
    key = json.dumps({"python": py, "wheels": want, "platforms": PLATFORMS, "device": sorted(device)})
    have = {}
    for f in dest.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(f.name)
        if want.get(name) is not None and Version(want[name]) == version and name not in have:
            have[name] = f
        else:  # another version, or no longer carried: one version of each, nothing else
            f.unlink()
    missing = [n for n in want if n not in have]
    if missing or not stamp.is_file() or stamp.read_text() != key:
        stamp.unlink(missing_ok=True)
        if missing:
            print(f"== downloading {len(missing)} wheels for CPython {py} into {dest.relative_to(ROOT)}/", flush=True)
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"]
            cmd += ["--only-binary=:all:", "--python-version", py, "--implementation", "cp", "-d", str(dest)]
            for plat in PLATFORMS:
                cmd += ["--platform", plat]
            r = subprocess.run(cmd + [f"{n}=={want[n]}" for n in missing])
            if r.returncode != 0:
                raise SystemExit(
                    "pip download failed: if no wheel matched, add its manylinux_2_N_x86_64 tag to PLATFORMS "
                    "in tools/gpu_wheels.py (pip matches each tag exactly)"
                )
            for f in dest.glob("*.whl"):
                name, _, _, _ = parse_wheel_filename(f.name)
                have.setdefault(name, f)
    files = {}
    for f in sorted(dest.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(f.name)
        if name in files or Version(want.get(name, "0")) != version:
            raise SystemExit(f"{dest}: {f.name} is not the one wheel of a carried package at its pin")
        files[name] = f
    if set(files) != set(want):
        raise SystemExit(f"{dest}: no wheel for {', '.join(sorted(set(want) - set(files)))}")
    needed_on_device, unmet = set(), []
    for name, f in files.items():
        for req in wheel_requirements(f, py):
            if req in device:
                needed_on_device.add(req)
            elif req not in want:
                unmet.append(f"{name} needs {req}")
    if unmet:
        raise SystemExit(
            f"{CARRIED_LIST.name} is not closed (add these to it; their versions come from requirements.txt): "
            + "; ".join(unmet)
        )
    stamp.write_text(key)
    if not quiet:
        size = folder_size(dest)
        print(f"{dest.relative_to(ROOT)}/: {len(files)} wheels for CPython {py}, {size / MB:.1f} MiB (limit 64 MiB)")
    return sorted(needed_on_device)


# ---------------------------------------------------------------------------------------------
# The rehearsal
# ---------------------------------------------------------------------------------------------
def device_roots(needed_by_wheels: list) -> list:
    """What the rehearsal venv installs: andrea's own dependencies that the device has, pytest (the tests
    step), and the device packages the carried wheels need."""
    device = set(names_in(DEVICE_LIST))
    block = re.search(r"^dependencies = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.S | re.M)
    lines = (block.group(1) if block else "").splitlines()
    deps = re.findall(r'"([^"]+)"', "\n".join(ln.split("#", 1)[0] for ln in lines))
    andrea = {canonicalize_name(Requirement(d).name) for d in deps}
    roots = {n for n in andrea if n in device} | {"pytest"} | set(needed_by_wheels)
    return sorted(roots)


def clean_env() -> dict:
    """This process's environment less what would let the rehearsal see this checkout's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "OUT")}


def rehearsal_venv(roots: list, base: str = sys.executable, name: str = "venv") -> Path:
    """A venv (of the python `base`) holding only packages on the device's list, at the device's versions
    where known (else at requirements.txt's pins; KEEP_PIN), reused while the same; fails if pip brought in
    anything the device lacks."""
    version = subprocess.run(
        [base, "-c", "import sys; print(sys.version_info[:2] >= (3, 12), sys.version)"],
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    ).stdout
    keep = set(KEEP_PIN) - ({"numpy"} if version.startswith("True") else set())
    device = versions_in(DEVICE_LIST)
    pinned = pins()
    pinned.update({n: v for n, v in device.items() if v and n not in keep})
    spec = [f"{n}=={pinned[n]}" for n in roots]
    venv = REHEARSAL / name
    py = venv / "bin" / "python"
    key = hashlib.sha256(json.dumps([base, version, spec]).encode()).hexdigest()
    if (venv / ".spec").is_file() and (venv / ".spec").read_text() == key and py.exists():
        return py
    print(f"== a rehearsal venv in {venv.relative_to(ROOT)} with {len(spec)} packages of the device's list", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, env=clean_env())
    constraints = venv / "constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in pinned.items()))
    pip = [str(py), "-m", "pip", "--disable-pip-version-check"]
    # pip runs in the venv's folder, without PYTHONPATH: the checkout's andrea.egg-info would count
    run = dict(check=True, cwd=venv, env=clean_env())
    if "torch" in roots and Path(base).resolve() == Path(sys.executable).resolve():
        link_torch(venv, pinned["torch"])
    # --no-compile: pip would byte-compile every module ahead (sympy alone: about 20 s); python compiles
    # what it imports, as on the device
    subprocess.run([*pip, "install", "-q", "--no-compile", "-c", str(constraints), *spec], **run)
    listed = json.loads(subprocess.run([*pip, "list", "--format=json"], capture_output=True, text=True, **run).stdout)
    extra = sorted(canonicalize_name(d["name"]) for d in listed if canonicalize_name(d["name"]) not in device)
    if extra:
        raise SystemExit(f"the rehearsal venv holds packages the device lacks: {', '.join(extra)}")
    (venv / ".spec").write_text(key)
    return py


def link_torch(venv: Path, version: str) -> None:
    """Torch for the rehearsal venv: this python's own install of the pinned release, linked into the venv's
    site-packages (its package folders and its dist-info, so pip sees it installed and installs only what it
    requires) rather than a second copy of about a gigabyte unpacked (about 40 s on 2 cores)."""
    from importlib.metadata import distribution

    dist = distribution("torch")
    if Version(dist.version).public != Version(version).public:
        return  # another torch here: the venv installs the pinned one
    site = next(venv.glob("lib/python*/site-packages"))
    tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    where = Path(str(dist.locate_file("")))
    for top in sorted(tops):
        if (where / top).exists() and not top.endswith(".pth") and top != "__pycache__":
            (site / top).symlink_to(where / top)


def device_env(python: Path, wheels: Path, site: Path, out: Path | None = None) -> dict:
    """The environment tools/gpu_device.sh runs in for a rehearsal: nothing of this checkout's venv."""
    env = clean_env()
    env.update(PYTHON=str(python), WHEELS=str(wheels), SITE=str(site))
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    if out is not None:
        env["OUT"] = str(out)
    return env


def without_wheels(wheels: Path, without: list, work: Path) -> Path:
    """A copy of a wheel folder less the named packages (a negative control), or the folder itself."""
    if not without:
        return wheels
    gone = {canonicalize_name(n) for n in without}
    unknown = gone - set(carried())
    if unknown:
        raise SystemExit(f"--without: not carried: {', '.join(sorted(unknown))}")
    kept = work / f"wheels-{wheels.name}"
    kept.mkdir()
    for f in wheels.glob("*.whl"):
        if parse_wheel_filename(f.name)[0] not in gone:
            shutil.copy2(f, kept / f.name)
    print(f"== negative control: {wheels.name} without {', '.join(sorted(gone))} (the rehearsal must fail)")
    return kept


def top_level_modules(wheel: Path) -> list:
    """The importable top-level modules and packages a wheel installs."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    mods = {n.split("/", 1)[0] for n in names if n.count("/") == 1 and n.endswith("/__init__.py")}  # packages
    mods |= {n.split(".", 1)[0] for n in names if "/" not in n and n.endswith((".py", ".so"))}  # modules
    return sorted(m for m in mods if m.isidentifier() and m != "ipykernel_launcher")  # the launcher starts a kernel


CP312_CHECK = """
import importlib, sys
sys.path.insert(0, "tools")
import gpu_check
mods = sys.argv[1:]
for m in mods:
    importlib.import_module(m)
import nbformat
from nbclient import NotebookClient
gpu_check.pin_kernel()
nb = nbformat.v4.new_notebook()
cell = "import sys, IPython, ipywidgets, altair, jupytext, matplotlib_inline\\n"
nb.cells = [nbformat.v4.new_code_cell(cell + "print('CP312-KERNEL', sys.version.split()[0])")]
gpu_check.execute(NotebookClient(nb, timeout=120, startup_timeout=90, kernel_name="python3"))
out = "".join(o.get("text", "") for o in nb.cells[0].outputs)
assert "CP312-KERNEL 3.12" in out, out
print(f"cp312: the {len(mods)} top-level modules of the carried wheels import, and a kernel ran a cell: pass")
"""


def find_python(version: str) -> str | None:
    """A working python of that version here: on PATH (a pyenv shim may refuse), else one of pyenv's."""
    found = [shutil.which(f"python{version}")]
    found += sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{version}*/bin/python{version}"))
    for exe in filter(None, found):
        r = subprocess.run(
            [exe, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, env=clean_env()
        )
        if r.returncode == 0 and r.stdout.startswith(version + "."):
            return exe
    return None


def rehearse_device_wheels(without: list, work: Path) -> int | None:
    """The very folder that travels (.whl/, cp312), on this machine's python3.12 (no torch: there is no CPU
    build for it here): installed with the device's command into a venv of device packages, every top-level
    module of the carried wheels imported, and a kernel run. None where this machine has no python3.12."""
    base = find_python(DEVICE_PY)
    if base is None:
        print(f"== cp312: no python{DEVICE_PY} here: the .whl/ folder itself is not rehearsed")
        return None
    needed = download(DEVICE_PY, DEVICE_DIR)
    venv_py = rehearsal_venv([n for n in device_roots(needed) if n != "torch"], base, "venv-cp312")
    wheels = without_wheels(DEVICE_DIR, without, work)
    site = work / "site-cp312"
    env = device_env(venv_py, wheels, site)
    print(f"== cp312: {DEVICE_DIR.name}/ on {venv_py.relative_to(ROOT)} (Python {DEVICE_PY}, without torch)")
    r = subprocess.run(["bash", str(ROOT / "tools" / "gpu_device.sh")], cwd=ROOT, env=dict(env, GPU_INSTALL_ONLY="1"))
    if r.returncode != 0:
        return r.returncode
    mods = sorted({m for f in wheels.glob("*.whl") for m in top_level_modules(f)})
    env["PYTHONPATH"] = f"{site}{os.pathsep}{ROOT}"
    return subprocess.run([str(venv_py), "-c", CP312_CHECK, *mods], cwd=ROOT, env=env).returncode


def rehearse(without: list, only: list, out: Path | None = None) -> int:
    t0 = time.perf_counter()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    wheels = ROOT / f".whl-cp{py.replace('.', '')}"
    needed = download(py, wheels)
    venv_py = rehearsal_venv(device_roots(needed))
    work = Path(tempfile.mkdtemp(prefix="andrea-gpu-rehearse-"))
    env = device_env(venv_py, without_wheels(wheels, without, work), work / "site", out)
    cmd = ["bash", str(ROOT / "tools" / "gpu_device.sh"), "--rehearse"] + (["--only", *only] if only else [])
    print(f"== {' '.join(cmd[1:])} with PYTHON={venv_py.relative_to(ROOT)} WHEELS={env['WHEELS']} SITE={env['SITE']}")
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    rc312 = None if only else rehearse_device_wheels(without, work)  # the full rehearsal only
    shutil.rmtree(work, ignore_errors=True)
    rc = rc or rc312 or 0
    print(f"== rehearsal {'passed' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - t0:.0f} s")
    return rc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_wheels.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("download", help="fill .whl/ with the carried wheels for the device (CPython 3.12)")
    r = sub.add_parser("rehearse", help="run the device command on the CPU, in a venv of device packages")
    r.add_argument("--without", nargs="+", default=[], metavar="NAME", help="leave these carried wheels out")
    r.add_argument("--only", nargs="+", default=[], metavar="STEP", help="rehearse only these steps")
    r.add_argument("--out", type=Path, help="a folder for the log and the table (as $OUT on the device)")
    a = p.parse_args(argv)
    if a.cmd == "download":
        download()
        return 0
    return rehearse(a.without, a.only, a.out)


if __name__ == "__main__":
    sys.exit(main())
