"""The Task contract's defaults and helpers (rlvr_env.tasks.base), each pinned to what it must return."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from rlvr_env.tasks.base import ContextTokens, Task, check_split
from rlvr_env.tasks.expression.prompt import Prompt, unpack_prompt
from rlvr_env.rewards import refused_verdict, truncated_verdict
from rlvr_env.rewards import RewardWeights, Verdict
from rlvr_env.scoring import TaskScorer


class Plain(Task[str]):
    """The least a task implements: prompts are words from a fixed list, an answer spells one back."""

    name = "plain"
    vocab = ("a", "bb", "b", "", "<eos>")
    max_length = 3
    eos_id = 4

    def __init__(self) -> None:
        self.drawn = 0

    def sample_prompt(self, rng: np.random.Generator, split: str) -> str:
        self.drawn += 1
        return ("ab", "ba", "bba")[int(rng.integers(3))] + split[0]

    def validate_prompt(self, prompt: object) -> str:
        return str(prompt)

    def split_of(self, prompt: str) -> str:
        return "train"

    @property
    def prompt_layout(self) -> dict[str, slice]:
        return {"x": slice(0, 2), "y": slice(2, 5)}

    def encode_prompt(self, prompt: str) -> np.ndarray:
        return np.zeros(5, dtype=np.float32)

    def score(self, prompt: str, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        text = self.decode(token_ids, prompt)
        return Verdict(reward=float(len(token_ids)), correct=not truncated, well_formed=True, value=None,
                       reason=None, expression=text, parts={"len": float(len(token_ids))})


class Masked(Plain):
    """A grammar mask: after ``n`` tokens only token ``n`` (and EOS) is allowed."""

    def action_mask(self, prompt: str, prefix: Sequence[int]) -> np.ndarray:
        mask = np.zeros(len(self.vocab), dtype=bool)
        mask[[len(prefix), self.eos_id]] = True
        mask[1] |= prompt.startswith("b")  # and a prompt of its own may allow more
        return mask

    def solution(self, prompt: str) -> tuple[int, ...]:
        return (self.eos_id,)  # type: ignore[return-value]


class Built(Plain):
    def __init__(self, size: int = 1) -> None:
        super().__init__()
        self.size = size


def test_prompts_order_by_numbers_then_target_compare_without_meta_and_refuse_other_types() -> None:
    p = Prompt((1, 2), 3, meta=(("solutions", 2),))
    assert p == Prompt((1, 2), 3) and hash(p) == hash(Prompt((1, 2), 3))
    assert p != Prompt((1, 2), 4) and p != Prompt((2, 1), 3)
    assert p.__eq__(((1, 2), 3)) is NotImplemented and p != ((1, 2), 3)
    assert Prompt((1, 2), 3) < Prompt((1, 2), 4) < Prompt((1, 3), 0)
    assert not Prompt((1, 2), 3) < Prompt((1, 2), 3) and Prompt((1, 2), 3) <= Prompt((1, 2), 3)
    assert p.__lt__(1) is NotImplemented
    with pytest.raises(TypeError):
        p < 1  # noqa: B015
    distinct = [Prompt((1, 2), 3), Prompt((1, 2), 4), Prompt((2, 1), 3), Prompt((1, 2, 3), 3), Prompt((), 0)]
    assert len({hash(q) for q in distinct}) == len(distinct)  # prompts spread over a dict's buckets
    assert repr(p) == "Prompt(numbers=(1, 2), target=3)"
    assert p.info() == {"solutions": 2} and Prompt((1,), 1).info() == {}


@pytest.mark.parametrize("vocab, width, text", [
    ((), 3, r"^ContextTokens\.vocab=\(\) must start with '<pad>' \(id 0 pads\)$"),
    (("x", "<pad>"), 3, r"^ContextTokens\.vocab=\('x', '<pad>'\) must start with '<pad>'"),
    (("<pad>",), 0, r"^ContextTokens\.width=0 must be a positive integer$"),
    (("<pad>",), -2, r"^ContextTokens\.width=-2 must be a positive integer$"),
    (("<pad>",), True, r"^ContextTokens\.width=True must be a positive integer$"),
    (("<pad>",), 2.0, r"^ContextTokens\.width=2\.0 must be a positive integer$"),
])
def test_context_tokens_refuse_a_vocabulary_without_pad_first_and_a_width_below_one(
        vocab: tuple[str, ...], width: object, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        ContextTokens(vocab, width)  # type: ignore[arg-type]


def test_context_tokens_accept_a_width_of_one() -> None:
    assert ContextTokens(("<pad>", "x"), 1).width == 1


def test_the_contract_s_defaults() -> None:
    task = Plain()
    assert task.prompts("train") is None and task.prompts("test") is None
    assert task.prompt_dim == 5 and task.render_prompt("abt") == "abt"
    assert task.context_tokens() is None and task.solution("ab") is None and not task.has_solutions
    assert isinstance(task.batch_scorer(2, RewardWeights()), TaskScorer) and task.tabular_segments is None
    assert not task.grammar_masked and Masked().grammar_masked and Masked().has_solutions
    assert task.prompt_text("ab", "Answer in <answer> tags.") == "ab\nAnswer in <answer> tags."
    with pytest.raises(NotImplementedError, match=r"^task Plain offers no token observation$"):
        task.encode_context("ab")
    with pytest.raises(NotImplementedError, match=r"^task Plain does not write its prompts as records$"):
        task.prompt_record("ab")
    with pytest.raises(NotImplementedError, match=r"^task Plain does not read its prompts from records$"):
        task.prompt_from_record({})
    assert task.keywords() == {}
    with pytest.raises(NotImplementedError, match=r"^task Built takes \['size'\]: override Task\.keywords to "
                                                  r"return the values it was built with$"):
        Built(2).keywords()


def test_sample_prompts_draws_k_prompts_of_the_split_in_order_from_the_generator() -> None:
    task = Plain()
    drawn = task.sample_prompts(np.random.default_rng(3), "test", 6)
    rng = np.random.default_rng(3)
    assert drawn == [task.sample_prompt(rng, "test") for _ in range(6)] and task.drawn == 12
    assert all(p.endswith("t") for p in drawn) and task.sample_prompts(rng, "train", 0) == []


def test_decode_joins_the_vocabulary_strings_up_to_the_first_eos() -> None:
    task = Plain()
    assert task.decode([0, 1, 2], "ab") == "abbb"
    assert task.decode([0, 4, 1], "ab") == "a" and task.decode([4], "ab") == ""


def test_score_batch_gives_score_s_verdict_per_answer_with_truncation_as_a_bool() -> None:
    task, weights = Plain(), RewardWeights()
    verdicts = task.score_batch(["ab", "ba"], [[0, 1], [2]], weights, np.array([True, False]))
    assert verdicts == [task.score("ab", [0, 1], weights, truncated=True),
                        task.score("ba", [2], weights, truncated=False)]
    assert [v.correct for v in verdicts] == [False, True]


def test_action_masks_default_to_all_ones_and_else_are_the_rows_masks() -> None:
    tokens = np.array([[0, 1, 2], [2, 2, 2]])
    lengths = np.array([2, 0])
    ones = Plain().action_masks_batch(["ab", "ba"], tokens, lengths)
    assert ones.dtype == np.bool_ and ones.shape == (2, 5) and ones.all()
    single = Plain().action_mask("ab", [0])
    assert single.dtype == np.bool_ and single.shape == (5,) and single.all()
    task = Masked()
    masks = task.action_masks_batch(["ab", "ba"], tokens, lengths)
    assert masks.dtype == np.bool_ and masks.shape == (2, 5)
    assert np.array_equal(masks, np.stack([task.action_mask("ab", [0, 1]), task.action_mask("ba", [])]))
    assert masks[0].tolist() == [False, False, True, False, True]
    assert masks[1].tolist() == [True, True, False, False, True]
    none = task.action_masks_batch([], np.zeros((0, 3), np.int64), np.zeros(0, np.int64))
    assert none.dtype == np.bool_ and none.shape == (0, 5)


def test_parse_answer_reads_longest_strings_first_skips_spaces_and_refuses_other_text() -> None:
    task = Plain()
    assert task.parse_answer("ab", "abb b") == [0, 1, 2]
    assert task.parse_answer("ab", "  a  ") == [0] and task.parse_answer("ab", "") == []
    assert task.parse_answer("ab", "ac") is None
    assert task.parse_answer("ab", "<eos>") is None  # EOS is never written as text


def test_score_text_appends_eos_truncates_beyond_max_length_and_refuses_what_it_cannot_write() -> None:
    task, weights = Plain(), RewardWeights()
    fits = task.score_text("ab", "a bb", weights)  # 2 tokens + EOS = max_length
    assert fits == task.score("ab", [0, 1, 4], weights, truncated=False)
    long = task.score_text("ab", "a bb b", weights)
    assert long == task.score("ab", [0, 1, 2], weights, truncated=True)
    refused = task.score_text("ab", "xyz", weights)
    assert refused == refused_verdict("answer 'xyz' cannot be written in this task's vocabulary", "xyz")


def test_truncated_and_refused_verdicts_pay_nothing_and_say_why() -> None:
    cut = truncated_verdict(7, "1+")
    assert cut == Verdict(reward=0.0, correct=False, well_formed=False, value=None,
                          reason="no end-of-sequence token within 7 tokens (truncated)", expression="1+",
                          parts={"accuracy": 0.0, "format": 0.0})
    refused = refused_verdict("bad")
    assert refused == Verdict(reward=0.0, correct=False, well_formed=False, value=None, reason="bad",
                              expression="", parts={"accuracy": 0.0, "format": 0.0})


def test_check_split_names_the_value_and_the_splits() -> None:
    check_split("train")
    check_split("test")
    with pytest.raises(ValueError, match=r"^split='val' is not one of \('train', 'test'\)$"):
        check_split("val")


@pytest.mark.parametrize("prompt, expected", [
    (Prompt((1, 2), 3), ((1, 2), 3)),
    (((1, 2), 3), ((1, 2), 3)),
    ([[np.int64(4)], np.int32(-5)], ((4,), -5)),
    (((), 0), ((), 0)),
])
def test_unpack_prompt_takes_a_prompt_or_a_pair_of_integers(prompt: object,
                                                            expected: tuple[tuple[int, ...], int]) -> None:
    numbers, target = unpack_prompt(prompt)
    assert (numbers, target) == expected
    assert all(type(n) is int for n in numbers) and type(target) is int


@pytest.mark.parametrize("prompt, text", [
    ((1, 2, 3),
     r"^prompt \(1, 2, 3\) must be a Prompt or a \(numbers, target\) pair, e\.g\. \(\(2, 3, 5\), 17\)$"),
    ("ab", r"^prompt 'ab' must be a Prompt or a \(numbers, target\) pair"),
    (("12", 3), r"^prompt numbers '12' must be a sequence of integers$"),
    ((5, 3), r"^prompt numbers 5 must be a sequence of integers$"),
    (((1, True), 3), r"^prompt number True in \(1, True\) must be an integer$"),
    (((1, 2.0), 3), r"^prompt number 2\.0 in \(1, 2\.0\) must be an integer$"),
    (((1, 2), False), r"^prompt target False must be an integer$"),
    (((1, 2), 3.0), r"^prompt target 3\.0 must be an integer$"),
])
def test_unpack_prompt_names_the_value_and_the_rule(prompt: object, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        unpack_prompt(prompt)
