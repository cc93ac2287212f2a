"""Metrics that cannot hide: greedy vs sampled success and pass@k on hand-built policies whose sampled
success is known exactly."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401
from agents.evaluation import answer_correct, evaluation_prompts, success_report

# Arithmetic tokens: "2" 0, "3" 1, "5" 2, "+" 3, "*" 4; one correct answer per target.
_ANSWER = {10: (0, 3, 1, 3, 2), 11: (0, 4, 1, 3, 2), 13: (0, 4, 2, 3, 1), 17: (0, 3, 1, 4, 2),
           30: (0, 4, 1, 4, 2)}
_TARGETS = (10, 11, 13, 17, 30)


def _coin_policy(q: float, seed: int):
    """Writes the target's correct answer, except that its first token is, with probability 1 - q, an
    operator (so the answer is malformed): sampled success q, greedy success 1 iff q > 0.5."""
    rng = np.random.default_rng(seed)

    def predict(obs: np.ndarray, masks: np.ndarray | None, deterministic: bool) -> np.ndarray:
        target = np.array(_TARGETS)[obs[:, :5].argmax(axis=1)]
        pos = obs[:, 14:].reshape(len(obs), 5, 5).sum(axis=2).sum(axis=1).astype(int)
        out = np.array([_ANSWER[int(t)][p] for t, p in zip(target, pos)])
        first = pos == 0
        if deterministic:
            ok = np.full(len(obs), q > 0.5)
        else:
            ok = rng.random(len(obs)) < q
        out[first & ~ok] = 3
        return out

    return predict


@pytest.mark.parametrize("q", [0.25, 0.75])
def test_report_of_a_policy_with_known_sampled_success(q: float) -> None:
    env = gym.make("rlvr/Arithmetic-v0")
    prompts = evaluation_prompts(env, "train") * 10  # 200 prompts x 16 samples
    report = success_report(_coin_policy(q, 0), env, prompts=prompts, k=16)
    assert report.greedy == (1.0 if q > 0.5 else 0.0)
    # 3,200 Bernoulli(q) answers: the mean is within 4 standard errors of q
    assert abs(report.sampled - q) < 4 * np.sqrt(q * (1 - q) / 3200)
    expected_pass = 1 - (1 - q) ** 16
    assert abs(report.pass_at_k - expected_pass) < 4 * np.sqrt(expected_pass * (1 - expected_pass) / 200) + 1e-3
    assert report.per_prompt_sampled.shape == (200,)
    assert report.min_prompt_sampled < q < report.per_prompt_sampled.max()


def test_a_lucky_argmax_is_exposed_by_sampled_success() -> None:
    """The failure sampled success exists to expose: greedy 1.0 while one sampled answer in ~two is right."""
    env = gym.make("rlvr/Arithmetic-v0", split="test")
    report = success_report(_coin_policy(0.55, 1), env, "test", k=32)
    assert report.greedy == 1.0
    assert report.sampled < 0.7


def test_masked_evaluation_passes_each_episodes_mask() -> None:
    env = gym.make("rlvr/Countdown-v0", n_numbers=3)
    prompts = evaluation_prompts(env, "test", n_prompts=10)
    seen = []
    rng = np.random.default_rng(0)

    def predict(obs: np.ndarray, masks: np.ndarray | None, deterministic: bool) -> np.ndarray:
        assert masks is not None and masks.shape == (len(obs), env.action_space.n)
        seen.append(masks)
        return np.array([rng.choice(np.flatnonzero(m)) for m in masks])

    correct = answer_correct(predict, env, prompts, deterministic=False, masked=True, repeats=3)
    assert correct.shape == (10, 3) and seen
    with pytest.raises(ValueError, match="repeats"):
        answer_correct(predict, env, prompts, deterministic=False, repeats=0)
    with pytest.raises(ValueError, match="k=0"):
        success_report(predict, env, k=0)
