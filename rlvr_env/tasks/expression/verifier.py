"""The verifier: a parser and exact evaluator for arithmetic answers. It never calls ``eval``/``exec``.

A response is checked in three stages, each of which can reject it with a human-readable reason:

1. **Lexing** (:func:`tokenize`): the text must be at most :data:`MAX_TEXT_CHARS` characters of the
   ASCII alphabet ``0-9 + - * / ( )`` and spaces. Anything else (letters, ``.``, ``_``, non-ASCII digits
   such as ``'٣'``, quotes, ...) is rejected by character and position, so no text that is code ever
   reaches the parser. ``**`` is named as the power operator; leading zeros (``05``) are rejected.
   A *token sequence* is joined by :func:`join_tokens` (a space between two tokens that would otherwise
   run digits together) and lexed the same way, and each token must be one unit: a number token is one
   number, so ``["1", "2"]`` is two numbers side by side (rejected by the parser), never the literal 12.
2. **Parsing** (:func:`parse_and_evaluate`): a one-pass parser (explicit stack, no recursion) for the grammar

   ``expr := term (("+" | "-") term)*``,  ``term := atom (("*" | "/") atom)*``,
   ``atom := NUMBER | "(" expr ")"``

   restricted by a :class:`Grammar` (which operators exist, whether parentheses exist). ``*`` and ``/``
   bind tighter than ``+`` and ``-``; equal precedence associates left. There is no unary minus.
   Values are exact :class:`fractions.Fraction`; division by zero, or a non-integer quotient when the
   grammar asks for integer division, makes the expression not well-formed.
3. **Number use**: the numbers in the expression must be the prompt's numbers, each used exactly once
   (or at most once, if the grammar says so).

An expression is *well-formed* when it passes all three; it is *correct* when it is well-formed and its
value equals the target. The reward is ``accuracy_weight * correct + format_weight * well_formed``
(see :class:`RewardWeights`).

:func:`verify` reads an answer of type ``str`` through a fast path (``_verify_text``: C-level string
methods lex text that surely lexes, the parser's loop runs over ints until a division leaves a remainder,
and the reference lexer and number-use check word their rejections); :func:`tokenize`,
:func:`parse_and_evaluate` and :func:`check_number_use` are the reference it is tested against, verdict
for verdict and reason for reason (``tests/test_verifier_fast.py``).

Why one long module: the lexer, the parser and the exact evaluator are one grammar with one set of
reasons; split, the rules that must agree would sit in different files.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from numbers import Integral
from typing import Any

import numpy as np

from rlvr_env.rewards import RewardWeights, Verdict
from rlvr_env.tasks.expression.grammar import (  # noqa: F401 - the verifier's names
    _ADDITIVE, _ALLOWED, _DIGITS, _MULTIPLICATIVE, _OPERATORS, _PARENS, MAX_NUMBER_DIGITS, MAX_TEXT_CHARS,
    Grammar, NumberUse, VerifierError, _ArgumentTypeError, _is_unit, check_number_use, join_tokens,
    parse_and_evaluate, tokenize,
)

__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_NUMBER_DIGITS",
    "Grammar",
    "VerifierError",
    "join_tokens",
    "tokenize",
    "parse_and_evaluate",
    "verify",
    "verify_prompt_text",
]

_ALLOWED_TEXT = "".join(sorted(_ALLOWED))
#: Spaces around every operator and parenthesis: ``text.translate(_SPACED).split()`` is the token list.
_SPACED = str.maketrans({ch: f" {ch} " for ch in "+-*/()"})
#: The canonical literals of 0-999 and their values (a dict lookup costs less than ``int()`` and the
#: leading-zero and length checks, which a canonical literal passes).
_SMALL_INTS = {str(i): i for i in range(1000)}


def _bad_literal(tok: str) -> bool:
    """Whether a digit run is a literal :func:`tokenize` rejects (a leading zero, too many digits)."""
    return len(tok) > 1 and (tok[0] == "0" or len(tok) > MAX_NUMBER_DIGITS)


def _evaluate_text(text: str, grammar: Grammar) -> tuple[Fraction | int, list[int]]:
    """``tokenize`` then ``parse_and_evaluate`` for ``text`` of type ``str``: ``(value, numbers used)``, or
    :class:`VerifierError` with the reference's reason. The value is an ``int`` wherever it is an integer
    (equal to the reference's Fraction, and printed the same).

    Lexing: when the text is short enough, all its characters are allowed (one C-level ``strip``) and it
    holds no ``**``, the tokens are ``text.translate(_SPACED).split()`` (the list :func:`tokenize` would
    return, provided every literal is canonical, which the parser checks as it reads them, and the error
    path checks for the rest); otherwise :func:`tokenize` runs and raises with its reason.
    """
    if len(text) > MAX_TEXT_CHARS or text.strip(_ALLOWED_TEXT) or "**" in text:
        tokens = tokenize(text)  # raises: the reason is the reference lexer's
    else:
        tokens = text.translate(_SPACED).split()
    try:
        return _evaluate_tokens(tokens, grammar)
    except VerifierError:
        # A lexing error anywhere comes before any parsing error: look for a bad literal, which the
        # parser may not have reached; if there is one, the reference lexer words it.
        for tok in tokens:
            if tok >= "0" and _bad_literal(tok):
                tokenize(text)
        raise


def _evaluate_tokens(tokens: list[str], grammar: Grammar) -> tuple[Fraction | int, list[int]]:
    """:func:`parse_and_evaluate` on tokens that lexed (literals are checked here too), with values kept as
    ``int`` wherever they are integers (a division that comes out even stays an ``int``; a Fraction of
    denominator 1 becomes its numerator) and the result not converted to a Fraction. The same operations
    in the same order, so the same first error with the same message (an integer's ``str`` is its
    Fraction's)."""
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
        if tok >= "0":  # a number: the only tokens that sort after "/"
            value: Fraction | int | None = _SMALL_INTS.get(tok)
            if value is None:
                if _bad_literal(tok):
                    raise VerifierError("lexing")  # _evaluate_text has the reference lexer word it
                value = int(tok)
            numbers.append(value)  # type: ignore[arg-type]
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
                if type(product) is int and type(value) is int:
                    if not product % value:
                        product = product // value  # exact: value divides product
                    elif grammar.integer_division:
                        raise VerifierError(f"{product} / {value} is not an integer division")
                    else:
                        product = Fraction(product, value)
                else:
                    quotient = Fraction(product) / value
                    if quotient.denominator == 1:
                        product = quotient.numerator
                    elif grammar.integer_division:
                        raise VerifierError(f"{product} / {value} is not an integer division")
                    else:
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
            return total, numbers


def _evaluate_fast(text: str, grammar: Grammar) -> tuple[Fraction | int, list[int]] | None:
    """``(value, numbers used)`` when the reference lexer and parser accept ``text``, else None."""
    try:
        return _evaluate_text(text, grammar)
    except VerifierError:
        return None


def _verify_text(
    text: str, numbers: Sequence[int], target: int | Fraction, grammar: Grammar
) -> tuple[bool, bool, Fraction | int | None, str | None]:
    """``(correct, well_formed, value, reason)`` of :func:`verify` for ``text`` of type ``str``, with
    ``numbers`` and ``target`` already checked (a tuple of ints; an int or Fraction). ``value`` may be an
    int where the reference has the equal Fraction; everything else is identical."""
    value: Fraction | int | None = None
    try:
        value, used = _evaluate_text(text, grammar)
        # check_number_use's rule for int prompt numbers: multiset inclusion (equality under
        # exactly_once), by removal from a copy; where it fails, the reference raises with the reason
        rule = grammar.number_use
        if len(used) != len(numbers) and (rule == "exactly_once" or len(used) > len(numbers)):
            check_number_use(used, numbers, rule)
        pool = list(numbers)
        try:
            for number in used:
                pool.remove(number)
        except ValueError:
            check_number_use(used, numbers, rule)
    except VerifierError as err:
        return False, False, value, str(err)
    if value == target:
        return True, True, value, None
    return False, True, value, f"value {value} is not the target {target}"


def verify_prompt_text(text: str, numbers: tuple[int, ...], target: int, grammar: Grammar,
                       weights: RewardWeights) -> Verdict:
    """:func:`verify` of ``text`` (a ``str``) for a prompt a task has validated (``numbers`` a tuple of
    ints, ``target`` an int), without checking those arguments again: what a task's ``score`` calls on
    every answer. The verdict is :func:`verify`'s."""
    correct, well_formed, value, reason = _verify_text(text, numbers, target, grammar)
    return _verdict(weights, correct, well_formed, None if value is None else Fraction(value), reason, text)


def _check_expression(expression: object) -> Sequence[Any] | None:
    """None for text; the token sequence otherwise. Raise TypeError for anything that is neither."""
    if isinstance(expression, str):
        return None
    if isinstance(expression, np.ndarray) and expression.ndim == 1:
        return expression.tolist()  # type: ignore[no-any-return]
    if isinstance(expression, (bytes, bytearray)) or not isinstance(expression, Sequence):
        raise TypeError(
            f"expression={expression!r:.80} of type {type(expression).__name__} is neither text (str) "
            "nor a sequence of tokens (a list or tuple of str or int)"
        )
    return expression


def _sequence_parts(expression: Sequence[Any]) -> list[str]:
    """The strings of a token sequence; raise TypeError for a token that is not a str or an int."""
    if len(expression) > MAX_TEXT_CHARS:
        raise VerifierError(f"{len(expression)} tokens; at most {MAX_TEXT_CHARS} are read")
    parts: list[str] = []
    for i, tok in enumerate(expression):
        if isinstance(tok, str):
            parts.append(str.__str__(tok))
        elif isinstance(tok, Integral) and not isinstance(tok, (bool, np.bool_)):
            parts.append(str(tok))
        else:
            raise _ArgumentTypeError(
                f"expression[{i}]={tok!r:.40} of type {type(tok).__name__} is not a token; "
                "tokens are str or int"
            )
    return parts


def _check_numbers(numbers: object) -> Sequence[int]:
    if type(numbers) is tuple and all(type(n) is int for n in numbers):
        return numbers  # the hot path: a Prompt's numbers
    if isinstance(numbers, np.ndarray) and numbers.ndim == 1:
        numbers = numbers.tolist()
    if isinstance(numbers, (str, bytes, bytearray)) or not isinstance(numbers, Sequence):
        raise TypeError(
            f"numbers={numbers!r:.80} of type {type(numbers).__name__} must be a sequence of integers"
        )
    for i, n in enumerate(numbers):
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, Integral):
            raise TypeError(
                f"numbers[{i}]={n!r:.40} of type {type(n).__name__} must be an integer"
            )
    return tuple(int(n) for n in numbers)


def _check_target(target: object) -> None:
    if type(target) is int:
        return
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, (Integral, Fraction)):
        hint = " (use fractions.Fraction for a non-integer target)" if isinstance(target, float) else ""
        raise TypeError(
            f"target={target!r:.40} of type {type(target).__name__} must be an integer or a "
            f"fractions.Fraction{hint}"
        )


