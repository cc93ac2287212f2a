"""Issue 17 item 14: the lab claims of the four new variants, as data for the lab to fold in.

Each claim names its paper, the statement tested, its arms (``GRPOConfig`` overrides on top of the
lab's base Countdown setting), what is measured per seed, and its verdict rule. Every rule goes
through :func:`verdict`, which says "no signal" when neither arm's held-out success interval beats the
single-answer floor (issue 17 item 9: a verdict between two arms that learned nothing means nothing).
Self-contained (no import of the lab) so the lab can take the definitions as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NewArm", "NewClaim", "NEW_CLAIMS", "no_signal", "verdict"]

#: The epochs (mu) at which SAPO's and GMPO's stability claims are tested (the lab's GSPO "high" mu).
MU_HI = 12
#: "Matches": the high-entropy arm's held-out success may trail by at most this much.
MATCH_MARGIN = 0.02


@dataclass(frozen=True)
class NewArm:
    name: str
    label: str
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewClaim:
    name: str
    paper: str
    statement: str
    measured: str  #: the per-seed number each arm is judged on (a held-out metric after training)
    rule: str  #: how the paired difference (challenger - baseline) and its interval decide
    baseline: str  #: arm name
    challenger: str  #: arm name
    arms: tuple[NewArm, ...]
    margin: float = 0.0  #: "agree" needs the interval's low end above -margin (0: strictly better)


NEW_CLAIMS: dict[str, NewClaim] = {c.name: c for c in (
    NewClaim(
        "sapo", "SAPO (Gao et al. 2025, arXiv 2511.20347)",
        "a smooth gate in place of the hard clip keeps learning stable off-policy (many epochs per batch)",
        "held-out sampled success (k = 8) after training; also train/entropy over the last quarter",
        "agree if the paired difference sapo - clip has its 95% interval above 0; disagree if below 0",
        "clip_hi", "sapo_hi",
        (NewArm("clip_hi", f"PPO clip, mu={MU_HI}", {"epochs": MU_HI}),
         NewArm("sapo_hi", f"SAPO gate (tau 1.0 / 1.05), mu={MU_HI}",
                {"epochs": MU_HI, "policy_loss": "sapo"})),
    ),
    NewClaim(
        "gmpo", "GMPO (Zhao et al. 2025, arXiv 2507.20673)",
        "the geometric mean of token ratios tolerates a wider clip (log-ratio 0.4) and learns at least as "
        "well as GRPO's arithmetic mean at mu = 12",
        "held-out sampled success (k = 8) after training; also train/clip_frac over the last quarter",
        "agree if the paired difference gmpo - grpo has its 95% interval above 0; disagree if below 0",
        "grpo_hi", "gmpo_hi",
        (NewArm("grpo_hi", f"token ratios, clip 0.2, mu={MU_HI}", {"epochs": MU_HI}),
         NewArm("gmpo_hi", f"geometric mean, log clip 0.4, mu={MU_HI}",
                {"epochs": MU_HI, "policy_loss": "geo_mean", "clip_eps": 0.4, "clip_eps_high": 0.4})),
    ),
    NewClaim(
        "passk", "pass@k training (Tang et al. 2025, arXiv 2503.19595; verl grpo_passk)",
        "crediting only each group's best answer raises held-out pass@k (k = G) over GRPO, whose "
        "objective is pass@1",
        "held-out pass@8 (8 sampled answers per prompt); also held-out sampled success (pass@1)",
        "agree if the paired pass@8 difference passk - grpo has its 95% interval above 0; disagree if below",
        "grpo", "passk",
        (NewArm("grpo", "GRPO advantage", {"advantage": "grpo"}),
         NewArm("passk", "pass@k advantage", {"advantage": "grpo_passk"})),
    ),
    NewClaim(
        "high_entropy",
        "Wang et al. 2025, \"Beyond the 80/20 Rule\" (arXiv 2506.01939; TRL top_entropy_quantile)",
        "training only on the 20% highest-entropy tokens matches or beats training on every token",
        "held-out sampled success (k = 8) after training",
        f"agree if the paired difference top20 - all has its 95% interval above -{MATCH_MARGIN}; "
        f"disagree if below -{MATCH_MARGIN}",
        "all_tokens", "top20",
        (NewArm("all_tokens", "every token", {"top_entropy_quantile": 1.0}),
         NewArm("top20", "top 20% entropy tokens", {"top_entropy_quantile": 0.2})),
        margin=MATCH_MARGIN,
    ),
)}


def no_signal(lows: list[float], floor: float) -> bool:
    """The one "no signal" rule (issue 17 item 9), for every lab claim: True when no arm's held-out
    success interval lies above the single-answer ``floor`` (``lows``: each arm's lower bound)."""
    return all(not low > floor for low in lows)  # a NaN bound (no finite runs) is no signal either


def verdict(claim: NewClaim, difference: tuple[float, float], arm_success: dict[str, tuple[float, float]],
            floor: float) -> str:
    """"agree" / "disagree" / "inconclusive" from the paired difference's 95% interval ``(low, high)``
    (challenger - baseline, in the claim's measured unit), or "no signal" when neither arm's held-out
    success interval (``arm_success[arm] = (low, high)``) lies above ``floor``, the single-answer floor
    (the held-out success of always answering the one expression that solves the most prompts)."""
    for arm in (claim.baseline, claim.challenger):
        if arm not in arm_success:
            raise ValueError(f"arm_success has no {arm!r} (claim {claim.name!r} arms: "
                             f"{[a.name for a in claim.arms]})")
    if not math.isfinite(floor):
        raise ValueError(f"floor={floor!r} must be a finite success rate")
    if no_signal([arm_success[a][0] for a in (claim.baseline, claim.challenger)], floor):
        return "no signal"
    low, high = difference
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return "inconclusive"
    if low > -claim.margin:
        return "agree"
    if high < -claim.margin:
        return "disagree"
    return "inconclusive"
