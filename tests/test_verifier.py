"""The verifier: precedence, rejection of malformed and hostile input, and agreement with an independent
evaluator on random token sequences."""

from __future__ import annotations

import ast
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlvr_env
from rlvr_env import Grammar, RewardWeights, verify
from rlvr_env.tasks.expression.verifier import MAX_NUMBER_DIGITS, MAX_TEXT_CHARS, join_tokens

NUMBERS = (2, 3, 5)
WIDE = Grammar(operators=frozenset("+-*/"), parentheses=True)
WIDE_AT_MOST_ONCE = Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once")
WIDE_INT_DIV = Grammar(operators=frozenset("+-*/"), parentheses=True, integer_division=True)
DEFAULT = RewardWeights()


# -- precedence ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, value",
    [
        ("2+3*5", 17),
        ("2*3+5", 11),
        ("3*5+2", 17),
        ("5+3*2", 11),
        ("2+3+5", 10),
        ("2*3*5", 30),
        ("5*2+3", 13),
        ("3+2*5", 13),
        ("5 + 3 * 2", 11),  # spaces are allowed between tokens
    ],
)
def test_precedence_multiplication_binds_tighter(text: str, value: int) -> None:
    v = verify(text, NUMBERS, value)
    assert (v.correct, v.well_formed, v.value, v.reason) == (True, True, Fraction(value), None)
    assert v.reward == pytest.approx(DEFAULT.accuracy + DEFAULT.format)
    assert v.parts == {"accuracy": DEFAULT.accuracy, "format": DEFAULT.format}


def test_left_to_right_would_be_wrong() -> None:
    # (2+3)*5 = 25 is what a naive left-to-right evaluator computes; the verifier must not pay for it.
    v = verify("2+3*5", NUMBERS, 25)
    assert v.well_formed and not v.correct
    assert v.value == 17 and "not the target" in (v.reason or "")
    assert v.parts == {"accuracy": 0.0, "format": DEFAULT.format}


def test_equal_precedence_associates_left() -> None:
    assert verify("5-3-2", NUMBERS, 0, grammar=WIDE).value == 0  # (5-3)-2, not 5-(3-2)=4
    assert verify("5/2/3", NUMBERS, 0, grammar=WIDE).value == Fraction(5, 6)  # (5/2)/3
    assert verify("5-(3-2)", NUMBERS, 4, grammar=WIDE).correct


def test_weights_scale_the_parts() -> None:
    w = RewardWeights(accuracy=2.0, format=0.5)
    assert verify("2+3*5", NUMBERS, 17, weights=w).reward == 2.5
    assert verify("2+3*5", NUMBERS, 18, weights=w).reward == 0.5
    assert verify("2+3", NUMBERS, 5, weights=w).reward == 0.0


