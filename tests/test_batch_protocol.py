"""The generic layer's protocols: the batch scorer a task gives the vector env, the prompt option a task
reads, the task's own vocabulary check, and a family's registration through ``register_envs``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlvr_env import (
    ArithmeticTask,
    CountdownTask,
    DigitsTask,
    Prompt,
    RewardWeights,
    TaskScorer,
    TextEnv,
    TokenEnv,
    TokenVectorEnv,
    register_envs,
)
from rlvr_env.scoring import BatchScorer, batch_concat, batch_length, batch_take, object_column


def test_an_expression_task_reads_one_prompt_or_one_per_row() -> None:
    task = ArithmeticTask()
    p, q = task.prompts("train")[:2]
    assert task.is_one_prompt(p) and task.is_one_prompt(((2, 3, 5), 17))
    assert task.is_one_prompt([(2, 3, 5), 17])
    assert not task.is_one_prompt([p, q]) and not task.is_one_prompt((p, q)) and not task.is_one_prompt([p])
    assert DigitsTask().is_one_prompt(("a", "tuple")) and not DigitsTask().is_one_prompt(["a", "list"])
    envs = gym.make_vec("rlvr/Arithmetic-v0", num_envs=2, vectorization_mode="vector_entry_point")
    _, info = envs.reset(options={"prompt": [p, q]})  # two prompts for two rows, not one prompt
    assert info["prompt"].tolist() == [p, q]
    _, info = envs.reset(options={"prompt": p})
    assert info["prompt"].tolist() == [p, p]


def test_a_frozen_row_keeps_its_mask_while_the_others_step() -> None:
    """With autoreset disabled a finished row is frozen: its observation and its grammar mask stay as they
    were when it ended, however the other rows move (the mask automaton moves active rows only)."""
    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=2, vectorization_mode="vector_entry_point",
                        autoreset_mode="Disabled", n_numbers=3)
    inner: Any = envs.unwrapped
    envs.reset(options={"prompt": ((9, 4, 5), 14)})
    eos = inner.task.eos_id
    envs.step(np.array([0, 0]))                  # n0 | n0
    envs.step(np.array([eos, 3]))                # row 0 ends: "n0"; row 1: n0 +
    frozen = inner.action_masks()[0].copy()
    for token in (1, eos):                       # row 1: n0 + n1 <eos>; row 0's actions are ignored
        envs.step(np.array([token, token]))
    assert np.array_equal(inner.action_masks()[0], frozen)
    single = gym.make("rlvr/Countdown-v0", n_numbers=3).unwrapped
    single.reset(options={"prompt": ((9, 4, 5), 14)})
    single.step(0)
    single.step(eos)
    assert np.array_equal(frozen, single.action_masks())


class Doubled(DigitsTask):
    """A vocabulary that writes one token twice: two token ids would read as one string."""

    def __init__(self) -> None:
        super().__init__()
        self.vocab = (*self.vocab[:-1], self.vocab[0], self.vocab[-1])


class Spaced(DigitsTask):
    def __init__(self) -> None:
        super().__init__()
        self.vocab = ("1 2", *self.vocab[1:])


@pytest.mark.parametrize(("task", "rule"), [(Doubled, "appears twice"), (Spaced, "without whitespace")])
def test_every_env_asks_the_task_to_check_its_vocabulary(task: type, rule: str) -> None:
    for build in (lambda t: TokenEnv(t), lambda t: TokenVectorEnv(t, 2)):
        with pytest.raises(ValueError, match=rule):
            build(task())
    DigitsTask().check_vocab()  # the shipped tasks pass
    with pytest.raises(ValueError, match="is not one number"):
        type("Words", (ArithmeticTask,), {"vocab": ("2", "3", "5", "+", "2+3")})().check_vocab()


def test_the_vector_env_refuses_a_batch_scorer_that_is_not_one() -> None:
    class Broken(DigitsTask):
        def batch_scorer(self, num_rows: int, weights: RewardWeights) -> Any:
            return object()

    with pytest.raises(ValueError, match="batch_scorer returned .* not an rlvr_env.scoring.BatchScorer"):
        TokenVectorEnv(Broken(), 2)
    assert isinstance(DigitsTask().batch_scorer(2, RewardWeights()), TaskScorer)
    assert isinstance(CountdownTask(n_numbers=3).batch_scorer(2, RewardWeights()), BatchScorer)
    assert not isinstance(CountdownTask(n_numbers=3).batch_scorer(2, RewardWeights()), TaskScorer)


def test_prompt_batches_take_and_join_by_rows() -> None:
    batch = {"prompt": object_column([(1,), (2,), (3,)]), "n": np.array([[1, 1], [2, 2], [3, 3]])}
    assert batch_length(batch) == 3 and batch["prompt"].shape == (3,)  # tuples stay one object each
    two = batch_take(batch, np.array([2, 0]))
    assert two["prompt"].tolist() == [(3,), (1,)] and two["n"].tolist() == [[3, 3], [1, 1]]
    assert batch_take(batch, slice(1, None))["n"].tolist() == [[2, 2], [3, 3]]
    joined = batch_concat(two, batch_take(batch, slice(1, 2)))
    assert joined["prompt"].tolist() == [(3,), (1,), (2,)] and batch_length(joined) == 3
    task = CountdownTask(n_numbers=3)
    arrays = task.prompt_batch([Prompt((9, 4, 5), 14), Prompt((1, 2, 3), 6)])
    assert set(arrays) == {"prompt_numbers", "prompt_target"} and arrays["prompt_numbers"].dtype == np.int64
    assert task.batch_prompt(arrays, 1) == Prompt((1, 2, 3), 6)


def test_register_envs_takes_a_family_s_aliases_and_refuses_other_classes() -> None:
    from rlvr_env.tasks.countdown.envs import (
        CountdownEnv, CountdownTextEnv, CountdownVectorEnv, countdown_task,
    )

    with pytest.raises(ValueError, match="must be subclasses of"):
        register_envs("test/Wrong-v0", countdown_task,
                      envs=(CountdownEnv, CountdownEnv, CountdownTextEnv))
    with pytest.raises(ValueError, match="must be subclasses of"):
        register_envs("test/Wrong-v0", countdown_task,
                      envs=(CountdownEnv, CountdownVectorEnv))  # type: ignore[arg-type]
    assert "test/Wrong-v0" not in gym.registry
    spec = gym.spec("rlvr/Countdown-v0")
    assert spec.entry_point is CountdownEnv and spec.vector_entry_point is CountdownVectorEnv
    assert gym.spec("rlvr/CountdownText-v0").entry_point is CountdownTextEnv
    assert issubclass(CountdownTextEnv, TextEnv)
    # the keywords are declared once: the alias and gym.make build the same env
    a = CountdownEnv(n_numbers=3, observation="relations")
    b = gym.make("rlvr/Countdown-v0", n_numbers=3, observation="relations").unwrapped
    assert a.observation_space == b.observation_space
    assert a.task.observation == b.task.observation == "relations"
    with pytest.raises(ValueError, match="observation='pixels'"):
        CountdownVectorEnv(num_envs=2, observation="pixels")


def test_a_row_restarted_by_next_step_autoreset_starts_its_mask_afresh() -> None:
    """NextStep autoreset: a row that ended restarts in the next step, whose action it ignores; its mask
    is then the new episode's first one, whatever that ignored action was."""
    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=2, vectorization_mode="vector_entry_point",
                        autoreset_mode="NextStep", n_numbers=3)
    inner: Any = envs.unwrapped
    envs.reset(seed=3)
    eos = inner.task.eos_id
    envs.step(np.array([0, 0]))
    envs.step(np.array([eos, 3]))             # row 0 ends
    _, _, _, _, info = envs.step(np.array([1, 1]))  # row 0 restarts (its 1 is ignored), row 1: n0 + n1
    fresh = gym.make("rlvr/Countdown-v0", n_numbers=3).unwrapped
    fresh.reset(options={"prompt": inner.prompt(0)})
    assert np.array_equal(inner.action_masks()[0], fresh.action_masks())
    assert inner.tokens(0) == []


