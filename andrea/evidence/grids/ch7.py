"""Chapter 7's grids: LayerScale at 24 blocks, and its second round on fresh seeds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import store
from .base import BASE, BASE_TRAIN, _cell, plateau_decisions

CONFIRM_CH7 = (0, 1, 2, 3, 4)  # every run of this grid is new (24 blocks, 800 steps): no seed was seen
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
        decisions=tuple(decisions),
    )


# Round 3 (issue 49, item 6): round 2's pre-norm setting was decided by five seeds whose paired spread was
# 0.16 nats on this machine (+0.171 [-0.028, +0.371]) and 0.09 on the emulated CPU (+0.129 [+0.023, +0.235]):
# its calibration, which shares the plain arm, passed on one machine only, so the setting read "not testable"
# here and "confirmed" there. At that spread, twenty seeds detect about 0.11 nats (80 % power, two-sided 5 %).
ROUND3_SEEDS = tuple(range(30, 50))  # twenty, fresh: chapter 7's grids ran seeds 0-24


def ch7_layerscale_round3() -> store.Grid:
    """Declared before its runs: round 2's pre-norm setting alone (24 pre-norm blocks of width 32, plain
    normal(0, 0.02) init, no warmup, lr 3e-3, 800 steps), on twenty fresh seeds, with its calibration (the
    healthy recipe at lr 3e-3 ends below the plain stack) on the same seeds."""
    deep = replace(BASE, d_model=32, n_head=2, n_layer=24)
    t = replace(BASE_TRAIN, steps=800, seq_len=32, warmup=0, eval_every=100, lr=3e-3)
    plain, ctl = "pre-norm, plain init, no warmup", "control: pre-norm, GPT-2 init, warmup"
    arms = {  # (regime, LayerScale): (model, train)
        (plain, None): (replace(deep, init="normal"), t),
        (plain, LS_LAMBDA): (replace(deep, init="normal", layerscale=LS_LAMBDA), t),
        (ctl, None): (deep, replace(t, warmup=40)),
    }
    cells = [
        _cell(
            {"regime": regime, "layerscale": "off" if lam is None else lam, "lr": 3e-3, "seed": seed},
            m,
            replace(tr, seed=seed),
            monitor="layerscale",
        )
        for (regime, lam), (m, tr) in arms.items()
        for seed in ROUND3_SEEDS
    ]
    what = "pre-norm, lr 0.003"
    at = {"regime": plain, "lr": 3e-3}
    decisions = (
        store.Decision(
            what,
            arm={**at, "layerscale": "off"},
            against={**at, "layerscale": LS_LAMBDA},
            predicted="positive",
            seeds=ROUND3_SEEDS,
        ),
        store.Decision(
            f"a healthy stack ends below the plain one ({what})",
            arm={**at, "layerscale": "off"},
            against={"regime": ctl, "lr": 3e-3, "layerscale": "off"},
            predicted="positive",
            role="calibration",
            calibrates=what,
            seeds=ROUND3_SEEDS,
        ),
        store.Decision(
            f"the LayerScale stack ends below the healthy one ({what})",
            arm={**at, "layerscale": LS_LAMBDA},
            against={"regime": ctl, "lr": 3e-3, "layerscale": "off"},
            predicted="negative",
            role="control",
            seeds=ROUND3_SEEDS,
        ),
    )
    return store.Grid(
        "ch7_layerscale_round3",
        "Chapter 7's test, round 3: round 2's pre-norm setting alone, twenty fresh seeds",
        "Declared before any of these runs, after the review of issue 49. In the setting where round 2's five "
        "seeds were too few (24 pre-norm blocks, plain init, no warmup, lr 3e-3, 800 steps), a stack with "
        f"LayerScale (lambda0 = {LS_LAMBDA:g}) ends at a lower validation loss than the plain stack (paired t "
        "test over seeds 30-49, one-sided at 2.5 % each way: above 0 confirms, below 0 refutes, else "
        "inconclusive), decided "
        "only if the healthy recipe (GPT-2 init, 40-step warmup) ends below the plain stack on the same seeds "
        "(its calibration). Reported beside it: whether the LayerScale stack ends below the healthy one.",
        tuple(cells),
        rule="every",
        decisions=decisions,
    )


def ch7_deep_80() -> store.Grid:
    """The source's depth: 80 blocks of width 32 for 800 steps, against shallow stacks of the same recipe
    that train in this budget, five seeds each, with the plain post-norm recipe and with ANDREA's."""
    deep = replace(BASE, d_model=32, n_head=2, n_layer=80)
    t = replace(BASE_TRAIN, steps=800, seq_len=32, warmup=0, eval_every=100)
    post, healthy = "plain post-norm, Xavier init, no warmup", "ANDREA's recipe: pre-norm, GPT-2 init, warmup"
    arms = {  # (regime, blocks): (model, train)
        (post, 80): (replace(deep, norm="post", init="xavier"), t),
        (post, 6): (replace(deep, norm="post", init="xavier", n_layer=6), t),
        (healthy, 80): (deep, replace(t, warmup=40)),
        (healthy, 2): (replace(deep, n_layer=2), replace(t, warmup=40)),
    }
    cells = [
        _cell({"regime": regime, "blocks": n, "lr": 1e-3, "seed": seed}, m, replace(tr, lr=1e-3, seed=seed))
        for (regime, n), (m, tr) in arms.items()
        for seed in CONFIRM_CH7
    ]
    # a run fails if it diverges or ends less than 0.3 nats below the unigram entropy (runstats "failed")
    failed: dict[str, Any] = {"field": "failed", "level": 0.3, "seeds": CONFIRM_CH7}
    return store.Grid(
        "ch7_deep_80",
        "80-block stacks (width 32) trained from scratch, against shallow stacks of the same recipe",
        "Declared before any of these runs, after a review. The source says a transformer of about 80 layers "
        "trained from scratch does not converge. At width 32, 800 steps and lr 1e-3, a run fails if it "
        "diverges or ends less than 0.3 nats below the unigram entropy. Predicted: 80-block stacks fail more "
        "often than shallow stacks of the same recipe that train in this budget, with the plain post-norm "
        "recipe (Xavier init, no warmup; against 6 blocks) and, if the claim holds for any recipe, with "
        "ANDREA's (pre-norm, GPT-2 init, warmup; against 2 blocks). Calibration: every 6-block post-norm run "
        "trains, or the post-norm regime decides nothing. Reported beside: whether ANDREA's 80-block stack "
        "ends more than 0.3 nats below the unigram entropy.",
        tuple(cells),
        rule="every",
        decisions=(
            store.Decision(
                "6 post-norm blocks train in this budget (every run learns)",
                arm={"regime": post, "blocks": 6},
                field="learned",
                level=0.3,
                test="every",
                role="calibration",
                seeds=CONFIRM_CH7,
                calibrates=f"{post}: 80 blocks fail more often than 6",
            ),
            store.Decision(
                f"{post}: 80 blocks fail more often than 6",
                arm={"regime": post, "blocks": 80},
                against={"regime": post, "blocks": 6},
                test="fisher",
                **failed,
            ),
            store.Decision(
                f"{healthy}: 80 blocks fail more often than 2",
                arm={"regime": healthy, "blocks": 80},
                against={"regime": healthy, "blocks": 2},
                test="fisher",
                **failed,
            ),
            store.Decision(
                "ANDREA's 80-block stack ends more than 0.3 nats below the unigram entropy",
                arm={"regime": healthy, "blocks": 80},
                field="gain_over_unigram",
                test="level",
                level=0.3,
                predicted="positive",
                role="control",
                seeds=CONFIRM_CH7,
            ),
        ),
    )


