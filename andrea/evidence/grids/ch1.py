"""Chapter 1's grid: residual vs residual-free stacks, trained at depths 1 to 24."""

from __future__ import annotations

from dataclasses import replace

from .. import store
from .base import BASE, BASE_TRAIN, CONFIRM, SEEDS, _cell


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
