"""Write the labs in notebooks/ from the cell lists below (run once after editing; outputs are never stored).

.venv/bin/python tools/make_labs.py
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
INSTALL = '''# Outside the book's own environment (Colab, a fresh Binder), install the
# book's package first.
try:
    import andrea
except ImportError:
    %pip install -q "andrea @ git+https://github.com/andrea-book/andrea-book"'''


def md(text):
    return new_markdown_cell(text.strip())


def code(text, tags=()):
    c = new_code_cell(text.strip())
    if tags:
        c.metadata["tags"] = list(tags)
    return c


LAB1 = [
    md("""
# Lab: the gradient-flow explorer

Vary LayerScale's initial λ, the depth, the norm placement, the residual path, the width and the seed
of a freshly initialised ANDREA, and watch the gradient reach every block boundary. Each setting builds
the real model (`andrea.Andrea`) and runs one forward and backward pass with `andrea.gradient_flow` on a
seeded batch of random tokens; results are cached, so returning to a setting is instant.

**In a notebook** (`make lab`, Binder, Colab): run all cells (*Run ▸ Run All Cells*) and the live
explorer appears below; a saved copy that is reopened shows "run this cell" in its place until the cell
runs again, because a widget lives in its kernel.
**On the book's site** there is no kernel: the live explorer's cell is shown but not run; the launch
buttons at the top of the page open this lab as a notebook, and the precomputed chart further down works
right on the page.
"""),
    code(INSTALL, tags=["remove-cell"]),
    code("""
from andrea import pick_device
from andrea.views.notebook import setup
device = setup(seed=0)
print("running on", device)
"""),
    md("""
## The live explorer

The left panel is the gradient RMS at every block boundary (boundary 0 is the embeddings), on a log
scale; the right panel is the size of the residual stream. The faint grey curve is the reference
setting: plain pre-norm, no LayerScale, the same depth. The line under the chart gives the ratio of
the gradient at the embeddings to the gradient at the top of the stack (1 means every block receives
the same gradient). A setting whose forward or backward pass produces inf or NaN is drawn as far as it
got and labelled *diverged*; a gradient that underflows to zero is labelled *vanished*.
"""),
    code(
        """
from andrea.views.widgets import GradientFlowExplorer
explorer = GradientFlowExplorer(depth=24, layerscale=None, norm="pre")
explorer
""",
        tags=["skip-execution"],
    ),
    md("""
