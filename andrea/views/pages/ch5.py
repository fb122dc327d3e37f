"""Chapter 5 (GELU): its words, claims table and evidence, computed from its measurements and grids.

The function's facts (the tanh approximation's error, the values by region, the derivative's jump) are
measured here in float64 (``facts``), as the lesson measures them in its cells. Everything about training
comes from the stored grids, in ``ch5_training`` (re-exported here, so that both pages call one module).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from ...evidence import verdict
from ...model.layers import gelu
from ..lesson import Markdown, evidence_claims, lesson_claims, paragraphs
from ..lesson import found as _found
from ..notebook import Claim, Table, table
from .ch5_round3 import (  # noqa: F401 - the deciding round, called as page.<name> by both pages
    CLAIMED,
    claim_measured,
    confound_sentence,
    detectable_words,
    gap_figure,
    r3_pairs,
    r3_procedure,
    r3_seeds,
    r3_std,
    r3_steps,
    r3_words,
    relu_sentence,
    shazeer_sentence,
    short_runs_sentence,
    term,
)
from .ch5_training import (  # noqa: F401 - the training evidence, called as page.<name> by both pages
    GRIDS,
    ROUND1,
    ROUND2,
    ROUND3,
    SHAZEER,
    cal_words,
    confound_words,
    ev,
    explore_table,
    gelu_means,
    other_values,
    other_words,
    pairs,
    r2_cal_words,
    r2_swiglu_words,
    r2_words,
    relu_words,
    rule_history,
    rule_values,
    runs,
    scale_words,
    stds,
    steps,
    sw2_gaps,
    swiglu_sentence,
    swiglu_verdict,
    swiglu_words,
    training_settings,
)

CHAPTER = "05_gelu"
REGION_POINTS = (-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0)


def _g(v: float, approximate: str = "none") -> float:
    return float(gelu(torch.tensor(v, dtype=torch.float64), approximate))


@lru_cache(maxsize=1)
def facts() -> dict[str, float]:
    """The function's facts in float64: the tanh approximation's largest error on 2M points of [-10, 10]
    (and where), torch's fused kernels against the formula, GELU's minimum, values at ±1 and ±3, and the
    derivative's jump across 0 (GELU and ReLU, over 2e-6)."""
    x = torch.linspace(-10, 10, 2_000_001, dtype=torch.float64)
    exact, approx = gelu(x, "none"), gelu(x, "tanh")
    err = (approx - exact).abs()
    i = int(err.argmax())
    j = int(exact.argmin())
    xx = torch.tensor([-1e-6, 1e-6], dtype=torch.float64, requires_grad=True)
    (dg,) = torch.autograd.grad(gelu(xx, "none").sum(), xx)
    (dr,) = torch.autograd.grad(torch.relu(xx).sum(), xx)
    return {
        "max_err": float(err.max()),
        "max_err_x": float(x[i]),
        "rel_err": float(err[i] / exact[i].abs()),
        "torch_exact": float((torch.nn.functional.gelu(x) - exact).abs().max()),
        "torch_tanh": float((torch.nn.functional.gelu(x, approximate="tanh") - approx).abs().max()),
        "gelu_min": float(exact[j]),
        "gelu_min_x": float(x[j]),
        "g3": _g(3.0),
        "gm3": _g(-3.0),
        "gm1": _g(-1.0),
        "gelu0": _g(0.0),
        "gelu0_t": _g(0.0, "tanh"),
        "gelu_jump": float(dg[1] - dg[0]),
        "relu_jump": float(dr[1] - dr[0]),
    }


def region_table(points=REGION_POINTS) -> Table:
    """GELU by region: x, Φ(x), GELU(x) and how far GELU(x) is from x."""
    rows = []
    for p in points:
        g = _g(p)
        rows.append([f"{p:+.1f}", f"{0.5 * (1 + math.erf(p / math.sqrt(2))):.5f}", f"{g:+.6f}", f"{p - g:+.6f}"])
    return table(rows, ["x", "Φ(x)", "GELU(x)", "x − GELU(x)"])


def gpu_note(gpu: bool) -> str:
    if gpu:
        return "This build had a GPU; its timings are printed above."
    return "This build ran on a CPU only, so the GPU timing was not measured here; run the cell on a GPU to see it."


