"""Warm start: behaviour cloning on a tiny task, the clone as GRPO's reference, and the same actor in
SB3 PPO / MaskablePPO."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401
from agents.bc import behaviour_clone, copy_actor_to_sb3, demonstrations, warm_start
from agents.grpo.config import GRPOConfig
from agents.grpo import GRPO

TINY = {"n_numbers": 2, "number_range": (1, 4), "target_range": (1, 16), "operators": "+*"}


def test_demonstrations_replay_the_tasks_solutions() -> None:
    env = gym.make("rlvr/Countdown-v0", n_numbers=3)
    demos = demonstrations(env, 20, seed=0)
    assert len(demos.prompts) == 20 and all(env.unwrapped.task.split_of(p) == "train" for p in demos.prompts)
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()  # solutions are grammatical
    with pytest.raises(ValueError, match="not a correct answer"):
        demonstrations(env, 1, 0, answers=[(demos.prompts[0], [0, env.unwrapped.task.eos_id])])


def test_behaviour_cloning_learns_a_tiny_task_and_becomes_the_reference() -> None:
    model = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("mlp"), policy="mlp", seed=0, env_kwargs=TINY)
    before = model.success("train", k=1, n_prompts=100).greedy
    demos = demonstrations(model.env, 400, seed=1)
    losses = warm_start(model, demos, epochs=60)
    assert losses[-1] < 0.5 * losses[0]
    after = model.success("train", k=8, n_prompts=100)
    assert after.greedy >= 0.8 > before + 0.3
    # the reference is now the clone: KL to it is zero before any RL step
    with torch.no_grad():
        x = model.policy._input(demos.obs[:50])
        assert torch.equal(model.policy.net(x), model.policy.reference(x))


def test_bc_refuses_bad_settings() -> None:
    model = GRPO("rlvr/Countdown-v0", policy="mlp", seed=0, env_kwargs=TINY)
    demos = demonstrations(model.env, 5, seed=0)
    with pytest.raises(ValueError, match="epochs"):
        behaviour_clone(model.policy, demos, epochs=0)
    with pytest.raises(ValueError, match="policy='mlp'"):
        warm_start(GRPO("rlvr/Arithmetic-v0", policy="tabular"), demos)


def test_the_cloned_actor_initialises_maskable_ppo_with_a_fresh_critic() -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    model = GRPO("rlvr/Countdown-v0", policy="mlp", seed=0, env_kwargs=TINY)
    warm_start(model, demonstrations(model.env, 50, seed=0), epochs=5)
    for cls in (MaskablePPO, PPO):
        sb3 = cls("MlpPolicy", gym.make("rlvr/Countdown-v0", **TINY), seed=0)
        critic = [p.detach().clone() for p in sb3.policy.value_net.parameters()]
        copy_actor_to_sb3(model.policy, sb3)
        obs = np.random.default_rng(0).random((8, model.observation_space.shape[0])).astype(np.float32)
        with torch.no_grad():
            dist = sb3.policy.get_distribution(torch.as_tensor(obs))
            sb3_logits = dist.distribution.logits.numpy()
        ours = model.policy.logits(obs)
        ours = ours - np.log(np.exp(ours).sum(1, keepdims=True))
        np.testing.assert_allclose(sb3_logits, ours, atol=1e-5)
        assert all(torch.equal(a, b) for a, b in zip(critic, sb3.policy.value_net.parameters()))
