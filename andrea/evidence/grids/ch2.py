"""Chapter 2's grid: pre-norm vs no normalisation at three learning rates, with and without clipping."""

from __future__ import annotations

from dataclasses import replace

from .. import store
from .base import BASE, BASE_TRAIN, CONFIRM, SEEDS, _cell


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