# -- rejection ------------------------------------------------------------------------------------------
# Each form is rejected with a reason: not well-formed, not correct, reward 0, accuracy part 0.
# The target is chosen so that a verifier that ignored the rule would have paid.
MALFORMED: list[tuple[str, object, int, str]] = [
    ("power", "2**3+5", 13, "power"),
    ("power alone", "2**3", 8, "power"),
    ("decimal", "1.0+2", 3, "decimal"),
    ("decimal in prompt numbers", "2.0+3*5", 17, "decimal"),
    ("unary minus", "-2+3*5", 13, "unary"),
    ("unary minus inside", "2*-3+5", -1, "unary"),
    ("parentheses", "(2+3)*5", 25, "parenthesis"),
    ("closing parenthesis", "2+3)*5", 17, "parenthesis"),
    ("number not in prompt", "2+3*7", 23, "not in the prompt"),
    ("number used twice", "2+2*5", 12, "used 2 times"),
    ("missing number", "2+3", 5, "not used"),
    ("missing number product", "3*5", 15, "not used"),
    ("adjacent numbers merge", "23+5", 28, "not in the prompt"),
    ("leading zero", "02+3*5", 17, "leading zero"),
    ("arabic-indic digit", "2+\u0663*5", 17, "not allowed"),
    ("fullwidth digit", "\uff12+3*5", 17, "not allowed"),
    ("superscript digit", "2+3*5\u00b2", 17, "not allowed"),
    ("empty", "", 0, "empty"),
    ("whitespace only", "   ", 0, "empty"),
    ("tab", "2+3*5\t", 17, "not allowed"),
    ("newline", "2+3*5\n", 17, "not allowed"),
    ("trailing operator", "2+3*5+", 17, "trailing operator"),
    ("trailing star", "2+3*5*", 17, "trailing operator"),
    ("leading operator", "+2+3*5", 17, "unary"),
    ("leading star", "*2+3*5", 17, "number was expected"),
    ("double operator", "2++3*5", 17, "unary"),
    ("division not in grammar", "5/3*2", 0, "not in this grammar"),
    ("minus not in grammar", "5-3+2", 4, "not in this grammar"),
    ("import", "__import__('os').system('x')", 0, "not allowed"),
    ("lambda", "lambda: 1", 1, "not allowed"),
    ("open", "open('f')", 0, "not allowed"),
    ("statement after expression", "2+3*5; import os", 17, "not allowed"),
    ("comment", "2+3*5 # x", 17, "not allowed"),
    ("name", "x+3*5", 17, "not allowed"),
    ("scientific notation", "2e1+3", 23, "not allowed"),
    ("hex literal", "0x2+3*5", 17, "not allowed"),
    ("underscore literal", "1_0+3*5", 25, "not allowed"),
    ("over-long", "2+3*5" + " " * MAX_TEXT_CHARS, 17, "at most"),
    ("huge literal", "9" * (MAX_NUMBER_DIGITS + 1) + "+3*5", 17, "digits"),
    ("very huge literal", "9" * MAX_TEXT_CHARS, 0, "at most"),
    ("deep nesting", "(" * 120 + "2" + ")" * 120, 2, "not in this grammar"),
]


@pytest.mark.parametrize("name, text, target, reason", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_and_hostile_forms_are_rejected(name: str, text: str, target: int, reason: str) -> None:
    v = verify(text, NUMBERS, target)
    assert not v.well_formed and not v.correct
    assert v.reward == 0.0 and v.parts == {"accuracy": 0.0, "format": 0.0}
    assert v.reason, f"{name}: no reason given"
    assert reason in v.reason, f"{name}: reason {v.reason!r} does not mention {reason!r}"


def test_number_rules_keep_the_computed_value() -> None:
    # A well-parsed expression that breaks the number-use rule shows what it computed.
    v = verify("2+2*5", NUMBERS, 12)
    assert v.value == 12 and not v.well_formed and not v.correct


def test_deep_nesting_with_parentheses_does_not_overflow() -> None:
    # MAX_TEXT_CHARS bounds the recursion depth of the parser.
    depth = MAX_TEXT_CHARS // 2 - 1
    v = verify("(" * depth + "2" + ")" * depth, (2,), 2, grammar=WIDE)
    assert v.correct
    v = verify("(" * MAX_TEXT_CHARS + "2" + ")" * MAX_TEXT_CHARS, (2,), 2, grammar=WIDE)
    assert not v.well_formed and "at most" in (v.reason or "")


@pytest.mark.parametrize(
    "text, reason",
    [("5/(3-3)", "division by zero"), ("(5+3)/(2*3)", "not an integer division")],
)
def test_division_rules(text: str, reason: str) -> None:
    grammar = Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once",
                      integer_division=True)
    v = verify(text, (5, 3, 3, 2), 0, grammar=grammar)
    assert not v.well_formed and reason in (v.reason or "")


