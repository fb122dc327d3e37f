"""A stored result's key must not depend on the reader's Python: ``files.code_hash`` on 3.10-3.13."""

import ast
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from andrea import files
from andrea.evidence import store
from conftest import ROOT, need

SOURCES = sorted(str(p.relative_to(ROOT)) for d in ("andrea", "tools", "tests") for p in (ROOT / d).rglob("*.py"))

# Loads andrea/files.py by its path (no package, no torch) and prints code_hash of each source.
HASHES = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("files", sys.argv[1])
files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(files)
root = sys.argv[2]
print(json.dumps({p: files.code_hash(open(root + "/" + p, encoding="utf-8").read()) for p in sys.argv[3:]}))
"""


def other_pythons() -> dict:
    """CPython 3.10+ interpreters installed here other than this one: {"3.12": path}."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [shutil.which(f"python3.{m}") for m in range(10, 20)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(str(pyenv / "versions" / "3.*" / "bin" / "python3")))
    found: dict = {}
    for exe in filter(None, candidates):
        try:
            r = subprocess.run(
                [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        v = r.stdout.strip()
        if r.returncode == 0 and v != here and tuple(map(int, v.split("."))) >= (3, 10):
            found.setdefault(v, exe)
    return found


@pytest.mark.skipif(sys.version_info[:2] not in ((3, 10), (3, 11)), reason="3.10 and 3.11 dump the same tree")
def test_canonical_dump_is_the_dump_of_python_311():
    """Every stored key was made with 3.11's ast.dump: the canonical form is that very string here, so
    no key changed when code_hash moved to it."""
    for path in SOURCES:
        tree = files._blank_annotations(files._strip_docstrings(ast.parse((ROOT / path).read_text("utf-8"))))
        assert files.canonical_dump(tree) == ast.dump(tree, annotate_fields=False), path


def test_the_differences_between_versions_do_not_count():
    """What later Pythons add (an empty ``type_params``, an empty f-string piece) changes no hash;
    a real change does."""
    src = "def f(x, w):\n    return f'{x:{w}}'\n"
    tree = ast.parse(src)
    base = files.canonical_dump(tree)
    fn = tree.body[0]
    fn.type_params = []  # what 3.12 adds to every function
    fn._fields = (*type(fn)._fields, "type_params")  # visible to the dump, as on 3.12
    spec = fn.body[0].value.values[0].format_spec
    spec.values.append(ast.Constant(""))  # what 3.12.1 adds to a nested format spec
    assert files.canonical_dump(tree) == base
    spec.values.append(ast.Constant("!"))
    assert files.canonical_dump(tree) != base
    assert files.code_hash(src) != files.code_hash(src.replace("x:", "w:"))


def test_the_same_keys_on_every_installed_python(tmp_path):
    """The code hashes of every module, and so the stored results' keys, are the same under every
    other CPython installed here (3.10, 3.12 and 3.13 on the project's machine) as under this one."""
    pythons = other_pythons()
    need(bool(pythons), "another CPython 3.10+ to compare the code hashes with (e.g. `pyenv install 3.12`)")
    mine = {p: files.code_hash((ROOT / p).read_text("utf-8")) for p in SOURCES}
    for version, exe in pythons.items():
        r = subprocess.run(
            [exe, "-c", HASHES, str(ROOT / "andrea" / "files.py"), str(ROOT), *SOURCES],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, f"python {version} ({exe}): {r.stderr[-2000:]}"
        theirs = json.loads(r.stdout)
        differ = [p for p in SOURCES if theirs[p] != mine[p]]
        assert not differ, f"python {version} hashes these modules differently: {differ}"
    # and the key of the training code itself, as the stored results carry it
    assert store.code_hash().startswith(files.source_hash(store.CODE_MODULES))