class Int32Listed(ArithmeticTask):
    """Arithmetic whose listed prompts hold NumPy int32 values (as a task built from arrays may)."""

    def prompts(self, split: str) -> tuple[Prompt, ...]:
        return tuple(Prompt(tuple(np.int32(n) for n in p.numbers), np.int32(p.target))
                     for p in super().prompts(split))


class Echoed(ArithmeticTask):
    """Arithmetic with its own score (the array path is off): the token context comes prompt by prompt."""

    def score(self, prompt: Prompt, token_ids: Any, weights: RewardWeights, *,
              truncated: bool = False) -> Any:
        return super().score(prompt, token_ids, weights, truncated=truncated)


def test_an_expression_task_s_batches_and_scorer_follow_its_weights_and_dtypes() -> None:
    task = Int32Listed()
    batch = task.prompt_batch(list(task.prompts("train")[:3]))
    assert batch["prompt_numbers"].dtype == np.int64 and batch["prompt_numbers"].shape == (3, 3)
    assert batch["prompt_target"].dtype == np.int64
    assert task.token_table() is task.token_table() is task.token_table()
    table = task.token_table()
    task.vocab = tuple(task.vocab)[::-1]  # another vocabulary: another table
    assert task.token_table() is not table and task.token_table().kinds.tolist() == table.kinds.tolist()[::-1]
    with pytest.raises(TypeError, match="must be a rlvr_env.RewardWeights"):
        ArithmeticTask().score(task.prompts("train")[0], [0, 3, 1, 4, 2], {"accuracy": 1.0})  # type: ignore
    # the env's weights reach every scorer: array (Arithmetic), incremental (Countdown-5), text
    p = ArithmeticTask().prompts("train")[0]
    assert p == Prompt((2, 5, 3), 10)
    right = [0, 3, 2, 3, 1]  # 2+5+3
    envs = gym.make_vec("rlvr/Arithmetic-v0", num_envs=1, vectorization_mode="vector_entry_point",
                        accuracy_weight=2.0, format_weight=0.25)
    envs.reset(options={"prompt": p})
    rewards = [float(envs.step(np.array([t]))[1][0]) for t in right]
    assert rewards[-1] == 2.25
    text = gym.make("rlvr/ArithmeticText-v0", accuracy_weight=2.0, format_weight=0.25)
    text.reset(options={"prompt": p})
    answer = ArithmeticTask().decode(list(right), p)
    assert text.step(f"<answer>{answer}</answer>")[1] == 2.25


def test_countdown_beyond_its_program_table_scores_incrementally_with_the_env_s_weights() -> None:
    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=2, vectorization_mode="vector_entry_point",
                        n_numbers=5, accuracy_weight=3.0)
    inner: Any = envs.unwrapped
    assert type(inner.scorer).__name__ == "ExpressionScorer"
    envs.reset(options={"prompt": ((1, 2, 3, 4, 5), 3)})
    eos = inner.task.eos_id
    rewards = [envs.step(np.array([a, b]))[1] for a, b in ((2, 0), (eos, eos))]  # "3" is right, "1" is not
    assert rewards[-1].tolist() == [3.1, 0.1]


def test_the_token_context_of_an_expression_task_off_the_array_path_comes_prompt_by_prompt() -> None:
    task = Echoed()
    assert not task.array_path()
    envs = TokenVectorEnv(task, 2, observation="tokens")
    obs, _ = envs.reset(options={"prompt": task.prompts("train")[0]})
    single = TokenEnv(Echoed(), observation="tokens")
    first, _ = single.reset(options={"prompt": task.prompts("train")[0]})
    assert np.array_equal(obs[0], first) and np.array_equal(obs[1], first)
