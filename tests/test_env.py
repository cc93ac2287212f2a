"""The registered environment: checkers, determinism, prompt replay, pickling, episode protocol,
exhaustive verifier counts, splits, input validation, and an SB3 PPO smoke run."""

from __future__ import annotations

import itertools
import os
import pickle
import re
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded

import rlvr_env
from rlvr_env import ArithmeticEnv, ArithmeticTask, Prompt
from rlvr_env.tasks.expression.arithmetic import PERMUTATIONS, TARGETS

ENV_ID = "rlvr/Arithmetic-v0"
REPO = Path(__file__).resolve().parents[1]
VOCAB = ("2", "3", "5", "+", "*")
TOKEN = {s: i for i, s in enumerate(VOCAB)}


def ids(text: str) -> list[int]:
    """Token ids of a 5-character answer such as '2+3*5'."""
    return [TOKEN[c] for c in text]


@pytest.fixture
def env() -> Iterator[gym.Env]:
    e = gym.make(ENV_ID)
    yield e
    e.close()


def run_episode(env: gym.Env, actions: list[int]) -> list[tuple]:
    """All step results of one episode (the caller has reset)."""
    return [env.step(a) for a in actions]


# -- registration ----------------------------------------------------------------------------------------
def test_make_after_import() -> None:
    env = gym.make(ENV_ID)
    assert isinstance(env.unwrapped, ArithmeticEnv)
    assert env.spec is not None and env.spec.id == ENV_ID


def test_make_with_module_prefix_needs_no_prior_import() -> None:
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'rlvr_env' not in sys.modules\n"
        "env = gym.make('rlvr_env:rlvr/Arithmetic-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert obs.shape == (39,), obs.shape\n"
        "env2 = gym.make('rlvr/Arithmetic-v0')  # registered by the import gym.make did\n"
        "print(type(env.unwrapped).__name__, type(env2.unwrapped).__name__, info['prompt'])\n"
    )
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], cwd=REPO, env=environ,
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ArithmeticEnv ArithmeticEnv Prompt(")


def test_reimport_does_not_warn() -> None:
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(rlvr_env)


# -- checkers ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("render_mode", [None, "ansi"])
def test_gymnasium_check_env_without_warnings(render_mode: str | None) -> None:
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(ENV_ID, render_mode=render_mode).unwrapped)


@pytest.mark.parametrize("unwrap", [True, False])
def test_sb3_check_env_without_warnings(unwrap: bool) -> None:
    from stable_baselines3.common.env_checker import check_env

    env = gym.make(ENV_ID)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped if unwrap else env, warn=True)


# -- determinism and replay ------------------------------------------------------------------------------
def test_same_seed_same_episode() -> None:
    actions = np.random.default_rng(7).integers(5, size=5 * 20).tolist()
    runs: list[list[tuple[object, ...]]] = []
    for _ in range(2):
        env = gym.make(ENV_ID)
        obs, info = env.reset(seed=123)
        trace: list[tuple[object, ...]] = [(obs.tolist(), info["prompt"])]
        for k in range(20):
            if k:
                obs, info = env.reset()
                trace.append((obs.tolist(), info["prompt"]))
            for o, r, te, tr, inf in run_episode(env, actions[5 * k: 5 * k + 5]):
                trace.append((o.tolist(), r, te, tr, inf.get("expression"), inf.get("reward_parts")))
        runs.append(trace)
    assert runs[0] == runs[1]


def test_different_seeds_draw_different_prompts(env: gym.Env) -> None:
    prompts = {env.reset(seed=s)[1]["prompt"] for s in range(50)}
    assert len(prompts) > 5


@pytest.mark.parametrize("as_tuple", [False, True])
def test_prompt_replay(env: gym.Env, as_tuple: bool) -> None:
    obs, info = env.reset(seed=3)
    prompt = info["prompt"]
    hash(prompt)  # the GRPO contract: prompts are hashable
    replay = (prompt.numbers, prompt.target) if as_tuple else prompt
    for seed in (None, 99):
        obs2, info2 = env.reset(seed=seed, options={"prompt": replay})
        np.testing.assert_array_equal(obs, obs2)
        assert info2["prompt"] == prompt
        assert info2["split"] == info["split"] == "train"


def test_replay_of_a_held_out_prompt_from_a_train_env(env: gym.Env) -> None:
    held_out = ArithmeticTask().prompts("test")[0]
    _, info = env.reset(options={"prompt": held_out})
    assert info["prompt"] == held_out and info["split"] == "test"


