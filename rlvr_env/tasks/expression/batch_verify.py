"""The batch verifier: :func:`rlvr_env.verify` for a whole batch of token sequences, as array operations.

:func:`batch_verify` scores a ``(B, L)`` array of token ids against per-row prompts and returns a
:class:`BatchVerdict` of arrays. It agrees exactly with :func:`rlvr_env.verify` applied to the text
``task.decode(row)`` (same ``correct``, ``well_formed``, value and reward parts; tests check this on
random and exhaustive inputs). It reads the *text* semantics, token by token:

* a number token is one number: two adjacent number tokens are two numbers side by side, which the
  grammar rejects (``task.decode`` writes them with a space between, ``"2 3"``, so the text verifier
  rejects them too; they never merge into the literal 23). A number of more than
  :data:`~rlvr_env.tasks.expression.verifier.MAX_NUMBER_DIGITS` digits, or more than
  :data:`~rlvr_env.tasks.expression.verifier.MAX_TEXT_CHARS` characters of text, is a lexing error;
* the grammar is checked by a two-state recogniser (expecting an operand or an operator) plus a
  parenthesis depth, which accepts exactly the language of the recursive-descent parser;
* values are exact rationals held as reduced int64 numerator / denominator arrays. Instead of a value
  stack, each parenthesis level keeps two accumulators, the finished sum ``S`` with the sign of the
  next term and the running product ``T`` with its pending ``*`` / ``/`` (precedence has two levels,
  so this is all a shunting-yard would keep). Every ``+ - * /`` is applied in the parser's order
  (left-associative), so division by zero and non-integer quotients (``integer_division``) are
  detected at the same operations;
* number use compares the multiset of literals with the prompt's numbers, as ``verify`` does.

Arithmetic is exact while every operand fits in 31 bits (products then fit in int64). A row whose
operands grow past that is flagged and re-scored by :func:`rlvr_env.verify` on its text (Python
integers are unbounded), so the result is exact for every input; with prompt numbers of at most a few
digits this fallback is rare.

The same :class:`StackMachine` runs incrementally inside :class:`rlvr_env.vector.TokenVectorEnv`: one
:meth:`StackMachine.feed` per environment step, one :meth:`StackMachine.finish` for the rows whose
episodes end, so verifying costs a fixed number of array operations per step, whatever the length.

The stages live in :mod:`.tokens` (what tokens mean, the grammar recogniser) and :mod:`.machine` (the
values); a family with answer programs may pass a shortcut for the rows it can score by lookup
(``programs=``, Countdown's :func:`rlvr_env.tasks.countdown.programs.by_programs`).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from rlvr_env.rewards import BatchVerdict, RewardWeights
from rlvr_env.tasks.expression.token_kinds import EOS
from rlvr_env.tasks.expression.verifier import (
    Grammar,
)
from rlvr_env.tasks.expression.machine import StackMachine, assemble_verdict
from rlvr_env.tasks.expression.tokens import TokenTable, _check_numbers, grammar_passes

__all__ = ["ProgramShortcut", "batch_verify"]

#: Rows per StackMachine in :func:`batch_verify` (its working set then stays in cache).
_CHUNK = 4096

#: A family's shortcut for rows it can score by lookup: ``(tokens, ends, numbers, targets, table, grammar,
#: read_all)`` -> (rows, correct, well_formed, value_num, value_den), or None when it has none.
ProgramShortcut = Callable[..., "tuple[np.ndarray, ...] | None"]


def batch_verify(
    tokens: np.ndarray,
    numbers: np.ndarray,
    targets: np.ndarray,
    *,
    table: TokenTable,
    grammar: Grammar,
    weights: RewardWeights | None = None,
    lengths: np.ndarray | None = None,
    programs: ProgramShortcut | None = None,
) -> BatchVerdict:
    """Score B answers at once; row ``i`` gets what ``verify(text_i, numbers[i], targets[i])`` gives.

    Args:
        tokens: (B, L) int token ids; a row ends at its first EOS token, at ``lengths[i]`` or at L.
        numbers: (B, N) int prompt numbers per row (the values of slot tokens ``"n0"``, ``"n1"``, ...).
        targets: (B,) int targets.
        table: what the token ids mean (:meth:`TokenTable.from_vocab`).
        grammar: the rules, as for :func:`rlvr_env.verify`.
        weights: reward weights (default :class:`RewardWeights()`).
        lengths: optional (B,) number of tokens to read per row.
        programs: a family's shortcut for the rows it can score by their answer programs, exactly
            (Countdown's :func:`rlvr_env.tasks.countdown.programs.by_programs`); None: every row takes
            the general path.

    >>> from rlvr_env.tasks.expression.verifier import Grammar
    >>> table = TokenTable.from_vocab(("n0", "n1", "n2", "+", "*", "(", ")", "<eos>"), eos_id=7)
    >>> toks = np.array([[0, 3, 1, 4, 2, 7], [5, 0, 3, 1, 6, 4]])  # n0+n1*n2 ; (n0+n1)*
    >>> v = batch_verify(toks, np.array([[2, 3, 5], [2, 3, 5]]), np.array([17, 25]), table=table,
    ...                  grammar=Grammar(frozenset("+*"), parentheses=True))
    >>> v.correct.tolist(), v.well_formed.tolist(), v.values()
    ([True, False], [True, False], [Fraction(17, 1), None])
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(
            f"tokens has shape {tokens.shape} and dtype {tokens.dtype}; a (B, L) int array is expected"
        )
    b, length = tokens.shape
    vocab_size = len(table.kinds)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"token ids must lie in [0, {vocab_size}); got {tokens.min()}..{tokens.max()}")
    numbers = np.asarray(numbers, dtype=np.int64).reshape(b, -1)
    targets = np.asarray(targets, dtype=np.int64).reshape(b)
    if b == 0:
        empty = np.zeros(0, dtype=bool)
        z = np.zeros(0, dtype=np.int64)
        return assemble_verdict(weights or RewardWeights(), empty, empty, empty, z, z, empty)
    ends = np.full(b, length) if lengths is None else np.minimum(np.asarray(lengths).reshape(b), length)
    eos_ids = np.flatnonzero(table.kinds == EOS)
    is_eos = tokens == eos_ids[0] if len(eos_ids) == 1 else table.kinds[tokens] == EOS  # (B, L)
    first = is_eos.argmax(axis=1)  # 0 also where a row has no EOS: told apart by one gather, which is
    first_eos = np.where(is_eos[np.arange(b), first], first, length)  # cheaper than any(axis=1)
    ends = np.minimum(ends, first_eos)  # (B,) tokens to read per row
    _check_numbers(numbers)
    table.values(numbers[:1])  # refuses prompts with fewer numbers than the vocabulary's slots
    weights = weights if weights is not None else RewardWeights()
    fast = programs(tokens, ends, numbers, targets, table, grammar, lengths is None) if programs else None
    if fast is None:
        return _verify_rows(tokens, ends, numbers, targets, table, grammar, weights)
    rows, correct, well_formed, value_num, value_den = fast
    rest = np.ones(b, dtype=bool)
    rest[rows] = False
    out = assemble_verdict(weights, np.zeros(b, bool), np.zeros(b, bool), np.zeros(b, bool),
                           np.zeros(b, np.int64), np.zeros(b, np.int64), np.zeros(b, bool))
    out.correct[rows], out.well_formed[rows], out.has_value[rows] = correct, well_formed, well_formed
    out.value_num[rows], out.value_den[rows] = value_num, value_den
    if rest.any():
        idx = np.flatnonzero(rest)
        slow = _verify_rows(tokens[idx], ends[idx], numbers[idx], targets[idx], table, grammar, weights)
        for name in ("correct", "well_formed", "has_value", "value_num", "value_den", "fallback"):
            getattr(out, name)[idx] = getattr(slow, name)
        out.big_values.update({int(idx[j]): value for j, value in slow.big_values.items()})
    out.parts = weights.parts(out.correct, out.well_formed)
    out.reward = out.parts["accuracy"] + out.parts["format"]
    return out


