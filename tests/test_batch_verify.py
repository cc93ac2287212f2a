"""The batch verifier agrees exactly with ``verify()`` on random and exhaustive token sequences."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from rlvr_env import Grammar, RewardWeights, verify
from rlvr_env.tasks.expression.batch_verify import batch_verify
from rlvr_env.tasks.countdown.programs import by_programs
from rlvr_env.tasks.expression.machine import StackMachine
from rlvr_env.tasks.expression.tokens import TokenTable
from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.countdown.task import CountdownTask

WIDE = Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once")
GRAMMARS = [
    WIDE,
    Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="exactly_once"),
    Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once", integer_division=True),
    Grammar(operators=frozenset("+*"), parentheses=False, number_use="exactly_once"),
    Grammar(operators=frozenset("-/"), parentheses=False, number_use="at_most_once"),
]
SLOT_VOCAB = ("n0", "n1", "n2", "+", "-", "*", "/", "(", ")", "<eos>")


def assert_agrees(
    tokens: np.ndarray,
    numbers: np.ndarray,
    targets: np.ndarray,
    table: TokenTable,
    grammar: Grammar,
    weights: RewardWeights | None = None,
) -> None:
    """Every row of ``batch_verify`` equals ``verify`` on the row's decoded text."""
    got = batch_verify(tokens, numbers, targets, table=table, grammar=grammar, weights=weights)
    values = got.values()
    for i in range(len(tokens)):
        text = table.text(tokens[i].tolist(), table.values(numbers[i : i + 1])[0])
        want = verify(text, numbers[i].tolist(), int(targets[i]), grammar=grammar, weights=weights)
        row = (bool(got.correct[i]), bool(got.well_formed[i]), values[i], float(got.reward[i]))
        assert row == (want.correct, want.well_formed, want.value, want.reward), (text, numbers[i], want)
        assert {k: float(v[i]) for k, v in got.parts.items()} == want.parts, text


def test_doc_example_and_text_of_rows() -> None:
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    assert table.text([7, 0, 3, 1, 8, 5, 2, 9, 0], np.array([2, 3, 5, 0, 0, 0, 0, 0, 0, 0])) == "(2+3)*5"


@pytest.mark.parametrize("grammar", GRAMMARS, ids=lambda g: f"{''.join(sorted(g.operators))}-{g.number_use}")
def test_exhaustive_two_slots(grammar: Grammar) -> None:
    # Every sequence of up to 5 tokens over 2 slots, 4 operators, parentheses and EOS (9**5 = 59,049)
    # for prompts with a zero (division by zero, a "0" next to another number), a duplicate, and numbers
    # whose digits written together would spell a prompt number (adjacent tokens must not join).
    vocab = ("n0", "n1", "+", "-", "*", "/", "(", ")", "<eos>")
    table = TokenTable.from_vocab(vocab, eos_id=8)
    tokens = np.array(list(itertools.product(range(9), repeat=5)))  # (59049, 5)
    prompts = [((2, 3), 5), ((0, 4), 4), ((3, 3), 1)]
    rng = np.random.default_rng(0)
    for numbers, target in prompts:
        sample = tokens[rng.choice(len(tokens), size=4000, replace=False)]
        nums = np.tile(numbers, (len(sample), 1))
        assert_agrees(sample, nums, np.full(len(sample), target), table, grammar)


def test_exhaustive_short_sequences_all_rows() -> None:
    # All 9**4 sequences of 4 tokens, every one checked, for one prompt and the widest grammar.
    table = TokenTable.from_vocab(("n0", "n1", "+", "-", "*", "/", "(", ")", "<eos>"), eos_id=8)
    tokens = np.array(list(itertools.product(range(9), repeat=4)))
    nums = np.tile((6, 3), (len(tokens), 1))
    assert_agrees(tokens, nums, np.full(len(tokens), 2), table, WIDE)


def test_exhaustive_arithmetic_vocabulary() -> None:
    # The lesson's vocabulary: constant number tokens ("2" "3" is two numbers, never 23), all 5**5 answers.
    task = ArithmeticTask()
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    tokens = np.array(list(itertools.product(range(5), repeat=5)))
    for target in (17, 30):
        nums = np.tile((2, 3, 5), (len(tokens), 1))
        assert_agrees(tokens, nums, np.full(len(tokens), target), table, task.grammar)


