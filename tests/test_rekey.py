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
