"""Training in the reader's browser: the "train it yourself" panel of chapters 3 and 7, and what the
site serves for it.

The page trains ANDREA with ``book/_static/andrea_train.js`` (one optimizer step as
``andrea.training.train`` takes it) in a Web Worker (``andrea_train_worker.js``), on batches drawn
from ``_static/andrea/train_corpus.bin``: the first ``CORPUS_BYTES`` bytes of the chapters' own
corpus (Python's documentation, ``andrea.training.data.python_docs_corpus``), as the byte tokenizer
reads it (UTF-8). ``write_site_assets`` writes it (the book's Sphinx extension calls it when a build
finishes; the browser tests call it for their own small site).

``TrainPanel(chapter)`` puts the panel on a page (``book/_static/andrea_train_panel.js`` draws it):
two small runs, A and B, trained side by side. Each chapter opens it on its own contrast: chapter 3
post-norm without warmup (A) against with it (B), chapter 7 a 6-block post-norm stack without
LayerScale (A) against with it (B). In a notebook the panel is not live (no site JavaScript there):
it says where to train instead.

Both panels' defaults are calibrated: a grid declared for each (``ch3_panel``, ``ch7_panel_round2``) trained
them in torch over five fresh seeds, and the panel draws torch's mean curves and that grid's verdict. A
panel with no such grid (``CALIBRATED``) says that whether the chapter's effect shows at its defaults is
not known.
"""

from __future__ import annotations

import html
import itertools
import json
import os
from pathlib import Path

from ..files import atomic_write_bytes

CORPUS_BYTES = 1 << 20  # 1 MiB: about half the corpus, enough windows for a few thousand steps
CORPUS_FILE = "train_corpus.bin"


def corpus_bytes(n: int = CORPUS_BYTES) -> bytes:
    """The first ``n`` bytes of the chapters' corpus, UTF-8 (the byte tokenizer's ids)."""
    from ..training.data import python_docs_corpus

    if not isinstance(n, int) or isinstance(n, bool) or n < 1024:
        raise ValueError(f"the page's corpus needs n >= 1024 bytes, got {n!r}")
    return python_docs_corpus().encode("utf-8")[:n]


def write_site_assets(dest: Path | str) -> Path:
    """Write ``train_corpus.bin`` into ``dest`` (made if missing, written atomically)."""
    return atomic_write_bytes(Path(dest) / CORPUS_FILE, corpus_bytes())


# What the reader may set (the page refuses anything else by name), and what stays fixed.
LIMITS = {
    "depth": [1, 24],
    "layerscale": [0.0, 1.0],  # 0 is ReZero's start (chapter 7): the blocks begin switched off and learn λ
    "lr": [1e-5, 3e-2],
    "warmup": [0, 2000],
    "steps": [1, 2000],
}
_RUN = {"depth": 6, "width": 64, "norm": "post", "init": "xavier", "layerscale": None, "lr": 1e-3, "warmup": 0}
PANELS: dict[str, dict[str, dict]] = {
    # chapter 3: round 2's model and schedule (400 steps, warmup a quarter) on batches of 8 sequences of 32
    # bytes, a quarter of round 2's, so that a browser trains both runs in about a minute and a half
    # (grids/ch3.PANEL_BATCH; the grid ch3_panel trained exactly these in torch)
    "ch3": {
        "fixed": {"batchSize": 8, "seqLen": 32, "context": 128, "headDim": 16, "seed": 0},
        "A": {**_RUN, "steps": 400},
        "B": {**_RUN, "steps": 400, "warmup": 100},
    },
    # chapter 7: a 6-block post-norm stack at the chapter's struggling learning rate, on small batches, so that
    # the effect shows within a minute on a loaded machine (the grid ch7_panel_round2 trained exactly these in
    # torch; ch7_panel, which trained the earlier 12-block defaults, stays stored)
    "ch7": {
        "fixed": {"batchSize": 8, "seqLen": 32, "context": 32, "headDim": 16, "seed": 0},
        "A": {**_RUN, "depth": 6, "width": 32, "steps": 300, "lr": 3e-3},
        "B": {**_RUN, "depth": 6, "width": 32, "steps": 300, "lr": 3e-3, "layerscale": 1e-4},
    },
}
# chapter -> (the declared grid that trained its defaults in torch, and the regime that decides there)
CALIBRATED = {
    "ch3": ("ch3_panel", "post-norm, Xavier init, lr 0.001, 8x32 bytes"),
    "ch7": ("ch7_panel_round2", "6 blocks, post-norm, Xavier init, lr 0.003, 300 steps"),
}
_ids = itertools.count(1)


