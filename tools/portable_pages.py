"""How tools/portable.py runs the book's pages and reads what they say.

Every page of the table of contents that has code is executed in a fresh kernel of its own, in a child
process whose environment emulates another machine (``emulation``: torch's kernels, MKL's code path, the
thread count), with an empty cache; an executed page, or one the book's build executed, is then read
(``readings``): its glued values, the verdicts and measured texts of its "Checking the claims" tables, its
exercise checks and its errors. tools/portable.py compares two such sets of readings.
"""

from __future__ import annotations

import html.parser
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tools") not in sys.path:  # make_colab, beside this file
    sys.path.insert(0, str(ROOT / "tools"))
BUILD = ROOT / "_build"
TOOL = Path(__file__).resolve().with_name("portable.py")  # the command line a page's child process runs


# ---------------------------------------------------------------------------------------------
# Readings of an executed page
# ---------------------------------------------------------------------------------------------
class _Tables(html.parser.HTMLParser):
    """The rows of the "Checking the claims" tables in an HTML output (andrea.views.notebook.ClaimsTable)."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._in = 0
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and "claims-table" in (dict(attrs).get("class") or ""):
            self._in += 1
        elif self._in and tag == "tr":
            self.rows.append([])
        elif self._in and tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table" and self._in:
            self._in -= 1
        elif tag == "td" and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def readings(nb, executed: Path | None = None) -> dict[str, str]:
    """What an executed page says: glued values, claim verdicts, exercise checks, errors."""
    from make_colab import glued_values

    out = {f"glue {k}": v for k, v in glued_values(nb, executed).items()}
    n_claim = n_check = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out[f"error {len([k for k in out if k.startswith('error')]) + 1}"] = (
                    f"{o.get('ename')}: {o.get('evalue')}"
                )
                continue
            data = o.get("data", {})
            page_html = _text(data.get("text/html", ""))
            if "claims-table" in page_html:
                t = _Tables()
                t.feed(page_html)
                for row in t.rows:
                    if len(row) >= 3:
                        n_claim += 1
                        claim = f"{n_claim} ({row[0][:48]})"
                        out[f"verdict {claim}"] = row[2]
                        out[f"measured {claim}"] = row[1]
            plain = _text(data.get("text/plain", ""))
            if plain[:2] in ("✓ ", "✗ ") and "scrapbook" not in o.get("metadata", {}):
                n_check += 1
                out[f"check {n_check}"] = plain
    return out


def executed_pages(folder: Path) -> dict[str, Path]:
    """page stem -> executed notebook, in a folder written by this tool or by the book's build."""
    found = {}
    for p in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" not in p.parts:
            found[p.stem] = p
    return found


def read_build(folder: Path = BUILD / "jupyter_execute") -> dict[str, dict[str, str]]:
    """Readings of every page the native build executed (outputs merged from myst-nb's cache)."""
    from make_colab import _with_outputs

    return {stem: readings(_with_outputs(p), p) for stem, p in executed_pages(folder).items() if stem in page_stems()}


# ---------------------------------------------------------------------------------------------
# Executing the pages under an emulation
# ---------------------------------------------------------------------------------------------
def pages() -> list[Path]:
    """Every page of the table of contents that has code, in reading order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    out = []
    for f in files:
        md, nb = ROOT / f"{f}.md", ROOT / f"{f}.ipynb"
        p = md if md.exists() else nb
        if p.exists() and ("{code-cell}" in p.read_text() or p.suffix == ".ipynb"):
            out.append(p)
    return out


def page_stems() -> set[str]:
    return {p.stem for p in pages()}


def emulation(capability: str, threads: int) -> dict:
    """The environment of a kernel that runs like another machine."""
    env = {"ANDREA_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if capability != "native":
        from andrea.evidence.store import EMULATED  # the same emulation as the results store's re-runs

        env.update(EMULATED, ATEN_CPU_CAPABILITY=capability)
    return env


def _execute_one(page: Path, out: Path) -> None:
    """(In a child process with the emulation's environment.) Execute one page and write it to ``out``."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(page) if page.suffix == ".md" else nbformat.read(page, as_version=4)
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", allow_errors=False, resources={"metadata": {"path": str(page.parent)}}
    )
    try:
        client.execute()
    except CellExecutionError:
        pass  # the error is in the cell's outputs: it becomes an "error" reading
    nbformat.write(nb, out)


def run_pages(
    capability: str, threads: int, into: Path, jobs: int | None = None, say=print, only: list[str] | None = None
) -> dict[str, float]:
    """Execute every page under the emulation (empty cache, fresh kernels) into ``into``; seconds per page."""
    into.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="andrea-portable-cache-"))
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")}
    env.update(ANDREA_CACHE=str(cache), ANDREA_BOOK_BUILD="1", **emulation(capability, threads))
    cores = os.cpu_count() or 1
    jobs = jobs or max(1, cores // threads)
    # the shared caches (corpus, tokenizers) are built once, under the emulation, before the pages run
    subprocess.run(
        [sys.executable, "-c", "from andrea.training.data import load_token_data as f; f('bytes'); f('bpe')"],
        env=env,
        check=True,
        cwd=ROOT,
    )
    seconds: dict[str, float] = {}

    def one(page: Path) -> None:
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, str(TOOL), "--execute-one", str(page), "--into", str(into / f"{page.stem}.ipynb")],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:  # the kernel could not run the page at all (an error in a cell is a reading)
            raise RuntimeError(f"{page.name} could not be executed:\n{r.stderr[-3000:]}")
        seconds[page.stem] = time.perf_counter() - t0
        say(f"  {page.relative_to(ROOT)}: {seconds[page.stem]:.0f} s")

    todo = [p for p in pages() if not only or p.stem in only]
    todo.sort(key=lambda p: -p.stat().st_size)  # the longest first, for an even finish
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, todo))
    return seconds


def read_folder(folder: Path) -> dict[str, dict[str, str]]:
    import nbformat

    return {stem: readings(nbformat.read(p, as_version=4), p) for stem, p in executed_pages(folder).items()}
