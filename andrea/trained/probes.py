"""Linear probes at every boundary of the residual stream (rule version 4).

Chapter 6's source says early blocks (1-3) carry syntax and position, middle blocks (4-8) the relations between
words and phrase boundaries, late blocks (9-12) meaning. A probe is a linear classifier trained to read a label from
the stream at one boundary; its *balanced accuracy* on held-out text (mean recall over the classes: chance is 1 /
number of classes) says how linearly available the label is there. Boundary 0, the embeddings, belongs to no band.
The rule reads raw accuracy, band against band, with two controls:

* the *untrained model*: the same architecture at initialisation. Its accuracy can change with depth too, so what
  training adds is the difference of the two models' band contrasts;
* a *control task* suited to the label (Hewitt & Liang 2019): the label's unit gets a random label, drawn from the
  task's own label frequencies. The unit is the token id for a lexical label (a probe that scores on it has
  memorised token identities), the token before for a label its neighbour decides, the position for position, the
  file for a document's label. The probe must read the task better than its control.

Every difference must exceed ``MARGIN`` to decide. Version 2 decided on the task's accuracy minus its control's,
which lifted every late band (control accuracy falls with depth); version 3 on raw accuracy, with the untrained
model compared by level and a planted calibration that could not fail. A review of version 3 led to this one, run on
fresh probe seeds (``SEED_BASE``) after it was written.

The probe is ridge regression onto one-hot labels (a linear classifier, solved exactly in float64: no optimiser, no
learning rate, the same answer on every CPU). A *probe seed* draws the probe's training tokens and the control
task's labels; the verdict is over probe seeds of one trained model.

The tasks and where the source puts them (``TASKS``):

* position (early): which eighth of the 256-token window a token sits in;
* syntax, lexical (early): the Python token type (``tokenize``: name, keyword, operator, number) of a token of
  standard-library code outside strings and comments, which the token mostly decides;
* syntax, contextual (early): the role of a name, which its neighbour decides: defined (after ``def`` or ``class``),
  an attribute (after a dot), or another use;
* phrase structure (middle): whether a token of that code (outside strings and comments) sits inside brackets;
* meaning (late): which manual a passage of prose comes from (library, C API, guides);
* three calibrations, with known answers: the category (word start, word continuation, punctuation, digit, white
  space) of the *current* token, which its embedding holds (early); of the *next* token, which the stack computes at
  its top (late; the logit lens shows it); and a *planted* bit, added to the trained model's stream by block 4 and
  carried on by the blocks after it (``planted_features``), as a property computed in the middle band would be. A
  task is decided only in a band whose calibration the rule places there.
"""

from __future__ import annotations

import io
import keyword
import sysconfig
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ..measure.probe import capture_residual_stream

WINDOW = 256
BANDS = {"early": (1, 2, 3), "middle": (4, 5, 6, 7, 8), "late": (9, 10, 11, 12)}
MANUALS = ("library", "c-api", "guides")
CODE_TYPES = ("name", "keyword", "operator", "string", "number", "comment")
PROSE_TYPES = ("word start", "word continuation", "punctuation", "digit", "white space")
# The standard-library modules whose code the syntax probes read (none of it is in the manuals).
CODE_MODULES = (
    "argparse", "ast", "base64", "bisect", "calendar", "cmd", "code", "colorsys", "configparser",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "difflib", "dis", "enum", "fnmatch",
    "fractions", "ftplib", "functools", "getopt", "gettext", "glob", "gzip", "heapq", "hmac",
    "imaplib", "inspect", "ipaddress", "locale", "mailbox", "netrc", "numbers", "operator",
    "optparse", "pathlib", "pickle", "pprint", "queue", "random", "secrets", "shlex", "shutil",
    "smtplib", "statistics", "string", "tarfile", "textwrap", "threading", "timeit", "tokenize",
    "trace", "typing", "uuid", "wave", "weakref", "zipfile",
)  # fmt: skip
N_PROBE_TRAIN = 3000
N_PROBE_TEST = 4000
PROBE_SEEDS = 5
RULE_VERSION = 4
# Probe seed s draws with 4000 + s. Version 2 used 1000 + s and version 3 2000 + s, both seen before this rule.
SEED_BASE = 4000
MARGIN = 0.02  # balanced accuracy: a band difference smaller than this decides nothing
NAME_ROLES = ("defined", "attribute", "other use")
CODE_KINDS = ("name", "keyword", "operator", "number")  # tokens of code outside strings and comments


