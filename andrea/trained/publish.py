"""The trained model's folder, published as one unit and read whole: the files a publish makes, and only those.

A publish (``stage``, then ``publish``) writes the next model's files into ``<results>.new`` and swaps it in
by two renames (the shipped folder to ``<results>.old``, the stage to ``<results>``). ``recover``, run
before every read, finishes or undoes a publish that was killed between the two, and removes what it left.

What a publish makes, it marks: a marker file (``MARKER``) inside the stage, and inside the shipped folder
just before it is moved aside. Clean-up removes only marked folders; a folder a person put under one of those
names (a backup ``trained.old``, a copy ``trained.new``), a symlink or a plain file is left as it is, and said
so, naming the path; a publish then refuses to start rather than overwrite it.

Locks (POSIX ``flock``; none on other systems): the folder that holds the model (``andrea/results``) is the
lock. ``publish`` and ``recover`` take it exclusively, readers (``reading``) share it, so a read never sees
half a swap and never finishes a swap the publisher is still making; two processes cleaning up take turns.
A stage being filled holds a lock on its own marker for as long as its process lives: a reader's clean-up
leaves it alone, and a stage whose process died is a leftover.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterator, Optional

try:  # POSIX advisory locks
    import fcntl
except ImportError:  # pragma: no cover - Windows: no locks (one publisher at a time is then up to you)
    fcntl = None  # type: ignore[assignment]

MARKER = ".andrea-publish"
_SIGNATURE = "made by a publish of andrea's trained model:"
_held = threading.local()  # this thread's hold on the lock: (file descriptor, shared), and how deep
_stages: dict[str, IO[str]] = {}  # stage folder -> its marker, open and locked while this process fills it
_said: set[str] = set()  # the paths already named as left alone (once per process)


def new_of(results: Path) -> Path:
    return results.with_name(results.name + ".new")


def old_of(results: Path) -> Path:
    return results.with_name(results.name + ".old")


@contextmanager
def locked(results: Path, shared: bool = False) -> Iterator[None]:
    """Hold the lock of the folder that holds ``results`` (shared: readers; else exclusive). Re-entrant in
    one thread; where no lock can be taken (no ``fcntl``, a folder that cannot be opened) it runs unlocked."""
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(results.parent, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError:
            if fd is not None:
                os.close(fd)
            fd = None
    _held.depth, _held.shared = 1, shared
    try:
        yield
    finally:
        _held.depth = 0
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _holding_shared() -> bool:
    return bool(getattr(_held, "depth", 0)) and bool(getattr(_held, "shared", False))


def _mark(folder: Path, role: str) -> IO[str]:
    f = open(folder / MARKER, "w", encoding="utf-8")
    f.write(f"{_SIGNATURE} {role}, process {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    f.flush()
    return f


def _is_ours(path: Path) -> bool:
    """A real folder (not a symlink) with a publish's marker inside (a regular file, with its signature)."""
    marker = path / MARKER
    if path.is_symlink() or not path.is_dir() or marker.is_symlink() or not marker.is_file():
        return False
    try:
        return marker.read_text(encoding="utf-8").startswith(_SIGNATURE)
    except (OSError, UnicodeDecodeError):
        return False


def _in_use(folder: Path) -> bool:
    """Whether a live process is still filling the stage ``folder`` (it holds its marker's lock)."""
    if fcntl is None or str(folder) in _stages:
        return str(folder) in _stages
    try:
        with open(folder / MARKER, encoding="utf-8") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def _release(stage: Path) -> None:
    f = _stages.pop(str(stage), None)
    if f is not None:
        f.close()  # closing drops its lock


def _remove(folder: Path) -> None:
    """Remove a marked folder; one another process removed first is no error."""
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        if folder.exists():
            shutil.rmtree(folder)


def _unmark(folder: Path) -> None:
    try:
        (folder / MARKER).unlink()
    except FileNotFoundError:
        pass


