"""Chapter 5's deciding round in words (``views.pages.ch5_round3``): each label round 3's rule can give reads
as what it is, on made-up readings, so that the lesson's sentence is not written for one outcome only.

The stored runs give the round's seeds, steps and scale; the readings (each machine's verdict and detectable
effect) are made up here.
"""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from andrea.evidence import verdict
from andrea.views.pages import ch5_round3 as r3


def _reading(label: str, mean: float, det: float, emulated: str | None = None):
    """A made-up round-3 deciding comparison: this machine's label and the emulated CPU's (the same unless
    given), ReLU minus GELU's mean, and the effect each machine's seeds would show."""
    iv = verdict.Interval(mean, mean - 0.003, mean + 0.003, 16)
    native = verdict.Verdict(label, "made up", iv)
    other = NS(verdict=verdict.Verdict(emulated or label, "made up", iv), detectable=det)
    both = verdict.agree(native, other.verdict)
    return NS(verdict=both, native=native, detectable=det, emulated=other, seeds=tuple(range(11, 27)))


@pytest.fixture
def made_up(monkeypatch):
    def use(label: str, mean: float, det: float, emulated: str | None = None):
        dec = _reading(label, mean, det, emulated)
        real_ev = r3.ev
        monkeypatch.setattr(r3, "r3", lambda: (dec, None, None))
        monkeypatch.setattr(r3, "r3_pairs", lambda: [mean + 0.001 * (-1) ** k for k in range(14)] + [-mean, -mean])
        monkeypatch.setattr(r3, "ev", lambda name: NS(verdict=dec.verdict) if name == r3.ROUND3 else real_ev(name))
        return r3.relu_sentence(), r3.shazeer_sentence()

    return use


def test_gelu_lower_reads_confirmed(made_up):
    said, shazeer = made_up("confirmed", 0.011, 0.004)
    assert "GELU ended below ReLU on 14 of 16 seeds, by 0.011 nats per byte" in said
    assert said.endswith("the claim that GELU trains to a lower loss is confirmed.")
    assert "agrees in direction" in shazeer


def test_relu_lower_reads_not_reproduced(made_up):
    said, shazeer = made_up("not reproduced", -0.020, 0.004)
    assert "ReLU ended below GELU on 14 of 16 seeds, by 0.020 nats per byte" in said and "is not reproduced" in said
    assert "not a law" in shazeer


def test_within_the_noise_reads_inconclusive_with_what_would_have_shown(made_up):
    said, shazeer = made_up("inconclusive", 0.002, 0.010)
    assert (
        "within the seeds' noise" in said and "+0.002" in said and "0.010 would have shown four times in five" in said
    )
    assert "{term}`inconclusive`" in said
    assert "does not contradict Shazeer" in shazeer and "0.010" in shazeer


def test_too_noisy_for_the_claimed_size_reads_not_testable(made_up):
    said, _ = made_up("not testable", 0.002, 0.030)
    assert "varied too much" in said and "0.014" in said and "0.030" in said and "{term}`not testable`" in said


def test_machines_that_disagree_are_both_named(made_up):
    said, _ = made_up("confirmed", 0.011, 0.012, emulated="inconclusive")
    assert "this machine: confirmed; the emulated second CPU: inconclusive" in said
    assert "{term}`depends on the machine`" in said


def test_the_sentences_differ_by_label(made_up):
    cases = [("confirmed", 0.011, 0.004), ("not reproduced", -0.02, 0.004), ("inconclusive", 0.002, 0.01)]
    said = {made_up(*c)[0] for c in cases} | {made_up("not testable", 0.002, 0.03)[0]}
    assert len(said) == 4