@dataclass(frozen=True)
class Task:
    name: str
    band: str  # where the source puts it
    text: str  # "prose" or "code"
    classes: tuple
    # the unit whose label the control task scrambles: token, previous (token), position or file
    control: str = "token"


TASKS = (
    Task("position", "early", "prose", tuple(f"{32 * i}-{32 * i + 31}" for i in range(8)), "position"),
    Task("syntax (lexical)", "early", "code", CODE_KINDS),
    Task("syntax (contextual)", "early", "code", NAME_ROLES, "previous"),
    Task("phrase structure", "middle", "code", ("outside brackets", "inside brackets")),
    Task("meaning", "late", "prose", MANUALS, "file"),
    Task("current token", "early", "prose", PROSE_TYPES),
    Task("planted", "middle", "prose", ("0", "1")),
    Task("next token", "late", "prose", PROSE_TYPES),
)
# Known answers: the current token's category is in its embedding (early); the planted label is
# added to the trained model's stream by the middle band's first block and carried on from there;
# the next token's category is what the stack computes at its top (late). A band whose calibration
# the rule cannot place there cannot place anything there.
CALIBRATIONS = {"early": "current token", "middle": "planted", "late": "next token"}
# The planted label: a random bit per token, added to block 4's output along one random direction
# of the stream, at 0.674 standard deviations of block 4's output along that direction (a reader of
# that direction alone would be right 75 % of the time: Phi(0.674) = 0.75). Blocks 5-12 then run on
# the changed stream, as they would on a property block 4 computed.
PLANT: dict[str, Any] = {"block": 4, "z": 0.674, "seed": 7}


# ---------------------------------------------------------------------------------------------
# The evaluation set (made once, at training time, and shipped)
# ---------------------------------------------------------------------------------------------
def prose_category(piece: str) -> int:
    """PROSE_TYPES index of a decoded token."""
    if not piece.strip():
        return 4
    s = piece.lstrip(" ")
    if s and s[0].isdigit():
        return 3
    if s and (s[0].isalpha() or s[0] == "_"):
        return 0 if piece.startswith(" ") or piece.startswith("\n") else 1
    return 2


def _code_labels(src: str) -> tuple[np.ndarray, np.ndarray]:
    """Per character of ``src``: the CODE_TYPES index (-1: none) and the open-bracket depth."""
    n = len(src)
    kind = np.full(n, -1, dtype=np.int8)
    depth = np.zeros(n, dtype=np.int8)
    lines = src.splitlines(keepends=True)
    starts = np.cumsum([0] + [len(s) for s in lines])
    level = 0
    last = 0
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        (r0, c0), (r1, c1) = tok.start, tok.end
        if r0 - 1 >= len(lines):
            break
        a, b = starts[r0 - 1] + c0, starts[r1 - 1] + c1
        depth[last:a] = min(level, 2)
        if tok.type == tokenize.NAME:
            k = 1 if keyword.iskeyword(tok.string) else 0
        elif tok.type == tokenize.OP:
            k = 2
        elif tok.type == tokenize.STRING:
            k = 3
        elif tok.type == tokenize.NUMBER:
            k = 4
        elif tok.type == tokenize.COMMENT:
            k = 5
        else:
            k = -1
        kind[a:b] = k
        if tok.type == tokenize.OP and tok.string in "([{":
            depth[a:b] = min(level, 2)
            level += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            level = max(0, level - 1)
            depth[a:b] = min(level, 2)
        else:
            depth[a:b] = min(level, 2)
        last = b
    return kind, depth


def _first_visible(src: str, a: int, b: int) -> int:
    """The first non-space character of ``src[a:b]`` (-1: none)."""
    for i in range(a, min(b, len(src))):
        if not src[i].isspace():
            return i
    return -1


