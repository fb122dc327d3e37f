"""Chapter 5's grid: GELU vs ReLU (and SwiGLU) at equal parameters."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import store
from .base import BASE, BASE_TRAIN, WIDTH_CORRECTED_STD, _cell

ROUND2_SEEDS = (6, 7, 8, 9, 10)  # fresh: the first grid ran seeds 0-5, and its rule was written after them


def ch5_activation() -> store.Grid:
    cells = []
    for std in (0.02, WIDTH_CORRECTED_STD):
        for act in ("gelu_tanh", "relu", "swiglu"):
            for seed in range(6):
                cells.append(
                    _cell(
                        {"init_std": std, "activation": act, "seed": seed},
                        replace(BASE, n_layer=4, activation=act, init_std=std),
                        replace(BASE_TRAIN, steps=600, eval_every=100, seed=seed),
                    )
                )
    # Other explanations of a gap at GPT-2's scale: weight decay keeping W_1 small, or the learning rate.
    tweaks: dict[str, dict[str, Any]] = {"weight decay 0": {"weight_decay": 0.0}, "lr 0.001": {"lr": 1e-3}}
    for setting, tweak in tweaks.items():
        for act in ("gelu_tanh", "relu"):
            for seed in range(6):
                cells.append(
                    _cell(
                        {"init_std": 0.02, "activation": act, "seed": seed, "setting": setting},
                        replace(BASE, n_layer=4, activation=act),
                        replace(BASE_TRAIN, steps=600, eval_every=100, seed=seed, **tweak),
                    )
                )
    return store.Grid(
        "ch5_activation",
        "GELU vs ReLU (and SwiGLU) at equal parameters, six paired seeds, two initial scales",
        "At equal parameters GELU ends at a lower validation loss than ReLU (paired by seed); Shazeer (2020) "
        "measured 1.983 vs 1.997 log-perplexity after 65,536 steps of a T5-base, and a gated SwiGLU lower still.",
        tuple(cells),
        rule="every",
        declared="after the runs: its six seeds had run when this rule (its second regime and its "
        "calibration) was written, so it decides on seen data",
        decisions=(
            *(
                store.Decision(
                    f"init std {std:g}, 600 steps",
                    arm={"init_std": std, "activation": "relu", "setting": None},
                    against={"init_std": std, "activation": "gelu_tanh", "setting": None},
                    predicted="positive",
                )
                for std in (0.02, WIDTH_CORRECTED_STD)
            ),
            store.Decision(
                "the GELU model learns beyond the unigram statistics (by 0.3 nats) in 600 steps",
                arm={"init_std": 0.02, "activation": "gelu_tanh", "setting": None},
                field="gain_over_unigram",
                test="level",
                level=0.3,
                predicted="positive",
                role="calibration",
            ),
        ),
    )


def ch5_activation_round2() -> store.Grid:
    """The first grid's rule, unchanged, on five fresh seeds: written down (and committed) before they
    ran, so that chapter 5's verdict no longer rests on seeds seen before its rule; beside it, SwiGLU
    against GELU, which the first grid only explored. The regime (4 blocks of width 64, 600 steps) is far
    from Shazeer's T5-base at 65,536 steps: a verdict here is about small models early in training."""
    first = ch5_activation()
    cells = []
    for std in (0.02, WIDTH_CORRECTED_STD):
        for act in ("gelu_tanh", "relu", "swiglu"):
            for seed in ROUND2_SEEDS:
                cells.append(
                    _cell(
                        {"init_std": std, "activation": act, "seed": seed},
                        replace(BASE, n_layer=4, activation=act, init_std=std),
                        replace(BASE_TRAIN, steps=600, eval_every=100, seed=seed),
                    )
                )
    return store.Grid(
        "ch5_activation_round2",
        "Chapter 5's test, round 2: GELU vs ReLU at equal parameters on five fresh seeds",
        first.prediction,
        tuple(cells),
        rule=first.rule,
        decisions=tuple(replace(d, seeds=ROUND2_SEEDS) for d in first.decisions)
        + tuple(
            store.Decision(  # Shazeer's second finding, reported beside the claim
                f"SwiGLU ends below GELU (init std {std:g}, 600 steps)",
                arm={"init_std": std, "activation": "swiglu"},
                against={"init_std": std, "activation": "gelu_tanh"},
                predicted="negative",
                role="control",
                seeds=ROUND2_SEEDS,
            )
            for std in (0.02, WIDTH_CORRECTED_STD)
        ),
    )


