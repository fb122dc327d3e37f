"""Execute the book's pages two at a time before the build, into the build's own execution cache.

Jupyter Book executes pages one after another. On a machine with two cores that wastes one of them
while a page imports, draws or waits, and a page whose torch threads outnumber the idle cores can take
several times as long (measured: chapter 7 in 724 s beside another job, 50 s alone). This tool
executes every page whose outputs are not cached yet in its own kernel, as many at a time as the
machine has cores, each kernel with one torch thread (``ANDREA_THREADS=1``, OpenMP and MKL too), the
longest page first; it writes each executed page into ``_build/.jupyter_cache`` exactly as myst-nb
would (the same reader, the same hash), so that ``jupyter-book build`` then finds every page cached.
A page that fails here is left out of the cache: the build executes it again and reports its error
in the usual way. It prints the seconds per page.

    python tools/execute_pages.py            # what tools/build_book.sh runs before jupyter-book
    python tools/execute_pages.py --jobs 1   # one page at a time
    python tools/execute_pages.py --record _build/execute-pages.log   # its seconds into CPU_SECONDS

The build keeps this tool's output in ``_build/execute-pages.log``; ``--record`` turns such a log into
``tools/cpu_page_seconds.json`` (committed), the CPU figures that the GPU check's ``chapters`` step compares
each page's seconds on the GPU machine against.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
TIMEOUT = 600  # seconds per cell, as _config.yml's execution_timeout
CPU_SECONDS = ROOT / "tools" / "cpu_page_seconds.json"
ONE_THREAD = {"ANDREA_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Seconds per page on one thread of a 2-core machine, measured by this tool (the order only: the longest
# pages start first, so that the two workers finish together; a page not listed goes by its size).
MEASURED_SECONDS = {
    "lab2_training": 70, "01_residual": 63, "papers": 62, "07_layerscale": 47, "03_prenorm_postnorm": 28,
    "08_trained": 25, "02_layernorm": 23, "06_stack": 21, "04_mlp": 14, "05_gelu": 12, "lab1_gradient_flow": 12,
    "intro": 3,
}  # fmt: skip


def parse_log(text: str) -> dict:
    """What a log of this tool says: pages at a time, threads per page, and each executed page's seconds
    (a page that failed has none). A log without its header line is refused, naming what it lacks."""
    head = re.search(r"execute_pages: (\d+) page\(s\), (\d+) at a time, one torch thread each", text)
    if head is None:
        raise ValueError("not a log of tools/execute_pages.py: no line 'execute_pages: N page(s), J at a time, ...'")
    seconds = {m[1]: float(m[2]) for m in re.finditer(r"^  (\S+): (\d+) s$", text, re.M)}
    if not seconds:
        raise ValueError("the log names no executed page ('  book/x.md: 12 s')")
    return {"pages_in_log": int(head[1]), "jobs": int(head[2]), "threads": 1, "seconds": seconds}


def cpu_model() -> str:
    """This machine's CPU as /proc/cpuinfo names it (else platform's word), and its core count."""
    try:
        name = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)[1].strip()
    except (OSError, TypeError):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores"


def record(log: Path, out: Path = CPU_SECONDS) -> dict:
    """Write ``out`` from a build's log: the CPU figures the GPU check compares the pages against."""
    blob = parse_log(log.read_text())
    blob = {
        "what": "seconds per page of the book's CPU build (tools/execute_pages.py), for the GPU check's chapters step",
        "log": str(log.resolve().relative_to(ROOT) if log.resolve().is_relative_to(ROOT) else log),
        "log_time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(log.stat().st_mtime)),
        "machine": cpu_model(),
        **blob,
    }
    out.write_text(json.dumps(blob, indent=1) + "\n")
    return blob


def read_page(path: Path):
    """The page as myst-nb reads it for its execution cache (so that the cache's hash matches)."""
    import nbformat

    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(path.read_text("utf8"), add_source_map=True, path=str(path))


def pages() -> list[Path]:
    sys.path.insert(0, str(ROOT / "tools"))
    from portable import pages as toc_pages

    return toc_pages()


def _execute_one(page: Path, out: Path) -> int:
    """(In a child process.) Execute ``page`` in a fresh kernel in its folder; write the executed
    notebook and the seconds it took to ``out``; 1 if a cell failed."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    nb = read_page(page)
    result = single_nb_execution(nb, cwd=str(page.parent), timeout=TIMEOUT, allow_errors=False, meta_override=True)
    if result.err is not None:
        print(f"{page.name}: {type(result.err).__name__}: {str(result.err)[-2000:]}", file=sys.stderr)
        return 1
    out.write_text(json.dumps({"seconds": result.time, "nb": nbformat.writes(nb)}))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/execute_pages.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="pages at a time (default: the cores)")
    p.add_argument("--record", type=Path, metavar="LOG", help=f"write {CPU_SECONDS.name} from a log of this tool")
    p.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.record:
        blob = record(a.record)
        print(f"{CPU_SECONDS.relative_to(ROOT)}: {len(blob['seconds'])} pages from {a.record} ({blob['machine']})")
        return 0
    if a.one:
        return _execute_one(a.one, a.out)
    if a.jobs < 1:
        p.exit(2, f"{p.prog}: error: --jobs must be >= 1, got {a.jobs}\n")

    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(CACHE))
    todo = []
    for page in pages():
        try:
            cache.match_cache_notebook(read_page(page))
        except KeyError:
            todo.append(page)
    if not todo:
        print("execute_pages: every page is cached")
        return 0
    todo.sort(key=lambda q: (-MEASURED_SECONDS.get(q.stem, 0), -q.stat().st_size))  # the longest first
    env = dict(os.environ, **ONE_THREAD)
    tmp = Path(tempfile.mkdtemp(prefix="andrea-pages-"))
    done: dict[Path, float] = {}
    failed: list[str] = []
    t0 = time.perf_counter()
    print(f"execute_pages: {len(todo)} page(s), {a.jobs} at a time, one torch thread each", flush=True)

    def one(page: Path) -> None:
        out = tmp / f"{page.stem}.json"
        r = subprocess.run(
            [sys.executable, __file__, "--one", str(page), "--out", str(out)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0 or not out.is_file():
            failed.append(f"{page.relative_to(ROOT)}: {r.stderr.strip()[-600:]}")
            print(f"  {page.relative_to(ROOT)}: failed (the build runs it again and shows the error)", flush=True)
            return
        done[page] = json.loads(out.read_text())["seconds"]
        print(f"  {page.relative_to(ROOT)}: {done[page]:.0f} s", flush=True)

    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        list(pool.map(one, todo))
    for page in done:  # one writer: the cache's database is written here, not by the children
        blob = json.loads((tmp / f"{page.stem}.json").read_text())
        stage = cache.add_nb_to_project(str(page), read_data=_read_data(page))
        executed = nbformat.reads(blob["nb"], as_version=4)
        cache.cache_notebook_bundle(
            CacheBundleIn(executed, stage.uri, data={"execution_seconds": blob["seconds"]}),
            check_validity=False,
            overwrite=True,
        )
    wall = time.perf_counter() - t0
    print(
        f"execute_pages: {len(done)} page(s) executed in {wall:.0f} s "
        f"({sum(done.values()):.0f} s of page time), {len(failed)} failed"
    )
    return 0


def _read_data(page: Path) -> dict:
    """How jupyter-cache should read the page again (what myst-nb records)."""
    if page.suffix == ".ipynb":
        return {"name": "nbformat", "type": "plugin"}
    return {"type": "plugin", "name": "myst_nb_md"}


if __name__ == "__main__":
    sys.exit(main())
