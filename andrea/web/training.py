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
post-norm without warmup (A) against with it (B), chapter 7 a 12-block post-norm stack without
LayerScale (A) against with it (B). In a notebook the panel is not live (no site JavaScript there):
it says where to train instead.

The defaults are not yet calibrated: no declared grid has trained them in torch over five seeds, so
the panel says that whether the chapter's effect shows at them is not known yet.
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
    "layerscale": [1e-6, 1.0],
    "lr": [1e-5, 3e-2],
    "warmup": [0, 2000],
    "steps": [1, 2000],
}
FIXED = {"batchSize": 8, "seqLen": 32, "headDim": 16, "seed": 0}
_RUN = {"depth": 6, "width": 32, "norm": "post", "layerscale": None, "lr": 3e-3, "warmup": 0, "steps": 300}
PANELS = {
    "ch3": {"A": dict(_RUN), "B": {**_RUN, "warmup": 75}},
    "ch7": {"A": {**_RUN, "depth": 12}, "B": {**_RUN, "depth": 12, "layerscale": 1e-4}},
}
CALIBRATED: dict = {}  # chapter -> the declared grid that checks its defaults in torch (none yet)
_ids = itertools.count(1)


class TrainPanel:
    """The panel of ``chapter`` ("ch3" or "ch7"); ``look``: one sentence on what to look for."""

    def __init__(self, chapter: str, look: str = ""):
        if chapter not in PANELS:
            raise ValueError(f"chapter must be one of {sorted(PANELS)}, got {chapter!r}")
        self.chapter, self.look = chapter, look
        self.id = f"andrea-train-{chapter}-{next(_ids)}"

    def options(self) -> dict:
        return {
            "runs": PANELS[self.chapter],
            "limits": LIMITS,
            "fixed": FIXED,
            "corpus": CORPUS_FILE,
            "references": [],  # torch's curves at exactly these settings: none stored yet (CALIBRATED)
        }

    def note(self) -> str:
        if self.chapter in CALIBRATED:
            return f"The defaults were checked in torch over five seeds (grid {CALIBRATED[self.chapter]})."
        return (
            "These defaults have not been checked in torch over several seeds yet, so whether the chapter's "
            "effect shows at them within a minute is not known: treat what you see as one seed's run."
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
megabyte of the chapters' text, {FIXED["batchSize"]} sequences of {FIXED["seqLen"]} bytes a step.
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
        runs = PANELS[self.chapter]
        text = (
            "The 'train it yourself' panel runs on the book's site, in the browser. In a notebook, train the "
            f"same two runs with andrea.train: A {runs['A']}, B {runs['B']}."
        )
        return {"text/plain": text, "text/html": f"<p>{html.escape(text)}</p>"}
