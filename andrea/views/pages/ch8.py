"""Chapter 8's words, "Inside the trained model": its lesson's numbers, sentences and claims, and its evidence page.

The lesson (``book/08_trained.md``) measures the trained model and its untrained self with ``andrea.trained``
and hands the results to this module, which glues their numbers into the prose and turns them into
sentences and tables. This module does not import ``andrea.trained`` itself (the views sit below it in the
package's layers). The probes' verdicts (rule version 5, on two new models) are put in words by ``ch8_locate``
(``LocateReport``); version 4's record on the shipped model, which decides nothing, by ``ch8_probes``.

The evidence page (``book/evidence/08_trained_evidence.md``) calls the same modules for the apparatus: the
probing tasks and their controls, the calibrations, the declared rule and its history, each model's reading
of each task, version 4's comparisons on the shipped model, and the detailed tables.
"""

from __future__ import annotations

import numpy as np

from ..lesson import Markdown, evidence_claims, found, lesson_claims, paragraphs
from ..notebook import glue, table
from .ch8_locate import LocateReport
from .ch8_probes import ANCHORS, GLOSSED, HISTORY, ProbeReport, calibration_table, minutes_between

__all__ = ["ANCHORS", "GLOSSED", "LocateReport", "ProbeReport", "calibration_table", "paragraphs"]

CHAPTER = "08_trained"
PROSE, RANDOM = "held-out prose", "random tokens"
PREV = 0.5  # a previous-token head: at least half its attention on the token before
MATURE = 0.5  # a mature induction head gives at least half its attention to the token to copy


# --- the numbers the lesson's prose quotes (glued: {glue:text}`name`) --------------------------------------


def glue_training(log: dict, n_params: int, weights_bytes: int, config) -> None:
    """The model, its text and its training."""
    h, b, c = log["history"], log["baselines"], log["corpus"]
    glue("n_params", n_params / 1e6, ".1f")
    glue("width", config.d_model)
    glue("heads", config.n_head)
    glue("ctx", config.context_length)
    glue("files_train", c["train"]["files"])
    glue("files_val", c["val"]["files"])
    glue("tok_train", c["tokens"]["train"] / 1e6, ".1f")
    glue("tok_seen", log["tokens_seen"] / 1e6, ".1f")
    glue("epochs", log["tokens_seen"] / c["tokens"]["train"], ".1f")
    glue("minutes", log["seconds"] / 60, ".0f")
    glue("val_final", h["val_loss"][-1], ".2f")
    glue("train_final", float(np.mean(h["loss"][-50:])), ".2f")
    glue("unigram", b["unigram_ce"], ".2f")
    glue("bigram", b["bigram_ce"], ".2f")
    glue("mb", weights_bytes / 1e6, ".0f")


def glue_stream(stream: dict, lens: dict) -> None:
    """The residual stream's profile and the logit lens, trained and untrained."""
    st, su = stream["trained"], stream["untrained"]
    glue("rms_emb", st["rms"][0], ".2f")
    glue("inv_rms_emb", 1 / st["rms"][0], ".0f")
    glue("rms_b1", st["rms"][1], ".1f")
    glue("move_first", st["move"][0], ".0f")
    glue("move_lo", 100 * st["move"][1:].min(), ".0f")
    glue("move_hi", 100 * st["move"][1:].max(), ".0f")
    glue("move_u_first", 100 * su["move"][0], ".0f")
    glue("move_u_last", 100 * su["move"][-1], ".0f")
    glue("along_1", st["along_prediction"][0], ".2f")
    glue("along_late", st["along_prediction"][8:].mean(), "+.2f")
    acc = lens["trained"]["accuracy"]
    for k in (0, 6, 9, 12):
        glue(f"lens_{k}", 100 * acc[k], ".0f")
    glue("lens_u", 100 * lens["untrained"]["accuracy"].max(), ".0f")
    glue("kl_6", lens["trained"]["kl"][6], ".1f")
    glue("kl_11", lens["trained"]["kl"][11], ".1f")


def glue_heads(heads: dict, unrepeated: dict, att: dict, vocab_size: int) -> None:
    """The attention heads: previous-token and induction heads, copying, evenness and distance, and the loss
    on random tokens."""
    glue("prev_words", previous_token_heads(heads))
    block, head = strongest_head(heads).split(".")
    glue("ind_where", f"head {head} of block {block}")
    glue("random_words", random_loss(heads, vocab_size))
    glue("copy_words", copies(heads, unrepeated))
    glue("repeat_gain", repeat_gain(heads, unrepeated), ".2f")
    glue("ind_prose", _best(heads, PROSE, "trained", "induction"), ".2f")
    glue("ind_u_prose", _best(heads, PROSE, "untrained", "induction"), ".2f")
    glue("ent_t_min", att["trained"]["entropy"].min(), ".2f")
    glue("ent_u_min", att["untrained"]["entropy"].min(), ".2f")
    glue("dist_t_min", att["trained"]["distance"].min(), ".1f")
    glue("dist_u", att["untrained"]["distance"].mean(), ".0f")


