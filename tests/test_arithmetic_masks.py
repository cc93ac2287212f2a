"""``rlvr/Arithmetic-v0`` keeps its all-ones mask by default (its committed
results stay valid for their id) and ``grammar_mask=True`` gives the real grammar mask; a masked GRPO asked to
predict without masks warns instead of silently decoding unmasked."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401
from agents import GRPO, GRPOConfig
from rlvr_env import ArithmeticTask, Prompt, RewardWeights

PROMPT = Prompt((2, 3, 5), 17)
MASKED = {"grammar_mask": True}


def _grammar_prefix_masks() -> dict[tuple[int, ...], np.ndarray]:
    """Brute force: for every prefix, the tokens after which some well-formed answer still follows
    (every token when none does), read from the verifier over all 5^5 answers."""
    task = ArithmeticTask()
    good = [a for a in itertools.product(range(5), repeat=5)
            if task.score(PROMPT, list(a), RewardWeights()).well_formed]
    assert len(good) == 24
    out = {}
    for t in range(5):
        for prefix in itertools.product(range(5), repeat=t):
            nxt = {a[t] for a in good if a[:t] == prefix}
            out[prefix] = np.array([tok in nxt or not nxt for tok in range(5)])
    return out


def test_v0_mask_allows_every_token_and_says_so() -> None:
    env = gym.make("rlvr/Arithmetic-v0")
    env.reset(seed=0)
    for token in (0, 0, 3, 4, 1):  # even through a malformed answer
        assert env.unwrapped.action_masks().all()
        env.step(token)
    assert not env.unwrapped.task.grammar_masked
    model = GRPO("rlvr/Arithmetic-v0", seed=0)
    assert model.use_masks and not model.masks_constrain  # all-ones masks: no "grammar-masked" label


def test_grammar_mask_is_the_grammar_in_the_env_and_the_vector_env() -> None:
    expected = _grammar_prefix_masks()
    env = gym.make("rlvr/Arithmetic-v0", grammar_mask=True)
    assert env.unwrapped.task.grammar_masked
    prefixes = list(expected)
    venv = gym.make_vec("rlvr/Arithmetic-v0", num_envs=len(prefixes), vectorization_mode="vector_entry_point",
                        autoreset_mode="Disabled", grammar_mask=True)
    venv.reset(options={"prompt": PROMPT})
    for prefix in prefixes:
        env.reset(options={"prompt": PROMPT})
        for tok in prefix:
            env.step(tok)
        np.testing.assert_array_equal(env.unwrapped.action_masks(), expected[prefix], err_msg=str(prefix))
    for t in range(5):  # the vector env: every row its own prefix of length t
        rows = [p for p in prefixes if len(p) == t]
        sub = gym.make_vec("rlvr/Arithmetic-v0", num_envs=len(rows), vectorization_mode="vector_entry_point",
                           grammar_mask=True)
        sub.reset(options={"prompt": PROMPT})
        for col in range(t):
            sub.step(np.array([p[col] for p in rows]))
        np.testing.assert_array_equal(sub.unwrapped.action_masks(), np.stack([expected[p] for p in rows]))


def test_the_grammar_mask_changes_no_observation_or_reward() -> None:
    rng = np.random.default_rng(0)
    for episode in range(20):
        actions = rng.integers(5, size=5)
        runs = []
        for grammar_mask in (False, True):
            env = gym.make("rlvr/Arithmetic-v0", grammar_mask=grammar_mask)
            obs, info = env.reset(seed=episode)
            trace = [obs]
            for a in actions:
                obs, reward, terminated, truncated, info = env.step(int(a))
                trace += [obs, reward, terminated, truncated]
            runs.append((trace, info["reward_parts"], info["expression"]))
        for x, y in zip(runs[0][0], runs[1][0]):
            np.testing.assert_array_equal(x, y)
        assert runs[0][1:] == runs[1][1:]


@pytest.mark.parametrize("vectorized", [False, True])
def test_masked_grpo_with_the_grammar_mask_writes_only_well_formed_answers(vectorized: bool) -> None:
    model = GRPO("rlvr/Arithmetic-v0", seed=0, vectorized=vectorized, env_kwargs=MASKED)
    assert model.masks_constrain
    batch = model._runner.collect(model.policy, model.rng)
    assert batch.well_formed.all()
    unmasked = GRPO("rlvr/Arithmetic-v0", GRPOConfig(action_masks=False), seed=0, vectorized=vectorized,
                    env_kwargs=MASKED)
    assert not unmasked._runner.collect(unmasked.policy, unmasked.rng).well_formed.all()


def test_predict_without_masks_on_a_masked_model_warns_once() -> None:
    model = GRPO("rlvr/Arithmetic-v0", seed=0, env_kwargs=MASKED)
    env = gym.make("rlvr/Arithmetic-v0", grammar_mask=True)
    obs, _ = env.reset(seed=0)
    with pytest.warns(UserWarning, match="trained under grammar masks and predict"):
        model.predict(obs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(obs)  # once per model
        model.predict(obs, action_masks=env.unwrapped.action_masks())
        GRPO("rlvr/Arithmetic-v0", seed=0).predict(obs)  # v0's masks allow everything: nothing to say
        GRPO("rlvr/Arithmetic-v0", GRPOConfig(action_masks=False), seed=0, env_kwargs=MASKED).predict(obs)
