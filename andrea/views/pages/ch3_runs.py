"""Chapter 3's measurements, read for its lesson and its evidence page: no words here, only numbers and verdicts.

* at initialisation: both wirings of one 24-block model in GPT-2's and Xavier's initialisation
  (``at_init``), and whether post-norm's early layers get the larger gradients (``early_explode``);
* the first step's amplification over depth (``amplification``);
* the exploration of grid ``ch3_warmup`` (seeds 0-5: ``Exploration``);
* the declared warmup tests: ``ch3_warmup`` on its fresh seeds (``Round1``), ``ch3_warmup_round2``
  (``Round2``) and ``ch3_warmup_round3``, both wirings in matched settings (``Round3``), which decides
  whether pre-norm needs no warmup (``pre_overall``).

The computations are the ones the chapter ran in its own cells before issue 47 moved them here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property, lru_cache

import numpy as np

from ...evidence import evaluation, store, verdict
from ...evidence.grids import ch3 as grids
from ...evidence.grids.base import BELOW_PLATEAU
from ...measure import analysis

INITS = {"GPT-2 init": "gpt2", "Xavier init": "xavier"}  # the chapter's two initialisations, by name
DEPTH, WIDTH = 24, 128  # the model measured at initialisation
AMP_DEPTHS = (6, 12, 24, 48)  # the amplification sweep: depths, seeds, and its four arms
AMP_SEEDS = (0, 1, 2)
AMP_VARIANTS = {
    "pre-norm, Xavier": {"norm": "pre", "init": "xavier"},
    "post-norm, Xavier": {"norm": "post", "init": "xavier"},
    "pre-norm, GPT-2": {"norm": "pre"},
    "post-norm, GPT-2": {"norm": "post"},
}
EQUIVALENCE_MARGIN = 0.05  # nats: pre-norm "the same" with and without warmup (the exploration's reading)


# --- at initialisation ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def at_init() -> dict:
    """{init name: {"pre": report, "post": report}}: ``analysis.compare_norms`` at 24 blocks, width 128."""
    return {name: analysis.compare_norms(depth=DEPTH, d_model=WIDTH, init=init) for name, init in INITS.items()}


def first_last(report) -> float:
    """The first block's MLP weight gradient over the last block's."""
    w = analysis.mlp_weight_grads(report)
    return float(w[0] / w[-1])


def last_ratio(res: dict) -> float:
    """Post-norm's last-block MLP weight gradient over pre-norm's."""
    return float(analysis.mlp_weight_grads(res["post"])[-1] / analysis.mlp_weight_grads(res["pre"])[-1])


def post_act_dev(res: dict) -> float:
    """The largest deviation of post-norm's stream RMS from 1, after the first boundary."""
    return float(np.abs(res["post"].act_rms[1:] - 1).max())


def pre_growth(res: dict) -> float:
    """How much pre-norm's stream RMS grows from the embeddings to the last block."""
    r = res["pre"]
    return float(r.act_rms[-1] / r.act_rms[0])


def early_explode(measured: dict | None = None) -> dict:
    """Per initialisation: does post-norm's first/last block gradient ratio exceed pre-norm's? (one
    exact measurement each; the source predicts it does)."""
    measured = measured or at_init()
    return {
        name: verdict.compare(
            [np.log(first_last(res["post"]) / first_last(res["pre"]))],
            "positive",
            exact=True,
            what="log(post-norm's first/last block gradient ratio over pre-norm's)",
        )
        for name, res in measured.items()
    }


# --- the first step's amplification -----------------------------------------------------------------------
AMP_DECIDING = (6, 48)  # the depths the amplification's verdict reads (the shallowest and the deepest)


@lru_cache(maxsize=1)
def amplification_runs() -> tuple:
    """``analysis.output_change_sweep`` over the four arms at the depths the verdict reads, seeds 0-2 (rows):
    the lesson's sweep at those depths, the same numbers (each row is measured on its own)."""
    return tuple(analysis.output_change_sweep(list(AMP_DECIDING), AMP_VARIANTS, seeds=AMP_SEEDS))