def glue_mlp(mlp: dict) -> None:
    """Where the MLP's inputs lie, and how many of its outputs are off."""
    mt, mu = mlp["trained"], mlp["untrained"]
    glue("win_words", gelu_window(mt))
    glue("win_t", 100 * mt["in_window"].mean(), ".0f")
    glue("win_t_min", 100 * mt["in_window"].min(), ".0f")
    glue("win_u", 100 * mu["in_window"].mean(), ".0f")
    glue("off_t", 100 * mt["near_zero"].mean(), ".0f")
    glue("off_u", 100 * mu["near_zero"].mean(), ".0f")


def glue_norms(gains: dict, flow: dict) -> None:
    """The LayerNorm gains after training, and the gradient's ratio bottom to top."""
    glue("g1_lo", gains["ln_1_mean"].min(), ".2f")
    glue("g1_hi", gains["ln_1_mean"].max(), ".2f")
    glue("g2_lo", gains["ln_2_mean"].min(), ".2f")
    glue("g2_hi", gains["ln_2_mean"].max(), ".2f")
    glue("gf", gains["final_mean"], ".2f")
    glue("ratio_t", flow["trained"].grad_ratio, ".1f")
    glue("ratio_u", flow["untrained"].grad_ratio, ".2f")


# --- attention heads -------------------------------------------------------------------------------


def _best(heads: dict, text: str, model: str, score: str) -> float:
    return float(heads[text][model][score].max())


def strongest_head(heads: dict, text: str = PROSE, score: str = "induction") -> str:
    """The trained model's head with the highest ``score`` on ``text``, as "block.head" counted from 1."""
    s = heads[text]["trained"][score]
    i, j = np.unravel_index(s.argmax(), s.shape)
    return f"{i + 1}.{j + 1}"


def previous_token_heads(heads: dict) -> str:
    """How many trained heads give half their attention or more to the token before, on prose."""
    prev = heads[PROSE]["trained"]["previous_token"]
    blocks = [i + 1 for i, _ in zip(*np.nonzero(prev >= PREV))]
    if not blocks:
        return (
            "No head of the trained model is a previous-token head on prose: none puts more than "
            f"{prev.max():.2f} of its attention on the token before."
        )
    return (
        f"The trained model has {len(blocks)} previous-token head{'s' if len(blocks) > 1 else ''} on prose (half "
        f"or more of a head's attention on the token before), the first in block {min(blocks)}."
    )


def repeat_gain(heads: dict, unrepeated: dict) -> float:
    """Nats per token that having seen a passage once saves on its second copy, beyond the context alone:
    the unrepeated pages' tokens 64-127 minus the second copy's loss."""
    return float(unrepeated["loss_second"] - heads[PROSE]["trained"]["loss_second"])


def copies(heads: dict, unrepeated: dict) -> str:
    """Does the trained model copy a passage it has seen, and does a head do it?"""
    if repeat_gain(heads, unrepeated) <= 0:
        return (
            "A passage seen once is no easier the second time than fresh text with as much context: this model "
            "does not copy."
        )
    if _best(heads, PROSE, "trained", "induction") < MATURE:
        return (
            "Seen once, a passage becomes easier the second time, so the model copies a little; but no head gives "
            "even half its attention to the token to copy, as a mature induction head does."
        )
    return (
        "Seen once, a passage becomes easier the second time, so the model copies a little, and some head gives "
        "most of its attention to the token to copy."
    )


def random_loss(heads: dict, vocab_size: int) -> str:
    """The first copy of random tokens, trained against untrained, and why a trained model can lose there."""
    t, u = heads[RANDOM]["trained"]["loss_first"], heads[RANDOM]["untrained"]["loss_first"]
    said = (
        f"On random tokens the trained model's loss, {t:.1f} nats, is {'above' if t > u else 'below'} the "
        f"untrained one's, {u:.1f} (an even guess: ln {vocab_size:,} = {np.log(vocab_size):.1f})"
    )
    if t > u:
        said += ": trained on text, it guesses confidently, and here wrongly"
    return said + "."


def above_or_below(loss: float, vocab_size: int) -> str:
    """Where a loss lies against uniform guessing over the vocabulary."""
    return "above" if loss > np.log(vocab_size) else "below"