# The "train it yourself" panel's defaults (andrea.web.training.PANELS["ch7"]): a 12-block post-norm stack
# of width 32 (Xavier init, no warmup, lr 3e-3: the chapter's struggling setting), 300 steps on batches of 8
# sequences of 32 bytes, without LayerScale (A) and with it, lambda_0 = 1e-4 (B). Chosen after an
# exploration on seeds 0-2: at lr 1e-3 both stacks ended near the plateau (plain minus LayerScale +0.05 to
# +0.07 nats); at lr 3e-3 the plain stack stayed on it and LayerScale's ended 0.25 to 0.33 nats under it
# (+0.24 to +0.29 nats apart; +0.57 to +0.64 at 600 steps, twice the reader's wait). Seeds 0-2 at the chosen
# setting stay in the grid and decide nothing.
PANEL_SEEDS = (3, 4, 5, 6, 7)
PANEL_LAMBDA = 1e-4


def ch7_panel() -> store.Grid:
    """Declared before its deciding runs: whether chapter 7's training panel shows, in torch, the effect
    the chapter reads from it (the plain deep post-norm stack ending above the same stack with LayerScale)."""
    from ...measure.runstats import PLATEAU_GAP

    model = replace(BASE, d_model=32, n_head=2, n_layer=12, context_length=32, norm="post", init="xavier")
    train = replace(BASE_TRAIN, steps=300, batch_size=8, seq_len=32, lr=3e-3, warmup=0)
    cells = [
        _cell(
            {"layerscale": "off" if ls is None else ls, "seed": seed},
            replace(model, layerscale=ls),
            replace(train, seed=seed),
        )
        for ls in (None, PANEL_LAMBDA)
        for seed in (0, 1, 2, *PANEL_SEEDS)
    ]
    regime = "12 blocks, post-norm, Xavier init, lr 0.003, 300 steps"
    return store.Grid(
        "ch7_panel",
        "Chapter 7's training panel: its defaults trained in torch over five fresh seeds",
        (
            "Declared before its deciding runs, after an exploration on seeds 0-2. At the panel's defaults (12 "
            "post-norm blocks of width 32, Xavier init, no warmup, lr 3e-3, 300 steps on batches of 8 sequences "
            f"of 32 bytes), the plain stack ends at a higher validation loss than the same stack with LayerScale "
            f"(lambda_0 = {PANEL_LAMBDA:g}) (paired t test over seeds 3-7), decided only if every LayerScale run "
            f"ends at least {PLATEAU_GAP:g} nats under the unigram entropy (its calibration). Reported beside it: "
            "how many runs end below the plateau with and without LayerScale."
        ),
        tuple(cells),
        rule="some",
        decisions=tuple(
            plateau_decisions(
                regime,
                {"layerscale": PANEL_LAMBDA},
                {"layerscale": "off"},
                PANEL_SEEDS,
                calibration="with LayerScale, the 12-block stack ends below the plateau (every run)",
                treatment="with LayerScale",
            )
        ),
    )


