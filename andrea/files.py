"""Files the package writes: the cache directory, atomic writes, checksummed caches, source hashes.

Everything ``andrea`` writes goes through here, so that

* a write is atomic: the bytes go to a temporary file with a unique name in the same folder, which
  then replaces the target in one step; two processes writing the same file never share a temporary
  file, and an interrupted write never leaves a half-written target;
* a cache file is checked before it is used: ``write_cached`` stores a sidecar ``<name>.sha256``
  with the checksum, the size and the hash of the code that produced the file; ``read_cached``
  returns ``None`` (and says why, naming the path) when the file is missing, truncated, altered or
  made by other code, so the caller rebuilds it instead of using it;
* a result can be tied to the code that made it: ``source_hash`` hashes the syntax tree of modules
  (comments, docstrings and formatting do not count, so reformatting invalidates nothing).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import uuid
import warnings
from pathlib import Path
from typing import Iterable, Optional, Union

PathLike = Union[str, Path]


def cache_dir() -> Path:
    """Where tokenizers, corpora and token ids are cached ($ANDREA_CACHE or ~/.cache/andrea)."""
    d = Path(os.environ.get("ANDREA_CACHE") or Path.home() / ".cache" / "andrea")
    d.mkdir(parents=True, exist_ok=True)
    return d


def temporary_name(path: PathLike) -> Path:
    """A temporary file name next to ``path``, unique to this process and call."""
    p = Path(path)
    return p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def atomic_write_bytes(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (unique temporary file, fsync, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(p)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def atomic_write_text(path: PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


# The fields a results file's digest leaves out: the digest itself, and the key, which is checked against the
# code instead (a stale key is refused) and which tools/rekey.py rewrites, with a proof, when code moves.
UNDIGESTED = ("digest", "key")


def json_digest(blob: dict) -> str:
    """SHA-256 of a results file's contents (a JSON object), all but ``UNDIGESTED``: what its ``digest``
    field holds. It detects damage and edits that do not recompute it, not someone who recomputes it."""
    rest = {k: v for k, v in blob.items() if k not in UNDIGESTED}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def write_cached(path: PathLike, data: bytes, code: str) -> Path:
    """Write a cache file atomically, then its sidecar (checksum, size, producing code's hash)."""
    p = atomic_write_bytes(path, data)
    meta = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "code": code}
    atomic_write_text(_sidecar(p), json.dumps(meta))
    return p


def read_cached(path: PathLike, code: str) -> Optional[bytes]:
    """The bytes of a cache file written by ``write_cached`` with the same ``code`` hash, or None.

    A file that exists but fails a check is reported (a warning naming the path and the reason)
    and removed, so the caller rebuilds it.
    """
    p = Path(path)
    if not p.is_file():
        return None
    reason = None
    try:
        meta = json.loads(_sidecar(p).read_text())
        data = p.read_bytes()
        if not isinstance(meta, dict):
            reason = "its checksum file is not a JSON object"
        elif meta.get("code") != code:
            reason = "it was made by a different version of the code"
        elif len(data) != meta.get("size"):
            reason = f"it has {len(data)} bytes, {meta.get('size')} were written (truncated or altered)"
        elif hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            reason = "its checksum does not match (corrupted or altered)"
    except FileNotFoundError:
        reason = "its checksum file is missing (an interrupted or foreign write)"
    except (OSError, ValueError) as e:
        reason = f"its checksum file is unreadable ({type(e).__name__})"
    if reason is None:
        return data
    warnings.warn(f"andrea: ignoring the cache file {str(p)!r}: {reason}; rebuilding it", stacklevel=3)
    for q in (p, _sidecar(p)):
        try:
            q.unlink()
        except FileNotFoundError:
            pass
    return None


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.body and _is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def _blank_annotations(tree: ast.AST) -> ast.AST:
    """Type hints do not change what code computes: replace each by one placeholder (kept, so that a
    dataclass field stays a field)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant("annotation")
        elif isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
    return tree


# Fields that Pythons after 3.11 added to nodes; empty, they say nothing about what code computes.
_LATER_FIELDS = frozenset({"type_params"})


def canonical_dump(node: object) -> str:
    """``ast.dump(node, annotate_fields=False)`` exactly as Python 3.11 writes it, on every Python from
    3.10 on, so that a result's key does not depend on the reader's Python.

    ``ast.dump`` itself differs between versions for the same source: 3.12 adds ``type_params=[]`` to
    every function and class, 3.12.1 puts an empty ``Constant('')`` into some f-string format specs,
    and 3.13 leaves out empty lists. Here an empty later field is skipped, an empty string constant
    inside an f-string (which adds nothing to the string) is dropped, and empty lists are written.
    ``tests/test_files.py`` checks that this equals 3.11's ``ast.dump`` on every module of the
    package, and that the other Pythons installed here give the same hashes."""
    if isinstance(node, ast.AST):
        cls = type(node)
        args = []
        keywords = False  # as ast.dump: after a skipped optional field, the rest are named
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                keywords = True
                continue
            if name in _LATER_FIELDS and not value:
                continue
            if value is None and getattr(cls, name, ...) is None:
                keywords = True
                continue
            if isinstance(node, ast.JoinedStr) and name == "values":
                value = [v for v in value if not (isinstance(v, ast.Constant) and v.value == "")]
            text = canonical_dump(value)
            args.append(f"{name}={text}" if keywords else text)
        return f"{cls.__name__}({', '.join(args)})"
    if isinstance(node, list):
        return "[" + ", ".join(canonical_dump(x) for x in node) + "]"
    return repr(node)


def code_hash(source: str) -> str:
    """Hash of Python source by its syntax tree: comments, docstrings, type hints and layout do not
    count, so reformatting or annotating code invalidates no result; nor does the Python version
    (``canonical_dump``)."""
    tree = _blank_annotations(_strip_docstrings(ast.parse(source)))
    return hashlib.sha256(canonical_dump(tree).encode()).hexdigest()[:16]


def source_hash(modules: Iterable[str]) -> str:
    """Combined ``code_hash`` of ``andrea`` modules given by name (e.g. ``["model", "training.manuals"]``)."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in sorted(modules):
        h.update(name.encode())
        h.update(code_hash((here / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8")).encode())
    h.update(f"py{sys.version_info.major}".encode())
    return h.hexdigest()[:16]