def changes(rows, variant: str, depth: int) -> list:
    return [r["change"] for r in rows if r["variant"] == variant and r["depth"] == depth]


def amplification(rows=None) -> tuple:
    """(the claim's verdict, {regime: verdict}): post-norm's output moves more than pre-norm's after one
    small Adam step, log(post/pre) paired by seed, at 6 and 48 blocks in each initialisation."""
    rows = rows if rows is not None else amplification_runs()
    amp = {}
    for init in ("Xavier", "GPT-2"):
        for d in AMP_DECIDING:
            amp[f"{init} init, {d} blocks"] = verdict.compare(
                [
                    np.log(a / b)
                    for a, b in zip(changes(rows, f"post-norm, {init}", d), changes(rows, f"pre-norm, {init}", d))
                ],
                "positive",
                what=f"log(post/pre) at {d} blocks, {init} init",
            )
    return verdict.decide(amp)


def amp_ratio(rows, init: str, depth: int = 48) -> float:
    """Post-norm's mean output change over pre-norm's, at ``depth`` blocks in ``init`` ("Xavier", "GPT-2")."""
    post, pre = changes(rows, f"post-norm, {init}", depth), changes(rows, f"pre-norm, {init}", depth)
    return float(np.mean(post) / np.mean(pre))


# --- the exploration (grid ch3_warmup, seeds 0-5) ----------------------------------------------------------
def on_plateau(r: dict) -> bool:
    """A run *ends on* the plateau: its final validation loss within 0.05 nats of the unigram entropy."""
    return r["final_val_loss"] is not None and r["final_val_loss"] > r["unigram_ce"] - 0.05


def escape(r: dict):
    """The first step 0.1 nats below the plateau (its 10-step mean training loss; None: never)."""
    return analysis.first_step_at(r["loss"], r["steps"], r["unigram_ce"] - 0.1)


