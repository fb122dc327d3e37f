"""Re-key the stored results after modules were moved or renamed, without re-running anything.

A stored result (a grid in ``andrea/results/<grid>.json``, the trained model's
``andrea/results/trained/trained.json``, the explorer's ``andrea/results/explorer.json``) carries a
key made of ``files.source_hash`` of the code that computed it. That hash names the modules it
covers (``"model.config"``, ...), so moving a module changes every key although no number could
change. This tool carries the keys over, and only when it can show that nothing changed:

1. the code each hash covers at the old commit (``--old``, the modules under their old names) is the
   code it covers now (the same modules under their new names, ``RENAMED``): module by module, the
   syntax trees (as ``files.code_hash`` sees them: no docstrings, no type hints) are equal once each
   import is resolved to the module it names and that name is mapped through ``RENAMED``, a
   definition may have moved to another of the covered modules (``make_optimizer`` from ``train``
   to ``training.optimizer``), and a ``typing.Protocol`` class, which only describes an argument's
   type, is ignored;
2. a stored key is replaced only if it is exactly the key the old code computed for this very
   result (same torch, same grid spec, same trained-model or explorer settings): a result that was
   already stale before the move stays stale;
3. only the key's value changes in each file: the text is rewritten by replacing that one string,
   every other byte stays (``--check`` says what would change, and writes nothing).

    python tools/rekey.py --old 9f12014 --check    # what would change, and why it may
    python tools/rekey.py --old 9f12014            # rewrite the keys

The table below is the regrouping of ``andrea/`` into subpackages (model, training, measure,
evidence, views); a later move adds its own table.

``--same-text`` is the second case: the covered code reads its input text from another place, and
reads the same text. The chapters' corpus, once built by ``training.data`` from the installed Python
3.11, now ships as a file (``andrea/texts``). The proof: every covered module is the old one, syntax
tree for syntax tree, except for the definitions named in ``SAME_TEXT`` and the standard-library
imports they used; the old ``python_docs_corpus`` (run from the old commit's source, on a Python 3.11,
with an empty cache) returns the very string the new one returns; and then steps 2-3 above.

    python3.11 tools/rekey.py --same-text --old 3f6bb66 --check
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from andrea.files import _blank_annotations, _strip_docstrings  # noqa: E402

# old module name -> new module names (where its code is now), for the modules the keys cover
RENAMED = {
    "config": ("model.config",),
    "layers": ("model.layers",),
    "model": ("model.transformer",),
    "train": ("training.train", "training.optimizer"),
    "data": ("training.data",),
    "probe": ("measure.probe",),
    "runs": ("evidence.runs",),
    "explorer": ("views.explorer",),
}
# every module that moved (to resolve imports in the compared code), old name -> new name
MOVED = {
    **{old: new[0] for old, new in RENAMED.items()},
    "checkpoint": "training.checkpoint",
    "analysis": "measure.analysis",
    "papers": "measure.papers",
    "store": "evidence.store",
    "verdict": "evidence.verdict",
    "notebook": "views.notebook",
    "plots": "views.plots",
    "widgets": "views.widgets",
    "static_explorer": "views.static_explorer",
    "exercises": "views.exercises",
    "bench": "views.bench",
}
_DOTTED = re.compile(r"(?<![\w.])andrea\.(" + "|".join(sorted(MOVED, key=len, reverse=True)) + r")(?![\w])")
# where a name imported from an old module lives now, when it moved to another new module
MOVED_NAMES = {("train", "make_optimizer"): "training.optimizer"}
# the hashes, as they were at the old commit (module names under andrea/)
OLD_CODE_MODULES = ("config", "layers", "model", "train", "data", "probe", "runs")  # store.CODE_MODULES
OLD_EXPLORER_MODULES = ("config", "layers", "model", "probe", "explorer")  # explorer.shipped_key


def old_source(rev: str, name: str) -> str:
    path = f"andrea/{name.replace('.', '/')}.py"
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def new_source(name: str) -> str:
    return (ROOT / "andrea" / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8")


def old_source_hash(rev: str, modules) -> str:
    """``files.source_hash`` as the old commit computed it: the old names, the old files."""
    from andrea.files import code_hash

    h = hashlib.sha256()
    for name in sorted(modules):
        h.update(name.encode())
        h.update(code_hash(old_source(rev, name)).encode())
    h.update(f"py{sys.version_info.major}".encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# 1. The covered code is the same code
# ---------------------------------------------------------------------------------------------
def _absolute(package: str, node: ast.ImportFrom) -> str:
    """The module an ``from ... import`` names, under andrea/ ('' is andrea itself)."""
    if node.level:
        parts = package.split(".") if package else []
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))
    return (node.module or "").removeprefix("andrea").lstrip(".")


def _is_andrea(node: ast.ImportFrom) -> bool:
    return bool(node.level) or node.module == "andrea" or (node.module or "").startswith("andrea.")


class _Normalise(ast.NodeTransformer):
    """Each ``from X import a as b`` of the package becomes the text ``"andrea.<X.a, new name> as b"``:
    the very object it imports, under the new module names, wherever the import stands."""

    def __init__(self, package: str, old: bool):
        self.package, self.old = package, old

    def _target(self, module: str, name: str) -> str:
        if not self.old:
            return f"{module}.{name}" if module else name
        if not module:
            return MOVED.get(name, name)  # from . import store: the module store
        where = MOVED_NAMES.get((module, name), MOVED.get(module, module))
        return f"{where}.{name}"

    def visit_Call(self, node: ast.Call):
        """``source_hash(["data", ...])`` names modules: the old names are mapped to the new ones."""
        self.generic_visit(node)
        if self.old and isinstance(node.func, ast.Name) and node.func.id == "source_hash":
            for arg in node.args:
                for elt in getattr(arg, "elts", []):
                    if isinstance(elt, ast.Constant) and elt.value in MOVED:
                        elt.value = MOVED[elt.value]
        return node

    def visit_Constant(self, node: ast.Constant):
        """A text that names a moved module (``"python -m andrea.train"``) names its new place."""
        if self.old and isinstance(node.value, str):
            node.value = _DOTTED.sub(lambda m: "andrea." + MOVED[m.group(1)], node.value)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if not _is_andrea(node):
            return node
        module = _absolute(self.package, node)
        return [
            ast.Expr(ast.Constant(f"andrea.{self._target(module, a.name)} as {a.asname or a.name}")) for a in node.names
        ]


def _is_protocol(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ClassDef) and any(
        (isinstance(b, ast.Name) and b.id == "Protocol") or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
        for b in stmt.bases
    )


def _statements(source: str, package: str, old: bool, siblings: tuple = ()) -> tuple[list[str], set]:
    """The module's top-level statements, normalised, and apart from them what it imports from
    outside the package (a set: a module split in two imports torch twice). Left out: imports from
    ``siblings`` (the other new modules that hold the old module's code), ``typing.Protocol``
    classes and their import."""
    tree = _Normalise(package, old).visit(_blank_annotations(_strip_docstrings(ast.parse(source))))
    out, imports = [], set()
    for stmt in tree.body:  # type: ignore[attr-defined]
        if _is_protocol(stmt):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            module = getattr(stmt, "module", None) or ""
            imports |= {(module, a.name, a.asname) for a in stmt.names} - {("typing", "Protocol", None)}
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            text = str(stmt.value.value)
            if any(text.startswith(f"andrea.{m}.") for m in siblings):
                continue
        out.append(ast.dump(stmt, annotate_fields=False))
    return sorted(out), imports


def same_code(rev: str) -> list[str]:
    """Problems (none: the code is the same) between each old covered module and its new modules."""
    problems = []
    for old, news in RENAMED.items():
        before, imports_before = _statements(old_source(rev, old), "", old=True)
        after, imports_after = [], set()
        for new in news:
            stmts, imps = _statements(
                new_source(new), new.rpartition(".")[0], False, tuple(m for m in news if m != new)
            )
            after += stmts
            imports_after |= imps
        after.sort()
        if before != after or imports_before != imports_after:
            lost = [x for x in before if x not in after] + sorted(map(str, imports_before - imports_after))
            gained = [x for x in after if x not in before] + sorted(map(str, imports_after - imports_before))
            problems.append(
                f"andrea/{old}.py -> {', '.join(news)}: {len(lost)} old and {len(gained)} new statement(s) differ "
                f"(first old: {lost[:1]!s:.400}; first new: {gained[:1]!s:.400})"
            )
    return problems


# ---------------------------------------------------------------------------------------------
# 2-3. The stored keys
# ---------------------------------------------------------------------------------------------
def planned(rev: str) -> list[tuple[Path, str, str]]:
    """(file, stored key, new key) for every stored result the old code had made."""
    from andrea.evidence import store
    from andrea.evidence.grids import GRIDS
    from andrea.files import source_hash
    from andrea.views import explorer

    mapped = sorted(n for old in OLD_CODE_MODULES for n in RENAMED[old])
    if mapped != sorted(store.CODE_MODULES):
        raise SystemExit(f"store.CODE_MODULES {store.CODE_MODULES} is not the old set {OLD_CODE_MODULES} renamed")
    new_explorer = sorted(n for old in OLD_EXPLORER_MODULES for n in RENAMED[old] if n != "training.optimizer")
    old_code = old_source_hash(rev, OLD_CODE_MODULES)
    old_explorer = old_source_hash(rev, OLD_EXPLORER_MODULES)
    out = _grid_and_trained_keys(old_code, sorted(GRIDS))
    path = store.path(explorer.SHIPPED)
    stored = json.loads(path.read_text())["key"]
    new = explorer.shipped_key()
    if new.split("-", 1)[0] != source_hash(new_explorer):
        raise SystemExit(f"explorer.shipped_key() does not hash {new_explorer}")
    if stored != new:
        if stored != f"{old_explorer}-{new.split('-', 1)[1]}":
            raise SystemExit(f"{path}: stored key {stored} is not what the old code made ({old_explorer}-...)")
        out.append((path, stored, new))
    return out


# ---------------------------------------------------------------------------------------------
# --same-text: the covered code reads the same text from another place
# ---------------------------------------------------------------------------------------------
SAME_TEXT = {  # module -> the definitions that may differ (they return the same text), and their imports
    "training.data": (
        {"python_docs_corpus", "_stdlib_docstrings", "_SKIP_DIRS", "DOCS_TEXT", "DOCS_SHA256"},
        {"ast", "sysconfig", "lzma"},
    )
}


def _defines(stmt: ast.stmt) -> set:
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, ast.Assign):
        return {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    return set()


def _rest(source: str, package: str, names: set, stdlib: set) -> tuple[list[str], set]:
    """``_statements`` less the definitions in ``names`` and the imports of the modules in ``stdlib``."""
    tree = _Normalise(package, False).visit(_blank_annotations(_strip_docstrings(ast.parse(source))))
    kept = [st for st in tree.body if not (_defines(st) & names)]  # type: ignore[attr-defined]
    tree.body = kept  # type: ignore[attr-defined]
    stmts, imports = _statements(ast.unparse(tree), package, False)
    return stmts, {i for i in imports if not (i[0] == "" and i[1] in stdlib)}


def same_text(rev: str) -> list[str]:
    """Problems (none: the covered code computes what it did, from the same text)."""
    import os
    import tempfile
    import types

    from andrea.evidence import store

    problems = []
    for name in store.CODE_MODULES:
        names, stdlib = SAME_TEXT.get(name, (set(), set()))
        package = name.rpartition(".")[0]
        before = _rest(old_source(rev, name), package, names, stdlib)
        after = _rest(new_source(name), package, names, stdlib)
        if before != after:
            lost = [x for x in before[0] if x not in after[0]] + sorted(map(str, before[1] - after[1]))
            gained = [x for x in after[0] if x not in before[0]] + sorted(map(str, after[1] - before[1]))
            problems.append(f"andrea/{name}: first old {lost[:1]!s:.300}; first new {gained[:1]!s:.300}")
    if sys.version_info[:2] != (3, 11):
        return problems + [f"the old text is Python 3.11's docs: run this with Python 3.11, not {sys.version}"]
    from andrea.training import data

    with tempfile.TemporaryDirectory() as empty:
        before_cache = os.environ.get("ANDREA_CACHE")
        os.environ["ANDREA_CACHE"] = empty  # the old code builds the text from the installed Python
        try:
            old = types.ModuleType("andrea.training._data_old")
            old.__package__ = "andrea.training"
            sys.modules[old.__name__] = old  # dataclasses look their module up
            exec(compile(old_source(rev, "training.data"), f"{rev}:andrea/training/data.py", "exec"), old.__dict__)
            old_text = old.python_docs_corpus()
        finally:
            sys.modules.pop("andrea.training._data_old", None)
            if before_cache is None:
                os.environ.pop("ANDREA_CACHE", None)
            else:
                os.environ["ANDREA_CACHE"] = before_cache
    new_text = data.python_docs_corpus()
    digest = hashlib.sha256(new_text.encode("utf-8")).hexdigest()[:16]
    if old_text != new_text:
        problems.append(f"the old code's text ({len(old_text)} characters) is not the shipped text ({len(new_text)})")
    else:
        print(f"the old code's text is the shipped text: {len(new_text):,} characters, digest {digest}")
    return problems


def planned_same_names(rev: str) -> list[tuple[Path, str, str]]:
    """(file, stored key, new key) for every stored result that the old code had made, the modules
    under the same names: the grids, declared or not, and the trained model (the explorer's key covers
    none of ``SAME_TEXT``'s modules)."""
    from andrea.evidence import store
    from andrea.evidence.grids import DECLARED, GRIDS

    return _grid_and_trained_keys(old_source_hash(rev, store.CODE_MODULES), sorted(GRIDS) + sorted(DECLARED))


def _grid_and_trained_keys(old_code: str, names: list[str]) -> list[tuple[Path, str, str]]:
    """(file, stored key, new key) for the grids ``names`` and the trained model's log, whose stored keys
    the old code (hash ``old_code``) made; a key that is neither current nor the old code's stops it."""
    import torch

    from andrea.evidence import store
    from andrea.evidence.grids import grid
    from andrea.trained import model as trained

    torch_part = f"torch{torch.__version__.split('+')[0]}"
    out = []
    for name in names:
        g = grid(name)
        path = store.path(name)
        stored = json.loads(path.read_text())["key"]
        if stored == g.key():
            continue  # already current
        if stored != f"{old_code}-{torch_part}-{g.spec_hash()}":
            raise SystemExit(f"{path}: stored key {stored} is not what the old code made ({old_code}-{torch_part}-...)")
        out.append((path, stored, g.key()))
    stored = json.loads(trained.LOG.read_text())["key"]
    spec = trained.key().split("-", 1)[1]
    if stored != trained.key():
        if stored != f"{old_code}-{spec}":
            raise SystemExit(f"{trained.LOG}: stored key {stored} is not what the old code made ({old_code}-{spec})")
        out.append((trained.LOG, stored, trained.key()))
    return out


def rewrite(path: Path, old: str, new: str, write: bool) -> None:
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"{path}: the key {old} occurs {text.count(old)} times, expected once")
    after = text.replace(old, new)
    a, b = json.loads(text), json.loads(after)
    if a.pop("key") != old or b.pop("key") != new or a != b:
        raise SystemExit(f"{path}: replacing the key would change more than the key")
    if write:
        path.write_text(after, encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/rekey.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--old", required=True, help="the commit whose code made the stored results (before the move)")
    p.add_argument("--check", action="store_true", help="say what would change; write nothing")
    p.add_argument("--same-text", action="store_true", help="the covered code reads the same text from elsewhere")
    a = p.parse_args(argv)
    if a.same_text:
        problems = same_text(a.old)
        if problems:
            print("the covered code changed, not only where it reads its text: nothing re-keyed", *problems, sep="\n  ")
            return 1
        print(f"the code under {sorted(SAME_TEXT)} at {a.old} computes what it computes now, from the same text")
        plan = planned_same_names(a.old)
        for path, old, new in plan:
            rewrite(path, old, new, write=not a.check)
            print(f"{'would re-key' if a.check else 're-keyed'} {path.relative_to(ROOT)}: {old} -> {new}")
        return 0
    problems = same_code(a.old)
    if problems:
        print("the covered code changed, not only its place: nothing re-keyed", *problems, sep="\n  ")
        return 1
    print(f"the code under {sorted(RENAMED)} at {a.old} is the code under their new names now")
    plan = planned(a.old)
    for path, old, new in plan:
        rewrite(path, old, new, write=not a.check)
        print(f"{'would re-key' if a.check else 're-keyed'} {path.relative_to(ROOT)}: {old} -> {new}")
    if not plan:
        print("every stored key is current: nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
