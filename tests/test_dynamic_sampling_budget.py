"""Dynamic sampling stops an iteration's extra rounds at the step budget, counting the current
iteration's own rounds (a mutation run found that the round-limit test could not tell)."""

from __future__ import annotations

import pytest

import rlvr_env  # noqa: F401
from agents import GRPO, GRPOConfig


def test_dynamic_sampling_stops_at_the_step_budget_before_the_round_limit(monkeypatch) -> None:
    # Every group ties (no reward at all), so only the step budget can end the rounds before the
    # round limit of 50. One round is B x G episodes of 5 tokens = 2 x 4 x 5 = 40 steps.
    model = GRPO("rlvr/Arithmetic-v0", GRPOConfig(group_size=4, prompts_per_iter=2, dynamic_sampling=True,
                                                  dynamic_sampling_max_rounds=50, length_weight=0.0),
                 seed=0, env_kwargs={"format_weight": 0.0, "accuracy_weight": 0.0})
    monkeypatch.setattr(model, "_train_epochs", lambda *a: pytest.fail("a tied batch must not be trained on"))
    model.learn(100)  # rounds end once 0 + 40 k >= 100: k = 3
    assert model.iterations == 1
    assert model.last_metrics["rollout/sampling_rounds"] == 3.0
    assert model.num_timesteps == 120
    model.learn(50, reset_num_timesteps=False)  # goal 170: 120 + 40 k >= 170 at k = 2
    assert model.iterations == 2
    assert model.last_metrics["rollout/sampling_rounds"] == 2.0
    assert model.num_timesteps == 200
