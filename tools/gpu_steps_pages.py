"""tools/gpu_check.py's chapters step: every page of the book executed in a kernel of its own, several at a
time, each page's seconds against the CPU build's; and its CPU stand-in (a kernel of this python imports all
that the pages and andrea import, then two small pages run side by side)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_common import (
    CPU_SECONDS,
    OPTIONAL_IMPORTS,
    PAGE_THREADS,
    PY,
    REHEARSE_TIMEOUTS,
    ROOT,
    SCRIPT,
    TIMEOUTS,
    _last_error,
    child_env,
    imports_in,
    results_in,
    run_bounded,
)


def pin_kernel() -> None:
    """Make the kernel 'python3' this very interpreter (a spec found first, through JUPYTER_PATH), whatever
    other kernel specs the machine has: on the GPU machine the carried ipykernel has no spec installed."""
    d = Path(tempfile.mkdtemp(prefix="andrea-kernel-"))
    spec = d / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [PY, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join([str(d), *[p for p in [os.environ.get("JUPYTER_PATH")] if p]])


def execute(client) -> None:
    """Run a notebook client; a failing cell is raised as its error's name and value (first line), the
    cell and its traceback after."""
    from nbclient.exceptions import CellExecutionError

    try:
        client.execute()
    except CellExecutionError as e:
        cell = re.sub(r"\x1b\[[0-9;]*m", "", str(e))[-2500:]  # the traceback without its colours
        raise RuntimeError(f"a cell raised {e.ename}: {e.evalue}\n{cell}") from None


def book_pages() -> list:
    """Every page of the book that has code (tools/portable.py's list: the lessons, evidence pages, labs)."""
    sys.path.insert(0, str(ROOT / "tools"))
    from portable import pages

    return pages()


def execute_page(page: Path) -> dict:
    """(In a child process.) Execute one page in a fresh kernel of this python, in the page's folder:
    its seconds, the device its models ran on (the page's `device`, "-" where it has none), or its error."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    pin_kernel()
    nb = jupytext.read(page)
    nb.cells.append(
        nbformat.v4.new_code_cell("print('ANDREA-DEVICE', globals().get('device', '-'))", metadata={"tags": []})
    )
    t0 = time.perf_counter()
    client = NotebookClient(
        nb, timeout=600, startup_timeout=90, kernel_name="python3", resources={"metadata": {"path": str(page.parent)}}
    )
    try:
        execute(client)
    except Exception as e:  # noqa: BLE001 - the page's error, reported in its row
        return {"page": rel(page), "seconds": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    device = text.rsplit("ANDREA-DEVICE", 1)[1].split()[0] if "ANDREA-DEVICE" in text else "?"
    return {"page": rel(page), "seconds": round(time.perf_counter() - t0, 1), "device": device}


def rel(page: Path) -> str:
    return str(Path(page).resolve().relative_to(ROOT))


def cpu_seconds() -> dict:
    """The CPU build's seconds per page (tools/cpu_page_seconds.json, written by execute_pages.py --record)."""
    return json.loads(CPU_SECONDS.read_text())["seconds"]


def run_pages(pages: list, jobs: int, threads: int, budget: float, emit=None) -> list:
    """Execute ``pages`` ``jobs`` at a time, each in a child (`--page`) with ``threads`` torch threads, the
    longest on the CPU first, all within ``budget`` seconds; one result per page, in the order they ended.
    ``emit(results)`` is called after each page (the step prints what it has so far)."""
    from concurrent.futures import ThreadPoolExecutor

    known = cpu_seconds() if CPU_SECONDS.is_file() else {}
    order = sorted(pages, key=lambda q: -known.get(rel(q), 0))
    n = str(threads)
    env = child_env(ANDREA_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, ANDREA_BOOK_BUILD="1")
    t_end = time.perf_counter() + budget
    results: list = []

    def one(page: Path) -> None:
        left = t_end - time.perf_counter()
        if left < 5:
            res = {"page": rel(page), "seconds": None, "error": "not started: the step's time is spent"}
        else:
            try:
                r = run_bounded([PY, str(SCRIPT), "--page", str(page)], left, env=env)
                found = results_in(r.stdout)
                res = found[-1] if found else {"page": rel(page), "seconds": None, "error": _last_error(r.stderr)}
            except subprocess.TimeoutExpired:
                res = {"page": rel(page), "seconds": None, "error": f"timed out after {left:.0f} s"}
        results.append(res)
        if emit:
            emit(results)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, order))
    return results