# ch7_deep_80 again, with a test that can refute the claim per recipe. Fresh seeds: the chapter's grids ran 0-9.
DEEP_SEEDS = tuple(range(10, 17))  # seven: 7 of 7 (binomial p 0.008) stays decisive after Holm over two recipes
SWEEP = (6, 12, 24, 48)  # plain post-norm depths beside 80: where the plateau begins (described, not tested)


def ch7_deep_80_round2() -> store.Grid:
    """Declared before its runs, after the review of issue 49: ch7_deep_80 counted failures against a shallow
    stack (Fisher's exact test, one-sided), so that 0 of 5 against 0 of 5, the best case for refuting the
    claim, was "inconclusive"; all five of its 80-block runs in ANDREA's recipe learned. Here each recipe's
    80-block arm is read on its own: the claim ("~80 layers trained from scratch fail to converge") predicts
    that more than half of them fail (diverge, or end less than 0.3 nats under the unigram entropy), and
    fewer than half failing refutes it for that recipe (exact binomial test against one half, one-sided at
    2.5 % each way, Holm over the two recipes: with seven seeds, 7 of 7 failing confirms, 7 of 7 learning
    refutes). Calibrations: a shallow stack of each recipe (6 post-norm blocks, 2 of ANDREA's) learns in
    more than half of its runs under the same reading. Beside them, plain post-norm at 12, 24 and 48 blocks on
    the same seeds, to see where the plateau begins: run on this machine only and described, not tested
    (ch7_layerscale's plain post-norm stack already struggled at 24 blocks)."""
    deep = replace(BASE, d_model=32, n_head=2, n_layer=80)
    t = replace(BASE_TRAIN, steps=800, seq_len=32, warmup=0, eval_every=100, lr=1e-3)
    post, healthy = "plain post-norm, Xavier init, no warmup", "ANDREA's recipe: pre-norm, GPT-2 init, warmup"
    arms = {(post, n): (replace(deep, norm="post", init="xavier", n_layer=n), t) for n in (*SWEEP, 80)}
    arms[(healthy, 80)] = (deep, replace(t, warmup=40))
    arms[(healthy, 2)] = (replace(deep, n_layer=2), replace(t, warmup=40))
    cells = [
        _cell({"regime": regime, "blocks": n, "lr": 1e-3, "seed": seed}, m, replace(tr, seed=seed))
        for (regime, n), (m, tr) in arms.items()
        for seed in DEEP_SEEDS
    ]
    failed: dict[str, Any] = {"field": "failed", "level": 0.3, "seeds": DEEP_SEEDS, "test": "majority"}
    learned: dict[str, Any] = {**failed, "field": "learned"}
    decisions: list = []
    for regime, shallow in ((post, 6), (healthy, 2)):
        what = f"{regime}: 80 blocks fail"
        decisions += [
            store.Decision(what, arm={"regime": regime, "blocks": 80}, predicted="positive", **failed),
            store.Decision(
                f"{regime}: {shallow} blocks learn (more than half of the runs)",
                arm={"regime": regime, "blocks": shallow},
                predicted="positive",
                role="calibration",
                calibrates=what,
                **learned,
            ),
            store.Decision(
                f"{regime}: 80 blocks fail more often than {shallow}",
                arm={"regime": regime, "blocks": 80},
                against={"regime": regime, "blocks": shallow},
                field="failed",
                level=0.3,
                test="fisher",
                predicted="positive",
                role="control",
                seeds=DEEP_SEEDS,
            ),
        ]
    return store.Grid(
        "ch7_deep_80_round2",
        "80-block stacks (width 32) from scratch, each recipe read on its own; plain post-norm at 6 to 48 blocks",
        "Declared before any of these runs, after the review of issue 49. The source says a transformer of about "
        "80 layers trained from scratch does not converge. At width 32, 800 steps and lr 1e-3, a run fails if it "
        "diverges or ends less than 0.3 nats below the unigram entropy. Predicted, for each recipe (plain "
        "post-norm: Xavier init, no warmup; ANDREA's: pre-norm, GPT-2 init, warmup), that more than half of its "
        "80-block runs fail; fewer than half failing refutes the claim for that recipe (exact binomial test "
        "against one half, one-sided at 2.5 % each way, Holm over the two recipes). Calibration, per recipe: a "
        "shallow stack (6 post-norm blocks; 2 of ANDREA's) learns in more than half of its runs. Reported beside: "
        "80 blocks against the shallow stack (Fisher's exact test), and plain post-norm at 12, 24 and 48 blocks "
        "(described on this machine's runs, not tested).",
        tuple(cells),
        rule="every",
        rule_modules=("evidence.twoway",),
        decisions=tuple(decisions),
    )


