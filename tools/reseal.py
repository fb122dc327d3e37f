"""Re-seal the committed results in the current digest format, with the code (never by hand).

    python tools/reseal.py --check   # say what would change; write nothing
    python tools/reseal.py           # rewrite the digests (and stamp the grids' emulated copies)

Until 2026-12-04 a grid's file carried a digest of its runs only (``sha256(json.dumps(cells, sort_keys=True))``),
and ``trained.json`` and ``probes.json`` none. Now each file's digest covers all of it but its key
(``andrea.files.json_digest``), and every emulated copy carries its own stamp (``andrea.evidence.seal``).
A file is re-sealed only if it passes the checks of the format it was written in: a grid's runs match its old
digest; the trained model's log has the code's configs and its files' SHA-256s, probes.json the probes' key
of today's weights, evaluation set and code. A file already in the new format is left as it is (it must
load). Only the digest fields, and the copies' stamps, change; every other byte is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from andrea.evidence import seal, store  # noqa: E402
from andrea.evidence.grids import DECLARED, GRIDS, grid  # noqa: E402
from andrea.files import json_digest  # noqa: E402
from andrea.trained import model as trained  # noqa: E402


def _old_grid_digest(cells: list) -> str:
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def reseal_grid(name: str, write: bool) -> str:
    g, p = grid(name), store.path(name)
    text = p.read_text(encoding="utf-8")
    blob = json.loads(text)
    if blob.get("digest") == seal.digest(blob):
        store.load(g, check_key=False)
        return f"{name}: already in the current format"
    if blob.get("digest") != _old_grid_digest(blob["cells"]):
        raise SystemExit(f"{p}: its runs do not match its (old-format) digest: not re-sealed; restore it from git")
    seal.seal(blob, [c.key() for c in g.cells])
    after = json.dumps(blob, indent=1) + "\n"
    if text != json.dumps(json.loads(text), indent=1) + "\n":
        raise SystemExit(f"{p}: not written as store.run writes a file; not re-sealed")
    if write:
        p.write_text(after, encoding="utf-8")
        store.load(g, check_key=False)
    copies = sum("emulated" in c for c in blob["cells"])
    return f"{name}: {'re-sealed' if write else 'would re-seal'} ({copies} copies stamped)"


def reseal_trained(write: bool) -> list[str]:
    out = []
    text = trained.LOG.read_text(encoding="utf-8")
    blob = json.loads(text)
    if "digest" not in blob:
        changes, bad = trained.log_problems(blob, trained.CONFIG.to_dict(), trained.asdict(trained.TRAIN))
        if changes or bad or blob["key"] != trained.key():
            raise SystemExit(f"{trained.LOG}: not current by the old checks ({changes + bad}): not re-sealed")
        for path, field in ((trained.WEIGHTS, "weights_sha256"), (trained.EVAL, "eval_sha256")):
            if hashlib.sha256(path.read_bytes()).hexdigest() != blob[field]:
                raise SystemExit(f"{path}: not the file {trained.LOG.name} names: not re-sealed")
        if hashlib.sha256(trained.TOKENIZER.read_bytes()).hexdigest() != blob["tokenizer_sha256"]:
            raise SystemExit(f"{trained.TOKENIZER}: not the file {trained.LOG.name} names: not re-sealed")
        blob["digest"] = json_digest(blob)
        if write:
            trained.LOG.write_text(json.dumps(blob, indent=1) + "\n", encoding="utf-8")
        out.append(f"{trained.LOG.name}: {'sealed' if write else 'would seal'}")
    else:
        out.append(f"{trained.LOG.name}: already sealed")
    probes_text = trained.PROBES.read_text(encoding="utf-8")
    pb = json.loads(probes_text)
    if "digest" not in pb:
        if pb.get("key") != trained.probes_key(blob, trained.EVAL.read_bytes()):
            raise SystemExit(f"{trained.PROBES}: stale by the old check (its key): not re-sealed")
        pb["digest"] = json_digest(pb)
        if write:
            trained.PROBES.write_text(json.dumps(pb) + "\n", encoding="utf-8")
        out.append(f"{trained.PROBES.name}: {'sealed' if write else 'would seal'}")
    else:
        out.append(f"{trained.PROBES.name}: already sealed")
    if write and (trained.status(), trained.probes_status()) != ("current", "current"):
        raise SystemExit(f"after sealing: {trained.status_detail()}, {trained.probes_detail()}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/reseal.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="say what would change; write nothing")
    a = p.parse_args(argv)
    names = sorted(GRIDS) + sorted(n for n in DECLARED if store.path(n).exists())
    for n in names:
        print(reseal_grid(n, not a.check))
    for line in reseal_trained(not a.check):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