# ---------------------------------------------------------------------------------------------
# The lesson's opening and its claims
# ---------------------------------------------------------------------------------------------
def found() -> Markdown:
    """ "What we found": the approximation's error, GELU against ReLU, SwiGLU. The primer is linked before the
    first statistics word."""
    f = facts()
    sw = swiglu_verdict()
    first = (
        f"ANDREA's tanh approximation of GELU is never further than {f['max_err']:.1e} from the exact function, "
        "far below anything training would notice."
    )
    return _found(
        first,
        "By the {doc}`book's rules <checking>`, "
        + _lower_first(relu_sentence(explain=True))
        .replace(" fresh seeds", " {term}`fresh seeds`", 1)
        .replace(" nats", " {term}`nats`", 1),
        swiglu_found(sw),
    )


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:]


def swiglu_found(sw) -> str:
    """The SwiGLU verdict for "What we found", with one number."""
    controls = ev(ROUND2).role("control")
    won = [f for f in controls if f.verdict.label == "confirmed"]
    lost = [f for f in controls if f.verdict.label == "not reproduced"]
    if won and not lost and len(won) < len(controls):
        best = max(won, key=lambda f: -f.verdict.interval.mean)
        std = best.decision.arm["init_std"]  # the lesson's round-3 sentence has explained its own scale
        return (
            f"Shazeer's gated SwiGLU ended below GELU at {scale_words(std, std != r3_std())}, by "
            f"{-best.verdict.interval.mean:.3f} nats per byte, but not clearly at the other, so that claim, tested at "
            f"both scales, is {term(sw.label)}: at one of them the seeds could not tell the two apart."
        )
    return f"Shazeer's gated SwiGLU against GELU, on round 2's fresh seeds: {term(sw.label)}."


def _claims(gpu: bool) -> list[Claim]:
    f = facts()
    e1, e2 = ev(ROUND1), ev(ROUND2)
    n = steps()
    return [
        Claim(
            "GELU(x) = x * Phi(x), Phi the standard normal CDF.",
            f"the book's exact GELU equals torch's to {f['torch_exact']:.0e}",
            verdict.exact(f["torch_exact"], 1e-12, "the difference"),
            "float64, 2M points",
            anchor="ev-ch5-function",
        ),
        Claim(
            "Phi(x) ~ 0.5 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).",
            f"max error of GELU {f['max_err']:.2e} at |x| = {abs(f['max_err_x']):.2f}",
            verdict.exact(f["max_err"], 1e-3, "the largest error"),
            "an approximation: accurate to about 5e-4 absolute",
            anchor="ev-ch5-function",
        ),
        Claim(
            "Large positive x: GELU(x) ~ x; large negative x: GELU(x) ~ 0 (like ReLU).",
            f"GELU(3) = 3 - {3 - f['g3']:.4f}; GELU(-3) = {f['gm3']:.4f}",
            verdict.exact(max(3 - f["g3"], abs(f["gm3"])), 0.01, "the distance from ReLU at |x| = 3"),
            "table of values by region",
            anchor="ev-ch5-function",
        ),
        Claim(
            "Near 0, Phi(x) ~ 0.5 and GELU(0) = 0 exactly.",
            "GELU(0) = 0 in both forms",
            verdict.exact(
                float(gelu(torch.zeros(1), "tanh").abs()) + float(gelu(torch.zeros(1), "none").abs()),
                0.0,
                "|GELU(0)|",
            ),
            "computed",
            anchor="ev-ch5-function",
        ),
        Claim(
            "GELU passes some negative inputs, weighted by Phi(x).",
            f"GELU(-1) = {f['gm1']:.4f}; minimum {f['gelu_min']:.4f} at x = {f['gelu_min_x']:.3f}",
            verdict.compare([-f["gm1"]], "positive", exact=True, what="-GELU(-1)"),
            "computed",
            anchor="ev-ch5-function",
        ),
        Claim(
            "ReLU's hard cutoff creates a gradient discontinuity; GELU's curve gives smoother gradients.",
            f"derivative jump across 0: ReLU {f['relu_jump']:g}, GELU {f['gelu_jump']:.0e}",
            verdict.exact(f["gelu_jump"], 1e-5, "GELU's jump"),
            "autograd",
            anchor="ev-ch5-function",
        ),
        Claim(
            "Transformers trained with GELU reach lower loss than with ReLU at equal parameters.",
            claim_measured(),
            ev(ROUND3).verdict,
            f"fresh seeds, rule declared before them; at GPT-2's init std {stds()[0]:g}, the initialisation "
            f"confound, rounds 1 and 2 read {e1.verdict.label} and {e2.verdict.label} and decide nothing; "
            "Shazeer (2020): 1.997 vs 1.983 nats per T5 token at 65k steps, 1.677 vs 1.679 at 524k",
            anchor="ev-ch5-relu",
        ),
        Claim(
            "Gated variants (SwiGLU) do better still (from Shazeer 2020, not the notes).",
            f"round 2, after {n} steps: SwiGLU minus GELU, paired over fresh seeds, {sw2_gaps()}",
            swiglu_verdict(),
            "fresh seeds, declared before they ran; a small model early in training, far from Shazeer's 65,536 steps",
            anchor="ev-ch5-swiglu",
        ),
        Claim(
            "ANDREA's CUDA training engine has a hand-written GELU kernel using the tanh form.",
            "the engine's source is not part of this book",
            "not testable",
            "the fused-vs-formula timing shows why one writes such a kernel",
            anchor="ev-ch5-gpu",
        ),
        Claim(
            "Modern GPUs compute tanh in a single instruction.",
            "see the GPU timing in the lesson" if gpu else "no GPU in this build",
            "not testable",
            "true for the approximate tanh instruction of NVIDIA GPUs since compute capability 7.5; the accurate "
            "tanh takes several instructions",
            anchor="ev-ch5-gpu",
        ),
    ]