@pytest.mark.parametrize(
    "expression, named",
    [
        (None, "expression=None"),
        (b"2+3*5", "expression=b"),
        (bytearray(b"2+3*5"), "expression=bytearray"),
        (17, "expression=17"),
        (1.5, "expression=1.5"),
        (object(), "expression=<object"),
        ([object(), None, 1.5], "expression[0]"),
        (["2", None, "3"], "expression[1]=None"),
        ([True, "+", 3], "expression[0]=True"),
        ([b"2"], "expression[0]=b'2'"),
        ({"2": 1}, "expression={'2': 1}"),  # a dict is not a token sequence (its keys were read as one)
        ({"2", "+"}, "expression="),
        (("2", ("+",), "3"), "expression[1]"),
        (iter(["2", "+", "3"]), "expression=<list_iterator"),
    ],
    ids=repr,
)
def test_wrong_expression_types_raise_naming_the_argument(expression: object, named: str) -> None:
    # A caller's wrong argument type is an error; a malformed answer of the right type gets a verdict.
    with pytest.raises(TypeError, match=re.escape(named)):
        verify(expression, NUMBERS, 17)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "numbers, target, grammar, weights, named",
    [
        (None, 17, None, None, "numbers=None"),
        ("235", 17, None, None, "numbers='235'"),
        ({2: 1, 3: 1, 5: 1}, 17, None, None, "numbers={2: 1"),
        ((2, 3, "5"), 17, None, None, "numbers[2]='5'"),
        ((2, 3, 5.0), 17, None, None, "numbers[2]=5.0"),
        ((2, True, 5), 17, None, None, "numbers[1]=True"),
        (NUMBERS, "17", None, None, "target='17'"),
        (NUMBERS, 17.0, None, None, "target=17.0"),
        (NUMBERS, None, None, None, "target=None"),
        (NUMBERS, True, None, None, "target=True"),
        (NUMBERS, 17, "default", None, "grammar='default'"),
        (NUMBERS, 17, None, (1.0, 0.1), "weights=(1.0, 0.1)"),
    ],
)
def test_wrong_argument_types_raise_naming_the_argument(
    numbers: object, target: object, grammar: object, weights: object, named: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(named)):
        verify("2+3*5", numbers, target, grammar=grammar, weights=weights)  # type: ignore[arg-type]


def test_integer_like_arguments_are_accepted() -> None:
    import numpy as np

    want = verify("2+3*5", NUMBERS, 17)
    assert verify("2+3*5", [2, 3, 5], 17) == want
    assert verify("2+3*5", np.array([2, 3, 5]), np.int64(17)) == want
    assert verify("2+3*5", NUMBERS, Fraction(17)) == want
    assert verify(np.array(["2", "+", "3", "*", "5"]), NUMBERS, 17) == want
    assert verify([np.int64(2), "+", 3, "*", 5], NUMBERS, 17) == want


@pytest.mark.parametrize(
    "expression",
    [["2"] * (MAX_TEXT_CHARS + 1), [], ["2", "+", "", "3"], ["2+3", "*", "5"], [" ", "2"], ["2", -3]],
    ids=repr,
)
def test_malformed_token_sequences_get_a_verdict(expression: list[object]) -> None:
    v = verify(expression, NUMBERS, 17)  # type: ignore[arg-type]
    assert not v.well_formed and not v.correct and v.reward == 0.0
    assert v.reason


# -- token sequences -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "tokens", [["2", "+", "3", "*", "5"], [2, "+", 3, "*", 5], ("2", "+", "3", "*", "5")]
)
def test_token_sequences(tokens: list[str | int]) -> None:
    v = verify(tokens, NUMBERS, 17)
    assert v.correct and v.well_formed and v.value == 17 and v.expression == "2+3*5"


def test_token_sequence_follows_the_text_rules() -> None:
    # Adjacent number tokens are two numbers side by side, as the text "2 3+5" is, never the literal 23.
    assert verify(["2", "3", "+", "5"], NUMBERS, 28).reason == verify("2 3+5", NUMBERS, 28).reason
    assert verify(["2", "3", "+", "5"], NUMBERS, 28).expression == "2 3+5"
    assert not verify(["2", "*", "*", "3", "+", "5"], NUMBERS, 13).well_formed
    assert not verify([2, "+", -3, "*", 5], NUMBERS, -13).well_formed
    assert not verify([], NUMBERS, 0).well_formed


