"""Chapter 8's probe rule version 5 (``locate``) made runnable: the two models that decide it, and their probes.

Each replica is chapter 8's model (``model.CONFIG``, ``model.TRAIN``) trained from another seed
(``locate.MODEL_SEEDS``) on the same corpus with the shipped tokenizer, so that the shipped evaluation set
reads it; its weights, its untrained self and its version-5 probes are kept under ``REPLICAS/seed-<s>``.
Nothing here changes the shipped model, its probes (version 4) or their keys (``model.PROBE_CODE``).

    python -m andrea.trained.replicas train 1     # about 45 minutes on 2 free cores
    python -m andrea.trained.replicas probe 1     # a few minutes
    python -m andrea.trained.replicas probe 1 --second-cpu   # the same on the emulated second CPU
    python -m andrea.trained.replicas probe-shipped   # the shipped model's readings (shown, decide nothing)
    python -m andrea.trained.replicas decide      # version 5's verdict, once both replicas are probed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..files import atomic_write_text
from ..model.transformer import Andrea
from . import locate, model, probes

REPLICAS = model.RESULTS.parent / "replicas"  # beside the shipped model's folder, which a retrain swaps whole


def folder(seed: int) -> Path:
    if seed not in locate.MODEL_SEEDS:
        raise ValueError(f"a version-5 replica's seed must be one of {locate.MODEL_SEEDS}, got {seed!r}")
    return REPLICAS / f"seed-{seed}"


def train_replica(seed: int, out_dir: Optional[Path] = None, progress: bool = True) -> Path:
    """Train chapter 8's model from training seed ``seed`` (resuming an interrupted run in ``out_dir``) and
    store its weights and log in ``folder(seed)``."""
    from ..training.train import train

    where = folder(seed)
    out_dir = Path(out_dir or f"runs/replica-{seed}")
    t = replace(model.TRAIN, seed=seed)
    data = model.corpus.token_data(model.tokenizer(), model.corpus.manual_docs())
    resume = (out_dir / "last.pt").is_file()
    t0 = time.perf_counter()
    result = train(model.CONFIG, t, data, device="cpu", out_dir=out_dir, resume=resume, progress=progress)
    if result.interrupted or result.diverged:
        raise RuntimeError(f"replica {seed}: training stopped or diverged; nothing stored (rerun to resume)")
    where.mkdir(parents=True, exist_ok=True)
    sha = model.export(result.model.eval(), where / "model.safetensors")
    log = {"seed": seed, "weights_sha256": sha, "train": asdict(t), "seconds": round(time.perf_counter() - t0, 1)}
    atomic_write_text(where / "trained.json", json.dumps(log, indent=1) + "\n")
    return where


def load_replica(seed: int) -> Andrea:
    """Replica ``seed``'s weights (SHA-256 checked against its log), float32, eval mode."""
    from safetensors.torch import load as st_load

    where = folder(seed)
    blob = (where / "model.safetensors").read_bytes()
    want = json.loads((where / "trained.json").read_text(encoding="utf-8"))["weights_sha256"]
    if hashlib.sha256(blob).hexdigest() != want:
        raise ValueError(f"{str(where / 'model.safetensors')!r} does not match its log's SHA-256: altered")
    m = Andrea(model.CONFIG)
    m.load_state_dict({k: v.float() for k, v in st_load(blob).items()}, strict=False)
    return m.eval()


def untrained_replica(seed: int) -> Andrea:
    torch.manual_seed(seed)
    return Andrea(model.CONFIG).eval()


@torch.no_grad()
def planted_at(m, ids: np.ndarray, bits: np.ndarray, block: int, batch: int = 16) -> np.ndarray:
    """``probes.planted_features`` with the bit planted on block ``block``'s output (version 4: block 4)."""
    saved = dict(probes.PLANT)
    probes.PLANT["block"] = block
    try:
        return probes.planted_features(m, ids, bits, batch)
    finally:
        probes.PLANT.clear()
        probes.PLANT.update(saved)


def probe_task(task: probes.Task, es: dict, feats: np.ndarray, seeds: int = probes.PROBE_SEEDS) -> dict:
    """``probes.probe_task`` with version 5's probe seeds (``locate.SEED_BASE``); a planted calibration's
    labels are version 4's planted bits."""
    labels_of = replace(task, name="planted") if task.name.startswith("planted at block") else task
    saved = probes.SEED_BASE
    probes.SEED_BASE = locate.SEED_BASE
    try:
        if labels_of is task:
            return probes.probe_task(task, es, feats, seeds)
        real = probes.task_data
        probes.task_data = lambda t, e: real(labels_of, e)  # type: ignore[assignment]
        try:
            return probes.probe_task(task, es, feats, seeds)
        finally:
            probes.task_data = real
    finally:
        probes.SEED_BASE = saved


def run_probes(trained, untrained, es: dict, seeds: int = probes.PROBE_SEEDS) -> dict:
    """Every version-5 task (``locate.tasks``) on a model and its untrained self."""
    out: dict = {t.name: {} for t in locate.tasks()}
    for name, m in (("trained", trained), ("untrained", untrained)):
        for text in ("prose", "code"):
            feats = probes.features(m, es[f"{text}_ids"])
            for task in locate.tasks():
                if task.text != text:
                    continue
                use = feats
                if task.name.startswith("planted at block") and name == "trained":
                    bits = probes.task_data(replace(task, name="planted"), es)[1]
                    use = planted_at(m, es[f"{text}_ids"], bits, int(task.name.rsplit(" ", 1)[1]))
                out[task.name][name] = probe_task(task, es, use, seeds)
    return out


