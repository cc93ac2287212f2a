"""The Kimi k1.5 length reward (Kimi Team 2025, section 2.3.3), pinned to hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_env import length_reward


def test_hand_computed_values() -> None:
    # min_len = 2, max_len = 10: lambda = 0.5 - (len - 2) / 8  ->  0.5, 0.25, 0.0, -0.25, -0.5
    lengths = [2, 4, 6, 8, 10, 2, 4, 6, 8, 10]
    correct = [True] * 5 + [False] * 5
    expected = [0.5, 0.25, 0.0, -0.25, -0.5, 0.0, 0.0, 0.0, -0.25, -0.5]
    out = length_reward(lengths, correct)
    assert out.dtype == np.float64 and out.shape == (10,)
    np.testing.assert_allclose(out, expected)


def test_hand_computed_uneven() -> None:
    # min 3, max 7: lambda(5) = 0.5 - 2/4 = 0; lambda(4) = 0.25; lambda(6) = -0.25
    np.testing.assert_allclose(
        length_reward([3, 4, 6, 7, 5], [False, True, True, False, True]), [0.0, 0.25, -0.25, -0.5, 0.0]
    )


def test_short_correct_beats_long_correct() -> None:
    out = length_reward([3, 9, 6], [True, True, False])
    assert out[0] > out[1]
    assert out[0] == 0.5 and out[1] == -0.5


def test_long_wrong_is_punished_hardest() -> None:
    lengths = [3, 5, 9, 9]
    out = length_reward(lengths, [True, False, False, True])
    long_wrong = out[2]
    assert long_wrong == out.min() == -0.5
    # a shorter wrong answer is punished less
    assert out[1] > long_wrong


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.booleans()), min_size=1, max_size=32),
)
@settings(max_examples=200, deadline=None)
def test_properties(group: list[tuple[int, bool]]) -> None:
    lengths = [n for n, _ in group]
    correct = [c for _, c in group]
    out = length_reward(lengths, correct)
    assert out.shape == (len(group),)
    assert np.all(out >= -0.5) and np.all(out <= 0.5)
    assert np.all(out[~np.asarray(correct)] <= 0.0)  # wrong answers never earn a bonus
    if len(set(lengths)) == 1:
        assert np.all(out == 0.0)
    # among correct answers, shorter is never worse
    ok = [(n, r) for (n, c), r in zip(group, out) if c]
    for n1, r1 in ok:
        for n2, r2 in ok:
            if n1 < n2:
                assert r1 > r2


@pytest.mark.parametrize("length", [0, 1, 5, 17])
@pytest.mark.parametrize("correct", [[True, True, True], [False, True, False], [False] * 3])
def test_all_equal_lengths_give_zeros(length: int, correct: list[bool]) -> None:
    out = length_reward([length] * 3, correct)
    np.testing.assert_array_equal(out, np.zeros(3))


def test_accepts_numpy_arrays_and_empty_groups() -> None:
    out = length_reward(np.array([5, 1], dtype=np.int64), np.array([True, True]))
    np.testing.assert_allclose(out, [-0.5, 0.5])
    assert length_reward([], []).shape == (0,)


@pytest.mark.parametrize(
    "lengths, correct",
    [
        ([1, 2, 3], [True, False]),  # lengths differ
        ([[1, 2], [3, 4]], [[True, False], [True, False]]),  # 2-D
        (5, True),  # 0-D
        ([1, -2, 3], [True, True, True]),  # negative length
        ([1, float("nan"), 3], [True, True, True]),  # not finite
        ([1, float("inf")], [True, True]),
    ],
)
def test_bad_shapes_and_values_raise(lengths: object, correct: object) -> None:
    with pytest.raises(ValueError, match="lengths"):
        length_reward(lengths, correct)  # type: ignore[arg-type]


def test_the_agent_adds_the_length_term_with_its_sign_where_lengths_vary() -> None:
    # On Arithmetic every answer has 5 tokens, so the term is always zero there and a
    # wrong sign where the agent adds it went unnoticed. Here lengths vary within a group (as Countdown's
    # do): the shaped reward must be the verifier's reward PLUS length_weight * length_reward.
    from agents import GRPO, GRPOConfig
    from agents.grpo.rollout import GroupBatch

    w = 0.2
    agent = GRPO("rlvr/Arithmetic-v0", GRPOConfig(length_weight=w), policy="tabular", seed=0)
    lengths = np.array([3, 5, 7, 9, 4, 4, 4, 4])  # group 0 varies, group 1 does not
    correct = np.array([1, 1, 0, 0, 1, 0, 1, 0], dtype=np.float64)
    returns = np.where(correct > 0, 1.1, 0.1)
    n, length = len(lengths), int(lengths.max())
    batch = GroupBatch(
        obs=np.zeros((n, length, 1), dtype=np.float32), actions=np.zeros((n, length), dtype=np.int64),
        logp_old=np.zeros((n, length)), mask=(np.arange(length) < lengths[:, None]).astype(np.float64),
        returns=returns, lengths=lengths, correct=correct, well_formed=np.ones(n), group_size=4,
    )
    shaped = agent._group_rewards(batch)  # (B, G)
    # lambda = 0.5 - (len - 3) / 6: +0.5 and +1/6 for the correct answers; -1/6 and -1/2 for the wrong ones
    want0 = returns[:4] + w * np.array([0.5, 1 / 6, -1 / 6, -0.5])
    np.testing.assert_allclose(shaped[0], want0)
    np.testing.assert_allclose(shaped[1], returns[4:])  # equal lengths: no term
    assert shaped[0, 0] > shaped[0, 1] > returns[1]  # the shorter correct answer is paid more
    assert shaped[0, 3] < shaped[0, 2] < returns[2]  # the longer wrong answer is punished harder
