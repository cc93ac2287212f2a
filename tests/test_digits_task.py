"""DigitsTask pinned to exact values: the reasons and errors it words, its records, masks and draws."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask, _draw_operand, read_number
from rlvr_env.rewards import RewardWeights, Verdict


@pytest.mark.parametrize("text, max_digits, reason", [
    ("", 3, "empty answer"),
    ("1-2", 3, "character '-' at position 1 is not allowed (a sign only leads the number)"),
    ("1a", 3, "character 'a' at position 1 is not allowed (only the digits 0-9 and a leading '-')"),
    ("-", 3, "'-' is not a number (a sign needs a non-zero number after it)"),
    ("-0", 3, "'-0' is not a number (a sign needs a non-zero number after it)"),
    ("-05", 3, "number '-05' has a leading zero"),
    ("1234", 3, "the number has 4 digits; at most 3 are read"),
    ("-1234", 3, "the number has 4 digits; at most 3 are read"),
])
def test_read_number_words_each_reason_exactly(text: str, max_digits: int, reason: str) -> None:
    assert read_number(text, max_digits) == (None, reason)


def test_read_number_reads_up_to_max_digits_and_refuses_what_is_not_text() -> None:
    assert read_number("999", 3) == (999, None) and read_number("-999", 3) == (-999, None)
    assert read_number("-", 3)[0] is None
    assert read_number(12, 3) == (None, "expected text, got int")  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs, text", [
    ({"max_digits": 1}, r"^max_digits=1 must be in \[2, 9\] \(the held-out split needs operands longer than "
                        r"the training ones\)$"),
    ({"max_digits": True}, r"^max_digits=True must be an integer$"),
    ({"train_digits": "2"}, r"^train_digits='2' must be an integer$"),
    ({"max_digits": 4, "train_digits": 4},
     r"^train_digits=4 must be in \[1, max_digits - 1\] = \[1, 3\], so the held-out split has longer "
     r"operands$"),
    ({"operators": "+x"}, r"^operators='\+x' must be a non-empty string of characters from '\+-\*'$"),
    ({"operators": 1}, r"^operators=1 must be a non-empty string"),
    ({"reverse": 0}, r"^reverse=0 must be a bool$"),
])
def test_bad_settings_are_refused_with_the_whole_rule(kwargs: dict, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        DigitsTask(**kwargs)


def test_the_bounds_of_each_setting_are_accepted() -> None:
    assert DigitsTask(max_digits=2, train_digits=1).max_digits == 2
    nine = DigitsTask(max_digits=9, train_digits=8)
    assert (nine.max_digits, nine.train_digits) == (9, 8)
    assert DigitsTask(max_digits=np.int64(3), train_digits=np.int64(2)).max_length == 5


def test_settings_shape_the_vocabulary_and_the_answer_length() -> None:
    task = DigitsTask(max_digits=3, train_digits=1, operators="*-+")
    assert task.operators == "+-*" and task.signed and task.minus_id == 10 and task.eos_id == 11
    assert task.answer_digits == 6 and task.max_length == 8  # 999*999 = 998001, a sign, EOS
    assert DigitsTask(operators="-").answer_digits == 3  # 999 - 0
    plain = DigitsTask()
    assert not plain.signed and plain.minus_id is None and plain.eos_id == 10 and plain.answer_digits == 4
    assert plain.keywords() == {"max_digits": 3, "train_digits": 2, "operators": "+", "reverse": False,
                                "grammar_mask": True}
    assert DigitsTask(**task.keywords()).keywords() == task.keywords()


@pytest.mark.parametrize("prompt, text", [
    ((1, 2), r"^prompt \(1, 2\) must be a DigitsPrompt or an \(a, op, b\) triple, e\.g\. \(12, '\+', 7\)$"),
    ((1, "-", 2), r"^prompt operator '-' is not one of this task's operators '\+'$"),
    ((1000, "+", 2),
     r"^prompt operand a=1000 must be a non-negative integer of at most max_digits=3 digits$"),
    ((1, "+", np.bool_(True)), r"^prompt operand b=np\.True_ must be an integer$"),
])
def test_invalid_prompts_are_refused_with_the_whole_rule(prompt: object, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        DigitsTask().validate_prompt(prompt)


def test_validate_prompt_takes_the_bounds_and_returns_plain_ints() -> None:
    task = DigitsTask()
    p = task.validate_prompt([np.int64(999), "+", 0])
    assert p == DigitsPrompt(999, "+", 0) and type(p.a) is int and type(p.b) is int
    assert task.validate_prompt(DigitsPrompt(0, "+", 5)) == DigitsPrompt(0, "+", 5)


def test_records_text_and_rendering() -> None:
    task = DigitsTask(operators="+-")
    p = DigitsPrompt(12, "-", 30)
    assert task.prompt_record(p) == {"a": 12, "op": "-", "b": 30}
    assert task.prompt_from_record({"a": 12, "op": "-", "b": 30, "extra": 1}) == p
    for bad in ({"a": 1, "op": "+"}, [1, "+", 2]):
        with pytest.raises(ValueError, match=r"must be a dict with keys 'a', 'op' and 'b'$"):
            task.prompt_from_record(bad)  # type: ignore[arg-type]
    assert task.render_prompt(p) == "12 - 30 ="
    assert task.prompt_text(p, "Put it in tags.") == (
        "What is 12 - 30? Write the exact result as an integer.\nPut it in tags.")
    assert str(p) == "12-30" and p.result == -18 and DigitsPrompt(7, "*", 6).result == 42


def test_a_verdict_names_the_expected_result_and_pays_the_weights() -> None:
    task = DigitsTask(operators="+-")
    p = DigitsPrompt(12, "-", 30)
    weights = RewardWeights(accuracy=2.0, format=0.5)
    wrong = task.verdict(p, "18", 18, None, weights)
    assert wrong == Verdict(reward=0.5, correct=False, well_formed=True, value=18,
                            reason="18 is not 12 - 30 = -18", expression="18",
                            parts={"accuracy": 0.0, "format": 0.5})
    assert type(wrong.reward) is float
    right = task.verdict(p, "-18", -18, None, weights)
    assert (right.reward, right.correct, right.reason, right.value) == (2.5, True, None, -18)
    none = task.verdict(p, "x", None, "why", weights)
    assert (none.reward, none.well_formed, none.value, none.reason) == (0.0, False, None, "why")
    assert task.score(p, [], weights, truncated=True).reason == (
        f"no end-of-sequence token within {task.max_length} tokens (truncated)")


def test_text_answers_are_parsed_as_the_task_writes_them() -> None:
    task = DigitsTask(operators="+-", reverse=True)
    assert task.parse_answer(DigitsPrompt(1, "+", 2), " -01 ") == [10, 0, 1]  # "-10", reversed
    assert task.parse_answer(DigitsPrompt(1, "+", 2), "1 0") is None
    assert task.as_number("-01") == "-10" and task.as_number("120") == "021" and task.write(-10) == "-01"
    assert DigitsTask().as_number("120") == "120"
    assert task.solution(DigitsPrompt(3, "-", 13)) == (10, 0, 1, task.eos_id)
    verdict = task.score_text(DigitsPrompt(3, "-", 13), " -01 ", RewardWeights())
    assert verdict.correct and verdict.expression == "-01"
    refused = task.score_text(DigitsPrompt(3, "-", 13), "x", RewardWeights())
    assert refused.reason == ("character 'x' at position 0 is not allowed (only the digits 0-9 and a "
                              "leading '-')")


def _allowed(task: DigitsTask, prefix: list[int]) -> list[str]:
    mask = task.action_mask(DigitsPrompt(1, "+", 2), prefix)
    assert mask.dtype == np.bool_ and mask.shape == (len(task.vocab),)
    return [task.vocab[i] for i in np.flatnonzero(mask)]


def test_reversed_masks_by_hand() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+-", reverse=True)  # at most 3 digits
    minus = task.minus_id
    assert _allowed(task, []) == [*"0123456789", "-"]
    assert _allowed(task, [0]) == [*"0123456789", "<eos>"]  # "0" alone, or a low zero
    assert _allowed(task, [minus, 0]) == [*"0123456789"]  # "-0" cannot end
    assert _allowed(task, [5, 0]) == [*"123456789"]  # the last place cannot be 0; "05" cannot end
    assert _allowed(task, [5, 1, 2]) == ["<eos>"]
    assert _allowed(task, [5, 1, 0]) == ["<eos>"]  # broke the grammar: EOS only
    assert _allowed(task, [minus, minus]) == ["<eos>"]
    assert _allowed(task, [task.eos_id]) == ["<eos>"]


def test_plain_masks_at_their_bounds() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+-")  # at most 3 digits
    minus = task.minus_id
    assert _allowed(task, [minus, 1, 2]) == [*"0123456789", "<eos>"]  # "-12": 2 of 3 digits
    assert _allowed(task, [minus, 1, 2, 3]) == ["<eos>"]
    assert _allowed(task, [minus, 1, 2, 3, 4]) == ["<eos>"]  # beyond the longest answer
    assert _allowed(task, [1, minus]) == ["<eos>"]  # a sign after a digit
    assert _allowed(task, [minus, 0]) == ["<eos>"]  # "-0"
    assert _allowed(DigitsTask(), [minus or 10]) == ["<eos>"]  # no sign token in an unsigned task


@pytest.mark.parametrize("length, low, high", [(1, 0, 9), (2, 10, 99), (3, 100, 999)])
def test_an_operand_of_each_length_spans_its_whole_range(length: int, low: int, high: int) -> None:
    rng = np.random.default_rng(0)
    drawn = {_draw_operand(rng, length) for _ in range(4000)}
    assert min(drawn) == low and max(drawn) == high and all(type(x) is int for x in drawn)


def test_sample_prompt_draws_each_operator_and_checks_the_split() -> None:
    task = DigitsTask(operators="+-*")
    rng = np.random.default_rng(0)
    ops = {task.sample_prompt(rng, "train").op for _ in range(200)}
    assert ops == {"+", "-", "*"}
    with pytest.raises(ValueError, match=r"^split='dev' is not one of"):
        task.sample_prompt(rng, "dev")


def test_reversed_answers_keep_the_sign_first_and_name_a_bad_character_where_it_was_written() -> None:
    task = DigitsTask(operators="+-", reverse=True)
    p, w, minus, eos = DigitsPrompt(3, "-", 8), RewardWeights(), task.minus_id, task.eos_id
    assert task.score(p, [minus, 5, eos], w).correct  # "-5"
    sign_last = "character '-' at position 1 is not allowed (a sign only leads the number)"
    for verdict in (task.score(p, [5, minus, eos], w), task.score_text(p, "5-", w)):
        assert (verdict.reward, verdict.well_formed, verdict.reason) == (0.0, False, sign_last)
    assert task.parse_answer(p, "5-") is None and task.read("21-") == (None, sign_last.replace("1", "2", 1))
    assert task.read("ten") == (None, "character 't' at position 0 is not allowed (only the digits 0-9 and a "
                                      "leading '-')")
    assert task.read("-01") == (-10, None) and task.read("") == (None, "empty answer")


def test_operand_lengths_are_drawn_from_one_digit_up() -> None:
    task = DigitsTask(max_digits=3, train_digits=2)
    rng = np.random.default_rng(0)
    prompts = [task.sample_prompt(rng, "train") for _ in range(4000)]
    # lengths 1 and 2 equally often, and 0 is one of the ten 1-digit numbers: a share near 5%
    share = sum(p.b == 0 for p in prompts) / len(prompts)
    assert 0.03 < share < 0.07
    assert {len(str(p.a)) for p in prompts} == {1, 2}


def test_a_reversed_prefix_beyond_the_longest_answer_can_only_end() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+-", reverse=True)  # at most 3 digits
    assert _allowed(task, [5, 1, 2, 0]) == ["<eos>"]
    assert _allowed(task, [5, 1, 2, 3]) == ["<eos>"]


class PromptedDecode(DigitsTask):
    """Decodes with the prompt (the contract passes it): an empty answer reads as the prompt's result."""

    def decode(self, token_ids, prompt):  # type: ignore[no-untyped-def]
        text = super().decode(token_ids, prompt)
        return str(prompt.result) if text == "" else text


def test_score_decodes_with_the_prompt_and_a_truncated_verdict_keeps_the_text() -> None:
    task, w = PromptedDecode(), RewardWeights()
    p = DigitsPrompt(12, "+", 7)
    assert task.score(p, [task.eos_id], w).correct
    cut = DigitsTask().score(p, [1, 9, 9, 9, 9], w, truncated=True)
    assert cut.expression == "19999" and cut.reward == 0.0 and not cut.well_formed
