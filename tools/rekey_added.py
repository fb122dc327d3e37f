"""tools/rekey.py --added-option: the comparison of an old and a new module once the new option value's
code, and the handlers that only raise a clearer error, are taken out (``same_but_for_added``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # andrea from this checkout
    sys.path.insert(0, str(ROOT))

from andrea.files import _blank_annotations, _strip_docstrings  # noqa: E402

# (option, the tuple of its allowed values, the new value): chapter 2's control, no LayerNorm in the
# blocks but the stack's final one kept
ADDED_OPTION = ("norm", "NORMS", "final")


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