def heads_table(heads: dict):
    """Each text and model: the best previous-token and induction scores, and the loss on each copy."""
    rows = [
        {
            "text": text,
            "model": m,
            "best previous-token score": f"{_best(heads, text, m, 'previous_token'):.2f}",
            "best induction score": f"{_best(heads, text, m, 'induction'):.2f}",
            "loss, 1st copy": f"{heads[text][m]['loss_first']:.2f}",
            "loss, 2nd copy": f"{heads[text][m]['loss_second']:.2f}",
        }
        for text in heads
        for m in ("trained", "untrained")
    ]
    return table(rows, list(rows[0]))


def heads_evidence(heads: dict, unrepeated: dict, vocab_size: int) -> Markdown:
    """The procedure behind the heads' sentences, with the numbers the lesson leaves out."""
    t = heads[PROSE]["trained"]
    r = heads[RANDOM]["trained"]
    return paragraphs(
        f"{previous_token_heads(heads)} The strongest induction head on repeated prose is head "
        f"{strongest_head(heads)} (block.head), with a score of {_best(heads, PROSE, 'trained', 'induction'):.2f}; "
        f"on repeated random tokens the best score is {_best(heads, RANDOM, 'trained', 'induction'):.2f}, and the "
        f"untrained model's best on prose is {_best(heads, PROSE, 'untrained', 'induction'):.2f}.",
        f"The second copy of a held-out passage costs {t['loss_first'] - t['loss_second']:.2f} nats per token less "
        "than the first, but part of that is only more context. The same pages' tokens 64 to 127, not repeated, "
        f"have as much context as the second copy: they cost {unrepeated['loss_second']:.2f} nats, against "
        f"{t['loss_second']:.2f} for the second copy, so having seen the passage is worth "
        f"{repeat_gain(heads, unrepeated):.2f} nats per token. {copies(heads, unrepeated)}",
        f"The second copy of random tokens costs {r['loss_first'] - r['loss_second']:.2f} nats less than the "
        f"first. Random tokens are far from anything the model read: it scores {r['loss_first']:.1f} nats on "
        f"their first copy, {above_or_below(r['loss_first'], vocab_size)} the {np.log(vocab_size):.1f} of "
        "uniform guessing, which makes them a poor place to look for a mechanism.",
    )


# --- the MLP -------------------------------------------------------------------------------------


def gelu_window(mlp: dict) -> str:
    """Whether the trained MLP's inputs still lie where GELU and ReLU differ."""
    if mlp["in_window"].min() > 0.5:
        return (
            "So the trained MLP still works mostly where GELU's curve is not ReLU's, the region where chapter 5's "
            "comparison of the two has something to decide."
        )
    return "In some blocks most inputs have left the region where GELU and ReLU differ."


def claims(located: LocateReport):
    """The lesson's claims table, each row linked to its evidence (rule version 5)."""
    return lesson_claims(CHAPTER, located.claim_rows())


def all_claims(located: LocateReport):
    """The evidence page's claims table, with the reasons (rule version 5)."""
    return evidence_claims(located.claim_rows())


def what_we_found(lens: dict, heads: dict, unrepeated: dict, located: LocateReport) -> Markdown:
    """The lesson's opening: the logit lens, copying, and the source's claim on the new models."""
    acc = lens["accuracy"]
    half = (len(acc) - 1) // 2
    return found(
        f"Trained, the model's guess for the next token forms in the second half of its stack: read after block "
        f"{half} through the {{term}}`logit lens`, the stream names the next token {100 * acc[half]:.0f} % of the "
        f"time, at the top {100 * acc[-1]:.0f} %.",
        copies(heads, unrepeated),
        located.found_sentence(),
    )


def verdicts(located: LocateReport) -> Markdown:
    """The lesson's task-by-task verdicts, one sentence each, linked to their evidence."""
    return located.sentences()


def overall(located: LocateReport) -> Markdown:
    """The lesson's sentence on the source's whole claim, linked to its evidence (the rule and its history are on
    the evidence page)."""
    return Markdown(located.overall_sentence(rule_words=False))


def history(located: LocateReport, report: ProbeReport) -> Markdown:
    """The rule's history (evidence page): version 3's and version 4's labels on the shipped model, the minutes
    between them, and why version 5 decides."""
    return located.history(HISTORY[3]["claim"], report.overall.label, minutes_between(3, 4))


def v4_words(report: ProbeReport, name: str) -> Markdown:
    """A task's reading under version 4 on the shipped model, said as what it is (evidence page)."""
    return Markdown(f"**Version 4, on the shipped model (decides nothing).** {report.task_words(name)}")


def claim_evidence(located: LocateReport, es: dict, n_params: int) -> Markdown:
    """The source's whole claim under version 5, with its cautions (evidence page)."""
    return located.claim_evidence(n_params, len(np.unique(es["prose_file"])), len(np.unique(es["code_file"])))