def verify(
    expression: str | Sequence[str | int],
    numbers: Sequence[int],
    target: int | Fraction,
    *,
    grammar: Grammar | None = None,
    weights: RewardWeights | None = None,
) -> Verdict:
    """Score one response against a prompt. Every answer gets a verdict; no code is ever evaluated.

    Args:
        expression: the answer as text (``"2+3*5"``) or as a sequence of tokens (``["2", "+", 3, ...]``).
            A token is one unit, a number, an operator or a parenthesis: two adjacent number tokens are
            two numbers side by side (not well-formed), never one multi-digit literal, and a token that
            holds several units (``"2+3"``) or none (``""``) makes the answer not well-formed. In text,
            digits written together are one number, as usual (``"23"`` is 23).
        numbers: the prompt's numbers (a sequence of integers).
        target: the value the expression must take (an integer or a ``Fraction``).
        grammar: what answers are admissible; defaults to the lesson's (``+`` and ``*``, no parentheses,
            each number exactly once).
        weights: reward weights; defaults to :class:`RewardWeights()`.

    Raises:
        TypeError: when an argument has the wrong type: ``expression`` neither text nor a sequence of
            str / int tokens, ``numbers`` not a sequence of integers, ``target`` not an integer or
            ``Fraction``, ``grammar`` / ``weights`` not a :class:`Grammar` / :class:`RewardWeights`.
            Whatever the *content* of an answer of the right type, it gets a verdict, not an exception.

    >>> v = verify("2+3*5", numbers=(2, 3, 5), target=17)
    >>> v.reward, v.correct, v.well_formed, v.value, v.reason
    (1.1, True, True, Fraction(17, 1), None)
    >>> verify("2**3+5", numbers=(2, 3, 5), target=13).reason
    "power operator '**' at position 1 is not allowed"
    >>> verify(["1", "2"], numbers=(1, 2, 12), target=12).reason  # two tokens, not the number 12
    "unexpected '2' at token 1: an operator was expected"
    """
    if grammar is None:
        grammar = _DEFAULT_GRAMMAR
    elif not isinstance(grammar, Grammar):
        raise TypeError(f"grammar={grammar!r:.80} must be a rlvr_env.Grammar or None")
    if weights is None:
        weights = _DEFAULT_WEIGHTS
    elif not isinstance(weights, RewardWeights):
        raise TypeError(f"weights={weights!r:.80} must be a rlvr_env.RewardWeights or None")
    numbers = _check_numbers(numbers)
    _check_target(target)
    if type(expression) is str:  # plain text (not a subclass, whose methods could do anything)
        correct, well_formed, value, reason = _verify_text(expression, numbers, target, grammar)
        return _verdict(weights, correct, well_formed, None if value is None else Fraction(value), reason,
                        expression)
    return _verify_reference(expression, numbers, target, grammar=grammar, weights=weights)


