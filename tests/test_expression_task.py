"""The expression family's shared abilities (rlvr_env.tasks.expression), pinned to exact values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from rlvr_env import Grammar, Prompt, verify
from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import check_split
from rlvr_env.rewards import truncated_verdict
from rlvr_env.tasks.expression.prompt import unpack_prompt
from rlvr_env.tasks.expression.task import (
    ANSWER,
    BOS,
    COMMA,
    MINUS,
    PAD,
    TARGET,
    ExpressionTask,
    _digits,
    check_number_tokens,
    describe_grammar,
)
from rlvr_env.rewards import RewardWeights, Verdict

D0 = 6  # context id of the digit "0"


class Listed(ExpressionTask):
    """Two numbers named by slot tokens, a finite list of prompts (one with a negative target)."""

    name = "listed"
    vocab = ("n0", "n1", "+", "-", "<eos>")
    max_length = 4
    eos_id = 4
    grammar = Grammar(operators=frozenset("+-"))
    n_numbers = 2
    PROMPTS = {"train": (Prompt((3, 12), 15), Prompt((3, 3), 0)), "test": (Prompt((7, 105), -98),)}

    def prompts(self, split: str) -> tuple[Prompt, ...]:
        check_split(split)
        return self.PROMPTS[split]

    def sample_prompt(self, rng: np.random.Generator, split: str) -> Prompt:
        pool = self.prompts(split)
        return pool[int(rng.integers(len(pool)))]

    def validate_prompt(self, prompt: object) -> Prompt:
        return Prompt(*unpack_prompt(prompt))

    def split_of(self, prompt: Prompt) -> str:
        return "test" if prompt.target < 0 else "train"

    @property
    def prompt_layout(self) -> dict[str, slice]:
        return {"numbers": slice(0, 2), "target": slice(2, 3)}

    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        return np.array([*prompt.numbers, prompt.target], dtype=np.float64) / 1000


class Sampled(Listed):
    """No prompt list and no extent of its own."""

    def prompts(self, split: str) -> None:  # type: ignore[override]
        return None


class Big(Listed):
    PROMPTS = {"train": (Prompt((3, 1000), 1003),), "test": (Prompt((1, 2), -3),)}


class Wide(Listed):
    """One prompt only, whose negative target is its largest value."""

    PROMPTS = {"train": (Prompt((1, 2), -500),), "test": ()}


class NonNegative(Listed):
    PROMPTS = {"train": (Prompt((4, 5), 0),), "test": (Prompt((999, 5), 994),)}


class Doubled(Listed):
    """Pays through a score of its own: the text is parsed into tokens, and the array path is off."""

    def score(self, prompt: Prompt, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        v = super().score(prompt, token_ids, weights, truncated=truncated)
        return Verdict(2 * v.reward, v.correct, v.well_formed, v.value, v.reason, v.expression,
                       {k: 2 * x for k, x in v.parts.items()})


class MaskedListed(Listed):
    def action_mask(self, prompt: Prompt, prefix: Sequence[int]) -> np.ndarray:
        return np.ones(len(self.vocab), dtype=bool)


def test_check_number_tokens_names_the_value_and_the_observation_it_needs() -> None:
    assert check_number_tokens("digits") == "digits" and check_number_tokens("digits", "features") == "digits"
    assert check_number_tokens("whole") == "whole"
    with pytest.raises(ValueError, match=r"^number_tokens='word' is not one of \('digits', 'whole'\)$"):
        check_number_tokens("word")
    with pytest.raises(ValueError, match=r"^number_tokens=1 is not one of"):
        check_number_tokens(1)
    with pytest.raises(ValueError, match=r"^number_tokens='whole' changes only the token context; it needs "
                                         r"observation='tokens', not 'features'$"):
        check_number_tokens("whole", "features")


@pytest.mark.parametrize("grammar, text", [
    (Grammar(frozenset("/*-+"), True, "at_most_once", True),
     "Use only the operators + - * / and parentheses, each number at most once; every division must come out "
     "even; no other numbers."),
    (Grammar(frozenset("*+"), False, "exactly_once", True),
     "Use only the operators + * and no parentheses, each number exactly once; no other numbers."),
    (Grammar(frozenset("/"), False, "exactly_once", False),
     "Use only the operators / and no parentheses, each number exactly once; no other numbers."),
])
def test_describe_grammar_says_each_rule(grammar: Grammar, text: str) -> None:
    assert describe_grammar(grammar) == text


def test_answers_decode_slots_to_numbers_up_to_eos_and_adjacent_numbers_stay_apart() -> None:
    task, p = Listed(), Prompt((3, 12), 15)
    assert task.token_strings([1, 2, 0, 4, 0], p) == ["12", "+", "3"]
    assert task.decode([1, 2, 0], p) == "12+3" and task.decode([0, 1], p) == "3 12"
    assert task.decode([4, 1], p) == ""
    task.vocab = ("n1", "n0", "+", "-", "<eos>")  # a new vocabulary: the slot table follows it
    assert task.token_strings([0, 2, 1], p) == ["12", "+", "3"]


def test_score_withholds_everything_from_a_truncated_answer_and_else_verifies() -> None:
    task, p, weights = Listed(), Prompt((3, 12), 15), RewardWeights()
    assert task.score(p, [0, 2, 1, 2], weights, truncated=True) == truncated_verdict(4, "3+12+")
    assert task.score(p, [0, 2, 1, 4], weights) == verify("3+12", (3, 12), 15, grammar=task.grammar,
                                                          weights=weights)
    assert task.score(p, [0, 2, 1, 4], weights).correct


def test_render_prompt_and_prompt_text() -> None:
    task, p = Listed(), Prompt((3, 12), 15)
    assert task.render_prompt(p) == "numbers: 3 12 | target: 15"
    assert task.prompt_text(p, "Say it.") == (
        "Write an arithmetic expression that equals 15 using the numbers 3, 12.\n"
        f"{describe_grammar(task.grammar)}\nSay it.")


def test_a_finite_task_sizes_its_token_context_from_its_prompt_list() -> None:
    task = Listed()
    assert task.prompt_extent() == (2, 3, 2, True) and task.largest_value() == 105
    assert Big().largest_value() == 1003 and Big().prompt_extent() == (2, 4, 4, True)
    ctx = task.context_tokens()
    # <bos>, 2 x (label, 3 digits), "=", sign, 2 target digits, <ans>
    assert ctx.width == 1 + 2 * 4 + 1 + 1 + 2 + 1
    assert ctx.vocab[:6] == ("<pad>", "<bos>", "=", "<ans>", ",", "-")
    assert len(ctx.vocab) == 16
    n0, n1 = 16, 17  # the answer's own slot tokens label the numbers
    row = task.encode_context(Prompt((7, 105), -98))
    assert row.dtype == np.int64
    assert row.tolist() == [PAD, PAD, BOS, n0, D0 + 7, n1, D0 + 1, D0 + 0, D0 + 5, TARGET, MINUS, D0 + 9,
                            D0 + 8, ANSWER]
    padded = task.encode_context(Prompt((3, 3), 0))  # shorter numbers: padding moves to the front
    assert padded.tolist() == [PAD] * 6 + [BOS, n0, D0 + 3, n1, D0 + 3, TARGET, D0, ANSWER]


def test_the_extent_reads_every_prompt_and_a_sign_only_for_a_negative_target() -> None:
    assert Wide().prompt_extent() == (2, 1, 3, True) and Wide().largest_value() == 500
    assert NonNegative().prompt_extent() == (2, 3, 3, False) and NonNegative().largest_value() == 999
    task = NonNegative()
    task.number_tokens = "whole"  # 999 is the last value with a token of its own
    assert len(task.context_tokens().vocab) == 16 + 1000


def test_a_task_without_slot_tokens_labels_numbers_with_commas() -> None:
    task = ArithmeticTask()
    row = task.encode_context(Prompt((2, 5, 3), 10))
    assert row.tolist() == [BOS, COMMA, D0 + 2, COMMA, D0 + 5, COMMA, D0 + 3, TARGET, D0 + 1, D0, ANSWER]


def test_whole_number_tokens_give_each_value_one_token_up_to_the_limit() -> None:
    task = Listed()
    task.context_tokens()  # the digits layout, cached ...
    task.number_tokens = "whole"  # ... and rebuilt when the setting changes
    ctx = task.context_tokens()
    assert ctx.vocab[16:] == tuple(f"[{v}]" for v in range(106)) and ctx.width == 1 + 2 * 2 + 1 + 1 + 1 + 1
    whole = 16  # context id of "[0]"
    slots = len(ctx.vocab)
    assert task.encode_context(Prompt((7, 105), -98)).tolist() == [
        BOS, slots, whole + 7, slots + 1, whole + 105, TARGET, MINUS, whole + 98, ANSWER]
    big = Big()
    big.number_tokens = "whole"
    text = (r"^number_tokens='whole' gives a token to each value up to 999 \(as the cl100k and Llama-3 "
            r"tokenizers do\); this task's numbers or targets reach 1003: use number_tokens='digits'$")
    with pytest.raises(ValueError, match=text):
        big.context_tokens()


def test_a_sampled_task_must_size_its_own_token_context() -> None:
    text = (r"^task Sampled has no finite prompt list; override prompt_extent and largest_value to size its "
            r"token context$")
    with pytest.raises(ValueError, match=text):
        Sampled().prompt_extent()
    with pytest.raises(ValueError, match=text):
        Sampled().largest_value()


def test_digits_write_each_place_and_mark_leading_zeros() -> None:
    out = _digits(np.array([0, 7, 123, -45]), 3)
    assert out.tolist() == [[-1, -1, D0], [-1, -1, D0 + 7], [D0 + 1, D0 + 2, D0 + 3], [-1, D0 + 4, D0 + 5]]


def test_parse_answer_names_numbers_by_their_first_free_slot() -> None:
    task = Listed()
    assert task.parse_answer(Prompt((3, 3), 0), "3-3") == [0, 3, 1]
    assert task.parse_answer(Prompt((3, 3), 0), "3-3+3") == [0, 3, 1, 2, 0]  # reused: the first slot
    assert task.parse_answer(Prompt((3, 12), 15), "12 + 3") == [1, 2, 0]
    assert task.parse_answer(Prompt((3, 12), 15), "4+3") is None  # not a prompt number
    assert task.parse_answer(Prompt((3, 12), 15), "3*12") is None  # not in the vocabulary
    assert task.parse_answer(Prompt((3, 12), 15), "3 ? 12") is None  # does not lex
    assert task.parse_answer(Prompt((3, 12, 5), 15), "5+3") is None  # a slot the vocabulary cannot write
    literal = ArithmeticTask()
    assert literal.parse_answer(Prompt((2, 5, 3), 10), "2*5") == [0, 4, 2]
    assert literal.parse_answer(Prompt((2, 5, 3), 10), "7") is None


def test_score_text_pays_as_the_token_envs_pay() -> None:
    weights = RewardWeights()
    p = Prompt((3, 12), 15)
    plain = Listed()
    assert plain.score_text(p, "3+12", weights) == verify("3+12", (3, 12), 15, grammar=plain.grammar,
                                                          weights=weights)
    doubled = Doubled()
    paid = doubled.score_text(p, "3+12", weights)
    assert paid.reward == pytest.approx(2.2) and paid.correct
    # text the vocabulary cannot write is verified as text (it is not paid twice either)
    assert doubled.score_text(p, "3*12", weights) == verify("3*12", (3, 12), 15, grammar=doubled.grammar,
                                                            weights=weights)


def test_prompt_records_round_trip_and_bad_records_name_the_rule() -> None:
    task = Listed()
    record = task.prompt_record(Prompt((np.int64(3), 12), np.int32(15)))  # type: ignore[arg-type]
    assert record == {"numbers": [3, 12], "target": 15}
    assert all(type(x) is int for x in record["numbers"]) and type(record["target"]) is int
    assert task.prompt_from_record(record) == Prompt((3, 12), 15)
    for bad in ([1, 2], {"numbers": [1]}, {"target": 1}):
        with pytest.raises(ValueError, match=r"must be a dict with 'numbers' and 'target'$"):
            task.prompt_from_record(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^record \{'target': 1\} must be a dict"):
        task.prompt_from_record({"target": 1})


def test_the_array_path_is_offered_only_while_scoring_is_the_package_s_own() -> None:
    assert Listed().scores_by_verify and Listed().array_path()
    assert not Doubled().scores_by_verify and not Doubled().array_path()
    assert MaskedListed().scores_by_verify and not MaskedListed().array_path()
    assert ArithmeticTask(grammar_mask=True).array_path()  # it masks arrays itself
    assert Listed().mask_automaton() is None and Listed().program_table() is None


def test_the_array_path_s_arrays_have_their_shapes_and_dtypes() -> None:
    task = Listed()
    numbers, targets, facts = task.sample_arrays(np.random.default_rng(0), "train", 5)
    expected = task.sample_prompts(np.random.default_rng(0), "train", 5)
    assert numbers.dtype == np.int64 and numbers.shape == (5, 2)
    assert numbers.tolist() == [list(p.numbers) for p in expected]
    assert targets.dtype == np.int64 and targets.tolist() == [p.target for p in expected]
    assert facts.dtype == np.int64 and facts.shape == (5, 0)
    features = task.encode_arrays(numbers, targets)
    assert features.dtype == np.float32 and features.shape == (5, 3)
    assert np.array_equal(features, np.stack([task.encode_prompt(p) for p in expected]).astype(np.float32))
    none = task.encode_arrays(np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    assert none.dtype == np.float32 and none.shape == (0, 3)
    masks = task.action_masks_arrays(np.zeros((4, 3), np.int64), np.zeros(4, np.int64))
    assert masks.dtype == np.bool_ and masks.shape == (4, 5) and masks.all()
    ids = task.context_arrays(numbers, targets)
    assert ids.dtype == np.int64 and np.array_equal(ids, np.stack([task.encode_context(p) for p in expected]))


def _row_by_hand(task: ExpressionTask, numbers: Sequence[int], target: int) -> list[int]:
    """The token context of one prompt written out from its decimal text (the digits layout)."""
    n, number_digits, target_digits, signed = task.prompt_extent()
    slots = {int(tok[1:]): i for i, tok in enumerate(task.vocab) if tok[:1] == "n" and tok[1:].isdigit()}
    offset = len(task.context_tokens().vocab)
    body = [BOS]
    for k, x in enumerate(numbers):
        body += [offset + slots[k] if k in slots else COMMA, *(D0 + int(c) for c in str(abs(x)))]
    body += [TARGET, *([MINUS] if target < 0 else []), *(D0 + int(c) for c in str(abs(target))), ANSWER]
    width = 1 + n * (1 + number_digits) + 1 + int(signed) + target_digits + 1
    return [PAD] * (width - len(body)) + body


def test_wide_rows_keep_every_token_in_order_behind_the_padding() -> None:
    from rlvr_env.tasks.countdown.task import CountdownTask

    task = CountdownTask(n_numbers=6, number_range=(1, 100), target_range=(-999, 999))
    rng = np.random.default_rng(0)
    numbers = rng.integers(1, 101, size=(64, 6))
    targets = rng.integers(-999, 1000, size=64)
    rows = task.context_arrays(numbers, targets)
    assert rows.dtype == np.int64 and rows.shape == (64, task.context_tokens().width)
    for row, nums, t in zip(rows.tolist(), numbers.tolist(), targets.tolist()):
        assert row == _row_by_hand(task, nums, t)


def test_context_arrays_read_any_integer_dtype_and_a_single_prompt() -> None:
    task = NonNegative()
    task.number_tokens = "whole"
    whole = 16  # context id of "[0]"
    small = task.context_arrays(np.array([[250, 5]], dtype=np.uint8), np.array([255], dtype=np.uint8))
    n1 = len(task.context_tokens().vocab) + 1
    assert small.dtype == np.int64
    assert small[0, -6:].tolist() == [whole + 250, n1, whole + 5, TARGET, whole + 255, ANSWER]
    one = task.context_arrays(np.array([3, 12]), np.int64(15))  # (N,) and a scalar: one row
    assert one.shape == (1, task.context_tokens().width)
    assert np.array_equal(one[0], task.encode_context(Prompt((3, 12), 15)))


class Int32Listed(Listed):
    """Prompts holding NumPy int32 values (as a user's task drawn from arrays may)."""

    def sample_prompts(self, rng: np.random.Generator, split: str, k: int) -> list[Prompt]:
        return [Prompt(tuple(np.int32(x) for x in p.numbers), np.int32(p.target))
                for p in super().sample_prompts(rng, split, k)]


def test_sample_arrays_are_int64_whatever_the_prompts_hold() -> None:
    numbers, targets, _ = Int32Listed().sample_arrays(np.random.default_rng(0), "train", 3)
    assert numbers.dtype == np.int64 and targets.dtype == np.int64 and numbers.shape == (3, 2)


def test_score_text_uses_the_task_s_grammar_and_the_weights_on_every_path() -> None:
    weights = RewardWeights(accuracy=2.0, format=0.5)
    p = Prompt((3, 12), 9)
    for task in (Listed(), Doubled()):
        expected = verify("12-3", (3, 12), 9, grammar=task.grammar, weights=weights)
        assert expected.correct and expected.reward == 2.5
        factor = 2 if isinstance(task, Doubled) else 1
        assert task.score_text(p, "12-3", weights).reward == factor * 2.5
        # what the vocabulary cannot write is verified as text, under the same grammar and weights
        refused = task.score_text(p, "12*3", weights)
        assert refused == verify("12*3", (3, 12), 9, grammar=task.grammar, weights=weights)
        assert "*" in str(refused.reason)


class CountingVocab(tuple):  # type: ignore[type-arg]
    """A vocabulary that counts how often it is read whole (to build a lookup table)."""

    reads = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        CountingVocab.reads += 1
        return super().__iter__()


class CountedExtent(Listed):
    calls = 0

    def prompt_extent(self) -> tuple[int, int, int, bool]:
        CountedExtent.calls += 1
        return super().prompt_extent()


def test_the_slot_table_and_the_context_layout_are_computed_once_per_setting() -> None:
    task = CountedExtent()
    task.vocab = CountingVocab(Listed.vocab)
    CountingVocab.reads = CountedExtent.calls = 0
    p = Prompt((3, 12), 15)
    for _ in range(3):
        assert task.decode([1, 2, 0], p) == "12+3"
    assert CountingVocab.reads == 1
    CountingVocab.reads = 0
    first = task.context_tokens()
    for _ in range(3):
        task.encode_context(p)
    assert CountedExtent.calls == 1 and task.context_tokens() == first
    task.vocab = CountingVocab(("n1", "n0", "+", "-", "<eos>"))  # a new vocabulary: both are rebuilt
    assert task.decode([0, 2, 1], p) == "12+3"
    task.encode_context(p)
    assert CountedExtent.calls == 2
    row = task.encode_context(p).tolist()
    assert row[row.index(BOS) + 1:][:2] == [17, D0 + 3]  # slot 0 is now answer token 1


def test_every_arithmetic_prompt_has_a_solution_the_verifier_pays() -> None:
    """The cold start's answer for the lesson's task: correct for all 30 prompts, first in the prompt's own
    number order where one exists there."""
    from rlvr_env.rewards import DEFAULT_WEIGHTS
    from rlvr_env.tasks.expression.arithmetic import ArithmeticTask

    task = ArithmeticTask()
    assert task.has_solutions
    for split in ("train", "test"):
        for prompt in task.prompts(split):
            answer = task.solution(prompt)
            assert len(answer) == task.max_length and task.score(prompt, answer, DEFAULT_WEIGHTS).correct
    first = task.validate_prompt(((2, 5, 3), 10))
    assert [task.vocab[t] for t in task.solution(first)] == ["2", "+", "5", "+", "3"]
    assert [task.vocab[t] for t in task.solution(task.validate_prompt(((5, 3, 2), 30)))] == ["5", "*", "3", "*", "2"]
    with pytest.raises(ValueError):
        task.solution(((2, 3, 4), 10))
