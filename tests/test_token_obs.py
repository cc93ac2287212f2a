"""The token-context observation (``observation="tokens"``, rlvr_env.token_obs): both checkers, layout,
recoverable padding and length, agreement of the single and vector env (the lockstep test in
tests/test_vector.py covers the vector env step by step)."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr_env  # noqa: F401
from rlvr_env.tasks.expression.task import ANSWER, BOS
from rlvr_env.token_obs import PAD, TokenContext, TokenContextSpace

CASES: list[tuple[str, dict[str, Any]]] = [
    ("rlvr/Arithmetic-v0", {}),
    ("rlvr/Countdown-v0", {"n_numbers": 3}),
    ("rlvr/Countdown-v0", {"n_numbers": 4, "target_range": (-50, 300), "operators": "+-*"}),
]


@pytest.mark.parametrize("env_id, kwargs", CASES)
def test_both_checkers_pass(env_id: str, kwargs: dict[str, Any]) -> None:
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, observation="tokens", **kwargs)
    check_env(env.unwrapped)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3's checker warns about spaces it would mishandle
        sb3_check_env(gym.make(env_id, observation="tokens", **kwargs))


def test_countdown_row_reads_as_text_and_labels_slots_with_answer_ids() -> None:
    env = gym.make("rlvr/Countdown-v0", n_numbers=3, observation="tokens").unwrapped
    ctx = env.token_context
    obs, info = env.reset(seed=5)
    assert info["prompt"] == rlvr_env.Prompt((7, 9, 1), 70)
    assert ctx.decode(obs) == "<bos> n0 7 n1 9 n2 1 = 7 0 <ans>"
    space = env.observation_space
    assert isinstance(space, TokenContextSpace) and space.dtype == np.int64
    assert obs.shape == (ctx.prompt_width + 8,) and space.contains(obs)
    # the prompt is left-padded: <ans> is the last prompt position, whatever the prompt's length
    assert obs[ctx.prompt_width - 1] == ANSWER and obs[0] == PAD
    assert (obs[: ctx.prompt_width] != PAD).sum() == 11 and (obs[ctx.prompt_width:] == PAD).all()
    n1 = ctx.answer_offset + env.task.vocab.index("n1")
    assert obs[list(obs).index(BOS) + 3] == n1  # the prompt's slot label is the answer's n1 token
    for t, token in enumerate((0, 5, 7, 1, 3, 2, 8, 9)):  # n0 * ( n1 + n2 ) <eos>
        obs, reward, terminated, *_ = env.step(token)
        answer = obs[env.obs_layout["answer"]]
        assert (answer != PAD).sum() == t + 1 and answer[t] == ctx.answer_offset + token
    assert reward == pytest.approx(1.1) and terminated
    assert ctx.decode(obs).endswith("<ans> n0 * ( n1 + n2 ) <eos>")


def test_prompts_of_different_lengths_share_the_answer_position() -> None:
    task = rlvr_env.CountdownTask(n_numbers=3, number_range=(1, 20), target_range=(-99, 999))
    ctx = TokenContext(task)
    rows = ctx.task.context_arrays(np.array([[1, 2, 3], [10, 20, 15]]), np.array([-7, 999]))
    assert rows.shape == (2, ctx.prompt_width) and (rows[:, -1] == ANSWER).all()
    assert ctx.decode(rows[0]) == "<bos> n0 1 n1 2 n2 3 = - 7 <ans>"
    assert ctx.decode(rows[1]) == "<bos> n0 1 0 n1 2 0 n2 1 5 = 9 9 9 <ans>"
    assert (rows[0] != PAD).sum() < (rows[1] != PAD).sum() and rows[1, 1] == BOS  # one pad: no sign


def _read_back(ctx: TokenContext, row: np.ndarray) -> tuple[list[int], int]:
    """The numbers and target written in a prompt row, parsed from its text (labels and digits)."""
    text = ctx.decode(row).split()
    assert text[0] == "<bos>" and text[-1] == "<ans>", text
    equals = text.index("=")
    numbers: list[str] = []
    for token in text[1:equals]:  # "n0 1 n1 1 0 ...": a slot label starts a number, digits follow
        if token.startswith("n"):
            numbers.append("")
        else:
            numbers[-1] += token
    return [int(x) for x in numbers], int("".join(text[equals + 1:-1]))


@pytest.mark.parametrize("target_range", [(0, 100), (-50, 50)])
def test_every_target_of_the_range_zero_included_is_written_and_read_back(target_range) -> None:
    task = rlvr_env.CountdownTask(n_numbers=3, target_range=target_range)
    ctx = TokenContext(task)
    targets = np.arange(target_range[0], target_range[1] + 1)
    numbers = np.tile([[1, 10, 7]], (len(targets), 1))
    rows = ctx.task.context_arrays(numbers, targets)
    assert (rows[:, -1] == ANSWER).all()
    for row, target in zip(rows, targets):
        assert _read_back(ctx, row) == ([1, 10, 7], target)
    zero = rows[list(targets).index(0)]
    assert ctx.decode(zero).endswith("= 0 <ans>")  # 0 is one digit, not none
    # through the env: a prompt with target 0 (10 - 9 - 1), replayed, shows its 0
    env = gym.make("rlvr/Countdown-v0", n_numbers=3, target_range=target_range, observation="tokens")
    obs, _ = env.reset(options={"prompt": rlvr_env.Prompt((1, 10, 9), 0)})
    assert env.unwrapped.token_context.decode(obs).endswith("= 0 <ans>")


def test_single_and_vector_env_give_the_same_rows_and_spaces() -> None:
    kwargs = {"n_numbers": 4, "observation": "tokens"}
    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=6, vectorization_mode="vector_entry_point", **kwargs)
    single = gym.make("rlvr/Countdown-v0", **kwargs)
    assert envs.single_observation_space == single.observation_space
    obs, info = envs.reset(seed=3)
    assert obs.dtype == np.int64 and envs.observation_space.contains(obs)
    for i in range(6):
        assert np.array_equal(single.reset(options={"prompt": info["prompt"][i]})[0], obs[i])


def test_default_observation_is_unchanged_and_bad_kind_raises() -> None:
    env = gym.make("rlvr/Countdown-v0")
    assert env.observation_space.shape == (160,) and env.observation_space.dtype == np.float32
    with pytest.raises(ValueError, match="observation='text' is not one of"):
        gym.make("rlvr/Arithmetic-v0", observation="text")
    with pytest.raises(ValueError, match="observation='text' is not one of"):
        gym.make_vec("rlvr/Arithmetic-v0", num_envs=2, vectorization_mode="vector_entry_point",
                     observation="text")


# -- whole-number tokens (number_tokens="whole") ----------------------------------------------------
WHOLE = {"n_numbers": 3, "observation": "tokens", "number_tokens": "whole"}


def test_whole_number_tokens_write_each_value_as_one_token_and_pass_both_checkers() -> None:
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make("rlvr/Countdown-v0", **WHOLE).unwrapped
    ctx = env.token_context
    obs, info = env.reset(seed=5)
    assert info["prompt"] == rlvr_env.Prompt((7, 9, 1), 70)  # the same draw as with digit tokens
    assert ctx.decode(obs) == "<bos> n0 [7] n1 [9] n2 [1] = [70] <ans>"
    # specials and digits, then one token per value 0..100 (the largest target), then the answer's
    assert ctx.answer_offset == 16 + 101 and ctx.vocab[16] == "[0]" and ctx.vocab[116] == "[100]"
    assert ctx.prompt_width == 10 and obs[ctx.prompt_width - 1] == ANSWER
    check_env(env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(gym.make("rlvr/Countdown-v0", **WHOLE))
    # the answer side is unchanged: slot tokens, appended at answer_offset + action
    obs, reward, *_ = env.step(0)
    assert obs[ctx.prompt_width] == ctx.answer_offset + 0


@pytest.mark.parametrize("target_range", [(0, 120), (-50, 50)])
def test_whole_number_tokens_read_back_every_target_and_a_sign(target_range) -> None:
    task = rlvr_env.CountdownTask(n_numbers=3, target_range=target_range, number_tokens="whole")
    ctx = TokenContext(task)
    targets = np.arange(target_range[0], target_range[1] + 1)
    rows = ctx.task.context_arrays(np.tile([[1, 10, 7]], (len(targets), 1)), targets)
    for row, target in zip(rows, targets):
        text = ctx.decode(row).split()
        sign = -1 if text[-3] == "-" else 1
        assert text[:7] == ["<bos>", "n0", "[1]", "n1", "[10]", "n2", "[7]"] and text[-1] == "<ans>"
        assert sign * int(text[-2].strip("[]")) == target


def test_whole_number_tokens_single_and_vector_env_agree() -> None:
    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=6, vectorization_mode="vector_entry_point", **WHOLE)
    single = gym.make("rlvr/Countdown-v0", **WHOLE)
    assert envs.single_observation_space == single.observation_space
    obs, info = envs.reset(seed=3)
    assert envs.observation_space.contains(obs)
    for i in range(6):
        assert np.array_equal(single.reset(options={"prompt": info["prompt"][i]})[0], obs[i])


@pytest.mark.parametrize("kwargs, message", [
    ({"number_tokens": "whole"}, "needs observation='tokens', not 'bits'|not 'features'"),
    ({"number_tokens": "bpe", "observation": "tokens"}, "number_tokens='bpe' is not one of"),
    ({"number_tokens": "whole", "observation": "tokens", "target_range": (1, 5000)},
     "reach 5000: use number_tokens='digits'"),
])
def test_whole_number_tokens_bad_settings_name_the_value(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        gym.make("rlvr/Countdown-v0", n_numbers=3, **kwargs)
    with pytest.raises(ValueError, match=message):
        gym.make_vec("rlvr/Countdown-v0", num_envs=2, vectorization_mode="vector_entry_point", n_numbers=3,
                     **kwargs)
