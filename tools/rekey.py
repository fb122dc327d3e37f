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

``--added-option`` is the third case: a config option gains a value (``ADDED_OPTION``: ``norm="final"``,
chapter 2's control), and the code that the new value needs runs only for it; and an error gets a
clearer message (a full disk while a checkpoint is written). The proof: every module a stored key covers
is the old one, syntax tree for syntax tree, once the new value is taken out of the tuple of allowed
values, every ``if <...>.norm == "final": ...`` without an ``else`` is removed, and every ``except``
that only raises is removed (in the old code too; it must follow the handlers that do something else,
and its helpers, ``ERROR_HELPERS``, must be called from nowhere else); the new value is not one the
old code accepted (so no stored run used it), and an error ends a run without a result either way;
then steps 2-3 above, for the grids, the trained model, its probes and the explorer's shipped
measurements.

    python tools/rekey.py --added-option --old b243f40 --check

``--moved-out`` is the fourth case: definitions that no covered code reaches leave a covered module for a
module no key covers (``MOVED_OUT``: the training command line, ``main``, from ``training/train.py`` to
``training/cli.py``). The proof: every covered module is the old one, statement for statement and in order,
less statements that each bind one listed name (a definition, an assignment, one name's import), the
``if __name__ == "__main__":`` block aside (a script's entry: no stored result ran a covered module as a
script); no removed name is used by what stays, nor reached by another covered module (imported from the
module, or read as an attribute of it); a removed import of the package leaves its module imported, and any
other removed import is of the standard library; no covered module imports the new module; then steps 2-3.

    python tools/rekey.py --moved-out --old 0a1b2c3 --check

Two rules hold in every proof. Statements are compared in the order written (a name bound twice, ``LR =
1e-3; LR = 3e-3``, is not its swap); only imports, which an isort reorders, form a set, and only while no
name they bind is bound twice at the top level; a module split in two must keep each part's order. And a
guard ``if <subject>.norm == "final":`` is dropped only when its subject is plain names and attributes: a
call, an assignment expression (``:=``) or a subscript in it would run for the old values too.

Beside the proof, the re-keying re-runs a sample of the carried runs in full (``rerun_sample``: the
cheapest run of each carried grid that trained to the end on this kind of CPU, the three cheapest of
those) and refuses, writing nothing, if any stored number of them comes out different: a change that moves
only the later steps of a run (the first steps re-run by ``make test`` would not show it) is caught there.
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
from typing import Optional

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


def _package_import(stmt: ast.stmt) -> Optional[str]:
    """The text ``"andrea.<module>.<name> as <bound>"`` that ``_Normalise`` made of an import from the
    package, or None for any other statement."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
        text = stmt.value.value
        return text if text.startswith("andrea.") and " as " in text else None
    return None


def _statements(source: str, package: str, old: bool, siblings: tuple = ()) -> tuple[list[str], set]:
    """The module's top-level statements, normalised and in the module's order, and apart from them its
    imports (a set: a module split in two imports torch twice, and an isort may reorder them). Left out:
    imports from ``siblings`` (the other new modules that hold the old module's code), ``typing.Protocol``
    classes and their import. Imports are a set only while no name they bind is bound twice at the top
    level (by two imports, or by an import and a definition): then the order decides what the name is,
    and the imports stay in place among the statements, compared in order."""
    tree = _Normalise(package, old).visit(_blank_annotations(_strip_docstrings(ast.parse(source))))
    body = [st for st in tree.body if not _is_protocol(st)]
    bound: list[str] = []
    for stmt in body:
        if isinstance(stmt, ast.Import):
            bound += [a.asname or a.name.split(".")[0] for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            bound += [a.asname or a.name for a in stmt.names]
        elif (text := _package_import(stmt)) is not None:
            bound.append(text.rpartition(" as ")[2])
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.append(stmt.name)
        else:  # any name the statement stores (an assignment, a loop's target, an augmented assignment)
            bound += sorted({n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
    unordered = len(bound) == len(set(bound))
    out: list[str] = []
    imports: set = set()
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            module = getattr(stmt, "module", None) or ""
            names = {(module, a.name, a.asname) for a in stmt.names} - {("typing", "Protocol", None)}
            if unordered:
                imports |= names
            else:
                out += [str(n) for n in sorted(names, key=str)]
            continue
        text = _package_import(stmt)
        if text is not None:
            if any(text.startswith(f"andrea.{m}.") for m in siblings):
                continue
            if unordered:
                imports.add(text)
                continue
        out.append(ast.dump(stmt, annotate_fields=False))
    return out, imports  # in the module's order: a name bound twice is bound in the order written


def _interleaved(before: list, parts: list) -> bool:
    """Whether ``before`` (the old module's statements, in order) is an interleaving of ``parts`` (the new
    modules' statements, each in its own order): a module split in two keeps the order of each part's
    statements, and every statement is in exactly one part."""
    from functools import lru_cache

    if len(before) != sum(map(len, parts)):
        return False

    @lru_cache(maxsize=None)
    def fits(at: tuple) -> bool:
        k = sum(at)
        if k == len(before):
            return True
        return any(
            at[j] < len(part) and part[at[j]] == before[k] and fits(at[:j] + (at[j] + 1,) + at[j + 1 :])
            for j, part in enumerate(parts)
        )

    return fits(tuple(0 for _ in parts))


def same_code(rev: str) -> list[str]:
    """Problems (none: the code is the same) between each old covered module and its new modules."""
    problems = []
    for old, news in RENAMED.items():
        before, imports_before = _statements(old_source(rev, old), "", old=True)
        after, parts, imports_after = [], [], set()
        for new in news:
            stmts, imps = _statements(
                new_source(new), new.rpartition(".")[0], False, tuple(m for m in news if m != new)
            )
            after += stmts
            parts.append(stmts)
            imports_after |= imps
        if not _interleaved(before, parts) or imports_before != imports_after:
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
    kept = [st for st in tree.body if not (_defines(st) & names)]
    tree.body = kept
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


# ---------------------------------------------------------------------------------------------
# --added-option: a config option gains a value, and only that value reaches the new code
# ---------------------------------------------------------------------------------------------
# (option, the tuple of its allowed values, the new value): chapter 2's control, no LayerNorm in the
# blocks but the stack's final one kept
ADDED_OPTION = ("norm", "NORMS", "final")
EXPLORER_MODULES = ("model.config", "model.layers", "model.transformer", "measure.probe", "views.explorer")


def _plain_subject(node: ast.expr) -> bool:
    """``cfg``, ``self.cfg.inner``: plain names and attributes, nothing else (no call, no assignment
    expression, no subscript, no tuple): evaluating it runs nothing of the code's own."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Load)) for n in ast.walk(node))


def _only_for(stmt: ast.stmt, option: str, value: str) -> bool:
    """``if <subject>.norm == "final": ...`` (or ``if norm == "final"``) with no ``else``, the subject plain
    names and attributes (``_plain_subject``): a statement that does nothing unless the option has the new
    value (reading an attribute and comparing two strings have no side effects; a call, a ``:=`` or a
    subscript in the subject would run for every old value too, so such a guard is kept and compared)."""
    if not isinstance(stmt, ast.If) or stmt.orelse:
        return False
    t = stmt.test
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return False
    left, right = t.left, t.comparators[0]
    named = (isinstance(left, ast.Attribute) and left.attr == option) or (
        isinstance(left, ast.Name) and left.id == option
    )
    return named and _plain_subject(left) and isinstance(right, ast.Constant) and right.value == value


# Module-level helpers that only the dropped error handlers call (checked: nothing else names them).
ERROR_HELPERS = {"_write_error"}


def _only_raises(handler: ast.ExceptHandler) -> bool:
    return len(handler.body) == 1 and isinstance(handler.body[0], ast.Raise)


class _DropAdded(ast.NodeTransformer):
    """The code as the stored runs ran it: every statement ``_only_for`` the new value removed, the value
    taken out of the tuple of allowed values, and every ``except`` that only raises (another error, with a
    clearer message) removed, with the helpers in ``ERROR_HELPERS`` that only such handlers call. A
    handler that only raises changes nothing when no error occurs, and when one does the run fails
    either way; it must come after the handlers that do something else, so that it catches only what
    used to propagate (``misplaced`` counts those that do not). ``dropped`` counts what was removed."""

    def __init__(self, option: str, allowed: str, value: str):
        self.option, self.allowed, self.value, self.dropped, self.misplaced = option, allowed, value, 0, 0

    def generic_visit(self, node):
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [st for st in stmts if not _only_for(st, self.option, self.value)]
                self.dropped += len(stmts) - len(kept)
                setattr(node, name, kept)
        if isinstance(node, ast.Try) and node.handlers:
            raising = [_only_raises(h) for h in node.handlers]
            first = raising.index(True) if True in raising else len(raising)
            self.misplaced += sum(1 for r in raising[first:] if not r)
            self.dropped += sum(raising)
            node.handlers = [h for h, r in zip(node.handlers, raising) if not r]
        return node

    def visit_Assign(self, node: ast.Assign):
        self.generic_visit(node)
        if [getattr(t, "id", None) for t in node.targets] == [self.allowed] and isinstance(node.value, ast.Tuple):
            elts = [e for e in node.value.elts if not (isinstance(e, ast.Constant) and e.value == self.value)]
            self.dropped += len(node.value.elts) - len(elts)
            node.value.elts = elts
        return node

    def visit_Module(self, node: ast.Module):
        self.generic_visit(node)
        helpers = [st for st in node.body if isinstance(st, ast.FunctionDef) and st.name in ERROR_HELPERS]
        node.body = [st for st in node.body if st not in helpers]
        named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        self.misplaced += sum(1 for h in helpers if h.name in named)  # still called from kept code
        self.dropped += len(helpers)
        return node


def added_option(rev: str, new_rev: Optional[str] = None) -> list[str]:
    """Problems (none: for every value the old code accepted, the new code runs the old statements);
    the new code is the working tree's, or commit ``new_rev``'s."""
    from andrea.evidence import store
    from andrea.trained.model import PROBE_CODE

    option, allowed, value = ADDED_OPTION
    old_config = ast.parse(old_source(rev, "model.config"))
    old_values = next(
        ast.literal_eval(st.value)
        for st in old_config.body
        if isinstance(st, ast.Assign) and [getattr(t, "id", None) for t in st.targets] == [allowed]
    )
    problems = [f"{value!r} is one of the old {allowed} {old_values}: not a new value"] if value in old_values else []
    for name in sorted(set(store.CODE_MODULES) | set(EXPLORER_MODULES) | set(PROBE_CODE)):
        now = new_source(name) if new_rev is None else old_source(new_rev, name)
        problem, dropped = same_but_for_added(old_source(rev, name), now)
        if problem:
            problems.append(f"andrea/{name}: {problem}")
        elif dropped:
            print(
                f"andrea/{name}: {dropped} statement(s), value(s) or handler(s) "
                f"reached only by {option}={value!r} or by an error"
            )
    return problems


def same_but_for_added(old: str, new: str, added: tuple = ADDED_OPTION) -> tuple[str, int]:
    """("", n): the new source runs the old one's statements for every old value, plus n things that
    only the new value or an error reaches; else (where they differ, 0)."""
    from andrea.files import canonical_dump

    before_drop, after_drop = _DropAdded(*added), _DropAdded(*added)
    before = canonical_dump(before_drop.visit(_blank_annotations(_strip_docstrings(ast.parse(old)))))
    after = canonical_dump(after_drop.visit(_blank_annotations(_strip_docstrings(ast.parse(new)))))
    if after_drop.misplaced:
        return f"{after_drop.misplaced} raising handler(s) or helper(s) reach code the stored runs ran", 0
    if before == after:
        return "", after_drop.dropped - before_drop.dropped
    i = next((k for k, (x, y) in enumerate(zip(before, after)) if x != y), min(len(before), len(after)))
    return f"differs beyond the new value's code, at ...{after[max(0, i - 120) : i + 120]}...", 0


def planned_added_option(rev: str) -> list[tuple[Path, str, str]]:
    """(file, stored key, new key) for every result whose key covers the changed modules: the grids, the
    trained model, the explorer's shipped measurements and the trained model's probes."""
    from andrea.evidence import store
    from andrea.evidence.grids import DECLARED, GRIDS
    from andrea.files import source_hash
    from andrea.trained import model as trained
    from andrea.views import explorer

    stored = sorted(GRIDS) + sorted(n for n in DECLARED if store.path(n).exists())  # a declared grid may have none
    out = _grid_and_trained_keys(old_source_hash(rev, store.CODE_MODULES), stored)
    for path, modules, new in (
        (store.path(explorer.SHIPPED), EXPLORER_MODULES, explorer.shipped_key()),
        (trained.PROBES, trained.PROBE_CODE, trained.probes_key()),
    ):
        code, rest = new.split("-", 1)
        if code != source_hash(modules):
            raise SystemExit(f"{path}: its key does not hash {modules}")
        stored = json.loads(path.read_text())["key"]
        if stored == new:
            continue
        if stored != f"{old_source_hash(rev, modules)}-{rest}":
            raise SystemExit(f"{path}: stored key {stored} is not what the old code made")
        out.append((path, stored, new))
    return out


# ---------------------------------------------------------------------------------------------
# --moved-out: definitions no covered code reaches moved out to a module no key covers
# ---------------------------------------------------------------------------------------------
# covered module -> (the names whose definitions or imports may leave it, the unhashed module they go to).
# The training command line (main) left training/train.py for training/cli.py, with the imports only it used.
MOVED_OUT = {"training.train": ({"main", "EXIT_DIVERGED", "argparse", "describe", "load_token_data"}, "training.cli")}


def _one_per_alias(body: list) -> list:
    """The statements, each import split into one statement per name it binds (``from x import a, b`` is two),
    so that one name's import can go while the others stay."""
    out = []
    for st in body:
        if isinstance(st, (ast.Import, ast.ImportFrom)) and len(st.names) > 1:
            for a in st.names:
                one = ast.Import(names=[a]) if isinstance(st, ast.Import) else ast.ImportFrom(st.module, [a], st.level)
                out.append(one)
        else:
            out.append(st)
    return out


def _script_only(st: ast.stmt) -> bool:
    """``if __name__ == "__main__": ...`` (no else): it runs only when the module is run as a script
    (``python -m``), never when the code that computes a stored result imports it."""
    t = st.test if isinstance(st, ast.If) else None
    return (
        isinstance(st, ast.If)
        and not st.orelse
        and isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and len(t.ops) == 1
        and isinstance(t.ops[0], ast.Eq)
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value == "__main__"
    )


def _binds(st: ast.stmt) -> Optional[tuple[str, str]]:
    """(the one name ``st`` binds, its kind) for a statement that only binds a name: a function or class
    definition, an assignment of names, an import of one name; else None."""
    if isinstance(st, (ast.FunctionDef, ast.ClassDef)):
        return st.name, "definition"
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        return st.targets[0].id, "assignment"
    if isinstance(st, ast.Import) and len(st.names) == 1:
        a = st.names[0]
        return (a.asname or a.name.split(".")[0]), f"import {a.name}"
    if isinstance(st, ast.ImportFrom) and len(st.names) == 1:
        a = st.names[0]
        return (a.asname or a.name), f"from {st.module or ''} import {a.name}"
    text = _package_import(st)
    if text is not None:
        return text.rpartition(" as ")[2], f"import {text.partition(' as ')[0]}"
    return None


def _mentions(tree: ast.AST) -> set:
    """Every identifier ``tree`` names: names, attributes, imported names, keyword arguments, and strings that
    are identifiers (``getattr(m, "main")``)."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.alias):
            out |= {n.name, n.asname or n.name, n.name.split(".")[0]}
        elif isinstance(n, ast.keyword) and n.arg:
            out.add(n.arg)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
            if n.value.startswith("andrea.") and " as " in n.value:  # a package import, normalised
                out |= set(n.value.partition(" as ")[0].split(".")) | {n.value.rpartition(" as ")[2]}
    return out


def same_but_moved_out(old: str, new: str, package: str, names: set) -> tuple[str, list[str]]:
    """("", what was removed) if the new source is the old one with only statements removed that bind one of
    ``names`` (a definition, a name's assignment, one name's import), in the same order otherwise, the
    ``if __name__ == "__main__":`` block aside (the script's entry, which no stored result ran); a removed
    name is mentioned nowhere in what stays; a removed import of the package leaves its module imported by
    what stays, and a removed import of anything else is of the standard library. Else (the problem, [])."""

    def body(src: str) -> list:
        tree = _Normalise(package, False).visit(_blank_annotations(_strip_docstrings(ast.parse(src))))
        return [st for st in _one_per_alias(tree.body) if not _script_only(st)]

    before, after = body(old), body(new)
    dump = lambda st: ast.dump(st, annotate_fields=False)  # noqa: E731
    removed: list = []
    j = 0
    for st in before:  # the new statements are the old ones in order, less some that bind a listed name
        if j < len(after) and dump(after[j]) == dump(st):
            j += 1
            continue
        b = _binds(st)
        if b is None or b[0] not in names:
            return f"differs beyond the removed definitions, at the old statement {dump(st)!s:.300}", []
        removed.append(st)
    if j < len(after):
        return f"differs beyond the removed definitions: a new statement {dump(after[j])!s:.300}", []
    gone = {_binds(st)[0]: _binds(st)[1] for st in removed}  # type: ignore[index]
    still = _mentions(ast.Module(body=after, type_ignores=[])) & set(gone)
    if still:
        return f"removed, but still used by the code that stays: {sorted(still)}", []
    stays = {t.partition(" as ")[0].rpartition(".")[0] for st in after if (t := _package_import(st)) is not None}
    for name, kind in gone.items():
        if kind.startswith("import andrea."):
            if kind.removeprefix("import ").rpartition(".")[0] not in stays:
                return f"the import of {name!r} ({kind}) removed its module from what the code imports", []
        elif kind.startswith(("import ", "from ")):
            module = kind.split()[1].split(".")[0]
            if module not in sys.stdlib_module_names:
                return (
                    f"the import of {name!r} ({kind}) is not of the standard library: importing it may do something",
                    [],
                )
    return "", [f"{name} ({kind})" for name, kind in gone.items()]


def moved_out(rev: str, new_rev: Optional[str] = None) -> list[str]:
    """Problems (none: every covered module runs the old statements, less definitions and imports that no
    covered code reaches, now in modules no key covers); the new code is the working tree's, or ``new_rev``'s."""
    from andrea.evidence import store
    from andrea.trained.model import PROBE_CODE

    covered = sorted(set(store.CODE_MODULES) | set(EXPLORER_MODULES) | set(PROBE_CODE))
    problems = []
    homes = {home for _, home in MOVED_OUT.values()}
    if homes & set(covered):
        problems.append(f"{sorted(homes & set(covered))} are covered by a key: moving code there changes nothing")
    gone: dict[str, set] = {}
    for name in covered:
        now = new_source(name) if new_rev is None else old_source(new_rev, name)
        names, _ = MOVED_OUT.get(name, (set(), ""))
        problem, removed = same_but_moved_out(old_source(rev, name), now, name.rpartition(".")[0], names)
        if problem:
            problems.append(f"andrea/{name}: {problem}")
        elif removed:
            gone[name] = {r.split()[0] for r in removed}
            print(f"andrea/{name}: removed {', '.join(removed)}, reached by no covered code")
    for name in covered:  # no covered module reaches what left, nor the module it went to
        now = new_source(name) if new_rev is None else old_source(new_rev, name)
        tree = _Normalise(name.rpartition(".")[0], False).visit(_strip_docstrings(ast.parse(now)))
        tree.body = [st for st in tree.body if not _script_only(st)]
        imported = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        imported = [t for t in imported if t.startswith("andrea.") and " as " in t]  # the package's imports
        for home in homes:
            if any(t.startswith((f"andrea.{home}.", f"andrea.{home} ")) for t in imported):
                problems.append(f"andrea/{name} imports from andrea/{home}, a module no key covers")
        for owner, names in gone.items():
            if owner == name:
                continue
            aliases = {t.rpartition(" as ")[2] for t in imported if t.partition(" as ")[0] == f"andrea.{owner}"}
            reached = {
                n for t in imported for n in names if t.startswith((f"andrea.{owner}.{n} ", f"andrea.{owner}.* "))
            }
            for node in ast.walk(tree):  # owner.main, getattr(owner, "main") (or any getattr on it)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                    reached |= {node.attr} & names
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                    if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in aliases:
                        what = node.args[1] if len(node.args) > 1 else None
                        reached |= {str(what.value)} & names if isinstance(what, ast.Constant) else set(names)
            if reached:
                problems.append(f"andrea/{name} reaches {sorted(reached)}, removed from andrea/{owner}")
    return problems


# ---------------------------------------------------------------------------------------------
# Beside each proof: a sample of the carried runs re-run in full
# ---------------------------------------------------------------------------------------------
SAMPLE_RUNS = 3  # the cheapest carried runs, from as many grids, re-run in full before any key is carried


def sample(plan: list, runs: int = SAMPLE_RUNS) -> list[tuple[str, int, float]]:
    """(grid, cell index, stored seconds) of the runs ``rerun_sample`` re-runs: of each grid ``plan`` carries,
    its cheapest run that trained to the end on this kind of CPU (``store.cpu_identity``, recorded with each
    run: a run re-made on the kind of CPU that made it gives the same numbers to the last digit); of those,
    the ``runs`` cheapest, so from ``runs`` grids."""
    from andrea.evidence import store
    from andrea.evidence.grids import DECLARED, GRIDS

    carried = {path for path, _, _ in plan}
    here = store.cpu_identity()
    cheapest = []
    for name in sorted(set(GRIDS) | set(DECLARED)):
        if store.path(name) not in carried:
            continue
        cells = json.loads(store.path(name).read_text(encoding="utf-8"))["cells"]
        mine = [
            (float(c["result"]["seconds"]), i)
            for i, c in enumerate(cells)
            if c["result"].get("cpu") == here and not c["result"].get("diverged")
        ]
        if mine:
            secs, i = min(mine)
            cheapest.append((secs, name, i))
    return [(name, i, secs) for secs, name, i in sorted(cheapest)[:runs]]


def rerun_sample(plan: list, runs: int = SAMPLE_RUNS, run_cell=None) -> list[str]:
    """Problems (none: each sampled run, re-made from scratch by today's code, gave its stored numbers
    exactly). The syntax proofs say that the code runs the same statements; this says, on a few runs in full,
    that it computes the same numbers: a change the proof missed that moves any number of a whole run (the
    learning rate from step 50 on, which the first steps do not show) is refused. Refused too: a plan that
    carries grids of which no run was trained on this kind of CPU (nothing to compare exactly)."""
    from andrea.evidence import store
    from andrea.evidence.grids import DECLARED, GRIDS, grid

    if run_cell is None:
        from andrea.evidence.runs import run_cell
    grid_files = {store.path(n) for n in set(GRIDS) | set(DECLARED)}
    grids = [p for p, _, _ in plan if p in grid_files]
    chosen = sample(plan, runs)
    if not chosen:
        if not grids:
            return []
        return [
            f"none of the {len(grids)} carried grid(s) has a run trained to the end on this kind of CPU "
            f"({store.cpu_identity()}): re-key on a machine of the kind that trained them, where a re-run must "
            f"give the stored numbers exactly"
        ]
    problems = []
    for name, i, secs in chosen:
        g = grid(name)
        stored = json.loads(store.path(name).read_text(encoding="utf-8"))["cells"][i]["result"]
        print(f"re-running {name} cell {i} ({g.cells[i].label}) in full: {secs:.0f} s when stored ...", flush=True)
        fresh = json.loads(json.dumps(run_cell(g.cells[i], threads=1)))  # as the store writes it
        differ = [
            k
            for k in sorted(fresh)
            if k != "seconds" and json.dumps(stored.get(k), sort_keys=True) != json.dumps(fresh[k], sort_keys=True)
        ]
        if differ:
            k = differ[0]
            problems.append(
                f"{name} cell {i} ({g.cells[i].label}) re-ran to other numbers: {', '.join(differ)} differ "
                f"(final_val_loss stored {stored.get('final_val_loss')}, now {fresh.get('final_val_loss')}; "
                f"first: {k})"
            )
        else:
            print(f"  {name} cell {i}: every stored number again (final validation loss {fresh['final_val_loss']})")
    return problems


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


def _rekey(plan: list, check: bool) -> int:
    """Re-run the sample (``rerun_sample``), then rewrite the keys (or, with ``check``, say what would
    change): 1 and nothing written if a sampled run gave other numbers."""
    problems = rerun_sample(plan)
    if problems:
        print("a carried run re-ran to other numbers: nothing re-keyed", *problems, sep="\n  ")
        return 1
    for path, old, new in plan:
        rewrite(path, old, new, write=not check)
        print(f"{'would re-key' if check else 're-keyed'} {path.relative_to(ROOT)}: {old} -> {new}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/rekey.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--old", required=True, help="the commit whose code made the stored results (before the move)")
    p.add_argument("--check", action="store_true", help="say what would change; write nothing")
    p.add_argument("--same-text", action="store_true", help="the covered code reads the same text from elsewhere")
    p.add_argument(
        "--moved-out",
        action="store_true",
        help=f"definitions no covered code reaches moved to modules no key covers ({sorted(MOVED_OUT)})",
    )
    p.add_argument(
        "--added-option",
        action="store_true",
        help=f"a config option gained a value ({ADDED_OPTION[0]}={ADDED_OPTION[2]!r}) that only new code reaches",
    )
    a = p.parse_args(argv)
    if a.moved_out:
        problems = moved_out(a.old)
        if problems:
            print("the covered code changed beyond what moved out: nothing re-keyed", *problems, sep="\n  ")
            return 1
        print(f"the covered code at {a.old} runs now as it did, less what no covered code reached")
        return _rekey(planned_added_option(a.old), a.check)
    if a.added_option:
        problems = added_option(a.old)
        if problems:
            print("the covered code changed beyond the new value: nothing re-keyed", *problems, sep="\n  ")
            return 1
        print(f"for every {ADDED_OPTION[0]} that the code at {a.old} accepted, the code now runs the same statements")
        return _rekey(planned_added_option(a.old), a.check)
    if a.same_text:
        problems = same_text(a.old)
        if problems:
            print("the covered code changed, not only where it reads its text: nothing re-keyed", *problems, sep="\n  ")
            return 1
        print(f"the code under {sorted(SAME_TEXT)} at {a.old} computes what it computes now, from the same text")
        return _rekey(planned_same_names(a.old), a.check)
    problems = same_code(a.old)
    if problems:
        print("the covered code changed, not only its place: nothing re-keyed", *problems, sep="\n  ")
        return 1
    print(f"the code under {sorted(RENAMED)} at {a.old} is the code under their new names now")
    plan = planned(a.old)
    if not plan:
        print("every stored key is current: nothing to do")
        return 0
    return _rekey(plan, a.check)


if __name__ == "__main__":
    sys.exit(main())
