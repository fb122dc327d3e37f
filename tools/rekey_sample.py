"""tools/rekey.py, beside each proof: a sample of the carried runs re-run in full (``rerun_sample``), whose
stored numbers must come out again exactly."""

from __future__ import annotations

import json

SAMPLE_RUNS = 3  # the cheapest carried runs, from as many grids, re-run in full before any key is carried


def sample(plan: list, runs: int = SAMPLE_RUNS) -> list[tuple[str, int, float]]:
    """(grid, cell index, stored seconds) of the runs ``rerun_sample`` re-runs: of each grid ``plan`` carries,
    its cheapest run that trained to the end on this kind of CPU (``store.cpu_identity``, recorded with each
    run: a run re-made on the kind of CPU that made it gives the same numbers to the last digit); of those,
    the ``runs`` cheapest, so from ``runs`` grids."""
    from andrea.evidence import store
    from andrea.evidence.grids import DECLARED, GRIDS

    carried = {path for path, _, _ in plan}
    here = store.cpu_identity()
    cheapest = []
    for name in sorted(set(GRIDS) | set(DECLARED)):
        if store.path(name) not in carried:
            continue
        cells = json.loads(store.path(name).read_text(encoding="utf-8"))["cells"]
        mine = [
            (float(c["result"]["seconds"]), i)
            for i, c in enumerate(cells)
            if c["result"].get("cpu") == here and not c["result"].get("diverged")
        ]
        if mine:
            secs, i = min(mine)
            cheapest.append((secs, name, i))
    return [(name, i, secs) for secs, name, i in sorted(cheapest)[:runs]]


def rerun_sample(plan: list, runs: int = SAMPLE_RUNS, run_cell=None) -> list[str]:
    """Problems (none: each sampled run, re-made from scratch by today's code, gave its stored numbers
    exactly). The syntax proofs say that the code runs the same statements; this says, on a few runs in full,
    that it computes the same numbers: a change the proof missed that moves any number of a whole run (the
    learning rate from step 50 on, which the first steps do not show) is refused. Refused too: a plan that
    carries grids of which no run was trained on this kind of CPU (nothing to compare exactly)."""
    from andrea.evidence import store
    from andrea.evidence.grids import DECLARED, GRIDS, grid

    if run_cell is None:
        from andrea.evidence.runs import run_cell
    grid_files = {store.path(n) for n in set(GRIDS) | set(DECLARED)}
    grids = [p for p, _, _ in plan if p in grid_files]
    chosen = sample(plan, runs)
    if not chosen:
        if not grids:
            return []
        return [
            f"none of the {len(grids)} carried grid(s) has a run trained to the end on this kind of CPU "
            f"({store.cpu_identity()}): re-key on a machine of the kind that trained them, where a re-run must "
            f"give the stored numbers exactly"
        ]
    problems = []
    for name, i, secs in chosen:
        g = grid(name)
        stored = json.loads(store.path(name).read_text(encoding="utf-8"))["cells"][i]["result"]
        print(f"re-running {name} cell {i} ({g.cells[i].label}) in full: {secs:.0f} s when stored ...", flush=True)
        fresh = json.loads(json.dumps(run_cell(g.cells[i], threads=1)))  # as the store writes it
        differ = [
            k
            for k in sorted(fresh)
            if k != "seconds" and json.dumps(stored.get(k), sort_keys=True) != json.dumps(fresh[k], sort_keys=True)
        ]
        if differ:
            k = differ[0]
            problems.append(
                f"{name} cell {i} ({g.cells[i].label}) re-ran to other numbers: {', '.join(differ)} differ "
                f"(final_val_loss stored {stored.get('final_val_loss')}, now {fresh.get('final_val_loss')}; "
                f"first: {k})"
            )
        else:
            print(f"  {name} cell {i}: every stored number again (final validation loss {fresh['final_val_loss']})")
    return problems
