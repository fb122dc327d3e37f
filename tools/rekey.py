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

The table ``RENAMED`` (tools/rekey_trees.py, with the comparison of syntax trees every proof uses) is the
regrouping of ``andrea/`` into subpackages (model, training, measure, evidence, views); a later move adds its
own table. Each later proof's comparison has a module of its own beside this file (rekey_added.py,
rekey_moved.py), and so has the sampled re-run (rekey_sample.py); this file reads the code at the commits,
plans the keys and rewrites them.

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
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if str(Path(__file__).resolve().parent) not in sys.path:  # the proofs' modules, beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))

# The proofs' comparisons and the sampled re-runs, from the modules beside this file; every name stays
# importable from here.
from rekey_added import (  # noqa: E402, F401 - re-exported
    ADDED_OPTION,
    ERROR_HELPERS,
    _DropAdded,
    _only_for,
    _only_raises,
    _plain_subject,
    same_but_for_added,
)
from rekey_moved import (  # noqa: E402, F401 - re-exported
    MOVED_OUT,
    _binds,
    _mentions,
    _one_per_alias,
    _script_only,
    same_but_moved_out,
)
from rekey_sample import SAMPLE_RUNS, rerun_sample, sample  # noqa: E402, F401 - re-exported
from rekey_trees import (  # noqa: E402, F401 - re-exported
    _DOTTED,
    MOVED,
    MOVED_NAMES,
    RENAMED,
    SAME_TEXT,
    _absolute,
    _defines,
    _interleaved,
    _is_andrea,
    _is_protocol,
    _Normalise,
    _package_import,
    _rest,
    _statements,
)

from andrea.files import _strip_docstrings  # noqa: E402

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
# 1. The covered code is the same code (the comparisons: tools/rekey_trees.py)
# ---------------------------------------------------------------------------------------------
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
EXPLORER_MODULES = ("model.config", "model.layers", "model.transformer", "measure.probe", "views.explorer")


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
