"""What the Countdown study compares: the env, the ablation's variants and the thresholds its tables read."""

from __future__ import annotations

from typing import Any

ENV_ID = "rlvr/Countdown-v0"
TASK = {"n_numbers": 3}
K = 16
THRESHOLD = 0.3  # held-out greedy success for the steps-to-threshold comparison
MIN_LENGTH = 2.0  # one number + EOS

#: name -> (preset, GRPOConfig overrides, env kwargs on top of TASK, note). Rows are cumulative.
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {
    "mlp preset, no masks": ("mlp", {"action_masks": False}, {}, "the starting point"),
    "+ masks": ("mlp", {}, {}, "grammar-constrained decoding"),
    "+ length term off": ("mlp", {"length_weight": 0.0}, {}, "k1.5 term paid short wrong answers"),
    "+ dyn. sampling, clip-higher, beta 0": ("countdown", {}, {}, "the countdown preset, bits obs"),
    "+ relations obs": ("countdown", {}, {"observation": "relations"}, "pair residuals (no search)"),
    "+ lookahead obs": ("countdown", {}, {"observation": "lookahead"}, "one-step search in the obs"),
}
#: the warm start's GRPO: the Countdown preset with the papers' KL weight, so the clone is an anchor
WARM_CONFIG = {"beta": 0.04}
BEST = "+ lookahead obs"

#: Behaviour-cloning epochs of the warm start.
BC_EPOCHS = 20