# Round 3: the width-corrected init only, with the seeds that make the claimed effect detectable. Fresh
# seeds: the first grid ran 0-5, round 2 6-10.
ROUND3_SEEDS = tuple(range(11, 27))  # sixteen
ROUND3_STEPS = 2400
CLAIMED = 0.014  # nats: Shazeer (2020), 1.997 - 1.983 log-perplexity


def ch5_activation_round3() -> store.Grid:
    """Declared before its runs, after the review of issue 49: rounds 1-2 decided the label at init std 0.02,
    where GELU is about x/2 for small pre-activations (an initialisation confound the chapter explains), and
    the clean, width-corrected regime could only detect 0.039 nats, three times the claimed effect. The
    stored width-corrected runs (rounds 1 and 2, eleven seeds) give a paired SD of ReLU minus GELU of 0.014
    natively and 0.0145 emulated at 600 steps (0.016 at 300-400 steps: no growth with training). At 0.0145,
    twelve seeds (the issue's suggestion) would detect 0.013 nats with 80 % power at 2.5 % one-sided, but a
    twelve-seed estimate of the SD exceeds the 0.0158 that keeps it under 0.014 about three times in ten;
    sixteen seeds detect 0.011 nats and stay under 0.014 up to an SD of 0.0187, which a sixteen-seed estimate
    exceeds about once in twenty (chi-squared, if the true SD is 0.0145). The budget is four times longer
    (2,400 steps), the model's end rather than its start. Whether the noise allowed it is itself a
    calibration: if the detectable effect on these runs exceeds 0.014 nats, the regime is not testable at
    this scale, and the book prints the number. The std-0.02 arms are not run again: they show the confound
    and decide nothing."""
    std = WIDTH_CORRECTED_STD
    cells = [
        _cell(
            {"init_std": std, "activation": act, "budget": ROUND3_STEPS, "seed": seed},
            replace(BASE, n_layer=4, activation=act, init_std=std),
            replace(BASE_TRAIN, steps=ROUND3_STEPS, eval_every=ROUND3_STEPS // 8, seed=seed),
        )
        for act in ("gelu_tanh", "relu")
        for seed in ROUND3_SEEDS
    ]
    regime = f"init std {std:g} (width-corrected), {ROUND3_STEPS} steps"
    relu, gelu = {"activation": "relu"}, {"activation": "gelu_tanh"}
    return store.Grid(
        "ch5_activation_round3",
        "Chapter 5's test, round 3: GELU vs ReLU at the width-corrected init only, sixteen fresh seeds, 2,400 steps",
        "Declared before any of these runs, after the review of issue 49. At equal parameters and the "
        f"width-corrected init (std {std:g}), GELU ends at a lower validation loss than ReLU after "
        f"{ROUND3_STEPS} steps (ReLU minus GELU > 0, paired by seed; one-sided t at 2.5 %, so that GELU ending "
        f"higher refutes it). Calibrations: the comparison's detectable effect (80 % power) is at most the "
        f"claimed {CLAIMED:g} nats at the noise these runs show, or the claim is not testable at this scale; "
        "and the GELU model ends at least 0.3 nats under the unigram entropy.",
        tuple(cells),
        rule="every",
        rule_modules=("evidence.twoway",),
        decisions=(
            store.Decision(regime, arm=relu, against=gelu, predicted="positive", seeds=ROUND3_SEEDS),
            store.Decision(
                f"the comparison can detect the claimed {CLAIMED:g} nats (80 % power)",
                arm=relu,
                against=gelu,
                test="detectable",
                level=CLAIMED,
                role="calibration",
                calibrates=regime,
                seeds=ROUND3_SEEDS,
            ),
            store.Decision(
                "the GELU model learns beyond the unigram statistics (by 0.3 nats)",
                arm=gelu,
                field="gain_over_unigram",
                test="level",
                level=0.3,
                predicted="positive",
                role="calibration",
                calibrates=regime,
                seeds=ROUND3_SEEDS,
            ),
        ),
    )
