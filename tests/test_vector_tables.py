"""The lookup tables of the native vector Countdown: each equals the arithmetic it replaces."""

from __future__ import annotations

import numpy as np
import pytest

import rlvr_env.tasks.countdown.task as countdown
from rlvr_env import CountdownTask
from rlvr_env.tasks.countdown.envs import CountdownVectorEnv
from rlvr_env.tasks.countdown.draw import cached_draw_table, draw_picks, merge
from rlvr_env.tasks.countdown.programs import cached_values, evaluate
from rlvr_env.tasks.countdown.split import held_out, tuple_index

TABLE_SETTINGS = [
    dict(n_numbers=2), dict(n_numbers=3), dict(n_numbers=3, integer_division=True),
    dict(n_numbers=3, parentheses=False), dict(n_numbers=3, operators="+*"), dict(n_numbers=3, max_length=8),
    dict(n_numbers=3, number_range=(1, 13), target_range=(-50, 50)), dict(n_numbers=3, number_range=(2, 12)),
]


@pytest.mark.parametrize("kwargs", TABLE_SETTINGS)
def test_draw_table_equals_merge(kwargs: dict) -> None:
    task = CountdownTask(**kwargs)
    table = cached_draw_table(task.draw_rules)
    assert table is not None
    rng = np.random.default_rng(5)
    lo, hi = task.number_range
    numbers = rng.integers(lo, hi + 1, size=(5000, task.n_numbers))
    picks = draw_picks(rng, len(numbers), task.draw_rules)
    value, ok = merge(numbers, picks, task.draw_rules)
    index = tuple_index(numbers, task.number_range, 1 << 20)
    assert index is not None
    t_value, t_ok = table.lookup(index, picks)
    assert ok.any() and not ok.all()  # the comparison covers both verdicts
    np.testing.assert_array_equal(t_ok, ok)
    np.testing.assert_array_equal(t_value[ok], value[ok])


def test_no_draw_table_for_large_settings() -> None:
    assert cached_draw_table(CountdownTask(n_numbers=4).draw_rules) is None
    assert cached_draw_table(CountdownTask(n_numbers=3, number_range=(1, 20)).draw_rules) is None


def test_held_out_with_index_equals_without() -> None:
    rng = np.random.default_rng(2)
    numbers = rng.integers(1, 11, size=(3000, 4))
    index = tuple_index(numbers, (1, 10))
    np.testing.assert_array_equal(held_out(numbers, (1, 10), index), held_out(numbers, (1, 10)))
    assert tuple_index(numbers, (2, 10)) is None  # a number outside the range: no index


@pytest.mark.parametrize("kwargs", TABLE_SETTINGS[:4] + [dict(n_numbers=4)])
def test_sample_arrays_same_with_and_without_table(kwargs: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    task = CountdownTask(**kwargs)

    def draws() -> list[np.ndarray]:
        out = []
        for split in ("train", "test"):
            rng = np.random.default_rng(11)
            for k in (1, 300, 1024, 2500):
                out += list(task.sample_arrays(rng, split, k))
        return out

    with_table = draws()
    monkeypatch.setattr(countdown, "_TABLE_ROUND", 1 << 40)  # every round by arithmetic
    without = draws()
    for a, b in zip(with_table, without):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs", [dict(n_numbers=3), dict(n_numbers=3, integer_division=True),
                                    dict(n_numbers=3, number_range=(1, 20)),
                                    dict(n_numbers=3, operators="-/")])
def test_value_table_equals_evaluate(kwargs: dict) -> None:
    task = CountdownTask(**kwargs)
    programs = task.program_table()
    assert programs is not None
    values = cached_values(programs, task.number_range, task.grammar.integer_division)
    assert values is not None
    rng = np.random.default_rng(3)
    states = rng.choice(np.flatnonzero(programs.accept), size=4000)
    lo, hi = task.number_range
    operands = rng.integers(lo, hi + 1, size=(4000, task.n_numbers))
    expected = evaluate(programs, states, operands, task.grammar.integer_division)
    got = values.lookup(states, operands)
    assert expected[2].any() and not expected[2].all()  # rows with and without a value
    ok = ~expected[2]
    np.testing.assert_array_equal(got[2], expected[2])
    np.testing.assert_array_equal(got[0][ok], expected[0][ok])
    np.testing.assert_array_equal(got[1][ok], expected[1][ok])
    assert not got[0][~ok].any() and not got[1][~ok].any()  # 0 / 0 where there is no value


def test_no_value_table_beyond_its_limits() -> None:
    programs = CountdownTask(n_numbers=4).program_table()
    assert programs is not None
    assert cached_values(programs, (1, 10), False) is None  # 357 programs x 10**4 tuples: too many
    small = CountdownTask(n_numbers=3).program_table()
    assert small is not None and cached_values(small, (1, small.bound() + 1), False) is None


def test_vector_env_scores_outside_the_value_table() -> None:
    """A prompt outside number_range (set directly on the scorer, as no validated prompt can be) turns
    the table off: the rows are still scored exactly, by the programs."""
    env = CountdownVectorEnv(num_envs=2, n_numbers=3)
    env.reset(options={"prompt": ((9, 4, 5), 14)})
    assert env.scorer._values is not None
    env.scorer.set_prompts(np.array([1]), {"prompt_numbers": np.array([[90, 4, 5]]),
                                           "prompt_target": np.array([95])})
    assert env.scorer._values is None
    for col in ([0, 0], [3, 3], [2, 2], [9, 9]):  # n0 + n2
        obs, rewards, terminated, truncated, info = env.step(np.array(col))
    assert rewards.tolist() == [1.1, 1.1]