def _torch_runs(grid_name: str, run: dict, fixed: dict) -> list[dict]:
    """The stored runs of ``grid_name`` whose model and training settings are exactly the panel run's
    (every seed), or [] when none is."""
    from ..evidence import evaluation

    want_model = {
        **{"d_model": run["width"], "n_layer": run["depth"], "norm": run["norm"], "init": run["init"]},
        **{"layerscale": run["layerscale"], "n_head": run["width"] // fixed["headDim"], "vocab_size": 256},
        "context_length": fixed["context"],
    }
    want_train = {
        **{"steps": run["steps"], "lr": run["lr"], "warmup": run["warmup"]},
        **{"batch_size": fixed["batchSize"], "seq_len": fixed["seqLen"]},
    }
    return [
        r
        for r in evaluation.results(grid_name)
        if all(r["model"].get(k) == v for k, v in want_model.items())
        and all(r["train"].get(k) == v for k, v in want_train.items())
    ]


class TrainPanel:
    """The panel of ``chapter`` ("ch3" or "ch7"); ``look``: one sentence on what to look for."""

    def __init__(self, chapter: str, look: str = ""):
        if chapter not in PANELS:
            raise ValueError(f"chapter must be one of {sorted(PANELS)}, got {chapter!r}")
        self.chapter, self.look = chapter, look
        self.id = f"andrea-train-{chapter}-{next(_ids)}"
        panel = PANELS[chapter]
        self.fixed = panel["fixed"]
        self.runs = {k: panel[k] for k in ("A", "B")}
        self.references: list = []
        self.verdict = None
        self.evidence = None
        if chapter in CALIBRATED:
            from ..evidence import evaluation

            name, regime = CALIBRATED[chapter]
            self.evidence = evaluation.evidence(name)
            self.verdict = self.evidence.regime(regime)
            for k, run in self.runs.items():  # the seeds that decide (not an exploration's)
                rows = [r for r in _torch_runs(name, run, self.fixed) if r["seed"] in self.verdict.seeds]
                if len(rows) < 5:
                    raise ValueError(f"{name}: {len(rows)} stored runs match panel run {k} of {chapter}, need 5")
                mean = [sum(r["loss"][i] for r in rows) / len(rows) for i in range(len(rows[0]["loss"]))]
                steps = rows[0]["steps"]
                every = max(1, len(steps) // 100)  # at most about a hundred points per curve
                points = [[steps[i], round(mean[i], 4)] for i in range(0, len(steps), every)]
                self.references.append({"run": k, "seeds": len(rows), "points": points})

    def options(self) -> dict:
        return {
            "runs": self.runs,
            "limits": LIMITS,
            "fixed": self.fixed,
            "corpus": CORPUS_FILE,
            "references": self.references,  # torch's mean curves at exactly the defaults (thin lines)
        }

    def note(self) -> str:
        if self.verdict is not None:
            name, _ = CALIBRATED[self.chapter]
            ci = self.verdict.verdict.interval
            assert ci is not None  # a paired comparison always has one
            seeds = self.references[0]["seeds"]
            missing = self.evidence is not None and self.evidence.missing_emulated
            return (
                f"The thin lines are torch's runs at exactly these defaults, the mean of {seeds} seeds of a "
                f"grid declared for this panel ({name}); there, A's final validation loss ended {ci.mean:+.2f} "
                "nats above B's "
                f"(95 % interval {ci.lo:+.2f} to {ci.hi:+.2f}), which reads {self.verdict.verdict.label}"
                + (" on this machine's runs (their second-CPU copies are not all made yet). " if missing else ". ")
                + "Your browser draws other random numbers, so its curves are one more seed, not a copy."
            )
        return (
            "These defaults have not been checked in torch over several seeds yet, so whether the chapter's "
            "effect shows at them is not known: treat what you see as one seed's run."
        )

    def html(self) -> str:
        opts = json.dumps(self.options(), separators=(",", ":"))
        look = (
            f'<p class="andrea-explorer-look"><strong>What to look for:</strong> {html.escape(self.look)}</p>\n'
            if self.look
            else ""
        )
        return f"""{look}<div class="andrea-train" id="{self.id}" role="group"
 aria-label="Train two small ANDREA models, A and B, in your browser"></div>
<p class="andrea-explorer-note">Both runs train here, in your browser: the same model and the same
optimizer step as <code>andrea.train</code> (AdamW, warmup then cosine decay, clipping at 1), on a
megabyte of the chapters' text, {self.fixed["batchSize"]} sequences of {self.fixed["seqLen"]} bytes a step.
{html.escape(self.note())}</p>
<script>
(function() {{
  var el = document.getElementById("{self.id}");
  if (!window.AndreaTrainPanel) {{
    el.textContent = "(This panel is drawn by the book's JavaScript, which did not load.)";
    return;
  }}
  AndreaTrainPanel.mount(el, {opts});
}})();
</script>"""

    def _repr_mimebundle_(self, include=None, exclude=None):
        if os.environ.get("ANDREA_BOOK_BUILD") == "1":  # the book's site: its own vendored JavaScript
            return {"text/html": self.html()}
        runs = self.runs
        text = (
            "The 'train it yourself' panel runs on the book's site, in the browser. In a notebook, train the "
            f"same two runs with andrea.train: A {runs['A']}, B {runs['B']}."
        )
        return {"text/plain": text, "text/html": f"<p>{html.escape(text)}</p>"}
