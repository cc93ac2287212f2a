"""The arithmetic-expression grammar as text: the character rules and limits, :class:`Grammar`, the
reference tokenizer and recursive-descent parser (:func:`tokenize`, :func:`parse_and_evaluate`), the
number-use rule (:func:`check_number_use`) and :func:`join_tokens`. :mod:`.verifier` verifies an answer
with them (and with a faster evaluator that agrees with them exactly)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

__all__ = ["MAX_NUMBER_DIGITS", "MAX_TEXT_CHARS", "Grammar", "NumberUse", "VerifierError", "check_number_use",
           "join_tokens", "parse_and_evaluate", "tokenize"]

#: Longest text the verifier reads; longer input is rejected unread (bounds time and recursion depth).
MAX_TEXT_CHARS = 256
#: Longest number literal; bounds the size of the integers the evaluator builds.
MAX_NUMBER_DIGITS = 6

_DIGITS = frozenset("0123456789")
_OPERATORS = frozenset("+-*/")
_PARENS = frozenset("()")
_ALLOWED = _DIGITS | _OPERATORS | _PARENS | {" "}
_ADDITIVE = frozenset("+-")
_MULTIPLICATIVE = frozenset("*/")

NumberUse = Literal["exactly_once", "at_most_once"]


class VerifierError(ValueError):
    """Raised internally when an expression is rejected; the message is the reason."""


class _ArgumentTypeError(TypeError):
    """A caller's argument of the wrong type (raised to the caller, unlike a malformed answer)."""


@dataclass(frozen=True)
class Grammar:
    """What answers a task admits.

    Attributes:
        operators: the binary operators that may appear, a subset of ``"+-*/"``.
        parentheses: whether ``(`` and ``)`` may appear.
        number_use: ``"exactly_once"``: every prompt number appears exactly once (the lesson's rule);
            ``"at_most_once"``: each prompt number appears at most once, and at least one number appears.
        integer_division: if True, ``a / b`` is only well-formed when ``b`` divides ``a`` exactly at that
            point of the evaluation; otherwise division is exact over the rationals.
    """

    operators: frozenset[str] = frozenset("+*")
    parentheses: bool = False
    number_use: NumberUse = "exactly_once"
    integer_division: bool = False

    def __post_init__(self) -> None:
        ops = frozenset(self.operators)
        object.__setattr__(self, "operators", ops)
        if not ops or not ops <= _OPERATORS:
            raise ValueError(
                f"Grammar.operators={sorted(ops)!r} must be a non-empty subset of {sorted(_OPERATORS)!r}"
            )
        if self.number_use not in ("exactly_once", "at_most_once"):
            raise ValueError(
                f"Grammar.number_use={self.number_use!r} must be 'exactly_once' or 'at_most_once'"
            )