# -- an independent evaluator --------------------------------------------------------------------------
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def reference_verdict(
    text: str, numbers: tuple[int, ...], target: int, grammar: Grammar
) -> tuple[bool, bool, Fraction | None]:
    """(well_formed, correct, value) of ``text``, computed without the library's parser.

    A different design from the library's recursive descent: a two-state scanner decides syntax, then
    shunting-yard turns the tokens into postfix, which a stack machine evaluates over Fractions.
    Only the alphabet 0-9 + - * / ( ) is expected (the property tests generate nothing else).
    """
    tokens = re.findall(r"[0-9]+|[-+*/()]", text)
    if "".join(tokens) != text or not tokens:
        return False, False, None
    if any(t[0].isdigit() and (len(t) > MAX_NUMBER_DIGITS or (len(t) > 1 and t[0] == "0"))
           for t in tokens):
        return False, False, None
    # Syntax: alternate operand / operator, parentheses balanced, only the grammar's symbols.
    want_operand, depth = True, 0
    for t in tokens:
        if want_operand:
            if t[0].isdigit():
                want_operand = False
            elif t == "(" and grammar.parentheses:
                depth += 1
            else:
                return False, False, None
        else:
            if t in grammar.operators:
                want_operand = True
            elif t == ")" and grammar.parentheses and depth > 0:
                depth -= 1
            else:
                return False, False, None
    if want_operand or depth:
        return False, False, None
    # Shunting-yard to postfix (all operators left-associative).
    postfix: list[str] = []
    ops: list[str] = []
    for t in tokens:
        if t[0].isdigit():
            postfix.append(t)
        elif t == "(":
            ops.append(t)
        elif t == ")":
            while ops[-1] != "(":
                postfix.append(ops.pop())
            ops.pop()
        else:
            while ops and ops[-1] != "(" and _PRECEDENCE[ops[-1]] >= _PRECEDENCE[t]:
                postfix.append(ops.pop())
            ops.append(t)
    postfix.extend(reversed(ops))
    stack: list[Fraction] = []
    for t in postfix:
        if t[0].isdigit():
            stack.append(Fraction(int(t)))
            continue
        b, a = stack.pop(), stack.pop()
        if t == "+":
            stack.append(a + b)
        elif t == "-":
            stack.append(a - b)
        elif t == "*":
            stack.append(a * b)
        else:
            if b == 0:
                return False, False, None
            if grammar.integer_division and (a / b).denominator != 1:
                return False, False, None
            stack.append(a / b)
    (value,) = stack
    used = Counter(int(t) for t in tokens if t[0].isdigit())
    have = Counter(numbers)
    if grammar.number_use == "exactly_once":
        well_formed = used == have
    else:
        well_formed = all(used[n] <= have[n] for n in used)
    return well_formed, well_formed and value == target, value


def _assert_agrees(tokens: list[str], target: int, grammar: Grammar) -> None:
    text = join_tokens(tokens)  # adjacent number tokens stay apart ("2 3"), as a token sequence reads them
    v = verify(tokens, NUMBERS, target, grammar=grammar)
    assert (v.well_formed, v.correct, v.value) == reference_verdict(text, NUMBERS, target, grammar), text
    assert v.reward == (DEFAULT.accuracy if v.correct else 0.0) + (DEFAULT.format if v.well_formed else 0.0)
    assert (v.reason is None) == v.correct
    # The token form reads exactly as its joined text does.
    assert verify(text, NUMBERS, target, grammar=grammar) == v


TARGETS = st.sampled_from([10, 11, 13, 17, 30, 0, 1, 4, -1])


@given(st.lists(st.sampled_from(["2", "3", "5", "+", "*"]), min_size=0, max_size=9), TARGETS)
@settings(max_examples=400, deadline=None)
def test_agrees_with_reference_on_lesson_alphabet(tokens: list[str], target: int) -> None:
    _assert_agrees(tokens, target, Grammar())


@given(
    st.lists(st.sampled_from(["2", "3", "5", "+", "-", "*", "/", "(", ")"]), min_size=0, max_size=9),
    TARGETS,
    st.sampled_from([WIDE, WIDE_AT_MOST_ONCE, WIDE_INT_DIV, Grammar()]),
)
@settings(max_examples=400, deadline=None)
def test_agrees_with_reference_on_wide_alphabet(tokens: list[str], target: int, grammar: Grammar) -> None:
    _assert_agrees(tokens, target, grammar)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> list[str]:
    """Mostly well-formed expressions with parentheses, so values are compared often, not only rejects."""
    if depth == 0 or draw(st.booleans()):
        return [draw(st.sampled_from(["2", "3", "5"]))]
    left = draw(expressions(depth=depth - 1))
    right = draw(expressions(depth=depth - 1))
    op = draw(st.sampled_from(["+", "-", "*", "/"]))
    out = left + [op] + right
    return ["("] + out + [")"] if draw(st.booleans()) else out