def _verify_rows(
    tokens: np.ndarray, ends: np.ndarray, numbers: np.ndarray, targets: np.ndarray, table: TokenTable,
    grammar: Grammar, weights: RewardWeights,
) -> BatchVerdict:
    """:func:`batch_verify`'s general path on validated rows with their read lengths ``ends``."""
    b, length = tokens.shape
    # Only rows the recogniser accepts can have a value; the others are scored as not well-formed
    # without running the machine (what it would conclude for them). The accepted rows are sorted by
    # length and cut into cache-sized chunks: a chunk stops at its longest row, so short answers do
    # not ride along through the long ones' columns.
    passes = grammar_passes(table, grammar, tokens, ends)
    accepted = np.flatnonzero(passes)
    order = np.concatenate([accepted[np.argsort(ends[accepted], kind="stable")], np.flatnonzero(~passes)])
    parts = []
    for start in range(0, len(accepted), _CHUNK):
        idx = order[start : min(start + _CHUNK, len(accepted))]
        k = len(idx)
        machine = StackMachine(table, grammar, k, max(length, 1), weights, num_numbers=numbers.shape[1])
        rows = np.arange(k)
        machine.set_prompts(rows, numbers[idx], targets[idx])
        chunk_tokens, chunk_ends = tokens[idx], ends[idx]
        for col in range(int(chunk_ends.max(initial=0))):
            machine.feed(chunk_tokens[:, col], col < chunk_ends)
        parts.append(machine.finish(rows))
    rejected = b - len(accepted)
    if rejected:
        no = np.zeros(rejected, dtype=bool)
        zero = np.zeros(rejected, dtype=np.int64)
        parts.append(assemble_verdict(weights, no, no, no, zero, zero, no))
    return _scatter(parts, order, b)


def _scatter(parts: list[BatchVerdict], order: np.ndarray, b: int) -> BatchVerdict:
    """Concatenate chunk verdicts (rows in ``order``) back into the caller's row order."""
    if len(parts) == 1 and np.array_equal(order, np.arange(b)):
        return parts[0]
    inverse = np.empty(b, dtype=np.int64)
    inverse[order] = np.arange(b)

    def cat(get: Callable[[BatchVerdict], np.ndarray]) -> np.ndarray:
        return np.concatenate([get(p) for p in parts])[inverse]

    big: dict[int, Fraction] = {}
    offset = 0
    for p in parts:
        big.update({int(order[offset + j]): v for j, v in p.big_values.items()})
        offset += len(p.reward)
    return BatchVerdict(
        reward=cat(lambda p: p.reward),
        correct=cat(lambda p: p.correct),
        well_formed=cat(lambda p: p.well_formed),
        has_value=cat(lambda p: p.has_value),
        value_num=cat(lambda p: p.value_num),
        value_den=cat(lambda p: p.value_den),
        parts={name: cat(lambda p, name=name: p.parts[name]) for name in parts[0].parts},  # type: ignore
        fallback=cat(lambda p: p.fallback),
        big_values=big,
    )