def test_replay_accepts_lists_and_numpy_integers(env: gym.Env) -> None:
    a, _ = env.reset(options={"prompt": ((2, 3, 5), 17)})
    b, _ = env.reset(options={"prompt": [np.array([2, 3, 5]).tolist(), np.int64(17)]})
    c, _ = env.reset(options={"prompt": ((np.int64(2), np.int32(3), 5), 17)})
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("steps_before", [0, 2, 5])
def test_pickle_round_trip(steps_before: int) -> None:
    env = gym.make(ENV_ID, render_mode="ansi")
    env.reset(seed=11)
    for a in ids("5*2*3")[:steps_before]:
        env.step(a)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.unwrapped.prompt == env.unwrapped.prompt  # type: ignore[attr-defined]
    assert clone.render() == env.render()
    if steps_before < 5:
        rest = ids("5*2*3")[steps_before:]
        pairs = zip(run_episode(env, rest), run_episode(clone, rest))
        for (o1, r1, te1, tr1, i1), (o2, r2, te2, tr2, i2) in pairs:
            np.testing.assert_array_equal(o1, o2)
            assert (r1, te1, tr1, i1) == (r2, te2, tr2, i2)
    else:
        with pytest.raises(ResetNeeded):
            clone.step(0)
    # The random stream survives pickling too.
    assert clone.reset()[1]["prompt"] == env.reset()[1]["prompt"]


def test_observation_is_a_fresh_array(env: gym.Env) -> None:
    obs0, _ = env.reset(seed=0)
    snapshot = obs0.copy()
    obs1 = env.step(0)[0]
    assert obs1 is not obs0
    np.testing.assert_array_equal(obs0, snapshot)  # the env did not write into a returned array
    obs1[:] = 7.0  # nor does it read from one
    obs2 = env.step(3)[0]
    assert obs2.max() == 1.0 and obs2 is not obs1


# -- the episode -------------------------------------------------------------------------------------------
def test_types_and_episode_protocol(env: gym.Env) -> None:
    obs, info = env.reset(seed=0, options={"prompt": ((2, 3, 5), 17)})
    assert obs.dtype == np.float32 and obs.shape == env.observation_space.shape
    assert obs in env.observation_space
    assert set(info) >= {"prompt", "split"}
    for k, a in enumerate(ids("2+3*5")):
        obs, reward, terminated, truncated, info = env.step(a)
        assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
        assert obs in env.observation_space
        assert not truncated
        if k < 4:
            assert reward == 0.0 and not terminated and info == {}
    assert terminated and reward == pytest.approx(1.1)
    assert info["reward_parts"] == {"accuracy": 1.0, "format": 0.1}
    assert sum(info["reward_parts"].values()) == reward
    assert info["expression"] == "2+3*5" and info["value"] == Fraction(17)
    assert info["reason"] is None and info["correct"] is True and info["well_formed"] is True
    assert info["length"] == 5 and info["prompt"] == Prompt((2, 3, 5), 17)


@pytest.mark.parametrize(
    "answer, reward, well_formed, value, reason, expression",
    [
        ("2*3+5", 0.1, True, 11, "not the target", "2*3+5"),
        # Adjacent number tokens are two numbers, written apart in the expression, never one literal.
        ("23+5*", 0.0, False, None, "unexpected '3' at token 1: an operator was expected", "2 3+5*"),
        ("2+2*5", 0.0, False, 12, "used 2 times", "2+2*5"),
        ("+2*35", 0.0, False, None, "unary", "+2*3 5"),
        ("5*32+", 0.0, False, None, "an operator was expected", "5*3 2+"),
    ],
)
def test_final_info_for_wrong_answers(
    env: gym.Env, answer: str, reward: float, well_formed: bool, value: int | None, reason: str,
    expression: str,
) -> None:
    env.reset(options={"prompt": ((2, 3, 5), 17)})
    *_, (_, r, terminated, _, info) = run_episode(env, ids(answer))
    assert terminated and r == pytest.approx(reward)
    assert sum(info["reward_parts"].values()) == pytest.approx(r)
    assert info["well_formed"] is well_formed and info["correct"] is False
    assert info["value"] == value and reason in info["reason"]
    assert info["expression"] == expression and info["length"] == 5