@given(expressions(), TARGETS, st.sampled_from([WIDE, WIDE_AT_MOST_ONCE, WIDE_INT_DIV]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_agrees_with_reference_on_structured_expressions(
    tokens: list[str], target: int, grammar: Grammar
) -> None:
    _assert_agrees(tokens, target, grammar)


def test_reference_evaluator_sanity() -> None:
    # Pin the reference itself to hand-computed values, so the property tests compare against truth.
    assert reference_verdict("2+3*5", NUMBERS, 17, Grammar()) == (True, True, Fraction(17))
    assert reference_verdict("(2+3)*5", NUMBERS, 25, WIDE) == (True, True, Fraction(25))
    assert reference_verdict("5-3-2", NUMBERS, 0, WIDE) == (True, True, Fraction(0))
    assert reference_verdict("5/2/3", NUMBERS, 0, WIDE) == (True, False, Fraction(5, 6))
    assert reference_verdict("2+2", NUMBERS, 4, WIDE) == (False, False, Fraction(4))
    assert reference_verdict("2+", NUMBERS, 2, WIDE) == (False, False, None)


# -- never raises -------------------------------------------------------------------------------------
@given(st.text(max_size=300), st.integers(-100, 100))
@settings(max_examples=300, deadline=None)
def test_never_raises_on_arbitrary_text(text: str, target: int) -> None:
    v = verify(text, NUMBERS, target)
    assert isinstance(v.reward, float)
    assert v.reward in (0.0, DEFAULT.format, DEFAULT.accuracy + DEFAULT.format)
    assert (v.reason is None) == v.correct
    assert v.well_formed or v.reason


@given(st.text(alphabet="0123456789+-*/() .", max_size=300), st.sampled_from([Grammar(), WIDE]))
@settings(max_examples=300, deadline=None)
def test_never_raises_on_near_miss_text(text: str, grammar: Grammar) -> None:
    v = verify(text, NUMBERS, 17, grammar=grammar)
    assert v.well_formed or v.reason


_ANYTHING = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary() | st.fractions(),
    lambda inner: st.lists(inner, max_size=6) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner),
    max_leaves=12,
)


def _is_text_or_tokens(expression: object) -> bool:
    if isinstance(expression, str):
        return True
    return isinstance(expression, (list, tuple)) and all(
        isinstance(t, str) or (isinstance(t, int) and not isinstance(t, bool)) for t in expression
    )


@given(_ANYTHING)
@settings(max_examples=300, deadline=None)
def test_arbitrary_objects_get_a_verdict_or_a_type_error(expression: object) -> None:
    # Text or a sequence of str / int tokens always gets a verdict; anything else is a TypeError that
    # names the argument. Nothing else ever escapes.
    if _is_text_or_tokens(expression):
        v = verify(expression, NUMBERS, 17)  # type: ignore[arg-type]
        assert v.well_formed or v.reason
    else:
        with pytest.raises(TypeError, match=r"expression(\[\d+\])?="):
            verify(expression, NUMBERS, 17)  # type: ignore[arg-type]


# -- no eval ------------------------------------------------------------------------------------------
_FORBIDDEN = {"eval", "exec", "compile", "__import__"}


