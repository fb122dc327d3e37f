"""The attention viewer of the book's site: one head's attention weights on the reader's own text.

The reader types a sentence; the page tokenizes it with the book's BPE, runs the trained ANDREA (or an
untrained one of the same shape) up to every block's attention weights, and draws one head's T x T map.
All of it happens in the page (``book/_static/andrea_attention.js``, in a Web Worker:
``andrea_attention_worker.js``), from files the site serves itself:

* ``_static/andrea/trained.safetensors``: the shipped weights (a copy of ``andrea/results/trained/
  model.safetensors``, float16, checked against the training log's SHA-256);
* ``_static/andrea/tokenizer.json``: the book's byte-level BPE (Hugging Face ``tokenizers``' JSON);
* ``_static/andrea/config.json``: the trained model's shape, and the viewer's limits.

``write_site_assets`` writes them (the book's Sphinx extension, ``book/_ext/andrea_site.py``, calls it
when a build finishes, and the tests call it for their own small site); ``viewer`` puts the viewer on
a page.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
from pathlib import Path
from typing import Any

from ..files import atomic_write_bytes, atomic_write_text

MAX_TOKENS = 64  # the page's limit too (andrea_attention.js: MAX_TOKENS)
MODELS = ("trained", "untrained")
UNTRAINED_SEED = 0  # the page's seeded draw (andrea_flow.js's generator), not torch's
DEFAULT_TEXT = "The cat sat on the mat because it was tired, and then it slept."
ASSETS = ("config.json", "tokenizer.json", "trained.safetensors")
CONFIG_FIELDS = (
    *("vocab_size", "context_length", "d_model", "n_layer", "n_head"),
    *("norm", "residual", "activation", "bias", "ln_eps", "layerscale", "init", "init_std"),
)

_ids = itertools.count(1)


def site_config() -> dict[str, Any]:
    """What the page's model needs of the trained model's config, and the viewer's settings."""
    from ..trained.model import CONFIG

    out: dict[str, Any] = {k: getattr(CONFIG, k) for k in CONFIG_FIELDS}
    out.update(max_tokens=MAX_TOKENS, untrained_seed=UNTRAINED_SEED, weights="trained.safetensors")
    return out


def _tokenizer():
    from ..trained.model import tokenizer

    return tokenizer()  # the one the weights were trained with, whatever Python runs the build


def write_site_assets(dest: Path | str) -> dict[str, Path]:
    """Write ``config.json``, ``tokenizer.json`` and ``trained.safetensors`` into ``dest`` (made if
    missing; each written atomically). The weights are the shipped file, whose SHA-256 must be the
    training log's (a damaged or swapped file is a ValueError, not a site that shows another model)."""
    from ..trained import model as trained

    dest = Path(dest)
    config = site_config()
    weights = trained.WEIGHTS
    if not weights.is_file():
        raise trained.NotShipped(
            f"no trained weights at {str(weights)!r}: restore them from git (or `make experiments`)"
        )
    blob = weights.read_bytes()
    want = trained.check_log()["weights_sha256"]
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        raise ValueError(f"{str(weights)!r} has SHA-256 {got[:12]}…, the log says {want[:12]}…: the file was altered")
    tok = _tokenizer()
    if tok.vocab_size != config["vocab_size"]:
        raise ValueError(f"the tokenizer has {tok.vocab_size} tokens, the trained model {config['vocab_size']}")
    config["weights_sha256"] = got
    out = {
        "config.json": atomic_write_text(dest / "config.json", json.dumps(config, indent=1) + "\n"),
        "tokenizer.json": atomic_write_bytes(dest / "tokenizer.json", trained.TOKENIZER.read_bytes()),
        "trained.safetensors": atomic_write_bytes(dest / "trained.safetensors", blob),
    }
    return out


def _check(text: object, block: object, head: object, model: object) -> None:
    from ..trained.model import CONFIG

    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"text is empty ({text!r}): give a sentence of 1 to {MAX_TOKENS} tokens")
    n = len(_tokenizer().encode(text))
    if n > MAX_TOKENS:
        raise ValueError(f"text has {n} tokens; the viewer takes at most {MAX_TOKENS}")
    for name, v, hi in (("block", block, CONFIG.n_layer), ("head", head, CONFIG.n_head)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"{name} must be an integer from 1 to {hi}, got {v!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def viewer_html(text: str = DEFAULT_TEXT, block: int = 1, head: int = 1, model: str = "trained") -> str:
    """The viewer's HTML: an empty box and the script that mounts ``AndreaAttention`` in it (the site
    serves the JavaScript; without it the box says so). Arguments checked as ``viewer`` checks them."""
    _check(text, block, head, model)
    el_id = f"andrea-attention-{next(_ids)}"
    # JSON in a script: "<" escaped, so that no text (a "</script>", say) can end the script early
    opts = json.dumps({"text": text, "block": block, "head": head, "model": model}).replace("<", "\\u003c")
    label = html.escape(
        "Attention viewer: type a text and see one attention head's weights, "
        "for the trained or an untrained ANDREA, in any block and head"
    )
    return f"""<div class="andrea-attention" id="{el_id}" role="group" aria-label="{label}"></div>
<script>
(function () {{
  var el = document.getElementById("{el_id}");
  if (!window.AndreaAttention) {{
    el.textContent = "(This viewer is drawn by the book's JavaScript, which did not load.)";
    return;
  }}
  AndreaAttention.mount(el, {opts});
}})();
</script>"""


class Viewer:
    """What ``viewer`` returns: the viewer's HTML while the book's site is built, and in a notebook
    (where the site's JavaScript is not served) a line that says where it runs."""

    def __init__(self, html_text: str):
        self.html = html_text

    def _repr_mimebundle_(self, include=None, exclude=None):
        if os.environ.get("ANDREA_BOOK_BUILD") == "1":
            return {"text/html": self.html}
        note = (
            "The attention viewer runs on the book's site, in the page. In a notebook, draw any head with "
            "andrea.views.attention_figures.scores_figure(andrea.measure.attention.head_steps(...), labels)."
        )
        return {"text/plain": note, "text/html": f"<p><em>{html.escape(note)}</em></p>"}


def viewer(text: str = DEFAULT_TEXT, block: int = 1, head: int = 1, model: str = "trained") -> Viewer:
    """The attention viewer on a page of the book's site: ``text`` (1 to 64 tokens) shown first, at
    ``block`` (1 to 12) and ``head`` (1 to 6) of the ``model`` ("trained" or "untrained"); the reader
    changes all four in the page. ValueError, naming the value and what is allowed, for anything else."""
    return Viewer(viewer_html(text, block, head, model))
