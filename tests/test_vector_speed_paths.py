"""The fast paths of the native vector Countdown stay exact: the mask automaton
against the prefix loop, the answer-shape programs (and the batch verifier that uses them) against
``verify``, and the vector env against the single env in lockstep over many random settings and seeds
(N = 3, 4, 5)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlvr_env import CountdownTask, verify
from rlvr_env.tasks.expression.batch_verify import batch_verify
from rlvr_env.tasks.countdown.masks import MaskAutomaton
from rlvr_env.tasks.countdown.programs import by_programs, count_shapes, evaluate
from rlvr_env.tasks.countdown.envs import CountdownVectorEnv

SETTINGS: list[dict[str, Any]] = [
    {"n_numbers": 3},
    {"n_numbers": 4},
    {"n_numbers": 5, "target_range": (1, 1000)},
    {"n_numbers": 3, "number_use": "exactly_once"},
    {"n_numbers": 4, "operators": "+*", "parentheses": False, "max_length": 9},
    {"n_numbers": 5, "integer_division": True, "operators": "+-/", "target_range": (1, 1000)},
    {"n_numbers": 4, "max_length": 20, "number_range": (1, 30), "target_range": (1, 500)},
]


@pytest.mark.parametrize("kwargs", SETTINGS, ids=[str(k) for k in SETTINGS])
def test_automaton_masks_equal_the_prefix_loop(kwargs: dict[str, Any]) -> None:
    """Random prefixes, half of them ignoring the mask: the table's mask is the loop's mask."""
    task = CountdownTask(**kwargs)
    automaton = task.mask_automaton()
    assert automaton is not None and automaton.masks[1].tolist() == [t == task.eos_id for t in range(len(task.vocab))]
    rng = np.random.default_rng(0)
    b, length, v = 3000, task.max_length, len(task.vocab)
    tokens = np.zeros((b, length), dtype=np.int64)
    lengths = rng.integers(0, length + 1, size=b)
    state = np.zeros(b, dtype=np.int64)
    unmasked = rng.random(b) < 0.5
    for col in range(length):
        legal = np.argmax(rng.random((b, v)) * automaton.masks[state], axis=1)
        pick = np.where(unmasked, rng.integers(v, size=b), legal)
        act = col < lengths
        tokens[act, col] = pick[act]
        state = np.where(act, automaton.next[state, pick], state)
    assert np.array_equal(automaton.masks[state], task.action_masks_arrays(tokens, lengths))


def test_large_settings_fall_back_to_the_loop() -> None:
    task = CountdownTask(n_numbers=4)
    assert MaskAutomaton.build(task.mask_rules, max_states=10) is None


@pytest.mark.parametrize("seed", range(6))
def test_random_lockstep_over_many_seeds(seed: int) -> None:
    """A random setting (N = 3, 4, 5, random rules and weights) per seed; the vector env and single
    envs on the same prompts and actions (masked, unmasked and mixed) agree on every transition."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(3, 6))
    ops = "".join(op for op in "+-*/" if rng.random() < 0.7) or "+"
    parens = bool(rng.random() < 0.7)
    kwargs: dict[str, Any] = {
        "n_numbers": n,
        "operators": ops,
        "parentheses": parens,
        "number_use": "exactly_once" if rng.random() < 0.3 else "at_most_once",
        "integer_division": bool(rng.random() < 0.3),
        "target_range": (1, 1000) if n >= 4 else (1, 100),
        "accuracy_weight": float(rng.choice([1.0, 2.0])),
        "format_weight": float(rng.choice([0.1, 0.5])),
    }
    try:
        task = CountdownTask(**{k: v for k, v in kwargs.items() if not k.endswith("_weight")})
    except ValueError:  # an infeasible random setting (no prompt can be drawn): take a plain one
        kwargs.update(operators="+-*/", parentheses=True, integer_division=False)
        task = CountdownTask(**{k: v for k, v in kwargs.items() if not k.endswith("_weight")})
    b = 24
    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=b, vectorization_mode="vector_entry_point", **kwargs)
    assert isinstance(envs, CountdownVectorEnv)
    singles = [gym.make("rlvr/Countdown-v0", **kwargs).unwrapped for _ in range(b)]
    _, info = envs.reset(seed=seed)
    for i, env in enumerate(singles):
        env.reset(options={"prompt": info["prompt"][i]})
    mode = rng.random(b)  # per row: < 0.4 masked, < 0.7 unmasked, else mixed
    steps = 0
    for _ in range(80):
        masks = envs.action_masks()
        legal = np.argmax(rng.random(masks.shape) * masks, axis=1)
        anything = rng.integers(len(task.vocab), size=b)
        mixed = np.where(rng.random(b) < 0.8, legal, anything)
        actions = np.where(mode < 0.4, legal, np.where(mode < 0.7, anything, mixed))
        obs, rewards, terminated, truncated, info = envs.step(actions)
        for i, env in enumerate(singles):
            assert np.array_equal(env.action_masks(), masks[i])
            o, r, te, tr, single = env.step(int(actions[i]))
            assert (r, te, tr) == (rewards[i], terminated[i], truncated[i])
            if te or tr:
                steps += 1
                final = info["final_info"]
                assert np.array_equal(o, info["final_obs"][i])
                assert (single["correct"], single["well_formed"], single["length"]) == (
                    final["correct"][i], final["well_formed"][i], final["length"][i])
                value = single["value"]
                got = (int(final["value_num"][i]), int(final["value_den"][i]))
                assert got == ((value.numerator, value.denominator) if value is not None else (0, 0))
                new = (tuple(info["prompt_numbers"][i].tolist()), int(info["prompt_target"][i]))
                o, _ = env.reset(options={"prompt": new})
            assert np.array_equal(o, obs[i])
    assert steps >= b  # many episodes ended


