"""Chapter 7's words (andrea.views.pages.ch7, ch7_training): the explorer's instruction starts where the explorer
opens, and each verdict is said once, in plain words that agree with its stored label (issue 47's second reader)."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext

from andrea.evidence import evaluation, store
from andrea.views.pages import ch7 as page

LESSON = Path(__file__).resolve().parents[1] / "book" / "07_layerscale.md"


def test_the_explorer_instruction_starts_at_the_explorers_opening_value():
    """The reader was told to drag λ₀ up from 10⁻⁶ while the explorer opened at 1e-5: the sentence is built
    from ``page.EXPLORER``, and the lesson opens both explorers with it."""
    look = page.explorer_look()
    assert f"opens at λ₀ = {page.sci(page.EXPLORER['layerscale'])}" in look, look
    assert "10⁻⁶" not in look or page.EXPLORER["layerscale"] == 1e-6
    cells = [c.source for c in jupytext.read(LESSON).cells if c.cell_type == "code"]
    assert any("StaticExplorer(**page.EXPLORER" in c for c in cells)
    assert any("GradientFlowExplorer(**page.EXPLORER)" in c for c in cells)


def test_the_80_block_sentence_prints_the_stored_label_once_and_links_the_glossary():
    label = page.ev(page.DEEP80).verdict.label
    for said in (page.deep80_sentence(), page.deep80_short()):
        labels = re.findall(r"\{term\}`([^`]+)`|\*\*([^*]+)\*\*", said)
        assert [a or b for a, b in labels] == [label], said
        assert page.label_md(label) in said
    if label != "qualified":  # "depends on the recipe" reads as "qualified"
        assert "depends on the recipe" not in page.deep80_sentence() + page.d80_why()
    assert "(evidence <ev-ch7-deep80>)" not in page.deep80_said().text
    assert "{ref}`evidence <ev-ch7-deep80>`" in page.deep80_said().text


def test_the_depth_sweep_sentence_says_what_the_stored_runs_did_at_each_depth():
    said = page.sweep_sentence()
    post = page.sweep()
    assert set(post) == {6, 12, 24, 48, 80}
    failed = {n: sum(bool(store.statistic(r, "failed", 0.3)) for r in rs) for n, rs in post.items()}
    for n, k in failed.items():
        group = re.search(rf"{k} of {len(post[n])} (runs failed )?at (each of )?([\d, and]*?)\bblocks\b", said)
        assert group and str(n) in re.findall(r"\d+", group[3]), (n, said)
    m = re.search(r"already fails at (\d+) blocks", said)
    if m:  # more than half failed at that depth and every deeper one, at most half at every shallower one
        hi = int(m[1])
        assert all((2 * failed[n] > len(post[n])) == (n >= hi) for n in post), failed


def test_the_80_block_table_counts_each_machine_s_runs():
    rows = {r["recipe"]: r for r in page.deep_rows()}
    for machine, col in (("native", "80 blocks failed"), ("emulated", "on the second CPU")):
        if machine == "emulated" and page.ev(page.DEEP80).missing_emulated:
            assert {r[col] for r in rows.values()} == {"not made yet"}
            continue
        runs = page.runs(page.DEEP80) if machine == "native" else evaluation.results(page.DEEP80, "emulated")
        for f in page.ev(page.DEEP80).role("decides"):
            arm = store.pick(runs, **f.decision.arm)
            k = sum(bool(store.statistic(r, "failed", 0.3)) for r in arm)
            assert rows[f.decision.arm["regime"].split(":")[0].split(",")[0]][col] == f"{k} of {len(arm)}"


def test_the_noise_sentence_prints_its_label_as_a_glossary_term_where_there_is_one():
    survival, _ = page.noise_profiles()
    label = page.noise_verdict(survival).label
    said = page.noise_sentence(survival).text
    assert page.label_md(label) in said and "{ref}`evidence <ev-ch7-noise>`" in said
    assert page.label_md("qualified") == "{term}`qualified`" and page.label_md("confirmed") == "**confirmed**"


def test_the_rescue_claim_reads_the_pre_norm_setting_from_round_3_and_can_come_out_either_way(monkeypatch):
    """Round 3 decides the setting round 2 left open; the claim ("every setting", on each machine, then both
    machines together) follows its label, so a round 3 that came out the other way would make the claim
    qualified, and one that settled nothing would leave it inconclusive, in the claims row and in the lesson's
    sentence alike."""
    import dataclasses

    from andrea.evidence import verdict
    from andrea.views.pages import ch7_rescue

    real = ch7_rescue.round3()
    rounds = [r for r, _ in ch7_rescue.per_setting()]
    assert rounds.count(page.ROUND3) == 1 and len(rounds) == len(page.ev(page.ROUND2).role("decides"))
    kept = [f for r, f in ch7_rescue.per_setting() if r == page.ROUND2]
    assert all(f.verdict.label == "confirmed" for f in kept)  # round 2's post-norm settings, both confirmed
    for label, claim in (("confirmed", "confirmed"), ("not reproduced", "qualified"), ("inconclusive", "inconclusive")):
        made_up = verdict.Verdict(label, "made up", real.verdict.interval)
        emulated = real.emulated and dataclasses.replace(real.emulated, verdict=made_up)
        flipped = dataclasses.replace(real, verdict=made_up, native=made_up, emulated=emulated)
        monkeypatch.setattr(ch7_rescue, "round3", lambda flipped=flipped: flipped)
        assert ch7_rescue.rescue_verdict().label == claim
        assert ch7_rescue.rescue_said().text.startswith(f"Verdict on the claim: {page.label_md(claim)}")
        assert ch7_rescue.rescue_sentence().startswith("LayerScale freed") == (claim == "confirmed")


def test_the_rescue_sentence_says_where_the_plain_stack_was_stuck_and_where_it_learned():
    """The reviewer of round 3: the plain pre-norm stack learns (it ends 0.6 nats below the unigram level), so
    "fail to learn without it" was false there. The lesson's sentence now splits the settings by what the plain
    stack did, measured from the stored runs."""
    from andrea.views.pages import ch7_rescue

    said = ch7_rescue.rescue_sentence()
    assert "fail to learn without it" not in said
    for r, f in ch7_rescue.per_setting():
        plain = [x for x in page.runs(r) if all(x.get(k) == v for k, v in f.decision.arm.items())]
        below = sum(x["unigram_ce"] - x["final_val_loss"] for x in plain) / len(plain)
        assert ch7_rescue.stuck(r, f) == (below < ch7_rescue.STUCK)
    assert "stayed at the {term}`unigram` level" in said and "where the plain stack learned too" in said
    assert "20 more seeds (not plotted)" in ch7_rescue.rescue_said().text  # the figure plots round 2's five
