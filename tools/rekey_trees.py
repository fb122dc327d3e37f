"""tools/rekey.py's first proof, and the syntax trees every proof compares.

``_statements`` reads a module as ``files.code_hash`` sees it (no docstrings, no type hints), each import
from the package turned into the text of what it imports under the new module names (``_Normalise``,
through ``RENAMED``, ``MOVED`` and ``MOVED_NAMES``), in the module's order; ``_interleaved`` says whether a
module split in two kept each part's order. ``--same-text`` compares the modules less the definitions that
read the text (``SAME_TEXT``, ``_rest``). tools/rekey.py reads the code at the commits and decides.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # andrea from this checkout
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


# ---------------------------------------------------------------------------------------------
# --same-text: the covered modules less the definitions that read the text
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
