"""The verifier's fast path for text agrees with the reference path, verdict for verdict, reasons included.

``verify()`` on a ``str`` answer runs ``_verify_text`` (a one-pass lexer and evaluator that keeps integers
as ints); ``_verify_reference`` is the original ``tokenize`` + ``parse_and_evaluate`` +
``check_number_use`` pipeline. The language-model reward functions score through
``completions.score_parts``, whose reference is ``score_completion`` row by row. These tests compare them
on random, exhaustive and hostile inputs: every field of the verdict must be equal (``value`` a
``Fraction`` in both), and every reason must be the same string.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_env import Grammar, RewardWeights, verify
from rlvr_env.completions import AnswerFormat
from rlvr_env.tasks.expression.completions import score_completion, score_parts
from rlvr_env.tasks.expression.verifier import (
    MAX_TEXT_CHARS,
    _evaluate_fast,
    _verify_reference,
    parse_and_evaluate,
    tokenize,
    VerifierError,
)

GRAMMARS = [
    Grammar(),
    Grammar(operators=frozenset("+-*/"), parentheses=True),
    Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once"),
    Grammar(operators=frozenset("+-*/"), parentheses=True, integer_division=True),
    Grammar(operators=frozenset("-/"), parentheses=False, number_use="at_most_once",
            integer_division=True),
    Grammar(operators=frozenset("*"), parentheses=True),
]
WEIGHTS = [RewardWeights(), RewardWeights(accuracy=2.0, format=-0.5)]

HOSTILE = [
    "", " ", "   ", "0", "00", "05", "0+5", "5+0", "123456", "1234567", "999999*999999*999999",
    "1 2", "12 3+4", "1  +  2", "2**3", "2**3**2", "2^3", "3!", "-2+3", "+2", "2+", "2++3", "(", ")",
    "()", ")(", "(2", "2)", "((2))", "(2)(3)", "2(3)", "(2)3", "1/0", "1/(2-2)", "0/0", "3/2", "6/3",
    "6/4*2", "(1/3)*3", "1/3+2/3", "7/(1/2)", "1.0+2", "1.5", "2.", ".5", "1,2", "__import__('os')",
    "(lambda: 7)()", "١+٢", "1+2 = 3", "1\n+2", "1\t+2", "\u00a01+2", "9" * 5000, "(" * 200 + "1" + ")" * 200,
    "1+" * 128, "1" + "+1" * 127, "1" + "+1" * 200, "2*3-5*1", "3-5", "5-3-2", "8/2/2", "8/(2/2)",
    "2*(3+5)/4-1", "4/2*3", "10-2*3", "(((1+2)*3)-4)/5",
]


def _same(a, b) -> None:
    assert (a.reward, a.correct, a.well_formed, a.reason, a.expression, a.parts) == \
        (b.reward, b.correct, b.well_formed, b.reason, b.expression, b.parts)
    assert a.value == b.value and type(a.value) is type(b.value)


def _both(text: str, numbers: tuple[int, ...], target: int | Fraction, grammar: Grammar,
          weights: RewardWeights = RewardWeights()) -> None:
    fast = verify(text, numbers, target, grammar=grammar, weights=weights)
    ref = _verify_reference(text, numbers, target, grammar=grammar, weights=weights)
    _same(fast, ref)
    # the fast evaluator accepts exactly what the reference lexer and parser accept, with the same value
    try:
        expected = parse_and_evaluate(tokenize(text), grammar)
    except VerifierError:
        expected = None
    got = _evaluate_fast(text, grammar)
    if expected is None:
        assert got is None, text
    else:
        assert got is not None and got[0] == expected[0] and got[1] == expected[1], text


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_hostile_answers_agree(grammar: Grammar) -> None:
    for text in HOSTILE:
        for numbers, target in [((2, 3, 5), 17), ((1, 2), 3), ((2, 3), 8), ((0, 5), 5), ((6, 3, 2), 1),
                                ((1, 1, 1), Fraction(1, 3)), ((999999,) * 3, 1)]:
            for weights in WEIGHTS:
                _both(text, numbers, target, grammar, weights)


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_every_short_string_agrees(grammar: Grammar) -> None:
    # every string of up to 4 characters over an alphabet with digits, operators, parentheses, a space and
    # two characters the lexer rejects: every lexer and parser branch, exhaustively at small size
    alphabet = "120+-*/() ."
    for length in range(5):
        for chars in itertools.product(alphabet, repeat=length):
            _both("".join(chars), (1, 2), 3, grammar)


@given(st.text(alphabet="0123456789+-*/() .x", max_size=40), st.integers(-50, 50),
       st.lists(st.integers(0, 12), min_size=1, max_size=5), st.sampled_from(GRAMMARS))
@settings(max_examples=1500, deadline=None)
def test_random_text_agrees(text: str, target: int, numbers: list[int], grammar: Grammar) -> None:
    _both(text, tuple(numbers), target, grammar)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """Well-formed expressions (parenthesised, all four operators, numbers 0-99, spaces here and there),
    so values, divisions, zero divisors and number use are exercised, not only rejections."""
    parts = [draw(st.integers(0, 99)).__str__() if depth > 2 or draw(st.booleans())
             else "(" + draw(expressions(depth + 1)) + ")"]
    for _ in range(draw(st.integers(0, 3))):
        parts.append(draw(st.sampled_from(["+", "-", "*", "/", " + ", "* "])))
        parts.append(str(draw(st.integers(0, 99))) if depth > 2 or draw(st.booleans())
                     else "(" + draw(expressions(depth + 1)) + ")")
    return "".join(parts)


@given(expressions(), st.integers(-20, 20), st.sampled_from(GRAMMARS), st.booleans())
@settings(max_examples=1500, deadline=None)
def test_random_expressions_agree(text: str, target: int, grammar: Grammar, use_own_numbers: bool) -> None:
    numbers = tuple(int(t) for t in tokenize(text) if t[0].isdigit()) if use_own_numbers else (1, 2, 3)
    _both(text, numbers, target, grammar)
    try:  # the target the expression hits: the correct branch (an int or a Fraction target)
        value, _ = parse_and_evaluate(tokenize(text), grammar)
    except VerifierError:
        return
    _both(text, numbers, value if value.denominator != 1 else int(value), grammar)


def test_fast_path_is_taken_and_values_are_fractions() -> None:
    v = verify("6/4*2", (6, 4, 2), 3, grammar=GRAMMARS[1])
    assert v.correct and v.value == 3 and type(v.value) is Fraction
    assert _evaluate_fast("6/4*2", GRAMMARS[1]) == (3, [6, 4, 2])
    assert _evaluate_fast("1/3", GRAMMARS[1]) == (Fraction(1, 3), [1, 3])
    assert _evaluate_fast("1/3", GRAMMARS[3]) is None  # integer division: not well-formed
    assert _evaluate_fast("x" * (MAX_TEXT_CHARS + 1), GRAMMARS[1]) is None


class _Str(str):
    """A str subclass whose methods lie: must go through the reference path and still get a verdict."""

    def __len__(self) -> int:
        return 3


def _completions(rng: random.Random, n: int) -> list[object]:
    answers = HOSTILE[:60] + ["2+3*5", "(2+3)*5", "5*3+2", "2*3", "17", "2+3+5", " 2 + 3 * 5 "]
    out: list[object] = []
    for _ in range(n):
        a = rng.choice(answers)
        w = rng.randrange(12)
        out.append([f"<answer>{a}</answer>", f"think <answer>1</answer> then <answer>{a}</answer>.",
                    a, f"<answer>{a}", f"<answer><answer>{a}</answer>", f"</answer>{a}<answer>",
                    f"<answer>\n {a} \n</answer>",
                    [{"role": "assistant", "content": f"<answer>{a}</answer>"}],
                    [{"role": "user", "content": "q"}, {"role": "assistant",
                                                        "content": [{"type": "text", "text": f"<answer>{a}"},
                                                                    {"type": "text", "text": "</answer>"}]}],
                    _Str(f"<answer>{a}</answer>"), 42, "<answer></answer>"][w])
    return out


@pytest.mark.parametrize("fmt", [AnswerFormat(), AnswerFormat(whole=True), AnswerFormat("<a>", "</a>"),
                                 AnswerFormat(max_chars=20)])
@pytest.mark.parametrize("grammar", GRAMMARS[:4])
def test_score_parts_agrees_with_score_completion(fmt: AnswerFormat, grammar: Grammar) -> None:
    rng = random.Random(0)
    completions = _completions(rng, 400)
    numbers = [rng.choice([(2, 3, 5), [2, 3, 5], [1, 2], (0, 5), (5, 2, 3)]) for _ in completions]
    targets = [rng.choice([17, 25, 3, Fraction(5, 2), 0]) for _ in completions]
    for weights in WEIGHTS:
        acc, form, reasons, correct = score_parts(completions, numbers, targets, grammar=grammar,
                                                  weights=weights, fmt=fmt)
        for i, c in enumerate(completions):
            v = score_completion(c, numbers[i], targets[i], grammar=grammar, weights=weights, fmt=fmt)
            assert (acc[i], form[i], reasons[i], correct[i]) == \
                (v.parts["accuracy"], v.parts["format"], v.reason, v.correct), (c, numbers[i], targets[i])


def test_score_parts_raises_as_verify_does() -> None:
    # a wrongly typed row raises TypeError (as verify does) when its answer is extracted; a refused
    # completion never reaches the verifier, so its row is not read
    with pytest.raises(TypeError, match=r"numbers\[1\]=2.0"):
        score_parts(["<answer>1+2</answer>"], [[1, 2.0]], [3])
    with pytest.raises(TypeError, match="target"):
        score_parts(["<answer>1+2</answer>"], [[1, 2]], [3.0])
    assert score_parts(["no tags"], [[1, 2.0]], [3.0])[2] == ["answer extraction: no '</answer>' tag"]
    with pytest.raises(ValueError, match="one of each per completion"):
        score_parts(["a", "b"], [[1]], [1, 2])
