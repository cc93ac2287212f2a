"""The generic scorer of the native vector env: what it hands the task and the arrays it returns."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from rlvr_env.rewards import BatchVerdict
from rlvr_env.scoring import TaskScorer, batch_verdict, object_column
from rlvr_env.rewards import RewardWeights, Verdict

_INT64 = 2**63 - 1


def _verdict(reward: Any = 1.0, *, correct: bool = True, well_formed: bool = True, value: Any = None,
             parts: dict[str, Any] | None = None) -> Verdict:
    return Verdict(reward=reward, correct=correct, well_formed=well_formed, value=value, reason=None,
                   expression="e", parts={} if parts is None else parts)


class RecordingTask:
    """Only what TaskScorer calls: ``score_batch``, recording its arguments; one verdict per answer
    (or ``short`` fewer) whose value is the answer's first token."""

    def __init__(self, short: int = 0, max_length: int = 4) -> None:
        self.max_length = max_length
        self.calls: list[tuple[list[Any], list[list[int]], RewardWeights, list[Any]]] = []
        self.short = short

    def score_batch(self, prompts: Sequence[Any], answers: Sequence[Sequence[int]], weights: RewardWeights,
                    truncated: Sequence[bool]) -> list[Verdict]:
        self.calls.append((list(prompts), [list(a) for a in answers], weights, list(truncated)))
        verdicts = [_verdict(value=Fraction(a[0]) if a else None) for a in answers]
        return verdicts[: len(verdicts) - self.short]


def _scorer(task: Any, num_rows: int = 3, max_length: int = 4) -> TaskScorer:
    task.max_length = max_length
    return TaskScorer(task, num_rows, RewardWeights())


def test_a_fresh_scorer_holds_empty_rows_and_no_verdicts() -> None:
    scorer = _scorer(RecordingTask(), num_rows=3, max_length=4)
    assert scorer.num_rows == 3 and scorer.max_length == 4
    assert scorer.last_verdicts == []
    assert list(scorer.prompts) == ["prompt"]
    assert scorer.prompts["prompt"].shape == (3,) and scorer.prompts["prompt"].dtype == object
    assert scorer.prompts["prompt"].tolist() == [None, None, None]
    assert scorer.tokens.shape == (3, 4) and scorer.pos.tolist() == [0, 0, 0]


def test_finish_hands_the_task_each_row_s_prompt_tokens_and_truncation_as_bools() -> None:
    task = RecordingTask()
    weights = RewardWeights()
    scorer = TaskScorer(task, 3, weights)  # type: ignore[arg-type]
    scorer.set_prompts(np.array([0, 1, 2]), {"prompt": object_column(["p0", "p1", "p2"])})
    scorer.feed(np.array([5, 6, 7]), np.array([True, True, False]))
    scorer.feed(np.array([8, 9, 1]), np.array([True, False, True]))
    result = scorer.finish(np.array([2, 0]), np.array([True, False]))
    prompts, answers, passed_weights, truncated = task.calls[-1]
    assert prompts == ["p2", "p0"] and answers == [[1], [5, 8]] and passed_weights is weights
    assert truncated == [True, False] and all(type(t) is bool for t in truncated)
    # the verdicts are kept in the order of the rows asked for
    assert [v.value for v in scorer.last_verdicts] == [Fraction(1), Fraction(5)]
    assert isinstance(result, BatchVerdict) and result.values() == [Fraction(1), Fraction(5)]


def test_finish_refuses_a_task_that_returns_the_wrong_number_of_verdicts() -> None:
    scorer = _scorer(RecordingTask(short=1))
    scorer.set_prompts(np.array([0, 1]), {"prompt": object_column(["a", "b"])})
    with pytest.raises(ValueError, match=r"^RecordingTask\.score_batch returned 1 verdicts for 2 answers$"):
        scorer.finish(np.array([0, 1]), np.array([False, False]))


def _assert_layout(arrays: BatchVerdict, k: int) -> None:
    for name in ("reward",):
        assert getattr(arrays, name).dtype == np.float64 and getattr(arrays, name).shape == (k,)
    for name in ("correct", "well_formed", "has_value", "fallback"):
        assert getattr(arrays, name).dtype == np.bool_ and getattr(arrays, name).shape == (k,), name
    for name in ("value_num", "value_den"):
        assert getattr(arrays, name).dtype == np.int64 and getattr(arrays, name).shape == (k,), name
    for name, part in arrays.parts.items():
        assert part.dtype == np.float64 and part.shape == (k,), name
    assert isinstance(arrays.big_values, dict)


def test_batch_verdict_arrays_have_the_documented_dtypes_even_from_ints_and_for_no_rows() -> None:
    # a user's verifier may hand back ints (reward 1, part 1, correct 0): the arrays stay float / bool
    verdicts = [_verdict(1, correct=1, well_formed=0, value=3, parts={"accuracy": 1}),  # type: ignore
                _verdict(0, correct=0, well_formed=1, value=None, parts={"accuracy": 0})]  # type: ignore
    arrays = batch_verdict(verdicts)
    _assert_layout(arrays, 2)
    assert arrays.reward.tolist() == [1.0, 0.0] and arrays.parts["accuracy"].tolist() == [1.0, 0.0]
    assert arrays.correct.tolist() == [True, False] and arrays.well_formed.tolist() == [False, True]
    assert arrays.fallback.tolist() == [False, False] and arrays.big_values == {}
    assert arrays.value_num.tolist() == [3, 0] and arrays.value_den.tolist() == [1, 0]
    empty = batch_verdict([])
    _assert_layout(empty, 0)
    assert empty.parts == {} and empty.values() == []


@pytest.mark.parametrize("value, fits", [
    (Fraction(_INT64), True),
    (Fraction(-_INT64), True),
    (Fraction(1, _INT64), True),
    (Fraction(_INT64 + 1), False),
    (Fraction(1, _INT64 + 1), False),
    (Fraction(_INT64 + 1, _INT64), False),
])
def test_batch_verdict_keeps_int64_values_in_the_arrays_and_larger_ones_exact_aside(value: Fraction,
                                                                                    fits: bool) -> None:
    arrays = batch_verdict([_verdict(value=Fraction(1, 2)), _verdict(value=value)])
    _assert_layout(arrays, 2)
    assert arrays.has_value.tolist() == [True, True]
    if fits:
        assert (int(arrays.value_num[1]), int(arrays.value_den[1])) == (value.numerator, value.denominator)
        assert arrays.big_values == {}
    else:
        assert (int(arrays.value_num[1]), int(arrays.value_den[1])) == (0, 0)
        assert arrays.big_values == {1: value}
    assert arrays.values() == [Fraction(1, 2), value]


def test_prompt_and_masks_read_each_row_s_prompt_value() -> None:
    class Masking(RecordingTask):
        vocab = ("a", "b", "c")

        def action_masks_batch(self, prompts: Sequence[Any], tokens: np.ndarray,
                               lengths: np.ndarray) -> np.ndarray:
            self.mask_calls = (list(prompts), tokens[:, :2].tolist(), lengths.tolist())
            return np.array([[p == "p1", True, False] for p in prompts])

    task = Masking()
    scorer = _scorer(task, num_rows=2)
    scorer.set_prompts(np.array([1, 0]), {"prompt": object_column(["p1", "p0"])})
    assert [scorer.prompt(0), scorer.prompt(1)] == ["p0", "p1"]
    scorer.feed(np.array([2, 1]), np.array([True, False]))
    assert scorer.masks().tolist() == [[False, True, False], [True, True, False]]
    assert task.mask_calls == (["p0", "p1"], [[2, 0], [0, 0]], [1, 0])