@pytest.mark.parametrize("grammar", GRAMMARS, ids=lambda g: f"{''.join(sorted(g.operators))}-{g.number_use}")
def test_random_sequences_agree(grammar: Grammar) -> None:
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    rng = np.random.default_rng(1)
    b = 3000
    tokens = rng.integers(0, 10, size=(b, 11))
    # Bias half the rows towards grammatical text: numbers at even positions, operators at odd ones.
    tokens[: b // 2, 0::2] = rng.integers(0, 3, size=(b // 2, 6))
    tokens[: b // 2, 1::2] = rng.integers(3, 7, size=(b // 2, 5))
    numbers = rng.integers(0, 13, size=(b, 3))
    numbers[:50] = (12, 3, 123)  # "n0 n1" written together would spell 123, which is in the prompt
    targets = rng.integers(-5, 40, size=b)
    assert_agrees(tokens, numbers, targets, table, grammar, RewardWeights(accuracy=2.0, format=0.5))


def test_masked_countdown_answers_agree() -> None:
    # Answers that follow the grammar masks reach deep parentheses and many numbers (N = 6).
    task = CountdownTask(n_numbers=6, number_range=(1, 20), target_range=(-100, 100), max_length=24)
    rng = np.random.default_rng(2)
    b = 1500
    numbers, targets, _ = task.sample_arrays(rng, "train", b)
    tokens = np.full((b, task.max_length), task.eos_id)
    lengths = np.zeros(b, dtype=np.int64)
    ended = np.zeros(b, dtype=bool)
    for col in range(task.max_length):
        masks = task.action_masks_arrays(tokens, lengths)
        assert masks.any(axis=1).all()
        pick = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        live = ~ended
        tokens[live, col] = pick[live]
        lengths += live
        ended |= live & (pick == task.eos_id)
    assert ended.all()  # masked answers always end with EOS within max_length
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    assert_agrees(tokens, numbers, targets, table, task.grammar)


def test_overflow_rows_fall_back_to_the_text_verifier() -> None:
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    # 999999 ** 4 and beyond exceed int64; 999999 * 999998 / 999997 needs the fallback's big integers.
    rows = [
        [0, 5, 0, 5, 0, 5, 0, 5, 0, 9],
        [0, 5, 1, 6, 2, 9, 9, 9, 9, 9],
        [7, 0, 5, 1, 8, 6, 2, 9, 9, 9],
        [0, 5, 1, 5, 2, 9, 9, 9, 9, 9],
    ]
    tokens = np.array(rows)
    numbers = np.tile((999999, 999998, 999997), (len(rows), 1))
    targets = np.array([1, 2, 3, 999994000010999994])
    got = batch_verify(tokens, numbers, targets, table=table, grammar=WIDE, programs=by_programs)
    # Row 0 repeats a slot (the general path, whose 31-bit operand rule sends it to the text verifier);
    # rows 1-3 use three distinct slots, whose programs stay exact in int64 (2**2 * 999999**3 < 2**63).
    assert got.fallback.tolist() == [True, False, False, False]
    general = batch_verify(tokens, numbers, targets, table=table, grammar=WIDE)  # no shortcut: all by text
    assert general.fallback.tolist() == [True, True, True, True] and general.values() == got.values()
    assert_agrees(tokens, numbers, targets, table, WIDE)
    assert_agrees(tokens, numbers, targets, table, Grammar(frozenset("+-*/"), True, "at_most_once", True))


def test_lengths_and_eos_end_rows() -> None:
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    tokens = np.array([[0, 3, 1, 9, 5], [0, 3, 1, 5, 2]])
    got = batch_verify(tokens, np.array([[2, 3, 5]] * 2), np.array([5, 5]), table=table, grammar=WIDE,
                       lengths=np.array([5, 3]))
    assert got.correct.tolist() == [True, True]  # row 0 ends at EOS, row 1 after 3 tokens


def test_incremental_machine_equals_whole_batch() -> None:
    # Feeding columns one at a time with some rows idle gives the same verdicts as batch_verify.
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 9, size=(200, 7))
    numbers = rng.integers(1, 9, size=(200, 3))
    targets = rng.integers(0, 20, size=200)
    machine = StackMachine(table, WIDE, 200, 7, num_numbers=3)
    machine.set_prompts(np.arange(200), numbers, targets)
    for col in range(7):
        idle = rng.random(200) < 0.3  # idle rows do not advance this call
        machine.feed(tokens[:, col], ~idle)
    lengths = machine.pos.copy()
    got = machine.finish(np.arange(200))
    want = batch_verify(machine.tokens, numbers, targets, table=table, grammar=WIDE, lengths=lengths)
    assert got.correct.tolist() == want.correct.tolist()
    assert got.values() == want.values()


@pytest.mark.parametrize(
    "tokens, message",
    [
        (np.zeros((2, 3), dtype=float), "int array"),
        (np.zeros(3, dtype=int), "(B, L)"),
        (np.full((2, 3), 10), "token ids"),
        (np.full((2, 3), -1), "token ids"),
    ],
)
def test_bad_input_is_a_value_error(tokens: np.ndarray, message: str) -> None:
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        batch_verify(tokens, np.ones((2, 3)), np.ones(2), table=table, grammar=WIDE)


def test_negative_prompt_numbers_are_refused() -> None:
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    with pytest.raises(ValueError, match="< 0"):
        batch_verify(np.zeros((1, 2), dtype=int), np.array([[-1, 2, 3]]), np.ones(1), table=table,
                     grammar=WIDE)


def test_lexing_limits_long_numbers_and_long_text() -> None:
    # A 7-digit prompt number is not a literal; 40 six-digit numbers make text past MAX_TEXT_CHARS.
    table = TokenTable.from_vocab(SLOT_VOCAB, eos_id=9)
    long_text = [0, 3] * 39 + [0, 9]  # n0 + n0 + ... + n0 <eos>: 40 * 6 + 39 = 279 characters
    tokens = np.array([[0, 3, 1, 9] + [9] * 76, long_text, [1, 3, 2, 9] + [9] * 76])
    numbers = np.array([[1234567, 2, 3], [999999, 1, 2], [5, 2, 3]])
    targets = np.array([1234569, 39999960, 5])
    assert_agrees(tokens, numbers, targets, table, WIDE)
    got = batch_verify(tokens, numbers, targets, table=table, grammar=WIDE)
    assert got.has_value.tolist() == [False, False, True]


# -- one reading for the batch verifier and verify(task.decode(row)) --------------------------------
def test_tokens_after_eos_are_not_read_by_either_path() -> None:
    task = CountdownTask(n_numbers=3)
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    plus, eos = task.vocab.index("+"), task.eos_id
    rows = np.array([[0, eos, plus, 1, eos], [0, plus, 1, eos, 2], [eos, 0, plus, 1, eos]])
    numbers = np.tile((4, 5, 6), (3, 1))
    targets = np.array([9, 9, 9])
    got = batch_verify(rows, numbers, targets, table=table, grammar=task.grammar)
    prompt = task.validate_prompt(((4, 5, 6), 9))
    for i, row in enumerate(rows.tolist()):
        text = task.decode(row, prompt)
        want = verify(text, (4, 5, 6), 9, grammar=task.grammar)
        assert (bool(got.correct[i]), bool(got.well_formed[i]), float(got.reward[i])) == (
            want.correct, want.well_formed, want.reward), (row, text)
    assert got.reward.tolist() == pytest.approx([0.1, 1.1, 0.0])  # "4", "4+5", ""
    assert [task.decode(r, prompt) for r in rows.tolist()] == ["4", "4+5", ""]


@pytest.mark.parametrize("token", [" ", "", "2+3", " 2", "2 ", "05", "1234567", "**", "((", "+ "])
def test_vocabularies_read_two_ways_are_refused(token: str) -> None:
    # Read token by token and read as text, such a token would mean different things: refused up front,
    # by the batch verifier's table, the single env and the vector env alike.
    vocab = ("n0", "n1", "+", token, "<eos>")
    with pytest.raises(ValueError, match=re.escape(f"vocabulary token 3 {token!r}")):
        TokenTable.from_vocab(vocab, eos_id=4)


def test_tokens_the_verifier_rejects_stay_allowed_and_agree() -> None:
    # A token with a character no answer may contain (a padding token, a letter) is not ambiguous: both
    # readings reject any answer that uses it.
    vocab = ("n0", "n1", "+", "<pad>", "x", "<eos>")
    table = TokenTable.from_vocab(vocab, eos_id=5)
    tokens = np.array([[0, 2, 1, 5], [0, 3, 1, 5], [4, 2, 1, 5]])
    assert_agrees(tokens, np.tile((2, 3), (3, 1)), np.full(3, 5), table, WIDE)
    assert batch_verify(tokens, np.tile((2, 3), (3, 1)), np.full(3, 5), table=table,
                        grammar=WIDE).reward.tolist() == pytest.approx([1.1, 0.0, 0.0])
