"""tools/rekey.py --added-option: a new config value re-keys the stored results only when the code it
adds runs for that value alone."""

import sys

from conftest import ROOT, need

sys.path.insert(0, str(ROOT / "tools"))
import rekey  # noqa: E402

OLD = """
NORMS = ("pre", "none")

class Block:
    def __init__(self, cfg):
        has_norm = cfg.norm != "none"
        self.ln = make(has_norm)

def count(c):
    out = {"final": 1 if c.norm == "pre" else 0}
    return out
"""


def check(new: str):
    return rekey.same_but_for_added(OLD, new, ("norm", "NORMS", "final"))


def test_guarded_additions_are_the_old_code():
    new = OLD.replace('("pre", "none")', '("pre", "none", "final")')
    new = new.replace(
        '        has_norm = cfg.norm != "none"\n',
        '        has_norm = cfg.norm != "none"\n        if cfg.norm == "final":  # new\n            has_norm = False\n',
    )
    new = new.replace("    return out", '    if c.norm == "final":\n        out["final"] = 1\n    return out')
    assert check(new) == ("", 3)
    assert check(OLD) == ("", 0)


def test_anything_else_is_refused():
    guarded = '        if cfg.norm == "final":\n            has_norm = False\n'
    at = "        self.ln = make(has_norm)\n"
    refused = {
        "an else branch runs for the old values": guarded + "        else:\n            has_norm = True\n",
        "a guard on an old value": guarded.replace('"final"', '"pre"'),
        "a guard that is not a plain comparison": guarded.replace(
            "cfg.norm ==", 'cfg.norm.startswith("f") or cfg.norm =='
        ),
        "a guard on another option": guarded.replace("cfg.norm", "cfg.init"),
    }
    for why, text in refused.items():
        problem, dropped = check(OLD.replace(at, text + at))
        assert problem and dropped == 0, why
    assert check(OLD.replace('!= "none"', 'not in ("none", "final")'))[0], "an old statement changed"
    assert check(OLD.replace('("pre", "none")', '("pre", "final")'))[0], "an old value removed"


def test_the_repository_change_is_an_added_option():
    """The change that added norm="final" and the full-disk message (commits b243f40..1d101ac) passes the
    check that re-keyed the stored results, and a tampered copy of it does not."""
    import subprocess

    before, after = "b243f40", "1d101ac"
    have = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", after + "^{commit}"], capture_output=True)
    need(have.returncode == 0, f"the git history from {before} to {after} (a full clone, not a shallow one)")
    assert rekey.added_option(before, after) == []
    old = rekey.old_source(before, "model.layers")
    new = rekey.old_source(after, "model.layers")
    assert rekey.same_but_for_added(old, new)[0] == ""
    tampered = new.replace("has_norm = False", "has_norm = cfg.norm != 'post'")
    assert tampered != new and rekey.same_but_for_added(old, tampered.replace('== "final"', '!= "pre"'))[0]


SAVE = """
def save(blob, path):
    tmp = name(path)
    try:
        write(blob, tmp)
    except KeyError:
        fallback()
    finally:
        clean(tmp)
"""


def test_an_error_that_only_gets_a_clearer_message_is_the_old_code():
    """A handler that only raises (a full disk named, with its free space) changes no stored run: with no
    error the same statements run, and with one the run fails either way. It must come after the
    handlers that do something else, and its helper must be called from nowhere else."""
    handler = "    except (OSError, RuntimeError) as e:\n        raise _write_error(path, e) from e\n"
    helper = "\n\ndef _write_error(path, e):\n    return OSError(str(path))\n"
    ok = SAVE.replace("        fallback()\n", "        fallback()\n" + handler) + helper
    assert rekey.same_but_for_added(SAVE, ok) == ("", 2)
    before = SAVE.replace("    except KeyError:\n", handler + "    except KeyError:\n") + helper
    assert rekey.same_but_for_added(SAVE, before)[0], "a raising handler ahead of one that does something"
    called = ok.replace("    tmp = name(path)\n", "    tmp = name(path)\n    _write_error(path, None)\n")
    assert rekey.same_but_for_added(SAVE, called)[0], "the helper is called on the normal path"
    swallowed = SAVE.replace("        fallback()\n", "        raise\n")
    assert rekey.same_but_for_added(SAVE, swallowed)[0], "a handler that did something now only raises"


