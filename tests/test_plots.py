"""The book's figure helpers."""

import matplotlib

matplotlib.use("Agg")

from andrea import plots  # noqa: E402


def _provenance_texts(fig):
    return [t.get_text() for t in fig.texts if "torch" in t.get_text()]


def test_a_restated_provenance_replaces_the_figures_own():
    """A chapter that restates device and seeds under a figure function's plot gets one line, not two
    drawn on top of each other."""
    rows = [{"depth": d, "arm": a, "seed": s, "final_val_loss": 1.0 + s} for d in (1, 2) for a in "ab" for s in (0, 1)]
    fig = plots.seeds_figure(rows, x="depth", arm="arm")
    assert len(_provenance_texts(fig)) == 1
    plots.provenance(fig, "cpu", None, "seeds 0-1")
    texts = _provenance_texts(fig)
    assert len(texts) == 1 and texts[0].endswith("seeds 0-1")
