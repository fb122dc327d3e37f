"""The same book on every machine: re-run the book's pages as another CPU would, and compare what they say.

A reader's laptop is not the machine that built the book: other vector kernels (AVX2, AVX-512, NEON,
or torch's portable C++ kernels), another thread count. Those change the last bits of every float
sum, and a few hundred training steps can grow such bits into visible differences. This tool
executes every page of the book (chapters, labs, appendix) in a fresh kernel under a chosen
emulation, by default torch's portable kernels (``ATEN_CPU_CAPABILITY=default``) with MKL's AVX2
code path for matrix products (``andrea.evidence.store.EMULATED``), on one thread, with an empty cache (nothing
computed earlier is reused), and compares every reading with another run:

* every glued value (``{glue:text}`name```): its words must be identical, its numbers must agree
  within the tolerance of its kind (``KINDS`` below: values computed at initialisation or from the
  stored results, values after live training, wall-clock timings);
* every verdict of every "Checking the claims" table: the label must be identical;
* every exercise checker's result (✓ / ✗): identical;
* and every page must run without an error.

    python tools/portable.py                    # portable kernels, 1 thread, against the native build in _build
    python tools/portable.py --threads 2        # portable kernels, 2 threads
    python tools/portable.py --against native   # execute the native side here too (no build needed)
    make check-portable                         # the same, for readers: prints the table, exit 1 on a difference

`make test` runs it after the book's build (tests/test_portable.py). The table lists every value
that differs, with both readings and the tolerance that was applied. How a page is executed under an
emulation and read back is in tools/portable_pages.py; what each reading must agree on, here.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

# Executing the pages and reading what they say (tools/portable_pages.py); the names stay importable from here
# (tools/execute_pages.py and tools/gpu_check.py take the list of pages from this module).
from portable_pages import (  # noqa: E402
    BUILD,
    _execute_one,
    emulation,  # noqa: F401 - re-exported
    executed_pages,  # noqa: F401 - re-exported
    page_stems,
    pages,  # noqa: F401 - re-exported
    read_build,
    read_folder,
    readings,  # noqa: F401 - re-exported
    run_pages,
)


# ---------------------------------------------------------------------------------------------
# Tolerances, stated per kind of value
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    rel: float  # relative difference allowed between the two readings of a number
    digits: float  # ... or this many units of the last digit the page prints (rounding can straddle)
    why: str
    factor: float = 0.0  # ... or (when > 0) a ratio of at most this between two numbers of the same sign

    def allows(self, a: float, b: float, unit: float) -> bool:
        if math.isinf(self.rel) or abs(a - b) <= max(self.rel * max(abs(a), abs(b)), self.digits * unit):
            return True
        # rounding errors may change sign between kernels: only their size is compared
        return self.factor > 0 and 0 < max(abs(a), abs(b)) <= self.factor * min(abs(a), abs(b))


TOLERANCES = {
    # A fresh model, or arithmetic on the stored results: the kernels change the last bits only, so a
    # printed number may differ by one unit of its last digit when the exact value sits on a rounding
    # boundary (measured, native AVX2 vs portable kernels: every such number agrees within that).
    "exact": Tolerance(rel=1e-4, digits=1, why="initialisation or stored results"),
    # Numbers that *are* rounding errors (float32 vs float64 differences, a collapsed residual at the
    # level of float32's epsilon): which bits come out depends on the kernels; the order of magnitude
    # does not.
    "rounding": Tolerance(rel=0.0, digits=0, factor=10.0, why="a rounding error itself"),
    # After live training: rounding differences grow over the steps. Measured between this machine's
    # AVX-512 kernels and the emulation (portable kernels, MKL's AVX2 path; 1 and 2 threads) over the
    # book's live training (chapter 7, 300 steps): up to 20 % (the largest lambda: 0.085 to 0.103).
    "trained": Tolerance(rel=0.3, digits=1, why="after live training"),
    # Wall-clock timings differ from run to run on one machine: only their words are compared.
    "timing": Tolerance(rel=float("inf"), digits=0, why="a timing (not compared)"),
}
# Every glued value of every page has a declared kind (GLUE_KINDS: page -> kind -> the glue names, in
# one string, fnmatch patterns allowed). A glued value with no declared kind is itself a difference
# (tests/test_portable.py also checks the native build alone), so a new glue key must be classified
# when it is written: is it computed at initialisation or from the stored results ("exact"), is it the
# difference between two ways of computing the same thing, or any other quantity at the level of the
# float format's resolution ("rounding": compared by size, whatever its name), does it come after live
# training ("trained"), or is it a wall-clock timing ("timing")?
GLUE_KINDS: dict[str, dict[str, str]] = {
    "intro": {"exact": "book_device reader_device"},  # where the pages' models and a reader's own ran
    "attention": {
        "exact": (
            "block even_fresh_min even_head even_max_block even_min_block fresh_max head hs n_head "
            "n_tokens prev_head query_pos query_word top_pos top_w top_word uniform_w width "
            "phrase rep_block rep_default rep_even rep_head rep_w"  # the trained model on a repeated phrase
        ),
        # max |by hand - fused kernel| and |row sum - 1|: float32's rounding
        "rounding": "hand_diff row_sum_err",
    },
    "01_residual": {
        "exact": (
            "cause_words emb_rms explorer_words growth_exp identity_words move_first move_last nores_ratio_12 "
            "plateau_words rank_nores_6 rank_res_48 res_ratio_96 share_blocks share_emb share_final share_pythag "
            "train_words"
        ),
        # max |by hand - block| and the stream's summation errors; a collapsed residual at float32's epsilon
        "rounding": "rank_nores_48 same sum_err*",
    },
    "01_residual_evidence": {
        "exact": (
            "cause_words controls_same controls_words cpu_minutes deep_depths device eps_ratio_48 eps_ratio_96 "
            "gap_max gap_min grows_words kl_max leave_words lr_words needs_verdict n_runs nores_ratio_12 "
            "nores_ratio_48 nores_stream_48 noscale_ratio_48 plateau_words prediction res_ratio_96 res_words "
            "rescue_words rule_when shallow_words sqrt_eps stuck_words torch tr_*"
        ),
        # max |by hand - block| and the float64 summation error: rounding errors themselves
        "rounding": "same sum_err64",
    },
    "02_layernorm": {
        "exact": (
            "eps_quiet_std exp_pre first_bad growth_none growth_pre ln_params_total ln_share n_ln overflow_label "
            "pre_finite_words pre_top_128 scale_txt tok_std_before_hi tok_std_before_lo tok_std_dev tr_* hl_*"
        ),
        # |mean| after LayerNorm: float32's rounding of a zero
        "rounding": "tok_mean_max",
    },
    "03_prenorm_postnorm": {
        "exact": (
            "amp_g48 amp_x48 budget_words early_words g_post_over_pre mean_lr_cut post_grad_jump pre_act_growth "
            "stable_words unigram warmup_words x_post_over_pre tr_* r2_*"
        ),
        # |RMS - 1| after the last LayerNorm: ε's effect at float32's resolution
        "rounding": "post_act_dev",
    },
    "04_mlp": {
        "exact": (
            "act_min b_extra mlp_nobias_12_m mlp_share mlp_total_m mlp_vs_attn neg_share ratio swi_h "
            "total_m w1 w12m w1m w_gel w_swi"
        ),
        "timing": "t_ratio",
    },
    "04_mlp_evidence": {
        "exact": "b_extra mlp_block mlp_share mlp_total ratio share_label swi_h total w1 w12 w2 w_swi",
        "rounding": "diff",  # max |by hand - MLP|: float32's rounding
    },
    "05_gelu": {
        "exact": (
            "dgelu_max dgelu_min g_3gap g_m1 g_m3 gelu0 gelu0_t gelu_hi gelu_jump gelu_lo gelu_min gelu_min_x "
            "gpu_note max_err max_err_x pre64 pre64c pre768 rel_err relu_jump relu_said shazeer_said "
            "std_corrected swiglu_said tr_* confound_said r3_steps short_said"
        ),
        "timing": "speed_ratio",
    },
    "05_gelu_evidence": {
        "exact": (
            "cal_words confound_words det_words explore_steps gelu_hi gelu_lo main_lr other_lr "
            "other_seeds other_words relu_verdict relu_words shazeer_gap steps swiglu_verdict swiglu_words "
            "tanh_note r2_* r3_words r3_verdict short_said"
        ),
    },
    "06_stack": {
        "exact": (
            "doc_sum_m emb emb_doc_m emb_m emb_norm ent_min gap_m ln_norm out_norm pos position same_hi same_lo "
            "sqrt_d stack_first stack_last total total_m trend_words trunk_m trunk_share untied_m"
        ),
    },
    "07_layerscale": {
        "exact": (
            "cos50_plain cos96_gpt2 cos96_ls d80_* lam_grad0 move18 move_without48 rms_growth_plain small_lam "
            "w_grad0 tr_*"
        ),
        # a relative move of 2e-07 per block: three float32 units (float64 reads 1.99e-07)
        "rounding": "move48",
        "trained": "growth_*",
    },
    "07_layerscale_evidence": {
        "exact": (
            "calib_words claim_verdict d80_* lam_words rescue_words round1_verdict round1_words round3_words "
            "same_words scope_words two_words"
        ),
    },
    "08_trained": {
        "exact": (
            "along_1 along_late bigram copy_words ctx dist_t_min dist_u ent_t_min ent_u_min epochs files_train "
            "files_val g1_hi g1_lo g2_hi g2_lo gf heads ind_prose ind_u_prose ind_where kl_11 kl_6 lens_0 lens_12 "
            "lens_6 lens_9 lens_u mb minutes move_first move_hi move_lo move_u_first move_u_last n_params off_t "
            "off_u prev_words ratio_t ratio_u repeat_gain rms_b1 rms_emb inv_rms_emb tok_seen tok_train "
            "train_final unigram random_words val_final width win_t win_t_min win_u win_words"
        ),
    },
    "checking": {
        "exact": (
            "cal_label cal_words ci_words d_hi d_lo d_max d_mean d_min emu_words holm_words ln256 lower_words "
            "holm_bar n_regimes n_regimes2 n_seeds post_label pre_label round2_words t_quantile"
        ),
    },
    "papers": {
        "exact": (
            "accel andrea_growth cait_dev cait_slope collapse_verdict deep_48 deepnet_reason "
            "deepnet_verdict exp_0 exp_1 exp_2 exp_3 exp_4 exp_5 fig3_andrea fig3_paper fig3_verdict "
            "gpt2_ratio gpt2_verdict kind_depth kind_lam0 kind_lvl kind_n kind_off_words "
            "kind_rule_detail kind_rule_when kind_steps kind_verdict kind_words lam_all lam_first "
            "lam_n lemma_inside lemma_l24 lemma_post lemma_post_verdict lemma_pre_verdict "
            "liu_gpt2_reason liu_gpt2_verdict liu_reason liu_verdict mlp_reason mlp_verdict "
            "plain_ratio plain_verdict post_x_48 rz_alpha rz_branch rz_cal_words rz_ctl_level "
            "rz_ctl_verdict rz_ctl_words rz_depth rz_faster_words rz_identity rz_level rz_lr_d "
            "rz_lr_o rz_n_alpha rz_n_d rz_n_o rz_other_words rz_rule_when rz_seeds_d rz_seeds_o "
            "rz_steps rz_verdict san_12 scaling_reason scaling_verdict skip_12_g skip_12_x "
            "skip_reason skip_verdict thm_andrea_post thm_andrea_pre thm_post_reason thm_post_slope "
            "thm_post_verdict thm_pre_reason thm_pre_slope thm_pre_verdict"
        ),
        "timing": "time_*",
    },
}
# The rows of the "Checking the claims" tables ("measured ..." readings): exact, except these, whose
# measured text is a rounding error.
MEASURED_KINDS = {
    "01_residual": {"measured *Each block learns a refinement*": "rounding"},  # a float64 summation error
    "01_residual_evidence": {"measured *Each block learns a refinement*": "rounding"},
    "02_layernorm": {"measured *LayerNorm brings*": "rounding", "measured *y = gamma*": "rounding"},
    "02_layernorm_evidence": {"measured *LayerNorm brings*": "rounding", "measured *y = gamma*": "rounding"},
    "03_prenorm_postnorm": {"measured *Post-norm (the 2017 original)*": "rounding"},  # |RMS - 1| in float32
    "03_prenorm_postnorm_evidence": {"measured *Post-norm (the 2017 original)*": "rounding"},  # the same row
    "05_gelu": {"measured *GELU(x) = x * Phi(x)*": "rounding"},  # float64 vs torch: a rounding error
    "05_gelu_evidence": {"measured *GELU(x) = x * Phi(x)*": "rounding"},  # the same row, in full
    "07_layerscale": {"measured *At the first iteration*": "rounding"},  # a move at float32's resolution
    "07_layerscale_evidence": {"measured *At the first iteration*": "rounding"},  # the same row, in full
}


def kind_of(page: str, key: str) -> str:
    """The declared kind of a reading: "label" (verdicts, checks, errors: identical), a glued value's
    kind from GLUE_KINDS ("undeclared" when it has none), a claims-table row's from MEASURED_KINDS."""
    if key.startswith(("verdict", "check", "error")):
        return "label"
    if key.startswith("glue "):
        name = key[len("glue ") :]
        for kind, names in GLUE_KINDS.get(page, {}).items():
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in names.split()):
                return kind
        return "undeclared"
    for pattern, kind in MEASURED_KINDS.get(page, {}).items():
        if fnmatch.fnmatchcase(key, pattern):
            return kind
    return "exact"


