"""Countdown for learning agents: the observation options every contender can use, and a fast smoke run
of GRPO's Countdown preset (the full study is ``python -m benchmarks.countdown``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env
from agents.grpo.config import GRPOConfig
from agents.grpo import GRPO


@pytest.mark.parametrize("observation", ["relations", "lookahead"])
def test_observation_options_match_between_single_and_vector_env(observation: str) -> None:
    kwargs = {"n_numbers": 3, "observation": observation}
    env = gym.make("rlvr/Countdown-v0", **kwargs)
    venv = gym.make_vec("rlvr/Countdown-v0", num_envs=4, vectorization_mode="vector_entry_point", **kwargs)
    prompts = [env.reset(seed=s)[1]["prompt"] for s in range(4)]
    vobs, _ = venv.reset(options={"prompt": prompts})
    for i, p in enumerate(prompts):
        np.testing.assert_array_equal(env.reset(options={"prompt": p})[0], vobs[i])
    plain = gym.make("rlvr/Countdown-v0", n_numbers=3)
    layout = env.unwrapped.obs_layout
    assert env.observation_space.shape[0] > plain.observation_space.shape[0]
    # the "bits" segments are unchanged; the new ones come after them
    o_rel, _ = env.reset(options={"prompt": prompts[0]})
    o_bits, _ = plain.reset(options={"prompt": prompts[0]})
    np.testing.assert_array_equal(o_rel[: layout["number_onehot"].start],
                                  o_bits[: layout["number_onehot"].start])
    assert o_rel[layout["number_onehot"]].sum() == 3 and o_rel[layout["target_onehot"]].sum() == 1


def test_pair_residuals_name_the_number_that_finishes() -> None:
    env = gym.make("rlvr/Countdown-v0", n_numbers=3, observation="relations")
    obs, _ = env.reset(options={"prompt": ((3, 4, 2), 14)})  # 3*4 = 12, 14 - 12 = 2
    res = obs[env.unwrapped.obs_layout["pair_residuals"]].reshape(3, 6, 6, 10)
    # pair (0, 1), result "a*b" (index 1), finish "r+c" (index 0): c = 2 -> one-hot index 2 - 1 = 1
    assert res[0, 1, 0].argmax() == 1 and res[0, 1, 0].sum() == 1
    # an inexact division has no result: 3/4 (index 4) gives nothing
    assert res[0, 4].sum() == 0


def test_lookahead_marks_every_solvable_prompt_and_no_unsolvable_one() -> None:
    env = gym.make("rlvr/Countdown-v0", n_numbers=3, observation="lookahead")
    layout = env.unwrapped.obs_layout
    search = slice(layout["number_hits"].start, layout["pair_matches"].stop)
    for seed in range(200):  # generated prompts are solvable by construction
        obs, _ = env.reset(seed=seed)
        assert obs[search].any()
    obs, info = env.reset(seed=3)
    task = env.unwrapped.task
    assert np.array_equal(task.encode_prompt(info["prompt"])[search], obs[search])
    # an unsolvable prompt cannot be replayed (reset refuses it), so encode it directly
    assert not task.encode_prompt(rlvr_env.Prompt((1, 1, 1), 100))[search].any()


def test_unknown_observation_is_refused() -> None:
    with pytest.raises(ValueError, match="observation='pixels' is not one of"):
        gym.make("rlvr/Countdown-v0", observation="pixels")


def test_countdown_preset_smoke_run_learns_above_the_random_legal_floor() -> None:
    """30k steps of the Countdown preset on the lookahead observation (seconds): held-out greedy success
    above a random legal answer's ~5%, no NaN, every answer grammatical."""
    model = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("countdown"), policy="mlp", seed=0,
                 env_kwargs={"n_numbers": 3, "observation": "lookahead"})
    model.learn(30_000)
    m = model.last_metrics
    # masks are grammar only: a division by zero (e.g. n0/(n1-n2) with n1 = n2) is the one way to fail
    assert m["rollout/format_violations"] < 0.05 and np.isfinite(m["train/entropy"])
    report = model.success("test", k=4, n_prompts=100)
    assert report.greedy > 0.15 and report.sampled > 0.1
