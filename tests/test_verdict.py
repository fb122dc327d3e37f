"""The book's one verdict rule, on made-up results where the right answer is known."""

import math

import pytest

from andrea.evidence import verdict as V


def test_t_quantiles_match_the_table_and_converge_to_the_normal():
    for df, table in ((1, 12.706), (2, 4.303), (4, 2.776), (30, 2.042)):
        assert abs(V.t975(df) - table) < 5e-4
    assert abs(V.t975(60) - 2.000) < 0.005 and abs(V.t975(1000) - 1.962) < 0.005
    with pytest.raises(ValueError):
        V.t975(0)


def test_interval_of_known_values():
    ci = V.interval([1.0, 2.0, 3.0])
    assert ci.mean == 2.0 and ci.n == 3
    assert math.isclose(ci.hi - ci.mean, 4.302653 * 1.0 / math.sqrt(3), rel_tol=1e-6)
    assert V.interval([5.0]).lo == V.interval([5.0]).hi == 5.0
    with pytest.raises(ValueError):
        V.interval([1.0, float("nan")])


def test_a_clear_win_in_the_predicted_direction_is_confirmed():
    assert V.compare([0.10, 0.12, 0.11], "positive").label == "confirmed"
    assert V.compare([-0.10, -0.12, -0.11], "negative").label == "confirmed"


def test_a_clear_win_the_other_way_is_not_reproduced():
    assert V.compare([-0.10, -0.12, -0.11], "positive").label == "not reproduced"


def test_overlapping_intervals_are_inconclusive_whoever_is_ahead():
    # ahead on average, but the interval contains zero: no win for either side
    assert V.compare([0.3, -0.1, 0.05], "positive").label == "inconclusive"
    assert V.compare([-0.3, 0.1, -0.05], "positive").label == "inconclusive"


def test_a_margin_must_be_beaten_not_just_zero():
    assert V.compare([0.10, 0.11, 0.12], "positive", margin=0.05).label == "confirmed"
    assert V.compare([0.04, 0.05, 0.06], "positive", margin=0.05).label == "inconclusive"


def test_one_run_decides_nothing_unless_the_quantity_is_exact():
    assert V.compare([0.5], "positive").label == "inconclusive"
    assert V.compare([0.5], "positive", exact=True).label == "confirmed"


def test_the_reason_is_generated_from_the_numbers():
    v = V.compare([0.10, 0.12, 0.11], "positive", what="ReLU minus GELU")
    assert "ReLU minus GELU is +0.11" in v.reason and "95 % CI, n = 3" in v.reason


def test_numeric_claims_confirmed_within_tolerance_else_corrected():
    assert V.numeric(85e6, 85.05e6, rel_tol=0.05).label == "confirmed"
    v = V.numeric(120e6, 98.9e6, rel_tol=0.05, what="total parameters")
    assert v.label == "corrected" and "off by 18%" in v.reason


def test_regimes_combine():
    yes = V.Verdict("confirmed", "")
    no = V.Verdict("not reproduced", "")
    maybe = V.Verdict("inconclusive", "")
    assert V.combine({"a": yes, "b": yes}).label == "confirmed"
    # confirmed in one regime and unknown in the other is not "qualified": qualified needs a refutation
    assert V.combine({"bites": yes, "other": maybe}).label == "inconclusive"
    assert V.combine({"bites": yes, "other": maybe}, rule="some").label == "confirmed"
    assert V.combine({"a": yes, "b": no}).label == "qualified"
    assert V.combine({"a": yes, "b": no}, rule="some").label == "qualified"
    assert V.combine({"a": no, "b": maybe}).label == "not reproduced"
    assert V.combine({"a": no, "b": maybe}, rule="some").label == "inconclusive"
    assert V.combine({"a": maybe, "b": maybe}).label == "inconclusive"
    with pytest.raises(ValueError):
        V.combine({"a": yes}, rule="most")


def test_holm_adjustment_on_known_values():
    # p sorted 0.01, 0.02, 0.04 (m = 3): 0.03, 0.04, 0.04 (monotone), back in the input order
    assert [round(x, 10) for x in V.holm([0.04, 0.01, 0.02])] == [0.04, 0.03, 0.04]
    assert V.holm([0.5, 0.9]) == [1.0, 1.0]
    assert V.holm([0.001]) == [0.001]


def test_decide_corrects_across_regimes():
    # each regime alone passes at 2.5 % one-sided (p = 0.02); two of them after Holm do not (0.04)
    a = V.Verdict("confirmed", "a", p=0.02, p_opposite=0.98)
    b = V.Verdict("confirmed", "b", p=0.02, p_opposite=0.98)
    assert V.decide({"a": a})[0].label == "confirmed"
    claim, per = V.decide({"a": a, "b": b})
    assert claim.label == "inconclusive" and per["a"].label == per["b"].label == "inconclusive"
    assert "Holm" in per["a"].reason
    strong = V.Verdict("confirmed", "s", p=0.001, p_opposite=0.999)
    claim, per = V.decide({"s": strong, "b": b}, rule="some")
    assert claim.label == "confirmed" and per["s"].label == "confirmed"  # 0.002 < 0.025
    assert per["b"].label == "confirmed"  # Holm's second step: 0.02 * 1 < 0.025


