"""The trained ANDREA that ships with the book: its settings, its training, its weights.

    python -m andrea.trained.model            # retrain (about 45 minutes on 2 CPU cores), then export

Twelve blocks of ANDREA-120M's design (pre-norm, GELU, GPT-2 initialisation, tied head, the book's
8449-token BPE), narrowed to width 192 and context 256 so that it trains on a 2-core CPU, on
Python's manuals (``corpus``). The export, in ``andrea/results/trained/``:

* ``model.safetensors``: the weights in float16 (14 MB; the model computes in float32);
* ``trained.json``: the configs, the corpus, the training log (loss, validation loss, tokens per
  second), the unigram and bigram baselines, and the weights' SHA-256;
* ``tokenizer.json``: the BPE tokenizer the model was trained with (trained on the Python docs of the
  Python that trained the model; another Python's docs give another tokenizer, so ``tokenizer()``
  reads this file, checked against the log's SHA-256, never a fresh one);
* ``eval.npz``: held-out windows of the manuals and of the standard library's code, with the labels
  the probes use (``probes.make_eval_set``);
* ``probes.json``: ``probes.run_probes`` on the shipped model and its untrained self (a minute and a
  half of forward passes on a CPU, too long for the book's build), keyed by the weights, the
  evaluation set and the probing code; ``probe_results`` reads it, or runs the probes when it is stale.

``make test`` re-runs the first steps from scratch and compares them with the log
(``first_steps_match``), and re-runs the probes natively and on portable kernels against
``probes.json``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..files import atomic_write_bytes, atomic_write_text, json_digest
from ..model.config import ANDREA_120M, AndreaConfig
from ..model.transformer import Andrea
from ..training import manuals as corpus
from ..training.train import TrainConfig, train
from . import probes
from . import publish as _publish
from .logcheck import log_problems

RESULTS = Path(__file__).resolve().parent.parent / "results" / "trained"
WEIGHTS = RESULTS / "model.safetensors"
LOG = RESULTS / "trained.json"
EVAL = RESULTS / "eval.npz"
TOKENIZER = RESULTS / "tokenizer.json"
PROBES = RESULTS / "probes.json"
# The modules whose code decides what the probes read: the model, the residual-stream hooks, the probes.
PROBE_CODE = ("model.config", "model.layers", "model.transformer", "measure.probe", "trained.probes")
CONFIG = replace(ANDREA_120M, d_model=192, n_head=6, n_layer=12, context_length=256)
TRAIN = TrainConfig(
    steps=2400,
    batch_size=16,
    seq_len=256,
    lr=2e-3,
    warmup=100,
    min_lr_ratio=0.1,
    weight_decay=0.1,
    eval_every=100,
    eval_batches=8,
    seed=0,
)
FIRST_STEPS = 5
FIRST_STEPS_TOLERANCE = 0.005  # nats: another CPU's kernels (the results store's early_loss)


class NotShipped(FileNotFoundError):
    pass


def key() -> str:
    """What decides the trained weights: the training code (the results store's modules), the two
    configs and the corpus's file list and split. A log with another key is stale."""
    from ..evidence.store import CODE_MODULES
    from ..files import source_hash

    spec = json.dumps([CONFIG.to_dict(), asdict(TRAIN), corpus.VAL_MODULUS, sorted(corpus.MANUALS.items())])
    return f"{source_hash(CODE_MODULES)}-{hashlib.sha256(spec.encode()).hexdigest()[:16]}"


def status() -> str:
    """ "current", "missing" (a file of the model is missing), "stale" (the log's key is not this code's)
    or "altered" (a file cannot be read, or is not what the log says: ``status_detail`` says which)."""
    return status_detail()[0]


def status_detail() -> tuple[str, str]:
    """(``status()``, which file and why; "" when current). Never raises: ``--list`` shows it."""
    files = (LOG, WEIGHTS, EVAL, TOKENIZER)
    try:
        with _publish.reading(RESULTS, LOG.name):
            raw = [_read(p) for p in files]
        missing = [p.name for p, b in zip(files, raw) if b is None]
        if missing:
            return "missing", f"no {' and no '.join(missing)} in {str(RESULTS)!r}"
        blob = _parse_log(raw[0])
        for path, got, field in zip(files[1:], raw[1:], ("weights_sha256", "eval_sha256", "tokenizer_sha256")):
            sha = hashlib.sha256(got or b"").hexdigest()
            if sha != blob[field]:
                return "altered", f"{path.name} has SHA-256 {sha[:12]}…, the log says {blob[field][:12]}…"
    except (OSError, ValueError) as e:
        return "altered", str(e)
    if blob["key"] != key():
        return "stale", "made by other training code or configs than today's"
    return "current", ""


def _read(path: Path) -> Optional[bytes]:
    """The bytes of ``path``, None if there is no such file; ValueError naming it if it cannot be read."""
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError as e:
        raise ValueError(f"{str(path)!r} cannot be read ({e.strerror or type(e).__name__})") from None


RESTORE = "restore it from git (git checkout -- andrea/results/trained) or run `make experiments`"


def _parse_log(raw: Optional[bytes]) -> dict:
    """The log from its bytes, checked: readable, its configs the code's, its fields well formed, and its
    contents the ones its digest was computed on (``files.json_digest``); ValueError naming the file."""
    if raw is None:
        raise NotShipped(f"no trained model's log at {str(LOG)!r}: run `make experiments` to train it")
    try:
        blob = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{str(LOG)!r} is not readable JSON ({type(e).__name__}): {RESTORE}") from None
    if not isinstance(blob, dict) or "weights_sha256" not in blob:
        raise ValueError(f"{str(LOG)!r} is not the trained model's log (no weights_sha256): {RESTORE}")
    changes, bad = log_problems(blob, CONFIG.to_dict(), asdict(TRAIN))
    if changes:
        raise ValueError(
            f"{str(LOG)!r} does not describe the model its key stands for ({'; '.join(changes[:4])}): {RESTORE}"
        )
    if bad:
        raise ValueError(f"{str(LOG)!r} has malformed fields ({'; '.join(bad[:4])}): {RESTORE}")
    if blob.get("digest") != json_digest(blob):
        raise ValueError(
            f"{str(LOG)!r}: its contents do not match the digest written with them (edited by hand, or damaged): "
            + RESTORE
        )
    return blob


def check_log() -> dict:
    """The log (``log``), every check included: kept for the callers that name the check."""
    return log()


def baselines(data) -> dict:
    """Cross-entropy (nats/token) on the validation split of a unigram and a bigram model counted on
    the training split. The bigram is interpolated with the unigram (weight 0.9 on the bigram where
    the previous token was seen), so that unseen pairs do not score infinity."""
    v = data.vocab_size
    tr, va = data.train.numpy(), data.val.numpy()
    uni = np.bincount(tr, minlength=v).astype(np.float64) + 1.0
    uni /= uni.sum()
    pair = np.bincount(tr[:-1] * v + tr[1:], minlength=v * v).reshape(v, v).astype(np.float64)
    row = pair.sum(1, keepdims=True)
    lam = np.where(row > 0, 0.9, 0.0)
    big = lam * pair / np.maximum(row, 1) + (1 - lam) * uni[None, :]
    uni_ce = float(-np.log(uni[va]).mean())
    big_ce = float(-np.log(big[va[:-1], va[1:]]).mean())
    return {"unigram_ce": uni_ce, "bigram_ce": big_ce}


def export(model: Andrea, path: Optional[Path] = None) -> str:
    """Write the weights as float16 safetensors (atomically); returns their SHA-256."""
    from safetensors.torch import save

    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    state.pop("lm_head.weight", None)  # tied to the token embedding
    blob = save(state, metadata={"config": json.dumps(model.config.to_dict())})
    atomic_write_bytes(path or WEIGHTS, blob)
    return hashlib.sha256(blob).hexdigest()


def log() -> dict:
    """The training log, after checking that it is readable, that its configs are the ones this code trains
    (``CONFIG``, ``TRAIN``: a log edited to another activation would build another model from the same
    weights), that every field the book reads is well formed, and that nothing in it was changed since its
    digest was written (the final validation loss, the baselines: chapter 8 prints them). ValueError
    naming the file and the fields; NotShipped without a log."""
    with _publish.reading(RESULTS, LOG.name):
        raw = _read(LOG)
    return _parse_log(raw)


def load(path: Optional[Path] = None) -> Andrea:
    """The shipped trained model in float32, eval mode. Its SHA-256 is checked against the log, and the
    log itself (``log``). The hashes sit beside the files they cover: they catch a damaged, truncated or
    swapped file and a hand edit of one file, not someone who rewrites the file and its hash together
    (git's history is the record for that: README, "Reliability")."""
    from safetensors.torch import load as st_load

    path = Path(path or WEIGHTS)
    with _publish.reading(RESULTS, LOG.name):
        blob, raw_log = _read(path), _read(LOG)
    if blob is None:
        raise NotShipped(f"no trained weights at {str(path)!r}: run `make experiments` to train them")
    want = _parse_log(raw_log)["weights_sha256"]
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        raise ValueError(
            f"{str(path)!r} has SHA-256 {got[:12]}…, the log says {want[:12]}…: the file was altered; {RESTORE}"
        )
    cfg = AndreaConfig(**_parse_log(raw_log)["model_config"])
    n = int.from_bytes(blob[:8], "little")  # safetensors: a header length, then a JSON header
    inside = json.loads(json.loads(blob[8 : 8 + n]).get("__metadata__", {}).get("config", "null"))
    if inside != cfg.to_dict():  # the config written inside the hashed weights file
        raise ValueError(f"{str(path)!r} was written for another model config than its log's: {inside}")
    model = Andrea(cfg)
    state = {k: v.float() for k, v in st_load(blob).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise ValueError(f"{str(path)!r} does not fit {cfg}: missing {missing}, unexpected {unexpected}")
    return model.eval()


def eval_set() -> dict:
    """The shipped held-out windows and the probes' labels (``probes.make_eval_set``)."""
    import io

    with _publish.reading(RESULTS, LOG.name):
        raw_log, blob = _read(LOG), _read(EVAL)
    want = _parse_log(raw_log)["eval_sha256"]
    if blob is None:
        raise NotShipped(f"no evaluation set at {str(EVAL)!r}: {RESTORE}")
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        raise ValueError(
            f"{str(EVAL)!r} has SHA-256 {got[:12]}…, the log says {want[:12]}…: the held-out windows or "
            "their labels were altered; restore it from git (git checkout -- andrea/results/trained)"
        )
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:  # the bytes checked, not the file read again
        es = {k: z[k] for k in z.files}
    es.update(probes.token_kinds(tokenizer()))  # what a name's neighbours are (the contextual syntax task)
    return es


def write_eval_set() -> Path:
    """(Re)make the evaluation set from the manuals and the standard library (needs the corpus), and
    publish it with the shipped weights and a log that names its SHA-256."""
    import shutil

    blob = check_log()
    stage = _stage()
    for f in RESULTS.iterdir():
        if f.is_file() and f.name not in (EVAL.name, LOG.name, _publish.MARKER):
            shutil.copy2(f, stage / f.name)
    probes.save_eval_set(probes.make_eval_set(corpus.manual_docs(), tokenizer()), stage / EVAL.name)
    blob["eval_sha256"] = hashlib.sha256((stage / EVAL.name).read_bytes()).hexdigest()
    blob["digest"] = json_digest(blob)
    atomic_write_text(stage / LOG.name, json.dumps(blob, indent=1) + "\n")
    publish(stage)
    return EVAL


def untrained() -> Andrea:
    """The same model at initialisation (the training run's seed): the control of every measurement."""
    torch.manual_seed(TRAIN.seed)
    return Andrea(AndreaConfig(**check_log()["model_config"])).eval()


def probes_key(log_blob: Optional[dict] = None, eval_bytes: Optional[bytes] = None) -> str:
    """What decides the probes' results: the shipped weights, the evaluation set, the probing code and
    its settings, and torch (from ``log_blob`` and ``eval_bytes`` when given, else read here)."""
    from ..files import source_hash

    if log_blob is None or eval_bytes is None:
        with _publish.reading(RESULTS, LOG.name):
            raw_log, eval_bytes = _read(LOG), _read(EVAL)
        log_blob = _parse_log(raw_log)
        if eval_bytes is None:
            raise NotShipped(f"no evaluation set at {str(EVAL)!r}: {RESTORE}")
    spec = [log_blob["weights_sha256"], hashlib.sha256(eval_bytes).hexdigest(), TRAIN.seed]
    spec += [probes.PROBE_SEEDS, probes.N_PROBE_TRAIN, probes.N_PROBE_TEST, [asdict(t) for t in probes.TASKS]]
    spec += [probes.RULE_VERSION, probes.SEED_BASE, probes.PLANT, probes.MARGIN]
    digest = hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]
    return f"{source_hash(PROBE_CODE)}-{digest}-torch{torch.__version__.split('+')[0]}"


def _to_json(found: dict) -> dict:
    return {
        t: {m: {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()} for m, r in by.items()}
        for t, by in found.items()
    }


def _from_json(blob: dict) -> dict:
    return {
        t: {m: {k: (np.array(v) if isinstance(v, list) else v) for k, v in r.items()} for m, r in by.items()}
        for t, by in blob.items()
    }


PROBE_PARTS = (("trained", "prose"), ("trained", "code"), ("untrained", "prose"), ("untrained", "code"))


def run_probes(part: Optional[tuple[str, str]] = None) -> dict:
    """``probes.run_probes`` on the shipped model and its untrained self, on the evaluation set; with
    ``part`` (one of ``PROBE_PARTS``: a model and a text), only that model's probes of the tasks on that
    text, a quarter of the work, computed exactly as the whole run computes them."""
    if part is None:
        return probes.run_probes(load(), untrained(), eval_set())
    if part not in PROBE_PARTS:
        raise ValueError(f"part must be one of {PROBE_PARTS}, got {part!r}")
    name, text = part
    model, es = (load() if name == "trained" else untrained()), eval_set()
    return probes.probe_text(name, model, text, es)


def write_probes() -> Path:
    """Run the probes and store them in ``probes.json`` with their key and digest."""
    blob = {"key": probes_key(), "threads": torch.get_num_threads(), "found": _to_json(run_probes())}
    blob["digest"] = json_digest(blob)
    atomic_write_text(PROBES, json.dumps(blob) + "\n")
    return PROBES


def probes_status() -> str:
    """ "current", "missing" (no probes.json, or no model or evaluation set to key it by), "stale" (made
    from other weights, evaluation set or code) or "altered" (``probes_detail`` says which file, why)."""
    return probes_detail()[0]


def probes_detail() -> tuple[str, str]:
    """(``probes_status()``, which file and why; "" when current). Never raises: ``--list`` shows it."""
    try:
        with _publish.reading(RESULTS, LOG.name):
            raw, raw_log, eval_bytes = _read(PROBES), _read(LOG), _read(EVAL)
        missing = [p.name for p, b in ((PROBES, raw), (LOG, raw_log), (EVAL, eval_bytes)) if b is None]
        if missing:
            return "missing", f"no {' and no '.join(missing)} in {str(RESULTS)!r}"
        log_blob = _parse_log(raw_log)
    except (OSError, ValueError) as e:
        return "altered", str(e)
    try:
        blob = json.loads((raw or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return "altered", f"{str(PROBES)!r} is not readable JSON ({type(e).__name__})"
    if not isinstance(blob, dict) or blob.get("digest") != json_digest(blob) or not isinstance(blob.get("found"), dict):
        return "altered", f"{str(PROBES)!r}: its results do not match the digest written with them (edited, or damaged)"
    if blob.get("key") != probes_key(log_blob, eval_bytes):
        return "stale", "made from other weights, evaluation set or probing code than today's"
    return "current", ""


def probe_results() -> dict:
    """The probes of the shipped model and its untrained self (``probes.run_probes``): read from
    ``probes.json`` when it was made from these weights, this evaluation set and this code, else run
    here (a minute or two on a CPU). Same structure either way: {task: {"trained": ..., "untrained": ...}}.
    An altered probes.json (its digest) is refused by name, not re-run in silence."""
    st, why = probes_detail()
    if st == "altered":
        raise ValueError(
            f"{why}: restore it from git (git checkout -- andrea/results/trained) or run "
            "`python -m andrea.trained.model --probes`"
        )
    if st == "current":
        with _publish.reading(RESULTS, LOG.name):
            raw = _read(PROBES)
        blob = json.loads(raw.decode("utf-8")) if raw is not None else {}
        if blob.get("digest") == json_digest(blob):  # the file read again: still the one just checked
            return _from_json(blob["found"])
    return run_probes()


def retrain(out_dir: Path = Path("runs/trained"), progress: bool = True) -> dict:
    """Train (resuming from ``out_dir`` when a run was interrupted), export, write the log."""
    from ..training.data import get_tokenizer

    docs = corpus.manual_docs()
    tok = get_tokenizer("bpe")  # trained on this Python's docs; shipped with the weights (``tokenizer``)
    data = corpus.token_data(tok, docs)
    out_dir = Path(out_dir)
    resume = prepare_run_dir(out_dir)
    t0 = time.perf_counter()
    result = train(CONFIG, TRAIN, data, device="cpu", out_dir=out_dir, resume=resume, progress=progress)
    seconds = time.perf_counter() - t0
    if result.interrupted:
        raise Interrupted(
            f"retrain: stopped by {result.signal} at step {result.steps_done} of {TRAIN.steps}; the checkpoint "
            f"{str(out_dir / 'last.pt')!r} was saved, and running `python -m andrea.trained.model` (or `make "
            "experiments`) again resumes it from there"
        )
    if result.diverged:
        raise RuntimeError(
            f"retrain: training diverged at step {result.diverged_at} (non-finite loss or gradient); nothing was "
            "published: the shipped model is unchanged"
        )
    model = result.model.eval()
    stage = _stage()  # every file of the new model, written beside the shipped one, then swapped in
    sha = export(model, stage / WEIGHTS.name)
    tok_sha = hashlib.sha256(atomic_write_text(stage / TOKENIZER.name, tok._tok.to_str()).read_bytes()).hexdigest()
    probes.save_eval_set(probes.make_eval_set(docs, tok), stage / EVAL.name)
    eval_sha = hashlib.sha256((stage / EVAL.name).read_bytes()).hexdigest()
    h = result.history
    blob = {
        "key": key(),
        "model_config": CONFIG.to_dict(),
        "train_config": asdict(TRAIN),
        "corpus": {
            "name": "Python 3.11's manuals (reStructuredText sources)",
            "package": f"Debian {corpus.PACKAGE}",
            "license": "PSF License (see andrea/texts/COPYRIGHT-python3.11-doc.txt)",
            "digest": data.digest,
            "tokens": {"train": len(data.train), "val": len(data.val)},
            **corpus.describe(docs),
        },
        "tokens_seen": TRAIN.steps * TRAIN.batch_size * TRAIN.seq_len,
        "seconds": seconds if not resume else None,
        "tokens_per_s": result.tokens_per_s,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "history": {k: h[k] for k in ("step", "loss", "lr", "grad_norm", "val_step", "val_loss")},
        "baselines": baselines(data),
        "weights_sha256": sha,
        "weights_dtype": "float16",
        "eval_sha256": eval_sha,  # the held-out windows and the probes' labels (eval_set checks it)
        "tokenizer_sha256": tok_sha,  # the tokenizer the weights were trained with (tokenizer checks it)
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",  # whose docs trained the tokenizer
    }
    blob["digest"] = json_digest(blob)  # every number the book prints from the log is under it
    atomic_write_text(stage / LOG.name, json.dumps(blob, indent=1) + "\n")  # the log last: the stage is complete
    publish(stage)
    return blob


# ---------------------------------------------------------------------------------------------
# Publishing: the weights, the evaluation set and the log as one unit
# ---------------------------------------------------------------------------------------------
def tokenizer():
    """The tokenizer the shipped model was trained with (``tokenizer.json``, its SHA-256 checked against
    the log's). Use it, not ``get_tokenizer("bpe")``, with the trained model: that one is trained afresh
    on the installed Python's docs, which differ from one Python version to the next, and would give the
    model token ids it never learned (silently: every id is valid)."""
    from ..training.data import BPETokenizer

    with _publish.reading(RESULTS, LOG.name):
        raw_log, blob = _read(LOG), _read(TOKENIZER)
    want = _parse_log(raw_log)["tokenizer_sha256"]
    if blob is None:
        raise NotShipped(f"no tokenizer at {str(TOKENIZER)!r}: {RESTORE}")
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        raise ValueError(
            f"{str(TOKENIZER)!r} has SHA-256 {got[:12]}…, the log says {want[:12]}…: it is not the tokenizer "
            "the model was trained with; restore it from git (git checkout -- andrea/results/trained)"
        )
    from tokenizers import Tokenizer

    return BPETokenizer(Tokenizer.from_str(blob.decode("utf-8")))


def _stage() -> Path:
    """An empty folder beside the shipped model's, ``<results>.new``, for the next model's files
    (``publish.stage``: marked as a publish's, and held by this process until ``publish``)."""
    return _publish.stage(RESULTS, LOG.name)


def _kill_point(where: str) -> None:
    """A place where a publish can be killed (the tests raise here, one place at a time)."""


def publish(stage: Path) -> None:
    """Put the staged model (weights, evaluation set, log: the log written last) in place of the shipped
    one by two renames, under the lock (``publish.publish``). A kill at any point leaves the old model or
    the new one, complete: ``recover`` (run before any read) finishes or undoes an interrupted swap."""
    _publish.publish(RESULTS, stage, LOG.name, lambda where: _kill_point(where))


def recover() -> Optional[str]:
    """Finish or undo a publish that was killed, and remove what it left: only folders a publish made
    (``publish.recover``). Returns what it did (None: nothing to do)."""
    return _publish.recover(RESULTS, LOG.name)


def prepare_run_dir(out_dir: Path) -> bool:
    """Whether ``retrain`` resumes the run in ``out_dir``: only a run of this very code and configs
    (the folder's ``KEY`` file, written when it started, is ``key()``) that has not finished. A finished
    run, or another code's, is moved aside to ``<out_dir>.<time>`` (and said so), and a fresh run starts."""
    from ..model.transformer import read_checkpoint

    ckpt, stamp = out_dir / "last.pt", out_dir / "KEY"
    if ckpt.is_file():
        theirs = stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else None
        try:
            step = int(read_checkpoint(ckpt)["extra"].get("step", -1))
        except (ValueError, OSError, TypeError):
            step = -1
        why = (
            "it was made by other code or configs"
            if theirs != key()
            else f"it finished (step {step} of {TRAIN.steps})"
            if step >= TRAIN.steps
            else "its checkpoint cannot be read"
            if step < 0
            else ""
        )
        if not why:
            return True
        aside = out_dir.with_name(f"{out_dir.name}.{time.strftime('%Y%m%d-%H%M%S')}")
        k = 1
        while aside.exists():  # two in one second
            aside, k = out_dir.with_name(f"{out_dir.name}.{time.strftime('%Y%m%d-%H%M%S')}-{k}"), k + 1
        out_dir.rename(aside)
        print(f"retrain: moved the run in {str(out_dir)!r} aside to {str(aside)!r} ({why}); starting afresh")
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stamp, key() + "\n")
    return False


class Interrupted(RuntimeError):
    """A retrain stopped by a signal, with its checkpoint saved: running it again resumes."""


class OtherCorpus(ValueError):
    """The shipped manuals are not the text the shipped model was trained on (rebuilt from another copy)."""


def first_steps(n: int = FIRST_STEPS) -> list[float]:
    """The first ``n`` training losses, re-run from scratch (needs the corpus, the same text)."""
    data = corpus.token_data(tokenizer())
    want = log()["corpus"]["digest"]
    if data.digest != want:
        raise OtherCorpus(
            f"the shipped manuals ({corpus.SHIPPED}) have digest {data.digest}, the shipped model was trained on "
            f"{want}: the text was rebuilt from another copy of {corpus.PACKAGE}; retrain (`make experiments`)"
        )
    r = train(CONFIG, replace(TRAIN, steps=n, eval_every=n), data, device="cpu", progress=False)
    return r.history["loss"]


def first_steps_match(n: int = FIRST_STEPS) -> tuple[bool, list[float], list[float]]:
    fresh, logged = first_steps(n), log()["history"]["loss"][:n]
    ok = len(fresh) == len(logged) and all(abs(a - b) <= FIRST_STEPS_TOLERANCE for a, b in zip(fresh, logged))
    return ok, fresh, logged


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m andrea.trained.model", description=__doc__.split("\n")[0])
    ap.add_argument("--eval-set", action="store_true", help="only (re)make eval.npz, do not train")
    ap.add_argument("--probes", action="store_true", help="only (re)run the probes into probes.json, do not train")
    args = ap.parse_args(argv)
    if args.eval_set:
        print(f"wrote {write_eval_set()}")
        return 0
    if args.probes:
        t0 = time.perf_counter()
        print(f"wrote {write_probes()} ({time.perf_counter() - t0:.0f} s)")
        return 0
    try:
        blob = retrain()
    except Interrupted as e:
        print(e, file=sys.stderr)
        return 130
    write_probes()
    h = blob["history"]
    print(
        f"trained in {blob['seconds'] or float('nan'):.0f} s, {blob['tokens_per_s']:.0f} tokens/s; "
        f"validation loss {h['val_loss'][-1]:.3f} (unigram {blob['baselines']['unigram_ce']:.3f}, "
        f"bigram {blob['baselines']['bigram_ce']:.3f}) -> {WEIGHTS}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
