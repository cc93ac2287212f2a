"""Text-mode envs: one-step episodes, prompt text in, completion string out; the token env's reward and
info."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import rlvr_env  # noqa: F401 - registers the envs
from rlvr_env.completions import AnswerFormat
from rlvr_env.text_env import TextAsArrays

IDS = ["rlvr/CountdownText-v0", "rlvr/ArithmeticText-v0"]
TOKEN_IDS = {"rlvr/CountdownText-v0": "rlvr/Countdown-v0", "rlvr/ArithmeticText-v0": "rlvr/Arithmetic-v0"}


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_checker_passes(env_id: str) -> None:
    gym_check_env(gym.make(env_id).unwrapped)
    gym_check_env(gym.make(env_id, split="test").unwrapped)


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_checker_needs_arrays_and_passes_through_the_array_view(env_id: str) -> None:
    # SB3's checker asserts that every observation of a non-Dict/Tuple space is a NumPy array and runs
    # np.isnan on actions: a Text space cannot pass it, whatever the env does. Pinned here so a change
    # in SB3 shows up; the array view of the same env passes.
    with pytest.raises(AssertionError, match="must be a numpy array"):
        sb3_check_env(gym.make(env_id).unwrapped)
    sb3_check_env(TextAsArrays(gym.make(env_id)))


@pytest.mark.parametrize("env_id", IDS)
def test_same_prompts_reward_and_info_as_the_token_env(env_id: str) -> None:
    text_env = gym.make(env_id)
    token_env = gym.make(TOKEN_IDS[env_id])
    task = token_env.unwrapped.task
    rng = np.random.default_rng(0)
    for seed in range(15):
        text, info = text_env.reset(seed=seed)
        _, tinfo = token_env.reset(seed=seed)
        assert info["prompt"] == tinfo["prompt"] and info["split"] == tinfo["split"] == "train"
        assert isinstance(text, str) and text_env.observation_space.contains(text)
        for n in map(str, info["prompt"].numbers):
            assert n in text
        assert str(info["prompt"].target) in text
        # A random token answer (masked, so mostly well-formed) and its text through the text env.
        token_env.reset(seed=seed)
        tokens = []
        done = False
        while not done:
            mask = token_env.unwrapped.action_masks()
            tok = int(rng.choice(np.flatnonzero(mask)))
            tokens.append(tok)
            _, reward, term, trunc, tinfo = token_env.step(tok)
            done = term or trunc
        answer = task.decode(tokens, info["prompt"])
        text_env.reset(seed=seed)
        _, treward, term, trunc, xinfo = text_env.step(f"Let me think. <answer>{answer}</answer>")
        assert (term, trunc) == (True, False)
        if not (tinfo["reason"] or "").startswith("no end-of-sequence"):
            assert treward == reward
            for key in ("reward_parts", "expression", "value", "reason", "correct", "well_formed", "prompt"):
                assert xinfo[key] == tinfo[key], key
        assert set(xinfo) == set(tinfo)


def test_reset_replays_a_prompt_and_validates() -> None:
    env = gym.make("rlvr/CountdownText-v0", n_numbers=3)
    text, info = env.reset(options={"prompt": ((7, 9, 1), 70)})
    assert info["prompt"].numbers == (7, 9, 1) and "70" in text
    _, reward, *_ = env.step("<answer>7*(9+1)</answer>")
    assert reward == pytest.approx(1.1)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"seed": 1})
    with pytest.raises(ValueError, match="must be 3 integers"):
        env.reset(options={"prompt": ((7, 9), 70)})


def test_protocol_errors() -> None:
    env = gym.make("rlvr/ArithmeticText-v0").unwrapped
    with pytest.raises(ResetNeeded):
        env.step("<answer>2+3*5</answer>")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="not a completion"):
        env.step(17)
    env.step("whatever")
    with pytest.raises(ResetNeeded):
        env.step("<answer>2+3*5</answer>")
    with pytest.raises(ValueError, match="split"):
        gym.make("rlvr/ArithmeticText-v0", split="valid")


@pytest.mark.parametrize("completion", [
    "<answer>__import__('os').getpid()*0+30</answer>", "<answer>2**3</answer>", "x" * 1_000_000,
    "<answer>5*2*3", "<answer>٥*2*3</answer>", "",
])
def test_hostile_completions_pay_nothing(completion: str) -> None:
    env = gym.make("rlvr/ArithmeticText-v0")
    env.reset(options={"prompt": ((2, 3, 5), 30)})
    _, reward, term, _, info = env.step(completion)
    assert reward == 0.0 and term and info["reason"]


def test_answer_format_and_weights_are_arguments() -> None:
    env = gym.make("rlvr/ArithmeticText-v0", answer_format=AnswerFormat(whole=True), format_weight=0.0,
                   render_mode="ansi")
    env.reset(options={"prompt": ((2, 3, 5), 17)})
    _, reward, *_ = env.step("2+3*5")
    assert reward == 1.0
    assert "reward 1.0 (correct)" in env.render()


def test_array_view_round_trips_text() -> None:
    env = TextAsArrays(gym.make("rlvr/ArithmeticText-v0"), max_chars=32)
    obs, info = env.reset(seed=3)
    assert obs.dtype == np.uint8 and bytes(obs[obs > 0]).decode().startswith("Write an arithmetic")
    prompt = info["prompt"]
    answer = next(e for e in ("2+3*5", "2*3+5", "2+3+5", "3*5+2", "2*3*5", "2*5+3") if
                  rlvr_env.verify(e, prompt.numbers, prompt.target).correct)
    action = np.zeros(32, dtype=np.int64)
    code = f"<answer>{answer}</answer>".encode()
    action[: len(code)] = list(code)
    assert env.step(action)[1] == pytest.approx(1.1)
    with pytest.raises(ValueError, match="integer character codes"):
        env.step(np.zeros(5, dtype=np.int64))
