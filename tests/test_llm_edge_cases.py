"""Edge cases of the LLM bridges found by users and by a mutation run: the TRL
reward cache with numpy rows and in-place changes, verl's ``data_source="countdown"`` rows, the
200,000-character limit, the last assistant message, and per-row weights in verl's ``extra_info``."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_env.completions import MAX_COMPLETION_CHARS, extract_answer
from rlvr_env.tasks.expression.completions import score_completion, score_parts
from rlvr_env.llm import compute_score, make_task, reward_functions

TASK = make_task("countdown", n_numbers=3)
RIGHT, WRONG = "<answer>7*(9+1)</answer>", "<answer>7*9+1</answer>"


def _call(fn, completions, numbers, target):  # as GRPOTrainer calls a reward function
    return fn(prompts=["p"] * len(completions), completions=completions, completion_ids=None,
              numbers=numbers, target=target, trainer_state=None)


# ------------------------------------------------------------------------------------------------
# the one-batch cache of the TRL reward functions
# ------------------------------------------------------------------------------------------------
def test_trl_cache_with_numpy_rows_as_datasets_numpy_format_gives_them() -> None:
    # dataset.with_format("numpy", columns=["numbers", "target"]) hands the function a 2-D int64 array
    # and a 1-D int64 array; the same completions in two steps used to crash on `==` of arrays.
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"numbers": [[7, 9, 1], [7, 9, 1]], "target": [70, 64]})
    rows = ds.with_format("numpy", columns=["numbers", "target"])[:]
    numbers, target = rows["numbers"], rows["target"]
    assert isinstance(numbers, np.ndarray) and isinstance(target, np.ndarray)
    acc, fmt = reward_functions(TASK)
    completions = [RIGHT, WRONG]
    assert _call(acc, completions, numbers, target) == [1.0, 1.0]  # 7*9+1 = 64 is the second target
    assert _call(fmt, completions, numbers, target) == pytest.approx([0.1, 0.1])
    assert _call(acc, completions, numbers, target) == [1.0, 1.0]  # second step, same completions
    # ... and list rows afterwards (the old cache kept the arrays and raised on every later call)
    assert _call(acc, completions, [[7, 9, 1], [7, 9, 1]], [70, 70]) == [1.0, 0.0]


def test_trl_cache_is_not_poisoned_by_a_failing_call() -> None:
    acc, fmt = reward_functions(TASK)
    completions = [RIGHT, WRONG]
    with pytest.raises(ValueError, match="has 1 values for 2 completions"):
        _call(acc, completions, [[7, 9, 1]], [70, 70])
    assert _call(acc, completions, [[7, 9, 1]] * 2, [70, 70]) == [1.0, 0.0]
    assert _call(fmt, completions, [[7, 9, 1]] * 2, [70, 70]) == pytest.approx([0.1, 0.1])


def test_trl_cache_sees_columns_changed_in_place() -> None:
    acc, _ = reward_functions(TASK)
    completions = [RIGHT, WRONG]
    numbers, target = [[7, 9, 1], [7, 9, 1]], [70, 70]
    assert _call(acc, completions, numbers, target) == [1.0, 0.0]
    target[0], target[1] = 64, 64  # the same list objects, new values
    assert _call(acc, completions, numbers, target) == [0.0, 1.0]
    numbers[1][0] = 8  # a row changed inside: 7*9+1 now uses a number the prompt lacks
    assert _call(acc, completions, numbers, target) == [0.0, 0.0]
    arr = np.array([[7, 9, 1], [7, 9, 1]])
    assert _call(acc, completions, arr, np.array([70, 64])) == [1.0, 1.0]
    arr[0, 0] = 6
    assert _call(acc, completions, arr, np.array([70, 64])) == [0.0, 1.0]


def test_trl_cache_still_verifies_once_per_step() -> None:
    # the point of the cache: the accuracy and format functions of one step share one verification
    acc, fmt = reward_functions(TASK)
    calls: list[int] = []
    original = type(acc).scored

    import rlvr_env.llm.trl_rewards as module

    real = module.score_parts

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    module.score_parts = counting
    try:
        kw = ([RIGHT, WRONG], [[7, 9, 1]] * 2, [70, 70])
        _call(acc, *kw)
        _call(fmt, *kw)
    finally:
        module.score_parts = real
    assert len(calls) == 1 and type(acc).scored is original


# ------------------------------------------------------------------------------------------------
# verl rows named data_source="countdown" with {"target", "numbers"} only
# ------------------------------------------------------------------------------------------------
def test_verl_countdown_data_source_takes_countdown_defaults() -> None:
    gt = {"target": 70, "numbers": [7, 9, 1]}  # TinyZero's / verl's Countdown ground truth
    assert compute_score("countdown", f"so {RIGHT}", gt)["score"] == pytest.approx(1.1)
    assert compute_score("countdown", "<answer>(7+9)*1</answer>", dict(gt, target=16))["correct"] == 1.0
    # Countdown's defaults: at most once each (not every number needed), exact division
    assert compute_score("countdown", "<answer>7*10</answer>", gt)["reason"].startswith("number 10")
    assert compute_score("countdown", "<answer>70/7*7</answer>", gt)["score"] == pytest.approx(0.0)
    # TinyZero's "use every number" rule is one ground-truth field away
    gt_all = dict(gt, target=63, number_use="exactly_once")
    assert compute_score("countdown", "<answer>7*9</answer>", gt_all)["correct"] == 0.0
    assert compute_score("countdown", "<answer>7*9*1</answer>", gt_all)["correct"] == 1.0
    with pytest.raises(ValueError, match="no 'operators'"):
        compute_score("openai/gsm8k", RIGHT, gt)  # other sources still need the grammar


# ------------------------------------------------------------------------------------------------
# mutations the suite used to let through
# ------------------------------------------------------------------------------------------------
def test_a_completion_of_exactly_max_chars_is_read_and_one_more_is_refused() -> None:
    assert MAX_COMPLETION_CHARS == 200_000
    at_limit = " " * (MAX_COMPLETION_CHARS - len(RIGHT)) + RIGHT
    over = " " + at_limit
    assert len(at_limit) == 200_000 and len(over) == 200_001
    assert extract_answer(at_limit) == ("7*(9+1)", None)
    assert extract_answer(over) == (None, "completion is 200001 characters; at most 200000 are read")
    for text, paid in ((at_limit, 1.1), (over, 0.0)):
        assert score_completion(text, (7, 9, 1), 70, grammar=TASK.grammar).reward == pytest.approx(paid)
        acc, fmt = score_parts([text], [(7, 9, 1)], [70], grammar=TASK.grammar)[:2]
        assert acc[0] + fmt[0] == pytest.approx(paid)
    # a conversation's text is held to the same limit
    chat = [{"role": "assistant", "content": at_limit}]
    assert extract_answer(chat)[0] == "7*(9+1)"
    assert extract_answer([{"role": "assistant", "content": over}])[0] is None


def test_a_conversation_is_read_from_its_last_assistant_message() -> None:
    chat = [{"role": "system", "content": "answer in tags"},
            {"role": "assistant", "content": WRONG},
            {"role": "user", "content": f"try again, e.g. {WRONG}"},
            {"role": "assistant", "content": RIGHT},
            {"role": "tool", "content": "<answer>1</answer>"}]
    assert extract_answer(chat) == ("7*(9+1)", None)
    acc, _ = reward_functions(TASK)
    assert _call(acc, [chat], [[7, 9, 1]], [70]) == [1.0]
    assert score_completion(chat, (7, 9, 1), 70, grammar=TASK.grammar).correct


def test_verl_extra_info_with_only_one_weight_sets_that_weight() -> None:
    gt = {"target": 70, "numbers": [7, 9, 1]}
    only_format = compute_score("rlvr/Countdown", WRONG, gt, {"format_weight": 0.5})
    assert only_format["format"] == pytest.approx(0.5) and only_format["score"] == pytest.approx(0.5)
    right = compute_score("rlvr/Countdown", RIGHT, gt, {"format_weight": 0.5})
    assert right["accuracy"] == pytest.approx(1.0) and right["score"] == pytest.approx(1.5)
    only_acc = compute_score("rlvr/Countdown", RIGHT, gt, {"accuracy_weight": 3.0})
    assert only_acc["score"] == pytest.approx(3.1)
    assert compute_score("rlvr/Countdown", RIGHT, gt, {"index": 4})["score"] == pytest.approx(1.1)


def test_a_wrongly_typed_dataset_value_is_named_with_its_row_and_column() -> None:
    for fn in reward_functions(TASK):
        with pytest.raises(TypeError, match=r"row 1 of the batch .*target=True of type bool must be an int"):
            _call(fn, [RIGHT, RIGHT], [[1, 7, 9]] * 2, [70, True])
        with pytest.raises(TypeError, match=r"column 'target' must be a sequence with one value per "
                                            r"completion, got int 70"):
            _call(fn, [RIGHT], [[1, 7, 9]], 70)
        assert _call(fn, [RIGHT], [[1, 7, 9]], [70])[0] > 0  # the same batch well typed scores