def test_decide_on_made_up_paired_results():
    rng = __import__("random").Random(0)
    clear = [0.2 + rng.gauss(0, 0.02) for _ in range(5)]
    null = [rng.gauss(0, 0.02) for _ in range(5)]
    opposite = [-0.2 + rng.gauss(0, 0.02) for _ in range(5)]
    v = {k: V.compare(x, "positive") for k, x in (("clear", clear), ("null", null), ("opp", opposite))}
    assert V.decide({"c": v["clear"], "c2": v["clear"]})[0].label == "confirmed"
    assert V.decide({"c": v["clear"], "n": v["null"]})[0].label == "inconclusive"
    assert V.decide({"c": v["clear"], "n": v["null"]}, rule="some")[0].label == "confirmed"
    assert V.decide({"c": v["clear"], "o": v["opp"]})[0].label == "qualified"
    assert V.decide({"n": v["null"], "o": v["opp"]})[0].label == "not reproduced"
    assert V.decide({"n": v["null"], "n2": v["null"]}, rule="some")[0].label == "inconclusive"


def test_false_confirmations_under_the_null_stay_near_the_level():
    # eight regimes with no effect, five seeds each: the claim is confirmed (rule "some") in at most
    # about 2.5 % of made-up grids with Holm's correction; without it, in about 1 - 0.975^8 = 18 %
    rng = __import__("random").Random(1)
    hits = raw = 0
    for _ in range(400):
        vs = {str(i): V.compare([rng.gauss(0, 1) for _ in range(5)], "positive") for i in range(8)}
        hits += V.decide(vs, rule="some")[0].label == "confirmed"
        raw += any(v.label == "confirmed" for v in vs.values())
    assert hits / 400 < 0.05 and raw / 400 > 0.1


def test_counts_use_fishers_exact_test():
    assert math.isclose(V.fisher_one_sided(3, 3, 0, 3), 1 / 20)
    assert V.counts(3, 3, 0, 3).label == "inconclusive"  # p = 0.05 is not below 0.025
    assert V.counts(6, 6, 0, 6).label == "confirmed"
    assert V.counts(0, 6, 6, 6).label == "not reproduced"


def test_labels_are_checked():
    with pytest.raises(ValueError):
        V.Verdict("probably", "")
    with pytest.raises(ValueError):
        V.compare([1.0, 2.0], "up")


def test_equivalence_needs_the_whole_interval_inside_the_margin():
    assert V.equivalent([0.01, -0.01, 0.0, 0.005], 0.05).label == "confirmed"
    assert V.equivalent([0.20, 0.25, 0.22], 0.05).label == "not reproduced"  # clearly different
    assert V.equivalent([0.20, -0.1, 0.05], 0.05).label == "inconclusive"  # too noisy to tell
    assert V.equivalent([-0.3, -0.25, -0.28], 0.05).label == "not reproduced"  # a clear loss is not "the same"


def test_holm_treats_each_regime_as_one_two_sided_test_whatever_the_declared_direction():
    # one family of two-sided p-values (2 min(p, p_opposite)): a clear regime makes the next step easier,
    # whichever side each lies on, and the side decides the label
    strong = V.Verdict("confirmed", "s", p=0.001, p_opposite=0.999)
    against = V.Verdict("not reproduced", "o", p=0.985, p_opposite=0.015)  # two-sided 0.03
    claim, per = V.decide({"s": strong, "o": against})
    assert per["s"].label == "confirmed" and per["o"].label == "not reproduced"  # 0.004, then 0.03 < 0.05
    assert claim.label == "qualified"
    weak = V.Verdict("confirmed", "w", p=0.015, p_opposite=0.985)
    claim, per = V.decide({"w": weak, "o": against})  # 0.03 and 0.03: Holm's first step asks 0.025
    assert per["w"].label == per["o"].label == "inconclusive" and claim.label == "inconclusive"


def test_two_machines_agree_or_the_label_says_it_depends_on_the_machine():
    yes = V.Verdict("confirmed", "native reason")
    maybe = V.Verdict("inconclusive", "emulated reason")
    assert V.agree(yes, V.Verdict("confirmed", "other")) is yes
    assert V.agree(yes, None) is yes  # no second reading stored yet: the native one
    both = V.agree(yes, maybe)
    assert both.label == V.MACHINE == "depends on the machine"
    assert "confirmed on this machine" in both.reason and "inconclusive on the emulated second CPU" in both.reason
    assert "native reason" in both.reason and "emulated reason" in both.reason


def test_no_verdict_function_takes_a_kernel_tolerance():
    import inspect

    for f in (V.compare, V.equivalent, V.interval):
        assert not any("kernel" in p or "extra" in p for p in inspect.signature(f).parameters), f


def test_a_regime_without_p_values_still_counts_in_holms_family():
    """A regime made inconclusive by a diverged run has no p-value; it must not shrink the family and so
    lower the bar for the others."""
    weak = V.Verdict("confirmed", "w", p=0.02, p_opposite=0.98)  # two-sided 0.04: passes alone
    diverged = V.Verdict("inconclusive", "a run diverged")
    assert V.decide({"w": weak})[0].label == "confirmed"
    claim, per = V.decide({"w": weak, "d": diverged}, rule="some")
    assert per["w"].label == "inconclusive" and per["d"].label == "inconclusive"  # 0.04 x 2 > 0.05
