"""The command line of the training experiments behind the book's verdicts: one named grid per claim.

The grids are declared in ``andrea/evidence/grids`` (one module per chapter), run and stored in
``andrea/results`` by ``andrea.evidence.store``, and decided by ``andrea.evidence.evaluation``; this
module runs whichever are missing or stale, with the trained model (``andrea.trained.model``) and
the explorer's shipped measurements (``andrea.views.explorer``).

    python -m andrea.experiments --list        # the grids, their size, and whether their results are current
    python -m andrea.experiments               # (re)run every grid whose results are missing or stale
    python -m andrea.experiments ch3_warmup    # one grid (`make experiments` runs them all)
    python -m andrea.experiments --second-cpu  # the emulated second CPU's copies of the deciding runs
    python -m andrea.experiments --reproduce   # re-run every deciding run in full, natively and emulated
"""

from __future__ import annotations

import argparse
import errno
import sys
import time

from .evidence import rerun, store
from .evidence.evaluation import info, status
from .evidence.grids import DECLARED, GRIDS, grid
from .evidence.store import workers


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea.experiments", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "names",
        nargs="*",
        help="grids to run (default: every grid not current, and the explorer's "
        "shipped measurements, and the trained model); any of "
        f"{sorted(GRIDS) + sorted(DECLARED) + ['explorer', 'trained']}",
    )
    p.add_argument("--list", action="store_true", help="list the grids and their status, run nothing")
    p.add_argument("--force", action="store_true", help="run even grids whose results are current")
    p.add_argument("--workers", type=int, help="runs at a time (default: 2, or $ANDREA_WORKERS)")
    p.add_argument(
        "--second-cpu",
        action="store_true",
        help="train the emulated second CPU's copy of every deciding run not yet copied, for the grids whose "
        "runs are stored (about 3 to 4 times a native run's cost; `make experiments-second-cpu`)",
    )
    p.add_argument(
        "--reproduce",
        action="store_true",
        help="re-run every deciding run of the grids in full, natively and on portable kernels, and compare "
        "with the stored results (make test re-runs their first steps and a sample drawn from the commit)",
    )
    a = p.parse_args(argv)
    try:
        names = (
            [n for n in a.names if n not in ("explorer", "trained")] if a.names else sorted(GRIDS) + sorted(DECLARED)
        )
        for n in names:
            grid(n)
        if a.workers is not None and a.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {a.workers}")
        workers()  # $ANDREA_WORKERS, checked here: a bad value is named before anything runs
        if a.reproduce and a.second_cpu:
            raise ValueError(
                "--reproduce (re-run the deciding runs and compare) and --second-cpu (train their emulated copies) "
                "do different things: give one of them"
            )
        if (a.reproduce or a.second_cpu) and not names:
            flag = "--reproduce" if a.reproduce else "--second-cpu"
            raise ValueError(
                f"{flag} works on the grids' deciding runs, and {' and '.join(map(repr, a.names))} "
                f"{'is not a grid' if len(a.names) == 1 else 'are not grids'}; name grids (any of {sorted(GRIDS)}) "
                f"or none for all"
            )
    except ValueError as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    try:
        return _main(a, names)
    except OSError as e:  # a full disk or a folder that cannot be written: the message says which and what to do
        if e.errno is not None and e.errno not in _DISK_ERRNOS:
            raise
        print(f"{p.prog}: stopped: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        from .trained.model import Interrupted

        if not isinstance(e, Interrupted):
            raise
        print(f"{p.prog}: {e}", file=sys.stderr)  # stopped by a signal, its checkpoint saved: resumes next time
        return 130


# A disk that is full, over its quota or read-only, or a folder that cannot be written; an OSError with no
# errno is one the package wrote for the reader (a checkpoint that could not be written, with the free space)
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _main(a: argparse.Namespace, names: list[str]) -> int:
    if a.list:
        total = emulated = 0.0
        copies = 0
        for n in names:
            g = grid(n)
            st = status(n)
            if n in DECLARED and st != "current":
                st = "declared, not run"
            head = info(n) if st == "current" else {}
            cpu = head.get("compute_seconds", 0.0)
            total += cpu
            emulated += head.get("emulated_seconds", 0.0)
            when = f"{cpu / 3600:5.2f} core-h" if cpu else "     -      "
            machines = rule = ""
            if st == "current":
                blob = store.load(g)
                k = len(g.decision_cells())
                missing = len(store.emulated_missing(g, blob))
                copies += missing
                machines = f"another CPU {k - missing:3d}/{k:<3d}"
                rule = store.rule_status(g, blob)[0]
            print(f"{n:22s} {len(g.cells):3d} runs  {st:18s} {when}  {machines:19s} {rule:26s} {g.title}")
        print(
            f"stored runs: {total / 3600:.2f} core-hours, about {total / 3600 / workers():.1f} h from nothing here "
            f"(make experiments); the second CPU's copies of the runs that decide: {emulated / 3600:.2f} core-hours "
            f"made, {copies} runs still to make (make experiments-second-cpu)"
        )
        from .trained import model as trained
        from .views import explorer

        st, why = trained.status_detail()  # neither raises: a missing or damaged file is named here
        print(f"{'trained':22s}   1 run   {st:18s}  about 0.75 h   chapter 8's trained model" + _why(why))
        st, why = trained.probes_detail()
        print(f"{'trained probes':22s}         {st:18s}  about 2 min    chapter 8's linear probes" + _why(why))
        shipped = "stale" if explorer.shipped().problem else "current"
        print(f"{'explorer':22s}         {shipped:18s}                 the explorer's shipped measurements")
        return 0
    if a.reproduce:
        return _reproduce(names)
    if a.second_cpu:
        return _second_cpu(names, a.workers)
    t0 = time.perf_counter()
    ran = []
    for n in names:
        if not a.force and status(n) == "current":
            print(f"{n}: current, skipped")
            continue
        t1 = time.perf_counter()
        store.run(grid(n), a.workers, emulated=False)  # the second CPU's copies: --second-cpu
        ran.append(n)
        print(
            f"{n}: {len(grid(n).cells)} runs stored in {store.path(n)} ({time.perf_counter() - t1:.0f} s)", flush=True
        )
    if not a.names or "trained" in a.names:
        from .trained import model as trained

        st, why = trained.status_detail()
        damaged = st == "altered" or (st == "missing" and trained.LOG.is_file() and trained.WEIGHTS.is_file())
        if damaged and not a.force:  # git restores a damaged or missing file; a retrain takes 45 minutes
            print(
                f"trained: not retrained: {why}; restore it from git (git checkout -- andrea/results/trained), "
                "or pass --force to retrain (about 45 minutes)"
            )
        elif a.force or st != "current":
            t1 = time.perf_counter()
            try:
                blob = trained.retrain()
            except trained.Interrupted as e:  # its checkpoint is saved: the message says how to resume
                print(f"trained: {e}", file=sys.stderr)
                return 130
            except (ValueError, OSError) as e:  # a folder in the way, a full disk: said, without a traceback
                if isinstance(e, OSError) and e.errno is not None and e.errno not in _DISK_ERRNOS:
                    raise  # another OSError is a bug: its traceback is wanted
                print(f"trained: not retrained: {e}", file=sys.stderr)
                return 1
            took = time.perf_counter() - t1
            print(
                f"trained: {blob['tokens_seen']:,} tokens at {blob['tokens_per_s']:,.0f} tokens/s, validation loss "
                f"{blob['history']['val_loss'][-1]:.3f} nats; stored in {trained.RESULTS} ({took:.0f} s)"
            )
        else:
            print("trained: current, skipped")
        if trained.status() != "current":
            print("trained: probes not run: the model they probe is not current (above)")
        elif a.force or trained.probes_status() != "current":
            t1 = time.perf_counter()
            print(f"trained: probes stored in {trained.write_probes()} ({time.perf_counter() - t1:.0f} s)")
    if not a.names or "explorer" in a.names:
        from .views import explorer

        if a.force or explorer.shipped().problem:
            t1 = time.perf_counter()
            from .progress import bar

            count = len(set(explorer.grid_settings()) | set(explorer.reference_settings()))
            pb = bar(count, "explorer: shipped settings", unit="setting")
            explorer.build_shipped(lambda i, n: pb.update(1))
            pb.close()
            print(
                f"explorer: shipped measurements stored in {store.path(explorer.SHIPPED)} "
                f"({time.perf_counter() - t1:.0f} s)"
            )
        else:
            print("explorer: current, skipped")
    print(f"experiments: {len(ran)} grid(s) run in {time.perf_counter() - t0:.0f} s in total")
    return 0


def _why(why: str) -> str:
    return f" ({why})" if why else ""


def _second_cpu(names: list[str], n_workers) -> int:
    """Train the missing emulated copies of the deciding runs, grid by grid (each grid's file is written
    when its copies are done; a stopped grid resumes from the cached copies)."""
    t0 = time.perf_counter()
    for n in names:
        if status(n) != "current":
            print(f"{n}: its own runs are not stored yet (make experiments first), skipped")
            continue
        g = grid(n)
        missing = store.emulated_missing(g, store.load(g))
        if not missing:
            print(f"{n}: every deciding run has its copy, skipped")
            continue
        t1 = time.perf_counter()
        store.run(g, n_workers, emulated=True)
        print(f"{n}: {len(missing)} copies made ({time.perf_counter() - t1:.0f} s)", flush=True)
    print(f"experiments: second CPU done in {time.perf_counter() - t0:.0f} s in total")
    return 0


def _reproduce(names: list[str]) -> int:
    """Every deciding run of ``names`` re-run in full (rerun.reproduce); 1 when one does not reproduce."""
    bad = 0
    for n in names:
        t1 = time.perf_counter()
        r = rerun.reproduce(grid(n))
        for c in r["cells"]:
            e = c.get("emulated", {})
            print(
                f"{n}: {c['label']}: final loss native vs stored {c['native']['final_val_loss']} "
                f"(tolerance {c['native']['tolerance']}), emulated vs its stored {e.get('twin')} twin "
                f"{e.get('final_val_loss')} (tolerance {e.get('tolerance')})"
            )
        for problem in r["problems"]:
            print(f"{n}: DOES NOT REPRODUCE: {problem}")
        bad += not r["ok"]
        print(
            f"{n}: {'reproduces' if r['ok'] else 'does not reproduce'} ({time.perf_counter() - t1:.0f} s)", flush=True
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
