"""tools/rekey.py --moved-out: the comparison of an old and a new module when definitions no covered code
reaches left it (``same_but_moved_out``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # andrea from this checkout
    sys.path.insert(0, str(ROOT))

from rekey_trees import _Normalise, _package_import  # noqa: E402

from andrea.files import _blank_annotations, _strip_docstrings  # noqa: E402

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