def test_observation_encodes_prompt_and_prefix(env: gym.Env) -> None:
    obs, _ = env.reset(options={"prompt": ((3, 2, 5), 30)})
    layout = env.unwrapped.obs_layout  # type: ignore[attr-defined]
    assert obs[layout["target"]].tolist() == [0, 0, 0, 0, 1]
    assert obs[layout["numbers"]].reshape(3, 3).argmax(1).tolist() == [1, 0, 2]
    assert obs[layout["prefix"]].sum() == 0
    for k, a in enumerate(ids("5*2*3")):
        obs = env.step(a)[0]
        prefix = obs[layout["prefix"]].reshape(5, 5)
        assert prefix[: k + 1].argmax(1).tolist() == ids("5*2*3")[: k + 1]
        assert prefix[k + 1:].sum() == 0


def test_render_ansi() -> None:
    env = gym.make(ENV_ID, render_mode="ansi")
    env.reset(options={"prompt": ((2, 3, 5), 17)})
    assert env.render() == "numbers: 2 3 5 | target: 17 | answer: "
    env.step(TOKEN["2"])
    env.step(TOKEN["+"])
    assert env.render() == "numbers: 2 3 5 | target: 17 | answer: 2 +"
    for a in ids("3*5"):
        env.step(a)
    assert env.render() == "numbers: 2 3 5 | target: 17 | answer: 2 + 3 * 5 [done]"
    quiet = gym.make(ENV_ID)
    quiet.reset(seed=0)
    with pytest.warns(UserWarning, match=r"without a render mode.*render_mode='ansi'"):
        assert quiet.render() is None  # no render_mode: nothing to render, and a warning says so


@pytest.mark.parametrize("env_id", [ENV_ID, "rlvr/Countdown-v0"])
def test_render_without_a_render_mode_warns_as_gymnasium_does(env_id: str) -> None:
    # Gymnasium's own environments warn through gymnasium.logger when render() has nothing to draw.
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    with pytest.warns(UserWarning, match=re.escape(f"render() was called on {env_id} without a render mode")):
        assert env.render() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loud = gym.make(env_id, render_mode="ansi")
        loud.reset(seed=0)
        assert isinstance(loud.render(), str)  # with a mode: text, no warning


def test_exhaustive_answers_on_every_target() -> None:
    # All 5^5 token sequences, per target, through the env: 24 well-formed, and as many correct as
    # there are well-formed answers with that value (the lesson: 17 = 2+3*5 is hit by 4 of 24).
    expected_correct = {10: 6, 11: 4, 13: 4, 17: 4, 30: 6}
    env = ArithmeticEnv()
    numbers = PERMUTATIONS[0]
    for target in TARGETS:
        counts: Counter[str] = Counter()
        total_reward = 0.0
        for seq in itertools.product(range(5), repeat=5):
            env.reset(options={"prompt": (numbers, target)})
            for a in seq:
                _, reward, terminated, _, info = env.step(a)
            assert terminated
            counts["well_formed"] += info["well_formed"]
            counts["correct"] += info["correct"]
            total_reward += float(reward)
        assert counts["well_formed"] == 24, target
        assert counts["correct"] == expected_correct[target], target
        assert total_reward == pytest.approx(24 * 0.1 + expected_correct[target])
    assert sum(expected_correct.values()) == 24


# -- splits --------------------------------------------------------------------------------------------------
def test_splits() -> None:
    task = ArithmeticTask()
    train, test = task.prompts("train"), task.prompts("test")
    assert len(train) == 20 and len(test) == 10
    assert not set(train) & set(test)
    assert len(set(train) | set(test)) == 30
    assert set(train) | set(test) == {Prompt(p, t) for p in PERMUTATIONS for t in TARGETS}
    assert ArithmeticTask().prompts("train") == train and ArithmeticTask().prompts("test") == test
    for target in TARGETS:
        assert sum(p.target == target for p in train) == 4
        assert sum(p.target == target for p in test) == 2
    for perm in PERMUTATIONS:  # every number order is seen in training
        assert any(p.numbers == perm for p in train)
    assert all(task.split_of(p) == "train" for p in train)
    assert all(task.split_of(p) == "test" for p in test)


@pytest.mark.parametrize("split, size", [("train", 20), ("test", 10)])
def test_env_draws_only_from_its_split(split: str, size: int) -> None:
    env = gym.make(ENV_ID, split=split)
    seen = set()
    env.reset(seed=0)
    for _ in range(400):
        _, info = env.reset()
        assert info["split"] == split
        seen.add(info["prompt"])
    assert seen == set(ArithmeticTask().prompts(split))
    assert len(seen) == size