PROGRAM_SETTINGS: list[dict[str, Any]] = [
    {"n_numbers": 2, "max_length": 4},
    {"n_numbers": 3},
    {"n_numbers": 3, "number_use": "exactly_once", "integer_division": True},
    {"n_numbers": 4},
    {"n_numbers": 4, "operators": "+*", "parentheses": False, "max_length": 9},
    {"n_numbers": 4, "number_range": (30000, 40000), "target_range": (1, 1000)},  # beyond the int64 bound
    {"n_numbers": 3, "number_range": (999990, 999999), "target_range": (1, 1000)},
]


@pytest.mark.parametrize("kwargs", PROGRAM_SETTINGS, ids=[str(k) for k in PROGRAM_SETTINGS])
def test_program_table_counts_and_batch_programs_agree_with_verify(kwargs: dict[str, Any]) -> None:
    """The shape trie has the states :func:`count_shapes` predicts, every masked walk reaches an
    accepting state, and ``batch_verify`` (whose programs path scores those walks) equals ``verify`` on
    masked walks, walks that reuse a slot and token soup."""
    task = CountdownTask(**kwargs)
    table = task.program_table()
    assert table is not None and table.num_states == count_shapes(task.mask_rules) + 2
    automaton = task.mask_automaton()
    assert automaton is not None
    rng = np.random.default_rng(7)
    b, length, v = 600, task.max_length, len(task.vocab)
    numbers, targets, _ = task.sample_arrays(rng, "train", b)
    tokens = np.full((b, length), task.eos_id, dtype=np.int64)
    state = np.zeros(b, dtype=np.int64)
    shape = np.zeros(b, dtype=np.int64)
    live = np.ones(b, dtype=bool)
    for col in range(length):
        pick = np.argmax(rng.random((b, v)) * automaton.masks[state], axis=1)
        tokens[live, col] = pick[live]
        shape = np.where(live, table.next[shape, pick], shape)
        state = np.where(live, automaton.next[state, pick], state)
        live &= pick != task.eos_id
    assert table.accept[shape].all()  # every masked answer is a complete shape
    tokens[:120, :3] = [0, task.vocab.index(task.operators[0]), 0]  # a slot used twice
    tokens[120:240] = rng.integers(v, size=(120, length))
    got = batch_verify(tokens, numbers, targets, table=task.table, grammar=task.grammar, programs=by_programs)
    for i in range(b):
        text = task.table.text(tokens[i].tolist(), task.table.values(numbers[i : i + 1])[0])
        want = verify(text, numbers[i].tolist(), int(targets[i]), grammar=task.grammar)
        assert (got.reward[i], got.correct[i]) == (want.reward, want.correct)
        assert got.well_formed[i] == want.well_formed
        value = want.value
        assert got.values()[i] == value, (text, value)