def tokenize(text: str) -> list[str]:
    """Split ``text`` into number, operator and parenthesis tokens, or raise :class:`VerifierError`."""
    if not isinstance(text, str):
        raise VerifierError(f"expected text, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise VerifierError(f"input is {len(text)} characters; at most {MAX_TEXT_CHARS} are read")
    # A plain character loop: for answers of a few characters it is as fast as a regex split
    # (measured), and it names the first offending character and its position.
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch not in _ALLOWED:
            raise VerifierError(f"character {ch!r} at position {i} is not allowed")
        if ch == " ":
            i += 1
        elif ch in _DIGITS:
            j = i
            while j < n and text[j] in _DIGITS:
                j += 1
            literal = text[i:j]
            if j < n and text[j] == ".":
                raise VerifierError(f"decimal number at position {i} is not allowed")
            if len(literal) > 1 and literal[0] == "0":
                raise VerifierError(f"number {literal!r} at position {i} has a leading zero")
            if len(literal) > MAX_NUMBER_DIGITS:
                raise VerifierError(
                    f"number at position {i} has {len(literal)} digits; at most {MAX_NUMBER_DIGITS}"
                )
            tokens.append(literal)
            i = j
        else:
            if ch == "*" and i + 1 < n and text[i + 1] == "*":
                raise VerifierError(f"power operator '**' at position {i} is not allowed")
            tokens.append(ch)
            i += 1
    if not tokens:
        raise VerifierError("empty expression")
    return tokens


def parse_and_evaluate(tokens: Sequence[str], grammar: Grammar) -> tuple[Fraction, list[int]]:
    """Parse a token list under ``grammar``; return (exact value, numbers used in order).

    One left-to-right pass that does what recursive descent over the module's grammar does, with an
    explicit stack instead of recursion (the env verifies every episode, and function calls were most of
    a short answer's parsing time). With two precedence levels, an open expression is fully described by
    ``total`` (the sum of its finished terms), ``add_op`` (the ``+``/``-`` before the current term),
    ``product`` (the current term so far) and ``mul_op`` (the ``*``/``/`` waiting for its right operand);
    ``(`` pushes those four, ``)`` pops them. Operations happen in recursive descent's order, so the first
    error, and its message, are the same. Values are ints until a division makes a Fraction (int
    arithmetic is exact and many times faster than Fraction's).
    """
    n = len(tokens)
    if not n:
        raise VerifierError("empty expression")
    operators = grammar.operators
    numbers: list[int] = []
    stack: list[tuple[Fraction | int, str | None, Fraction | int, str | None]] = []
    total: Fraction | int = 0
    product: Fraction | int = 0
    add_op: str | None = None
    mul_op: str | None = None
    i = 0
    while True:
        # An operand is expected at token i.
        if i >= n:
            raise VerifierError("expression ends where a number was expected (trailing operator?)")
        tok = tokens[i]
        if tok[0] in _DIGITS:
            number = int(tok)
            numbers.append(number)
            value: Fraction | int = number
            i += 1
        elif tok == "(":
            if not grammar.parentheses:
                raise VerifierError(f"parenthesis at token {i} is not in this grammar")
            stack.append((total, add_op, product, mul_op))
            add_op = mul_op = None
            i += 1
            continue
        elif tok in _ADDITIVE:
            raise VerifierError(f"unary {tok!r} at token {i} is not allowed")
        else:
            raise VerifierError(f"{tok!r} at token {i} where a number was expected")
        # An operand `value` is complete: fold it in, then expect an operator, ")" or the end.
        while True:
            if mul_op is None:
                product = value
            elif mul_op == "*":
                product = product * value
            else:
                if value == 0:
                    raise VerifierError("division by zero")
                quotient = Fraction(product) / value  # Fraction first: int / int would be a float
                if grammar.integer_division and quotient.denominator != 1:
                    raise VerifierError(f"{product} / {value} is not an integer division")
                product = quotient
            tok = tokens[i] if i < n else ""
            if tok in _MULTIPLICATIVE:
                if tok not in operators:
                    raise VerifierError(f"operator {tok!r} at token {i} is not in this grammar")
                mul_op = tok
                i += 1
                break
            # The term is finished.
            total = product if add_op is None else total + product if add_op == "+" else total - product
            if tok in _ADDITIVE:
                if tok not in operators:
                    raise VerifierError(f"operator {tok!r} at token {i} is not in this grammar")
                add_op, mul_op = tok, None
                i += 1
                break
            # The expression is finished: it closes a parenthesis, or it is the whole answer.
            if stack:
                if tok != ")":
                    raise VerifierError(f"missing ')' at token {i}")
                i += 1
                value = total
                total, add_op, product, mul_op = stack.pop()
                continue
            if i != n:
                if tok == ")":
                    if not grammar.parentheses:
                        raise VerifierError(f"parenthesis at token {i} is not in this grammar")
                    raise VerifierError(f"unbalanced ')' at token {i}")
                if tok == "(" and not grammar.parentheses:
                    raise VerifierError(f"parenthesis at token {i} is not in this grammar")
                raise VerifierError(f"unexpected {tok!r} at token {i}: an operator was expected")
            return Fraction(total), numbers


def check_number_use(used: Sequence[int], numbers: Sequence[int], rule: NumberUse) -> None:
    """Raise :class:`VerifierError` unless ``used`` respects ``rule`` for the prompt's ``numbers``."""
    if len(used) == len(numbers):
        try:
            if sorted(used) == sorted(numbers):
                return  # the same multiset: valid under either rule (a fast path for the common case)
        except TypeError:  # prompt numbers that do not sort: let the general check below explain
            pass
    # Plain dicts, not collections.Counter: Counter's constructor is several times slower, and most
    # rejected answers pass through here. Iteration follows first use, as a Counter's would.
    available: dict[int, int] = {}
    for number in numbers:
        available[number] = available.get(number, 0) + 1
    counted: dict[int, int] = {}
    for number in used:
        counted[number] = counted.get(number, 0) + 1
    for number, count in counted.items():
        if number not in available:
            raise VerifierError(f"number {number} is not in the prompt {tuple(numbers)}")
        if count > available[number]:
            raise VerifierError(
                f"number {number} is used {count} times; the prompt has it {available[number]} time(s)"
            )
    if rule == "exactly_once":
        missing = sorted(n for n, c in available.items() for _ in range(c - counted.get(n, 0)))
        if missing:
            raise VerifierError(f"numbers {missing} of the prompt are not used; each must be used once")


# ---------------------------------------------------------------------------------------------------------
# The fast path for text. verify() (for answers of type `str`) and the language-model reward functions use
# it; the functions above are the reference it is tested against (tests/test_verifier_fast.py: the same
# verdict, reason included, on random, exhaustive and hostile inputs). What changes is how the work is
# done: C-level string methods instead of a character loop where the text surely lexes (otherwise the
# reference lexer runs and gives the reason), ints instead of Fractions while values are integers.


def join_tokens(parts: Sequence[str]) -> str:
    """Join token strings into the text the lexer reads, keeping every token a unit.

    Where one token ends with a digit and the next begins with one, a space goes between them, so two
    adjacent number tokens stay two numbers (which the grammar then rejects: an operator must come
    between them) instead of merging into one multi-digit literal. Nothing else is inserted, so a
    well-formed answer decodes to the usual compact text (``"2+3*5"``).

    >>> join_tokens(["12", "+", "3"]), join_tokens(["1", "2"])
    ('12+3', '1 2')
    """
    out: list[str] = []
    last = ""  # the last character written so far
    for part in parts:
        if part:
            if last in _DIGITS and part[0] in _DIGITS:
                out.append(" ")
            out.append(part)
            last = part[-1]
    return "".join(out)


def _is_unit(part: str) -> bool:
    """Whether ``part`` (a token of a token sequence) is exactly one number, operator or parenthesis."""
    core = part.strip(" ")
    return (len(core) == 1 and core in _OPERATORS | _PARENS) or (core.isascii() and core.isdigit())