class Exploration:
    """The exploration of grid ``ch3_warmup``: 2 initialisations x 4 learning rates x 2 wirings x 2 warmups,
    seeds 0-5 (the runs the verdict is not decided on)."""

    def __init__(self):
        self.runs = evaluation.exploration("ch3_warmup")
        self.lrs = sorted({r["lr"] for r in self.runs})
        self.warmups = sorted({r["warmup"] for r in self.runs})
        self.warmup = self.warmups[-1]

    def part(self, norm, init, lr, w) -> list:
        return sorted(store.pick(self.runs, norm=norm, init=init, lr=lr, warmup=w), key=lambda r: r["seed"])

    def warmup_gain(self, norm, init, lr) -> list:
        """Per seed: final loss without warmup minus with warmup (positive: warmup helped)."""
        return store.paired(
            self.runs,
            "final_val_loss",
            {"norm": norm, "init": init, "lr": lr, "warmup": self.warmup},
            {"norm": norm, "init": init, "lr": lr, "warmup": 0},
        )

    def settings(self):
        """(setting name, init name, init, lr) for each of the eight settings, GPT-2's first."""
        return [(f"{name}, lr {lr:g}", name, init, lr) for name, init in INITS.items() for lr in self.lrs]

    @cached_property
    def post_needs(self) -> dict:
        out = {}
        for key, _, init, lr in self.settings():
            nw, w = self.part("post", init, lr, 0), self.part("post", init, lr, self.warmup)
            stuck_nw, stuck_w = sum(escape(r) is None for r in nw), sum(escape(r) is None for r in w)
            if stuck_nw == len(nw) and stuck_w == len(w):
                out[key] = verdict.Verdict(
                    "inconclusive", f"{key}: every run stays on the plateau, with or without warmup"
                )
            else:
                out[key] = verdict.compare(
                    self.warmup_gain("post", init, lr), "positive", what=f"post-norm's gain from warmup ({key})"
                )
        return out

    @cached_property
    def escapes(self) -> dict:
        """{(init name, lr): (left with warmup, runs with warmup, left without, runs without)} for post-norm."""
        out = {}
        for _, name, init, lr in self.settings():
            nw, w = self.part("post", init, lr, 0), self.part("post", init, lr, self.warmup)
            out[name, lr] = (
                sum(escape(r) is not None for r in w),
                len(w),
                sum(escape(r) is not None for r in nw),
                len(nw),
            )
        return out

    @cached_property
    def pre_same(self) -> dict:
        return {
            key: verdict.equivalent(
                self.warmup_gain("pre", init, lr), EQUIVALENCE_MARGIN, what=f"pre-norm's gain from warmup ({key})"
            )
            for key, _, init, lr in self.settings()
        }

    @cached_property
    def gains_pre(self) -> dict:
        return {(name, lr): float(np.mean(self.warmup_gain("pre", init, lr))) for _, name, init, lr in self.settings()}

    def worst_pre(self) -> tuple:
        """(init name, lr) where warmup helped pre-norm most on average."""
        gains = self.gains_pre
        return max(gains, key=lambda k: gains[k])

    def mean_loss(self, norm, init, lr, w) -> float:
        v = [
            x for x in store.values(self.runs, "final_val_loss", norm=norm, init=init, lr=lr, warmup=w) if x is not None
        ]
        return float(np.mean(v)) if v else float("nan")

    def best(self, norm: str) -> float:
        """The lowest mean final loss of ``norm`` over every setting."""
        return min(self.mean_loss(norm, i, lr, w) for i in INITS.values() for lr in self.lrs for w in self.warmups)

    def of(self, norm: str) -> list:
        return [r for r in self.runs if r["norm"] == norm]

    def bad(self, norm: str) -> int:
        """Runs of ``norm`` that diverged or ended on the plateau."""
        return sum(r["diverged"] or on_plateau(r) for r in self.of(norm))

    def n_settings(self) -> int:
        return len({(r["init"], r["lr"], r["warmup"]) for r in self.of("pre")})

    def full_seeds(self) -> list:
        pre = self.of("pre")
        return sorted(s for s in {r["seed"] for r in self.runs} if len(store.pick(pre, seed=s)) == self.n_settings())

    def plateau(self) -> list:
        return [r for r in self.runs if on_plateau(r)]

    def on_plateau_at(self, lr, norm, w=None) -> tuple:
        """(runs that end on the plateau, runs) at ``lr`` for ``norm`` (``w``: that warmup only)."""
        sel = [r for r in self.runs if r["lr"] == lr and r["norm"] == norm and (w is None or r["warmup"] == w)]
        return sum(on_plateau(r) for r in sel), len(sel)

    def unigram(self) -> float:
        return float(self.runs[0]["unigram_ce"])


@lru_cache(maxsize=1)
def exploration() -> Exploration:
    return Exploration()


# --- the declared warmup tests ------------------------------------------------------------------------------
class Round1:
    """Grid ``ch3_warmup``'s declared rule on its fresh seeds (6-10): 400 steps, Xavier init, lr 1e-3 and 2e-3."""

    def __init__(self):
        self.ev = evaluation.evidence("ch3_warmup")
        self.all_runs = evaluation.results("ch3_warmup")
        self.fresh = set(self.ev.role("decides")[0].seeds)
        self.warmup = self.ev.role("decides")[0].decision.against["warmup"]
        self.calibration = self.ev.role("calibration")[0]
        self.control = self.ev.role("control")[0]

    def warmed(self) -> dict:
        """{lr: the warmed post-norm runs on the fresh seeds}."""
        out = {}
        for f in self.ev.role("decides"):
            rs = store.pick(self.all_runs, **f.decision.against)
            out[f.decision.arm["lr"]] = [r for r in rs if r["seed"] in self.fresh]
        return out

    def figure_runs(self) -> list:
        """The deciding runs for the figure: post-norm with and without warmup, pre-norm without."""

        def arm_name(r):
            if r["norm"] == "pre":
                return "pre-norm, no warmup"
            return "post-norm, " + ("warmup" if r["warmup"] else "no warmup")

        order = ["post-norm, no warmup", "post-norm, warmup", "pre-norm, no warmup"]
        rows = [
            dict(r, arm=arm_name(r), panel=f"peak lr {r['lr']:g}")
            for r in self.all_runs
            if r["seed"] in self.fresh and not (r["norm"] == "pre" and r["warmup"])
        ]
        return sorted(rows, key=lambda r: order.index(r["arm"]))