def make_eval_set(docs, tokenizer, windows_per_file: int = 4) -> dict:
    """Held-out prose windows (with manual and token-category labels) and standard-library code
    windows (with token-type and bracket-depth labels). Files alternate between the probes'
    training and test halves, so a probe is tested on files it never saw."""
    tok = tokenizer._tok  # the Hugging Face tokenizer, for character offsets
    prose, manual, half = [], [], []
    pfile: list[int] = []
    count: dict = {}
    for d in docs:
        if not d.held_out or d.manual not in MANUALS:
            continue
        ids = tokenizer.encode(d.text)
        k = count.get(d.manual, 0)
        count[d.manual] = k + 1
        for w in range(min(windows_per_file, len(ids) // WINDOW)):
            prose.append(ids[w * WINDOW : (w + 1) * WINDOW])
            manual.append(MANUALS.index(d.manual))
            half.append(k % 2)
            pfile.append(len(pfile) and pfile[-1] + (w == 0) or 0)
    code, ckind, cdepth, chalf, cfile = [], [], [], [], []
    root = Path(sysconfig.get_paths()["stdlib"])
    for j, name in enumerate(CODE_MODULES):
        src = (root / f"{name}.py").read_text(encoding="utf-8")
        kind, depth = _code_labels(src)
        enc = tok.encode(src)
        ids, offs = enc.ids, enc.offsets
        for w in range(min(2, len(ids) // WINDOW)):
            sl = slice((w + 1) * WINDOW, (w + 2) * WINDOW)  # skip the module's opening docstring
            if len(ids[sl]) < WINDOW:
                break
            code.append(ids[sl])
            first = [_first_visible(src, a, b) for a, b in offs[sl]]  # " def": the d, not the space
            ckind.append([kind[a] if a >= 0 else -1 for a in first])
            cdepth.append([depth[a] if a >= 0 else 0 for a in first])
            chalf.append(j % 2)
            cfile.append(j)
    prose_a = np.array(prose, dtype=np.int64)
    cat = np.vectorize(lambda i: prose_category(tokenizer.decode([int(i)])))(np.arange(tokenizer.vocab_size))
    return {
        "prose_ids": prose_a.astype(np.uint16),
        "prose_manual": np.array(manual, dtype=np.int8),
        "prose_half": np.array(half, dtype=np.int8),
        "prose_file": np.array(pfile, dtype=np.int32),
        "code_file": np.array(cfile, dtype=np.int32),
        "token_category": cat.astype(np.int8),
        "code_ids": np.array(code, dtype=np.uint16),
        "code_type": np.array(ckind, dtype=np.int8),
        "code_depth": np.array(cdepth, dtype=np.int8),
        "code_half": np.array(chalf, dtype=np.int8),
    }


def save_eval_set(es: dict, path: Path) -> None:
    from ..files import atomic_write_bytes

    buf = io.BytesIO()
    np.savez_compressed(buf, **es)
    atomic_write_bytes(path, buf.getvalue())


def load_eval_set(path: Path) -> dict:
    if not Path(path).is_file():
        raise FileNotFoundError(f"no evaluation set at {str(path)!r}: run `make experiments`")
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ---------------------------------------------------------------------------------------------
# Labels, features, probes
# ---------------------------------------------------------------------------------------------
def token_kinds(tokenizer) -> dict:
    """Per token id of ``tokenizer``: whether its text is ``def`` or ``class`` (a keyword that names
    what follows), ends in a dot, and starts with white space (a new word, not a continuation).
    ``task_data`` reads a name's role from its neighbours with these."""
    pieces = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    return {
        "token_defines": np.array([p.split()[-1:] in (["def"], ["class"]) for p in pieces]),
        "token_dot": np.array([p.rstrip().endswith(".") for p in pieces]),
        "token_space": np.array([p[:1].isspace() for p in pieces]),
    }


def name_roles(ids: np.ndarray, kind: np.ndarray, es: dict) -> np.ndarray:
    """NAME_ROLES index of the first token of every name in code windows (-1 elsewhere): defined
    when the previous visible token is ``def`` or ``class``, an attribute after a dot, else another
    use; the window's first name, whose neighbour is outside the window, has none."""
    role = np.full(ids.shape, -1, dtype=np.int64)
    for w in range(ids.shape[0]):
        prev = -1  # the previous visible token
        for t in range(ids.shape[1]):
            k = int(kind[w, t])
            if k < 0:
                continue
            start = k == 0 and not (prev >= 0 and kind[w, prev] == 0 and not es["token_space"][ids[w, t]])
            if start and prev >= 0:
                p = ids[w, prev]
                if kind[w, prev] == 1 and es["token_defines"][p]:
                    role[w, t] = 0
                elif kind[w, prev] == 2 and es["token_dot"][p]:
                    role[w, t] = 1
                else:
                    role[w, t] = 2
            prev = t
    return role


def task_data(task: Task, es: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids (n_windows, T), labels (n_windows, T) with -1 where a token has none, the file of each
    window (n_windows,), the stratum of each window for the file split: its manual, or 0)."""
    if task.text == "prose":
        ids = es["prose_ids"].astype(np.int64)
        n, T = ids.shape
        if task.name == "position":
            lab = np.broadcast_to(np.arange(T) // (T // 8), (n, T)).copy()
        elif task.name == "meaning":
            lab = np.repeat(es["prose_manual"].astype(np.int64)[:, None], T, 1)
        elif task.name == "next token":
            cat = es["token_category"].astype(np.int64)
            lab = np.full((n, T), -1)
            lab[:, :-1] = cat[ids[:, 1:]]
        elif task.name == "current token":
            lab = es["token_category"].astype(np.int64)[ids]
        elif task.name == "planted":
            lab = np.random.default_rng(PLANT["seed"]).integers(0, 2, size=(n, T))
        else:
            raise ValueError(f"unknown prose task {task.name!r}")
        return ids, lab, es["prose_file"], es["prose_manual"]
    ids = es["code_ids"].astype(np.int64)
    kind = es["code_type"].astype(np.int64)
    code = np.isin(kind, (0, 1, 2, 4))  # names, keywords, operators, numbers: not strings or comments
    if task.name == "syntax (lexical)":
        lab = np.where(code, np.searchsorted([0, 1, 2, 4], kind), -1)
    elif task.name == "syntax (contextual)":
        if "token_defines" not in es:
            raise ValueError("the contextual syntax task needs es.update(probes.token_kinds(tokenizer))")
        lab = name_roles(ids, kind, es)
    elif task.name == "phrase structure":
        lab = np.where(code, (es["code_depth"] > 0).astype(np.int64), -1)
    else:
        raise ValueError(f"unknown code task {task.name!r}")
    return ids, lab, es["code_file"], np.zeros(len(ids), dtype=np.int64)


def control_labels(task: Task, ids: np.ndarray, files: np.ndarray, freq: np.ndarray, rng) -> np.ndarray:
    """The control task's label of every token (n_windows, T): a random label per token id, per id
    of the token before, per position or per file (``Task.control``), drawn from the task's label
    frequencies."""
    k = len(freq)
    if task.control == "token":
        return rng.choice(k, size=int(ids.max()) + 1, p=freq)[ids]
    if task.control == "previous":  # the token before (the window's first token: itself)
        prev = np.concatenate([ids[:, :1], ids[:, :-1]], 1)
        return rng.choice(k, size=int(ids.max()) + 1, p=freq)[prev]
    if task.control == "position":
        return np.broadcast_to(rng.choice(k, size=ids.shape[1], p=freq), ids.shape)
    if task.control == "file":
        per_file = rng.choice(k, size=int(files.max()) + 1, p=freq)
        return np.repeat(per_file[files][:, None], ids.shape[1], 1)
    raise ValueError(f"task {task.name!r}: control must be token, previous, position or file, got {task.control!r}")


def plant_direction(d_model: int) -> np.ndarray:
    """The planted label's direction: a random unit vector of the stream (``PLANT['seed']``)."""
    u = np.random.default_rng(PLANT["seed"]).standard_normal(d_model)
    return u / np.linalg.norm(u)


@torch.no_grad()
def planted_features(
    model, ids: np.ndarray, bits: np.ndarray, batch: int = 16, clean: Optional[np.ndarray] = None
) -> np.ndarray:
    """``features`` of a model whose block ``PLANT['block']`` adds the planted bit to its output
    (+m or -m along ``plant_direction``, m = ``PLANT['z']`` standard deviations of that output along
    it, measured on these windows first); the blocks after it run on the changed stream. ``clean``:
    that block's output without the bit, where the caller has it already (``features(...)[block]``)."""
    if clean is None:
        clean = features(model, ids, batch)[PLANT["block"]]
    u = plant_direction(clean.shape[1])
    m = PLANT["z"] * float((clean.astype(np.float64) @ u).std())
    del clean
    delta = torch.from_numpy(np.float32(m) * (2 * bits[..., None].astype(np.float32) - 1) * u.astype(np.float32))
    at = {"i": 0}

    def add(module, args, output):
        return output + delta[at["i"] : at["i"] + output.shape[0]]

    handle = model.blocks[PLANT["block"] - 1].register_forward_hook(add)
    try:
        out = []
        for i in range(0, len(ids), batch):
            at["i"] = i
            out.append(features(model, ids[i : i + batch], batch))
        return np.concatenate(out, axis=1)
    finally:
        handle.remove()


@torch.no_grad()
def features(model, ids: np.ndarray, batch: int = 16) -> np.ndarray:
    """The residual stream at every boundary for every token of ``ids`` (n_windows, T):
    (n_layer + 1, n_windows * T, d_model), float32."""
    out = []
    for i in range(0, len(ids), batch):
        with capture_residual_stream(model) as stream:
            model(torch.from_numpy(ids[i : i + batch].astype(np.int64)))
        out.append(torch.stack([s.detach() for s in stream]).flatten(1, 2).numpy())
    return np.concatenate(out, axis=1)


def balanced_accuracy(pred: np.ndarray, true: np.ndarray, n_classes: int) -> float:
    """Mean recall over the classes present: 1 / n_classes for a constant guess, whatever the
    class frequencies."""
    present = [c for c in range(n_classes) if (true == c).any()]
    return float(np.mean([(pred[true == c] == c).mean() for c in present]))


def ridge_probe(xtr, ys, xte, alpha: float = 1.0) -> list[np.ndarray]:
    """Ridge regression of standardised features onto one-hot labels, solved exactly in float64,
    one solve for several label sets ``ys`` (each (n, k) one-hot, classes weighted equally);
    returns each label set's argmax predictions on ``xte``."""
    a = np.hstack([xtr, np.ones((len(xtr), 1))])
    b = np.hstack([xte, np.ones((len(xte), 1))])
    y = np.hstack([yy / np.maximum(yy.sum(0, keepdims=True), 1) for yy in ys])  # balance the classes
    reg = alpha * len(a) / 100 * np.eye(a.shape[1])
    reg[-1, -1] = 0.0
    w = np.linalg.solve(a.T @ a + reg, a.T @ y)
    out, j = [], 0
    scores = b @ w
    for yy in ys:
        out.append(scores[:, j : j + yy.shape[1]].argmax(1))
        j += yy.shape[1]
    return out


def file_split(files: np.ndarray, strata: np.ndarray, rng) -> np.ndarray:
    """A random half of the files (within each stratum, e.g. each manual): True for the probes'
    training files, False for their test files. Every window of a file falls on one side."""
    train = np.zeros(len(files), dtype=bool)
    for st in np.unique(strata):
        fs = np.unique(files[strata == st])
        chosen = rng.permutation(fs)[: (len(fs) + 1) // 2]
        train |= (strata == st) & np.isin(files, chosen)
    return train


def probe_task(
    task: Task,
    es: dict,
    feats: np.ndarray,
    seeds: int = PROBE_SEEDS,
    n_train: int = N_PROBE_TRAIN,
    n_test: int = N_PROBE_TEST,
) -> dict:
    """Balanced accuracy on the task and on its control task at every boundary, per probe seed.
    ``feats``: ``features(model, ids)`` of the task's text. A probe seed draws which files train the
    probe and which test it (half each, by manual for prose), the probe's training and test tokens
    from them, and the control task's labels (for the planted task, ``feats`` are ``planted_features``).
    Returns {"task": (seeds, boundaries), "control": (seeds, boundaries), "n_train", "n_test"}."""
    ids, lab, files, strata = task_data(task, es)
    T = ids.shape[1]
    flat_lab = lab.reshape(-1)
    keep = flat_lab >= 0
    k = len(task.classes)
    freq = np.bincount(flat_lab[keep], minlength=k) / keep.sum()
    eye = np.eye(k)
    n_b = feats.shape[0]
    acc = np.zeros((seeds, n_b))
    ctl = np.zeros((seeds, n_b))
    for s in range(seeds):
        rng = np.random.default_rng(SEED_BASE + s)
        side = np.repeat(file_split(files, strata, rng), T)
        pool, test_pool = np.flatnonzero(keep & side), np.flatnonzero(keep & ~side)
        tr = np.sort(rng.choice(pool, size=min(n_train, len(pool)), replace=False))
        te = np.sort(rng.choice(test_pool, size=min(n_test, len(test_pool)), replace=False))
        control = control_labels(task, ids, files, freq, rng).reshape(-1)
        ys = [eye[flat_lab[tr]], eye[control[tr]]]
        for b in range(n_b):
            xtr, xte = feats[b, tr].astype(np.float64), feats[b, te].astype(np.float64)
            mu, sd = xtr.mean(0), xtr.std(0) + 1e-8
            p_task, p_ctl = ridge_probe((xtr - mu) / sd, ys, (xte - mu) / sd)
            acc[s, b] = balanced_accuracy(p_task, flat_lab[te], k)
            ctl[s, b] = balanced_accuracy(p_ctl, control[te], k)
    return {"task": acc, "control": ctl, "n_train": int(len(tr)), "n_test": int(len(te))}


def run_probes(trained, untrained, es: dict, seeds: int = PROBE_SEEDS) -> dict:
    """Every task on both models: {task name: {"trained": probe_task(...), "untrained": ...}}.
    The stream is computed once per model and text; the planted task reads the trained model with
    its bit planted (``planted_features``) and the untrained model as it is."""
    out: dict = {t.name: {} for t in TASKS}
    for name, model in (("trained", trained), ("untrained", untrained)):
        for text in ("prose", "code"):
            for task, by_model in probe_text(name, model, text, es, seeds).items():
                out[task].update(by_model)
    return out


def probe_text(name: str, model, text: str, es: dict, seeds: int = PROBE_SEEDS) -> dict:
    """The tasks on one text for one model (``name``: "trained" or "untrained")."""
    feats = features(model, es[f"{text}_ids"])
    out = {}
    for task in TASKS:
        if task.text != text:
            continue
        if task.name == "planted" and name == "trained":
            _, bits, _, _ = task_data(task, es)
            planted = planted_features(model, es[f"{text}_ids"], bits, clean=feats[PLANT["block"]])
            out[task.name] = {name: probe_task(task, es, planted, seeds)}
        else:
            out[task.name] = {name: probe_task(task, es, feats, seeds)}
    return out


def selectivity(r: dict) -> np.ndarray:
    """Accuracy on the task minus on its control task (Hewitt and Liang's measure; shown, not decided on)."""
    return r["task"] - r["control"]


def band_means(acc: np.ndarray) -> dict:
    """The mean over each band's boundaries, per probe seed, of (seeds, boundaries)."""
    return {band: acc[:, list(bs)].mean(1) for band, bs in BANDS.items()}


def decide_task(task: Task, result: dict):
    """The verdict on "the task lives in its band", from the book's rule (``verdict.decide``),
    paired over probe seeds, every regime required, on raw balanced accuracy averaged over the
    band's boundaries, each difference by more than ``MARGIN``: higher in the predicted band than in
    each other band; that contrast larger in the trained model than in the untrained one (training,
    not the architecture, puts it there); and higher there than the control task's (the probe reads
    the label, not the unit the control scrambles)."""
    from ..evidence import verdict as V

    tr, un = band_means(result["trained"]["task"]), band_means(result["untrained"]["task"])
    ctl = band_means(result["trained"]["control"])
    b = task.band
    regimes = {}
    for other in BANDS:
        if other != b:
            regimes[f"{b} over {other}"] = V.compare(
                tr[b] - tr[other], "positive", MARGIN, what=f"accuracy, {b} minus {other}"
            )
    for other in BANDS:
        if other != b:
            regimes[f"training raised {b} over {other}"] = V.compare(
                (tr[b] - tr[other]) - (un[b] - un[other]),
                "positive",
                MARGIN,
                what=f"{b} minus {other}, trained minus untrained",
            )
    regimes["above its control"] = V.compare(
        tr[b] - ctl[b], "positive", MARGIN, what=f"{b} accuracy, task minus control"
    )
    return V.decide(regimes, "every")


def decide_all(found: dict) -> dict:
    """Every task's (verdict, regimes); a claim task whose band's calibration the rule does not
    confirm is not testable (the rule cannot place a known property in that band), and one in a
    band without a calibration says so in its reason."""
    from ..evidence import verdict as V

    out = {t.name: decide_task(t, found[t.name]) for t in TASKS}
    calibrated = {band: out[name][0].label == "confirmed" for band, name in CALIBRATIONS.items()}
    for t in TASKS:
        if t.name in CALIBRATIONS.values():
            continue
        v, regimes = out[t.name]
        if t.band in calibrated and not calibrated[t.band]:
            why = f"the rule does not place the {t.band} calibration ({CALIBRATIONS[t.band]}) {t.band}"
            out[t.name] = (V.not_testable(why), regimes)
        elif t.band not in calibrated:
            out[t.name] = (V.Verdict(v.label, v.reason + f"; no calibration for the {t.band} band"), regimes)
    return out


def peak_band(acc: np.ndarray) -> str:
    """Where the mean over probe seeds of (seeds, boundaries) peaks, among the block outputs 1..n."""
    b = int(np.argmax(acc.mean(0)[1:])) + 1
    return next(name for name, bs in BANDS.items() if b in bs)


def _against(verdict_and_regimes) -> bool:
    v, regimes = verdict_and_regimes
    return v.label == "not reproduced" or (
        v.label == "qualified" and any(r.label == "not reproduced" for r in regimes.values())
    )


def decide_claim(decided: dict):
    """The source's claim over its tasks (``decide_all``, calibrations excluded): confirmed if every
    task sits in its band; qualified if some do and the opposite was measured for others; not
    reproduced if none does and some go against; not testable if no task could be decided;
    inconclusive otherwise."""
    from ..evidence import verdict as V

    untestable = [k for k, d in decided.items() if d[0].label == "not testable"]
    held = [k for k, d in decided.items() if d[0].label == "confirmed"]
    against = [k for k, d in decided.items() if k not in held and _against(d)]
    rest = [k for k in decided if k not in held + against + untestable]

    def said(prefix, ks):
        return f"{prefix} {', '.join(ks)}" if ks else ""

    parts = [
        said("holds for", held),
        said("the opposite measured for", against),
        said("undecided for", rest),
        said("not testable for", untestable),
    ]
    why = "; ".join(p for p in parts if p)
    if held and not against and not rest and not untestable:
        return V.Verdict("confirmed", why)
    if held and against:
        return V.Verdict("qualified", why)
    if against and not held:
        return V.Verdict("not reproduced", why)
    if len(untestable) == len(decided):
        return V.Verdict("not testable", why)
    return V.Verdict("inconclusive", why)


def peak_boundary(acc: np.ndarray) -> int:
    """The block output (1..n) where the mean over probe seeds of (seeds, boundaries) is highest."""
    return int(np.argmax(acc.mean(0)[1:])) + 1