def readings(found: dict) -> dict:
    return {t.name: locate.reading(t, found[t.name]) for t in locate.tasks()}


def on_second_cpu() -> bool:
    """Whether this process runs on the emulated second CPU (``evidence.emulate.EMULATED`` set)."""
    from ..evidence.emulate import EMULATED

    return all(os.environ.get(k) == v for k, v in EMULATED.items())


def probes_file(seed: int, second_cpu: bool = False) -> Path:
    return folder(seed) / ("probes-second-cpu.json" if second_cpu else "probes.json")


def probe_replica(seed: int) -> Path:
    """Version 5's probes of replica ``seed`` and its untrained self, stored in its folder (``probes.json``,
    or ``probes-second-cpu.json`` when this process runs on the emulated second CPU)."""
    es = model.eval_set()
    found = run_probes(load_replica(seed), untrained_replica(seed), es)
    second = on_second_cpu()
    sha = json.loads((folder(seed) / "trained.json").read_text(encoding="utf-8"))["weights_sha256"]
    blob = {
        "rule_version": locate.RULE_VERSION,
        "seed": seed,
        "second_cpu": second,
        "weights_sha256": sha,  # load_replica checked the weights against it
        "found": model._to_json(found),
    }
    path = probes_file(seed, second)
    atomic_write_text(path, json.dumps(blob) + "\n")
    return path


def probe_shipped() -> Path:
    """Version 5's tasks on the shipped model (training seed 0) and its untrained self, stored beside the
    replicas' (``REPLICAS/shipped/probes.json``). Versions 2-4 saw this model's readings: it is shown beside the
    deciding models and decides nothing."""
    es = model.eval_set()
    found = run_probes(model.load(), model.untrained(), es)
    blob = {"rule_version": locate.RULE_VERSION, "seed": 0, "found": model._to_json(found)}
    path = REPLICAS / "shipped" / "probes.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(blob) + "\n")
    return path


def _stored(path: Path, seed: int) -> dict:
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} is missing: run `python -m andrea.trained.replicas "
            + ("probe-shipped`" if seed == 0 else f"probe {seed}`")
            + " (after training the replica, if it is not trained)"
        )
    blob = json.loads(path.read_text(encoding="utf-8"))
    if blob.get("rule_version") != locate.RULE_VERSION or blob.get("seed") != seed:
        raise ValueError(
            f"{str(path)!r} holds version {blob.get('rule_version')!r}'s probes of seed {blob.get('seed')!r}; "
            f"expected version {locate.RULE_VERSION}, seed {seed}"
        )
    log = path.parent / "trained.json"
    if seed != 0 and json.loads(log.read_text(encoding="utf-8"))["weights_sha256"] != blob.get("weights_sha256"):
        raise ValueError(f"{str(path)!r} was not made from the weights {str(log)!r} records: probe again")
    return model._from_json(blob["found"])


def stored() -> dict:
    """Version 5's stored probes: {"models": [found per deciding model, in ``locate.MODEL_SEEDS`` order],
    "shipped": the shipped model's (decides nothing)}; each found is ``run_probes``' structure."""
    return {
        "models": [_stored(probes_file(s), s) for s in locate.MODEL_SEEDS],
        "second_cpu": [_stored(probes_file(s, True), s) for s in locate.MODEL_SEEDS],
        "shipped": _stored(REPLICAS / "shipped" / "probes.json", 0),
    }


def decide():
    """Version 5's verdict from the replicas' stored probes on both machines: ({task: Verdict}, the claim's
    Verdict)."""
    st = stored()
    return locate.decide([readings(f) for f in st["models"]], [readings(f) for f in st["second_cpu"]])


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea.trained.replicas", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("train", "probe", "probe-shipped", "decide"))
    p.add_argument("seed", nargs="?", type=int)
    p.add_argument(
        "--second-cpu", action="store_true", help="probe on the emulated second CPU (probes-second-cpu.json)"
    )
    a = p.parse_args(argv)
    if a.what in ("train", "probe") and a.seed not in locate.MODEL_SEEDS:
        p.exit(2, f"{p.prog}: error: seed must be one of {locate.MODEL_SEEDS}, got {a.seed!r}\n")
    if a.what == "train":
        print(f"replica {a.seed}: stored in {train_replica(a.seed)}")
    elif a.what == "probe" and a.second_cpu and not on_second_cpu():
        from ..evidence.emulate import EMULATED

        # the kernels are chosen when torch loads: run again in a process started with the emulated machine's
        args = sys.argv[1:] if argv is None else argv
        os.execve(sys.executable, [sys.executable, "-m", "andrea.trained.replicas", *args], {**os.environ, **EMULATED})
    elif a.what == "probe":
        print(f"replica {a.seed}: probes stored in {probe_replica(a.seed)}")
    elif a.what == "probe-shipped":
        print(f"the shipped model: version-5 probes stored in {probe_shipped()}")
    else:
        per_task, claim = decide()
        for name, v in per_task.items():
            print(f"{name:22s} {v.label}: {v.reason}")
        print(f"claim: {claim}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