The same measurements, precomputed for a grid of settings (on the book's site this chart needs no kernel;
in a notebook it is drawn by the notebook's own Vega-Lite renderer):
"""),
    code(
        """
from andrea.views.static_explorer import StaticExplorer
StaticExplorer(depth=24, layerscale=None, norm="pre", name="explorer-lab1")
""",
        tags=["remove-input"],
    ),
    md("""
## Guided questions

Each question has a cell that answers it with the same functions the explorer uses
(`andrea.views.explorer.probe`), so you can check what you saw.

**1.** Set the depth to 96 and switch the residual path off. What happens to the gradient at the
embeddings? Switch the norm placement between *pre*, *post* and *none*.
"""),
    code("""
from andrea.views import explorer as E
for norm in ("pre", "post", "none"):
    r = E.probe(E.Setting(depth=96, residual=False, norm=norm))
    print(f"{norm:5s} residual off, 96 blocks: {E.summary(r)}")
"""),
    md("""
**2.** With the residual path on, set the norm placement to *post*. Why is the gradient at boundary 0
so much larger than at boundary 1? (Hint: what is the RMS of the embeddings, and what does the
LayerNorm after the first residual addition do to a gradient?)
"""),
    code("""
r = E.probe(E.Setting(depth=24, norm="post"))
print(f"gradient at boundary 0 / boundary 1 = "
      f"{r.grad_rms[0] / r.grad_rms[1]:.1f}")
print(f"1 / RMS(embeddings) = {1 / r.act_rms[0]:.1f}")
"""),
    md("""
**3.** Pre-norm at depth 96: sweep λ₀ from off through 1 down to 10⁻⁶. How does the ratio between the
gradient at the embeddings and at the top change, and the stream's growth?
"""),
    code("""
for lam in (None, 1.0, 1e-1, 1e-2, 1e-4, 1e-6):
    r = E.probe(E.Setting(depth=96, layerscale=lam))
    print(f"lambda0 = {E.lambda_label(lam):>6s}: "
          f"embeddings/top gradient = {r.grad_ratio:6.3f}, "
          f"stream RMS grows {r.act_rms[-1] / r.act_rms[0]:6.3f}x")
"""),
    md("""
**4.** Does the seed matter? Compare a few seeds at the same setting. Differences between seeds tell
you how much of what you see is the random initialisation rather than the architecture.
"""),
    code("""
ratios = [E.probe(E.Setting(depth=48, seed=s)).grad_ratio for s in range(5)]
print("embeddings/top gradient over 5 seeds:", [round(x, 3) for x in ratios])
"""),
    md("""
**5.** Question 4 kept the residual path on. Switch it off at depth 48 and compare the widths 64, 128
and 256, then a few seeds at each width. How far apart are the readings, and how far apart are they
with the path on? What does that tell you about drawing a conclusion from one residual-free curve?
(Hint for width 64: chapter 1's evidence page shows the stream falling below √ε, where LayerNorm's ε
takes over.)
"""),
    code("""
for residual in (False, True):
    for width in (64, 128, 256):
        ratios = [E.probe(E.Setting(depth=48, residual=residual, width=width,
                                    seed=s)).grad_ratio for s in range(5)]
        print(f"residual {'on ' if residual else 'off'}, width {width:3d}:",
              f"{min(ratios):.2g} to {max(ratios):.2g} over 5 seeds")
"""),
    md("""
**6.** Extreme settings: post-norm at depth 96 with λ₀ = 1, and no normalisation at depth 96 with the
residual path off. The explorer shows them as what they are instead of failing.
"""),
    code("""
extreme = (E.Setting(depth=96, norm="post", layerscale=1.0),
           E.Setting(depth=96, norm="none", residual=False))
for s in extreme:
    print(s.label(), "->", E.summary(E.probe(s)))
"""),
]

LAB2 = [
    md("""
# Lab: training ANDREA on real text

Train a small ANDREA on the documentation that ships with Python (about 2 MB of English text: the help
topics of `pydoc_data` and the standard library's docstrings), watch the loss, sample some text, and
then compare the gradient flow of the trained model with the untrained one.

The same code trains the full ANDREA-120M on a GPU (`python -m andrea.training.train --preset andrea-120m`);
here we use the `tiny` preset (width 128, 4 blocks), which takes about a minute on a laptop CPU.
"""),
    code(INSTALL, tags=["remove-cell"]),
    code("""
from dataclasses import replace
import torch
from andrea import Andrea, count_parameters, gradient_flow
from andrea.training.data import corpus_stats, load_token_data
from andrea.training.data import python_docs_corpus
from andrea.views.notebook import setup
from andrea.progress import show_progress
from andrea.training.train import PRESETS, sample, train
from andrea.views import plots
device = setup(seed=0)
print("training on", device)
"""),
    md("""
## The corpus and the tokenizer

A byte-level BPE tokenizer (Hugging Face `tokenizers`) is trained on the corpus to exactly ANDREA's
vocabulary of 8449 tokens, and cached. Any UTF-8 text round-trips losslessly.
"""),
    code("""
text = python_docs_corpus()
print(corpus_stats(text))
data = load_token_data("bpe")
tok = data.tokenizer
print(f"vocabulary: {tok.vocab_size} tokens")
print(f"train {len(data.train):,} tokens, validation {len(data.val):,}")
example = "GELU(x) = x * Φ(x): a smooth ReLU.  🚀"
ids = tok.encode(example)
print(len(example), "characters ->", len(ids), "tokens")
print("round trip exact:", tok.decode(ids) == example)
"""),
    md("""
## Train

The `tiny` preset, trained for 200 steps here (the command-line default is 300). The progress bar shows
the loss and the tokens per second; validation loss is measured every 50 steps.
"""),
    code("""
model_cfg, train_cfg, _ = PRESETS["tiny"]
model_cfg = replace(model_cfg, vocab_size=data.vocab_size)
train_cfg = replace(train_cfg, steps=200, eval_every=50)
print(f"{count_parameters(model_cfg)['total']:,} parameters")
result = train(model_cfg, train_cfg, data, device=device,
               progress=show_progress())
h = result.history
print(f"loss {h['loss'][0]:.2f} -> {h['loss'][-1]:.2f};  "
      f"validation {h['val_loss']}")
print(f"{result.tokens_per_s:,.0f} tokens/s")
"""),
    code("""
run = dict(h, steps=h["step"], panel="tiny preset", run="ANDREA tiny",
           diverged=result.diverged)
fig = plots.loss_curves_figure([run], facet="panel", color="run",
                               labels=lambda k, v: v, title="Training loss")
"""),
    md("""
## Sample

Two hundred steps on a CPU learn words and some of the documentation's formatting, not sense.
"""),
    code("""
for seed in range(2):
    print(f"--- sample {seed + 1} (temperature 0.8, top-k 50) ---")
    print(sample(result.model, tok, "The ", max_new_tokens=60, seed=seed))
"""),
    md("""
## Gradient flow: trained vs untrained

The same probe as in the explorer, on a real batch of validation text, for the trained model and a
freshly initialised one of the same configuration.
"""),
    code("""
g = torch.Generator().manual_seed(0)
x, y = data.batch("val", 8, 64, g)
trained = gradient_flow(result.model.cpu(), x, y)
torch.manual_seed(train_cfg.seed)
fresh = gradient_flow(Andrea(model_cfg), x, y)
print(f"embeddings/top gradient ratio: untrained {fresh.grad_ratio:.2f}, "
      f"trained {trained.grad_ratio:.2f}")
plots.gradient_flow_figure(trained, fresh,
                           label=f"trained (loss {trained.loss:.2f})",
                           reference_label=f"untrained (loss "
                                           f"{fresh.loss:.2f})",
                           title="The tiny model before and after 200 steps")
"""),
    md("""
**Questions.** How did training change the size of the residual stream? Which boundaries receive more
gradient after training than before? Train longer (`train_cfg = replace(train_cfg, steps=1000)`) or on
your own text (`load_token_data("bpe", path="my.txt")`) and look again.
"""),
    md("""
## The book's trained model

Two hundred steps are a start. The book ships a twelve-block ANDREA trained for about 45 minutes on
Python's manuals (chapter 8 looks inside it). The same probe, on its held-out text, before and after
that training:
"""),
    code("""
from andrea.trained import model as shipped

big, big_init = shipped.load(), shipped.untrained()
w = torch.from_numpy(shipped.eval_set()["prose_ids"][:8].astype("int64"))
after = gradient_flow(big, w[:, :-1], w[:, 1:])
before = gradient_flow(big_init, w[:, :-1], w[:, 1:])
plots.gradient_flow_figure(after, before,
                           label=f"trained (loss {after.loss:.2f})",
                           reference_label=f"untrained (loss "
                                           f"{before.loss:.2f})",
                           title="The shipped 12-block model")
"""),
]


def write(name, cells):
    for i, cell in enumerate(cells):
        cell.id = f"{name.split('_')[0]}-{i:02d}"  # stable ids: regenerating gives a clean diff
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    path = ROOT / "notebooks" / name
    nbformat.write(nb, path)
    print("wrote", path.relative_to(ROOT))


if __name__ == "__main__":
    write("lab1_gradient_flow.ipynb", LAB1)
    write("lab2_training.ipynb", LAB2)