def pages_report(results: list, known: dict, wall: float, jobs: int, threads: int) -> dict:
    """The chapters step's row: ok when every page ran; the issue's goal (each page at most its CPU-build
    seconds) said as met or not, naming the pages that missed it; one line per page."""
    failed = [r for r in results if r.get("seconds") is None]
    slower = [r for r in results if r.get("seconds") is not None and r["seconds"] > known.get(r["page"], float("inf"))]
    unknown = [r["page"] for r in results if r["page"] not in known]
    devices = sorted({r.get("device", "?") for r in results if r.get("seconds") is not None})
    goal = "met" if not slower and not failed else f"NOT met ({len(slower)} slower, {len(failed)} not run)"
    figures = (
        f"{len(results) - len(failed)} of {len(results)} pages in {wall:.0f} s ({jobs} at a time, {threads} "
        f"threads each); models on {', '.join(devices) or '-'}; goal (each page <= its CPU-build seconds): {goal}"
    )
    if slower:
        figures += "; slower: " + ", ".join(
            f"{Path(r['page']).stem} {r['seconds']:.0f}/{known[r['page']]:.0f} s" for r in slower
        )
    if unknown:
        figures += f"; no CPU figure for {', '.join(unknown)}"
    lines = []
    for r in sorted(results, key=lambda r: r["page"]):
        cpu = known.get(r["page"])
        if r.get("seconds") is None:
            lines.append(f"{r['page']:<45} FAIL  {r.get('error', '')}")
        else:
            ratio = f"x{r['seconds'] / cpu:.2f}" if cpu else "   -"
            cpu_s = f"{cpu:.0f} s" if cpu else "-"
            lines.append(f"{r['page']:<45} {r['seconds']:5.0f} s  CPU build {cpu_s:>5}  {ratio}  on {r.get('device')}")
    return {"ok": not failed, "figures": figures, "lines": lines}


def step_chapters() -> dict:
    import jupytext  # noqa: F401 - what each page's child needs: missing, it fails here, once, by name
    import nbclient  # noqa: F401
    import nbformat  # noqa: F401

    known = cpu_seconds()
    pages = book_pages()
    jobs = max(1, min(len(pages), (os.cpu_count() or 2) // PAGE_THREADS))
    warm = warm_cache()
    t0 = time.perf_counter()

    def report(results) -> dict:
        res = pages_report(results, known, time.perf_counter() - t0, jobs, PAGE_THREADS)
        res["figures"] += f"; andrea's cache warmed first in {warm:.0f} s"
        return res

    def emit(results):  # what a timeout of the whole step still reports
        print(json.dumps(report(results)), flush=True)

    results = run_pages(pages, jobs, PAGE_THREADS, TIMEOUTS["chapters"] - 15 - warm, emit)
    return report(results)


def warm_cache() -> float:
    """Build what the pages read from andrea's cache (the tokenizer, the corpora's token ids) once, before
    they start: the CPU build found them built, and pages started together would each build them."""
    from andrea.training.data import get_tokenizer, load_token_data

    t0 = time.perf_counter()
    get_tokenizer()
    for kind in ("bpe", "bytes"):
        load_token_data(kind)
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# The CPU stand-in (--rehearse)
# ---------------------------------------------------------------------------------------------
def andrea_imports() -> list:
    """Every top-level module that andrea imports anywhere (lazily inside functions too), but andrea itself
    and OPTIONAL_IMPORTS: what the chapter's kernel must be able to import."""
    names: list = []
    for f in sorted((ROOT / "andrea").rglob("*.py")):
        names += [n.split(".")[0] for n in imports_in(ast.parse(f.read_text()))]
    return [n for n in dict.fromkeys(names) if n != "andrea" and n not in OPTIONAL_IMPORTS]


def chapter_imports(nb) -> list:
    """The chapter's own import statements, as source lines (its IPython magics left out)."""
    lines: list = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        src = "\n".join(ln for ln in c.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        lines += [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return list(dict.fromkeys(lines))


def rehearse_chapters() -> str:
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    pin_kernel()
    own = list(dict.fromkeys(line for page in book_pages() for line in chapter_imports(jupytext.read(page))))
    lib = andrea_imports()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import sys, andrea\nprint('ANDREA-FROM', andrea.__file__, sys.executable)"),
        nbformat.v4.new_code_cell("\n".join(own)),
        nbformat.v4.new_code_cell(f"import importlib\nfor _m in {lib!r}:\n    importlib.import_module(_m)"),
        nbformat.v4.new_code_cell("print('ANDREA-REHEARSE', 1 + 1)"),
    ]
    execute(
        NotebookClient(
            nb,
            timeout=120,
            startup_timeout=90,
            kernel_name="python3",
            resources={"metadata": {"path": str(ROOT / "book")}},
        )
    )
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    where = text.split("ANDREA-FROM", 1)[1].split() if "ANDREA-FROM" in text else ["?", "?"]
    if not where[0].startswith(str(ROOT)) or where[1] != PY or "ANDREA-REHEARSE 2" not in text:
        raise RuntimeError(f"the kernel ran andrea {where[0]} under {where[1]}, not this checkout's under {PY}")
    warm = warm_cache()
    pages = [ROOT / "book" / "intro.md", ROOT / "book" / "evidence" / "05_gelu_evidence.md"]  # 3 s and 6 s on the CPU
    t0 = time.perf_counter()
    results = run_pages(pages, 2, 1, REHEARSE_TIMEOUTS["chapters"] - 120)
    report = pages_report(results, cpu_seconds(), time.perf_counter() - t0, 2, 1)
    if not report["ok"]:
        raise RuntimeError("two pages side by side: " + "; ".join(report["lines"]))
    return (
        f"a kernel of this python imported the pages' {len(own)} imports and andrea's {len(lib)}; a cell ran; "
        f"the cache warmed in {warm:.0f} s; " + report["figures"]
    )