def _verify_reference(
    expression: str | Sequence[str | int],
    numbers: Sequence[int],
    target: int | Fraction,
    *,
    grammar: Grammar | None = None,
    weights: RewardWeights | None = None,
) -> Verdict:
    """:func:`verify` without the fast path for text: the reference the fast path is tested against
    (same verdict, reason included, for every input)."""
    if grammar is None:
        grammar = _DEFAULT_GRAMMAR
    elif not isinstance(grammar, Grammar):
        raise TypeError(f"grammar={grammar!r:.80} must be a rlvr_env.Grammar or None")
    if weights is None:
        weights = _DEFAULT_WEIGHTS
    elif not isinstance(weights, RewardWeights):
        raise TypeError(f"weights={weights!r:.80} must be a rlvr_env.RewardWeights or None")
    numbers = _check_numbers(numbers)
    _check_target(target)
    sequence = _check_expression(expression)
    display: str = expression if isinstance(expression, str) else ""
    value: Fraction | None = None
    try:
        parts: list[str] | None = None
        if sequence is not None:
            parts = _sequence_parts(sequence)
            # Joined before lexing, so a rejected token sequence still reports the text it spelled.
            display = join_tokens(parts)
        tokens = tokenize(display)
        if parts is not None:
            for i, part in enumerate(parts):
                if not _is_unit(part):
                    raise VerifierError(f"token {i} {part!r} is not one number, operator or parenthesis")
        value, used = parse_and_evaluate(tokens, grammar)
        check_number_use(used, numbers, grammar.number_use)
    except VerifierError as err:
        return _verdict(weights, False, False, value, str(err), display)
    except _ArgumentTypeError as err:
        raise TypeError(str(err)) from None
    except Exception as err:  # hostile objects: their __len__, __iter__ or __str__ may raise anything
        return _verdict(weights, False, False, None, f"unreadable input: {err}", display[:64])
    if value == target:
        return _verdict(weights, True, True, value, None, display)
    return _verdict(weights, False, True, value, f"value {value} is not the target {target}", display)


def _verdict(
    weights: RewardWeights,
    correct: bool,
    well_formed: bool,
    value: Fraction | None,
    reason: str | None,
    expression: str,
) -> Verdict:
    accuracy, fmt = weights.accuracy * correct, weights.format * well_formed  # RewardWeights.parts, inline
    # `value` is set only when the text parsed and evaluated; an expression that evaluates but breaks
    # the number-use rule keeps its value, so a user can see what it computed.
    return Verdict(
        reward=accuracy + fmt,
        correct=correct,
        well_formed=well_formed,
        value=value,
        reason=reason,
        expression=expression,
        parts={"accuracy": accuracy, "format": fmt},
    )


_DEFAULT_GRAMMAR = Grammar()
_DEFAULT_WEIGHTS = RewardWeights()
