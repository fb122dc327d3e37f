"""The training experiments behind the book's verdicts: one named grid per claim.

Each grid states its prediction before any run, puts the claim in the regime where it is supposed
to bite, keeps a control where it is not, switches the default confounds off in an arm of its own,
and repeats every arm over several seeds (a seed fixes both the initial weights and the batches,
so two arms with the same seed are paired). The results are stored in ``andrea/results`` by
``andrea.store``; chapters read them with ``results(name)``.

    python -m andrea.experiments --list        # the grids, their size, and whether their results are current
    python -m andrea.experiments               # (re)run every grid whose results are missing or stale
    python -m andrea.experiments ch3_warmup    # one grid (`make experiments` runs them all)

The runs use the byte tokenizer (vocabulary 256) on Python's documentation: the architecture
questions (residuals, norms, warmup, activations, LayerScale) do not need the 8449-token BPE, and a
small vocabulary keeps the output layer from dominating the cost of a narrow model.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

from . import store, verdict
from .config import AndreaConfig
from .store import workers
from .train import TrainConfig
from .verdict import Verdict

BASE = AndreaConfig(vocab_size=256, context_length=128, d_model=64, n_layer=6, n_head=4)
BASE_TRAIN = TrainConfig(steps=400, batch_size=16, seq_len=64, lr=3e-3, warmup=50, eval_every=50, eval_batches=8)
SEEDS = (0, 1, 2)
# The seeds that decide a verdict, run only after its rule (``store.Decision``) was written down:
# the first three seeds of most grids had been seen when their criteria were revised, so they stay
# in the grids as exploratory runs and decide nothing.
CONFIRM = (3, 4, 5, 6, 7)
# init_std such that init_std * sqrt(d_model) is what ANDREA-120M has (0.02 * sqrt(768)): at width
# 64 every matrix product then starts at the scale it has in the full model.
WIDTH_CORRECTED_STD = round(0.02 * (768 / 64) ** 0.5, 4)


def _cell(label: dict, model: AndreaConfig, train: TrainConfig, monitor=None) -> store.Cell:
    return store.Cell(label=label, model=model.to_dict(), train=asdict(train), monitor=monitor)


def ch1_residual() -> store.Grid:
    cells = []
    for depth in (1, 2, 3, 6, 12, 24):
        for arm in ("residual", "no residual", "no residual, controls off", "no residual, Xavier init"):
            m = replace(BASE, n_layer=depth, residual=arm == "residual")
            if arm.endswith("controls off"):  # the two confounds of the gradient collapse at init
                m = replace(m, ln_eps=1e-12, init="normal")
            if arm.endswith("Xavier init"):  # weights that keep each layer's output at its input's scale
                m = replace(m, init="xavier")
            for seed in SEEDS:
                cells.append(_cell({"depth": depth, "arm": arm, "seed": seed}, m, replace(BASE_TRAIN, seed=seed)))
    for depth in (3, 12):  # is the residual-free failure a matter of the learning rate?
        for seed in SEEDS:
            cells.append(
                _cell(
                    {"depth": depth, "arm": "no residual, lr 0.001", "seed": seed},
                    replace(BASE, n_layer=depth, residual=False),
                    replace(BASE_TRAIN, lr=1e-3, seed=seed),
                )
            )
    for depth in (12, 24):  # the deciding seeds, run after the rule below was fixed
        for arm in ("residual", "no residual"):
            for seed in CONFIRM:
                m = replace(BASE, n_layer=depth, residual=arm == "residual")
                cells.append(_cell({"depth": depth, "arm": arm, "seed": seed}, m, replace(BASE_TRAIN, seed=seed)))
    return store.Grid(
        "ch1_residual",
        "Residual vs residual-free pre-norm stacks of 1 to 24 blocks, trained",
        "Without the residual path a stack gets harder to train as it gets deeper: its final validation loss "
        "is higher than the residual stack's, by more at greater depth. The arm with LayerNorm's epsilon at "
        "1e-12 and no depth-scaled init tests whether the gradient collapse these two cause at initialisation "
        "is what decides, and the arm with Xavier's variance-preserving initialisation whether small initial "
        "weights are; a lower learning rate (1e-3) for the residual-free stack at 3 and 12 blocks tests whether "
        "the learning rate is.",
        tuple(cells),
        rule="every",
        decisions=(
            *(
                store.Decision(
                    f"{d} blocks",
                    arm={"depth": d, "arm": "no residual"},
                    against={"depth": d, "arm": "residual"},
                    predicted="positive",
                    seeds=CONFIRM,
                )
                for d in (12, 24)
            ),
            store.Decision(
                "the residual 12-block stack learns beyond the unigram statistics (by 0.3 nats)",
                arm={"depth": 12, "arm": "residual"},
                field="gain_over_unigram",
                test="level",
                level=0.3,
                predicted="positive",
                role="calibration",
                seeds=CONFIRM,
            ),
        ),
    )


def ch2_norm_lr() -> store.Grid:
    cells = []
    for lr in (1e-3, 1e-2, 3e-2):
        for clip in (1.0, None):
            for norm in ("pre", "none"):
                for seed in SEEDS:
                    t = replace(BASE_TRAIN, lr=lr, grad_clip=clip, eval_every=25, seed=seed)
                    cells.append(
                        _cell(
                            {"norm": norm, "lr": lr, "clip": clip, "seed": seed},
                            replace(BASE, norm=norm),
                            t,
                            monitor="stream",
                        )
                    )
    for lr, clip, norm in ((1e-2, 1.0, "pre"), (1e-2, 1.0, "none"), (3e-2, 1.0, "pre"), (3e-2, 1.0, "none")) + (
        (3e-2, None, "none"),
    ):
        for seed in CONFIRM:  # the deciding seeds, run after the rule below was fixed
            t = replace(BASE_TRAIN, lr=lr, grad_clip=clip, eval_every=25, seed=seed)
            cells.append(
                _cell(
                    {"norm": norm, "lr": lr, "clip": clip, "seed": seed}, replace(BASE, norm=norm), t, monitor="stream"
                )
            )
    return store.Grid(
        "ch2_norm_lr",
        "Pre-norm vs no normalisation, trained at three learning rates, with and without clipping",
        "Without normalisation, instabilities accumulate during training into non-finite losses or gradients "
        "at learning rates where the pre-norm model stays finite (lr 1e-2 or 3e-2, clipped at 1); at a low "
        "learning rate both stay finite.",
        tuple(cells),
        rule="some",
        # measured: the deciding no-norm run at lr 1e-2 (seed 3) ends 0.031 nats apart on portable kernels
        kernel_tolerance=0.04,
        decisions=(
            *(
                store.Decision(
                    f"lr {lr:g}, clipped",
                    arm={"norm": "none", "lr": lr, "clip": 1.0},
                    against={"norm": "pre", "lr": lr, "clip": 1.0},
                    field="diverged",
                    test="fisher",
                    predicted="positive",
                    seeds=CONFIRM,
                )
                for lr in (1e-2, 3e-2)
            ),
            store.Decision(
                "without normalisation or clipping at lr 3e-2, every run diverges within the budget",
                arm={"norm": "none", "lr": 3e-2, "clip": None},
                field="diverged",
                test="every",
                role="calibration",
                seeds=CONFIRM,
            ),
        ),
    )


# Warmup for the deciding runs: a quarter of the 400 steps, five times the ~20-step memory of
# AdamW's second moment (beta2 = 0.95); 50 steps (12.5 %) is kept for the exploratory seeds.
LONG_WARMUP = 100
CONFIRM_CH3 = (6, 7, 8, 9, 10)  # seeds 0-5 were seen before this rule was written


def ch3_warmup() -> store.Grid:
    cells = []
    for init in ("gpt2", "xavier"):
        for lr in (3e-4, 1e-3, 2e-3, 3e-3):
            for norm in ("pre", "post"):
                for warmup in (0, 50):
                    for seed in range(6):  # six paired seeds: three cannot reach 5 % with a t interval
                        cells.append(
                            _cell(
                                {"init": init, "lr": lr, "norm": norm, "warmup": warmup, "seed": seed},
                                replace(BASE, norm=norm, init=init),
                                replace(BASE_TRAIN, lr=lr, warmup=warmup, seed=seed),
                            )
                        )
    for lr in (1e-3, 2e-3):  # the deciding seeds, run after the rule below was fixed
        for norm in ("pre", "post"):
            for warmup in (0, LONG_WARMUP):
                for seed in CONFIRM_CH3:
                    cells.append(
                        _cell(
                            {"init": "xavier", "lr": lr, "norm": norm, "warmup": warmup, "seed": seed},
                            replace(BASE, norm=norm, init="xavier"),
                            replace(BASE_TRAIN, lr=lr, warmup=warmup, seed=seed),
                        )
                    )
    xavier_post = {"init": "xavier", "norm": "post"}
    return store.Grid(
        "ch3_warmup",
        "Pre-norm vs post-norm, with and without warmup, at four learning rates and two initialisations",
        "Post-norm needs warmup: without it, post-norm ends at a higher validation loss than with it (Xiong et al. "
        "2020, in their Xavier-initialised setting), increasingly so at higher learning rates; pre-norm trains "
        f"about the same with or without warmup. Decided with a warmup of {LONG_WARMUP} of 400 steps.",
        tuple(cells),
        rule="some",
        decisions=(
            *(
                store.Decision(
                    f"post-norm, Xavier init, lr {lr:g}",
                    arm={**xavier_post, "lr": lr, "warmup": 0},
                    against={**xavier_post, "lr": lr, "warmup": LONG_WARMUP},
                    predicted="positive",
                    seeds=CONFIRM_CH3,
                )
                for lr in (1e-3, 2e-3)
            ),
            store.Decision(
                "pre-norm ends below post-norm without warmup (lr 2e-3)",
                arm={**xavier_post, "lr": 2e-3, "warmup": 0},
                against={"init": "xavier", "norm": "pre", "lr": 2e-3, "warmup": 0},
                predicted="positive",
                role="calibration",
                seeds=CONFIRM_CH3,
            ),
            store.Decision(
                "pre-norm with and without warmup (lr 2e-3), within ±0.05 nats",
                arm={"init": "xavier", "norm": "pre", "lr": 2e-3, "warmup": 0},
                against={"init": "xavier", "norm": "pre", "lr": 2e-3, "warmup": LONG_WARMUP},
                test="equivalence",
                margin=0.05,
                role="control",
                seeds=CONFIRM_CH3,
            ),
        ),
    )


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


CONFIRM_CH7 = (0, 1, 2, 3, 4)  # every run of this grid is new (24 blocks, 800 steps): no seed was seen
CH7_KERNEL_TOLERANCE = 0.2  # measured 0.136 and 0.171 nats (plain pre-norm, lr 3e-3), rounded up
LS_LAMBDA = 1e-5  # CaiT's initial lambda at depth 24 (0.1 up to 18 blocks, 1e-6 beyond 24)


def ch7_layerscale() -> store.Grid:
    """24 blocks of width 32 for 800 steps: deep enough that the plain stack fails in two regimes,
    long enough (twice the first version's 400 steps) for a lambda that starts at 1e-5 to open."""
    deep = replace(BASE, d_model=32, n_head=2, n_layer=24)
    t = replace(BASE_TRAIN, steps=800, seq_len=32, warmup=0, eval_every=100)
    regimes = {  # regime: (model, train, learning rates, LayerScale settings)
        "post-norm, Xavier init, no warmup": (replace(deep, norm="post", init="xavier"), t, (1e-3,)),
        "pre-norm, plain init, no warmup": (replace(deep, init="normal"), t, (3e-3,)),
        "control: pre-norm, GPT-2 init, warmup": (deep, replace(t, warmup=40), (1e-3, 3e-3)),
    }
    cells = []
    for lr in (1e-3, 3e-3):  # what a shallow stack reaches
        for seed in CONFIRM_CH7:
            cells.append(
                _cell(
                    {"regime": "baseline: 2 blocks", "layerscale": "off", "lr": lr, "seed": seed},
                    replace(deep, n_layer=2),
                    replace(t, lr=lr, seed=seed),
                    monitor="layerscale",
                )
            )
    for regime, (m, tr, lrs) in regimes.items():
        for lr in lrs:
            for lam in (None, LS_LAMBDA):
                if regime.startswith("control") and lr == 1e-3 and lam is not None:
                    continue  # the healthy stack at 1e-3 calibrates the post-norm regime only
                for seed in CONFIRM_CH7:
                    cells.append(
                        _cell(
                            {"regime": regime, "layerscale": "off" if lam is None else lam, "lr": lr, "seed": seed},
                            replace(m, layerscale=lam),
                            replace(tr, lr=lr, seed=seed),
                            monitor="layerscale",
                        )
                    )
    post, pre, ctl = (
        {"regime": "post-norm, Xavier init, no warmup", "lr": 1e-3},
        {"regime": "pre-norm, plain init, no warmup", "lr": 3e-3},
        {"regime": "control: pre-norm, GPT-2 init, warmup"},
    )
    return store.Grid(
        "ch7_layerscale",
        "24-block stacks with LayerScale off and at 1e-5, where the plain stack struggles and where it does not",
        "With a small initial lambda (1e-5) a deep stack trains where the plain stack fails: it ends at a lower "
        "validation loss than the same stack without LayerScale; where the plain stack already trains, "
        "LayerScale ends no worse (within 0.05 nats).",
        tuple(cells),
        rule="some",
        # measured: the plain pre-norm stack at lr 3e-3 is chaotic; its deciding run (seed 0) ends 0.136
        # nats apart on portable kernels (round 2's seed 5: 0.171). Every verdict of the grid carries it.
        kernel_tolerance=CH7_KERNEL_TOLERANCE,
        decisions=(
            store.Decision(  # arm minus against: the plain stack's loss minus LayerScale's
                "post-norm, Xavier init, lr 1e-3",
                arm={**post, "layerscale": "off"},
                against={**post, "layerscale": LS_LAMBDA},
                predicted="positive",
                seeds=CONFIRM_CH7,
            ),
            store.Decision(
                "pre-norm, plain init, lr 3e-3",
                arm={**pre, "layerscale": "off"},
                against={**pre, "layerscale": LS_LAMBDA},
                predicted="positive",
                seeds=CONFIRM_CH7,
            ),
            store.Decision(
                "a healthy stack ends below the plain post-norm one (lr 1e-3)",
                arm={**post, "layerscale": "off"},
                against={**ctl, "layerscale": "off", "lr": 1e-3},
                predicted="positive",
                role="calibration",
                calibrates="post-norm, Xavier init, lr 1e-3",
                seeds=CONFIRM_CH7,
            ),
            store.Decision(
                "a healthy stack ends below the plain pre-norm one (lr 3e-3)",
                arm={**pre, "layerscale": "off"},
                against={**ctl, "layerscale": "off", "lr": 3e-3},
                predicted="positive",
                role="calibration",
                calibrates="pre-norm, plain init, lr 3e-3",
                seeds=CONFIRM_CH7,
            ),
            store.Decision(
                "where the plain stack trains, LayerScale ends within ±0.05 nats of it (lr 3e-3)",
                arm={**ctl, "layerscale": LS_LAMBDA, "lr": 3e-3},
                against={**ctl, "layerscale": "off", "lr": 3e-3},
                test="equivalence",
                margin=0.05,
                role="control",
                seeds=CONFIRM_CH7,
            ),
            store.Decision(
                "the healthy 24-block stack ends below 2 blocks (lr 1e-3)",
                arm={"regime": "baseline: 2 blocks", "layerscale": "off", "lr": 1e-3},
                against={**ctl, "layerscale": "off", "lr": 1e-3},
                predicted="positive",
                role="control",
                seeds=CONFIRM_CH7,
            ),
        ),
    )


ROUND2_SEEDS = (5, 6, 7, 8, 9)  # fresh: run only after this rule was committed


def ch7_layerscale_round2() -> store.Grid:
    """The second round of chapter 7's test, declared after a review of the first: one more
    struggling setting (post-norm at lr 3e-3, where a 48-block exploration had LayerScale fail), the
    claim required in *every* struggling setting, and the comparisons the first round left out (the
    rescued stack against 2 blocks, LayerScale in the healthy recipe at both learning rates)."""
    deep = replace(BASE, d_model=32, n_head=2, n_layer=24)
    t = replace(BASE_TRAIN, steps=800, seq_len=32, warmup=0, eval_every=100)
    post, pre = replace(deep, norm="post", init="xavier"), replace(deep, init="normal")
    arms = {  # (regime, lr): (model, train)
        ("post-norm, Xavier init, no warmup", 1e-3): (post, t),
        ("post-norm, Xavier init, no warmup", 3e-3): (post, t),
        ("pre-norm, plain init, no warmup", 3e-3): (pre, t),
        ("control: pre-norm, GPT-2 init, warmup", 1e-3): (deep, replace(t, warmup=40)),
        ("control: pre-norm, GPT-2 init, warmup", 3e-3): (deep, replace(t, warmup=40)),
    }
    cells = []
    for lr in (1e-3, 3e-3):
        for seed in ROUND2_SEEDS:
            cells.append(
                _cell(
                    {"regime": "baseline: 2 blocks", "layerscale": "off", "lr": lr, "seed": seed},
                    replace(deep, n_layer=2),
                    replace(t, lr=lr, seed=seed),
                    monitor="layerscale",
                )
            )
    for (regime, lr), (m, tr) in arms.items():
        for lam in (None, LS_LAMBDA):
            for seed in ROUND2_SEEDS:
                cells.append(
                    _cell(
                        {"regime": regime, "layerscale": "off" if lam is None else lam, "lr": lr, "seed": seed},
                        replace(m, layerscale=lam),
                        replace(tr, lr=lr, seed=seed),
                        monitor="layerscale",
                    )
                )
    ctl = "control: pre-norm, GPT-2 init, warmup"
    base = "baseline: 2 blocks"
    struggling = [k for k in arms if not k[0].startswith("control")]
    decisions: list = []
    for regime, lr in struggling:
        what = f"{regime.split(',')[0]}, lr {lr:g}"
        at = {"regime": regime, "lr": lr}
        decisions.append(
            store.Decision(
                what,
                arm={**at, "layerscale": "off"},
                against={**at, "layerscale": LS_LAMBDA},
                predicted="positive",
                seeds=ROUND2_SEEDS,
            )
        )
        decisions.append(
            store.Decision(
                f"a healthy stack ends below the plain one ({what})",
                arm={**at, "layerscale": "off"},
                against={"regime": ctl, "lr": lr, "layerscale": "off"},
                predicted="positive",
                role="calibration",
                calibrates=what,
                seeds=ROUND2_SEEDS,
            )
        )
        decisions.append(
            store.Decision(
                f"the LayerScale stack ends below 2 blocks ({what})",
                arm={**at, "layerscale": LS_LAMBDA},
                against={"regime": base, "lr": lr, "layerscale": "off"},
                predicted="negative",
                role="control",
                seeds=ROUND2_SEEDS,
            )
        )
    for lr in (1e-3, 3e-3):
        decisions.append(
            store.Decision(
                f"in the healthy recipe, LayerScale within ±0.05 nats of none (lr {lr:g})",
                arm={"regime": ctl, "lr": lr, "layerscale": LS_LAMBDA},
                against={"regime": ctl, "lr": lr, "layerscale": "off"},
                test="equivalence",
                margin=0.05,
                role="control",
                seeds=ROUND2_SEEDS,
            )
        )
        decisions.append(
            store.Decision(
                f"the healthy 24-block stack ends below 2 blocks (lr {lr:g})",
                arm={"regime": ctl, "lr": lr, "layerscale": "off"},
                against={"regime": base, "lr": lr, "layerscale": "off"},
                predicted="negative",
                role="control",
                seeds=ROUND2_SEEDS,
            )
        )
    return store.Grid(
        "ch7_layerscale_round2",
        "Chapter 7's test, round 2: three struggling settings, five fresh seeds, the claim required in each",
        "Declared after the first round had been reviewed, before any of these runs: with lambda0 = 1e-5 a "
        "24-block stack ends below the plain stack in every one of three settings where the plain stack "
        "struggles (post-norm at lr 1e-3 and 3e-3, pre-norm with plain init at 3e-3). Reported beside it: "
        "whether the LayerScale stack ends below a 2-block stack, and whether, in the healthy recipe, "
        "LayerScale ends within 0.05 nats of none, at both learning rates.",
        tuple(cells),
        rule="every",
        kernel_tolerance=CH7_KERNEL_TOLERANCE,
        decisions=tuple(decisions),
    )


REZERO_LEVEL = 3.0  # nats/byte: 0.28 below the unigram entropy of the corpus (3.28)


def app_rezero() -> store.Grid:
    m = replace(BASE, n_layer=24, init="xavier")
    t = replace(BASE_TRAIN, warmup=0)
    arms = {
        "pre-norm": (m, t),
        "post-norm": (replace(m, norm="post"), t),
        "post-norm + warmup": (replace(m, norm="post"), replace(t, warmup=50)),
        "ReZero": (replace(m, norm="none", layerscale=0.0, layerscale_kind="scalar"), t),
    }
    cells = [
        _cell({"arm": arm, "lr": lr, "seed": seed}, mm, replace(tt, lr=lr, seed=seed))
        for lr in (1e-3, 3e-3)
        for arm, (mm, tt) in arms.items()
        for seed in SEEDS
    ]
    cells += [  # the deciding seeds, run after the rule below was fixed
        _cell({"arm": arm, "lr": 3e-3, "seed": seed}, mm, replace(tt, lr=3e-3, seed=seed))
        for arm, (mm, tt) in arms.items()
        for seed in CONFIRM
    ]
    return store.Grid(
        "app_rezero",
        "ReZero vs post-norm and pre-norm at 24 blocks, two learning rates (Bachlechner et al. 2020)",
        f"ReZero brings the training loss below {REZERO_LEVEL} nats/byte in fewer steps than pre-norm, and post-norm "
        "without warmup does not train (the paper: a 12-layer ReZero Transformer reached 1.2 bits/byte on enwik8 "
        "56 % faster than post-norm with warmup). Decided at lr 3e-3: at 1e-3 an alpha that starts at 0 can grow "
        "by at most 1e-3 per step, which handicaps ReZero by construction. An earlier version of this grid asked "
        "for 2.5 nats/byte at one learning rate (1e-3): no arm reached it in 400 steps, so it could not decide "
        "anything; its three seeds stay as exploratory runs.",
        tuple(cells),
        rule="every",
        decisions=(
            store.Decision(
                "lr 3e-3",
                arm={"arm": "ReZero", "lr": 3e-3},
                against={"arm": "pre-norm", "lr": 3e-3},
                field="steps_to_level",
                level=REZERO_LEVEL,
                predicted="negative",
                seeds=CONFIRM,
            ),
            store.Decision(
                f"pre-norm reaches {REZERO_LEVEL} nats/byte within the run (lr 3e-3)",
                arm={"arm": "pre-norm", "lr": 3e-3},
                field="reached_level",
                level=REZERO_LEVEL,
                test="every",
                role="calibration",
                seeds=CONFIRM,
            ),
            store.Decision(
                "post-norm without warmup stays within 0.1 nats of the unigram entropy (lr 3e-3)",
                arm={"arm": "post-norm", "lr": 3e-3},
                field="gain_over_unigram",
                test="level",
                level=0.1,
                predicted="negative",
                role="control",
                seeds=CONFIRM,
            ),
        ),
    )


def app_layerscale_kind() -> store.Grid:
    m = replace(BASE, n_layer=24, init="normal")
    t = replace(BASE_TRAIN, lr=1e-3, warmup=0)
    cells = []
    for kind in ("off", "channel", "scalar"):
        mm = m if kind == "off" else replace(m, layerscale=1e-5, layerscale_kind=kind)
        cells += [
            _cell({"kind": kind, "seed": seed}, mm, replace(t, seed=seed), monitor="layerscale") for seed in SEEDS
        ]
    return store.Grid(
        "app_layerscale_kind",
        "Per-channel vs scalar LayerScale at 24 blocks (lambda0 = 1e-5, CaiT's value at that depth)",
        "A per-channel lambda ends at a lower validation loss than a single scalar per sublayer (Touvron et al. "
        "2021 found the per-channel form better).",
        tuple(cells),
        rule="every",
        declared="after the runs: its three seeds had run, and the comparison had come out, when the "
        "calibration was added",
        decisions=(
            store.Decision(
                "24 blocks, 400 steps",
                arm={"kind": "channel"},
                against={"kind": "scalar"},
                predicted="negative",
            ),
            store.Decision(
                "the lambdas open: their mean |lambda| ends above 0.1 (from 1e-5), so that their form can matter",
                arm={"kind": "channel"},
                field="lambda_mean",
                test="level",
                level=0.1,
                predicted="positive",
                role="calibration",
            ),
        ),
    )


GRIDS = {
    g.__name__: g
    for g in (
        ch1_residual,
        ch2_norm_lr,
        ch3_warmup,
        ch5_activation,
        ch7_layerscale,
        ch7_layerscale_round2,
        app_rezero,
        app_layerscale_kind,
    )
}


def grid(name: str) -> store.Grid:
    if name not in GRIDS:
        raise ValueError(f"no experiment grid named {name!r}; the grids are {sorted(GRIDS)}")
    return GRIDS[name]()


def results(name: str) -> list[dict]:
    """The stored runs of grid ``name`` as tidy rows (label, results and configs in one dict each).

    Refuses (``StoreError``, naming the file) results that are missing, malformed or made by code
    that has changed since; ``run(name)`` recomputes them."""
    g = grid(name)
    return store.rows(store.load(g), g.kernel_tolerance)


def info(name: str) -> dict:
    """The stored file's header: prediction, provenance (torch, device, date, seconds), check cell."""
    blob = store.load(grid(name))
    return {k: v for k, v in blob.items() if k != "cells"}


def provenance(name: str) -> str:
    """One line for a figure built from grid ``name``'s stored results (runs, seeds, torch, date)."""
    return store.describe(store.load(grid(name)))


def run(name: str, workers=None) -> list[dict]:
    """Recompute grid ``name`` (cached cells are reused) and store it; returns its rows."""
    return store.rows(store.run(grid(name), workers))


# ---------------------------------------------------------------------------------------------
# The declared rule applied to the stored runs
# ---------------------------------------------------------------------------------------------
LOSS_LIKE = ("final_val_loss", "final_train_loss", "gain_over_unigram")  # what a change of CPU moves


@dataclass(frozen=True)
class Finding:
    """One declared comparison of a grid, evaluated on its stored runs."""

    decision: store.Decision
    verdict: Verdict  # for a deciding regime: after Holm's correction across the regimes
    measured: str  # the number, short: "+0.26 [+0.18, +0.34]" or "5 of 5 vs 0 of 5"
    seeds: tuple
    raw: Optional[Verdict] = None  # before the correction across regimes
    # The smallest true effect this comparison would show with 80 % power at its seeds' noise
    # (and another CPU's rounding): (t_0.975 + t_0.8) sd / sqrt(n), paired or one-sample t tests only.
    detectable: Optional[float] = None

    @property
    def lost_to_holm(self) -> bool:
        """Decisive on its own, but not once corrected for the number of deciding regimes."""
        return self.raw is not None and self.raw.label != self.verdict.label


@dataclass(frozen=True)
class Evidence:
    """A grid's declared rule and what its stored runs say under it: ``evidence(name)``."""

    name: str
    prediction: str
    rule: str
    findings: tuple
    verdict: Verdict  # the claim's
    seconds: float  # compute time of every stored run of the grid, one core each
    declared: str = "before the runs"  # when the rule was written (store.Grid.declared)

    def role(self, role: str) -> list:
        return [f for f in self.findings if f.decision.role == role]

    def regime(self, what: str) -> Finding:
        hits = [f for f in self.findings if f.decision.what == what]
        if len(hits) != 1:
            raise KeyError(
                f"grid {self.name!r} declares no comparison {what!r}; it has {[f.decision.what for f in self.findings]}"
            )
        return hits[0]

    @property
    def calibrated(self) -> bool:
        return all(f.verdict.label == "confirmed" for f in self.role("calibration"))


def _stat_rows(rs: list, d: store.Decision, match: dict) -> list:
    sel = [r for r in store.pick(rs, **match) if not d.seeds or r["seed"] in d.seeds]
    return [{**r, "_stat": store.statistic(r, d.field, d.level)} for r in sorted(sel, key=lambda r: r["seed"])]


def _fmt(ci: Optional[verdict.Interval]) -> str:
    if ci is None:
        return ""
    if ci.n < 2:
        return f"{ci.mean:+.3g}"
    return f"{ci.mean:+.3g} [{ci.lo:+.3g}, {ci.hi:+.3g}]"


def detectable(values: list, extra_sd: float) -> Optional[float]:
    """(t_0.975 + t_0.8)(n - 1 df) times the standard error: the effect a one-sided test at 2.5 %
    finds four times in five, at the noise the values show (plus ``extra_sd``)."""
    from scipy import stats

    n = len(values)
    if n < 2:
        return None
    m = sum(values) / n
    sd = (sum((x - m) ** 2 for x in values) / (n - 1) + extra_sd**2) ** 0.5
    return float((stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / n**0.5)


def _evaluate(rs: list, d: store.Decision, tol: float) -> tuple:
    """(verdict, measured) of one declared comparison, before any correction across regimes."""
    a = _stat_rows(rs, d, d.arm)
    if not a:
        raise ValueError(f"decision {d.what!r}: no stored run matches {d.arm}")
    b = _stat_rows(rs, d, d.against) if d.against is not None else []
    extra = tol if d.field in LOSS_LIKE else 0.0
    what = d.what
    if d.test in ("fisher", "every"):
        ka = sum(bool(r["_stat"]) for r in a)
        if d.test == "every":
            label = "confirmed" if ka == len(a) else "not reproduced"
            return verdict.Verdict(label, f"{what}: {ka} of {len(a)} runs"), f"{ka} of {len(a)} runs"
        kb = sum(bool(r["_stat"]) for r in b)
        v = verdict.counts(ka, len(a), kb, len(b), what=what, names=("arm", "reference"))
        return v, f"{ka} of {len(a)} vs {kb} of {len(b)}"
    if d.test == "level":
        vals = [r["_stat"] for r in a]
        if any(x is None for x in vals):
            k = sum(x is None for x in vals)
            return verdict.Verdict("inconclusive", f"{what}: {k} of {len(vals)} runs diverged"), f"{k} diverged"
        v = verdict.compare(
            [x - d.level for x in vals], d.predicted, d.margin, what=f"{what}, minus the level", kernel_sd=extra
        )
        ci = verdict.interval(vals)
        return v, _fmt(ci), detectable(vals, extra)
    da = {r["seed"]: r["_stat"] for r in a}
    db = {r["seed"]: r["_stat"] for r in b}
    if set(da) != set(db):
        raise ValueError(f"decision {d.what!r}: the arms do not share their seeds: {sorted(da)} vs {sorted(db)}")
    if any(da[s] is None or db[s] is None for s in da):
        k = sum(da[s] is None or db[s] is None for s in da)
        return verdict.Verdict("inconclusive", f"{what}: {k} of {len(da)} pairs have a diverged run"), f"{k} diverged"
    diffs = [da[s] - db[s] for s in sorted(da)]
    kernel = 2**0.5 * extra  # a difference of two runs, each moved by another CPU
    if d.test == "equivalence":
        v = verdict.equivalent(diffs, d.margin, what=what, kernel_sd=kernel)
    else:
        v = verdict.compare(diffs, d.predicted, d.margin, what=what, kernel_sd=kernel)
        return v, _fmt(v.interval), detectable(diffs, kernel)
    return v, _fmt(v.interval), None


def evidence(name: str) -> Evidence:
    """Grid ``name``'s declared rule applied to its stored runs: every comparison's verdict, the
    deciding regimes corrected for their number (Holm), and the claim's verdict.

    A deciding regime whose calibration (``Decision.calibrates``, or a calibration for the whole
    grid) is not confirmed is *not testable at this scale*: the criterion could not be passed even
    by a known-good arm. The claim is decided on the other deciding regimes by ``verdict.decide``
    with the grid's rule; with none left it is not testable."""
    g = grid(name)
    blob = store.load(g)
    seconds = blob.get("compute_seconds") or sum(c["result"].get("seconds", 0.0) for c in blob["cells"])
    return evaluate(g, store.rows(blob), float(seconds))


def evaluate(g: store.Grid, rs: list, seconds: float = 0.0) -> Evidence:
    """``evidence`` on given rows (stored runs, or made-up ones in the tests)."""
    raw = {d.what: (_evaluate(rs, d, g.kernel_tolerance) + (None,))[:3] for d in g.decisions}
    failed = [d for d in g.decisions if d.role == "calibration" and raw[d.what][0].label != "confirmed"]
    deciding = [d for d in g.decisions if d.role == "decides"]
    untestable = {d.what for d in deciding if any(c.calibrates in ("", d.what) for c in failed)}
    tested = {d.what: raw[d.what][0] for d in deciding if d.what not in untestable}
    if tested:
        claim, corrected = verdict.decide(tested, g.rule)
        if untestable:
            claim = verdict.Verdict(
                claim.label, claim.reason + "; not testable at this scale in " + ", ".join(sorted(untestable))
            )
    else:
        corrected = {}
        claim = verdict.not_testable(
            "not testable at this scale: the calibration failed ("
            + "; ".join(raw[c.what][0].reason for c in failed)
            + ")"
        )
    findings = []
    for d in g.decisions:
        v, measured, mde = raw[d.what]
        if d.what in untestable:
            v = verdict.Verdict("not testable", v.reason + "; its calibration failed", v.interval, v.p, v.p_opposite)
        elif d.what in corrected:
            v = corrected[d.what]
        seeds = tuple(d.seeds) or tuple(sorted({r["seed"] for r in store.pick(rs, **d.arm)}))
        findings.append(Finding(d, v, measured, seeds, raw[d.what][0], mde))
    return Evidence(g.name, g.prediction, g.rule, tuple(findings), claim, seconds, g.declared)


def status(name: str) -> str:
    try:
        store.load(grid(name))
        return "current"
    except store.StoreError as e:
        return "stale" if "other code" in str(e) else "missing or invalid"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea.experiments", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "names",
        nargs="*",
        help="grids to run (default: every grid not current, and the explorer's "
        f"shipped measurements, and the trained model); any of {sorted(GRIDS) + ['explorer', 'trained']}",
    )
    p.add_argument("--list", action="store_true", help="list the grids and their status, run nothing")
    p.add_argument("--force", action="store_true", help="run even grids whose results are current")
    p.add_argument("--workers", type=int, help="runs at a time (default: 2, or $ANDREA_WORKERS)")
    a = p.parse_args(argv)
    try:
        names = [n for n in a.names if n not in ("explorer", "trained")] if a.names else sorted(GRIDS)
        for n in names:
            grid(n)
        if a.workers is not None and a.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {a.workers}")
    except ValueError as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    if a.list:
        total = 0.0
        for n in names:
            g = grid(n)
            st = status(n)
            cpu = info(n).get("compute_seconds", 0.0) if st == "current" else 0.0
            total += cpu
            when = f"{cpu / 3600:5.2f} core-h" if cpu else "     -      "
            print(f"{n:22s} {len(g.cells):3d} runs  {st:18s} {when}  {g.title}")
        print(f"stored runs: {total / 3600:.2f} core-hours, about {total / 3600 / workers():.1f} h from nothing here")
        return 0
    t0 = time.perf_counter()
    ran = []
    for n in names:
        if not a.force and status(n) == "current":
            print(f"{n}: current, skipped")
            continue
        t1 = time.perf_counter()
        run(n, a.workers)
        ran.append(n)
        print(
            f"{n}: {len(grid(n).cells)} runs stored in {store.path(n)} ({time.perf_counter() - t1:.0f} s)", flush=True
        )
    if not a.names or "trained" in a.names:
        from .trained import model as trained

        if a.force or trained.status() != "current":
            t1 = time.perf_counter()
            blob = trained.retrain()
            took = time.perf_counter() - t1
            print(
                f"trained: {blob['tokens_seen']:,} tokens at {blob['tokens_per_s']:,.0f} tokens/s, validation loss "
                f"{blob['history']['val_loss'][-1]:.3f} nats; stored in {trained.RESULTS} ({took:.0f} s)"
            )
        else:
            print("trained: current, skipped")
    if not a.names or "explorer" in a.names:
        from . import explorer

        if a.force or explorer.shipped().problem:
            t1 = time.perf_counter()
            from .progress import bar

            n = len(set(explorer.grid_settings()) | set(explorer.reference_settings()))
            pb = bar(n, "explorer: shipped settings", unit="setting")
            explorer.build_shipped(lambda i, n: pb.update(1))
            pb.close()
            print(
                f"explorer: shipped measurements stored in {store.path(explorer.SHIPPED)} "
                f"({time.perf_counter() - t1:.0f} s)"
            )
        else:
            print("explorer: current, skipped")
    print(f"experiments: {len(ran)} grid(s) run in {time.perf_counter() - t0:.0f} s in total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