def test_program_evaluation_is_exact_at_its_bound() -> None:
    """Operands at the int64 bound multiply and divide exactly (the fast path's precondition)."""
    task = CountdownTask(n_numbers=4)
    table = task.program_table()
    assert table is not None
    m = table.bound()
    assert (1 << 3) * m**4 < 1 << 63 <= (1 << 3) * (m + 1) ** 4
    vocab = task.vocab
    ids = [vocab.index(t) for t in ("n0", "*", "n1", "*", "n2", "-", "n3", "<eos>")]
    shape = 0
    for t in ids:
        shape = int(table.next[shape, t])
    assert table.accept[shape]
    operands = np.array([[m, m - 1, m - 2, m - 3]], dtype=np.int64)
    num, den, err = evaluate(table, np.array([shape]), operands, integer_division=False)
    assert not err[0] and den[0] == 1 and int(num[0]) == m * (m - 1) * (m - 2) - (m - 3)


@pytest.mark.parametrize("number_range,n", [((1, 10), 4), ((3, 9), 3), ((1, 100), 2), ((1, 10), 6)])
def test_split_table_is_the_hash_rule(number_range: tuple[int, int], n: int) -> None:
    """The split's lookup table (small ranges) and the hash agree on every row, in range or not."""
    from rlvr_env.tasks.countdown.split import HELD_OUT_BUCKETS, held_out, held_out_one, multiset_hash

    rng = np.random.default_rng(n)
    lo, hi = number_range
    rows = rng.integers(lo, hi + 1, size=(3000, n))
    rule = multiset_hash(rows) % np.uint64(HELD_OUT_BUCKETS) == 0
    assert np.array_equal(held_out(rows, number_range), rule)
    assert 0.1 < rule.mean() < 0.3
    outside = rows.copy()
    outside[0, 0] = hi + 5  # a row outside the range: the whole call is hashed
    assert np.array_equal(held_out(outside, number_range),
                          multiset_hash(outside) % np.uint64(HELD_OUT_BUCKETS) == 0)
    assert held_out(rows[:0], number_range).shape == (0,)
    for row, expected in zip(outside[:200].tolist(), held_out(outside[:200], number_range).tolist()):
        assert held_out_one(tuple(row), number_range) == expected  # row 0 lies outside the range


@pytest.mark.parametrize("kwargs", [{}, {"number_range": (2, 7), "target_range": (-40, 40)},
                                    {"n_numbers": 3, "observation": "relations"},
                                    {"number_range": (1, 9000), "target_range": (1, 10**6)}])
def test_prompt_code_tables_equal_the_arithmetic(kwargs: dict[str, Any]) -> None:
    """encode_arrays gathers from tables for small ranges: the same float32 values as the arithmetic."""
    task = CountdownTask(**kwargs)
    numbers, targets, _ = task.sample_arrays(np.random.default_rng(1), "train", 400)
    fast = task.encode_arrays(numbers, targets)
    slow = fast.copy()
    lo, tlo = task.number_range[0], task.target_range[0]
    task.features._codes(numbers - lo, targets - tlo, slow)
    assert np.array_equal(fast, slow)
    assert (task.features._code_tables() is None) == (kwargs.get("number_range") == (1, 9000))


def test_batch_verify_without_programs_is_the_same_verdict() -> None:
    """The program shortcut (what the Countdown family passes) and the general path give one verdict."""
    from benchmarks.speed.vector import workload
    from rlvr_env.tasks.expression.tokens import TokenTable

    task = CountdownTask()
    tokens, numbers, targets, _ = workload(task, 900, 3)
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    fast = batch_verify(tokens, numbers, targets, table=table, grammar=task.grammar, programs=by_programs)
    slow = batch_verify(tokens, numbers, targets, table=table, grammar=task.grammar)
    for name in ("reward", "correct", "well_formed", "has_value", "value_num", "value_den"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert fast.correct.any() and not fast.well_formed.all()