def _dangerous_calls(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        # Builtins called by name; `re.compile` and friends are fine, `builtins.eval` is not.
        if isinstance(func, ast.Name) and func.id in _FORBIDDEN:
            found.append(f"{func.id}() at line {node.lineno}")
        elif (isinstance(func, ast.Attribute) and func.attr in _FORBIDDEN
              and isinstance(func.value, ast.Name) and func.value.id == "builtins"):
            found.append(f"builtins.{func.attr}() at line {node.lineno}")
    return found


def test_library_never_calls_eval_or_exec() -> None:
    package = Path(rlvr_env.__file__).parent
    files = sorted(package.rglob("*.py"))
    assert any(f.name == "verifier.py" for f in files)
    for path in files:
        assert _dangerous_calls(path.read_text(encoding="utf-8")) == [], path


def test_dangerous_call_detector_detects() -> None:
    assert _dangerous_calls("eval('1')\nimport builtins\nbuiltins.exec('2')") == [
        "eval() at line 1",
        "builtins.exec() at line 3",
    ]


@pytest.mark.parametrize(
    "text, numbers, reason",
    [
        ("5", (2, 2, 5), "numbers [2, 2] of the prompt are not used; each must be used once"),
        ("2+2+2", (2, 2, 5), "number 2 is used 3 times; the prompt has it 2 time(s)"),
        ("7+2*2", (2, 2, 5), "number 7 is not in the prompt (2, 2, 5)"),
        ("2*3+5", (5, 3, 2, 3), "numbers [3] of the prompt are not used; each must be used once"),
    ],
)
def test_number_use_reasons(text: str, numbers: tuple[int, ...], reason: str) -> None:
    # The first offending number in order of use is named; missing numbers are listed sorted.
    assert verify(text, numbers, 0).reason == reason


def test_number_use_with_repeated_prompt_numbers() -> None:
    assert verify("2*2+5", (2, 5, 2), 9).correct
    at_most = Grammar(number_use="at_most_once")
    assert verify("2*5", (2, 2, 5), 10, grammar=at_most).correct
    assert "used 2 times" in (verify("5*5", (2, 2, 5), 25, grammar=at_most).reason or "")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("(2+3", "missing ')' at token 4"),
        ("(5-3)*(2", "missing ')' at token 8"),
        ("(2+3))", "unbalanced ')' at token 5"),
        ("(2)(3)", "unexpected '(' at token 3: an operator was expected"),
        ("(2)3", "unexpected '3' at token 3: an operator was expected"),
        ("2(3)", "unexpected '(' at token 1: an operator was expected"),
        (")2", "')' at token 0 where a number was expected"),
        ("2*(3+)", "')' at token 5 where a number was expected"),
        ("()", "')' at token 1 where a number was expected"),
        ("5/(3-3)+(", "division by zero"),  # evaluation order: the division fails before the '('
    ],
)
def test_parenthesis_reasons(text: str, reason: str) -> None:
    # The first error in reading order is reported, with its token position.
    assert verify(text, NUMBERS, 0, grammar=WIDE_AT_MOST_ONCE).reason == reason


class _RaisingLength:
    def __len__(self) -> int:
        raise RuntimeError("hostile __len__")


class _RaisingIteration(list):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        raise KeyError("hostile __iter__")


class _RaisingStr(int):
    def __str__(self) -> str:
        raise RuntimeError("hostile __str__")


@pytest.mark.parametrize("expression", [_RaisingIteration(["2"]), [_RaisingStr(2), "+", "3"]], ids=repr)
def test_hostile_objects_do_not_raise(expression: object) -> None:
    # A sequence of the right type whose own methods raise is a malformed answer: the error is a reason.
    v = verify(expression, NUMBERS, 17)  # type: ignore[arg-type]
    assert not v.well_formed and v.reward == 0.0 and "unreadable input" in (v.reason or "")


def test_an_object_that_is_not_a_sequence_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="expression="):
        verify(_RaisingLength(), NUMBERS, 17)  # type: ignore[arg-type]


# -- the Countdown reward hack: adjacent number tokens never join ----------------------------------------
@pytest.mark.parametrize(
    "tokens, numbers, target",
    [
        (["1", "2"], (1, 2, 12), 12),  # "n0 n1" spelled the prompt number 12
        (["1", "1", "+", "1"], (1, 11), 12),  # "n0 n0 + n0" read as 11+1, one slot used three times
        ([1, 2], (1, 2, 12), 12),
        (["2", "3", "*", "5"], NUMBERS, 115),  # Arithmetic's digit tokens: "2" "3" is not 23 either
    ],
)
def test_adjacent_number_tokens_are_not_one_number(tokens: list[object], numbers: tuple[int, ...],
                                                   target: int) -> None:
    v = verify(tokens, numbers, target, grammar=WIDE_AT_MOST_ONCE)  # type: ignore[arg-type]
    assert not v.correct and not v.well_formed and v.reward == 0.0
    assert "an operator was expected" in (v.reason or "")
    # Text keeps its meaning: digits written together are one number.
    assert verify("".join(map(str, tokens)), numbers, target, grammar=WIDE_AT_MOST_ONCE).well_formed == (
        target != 115
    )
