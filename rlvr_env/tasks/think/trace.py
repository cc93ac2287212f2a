"""The thinking transcript: its tokens, its grammar, and a reading of what it says.

A transcript is a reasoning trace in a think section, then the final expression in an answer section::

    <think> 7 + 9 = 16 ; 16 * 1 = 16 ; back 7 * 9 = 63 ; 63 + 1 = 64 ; </think> <answer> 7 * 9 + 1 </answer>

* a **step** is ``a op b = r ;``: two numbers written in decimal digits, an operator, and the result
  ``r``, a number or ``?`` ("no Countdown number": negative, fractional, a division by zero, or more
  digits than any value of the task can have);
* ``back`` abandons the last step that wrote a number (a failed branch): its operands return to the pool;
* ``</answer>`` is the end-of-sequence token.

:func:`read` reads a whole transcript against a prompt's numbers and target (:class:`Reading`): where the
sections are, whether the transcript is well formed, every step with its two checks (the operands are
in the pool the steps before it leave, the result is what the calculator would write), the failed
branches, and the successful branches (a stack of true steps whose last result is the target). The
rules the task pays by are in :mod:`rlvr_env.tasks.think.task`; this module only reads. Nothing is ever
evaluated: numbers are built digit by digit and arithmetic is exact (:class:`fractions.Fraction`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = ["ANSWER", "BACK", "END_ANSWER", "END_THINK", "EQUALS", "NO_NUMBER", "Reading", "Step",
           "THINK", "THEN", "TraceVocab", "answer_equations", "calculate", "derives", "read"]

THINK, END_THINK, ANSWER, END_ANSWER = "<think>", "</think>", "<answer>", "</answer>"
EQUALS, THEN, NO_NUMBER, BACK = "=", ";", "?", "back"
_TAGS = (THINK, END_THINK, ANSWER, END_ANSWER)


@dataclass(frozen=True)
class TraceVocab:
    """The transcript's tokens for a set of operators (ids = positions in :attr:`tokens`): the digits
    ``0``-``9``, the operators, ``(`` and ``)`` when the answer may use them, ``=``, ``;``, ``?``,
    ``back``, then the four section tags, ``</answer>`` last (the end-of-sequence token)."""

    operators: str = "+-*/"
    parentheses: bool = True

    @property
    def tokens(self) -> tuple[str, ...]:
        parens = ("(", ")") if self.parentheses else ()
        return (*"0123456789", *self.operators, *parens, EQUALS, THEN, NO_NUMBER, BACK, *_TAGS)

    def id(self, token: str) -> int:
        return self.tokens.index(token)


def calculate(a: int, op: str, b: int, max_digits: int) -> int | None:
    """What the calculator writes for ``a op b``: the exact result when it is a non-negative integer of
    at most ``max_digits`` digits, else None (written ``?``)."""
    if op == "+":
        value: Fraction | int = a + b
    elif op == "-":
        value = a - b
    elif op == "*":
        value = a * b
    else:
        if b == 0:
            return None
        value = Fraction(a, b)
    if isinstance(value, Fraction):
        if value.denominator != 1:
            return None
        value = value.numerator
    if value < 0 or len(str(value)) > max_digits:
        return None
    return int(value)


@dataclass(frozen=True)
class Step:
    """One written step ``a op b = result ;`` (``result`` None: ``?``)."""

    a: int
    op: str
    b: int
    result: int | None
    #: both operands were in the pool the steps before it left (``a`` and ``b`` twice when equal)
    available: bool
    #: the result is what the calculator writes for ``a op b``
    true: bool

    @property
    def passes(self) -> bool:
        """The step check: arithmetically true and on available numbers."""
        return self.available and self.true

    def equation(self) -> tuple[int, str, int, int | None]:
        """The step as an equation, operands of ``+`` and ``*`` in order (so ``9 + 7`` equals ``7 + 9``)."""
        a, b = (min(self.a, self.b), max(self.a, self.b)) if self.op in "+*" else (self.a, self.b)
        return a, self.op, b, self.result


@dataclass
class Reading:
    """What :func:`read` found in one transcript (see the module docstring)."""

    #: the answer section was found: exactly one ``</think>``, right before the only ``<answer>``, and the
    #: transcript ends with its only ``</answer>``
    located: bool = False
    #: the answer's token ids (between ``<answer>`` and ``</answer>``) when located, else None
    answer: tuple[int, ...] | None = None
    #: the whole transcript follows the grammar (one think section first, well-formed steps, no ``back``
    #: without a step to abandon, then the answer section); the answer expression itself is the
    #: verifier's to judge
    well_formed: bool = False
    #: why the transcript is not well formed (None when it is)
    reason: str | None = None
    steps: list[Step] = field(default_factory=list)
    #: ``back`` tokens that abandoned a step (failed branches)
    backs: int = 0
    #: each successful branch as its steps' equations (the empty branch when a prompt number is the target)
    branches: list[tuple[tuple[int, str, int, int | None], ...]] = field(default_factory=list)

    @property
    def step_pass_rate(self) -> float:
        """The share of written steps that pass the step check (0.0 without steps)."""
        return sum(s.passes for s in self.steps) / len(self.steps) if self.steps else 0.0


def _number(tokens: Sequence[str], i: int, max_digits: int) -> tuple[int | None, int]:
    """The decimal number starting at ``tokens[i]`` and the index after it; None when there is none, it
    has a leading zero or more than ``max_digits`` digits."""
    j = i
    while j < len(tokens) and len(tokens[j]) == 1 and tokens[j].isdigit():
        j += 1
    digits = "".join(tokens[i:j])
    if not digits or (len(digits) > 1 and digits[0] == "0") or len(digits) > max_digits:
        return None, j
    return int(digits), j


def read(tokens: Sequence[str], numbers: Sequence[int], target: int, *, max_digits: int,
         operators: str = "+-*/") -> Reading:
    """Read the transcript ``tokens`` (token strings, the end-of-sequence token included when written)
    against a prompt's ``numbers`` and ``target``; ``max_digits`` bounds a number's digits."""
    out = Reading()
    ops = set(operators)
    tags = Counter(t for t in tokens if t in _TAGS)
    n = len(tokens)
    if (tags[END_THINK] == 1 and tags[ANSWER] == 1 and tags[END_ANSWER] == 1 and n >= 3
            and tokens[-1] == END_ANSWER):
        close = list(tokens).index(END_THINK)
        if close + 1 < n and tokens[close + 1] == ANSWER:
            out.located = True
            out.answer = tuple(range(close + 2, n - 1))  # positions, mapped to ids by the caller
    think_end = list(tokens).index(END_THINK) if END_THINK in tokens else n
    if not tokens or tokens[0] != THINK:
        out.reason = "the transcript does not start with <think>"
    elif tags[THINK] != 1:
        out.reason = "<think> appears more than once"
    elif not out.located:
        out.reason = "no answer section: </think> <answer> ... </answer> must end the transcript, once"

    pool = Counter(numbers)
    stack: list[tuple[Step, Counter[int]]] = []
    if target in pool:
        out.branches.append(())
    i = 1 if tokens and tokens[0] == THINK else 0
    step_error: str | None = None
    while i < think_end:
        if tokens[i] == BACK:
            if not stack:
                step_error = f"back at token {i} with no step to abandon"
                break
            _, pool = stack.pop()
            out.backs += 1
            i += 1
            continue
        a, j = _number(tokens, i, max_digits)
        if a is None or j >= think_end or tokens[j] not in ops:
            step_error = f"token {i}: a step must read 'a op b = r ;'"
            break
        op = tokens[j]
        b, k = _number(tokens, j + 1, max_digits)
        if b is None or k >= think_end or tokens[k] != EQUALS or k + 1 >= think_end:
            step_error = f"token {i}: a step must read 'a op b = r ;'"
            break
        if tokens[k + 1] == NO_NUMBER:
            result, m = None, k + 2
        else:
            result, m = _number(tokens, k + 1, max_digits)
            if result is None:
                step_error = f"token {k + 1}: a step's result must be a number or '?'"
                break
        if m >= think_end or tokens[m] != THEN:
            step_error = f"token {m}: a step ends with ';'"
            break
        need = Counter((a, b))
        available = all(pool[v] >= c for v, c in need.items())
        step = Step(a, op, b, result, available, result == calculate(a, op, b, max_digits))
        out.steps.append(step)
        if result is not None:
            stack.append((step, pool))
            if available:
                pool = pool - need
                pool[result] += 1
            if result == target and all(s.passes for s, _ in stack):
                out.branches.append(tuple(s.equation() for s, _ in stack))
        i = m + 1
    if out.reason is None and step_error is not None:
        out.reason = step_error
    out.well_formed = out.reason is None
    return out


def answer_equations(tokens: Sequence[str]) -> list[tuple[Fraction, str, Fraction, Fraction | None]] | None:
    """The equations an answer expression computes, one per operator, in the order of evaluation (operands
    of ``+`` and ``*`` in order, as :meth:`Step.equation` writes them), or None when the tokens are not an
    expression (the verifier says why). Precedence and parentheses as the verifier reads them."""
    eqs: list[tuple[Fraction, str, Fraction, Fraction | None]] = []
    pos = 0

    def number() -> Fraction | None:
        nonlocal pos
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            value = expression()
            if value is None or pos >= len(tokens) or tokens[pos] != ")":
                return None
            pos += 1
            return value
        start = pos
        while pos < len(tokens) and len(tokens[pos]) == 1 and tokens[pos].isdigit():
            pos += 1
        return Fraction(int("".join(tokens[start:pos]))) if pos > start else None

    def apply(a: Fraction, op: str, b: Fraction) -> Fraction | None:
        if op == "+":
            r: Fraction | None = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        else:
            r = a / b if b else None
        x, y = (min(a, b), max(a, b)) if op in "+*" else (a, b)
        eqs.append((x, op, y, r))
        return r

    def level(ops: str, lower: object) -> Fraction | None:
        nonlocal pos
        value = lower()  # type: ignore[operator]
        while value is not None and pos < len(tokens) and tokens[pos] in ops and len(tokens[pos]) == 1:
            op = tokens[pos]
            pos += 1
            right = lower()  # type: ignore[operator]
            if right is None:
                return None
            value = apply(value, op, right)
        return value  # type: ignore[no-any-return]

    def term() -> Fraction | None:
        return level("*/", number)

    def expression() -> Fraction | None:
        return level("+-", term)

    value = expression()
    if value is None or pos != len(tokens):
        return None
    return eqs


def derives(branch: Sequence[tuple[int, str, int, int | None]],
            equations: Sequence[tuple[Fraction, str, Fraction, Fraction | None]]) -> bool:
    """Whether every equation of an answer is a step of ``branch`` (as multisets): the branch derives it."""
    steps = Counter((Fraction(a), op, Fraction(b), None if r is None else Fraction(r)) for a, op, b, r in branch)
    return not (Counter(equations) - steps)