def undeclared(readings: dict[str, dict[str, str]]) -> list[str]:  # noqa: F811 - the argument, not the function
    """'page: glue name' for every glued value whose kind is not declared in GLUE_KINDS."""
    return [
        f"{page}: {key}"
        for page, r in sorted(readings.items())
        for key in sorted(r)
        if kind_of(page, key) == "undeclared"
    ]


# ---------------------------------------------------------------------------------------------
# Comparing two runs
# ---------------------------------------------------------------------------------------------
NUMBER = re.compile(r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+−]?\d+)?")


def numbers(text: str) -> tuple[str, list[tuple[float, float]]]:
    """``text`` with every number replaced by '#', and the numbers as (value, unit of the last digit)."""
    found = []

    def take(m):
        s = m.group(0).replace("−", "-").replace(",", "")
        mant, _, exp = s.partition("e") if "e" in s else s.partition("E")
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        scale = 10.0 ** int(exp or 0)
        found.append((float(s), 10.0**-decimals * scale))
        return "#"

    return NUMBER.sub(take, text), found


@dataclass
class Difference:
    page: str
    key: str
    a: str
    b: str
    kind: str
    why: str


def compare(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> tuple[list[Difference], dict]:
    """Every reading of ``a`` against ``b``; returns the differences and per-kind statistics
    (count of values compared, largest relative difference of the numbers)."""
    diffs: list[Difference] = []
    stats: dict[str, dict] = {}
    for page in sorted(set(a) | set(b)):
        if page not in a or page not in b:
            diffs.append(
                Difference(
                    page,
                    "(page)",
                    "ran" if page in a else "missing",
                    "ran" if page in b else "missing",
                    "",
                    "page not executed",
                )
            )
            continue
        ra, rb = a[page], b[page]
        for key in sorted(set(ra) | set(rb)):
            if key not in ra or key not in rb:
                diffs.append(Difference(page, key, ra.get(key, "—"), rb.get(key, "—"), "", "present in one run only"))
                continue
            x, y = ra[key], rb[key]
            kind = kind_of(page, key)
            if kind == "undeclared":
                diffs.append(Difference(page, key, x, y, kind, "no declared kind (tools/portable.py: GLUE_KINDS)"))
                continue
            s = stats.setdefault(kind, {"values": 0, "numbers": 0, "largest_rel": 0.0, "largest": ""})
            s["values"] += 1
            if kind == "label":
                if x != y:
                    diffs.append(Difference(page, key, x, y, kind, "must be identical"))
                continue
            tol = TOLERANCES[kind]
            (wa, na), (wb, nb_) = numbers(x), numbers(y)
            if wa != wb or len(na) != len(nb_):
                diffs.append(Difference(page, key, x, y, kind, "the words differ (must be identical)"))
                continue
            for (va, ua), (vb, ub) in zip(na, nb_):
                s["numbers"] += 1
                rel = abs(va - vb) / max(abs(va), abs(vb)) if va != vb else 0.0
                if rel > s["largest_rel"]:
                    s["largest_rel"], s["largest"] = rel, f"{page} {key}: {x} vs {y}"
                if not tol.allows(va, vb, max(ua, ub)):
                    diffs.append(Difference(page, key, x, y, kind, f"beyond the {kind} tolerance ({tol.why})"))
                    break
    return diffs, stats


def report(diffs: list[Difference], stats: dict, a_name: str, b_name: str) -> str:
    lines = []
    total = sum(s["values"] for s in stats.values())
    lines.append(f"{total} readings compared ({a_name} vs {b_name}):")
    for kind, s in sorted(stats.items()):
        tol = TOLERANCES.get(kind, TOLERANCES["exact"])
        if kind == "label":
            rule = "identical"
        elif kind == "timing":
            rule = "words identical, numbers not compared"
        elif tol.factor:
            rule = f"words identical, numbers within a factor of {tol.factor:g}"
        else:
            rule = f"words identical, numbers within rel {tol.rel:g} or {tol.digits:g} unit of the last digit"
        lines.append(
            f"  {kind:8s} {s['values']:4d} values, {s['numbers']:4d} numbers; largest relative difference "
            f"{s['largest_rel']:.2g}; rule: {rule}" + (f"\n           largest: {s['largest']}" if s["largest"] else "")
        )
    if not diffs:
        lines.append("No reading differs beyond its tolerance: the book says the same on both.")
    else:
        lines.append(f"{len(diffs)} reading(s) differ:")
        lines.append(f"  {'page':16s} {'reading':28s} {a_name[:30]:30s} {b_name[:30]:30s} why")
        for d in diffs:
            lines.append(f"  {d.page:16s} {d.key[:28]:28s} {d.a[:30]:30s} {d.b[:30]:30s} {d.why}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/portable.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--capability",
        default="default",
        help="ATEN_CPU_CAPABILITY to emulate (default: 'default', "
        "torch's portable kernels; 'native' keeps this machine's)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads per kernel (default 1)")
    p.add_argument(
        "--against",
        choices=("build", "native"),
        default="build",
        help="compare with the native build in _build (default) or execute the native side here too",
    )
    p.add_argument("--out", type=Path, default=BUILD / "portable", help="where the executed pages and report go")
    p.add_argument("--pages", nargs="+", metavar="STEM", help="only these pages (e.g. 07_layerscale)")
    p.add_argument(
        "--stating",
        action="store_true",
        help="only the pages that state something to compare in the native build (a glued value, a claims "
        "table, an exercise check): `make test`'s pass; the labs and the introduction state nothing",
    )
    p.add_argument("--execute-one", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--into", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.execute_one:
        _execute_one(a.execute_one, a.into)
        return 0
    if a.threads < 1:
        p.exit(2, f"{p.prog}: error: --threads must be >= 1, got {a.threads}\n")
    name = f"{a.capability}-{a.threads}t"
    t0 = time.perf_counter()
    print(f"portable: executing every page with ATEN_CPU_CAPABILITY={a.capability}, {a.threads} thread(s)", flush=True)
    stems = sorted(page_stems())
    bad = [x for x in a.pages or [] if x not in stems]
    if bad:
        p.exit(2, f"{p.prog}: error: no page {bad}; the pages are {stems}\n")
    built = None  # the native build's readings, read once
    if a.stating:
        if a.against != "build" or not (BUILD / "jupyter_execute").is_dir():
            p.exit(2, f"{p.prog}: error: --stating reads the native build in {BUILD}: run `make book` first\n")
        built = read_build()
        stating = sorted(k for k, v in built.items() if v)
        silent = [x for x in stems if x not in stating]
        print(f"portable: {len(stating)} pages state something; not executed here (they state nothing): {silent}")
        a.pages = [x for x in (a.pages or stating) if x in stating]
    folder = a.out / name
    for old in folder.glob("*.ipynb") if folder.is_dir() else []:
        old.unlink()  # a page left from an earlier run must not be read as this run's
    secs = run_pages(a.capability, a.threads, folder, only=a.pages)
    emulated = read_folder(folder)
    if a.against == "native":
        print("portable: executing every page natively", flush=True)
        for old in (a.out / "native").glob("*.ipynb") if (a.out / "native").is_dir() else []:
            old.unlink()
        run_pages("native", min(4, os.cpu_count() or 1), a.out / "native", only=a.pages)
        native, native_name = read_folder(a.out / "native"), "native"
    else:
        if not (BUILD / "jupyter_execute").is_dir():
            p.exit(2, f"{p.prog}: error: no native build in {BUILD}: run `make book` first, or use --against native\n")
        native, native_name = built if built is not None else read_build(), "native build"
        if a.pages:
            native = {k: v for k, v in native.items() if k in a.pages}
    diffs, stats = compare(native, emulated)
    text = report(diffs, stats, native_name, f"{a.capability}, {a.threads} thread(s)")
    text += f"\n{len(secs)} pages executed in {time.perf_counter() - t0:.0f} s"
    print(text)
    (a.out / f"{name}.txt").write_text(text + "\n")
    (a.out / f"{name}.json").write_text(
        json.dumps({"diffs": [d.__dict__ for d in diffs], "stats": stats, "seconds": secs}, indent=1)
    )
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