class Round2:
    """Grid ``ch3_warmup_round2``: 400 and 1600 steps, warmup a quarter of each, seeds 11-15."""

    def __init__(self):
        self.ev = evaluation.evidence("ch3_warmup_round2")
        self.runs = evaluation.results("ch3_warmup_round2")
        self.budgets = grids.ROUND2_BUDGETS
        self.share = grids.WARMUP_SHARE
        self.seeds = grids.ROUND2_SEEDS

    def ended_below(self, rs) -> int:
        return sum(store.statistic(r, BELOW_PLATEAU, grids.PLATEAU_GAP) for r in rs)

    def cold(self, f) -> list:
        return store.pick(self.runs, **f.decision.arm)

    def warm(self, f) -> list:
        return store.pick(self.runs, **f.decision.against)

    def deciding(self) -> list:
        return self.ev.role("decides")

    def testable(self) -> list:
        return [f for f in self.deciding() if f.verdict.label != "not testable"]

    def untestable(self) -> list:
        return [f for f in self.deciding() if f.verdict.label == "not testable"]

    def biggest(self):
        """The testable deciding setting with warmup's largest mean gain."""
        return max(self.testable(), key=lambda f: f.verdict.interval.mean)

    def pre_controls(self) -> list:
        return [f for f in self.ev.role("control") if f.decision.test == "equivalence"]

    def n_machine(self) -> int:
        return sum(f.verdict.label == verdict.MACHINE for f in self.ev.findings)

    def mean_lr_cut(self) -> float:
        """How much a warmup of a quarter of 1600 steps lowers the mean learning rate of the schedule."""
        from ...training.train import TrainConfig, lr_at

        mean_lr = {}
        for w in (0, int(self.share * 1600)):
            t = TrainConfig(**{**self.runs[0]["train"], "steps": 1600, "warmup": w})
            mean_lr[w] = np.mean([lr_at(k, t) for k in range(1600)])
        return float(1 - min(mean_lr.values()) / max(mean_lr.values()))

    def post_figure_runs(self) -> list:
        rows = [
            dict(
                r,
                arm="post-norm, " + ("warmup" if r["warmup"] else "no warmup"),
                panel=f"lr {r['lr']:g}, {r['budget']} steps",
            )
            for r in self.runs
            if r["norm"] == "post"
        ]
        return sorted(rows, key=lambda r: r["warmup"])  # no warmup first: solid


@lru_cache(maxsize=1)
def round1() -> Round1:
    return Round1()


@lru_cache(maxsize=1)
def round2() -> Round2:
    return Round2()


def holm_family(ev) -> dict:
    """{machine: the number of deciding regimes Holm's correction was applied across}: those whose
    calibration passed on that machine's runs (``evidence.rule.evaluate`` corrects over the testable
    regimes only); the emulated CPU's entry only where its runs are stored."""

    def testable(labels) -> int:
        return sum(label != "not testable" for label in labels)

    deciding = ev.role("decides")
    out = {"this machine": testable((f.native or f.verdict).label for f in deciding)}
    if all(f.emulated is not None for f in deciding):
        out["emulated CPU"] = testable(f.emulated.verdict.label for f in deciding)
    return out


