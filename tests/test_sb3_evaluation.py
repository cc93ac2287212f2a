"""The evaluators score any SB3-shaped model through ``sb3_predictor``, and a recurrent
model (sb3-contrib's RecurrentPPO) gets its LSTM state carried within an episode and reset per episode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401
from agents.evaluation import evaluation_prompts, greedy_success, sb3_predictor, success_report

torch = pytest.importorskip("torch")
sb3_contrib = pytest.importorskip("sb3_contrib")


class Spy:
    """Delegates ``predict`` to a model and records each call's actions, state and episode_start."""

    def __init__(self, model: object) -> None:
        self.model = model
        self.calls: list[tuple[np.ndarray, object, np.ndarray | None, object]] = []

    def predict(self, obs, state=None, episode_start=None, deterministic=False):  # noqa: ANN001
        actions, new_state = self.model.predict(obs, state=state, episode_start=episode_start,
                                                deterministic=deterministic)
        self.calls.append((np.array(actions), state, None if episode_start is None
                           else np.array(episode_start), new_state))
        return actions, new_state


def _recurrent(env: gym.Env, seed: int):  # noqa: ANN202
    torch.set_num_threads(1)
    return sb3_contrib.RecurrentPPO("MlpLstmPolicy", env, n_steps=64, seed=seed,
                                    policy_kwargs={"lstm_hidden_size": 16})


def _manual_answers(model, env: gym.Env, prompts, carry: bool) -> list[list[int]]:  # noqa: ANN001
    """Greedy answers one episode at a time, as RecurrentPPO's docs drive it (or state-less)."""
    answers = []
    for p in prompts:
        obs, _ = env.reset(options={"prompt": p})
        state, start, tokens, done = None, np.ones(1, dtype=bool), [], False
        while not done:
            if carry:
                action, state = model.predict(obs[None], state=state, episode_start=start,
                                              deterministic=True)
            else:
                action, _ = model.predict(obs[None], deterministic=True)
            start = np.zeros(1, dtype=bool)
            tokens.append(int(action[0]))
            obs, _, terminated, truncated, _ = env.step(tokens[-1])
            done = terminated or truncated
        answers.append(tokens)
    return answers


def test_greedy_success_takes_sb3_predictor() -> None:
    """The README's pairing: ``greedy_success(sb3_predictor(model), env, "test")`` (a TypeError before)."""
    env = gym.make("rlvr/Arithmetic-v0")
    ppo = pytest.importorskip("stable_baselines3").PPO("MlpPolicy", env, n_steps=64, seed=0)
    score = greedy_success(sb3_predictor(ppo), env, "test")
    assert score == greedy_success(lambda o: ppo.predict(o, deterministic=True)[0], env, "test")
    assert 0.0 <= score <= 1.0


def test_recurrent_state_is_carried_and_reset_per_episode() -> None:
    env = gym.make("rlvr/Arithmetic-v0")
    model = _recurrent(env, seed=1)
    prompts = evaluation_prompts(env, "train")
    spy = Spy(model)
    greedy_success(sb3_predictor(spy), env, "train")
    steps = env.unwrapped.task.max_length
    assert len(spy.calls) == steps  # lockstep: one call per token position for all episodes
    for t, (_, state, start, _) in enumerate(spy.calls):
        assert start is not None and start.shape == (len(prompts),)
        assert start.all() if t == 0 else not start.any()  # episode_start only on the first step
        if t == 0:
            assert state is None
        else:  # the state handed in is the one the previous step returned, for every episode
            for given, returned in zip(state, spy.calls[t - 1][3]):
                np.testing.assert_array_equal(given, returned)
    evaluated = np.stack([c[0] for c in spy.calls], axis=1).tolist()  # (P, L) tokens
    assert evaluated == _manual_answers(model, env, prompts, carry=True)
    # The carried state matters: state-less calls answer differently (so the old adapter's score
    # described another policy).
    assert evaluated != _manual_answers(model, env, prompts, carry=False)


def test_recurrent_state_follows_episodes_of_different_lengths() -> None:
    """Countdown answers end at different steps: each episode keeps its own state as others finish."""
    env = gym.make("rlvr/Countdown-v0", n_numbers=3)
    model = _recurrent(env, seed=0)
    prompts = evaluation_prompts(env, "test", n_prompts=12)
    spy = Spy(model)
    rep = success_report(sb3_predictor(spy), env, prompts=prompts, k=1, masked=False)
    assert 0.0 <= rep.greedy <= 1.0
    first = [c for c in spy.calls if c[2] is not None and c[2].all()]
    assert len(first) == 2  # one start per batch of episodes (the greedy one, then the sampled one)