def _left_alone(path: Path) -> None:
    if str(path) in _said:
        return
    _said.add(str(path))
    what = (
        "a symlink" if path.is_symlink() else "a folder without a publish's marker" if path.is_dir() else "not a folder"
    )
    print(
        f"andrea: left {str(path)!r} as it is ({what}: a publish of the trained model did not make it); "
        "a retrain needs that name, so move it elsewhere before one",
        file=sys.stderr,
    )


def stage(results: Path, log_name: str) -> Path:
    """An empty, marked folder ``<results>.new`` for the next model's files, held by this process until
    ``publish`` (a clean-up elsewhere leaves it alone meanwhile). ValueError, naming it, if something a
    publish did not make is in the way."""
    with locked(results):
        _recover(results, log_name)
        st = new_of(results)
        if st.exists() or st.is_symlink():
            raise ValueError(
                f"{str(st)!r} is in the way of the trained model's publish, and a publish did not make it (no "
                f"{MARKER} inside): it is left as it is; move it elsewhere and run again"
            )
        st.mkdir(parents=True)
        f = _mark(st, "stage")
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        _stages[str(st)] = f
        return st


def publish(results: Path, st: Path, log_name: str, kill_point: Callable[[str], None]) -> None:
    """Swap the staged model (its log written last) in for the shipped one, under the exclusive lock: the
    shipped folder, marked, to ``<results>.old``; the stage to ``<results>``; then the old one removed.
    ``kill_point(where)`` marks where a kill can land (the tests raise there)."""
    try:
        with locked(results):
            if not (st / log_name).is_file():
                raise ValueError(f"{str(st)!r} holds no log: an incomplete model is never published")
            if not _is_ours(st):
                raise ValueError(f"{str(st)!r} was not made by a publish's stage (no {MARKER} inside): not published")
            old = old_of(results)
            if (old.exists() or old.is_symlink()) and not _is_ours(old):
                raise ValueError(
                    f"{str(old)!r} is in the way of the trained model's publish, and a publish did not make it: it is "
                    "left as it is; move it elsewhere and run again"
                )
            if _is_ours(old):
                _remove(old)
            kill_point("staged")
            if results.exists():
                _mark(results, "previous model").close()
                results.rename(old)
            kill_point("old moved aside")
            st.rename(results)
            kill_point("new in place")
            _unmark(results)
            _release(st)
            if _is_ours(old):
                _remove(old)
    finally:
        _release(st)  # a publish that stopped leaves a leftover (``recover``), not a stage in use


def recover(results: Path, log_name: str) -> Optional[str]:
    """Finish or undo a publish that was killed, and remove what it left (marked folders only; a stage that a
    live process is filling is left to it). Returns what it did (None: nothing). Inside a reader's shared
    hold it does nothing: the reader reads what is there."""
    if _holding_shared():
        return None
    with locked(results):
        return _recover(results, log_name)


def _recover(results: Path, log_name: str) -> Optional[str]:
    new, old = new_of(results), old_of(results)
    did = None
    if not results.exists() and not results.is_symlink():
        if _is_ours(new) and not _in_use(new) and (new / log_name).is_file():
            new.rename(results)
            _unmark(results)
            did = "finished an interrupted publish (the new model is in place)"
        elif _is_ours(old):
            old.rename(results)
            _unmark(results)
            did = "undid an interrupted publish (the previous model is back)"
    if results.is_dir() and _is_ours(results):
        _unmark(results)  # marked just before a move that a kill stopped
    if results.exists():
        for leftover in (old, new):
            if not leftover.exists() and not leftover.is_symlink():
                continue
            if not _is_ours(leftover):
                _left_alone(leftover)
            elif not _in_use(leftover):
                _remove(leftover)
                did = did or f"removed {leftover.name}, left by an interrupted publish"
    if did:
        print(f"andrea: {did}", file=sys.stderr)
    return did


@contextmanager
def reading(results: Path, log_name: str) -> Iterator[None]:
    """Read the shipped model's files whole: an interrupted publish recovered first, then the shared lock
    held while reading (a publish waits for it, and it for a publish)."""
    recover(results, log_name)
    with locked(results, shared=True):
        yield
