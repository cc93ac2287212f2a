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


def _recording_maskable(env: gym.Env):  # noqa: ANN202
    """A tiny untrained MaskablePPO whose ``predict`` records the masks it gets and checks that every
    action it returns is allowed by them (the recorder keeps the model's signature)."""
    import functools

    torch.set_num_threads(1)
    model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=64, seed=0,
                                    policy_kwargs={"net_arch": [16]})
    original = model.predict
    seen: list[np.ndarray | None] = []

    @functools.wraps(original)
    def predict(observation, state=None, episode_start=None, deterministic=False,  # noqa: ANN001,ANN202
                action_masks=None):
        actions, new_state = original(observation, state=state, episode_start=episode_start,
                                      deterministic=deterministic, action_masks=action_masks)
        seen.append(None if action_masks is None else np.asarray(action_masks))
        if action_masks is not None:
            rows = np.arange(len(actions))
            assert np.asarray(action_masks)[rows, np.asarray(actions)].all(), "a masked action was emitted"
        return actions, new_state

    model.predict = predict  # type: ignore[method-assign]
    return model, seen


def test_maskable_ppo_is_scored_under_its_masks() -> None:
    """``greedy_success(sb3_predictor(model), env)`` of a MaskablePPO passes the env's masks at every
    step (as it trains), so it equals the masked report; an unmasked score must be asked for."""
    env = gym.make("rlvr/Countdown-v0", n_numbers=3)
    model, seen = _recording_maskable(env)
    prompts = evaluation_prompts(env, "test", n_prompts=24)
    assert sb3_predictor(model).masked
    score = greedy_success(sb3_predictor(model), env, prompts=prompts)
    assert seen and all(m is not None for m in seen)
    assert score == success_report(sb3_predictor(model), env, prompts=prompts, k=1, masked=True).greedy
    seen.clear()
    greedy_success(sb3_predictor(model, masked=False), env, prompts=prompts)
    assert seen and all(m is None for m in seen)
    seen.clear()
    success_report(sb3_predictor(model), env, prompts=prompts, k=1, masked=False)
    assert seen and all(m is None for m in seen)


def test_unmasked_models_stay_unmasked_and_refuse_masks() -> None:
    env = gym.make("rlvr/Arithmetic-v0")
    ppo = pytest.importorskip("stable_baselines3").PPO("MlpPolicy", env, n_steps=64, seed=0)
    assert not sb3_predictor(ppo).masked
    with pytest.raises(ValueError, match="PPO.predict takes no action_masks"):
        sb3_predictor(ppo, masked=True)
    with pytest.raises(ValueError, match="PPO.predict takes no action_masks"):
        greedy_success(sb3_predictor(ppo), env, "test", masked=True)
    with pytest.raises(ValueError, match="masked='yes' must be True, False or None"):
        sb3_predictor(ppo, masked="yes")  # type: ignore[arg-type]


def test_success_eval_callback_scores_maskable_ppo_masked() -> None:
    from agents.eval_callback import SuccessEvalCallback

    env = gym.make("rlvr/Countdown-v0", n_numbers=3)
    model, seen = _recording_maskable(env)
    callback = SuccessEvalCallback(env, eval_freq=1, k=1, n_prompts=8)
    callback.init_callback(model)
    callback.report()
    assert seen and all(m is not None for m in seen)
