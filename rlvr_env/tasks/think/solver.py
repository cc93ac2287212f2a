"""The thinking task's own solver: a correct transcript for a prompt, in one of three styles.

* ``"expression"``: an empty think section, then the answer (today's format, in sections);
* ``"path"``: the steps of one solution, then the answer (the optimal path, no failed branch);
* ``"search"``: a depth-first search written out, Stream-of-Search style: every step tried, failed
  branches abandoned with ``back``, until a step reaches the target; then the answer.

All three styles answer with the expression the search finds, so they differ only in what is written
before it. The search tries a state's moves in a fixed order, nearest result to the target first (ties
by operator, then by operands), never writes a move that cannot help (a result of 0, a ``?``, or a result
equal to an operand, as ``x * 1``), and stops at the first step whose result is the target. A search that
does not fit the length cap is cut: its earliest failed branches are dropped, whole, until it fits
(:attr:`Solved.cut` says so); the path style needs no cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlvr_env.tasks.think.trace import (
    ANSWER, BACK, END_ANSWER, END_THINK, EQUALS, THEN, THINK, calculate,
)

__all__ = ["STYLES", "Solved", "solve"]

#: The solver's styles.
STYLES = ("expression", "path", "search")

_Move = tuple[int, str, int, int]


@dataclass(frozen=True)
class Solved:
    """A solved prompt: the transcript as token strings, which of them the calculator writes (the result
    and the ``;`` after each ``=``), whether the search was cut to fit, and the search's full length."""

    tokens: tuple[str, ...]
    written_by_calculator: tuple[bool, ...]
    cut: bool
    search_length: int


def _moves(pool: list[int], target: int, operators: str, max_digits: int) -> list[_Move]:
    seen: set[_Move] = set()
    moves: list[_Move] = []
    order = {op: k for k, op in enumerate(operators)}
    for i in range(len(pool)):
        for j in range(len(pool)):
            if i == j:
                continue
            a, b = pool[i], pool[j]
            for op in operators:
                if op in "+*" and a < b:
                    continue  # each commutative pair once, larger first
                c = calculate(a, op, b, max_digits)
                if c is None or c == 0 or c in (a, b):
                    continue
                move = (a, op, b, c)
                if move not in seen:
                    seen.add(move)
                    moves.append(move)
    moves.sort(key=lambda m: (abs(m[3] - target), order[m[1]], -m[0], -m[2]))
    return moves


def _step_tokens(move: _Move) -> list[str]:
    a, op, b, c = move
    return [*str(a), op, *str(b), EQUALS, *str(c), THEN]


def _flatten_subtree(pool: list[int], target: int, operators: str, max_digits: int) -> list[str]:
    """The tokens a failed search below ``pool`` writes (every move tried and abandoned)."""
    out: list[str] = []
    if len(pool) < 2:
        return out
    for move in _moves(pool, target, operators, max_digits):
        a, _, b, c = move
        rest = list(pool)
        rest.remove(a)
        rest.remove(b)
        rest.append(c)
        out += _step_tokens(move) + _flatten_subtree(rest, target, operators, max_digits) + [BACK]
    return out


def _answer(numbers: Sequence[int], path: Sequence[_Move], target: int) -> list[str]:
    """The answer expression of a successful path, parentheses where its steps need them, as token strings."""
    exprs: list[tuple[int, list[str], int]] = [(v, [*str(v)], 3) for v in numbers]  # value, tokens, precedence
    prec = {"+": 1, "-": 1, "*": 2, "/": 2}
    for a, op, b, c in path:
        ia = next(k for k, e in enumerate(exprs) if e[0] == a)
        ea = exprs.pop(ia)
        ib = next(k for k, e in enumerate(exprs) if e[0] == b)
        eb = exprs.pop(ib)
        p = prec[op]
        left = ea[1] if ea[2] >= p else ["(", *ea[1], ")"]
        # a right operand of equal precedence keeps its parentheses, so the answer computes the steps'
        # own equations (4 * (6 / 3), not 4 * 6 / 3)
        right = eb[1] if eb[2] > p else ["(", *eb[1], ")"]
        exprs.append((c, [*left, op, *right], p))
    if not path:
        return [*str(target)]
    return next(e[1] for e in reversed(exprs) if e[0] == target)


def solve(numbers: Sequence[int], target: int, *, style: str, max_length: int, max_digits: int,
          operators: str = "+-*/") -> Solved | None:
    """A correct transcript of ``style`` for the prompt, or None when the search finds no solution
    (every intermediate result a non-negative integer) or even the path does not fit ``max_length``."""
    if style not in STYLES:
        raise ValueError(f"style={style!r} is not one of {STYLES}")
    if target in numbers:
        levels: list[list[list[str]]] = [[]]
        path: list[_Move] = []
    else:
        found = _search(list(numbers), target, operators, max_digits)
        if found is None:
            return None
        levels, path = found
    answer = [ANSWER, *_answer(numbers, path, target), END_ANSWER]
    steps = [_step_tokens(move) for move in path]
    fixed = sum(len(s) for s in steps) + len(answer) + 2  # + <think> and </think>
    full = fixed + sum(len(seg) for level in levels for seg in level)
    cut = False
    if style == "expression":
        trace: list[str] = []
    elif style == "path":
        trace = [t for s in steps for t in s]
    else:
        kept = [list(level) for level in levels]
        size = full
        for level in kept:  # drop the earliest failed branches, whole, until the transcript fits
            while level and size > max_length:
                size -= len(level.pop(0))
                cut = True
        trace = []
        for d, level in enumerate(kept):
            trace += [t for seg in level for t in seg]
            if d < len(steps):
                trace += steps[d]
    tokens = (THINK, *trace, END_THINK, *answer)
    if len(tokens) > max_length:
        return None
    return Solved(tokens, _calculator_marks(tokens), cut, full)


def _search(pool: list[int], target: int, operators: str, max_digits: int
            ) -> tuple[list[list[list[str]]], list[_Move]] | None:
    """The search from the prompt's numbers: the failed branches tried at each depth of the successful
    path (each a self-contained segment: its step, its subtree, ``back``) and the path's moves."""
    levels: list[list[list[str]]] = []
    path: list[_Move] = []

    def dfs(p: list[int], depth: int) -> bool:
        levels.append([])
        for move in _moves(p, target, operators, max_digits):
            a, _, b, c = move
            path.append(move)
            if c == target:
                return True
            rest = list(p)
            rest.remove(a)
            rest.remove(b)
            rest.append(c)
            if len(rest) > 1 and dfs(rest, depth + 1):
                return True
            path.pop()
            del levels[depth + 1:]
            levels[depth].append(_step_tokens(move) + _flatten_subtree(rest, target, operators, max_digits)
                                 + [BACK])
        return False

    if not dfs(pool, 0):
        return None
    return levels, path


def _calculator_marks(tokens: Sequence[str]) -> tuple[bool, ...]:
    marks = [False] * len(tokens)
    in_result = False
    for i, t in enumerate(tokens):
        if in_result:
            marks[i] = True
            if t == THEN:
                in_result = False
        elif t == EQUALS:
            in_result = True
    return tuple(marks)