def claims(gpu: bool):
    """The lesson's claims table (``gpu``: whether this build measured the GPU timing)."""
    return lesson_claims(CHAPTER, _claims(gpu))


def evidence_table():
    return evidence_claims(_claims(torch.cuda.is_available()))


# ---------------------------------------------------------------------------------------------
# The evidence page's paragraphs
# ---------------------------------------------------------------------------------------------
def function_evidence() -> Markdown:
    f = facts()
    return paragraphs(
        "Every number here is computed in float64, so each is exact up to rounding and is compared with its "
        "threshold directly (no seeds: nothing random is involved).",
        f"The book's exact GELU, x·Φ(x) with Φ from `torch.erf`, matches torch's fused `F.gelu` to "
        f"{f['torch_exact']:.1e} on 2,000,001 points of [−10, 10], and its tanh form matches "
        f"`F.gelu(approximate='tanh')` to {f['torch_tanh']:.1e}. The tanh approximation is at most "
        f"{f['max_err']:.2e} from the exact GELU, at x = ±{abs(f['max_err_x']):.2f} (a relative error of "
        f"{f['rel_err']:.1e}); the claim is read as 'within 10⁻³'.",
        f"'Like ReLU far from zero' is read as: within 0.01 of ReLU at |x| = 3; GELU(3) = 3 − {3 - f['g3']:.4f} and "
        f"GELU(−3) = {f['gm3']:.4f}. GELU(0) is {f['gelu0']:g} in the exact form and {f['gelu0_t']:g} in the tanh "
        f"form. GELU(−1) = {f['gm1']:.4f}: negative inputs are passed, weighted by Φ; the minimum is "
        f"{f['gelu_min']:.4f} at x = {f['gelu_min_x']:.4f}.",
        f"'Smoother gradients' is read as: across [−10⁻⁶, 10⁻⁶] GELU's derivative (autograd) changes by less than "
        f"10⁻⁵; it changes by {f['gelu_jump']:.1e}, where ReLU's jumps by {f['relu_jump']:g}.",
    )


def relu_procedure() -> Markdown:
    s, r = training_settings(), rule_values()
    return paragraphs(
        f"The stored runs train a {s['n_layer']}-block, width-{s['d_model']} ANDREA for {s['steps']} steps "
        f"({s['batch_size']} sequences of {s['seq_len']} bytes, peak learning rate {s['lr']:g}, warmup "
        f"{s['warmup']}), {s['seeds']} seeds per arm in round 1. GELU (tanh), ReLU and SwiGLU have equal parameter "
        "counts (SwiGLU's width of 8/3 d_model matches the 4× MLP's weights, up to its extra biases); GELU and ReLU "
        "start from the same weights for the same seed, so each seed gives a paired difference.",
        f"**The rule, {r['rule_when']}.** The claim is that GELU ends at a lower validation loss than ReLU. It counts "
        f"as confirmed if ReLU's final loss minus GELU's, after {s['steps']} steps and paired by seed over "
        f"{r['rule_seeds']} seeds, is above zero in both deciding regimes, {r['rule_regimes']}. First, a "
        f"calibration: GELU must end at least {r['rule_level']} nats below the unigram entropy, so that the two are "
        f"compared on models that learned something. {r['rule_detail']}",
    )