class Round3:
    """Grid ``ch3_warmup_round3``: pre-norm and post-norm at one setting (Xavier init, lr 2e-3, 1,600 steps),
    without warmup and with 400 steps of it, eight fresh seeds (issue 49)."""

    def __init__(self):
        self.ev = evaluation.evidence("ch3_warmup_round3")
        self.runs = evaluation.results("ch3_warmup_round3")
        self.gain_pre, self.interaction = self.ev.role("decides")  # in the order the grid declares them
        self.gain_post = next(
            f for f in self.ev.role("calibration") if f.decision.calibrates == self.interaction.decision.what
        )
        self.seeds = grids.ROUND3_SEEDS
        self.warmup = grids.ROUND3_WARMUP
        one = self.runs[0]
        self.steps, self.lr, self.init = one["budget"], one["lr"], one["init"]

    def of(self, norm: str, warmup: int) -> list:
        return store.pick(self.runs, norm=norm, warmup=warmup)

    def below(self, norm: str, warmup: int) -> tuple:
        """(runs that ended below the plateau, runs) of one arm."""
        rs = self.of(norm, warmup)
        return sum(store.statistic(r, BELOW_PLATEAU, grids.PLATEAU_GAP) for r in rs), len(rs)

    def gain_by_step(self, norm: str) -> dict:
        """{validation step: the mean over seeds of warmup's gain (held-out loss without minus with)}."""
        cold = {r["seed"]: dict(zip(r["val_step"], r["val_loss"])) for r in self.of(norm, 0)}
        warm = {r["seed"]: dict(zip(r["val_step"], r["val_loss"])) for r in self.of(norm, self.warmup)}
        steps = sorted(set.intersection(*(set(c) for c in [*cold.values(), *warm.values()])))
        return {k: float(np.mean([cold[s][k] - warm[s][k] for s in cold])) for k in steps}

    def lr_ratio_after_warmup(self) -> float:
        """The largest ratio of the warmed run's learning rate to the unwarmed one's after the warmup: a warmup
        also shortens the cosine decay that follows it."""
        from ...training.train import TrainConfig, lr_at

        t = {**self.runs[0]["train"]}
        cold, warm = TrainConfig(**{**t, "warmup": 0}), TrainConfig(**{**t, "warmup": self.warmup})
        return max(lr_at(k, warm) / lr_at(k, cold) for k in range(self.warmup, self.steps))

    def figure_runs(self) -> list:
        """Every run, labelled by wiring (a panel) and by warmup (a colour), no warmup first."""
        rows = [
            dict(r, arm="no warmup" if r["warmup"] == 0 else f"warmup {r['warmup']} steps", panel=f"{r['norm']}-norm")
            for r in self.runs
        ]
        return sorted(rows, key=lambda r: (r["norm"] == "post", r["warmup"]))


@lru_cache(maxsize=1)
def round3() -> Round3:
    return Round3()


# A claim whose opposite a deciding test measured: that test's label, turned round.
TURNED = {"confirmed": "not reproduced", "not reproduced": "confirmed"}


def turned(v: verdict.Verdict) -> verdict.Verdict:
    """The label of the claim a test measured the opposite of (round 3 tests pre-norm's gain from warmup > 0;
    the chapter's implied claim is that pre-norm does not need warmup): confirmed <-> not reproduced, the
    other labels as they are, the p-values swapped."""
    return replace(
        v,
        label=TURNED.get(v.label, v.label),
        reason="round 3 tested the opposite, that warmup lowers pre-norm's final loss: "
        + v.reason.replace("as predicted", "as round 3 predicted, against the claim"),
        p=v.p_opposite,
        p_opposite=v.p,
    )


def pre_overall() -> tuple:
    """ "Pre-norm needs no warmup", decided by round 3 (matched settings, fresh seeds, both machines): its first
    deciding test, pre-norm's gain from warmup > 0, turned round (``turned``), as its rule declared before its
    runs. Returns (agreed, this machine's, the emulated CPU's or None)."""
    f = round3().gain_pre
    here = turned(f.native or f.verdict)
    there = turned(f.emulated.verdict) if f.emulated else None  # None until the emulated copies are stored
    return turned(f.verdict), here, there
