"""The four new lab claims are runnable settings and their verdict says "no signal" below the floor."""

from __future__ import annotations

import pytest

from agents import GRPOConfig
from benchmarks.lab_claims_new import NEW_CLAIMS, verdict


@pytest.mark.parametrize("name", sorted(NEW_CLAIMS))
def test_every_arm_is_a_valid_config(name: str) -> None:
    claim = NEW_CLAIMS[name]
    names = [a.name for a in claim.arms]
    assert claim.baseline in names and claim.challenger in names
    for arm in claim.arms:
        GRPOConfig.preset("countdown", **arm.overrides)  # the lab's base preset; raises if impossible


def test_verdict_rules() -> None:
    passk = NEW_CLAIMS["passk"]
    learned = {"grpo": (0.30, 0.40), "passk": (0.35, 0.45)}
    assert verdict(passk, (0.01, 0.08), learned, floor=0.06) == "agree"
    assert verdict(passk, (-0.08, -0.01), learned, floor=0.06) == "disagree"
    assert verdict(passk, (-0.02, 0.03), learned, floor=0.06) == "inconclusive"
    # issue 17 item 9: both arms at 0.06 held-out, the floor 0.06: nothing learned, no verdict
    assert verdict(passk, (0.0, 0.01), {"grpo": (0.05, 0.07), "passk": (0.05, 0.07)}, 0.06) == "no signal"
    high_entropy = NEW_CLAIMS["high_entropy"]  # "matches or beats": a small loss inside the margin agrees
    arms = {"all_tokens": (0.3, 0.4), "top20": (0.3, 0.4)}
    assert verdict(high_entropy, (-0.015, 0.02), arms, 0.06) == "agree"
    assert verdict(high_entropy, (-0.10, -0.03), arms, 0.06) == "disagree"
    with pytest.raises(ValueError, match="arm_success has no 'top20'"):
        verdict(high_entropy, (0.0, 0.1), {"all_tokens": (0.3, 0.4)}, 0.06)