# -- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "action, exc, text",
    [
        (5, ValueError, "action 5"),
        (-1, ValueError, "action -1"),
        (np.int64(17), ValueError, "action 17"),
        (1.0, TypeError, "1.0"),
        (True, TypeError, "True"),
        ("2", TypeError, "'2'"),
        (None, TypeError, "None"),
        (np.array([1]), ValueError, "shape (1,)"),
        (np.array([[1]]), ValueError, "shape (1, 1)"),
        (np.array(1.0), TypeError, "array(1.)"),
    ],
    ids=repr,
)
def test_bad_actions_raise_naming_the_value(action: object, exc: type, text: str) -> None:
    env = ArithmeticEnv()
    env.reset(seed=0)
    with pytest.raises(exc) as err:
        env.step(action)
    assert text in str(err.value)
    # A refused action changes nothing: the episode goes on from where it was.
    assert env.step(0)[2] is False


def test_valid_numpy_actions() -> None:
    env = ArithmeticEnv()
    env.reset(seed=0)
    for a in (np.int64(0), np.array(3), np.uint8(1), np.int32(4), 2):
        env.step(a)
    assert env.render_mode is None and env._done


@pytest.mark.parametrize("wrapped", [True, False])
def test_step_before_reset(wrapped: bool) -> None:
    env = gym.make(ENV_ID) if wrapped else ArithmeticEnv()
    with pytest.raises(ResetNeeded, match="reset"):
        env.step(0)


def test_step_after_episode_end(env: gym.Env) -> None:
    env.reset(seed=0)
    run_episode(env, ids("2+3*5"))
    with pytest.raises(ResetNeeded, match="ended"):
        env.step(0)
    with pytest.raises(ResetNeeded):
        env.unwrapped.step(0)
    env.reset()
    env.step(0)  # a reset starts a new episode


@pytest.mark.parametrize(
    "prompt, text",
    [
        (((2, 3, 4), 12), "(2, 3, 4)"),
        (((2, 3, 5), 12), "12"),
        (((2, 3, 5), 25), "25"),
        ("abc", "'abc'"),
        (((2, 3), 17), "(2, 3)"),
        (((2, 3, 5, 5), 17), "(2, 3, 5, 5)"),
        (((2, 3, 5), 17.0), "17.0"),
        (((2, 3, 5), True), "True"),
        (((2.0, 3, 5), 17), "2.0"),
        (("235", 17), "'235'"),
        ((2, 3, 5), "(2, 3, 5)"),
        (None, "None"),
        (17, "17"),
    ],
    ids=repr,
)
def test_unknown_or_malformed_prompt_raises(env: gym.Env, prompt: object, text: str) -> None:
    with pytest.raises(ValueError) as err:
        env.reset(options={"prompt": prompt})
    assert text in str(err.value)


@pytest.mark.parametrize(
    "options, text",
    [({"promt": ((2, 3, 5), 17)}, "promt"), ({"prompt": ((2, 3, 5), 17), "x": 1}, "'x'"), ([1], "[1]")],
)
def test_unknown_reset_option_raises(env: gym.Env, options: object, text: str) -> None:
    with pytest.raises(ValueError) as err:
        env.reset(options=options)  # type: ignore[arg-type]
    assert text in str(err.value)


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"accuracy_weight": float("nan")}, "nan"),
        ({"format_weight": float("inf")}, "inf"),
        ({"accuracy_weight": -float("inf")}, "-inf"),
        ({"format_weight": "0.1"}, "'0.1'"),
        ({"accuracy_weight": None}, "None"),
        ({"accuracy_weight": True}, "True"),
        ({"split": "validation"}, "'validation'"),
        ({"split": None}, "None"),
        ({"render_mode": "human"}, "'human'"),
        ({"render_mode": "rgb_array"}, "'rgb_array'"),
    ],
    ids=repr,
)
def test_bad_kwargs_raise_naming_the_value(kwargs: dict[str, object], text: str) -> None:
    with pytest.raises(ValueError) as err:
        gym.make(ENV_ID, **kwargs)  # type: ignore[arg-type]
    assert text in str(err.value)
    with pytest.raises(ValueError) as err:
        ArithmeticEnv(**kwargs)  # type: ignore[arg-type]
    assert text in str(err.value)


def test_weights_are_env_kwargs() -> None:
    env = gym.make(ENV_ID, accuracy_weight=2, format_weight=0.0)
    env.reset(options={"prompt": ((2, 3, 5), 17)})
    *_, (_, reward, _, _, info) = run_episode(env, ids("2+3*5"))
    assert reward == 2.0 and info["reward_parts"] == {"accuracy": 2.0, "format": 0.0}


# -- an SB3 agent trains on it as it is ---------------------------------------------------------------------
def test_sb3_ppo_learns_without_error() -> None:
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    env = gym.make(ENV_ID)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0, device="cpu", verbose=0)
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(action)
