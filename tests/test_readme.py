"""The README's counts are the code's: the stored runs, their core-hours and copies as
``python -m andrea.experiments --list`` gives them, and how many deciding runs a commit re-runs in full as
``andrea.evidence.rerun`` draws them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from andrea import experiments
from andrea.evidence import grids, rerun

ROOT = Path(__file__).resolve().parents[1]


def _readme() -> str:
    return " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())  # lines joined as a reader reads


@pytest.fixture(scope="module")
def listing() -> str:
    import contextlib
    import io
    import os

    old = os.environ.get("ANDREA_WORKERS")
    os.environ["ANDREA_WORKERS"] = "2"  # the README's "on two cores"
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert experiments.main(["--list"]) == 0
    finally:
        if old is None:
            del os.environ["ANDREA_WORKERS"]
        else:
            os.environ["ANDREA_WORKERS"] = old
    return out.getvalue()


def _rows(listing: str) -> dict[str, str]:
    return {m.group(1): line for line in listing.splitlines() if (m := re.match(r"^(\S+)\s+\d+ runs\s", line))}


def test_the_readme_counts_the_stored_runs_their_hours_and_copies_as_the_list_does(listing):
    rows = {k: line for k, line in _rows(listing).items() if "declared, not run" not in line}  # stored grids
    runs = sum(int(re.search(r"(\d+) runs", line).group(1)) for line in rows.values())
    made = sum(int(m.group(1)) for line in rows.values() if (m := re.search(r"another CPU\s+(\d+)/", line)))
    total = re.search(
        r"stored runs: ([\d.]+) core-hours, about ([\d.]+) h .*?: ([\d.]+) core-hours made, (\d+) runs still", listing
    )
    assert total, listing
    readme = _readme()
    said = f"today {runs} runs and {float(total[1]):.1f} core-hours of stored training: about {total[2]} hours"
    assert said in readme, said
    assert total[4] == "0", "the README says every copy is made"
    assert f"all {made} copies are made, {float(total[3]):.1f} core-hours" in readme, (made, total[3])


def test_the_readme_gives_the_declared_grids_copies_as_the_list_does(listing):
    rows = _rows(listing)
    said = re.search(r"\(`--list`: (\d+)/(\d+), (\d+)/(\d+), (\d+)/(\d+)\)", _readme())
    assert said
    for k, name in enumerate(("ch3_warmup_round2", "ch5_activation_round2", "ch7_deep_80")):
        m = re.search(r"another CPU\s+(\d+)/(\d+)", rows[name])
        assert (m[1], m[2]) == (said[2 * k + 1], said[2 * k + 2]), name


def test_the_readme_says_how_many_deciding_runs_a_commit_re_runs_in_full():
    seconds = rerun.deciding_seconds([grids.grid(n) for n in grids.GRIDS])
    short = [s for s in seconds.values() if s <= rerun.FULL_SAMPLE_LONGEST_S]
    longer = sorted(s for s in seconds.values() if s > rerun.FULL_SAMPLE_LONGEST_S)
    sizes = {len(rerun.full_sample(seconds, f"commit-{k}")) for k in range(2000)}
    readme = _readme()
    assert f"each of the {len(seconds)} deciding runs" in readme
    assert f"of the {len(short)} deciding runs with at most {rerun.FULL_SAMPLE_LONGEST_S:.0f} s" in readme
    assert f"each commit re-runs {min(sizes)} to {max(sizes)} in full" in readme, sorted(sizes)
    assert f"re-runs all {len(seconds)} in full, the {len(longer)} longer ones" in readme
    assert f"({longer[0]:.0f} s to {longer[-1]:.0f} s)" in readme
    read = sum(len(grids.grid(n).decision_cells()) for n in grids.GRIDS)  # every run a verdict reads
    assert f"({read - len(seconds)} of the {read} runs the verdicts read)" in readme  # no re-run reads them


def test_the_readme_names_the_grids_declared_and_not_run_yet(listing):
    waiting = sorted(name for name, line in _rows(listing).items() if "declared, not run" in line)
    readme = _readme()
    if not waiting:
        assert "none waits today" in readme
    else:
        assert f"{len(waiting)} {'waits' if len(waiting) == 1 else 'wait'} today" in readme, waiting
        for name in waiting:
            assert f"`{name}`" in readme, name