# ---------------------------------------------------------------------------------------------
# The probes of issue 48 (R1-R3, R6): a guard whose subject does something, and statements reordered
# ---------------------------------------------------------------------------------------------
def _covered(name: str) -> str:
    return (ROOT / "andrea" / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8")


def _guarded(name: str, at: str, guard: str) -> str:
    """The covered module ``name`` as it is now, with ``guard`` put in place of the guard ``at``."""
    now = _covered(name)
    assert now.count(at) == 1, f"{at!r} is not once in andrea/{name}"
    return now.replace(at, guard)


def test_a_guard_whose_subject_assigns_or_calls_is_not_dropped():
    """R1, R2: ``if <X>.norm == "final":`` is dropped only when <X> is plain names and attributes. A walrus
    inside <X> (every post-norm block loses its LayerNorms) or a call (every initialisation reseeded) runs for
    every old setting too, so the change is refused."""
    probes = {
        "model.layers": (
            'if cfg.norm == "final":  # no LayerNorm in the block',
            'if (cfg, (has_norm := cfg.norm == "pre"))[0].norm == "final":  # no LayerNorm in the block',
        ),
        "model.transformer": (
            'if c.norm == "final":  # no LayerNorm in the blocks, and this one kept',
            'if (torch.manual_seed(1234), c)[1].norm == "final":  # no LayerNorm in the blocks, and this one kept',
        ),
    }
    for name, (at, guard) in probes.items():
        now = _covered(name)
        assert rekey.same_but_for_added(now, now)[0] == "", name  # the control: the module as it is passes
        problem, dropped = rekey.same_but_for_added(now, _guarded(name, at, guard))
        assert problem and dropped == 0, f"andrea/{name}: the guard {guard!r} was dropped"
    # a subscript, a call on the way, an await: none is a plain subject either
    for subject in ("cfgs[0]", "get(cfg)", "cfg.sub(1).inner"):
        new = OLD.replace(
            "        self.ln = make(has_norm)\n",
            f'        if {subject}.norm == "final":\n            has_norm = False\n        self.ln = make(has_norm)\n',
        )
        assert check(new)[0], subject
    plain = OLD.replace(
        "        self.ln = make(has_norm)\n",
        '        if cfg.inner.norm == "final":\n            has_norm = False\n        self.ln = make(has_norm)\n',
    )
    assert check(plain) == ("", 1)


def test_a_guard_that_changes_the_learning_rate_in_the_training_loop_is_refused():
    """R3: inside the training loop, a guard that triples the learning rate from step 50 on (the first 20
    steps stay bit-identical, so only a full re-run would see it) is refused by the syntax proof."""
    at = "                lr = lr_at(step, t)\n"
    guard = at + (
        '                if (model_cfg, (lr := lr * (3 if step >= 50 else 1)))[0].norm == "final":\n'
        "                    pass\n"
    )
    now = _covered("training.train")
    problem, dropped = rekey.same_but_for_added(now, _guarded("training.train", at, guard))
    assert problem and dropped == 0, "the lr guard was dropped"


def test_statements_are_compared_in_order_in_every_proof():
    """R6: ``LR = 1e-3; LR = 3e-3`` is not ``LR = 3e-3; LR = 1e-3`` (the module's LR differs): the rename
    proof (``_statements``, ``same_code``) and the --same-text proof (``_rest``) compare in order."""
    a = "LR = 1e-3\nLR = 3e-3\n\ndef lr():\n    return LR\n"
    b = "LR = 3e-3\nLR = 1e-3\n\ndef lr():\n    return LR\n"
    assert rekey._statements(a, "", False) != rekey._statements(b, "", False)
    assert rekey._rest(a, "", set(), set()) != rekey._rest(b, "", set(), set())
    assert rekey._statements(a, "", False) == rekey._statements(a, "", False)
    # a module split in two keeps each part's order: the old statements are an interleaving of the new ones
    old = "A = 1\nB = 2\nC = 3\nD = 4\n"
    assert rekey._interleaved(
        rekey._statements(old, "", False)[0],
        [rekey._statements("A = 1\nC = 3\n", "", False)[0], rekey._statements("B = 2\nD = 4\n", "", False)[0]],
    )
    assert not rekey._interleaved(
        rekey._statements(old, "", False)[0],
        [rekey._statements("C = 3\nA = 1\n", "", False)[0], rekey._statements("B = 2\nD = 4\n", "", False)[0]],
    )


def test_imports_may_be_reordered_only_while_no_name_is_bound_twice():
    """An isort that reorders imports changes nothing (the regrouping's proof, 9f12014 -> 5fdfaaa, still passes
    compared in order); an import and a definition of the same name, swapped, are refused."""
    import subprocess

    assert rekey._statements("import torch\nimport numpy\n", "", False) == rekey._statements(
        "import numpy\nimport torch\n", "", False
    )
    a, b = "from x import f\n\ndef f():\n    pass\n", "def f():\n    pass\n\nfrom x import f\n"
    assert rekey._statements(a, "", False) != rekey._statements(b, "", False)
    have = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", "5fdfaaa^{commit}"], capture_output=True)
    need(have.returncode == 0, "the git history of the regrouping (a full clone, not a shallow one)")
    saved = rekey.new_source
    try:
        rekey.new_source = lambda name: rekey.old_source("5fdfaaa", name)
        assert rekey.same_code("9f12014") == []
    finally:
        rekey.new_source = saved


def _stored_here(monkeypatch):
    """(grid name, plan carrying it): the first stored grid with a run that trained to the end and
    recorded its CPU, with this machine taken for that kind of CPU."""
    import json

    from andrea.evidence import store
    from andrea.evidence.grids import GRIDS

    for name in sorted(GRIDS):
        cells = json.loads(store.path(name).read_text())["cells"]
        cpus = [c["result"]["cpu"] for c in cells if c["result"].get("cpu") and not c["result"]["diverged"]]
        if cpus:
            monkeypatch.setattr(store, "cpu_identity", lambda cpu=cpus[0]: cpu)
            return name, [(store.path(name), "old-key", "new-key")]
    need(False, "a stored grid with a run that recorded its CPU")


def test_the_sampled_runs_must_re_run_to_their_stored_numbers(monkeypatch):
    """Beside the syntax proof, the cheapest carried run (of this CPU's kind) is re-run in full: its stored
    numbers again pass; a final loss moved by 1e-5 (the lr tripled from step 50 on: 3.241 vs 3.159) or one
    step's loss changed is refused, and so is a plan whose grids have no run of this kind of CPU."""
    import copy
    import json

    from andrea.evidence import store

    name, plan = _stored_here(monkeypatch)
    (grid_name, i, _), *_ = rekey.sample(plan)
    assert grid_name == name
    stored = json.loads(store.path(name).read_text())["cells"][i]["result"]
    same = {k: copy.deepcopy(v) for k, v in stored.items() if k not in ("cpu", "rule")}
    assert rekey.rerun_sample(plan, run_cell=lambda cell, threads: copy.deepcopy(same)) == []
    moved = dict(same, final_val_loss=stored["final_val_loss"] + 1e-5)
    problems = rekey.rerun_sample(plan, run_cell=lambda cell, threads: moved)
    assert problems and "final_val_loss" in problems[0] and name in problems[0]
    late = copy.deepcopy(same)
    late["loss"][-1] += 1e-5
    assert rekey.rerun_sample(plan, run_cell=lambda cell, threads: late)
    monkeypatch.setattr(store, "cpu_identity", lambda: "a CPU no stored run was trained on")
    problems = rekey.rerun_sample(plan, run_cell=lambda cell, threads: same)
    assert problems and "this kind of CPU" in problems[0]


# ---------------------------------------------------------------------------------------------
# --moved-out: the training command line left training/train.py for training/cli.py
# ---------------------------------------------------------------------------------------------
TRAIN_OLD = """
import argparse
import math
from .checkpoint import RunDir, describe

def lr_at(step):
    return math.cos(step)

def main(argv=None):
    p = argparse.ArgumentParser()
    return describe(p)

EXIT = 3

if __name__ == "__main__":
    main()
"""
TRAIN_NEW = """
import math
from .checkpoint import RunDir

def lr_at(step):
    return math.cos(step)

if __name__ == "__main__":
    from .cli import main
    main()
"""
GONE = {"main", "EXIT", "argparse", "describe"}


def moved(old: str, new: str, names: set = GONE):
    return rekey.same_but_moved_out(old, new, "training", names)


def test_definitions_no_covered_code_reaches_may_move_out():
    problem, removed = moved(TRAIN_OLD, TRAIN_NEW)
    assert problem == "" and sorted(r.split()[0] for r in removed) == sorted(GONE), problem
    assert moved(TRAIN_OLD, TRAIN_OLD) == ("", [])


def test_anything_else_is_not_a_move_out():
    refused = {
        "a kept statement changed": TRAIN_NEW.replace("math.cos(step)", "math.sin(step)"),
        "a statement added": TRAIN_NEW.replace("def lr_at", "LR = 3\n\ndef lr_at"),
        "a name not listed removed": TRAIN_NEW.replace("def lr_at(step):\n    return math.cos(step)\n", ""),
        "a removed name still used": TRAIN_NEW.replace("return math.cos(step)", "return describe(step)"),
        "the last import of a package module removed": TRAIN_NEW.replace("from .checkpoint import RunDir\n", ""),
    }
    for why, new in refused.items():
        names = GONE | {"RunDir"} if "package module" in why else GONE
        problem, removed = moved(TRAIN_OLD, new, names)
        assert problem and removed == [], why
    with_numpy = TRAIN_OLD.replace("import math\n", "import math\nimport numpy\n")
    assert moved(with_numpy, TRAIN_NEW, GONE | {"numpy"})[0], "a removed import that is not the standard library"
    swapped = TRAIN_OLD.replace("EXIT = 3\n", "").replace("def lr_at", "EXIT = 3\n\ndef lr_at")
    assert moved(swapped, TRAIN_NEW)[0] == ""  # a removed statement's place does not matter
    reordered = TRAIN_NEW.replace("import math\nfrom .checkpoint import RunDir\n", "from .checkpoint import RunDir\n")
    reordered = reordered.replace("if __name__", "import math\n\nif __name__")
    assert moved(TRAIN_OLD, reordered)[0], "the kept statements reordered"


def test_the_training_command_line_moved_out_of_the_hashed_module():
    """The move this mode was made for (training/train.py's main() to training/cli.py, issue 48) passes,
    and a covered module that imported from cli.py, or reached a removed name through the module, would not."""
    import subprocess

    base = "f5e3e13"
    have = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", base + "^{commit}"], capture_output=True)
    need(have.returncode == 0, f"the git history at {base} (a full clone, not a shallow one)")
    assert "def main(" in rekey.old_source(base, "training.train")
    assert "def main(" not in _covered("training.train") and "def main(" in _covered("training.cli")
    assert rekey.moved_out(base) == []
    saved_new, saved_old = rekey.new_source, rekey.old_source
    try:
        for line in ("from .cli import EXIT_DIVERGED\n", "from . import train as T\nX = T.main\n"):
            # the same line in the old and the new training.data: only the reach across modules differs
            rekey.new_source = lambda n, x=line: saved_new(n) + x if n == "training.data" else saved_new(n)
            rekey.old_source = lambda r, n, x=line: saved_old(r, n) + x if n == "training.data" else saved_old(r, n)
            assert rekey.moved_out(base), line
    finally:
        rekey.new_source, rekey.old_source = saved_new, saved_old