# The panel's defaults, round 2 (issue 47: "the panels' defaults show the effect within 60 s on a loaded 2-core
# machine"): ch7_panel's 12 blocks took the reader's browser about 60 s to show the effect and about two minutes
# to finish, and `make bench` measured 137 s to the effect on this 2-core machine at a load average of 21. Half
# the depth halves the page's step. Chosen after an exploration on seeds 0-2 (ch7_panel's exploration seeds), 300
# steps at lr 3e-3: at 6 and at 8 blocks the plain stack stayed on the plateau (0.06 nats under the unigram
# entropy at most) and LayerScale's ended 0.26 to 0.38 nats under it (+0.27 to +0.41 apart), and the mean curves
# were 0.1 nats apart from step 112 on (ch7_panel's 12 blocks: step 157 on the same seeds). At 200 steps the gap
# came later (step 187 on seed 0, 8 blocks); at lr 5e-3 and 1e-2 (200 steps, seed 0) LayerScale's stack ended
# less than 0.1 nats under the unigram entropy too; with 4 sequences a step, or sequences of 16 bytes, the gap
# came later (steps 268 and 217 on seed 0, 12 blocks). Seeds 0-2 at the chosen setting stay in the grid and
# decide nothing; the deciding seeds, 20-24, were used by no chapter 7 grid.
PANEL2_DEPTH = 6
PANEL2_SEEDS = (20, 21, 22, 23, 24)


def ch7_panel_round2() -> store.Grid:
    """Declared before its runs: whether chapter 7's training panel, at its faster defaults (6 post-norm blocks
    instead of ch7_panel's 12), shows in torch the effect the chapter reads from it (the plain post-norm stack
    ending above the same stack with LayerScale)."""
    from ...measure.runstats import PLATEAU_GAP

    n = PANEL2_DEPTH
    model = replace(BASE, d_model=32, n_head=2, n_layer=n, context_length=32, norm="post", init="xavier")
    train = replace(BASE_TRAIN, steps=300, batch_size=8, seq_len=32, lr=3e-3, warmup=0)
    cells = [
        _cell(
            {"layerscale": "off" if ls is None else ls, "seed": seed},
            replace(model, layerscale=ls),
            replace(train, seed=seed),
        )
        for ls in (None, PANEL_LAMBDA)
        for seed in (0, 1, 2, *PANEL2_SEEDS)
    ]
    regime = f"{n} blocks, post-norm, Xavier init, lr 0.003, 300 steps"
    return store.Grid(
        "ch7_panel_round2",
        f"Chapter 7's training panel, round 2: its faster defaults ({n} blocks) trained in torch over five fresh seeds",
        (
            "Declared before any of its runs, after an exploration on seeds 0-2. At the panel's defaults, round 2 "
            f"({n} post-norm blocks of width 32, Xavier init, no warmup, lr 3e-3, 300 steps on batches of 8 "
            "sequences of 32 bytes), the plain stack ends at a higher validation loss than the same stack with "
            f"LayerScale (lambda_0 = {PANEL_LAMBDA:g}) (paired t test over seeds 20-24), decided only if every "
            f"LayerScale run ends at least {PLATEAU_GAP:g} nats under the unigram entropy (its calibration). "
            "Reported beside it: how many runs end below the plateau with and without LayerScale."
        ),
        tuple(cells),
        rule="some",
        decisions=tuple(
            plateau_decisions(
                regime,
                {"layerscale": PANEL_LAMBDA},
                {"layerscale": "off"},
                PANEL2_SEEDS,
                calibration=f"with LayerScale, the {n}-block stack ends below the plateau (every run)",
                treatment="with LayerScale",
            )
        ),
    )
