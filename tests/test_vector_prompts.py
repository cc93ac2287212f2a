"""Where the native vector env's prompts come from: the finite pool, the sampler's buffer, the encodings."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_env import Prompt
from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import Task
from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask
from rlvr_env.token_obs import TokenContext
from rlvr_env.vector_prompts import _MIN_CHUNK, PromptSource


def _source(task: Task, tokens: bool, split: str = "train", num_envs: int = 3,
            arrays: bool = False) -> tuple[PromptSource, TokenContext | None]:
    ctx = TokenContext(task) if tokens else None
    width = ctx.prompt_width if ctx is not None else task.prompt_dim
    return PromptSource(task, ctx, width, split, num_envs), ctx


def _encodings(task: Task, ctx: TokenContext | None, prompts: list[object]) -> np.ndarray:
    encode = task.encode_prompt if ctx is None else ctx.encode_prompt
    return np.stack([encode(p) for p in prompts])


class FiniteDigits(DigitsTask):
    """Digits with a listed prompt set (a finite task on the generic path): 1-digit sums train,
    sums with a 2-digit operand test."""

    def __init__(self) -> None:
        super().__init__(max_digits=2, train_digits=1)
        self._listed = {"train": tuple(DigitsPrompt(a, "+", b) for a in range(3) for b in range(3)),
                        "test": tuple(DigitsPrompt(10 + a, "+", b) for a in range(2) for b in range(2))}

    def prompts(self, split: str) -> tuple[DigitsPrompt, ...]:
        return self._listed[split]


class Int32Arithmetic(ArithmeticTask):
    """Arithmetic whose listed prompts hold NumPy int32 numbers (as a user's task built from arrays may)."""

    def prompts(self, split: str) -> tuple[Prompt, ...]:
        return tuple(Prompt(tuple(np.int32(n) for n in p.numbers), np.int32(p.target))
                     for p in super().prompts(split))


@pytest.mark.parametrize("tokens", [False, True], ids=["features", "tokens"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_sampled_prompts_are_the_sampler_s_in_order_with_their_encodings(tokens: bool, split: str) -> None:
    task = DigitsTask()
    source, ctx = _source(task, tokens, split)
    assert source.pool is None
    assert source.split_rows.dtype == np.int64 and source.split_rows.shape == (0,)
    batch, encoded = source.draw(np.random.default_rng(0), 5)
    values = batch["prompt"]
    expected = task.sample_prompts(np.random.default_rng(0), split, 5)
    assert values.dtype == object and values.shape == (5,) and values.tolist() == expected
    assert {task.split_of(p) for p in values} == {split}
    assert encoded.dtype == (np.int64 if tokens else np.float32) and encoded.shape == (5, source.width)
    assert np.array_equal(encoded, _encodings(task, ctx, expected))


def test_the_generator_is_drawn_from_only_when_the_buffer_runs_out() -> None:
    task = DigitsTask()
    source, _ = _source(task, tokens=False)
    rng = np.random.default_rng(1)
    first = source.draw(rng, 100)
    state = rng.bit_generator.state
    rest = source.draw(rng, _MIN_CHUNK - 100)  # exactly what is left in the buffer
    assert rng.bit_generator.state == state and source.buffer_pos == _MIN_CHUNK
    after = source.draw(rng, 3)  # a refill
    assert rng.bit_generator.state != state
    expected = task.sample_prompts(np.random.default_rng(1), "train", 2 * _MIN_CHUNK)
    assert [*first[0]["prompt"], *rest[0]["prompt"], *after[0]["prompt"]] == expected[: _MIN_CHUNK + 3]


def test_a_refill_draws_at_least_the_request_and_every_env_s_prompt() -> None:
    task = DigitsTask()
    big, _ = _source(task, tokens=False)
    batch, encoded = big.draw(np.random.default_rng(2), _MIN_CHUNK + 7)
    assert batch["prompt"].shape == (_MIN_CHUNK + 7,) and encoded.shape == (_MIN_CHUNK + 7, big.width)
    wide, _ = _source(task, tokens=False, num_envs=_MIN_CHUNK + 5)
    wide.draw(np.random.default_rng(2), 1)
    assert wide.buffer is not None and len(wide.buffer[1]) == len(wide.buffer[0]["prompt"]) == _MIN_CHUNK + 5


@pytest.mark.parametrize("tokens", [False, True], ids=["features", "tokens"])
def test_encode_encodes_each_prompt_and_an_empty_list_as_no_rows(tokens: bool) -> None:
    task = DigitsTask()
    source, ctx = _source(task, tokens)
    p, q = DigitsPrompt(12, "+", 3), DigitsPrompt(4, "+", 56)
    prompts: list[object] = [p, q, p, p]  # a group repeats one prompt object
    dtype = np.int64 if tokens else np.float32
    for encoded in (source.encode(task.prompt_batch(prompts)), source.chosen(prompts)[1]):
        assert encoded.dtype == dtype and encoded.shape == (4, source.width)
        assert np.array_equal(encoded, _encodings(task, ctx, prompts))
    empty = source.encode(task.prompt_batch([]))
    assert empty.dtype == dtype and empty.shape == (0, source.width)


@pytest.mark.parametrize("tokens", [False, True], ids=["features", "tokens"])
def test_a_finite_task_s_pool_holds_both_splits_and_draws_only_its_split(tokens: bool) -> None:
    task = FiniteDigits()
    source, ctx = _source(task, tokens, split="test")
    assert source.pool is not None
    data, encoded, rows = source.pool
    listed = [*task.prompts("train"), *task.prompts("test")]
    assert list(data) == ["prompt"] and data["prompt"].dtype == object and data["prompt"].tolist() == listed
    assert rows == {p: i for i, p in enumerate(listed)}
    assert encoded.dtype == (np.int64 if tokens else np.float32)
    assert np.array_equal(encoded, _encodings(task, ctx, listed))
    assert source.split_rows.dtype == np.int64 and source.split_rows.tolist() == [9, 10, 11, 12]
    batch, drawn = source.draw(np.random.default_rng(0), 40)
    values = batch["prompt"]
    assert {task.split_of(p) for p in values} == {"test"} and len(set(values)) == 4
    assert np.array_equal(drawn, _encodings(task, ctx, list(values)))
    chosen: list[object] = [listed[10], listed[2], listed[10]]
    picked = source.chosen(chosen)[1]
    assert picked.dtype == encoded.dtype and picked.shape == (3, source.width)
    assert np.array_equal(picked, _encodings(task, ctx, chosen))


def test_the_array_path_pool_keeps_int64_numbers_and_float32_features() -> None:
    task = Int32Arithmetic()
    source, _ = _source(task, tokens=False, arrays=True)
    assert source.pool is not None
    data, encoded, rows = source.pool
    numbers, targets = data["prompt_numbers"], data["prompt_target"]
    listed = [*task.prompts("train"), *task.prompts("test")]
    assert numbers.dtype == np.int64 and numbers.shape == (len(listed), len(listed[0].numbers))
    assert targets.dtype == np.int64 and targets.tolist() == [int(p.target) for p in listed]
    assert encoded.dtype == np.float32 and encoded.shape == (len(listed), source.width)
    assert sorted(source.split_rows.tolist()) == source.split_rows.tolist()
    assert {listed[i] for i in source.split_rows} == set(task.prompts("train"))
    *_, drawn = source.draw(np.random.default_rng(0), 8)
    assert drawn.dtype == np.float32


def test_chosen_gives_each_listed_prompt_its_pool_row() -> None:
    task = ArithmeticTask()
    source, _ = _source(task, tokens=False, arrays=True)
    train, test = task.prompts("train"), task.prompts("test")
    # equal prompts that are other objects, and one object repeated as a group does
    chosen = [test[0], train[3], test[0], Prompt(train[3].numbers, train[3].target)]
    encoded = source.chosen(chosen)[1]
    assert encoded.dtype == np.float32 and encoded.shape == (4, source.width)
    assert np.array_equal(encoded, _encodings(task, None, list(chosen)))


class Counting(Prompt):
    """A prompt that counts how often it is hashed (each lookup of it in the pool's row map)."""

    hashed = 0

    def __hash__(self) -> int:
        Counting.hashed += 1
        return super().__hash__()


def test_a_group_s_repeated_prompt_object_is_looked_up_and_encoded_once() -> None:
    task = ArithmeticTask()
    source, _ = _source(task, tokens=False, arrays=True)
    p = task.prompts("train")[1]
    group = [Counting(p.numbers, p.target)] * 4
    Counting.hashed = 0
    encoded = source.chosen(group)[1]  # type: ignore[arg-type]
    assert Counting.hashed == 1 and np.array_equal(encoded, np.stack([task.encode_prompt(p)] * 4))
    calls: list[object] = []
    digits = DigitsTask()

    def counted(prompt: DigitsPrompt) -> np.ndarray:
        calls.append(prompt)
        return DigitsTask.encode_prompt(digits, prompt)

    digits.encode_prompt = counted  # type: ignore[method-assign]
    sampled, _ = _source(digits, tokens=False)
    q, r = DigitsPrompt(1, "+", 2), DigitsPrompt(1, "+", 2)  # equal, but two objects
    assert sampled.encode(digits.prompt_batch([q, q, r, q])).shape == (4, sampled.width) and calls == [q, r]
