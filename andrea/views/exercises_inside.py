"""Checkers for chapter 8's exercises, inside the trained model: the logit lens, a head's induction
score, a probe's control task. They work as ``exercises``' checkers do (the same harness, ``checks``)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..model.transformer import Andrea
from .checks import Check, _agrees, _fresh, _run, _small, _tokens, _values


def _lens_model(seed: int = 0) -> Andrea:
    m = _fresh(_small(), seed).eval()
    from ..model.layers import LayerNorm

    norm = m.final_norm
    assert isinstance(norm, LayerNorm) and norm.bias is not None
    with torch.no_grad():  # give the final norm a gain and shift that matter
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_(0, 0.1)
    return m


def check_logit_lens(fn: Callable) -> Check:
    """fn(model, stream) -> the logit lens's guess at every position, token ids (B, T): the residual
    stream ``stream`` (B, T, d), taken at one boundary, decoded through the model's final LayerNorm
    and its tied head."""
    from ..measure.probe import capture_residual_stream

    cases = []
    for seed in (0, 1, 2):
        m = _lens_model(seed)
        ids, _ = _tokens(64, 4, 12, seed)
        with torch.no_grad(), capture_residual_stream(m) as stream:
            m(ids)
        b = (0, 2, 3)[seed]
        x = stream[b].detach()
        with torch.no_grad():
            want = (m.final_norm(x) @ m.token_embedding.weight.T).argmax(-1)
        cases.append({"args": (m, x), "desc": f"seed {seed}, boundary {b}", "want": want})

    def compare(got, c):
        if not isinstance(got, torch.Tensor):
            return f"expected token ids (a torch.Tensor), got {type(got).__name__}"
        ids = _values(got)
        if isinstance(ids, str):
            return ids
        if ids.shape != tuple(c["want"].shape) or ids.dtype.kind not in "iu":
            return f"expected integer token ids of shape {tuple(c['want'].shape)}, got {got.dtype} {ids.shape}"
        wrong = int(np.count_nonzero(ids.astype(np.int64) != c["want"].numpy()))
        return None if wrong == 0 else f"{wrong} of {ids.size} guesses differ from the lens's"

    return _run("check_logit_lens", cases, fn, compare)


def check_induction_score(fn: Callable) -> Check:
    """fn(attn, L) -> the induction score of one head: ``attn`` is its attention (T, T) on a
    sequence whose second half (length L) repeats its first half; the score is the mean attention
    from each token t of the second half to position t - L + 1."""
    cases = []
    for seed, L in ((0, 5), (1, 8), (2, 16)):
        g = torch.Generator().manual_seed(seed)
        T = 2 * L
        s = torch.randn(T, T, generator=g).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -1e9)
        attn = torch.softmax(s, -1)
        t = torch.arange(L, T)
        want = float(attn[t, t - L + 1].mean())
        cases.append({"args": (attn, L), "desc": f"L = {L}", "want": want})

    def compare(got, c):
        return _agrees(got, c["want"], 1e-6 / c["want"], ".4f")

    return _run("check_induction_score", cases, fn, compare)


def check_control_task(fn: Callable) -> Check:
    """fn(token_ids, n_classes, seed) -> one control label per token (an int array like
    ``token_ids``): the same label wherever the same token id appears, labels in 0..n_classes-1,
    and more than one label in use."""
    cases = []
    for seed, k in ((0, 3), (1, 5), (2, 8)):
        rng = np.random.default_rng(seed)
        ids = rng.integers(0, 40, size=400)
        cases.append({"args": (ids, k, seed), "desc": f"{k} classes", "ids": ids, "k": k})

    def compare(got, c):
        lab = np.asarray(got)
        if lab.shape != c["ids"].shape:
            return f"expected {c['ids'].shape[0]} labels, got shape {lab.shape}"
        if not np.issubdtype(lab.dtype, np.integer) or lab.min() < 0 or lab.max() >= c["k"]:
            return f"labels must be integers in 0..{c['k'] - 1}"
        for t in np.unique(c["ids"]):
            if len(set(lab[c["ids"] == t].tolist())) > 1:
                return f"token id {t} got different labels: a control task labels a token *type*"
        if len(set(lab.tolist())) < 2:
            return "every token got the same label: draw a random label per token id"
        return None

    return _run("check_control_task", cases, fn, compare)
