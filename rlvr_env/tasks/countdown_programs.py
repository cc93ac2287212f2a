"""Countdown answers as small programs: a trie of answer shapes, so a vector env scores by table lookup.

An answer the grammar masks allow (each slot at most once, completable within ``max_length``) is, once
its slots are renamed in order of appearance, one of a few thousand *shapes*: the token kinds in order
(``"( n + n ) * n <eos>"``). :class:`ProgramTable` is the trie of those shapes: a native vector env keeps
one shape state per row and moves it with one table lookup per step (``next[state, token]``; every slot
token moves alike), instead of running the incremental evaluator on every row at every step. A state
reached by EOS after a complete answer holds the answer's *program*: the token positions of its
operands and, in the parser's order (``+ -`` below ``* /``, left-associative, parentheses first), the
binary operations on them as register steps ``reg[left] = reg[left] op reg[right]``.

:func:`evaluate` runs the programs of k finished answers at once, in exact rational arithmetic on int64
numerators and denominators. It is exact whenever every operand is at most :meth:`ProgramTable.bound`:
an answer with ``m`` operands of magnitude at most M has unreduced numerators below ``2**(m-1) * M**m``
and denominators below ``M**m`` (by induction over the tree), so nothing overflows. Rows with larger
numbers, and answers that left the masks' language (a slot used twice, a policy that ignored the mask),
are scored by the general :func:`rlvr_env.batch_verify.batch_verify` instead; both agree with
:func:`rlvr_env.verify` (tests check the vector env against the single env in lockstep).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from rlvr_env.batch_verify import (
    ADD,
    DIV,
    EOS,
    LPAREN,
    MUL,
    NUM,
    RPAREN,
    SUB,
    BatchVerdict,
    TokenTable,
    assemble_verdict,
    batch_verify,
)
from rlvr_env.tasks.countdown_masks import MaskRules, PrefixStates, advance, masks_of
from rlvr_env.verifier import MAX_NUMBER_DIGITS, MAX_TEXT_CHARS, Grammar, RewardWeights

__all__ = ["ProgramTable", "ProgramScorer", "evaluate", "count_shapes", "MAX_SHAPES"]

#: Settings whose shape trie would have more states than this score with the incremental evaluator.
MAX_SHAPES = 100_000
START, DEAD = 0, 1  # the empty answer; the absorbing state of answers outside the masks' language
_PRECEDENCE = {ADD: 1, SUB: 1, MUL: 2, DIV: 2}


@dataclass(frozen=True)
class ProgramTable:
    """The shape trie of one Countdown setting (see the module docstring).

    Attributes:
        next: (S, V) int64 state after each token (state 0: the empty answer, 1: dead, absorbing).
        accept: (S,) bool: the state is a complete answer followed by EOS.
        operands: (S, N) int64 token position of each operand register (unused registers: the first's).
        left, right, ops: (S, N-1) int64 register program; ``ops`` 0 where a step does nothing.
        n: slots (N).
    """

    next: np.ndarray
    accept: np.ndarray
    operands: np.ndarray
    left: np.ndarray
    right: np.ndarray
    ops: np.ndarray
    n: int

    @property
    def num_states(self) -> int:
        return len(self.accept)

    def bound(self) -> int:
        """The largest operand magnitude M with ``2**(N-1) * M**N < 2**63`` (int64 stays exact)."""
        lo, hi = 1, 1 << 62
        while lo < hi:  # integer bisection, no floating point
            mid = (lo + hi + 1) // 2
            if (1 << (self.n - 1)) * mid**self.n < 1 << 63:
                lo = mid
            else:
                hi = mid - 1
        return lo

    @classmethod
    def build(cls, rules: MaskRules, max_states: int = MAX_SHAPES) -> ProgramTable | None:
        """Enumerate the shapes layer by layer (a layer is a prefix length), slots renamed in order of
        appearance; None when there would be more than ``max_states`` states."""
        n, v, kinds = rules.n, rules.vocab_size, rules.kinds
        slot_ids = [t for t in range(v) if kinds[t] == NUM]
        if len(slot_ids) != n or slot_ids != list(range(n)):
            raise ValueError(f"a Countdown vocabulary starts with its {n} slot tokens; got kinds {kinds}")
        if count_shapes(rules) + 2 > max_states:
            return None
        next_rows: list[np.ndarray] = [np.full(v, DEAD), np.full(v, DEAD)]
        programs: dict[int, tuple[list[int], list[tuple[int, int, int]]]] = {}
        # per state of the current layer: mask state (struct of arrays) and parser state (Python)
        layer = PrefixStates.empty(1, n)
        parsers: list[tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int, int], ...], tuple[int, ...]]]
        parsers = [((), (), (), ())]  # (operator stack, operand stack, program, operand positions)
        layer_ids = [START]
        total = 2
        for length in range(rules.max_length):
            masks = masks_of(rules, layer, np.full(len(layer_ids), length))  # (k, V)
            used = layer.used.sum(axis=1)  # (k,) the canonical next slot
            parents, toks, child_parsers = [], [], []
            for row, (state, parser) in enumerate(zip(layer_ids, parsers)):
                allowed = [t for t in range(n, v) if masks[row, t]]
                if used[row] < n and masks[row, used[row]]:
                    allowed.insert(0, int(used[row]))
                for t in allowed:
                    kind = int(kinds[t])
                    nxt = total + len(toks)
                    for s in (range(n) if kind == NUM else (t,)):
                        next_rows[state][s] = nxt
                    parents.append(row)
                    toks.append(t)
                    child = _parse(parser, kind, length)
                    if kind == EOS:
                        programs[nxt] = (list(child[3]), list(child[2]))
                    child_parsers.append(child)
            total += len(toks)
            next_rows.extend(np.full(v, DEAD) for _ in toks)
            if not toks:
                break
            idx = np.array(parents)
            st = PrefixStates(layer.expect[idx], layer.depth[idx], layer.used[idx], layer.bad[idx])
            advance(rules, st, np.array(toks), np.ones(len(toks), dtype=bool))
            live = [i for i, t in enumerate(toks) if kinds[t] != EOS]  # EOS leaves are not expanded
            keep = np.array(live, dtype=np.int64)
            layer = PrefixStates(st.expect[keep], st.depth[keep], st.used[keep], st.bad[keep])
            first = total - len(toks)
            layer_ids = [first + i for i in live]
            parsers = [child_parsers[i] for i in live]
        steps = max(n - 1, 1)
        accept = np.zeros(total, dtype=bool)
        operands = np.zeros((total, n), dtype=np.int64)
        left = np.zeros((total, steps), dtype=np.int64)
        right = np.zeros((total, steps), dtype=np.int64)
        ops = np.zeros((total, steps), dtype=np.int64)
        for state, (positions, program) in programs.items():
            accept[state] = True
            operands[state] = positions[0]  # unused registers read the first operand (harmless)
            operands[state, : len(positions)] = positions
            for step, (a, b, op) in enumerate(program):
                left[state, step], right[state, step], ops[state, step] = a, b, op
        return cls(np.stack(next_rows).astype(np.int64), accept, operands, left, right, ops, n)


def count_shapes(rules: MaskRules) -> int:
    """The number of shape states (prefixes with slots renamed in order of appearance) of ``rules``,
    counted over merged mask states (few per layer), so a setting with too many is refused at once."""
    n, v = rules.n, rules.vocab_size
    layer: dict[tuple[bool, int, int], int] = {(True, 0, 0): 1}  # (expect, depth, slots used) -> prefixes
    total = 0
    for length in range(rules.max_length):
        if not layer:
            break
        keys = list(layer)
        used = np.array([[s < c for s in range(n)] for _, _, c in keys], dtype=bool).reshape(len(keys), n)
        st = PrefixStates(np.array([k[0] for k in keys], dtype=bool), np.array([k[1] for k in keys], dtype=np.int64),
                          used, np.zeros(len(keys), dtype=bool))
        masks = masks_of(rules, st, np.full(len(keys), length))
        nxt: dict[tuple[bool, int, int], int] = {}
        for row, (expect, depth, c) in enumerate(keys):
            paths = layer[(expect, depth, c)]
            for t in range(v):
                if not masks[row, t] or (t < n and t != c):
                    continue
                total += paths
                kind = int(rules.kinds[t])
                if kind == EOS:
                    continue
                key = (kind in _PRECEDENCE or kind == LPAREN, depth + (kind == LPAREN) - (kind == RPAREN),
                       c + (kind == NUM))
                nxt[key] = nxt.get(key, 0) + paths
        layer = nxt
    return total


def _parse(parser: tuple, kind: int, position: int) -> tuple:
    """The shunting-yard state after one more token of kind ``kind`` at ``position``. Operands are
    registers numbered in order of appearance; a reduction emits ``(left, right, op)`` and leaves its
    result in ``left``."""
    opstack, values, program, positions = parser

    def reduce(opstack: tuple, values: tuple, program: tuple) -> tuple:
        a, b = values[-2], values[-1]
        return opstack[:-1], values[:-2] + (a,), program + ((a, b, opstack[-1]),)

    if kind == NUM:
        return opstack, values + (len(positions),), program, positions + (position,)
    if kind in _PRECEDENCE:
        while opstack and opstack[-1] != LPAREN and _PRECEDENCE[opstack[-1]] >= _PRECEDENCE[kind]:
            opstack, values, program = reduce(opstack, values, program)
        return opstack + (kind,), values, program, positions
    if kind == LPAREN:
        return opstack + (LPAREN,), values, program, positions
    if kind == RPAREN:
        while opstack[-1] != LPAREN:
            opstack, values, program = reduce(opstack, values, program)
        return opstack[:-1], values, program, positions
    # EOS after a complete answer: everything reduces
    while opstack:
        opstack, values, program = reduce(opstack, values, program)
    return opstack, values, program, positions


def evaluate(
    table: ProgramTable, states: np.ndarray, operands: np.ndarray, integer_division: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the programs of accepting ``states`` (k,) on ``operands`` (k, N) int64 (register i: the value
    of the answer's i-th operand). Returns the reduced value ``num / den`` (k,) with ``den > 0``, and
    ``err`` (k,): division by zero, or an inexact quotient under ``integer_division`` (no value)."""
    k = len(states)
    rows = np.arange(k)
    num = operands.copy()  # (k, N)
    den = np.ones_like(num)
    err = np.zeros(k, dtype=bool)
    for step in range(table.ops.shape[1]):
        op = table.ops[states, step]  # (k,)
        if not op.any():
            break
        a, b = table.left[states, step], table.right[states, step]
        an, ad, bn, bd = num[rows, a], den[rows, a], num[rows, b], den[rows, b]
        is_div = op == DIV
        mul_like = (op == MUL) | is_div
        f_num = np.where(is_div, bd, bn)  # a * b = (an * bn) / (ad * bd); a / b = (an * bd) / (ad * bn)
        f_den = np.where(is_div, bn, bd)
        r_den = ad * f_den
        r_num = np.where(mul_like, an * f_num, an * bd + np.where(op == SUB, -bn, bn) * ad)
        err |= is_div & (bn == 0)
        if integer_division:
            err |= is_div & (r_num % np.where(r_den == 0, 1, r_den) != 0)
        live = op != 0
        num[rows, a] = np.where(live, r_num, an)
        den[rows, a] = np.where(live, r_den, ad)
    value_num, value_den = num[:, 0], den[:, 0]
    value_den = np.where(err, 1, value_den)
    neg = value_den < 0
    value_num, value_den = np.where(neg, -value_num, value_num), np.abs(value_den)
    if (value_den != 1).any():
        g = np.gcd(value_num, value_den)
        value_num, value_den = value_num // g, value_den // g
    return value_num, value_den, err


class ProgramScorer:
    """The incremental verifier of a native vector Countdown env when the setting has a
    :class:`ProgramTable`: the same role (and attributes ``tokens``, ``pos``, ``numbers``, ``targets``)
    as :class:`rlvr_env.batch_verify.StackMachine`, at one table lookup per step.

    :meth:`feed` records each row's token and moves its shape state; :meth:`finish` scores the ending
    rows: answers inside the masks' language by their programs (:func:`evaluate`), every other row by
    :func:`~rlvr_env.batch_verify.batch_verify` on its tokens. Truncated rows get no reward and no value (``Task.score``'s rule).
    """

    def __init__(
        self, programs: ProgramTable, table: TokenTable, grammar: Grammar, num_rows: int, max_length: int,
        weights: RewardWeights,
    ) -> None:
        n = programs.n
        if n * MAX_NUMBER_DIGITS + max_length > MAX_TEXT_CHARS:
            raise ValueError(f"answers of {max_length} tokens over {n} numbers could exceed the text limit")
        self.programs, self.table, self.grammar, self.weights = programs, table, grammar, weights
        self.num_rows = b = num_rows
        self.max_length = max_length
        self._bound = programs.bound()
        self._largest = 0  # largest prompt number seen; above the bound, rows are checked one by one
        self._vocab = len(table.kinds)
        self._next = programs.next.ravel()
        self._tok = np.zeros((b, max_length + 1), dtype=np.int64)  # last column: writes of idle rows
        self.tokens = self._tok[:, :max_length]  # (B, L) view
        self._tok_flat = self._tok.ravel()
        self._tok_base = np.arange(b) * (max_length + 1)
        self.pos = np.zeros(b, dtype=np.int64)  # (B,)
        self.state = np.zeros(b, dtype=np.int64)  # (B,) shape state
        self.numbers = np.zeros((b, n), dtype=np.int64)  # (B, N)
        self.targets = np.zeros(b, dtype=np.int64)  # (B,)

    def set_prompts(self, rows: np.ndarray, numbers: np.ndarray, targets: np.ndarray) -> None:
        """Start fresh answers on ``rows`` (k,) for prompts ``numbers`` (k, N), ``targets`` (k,)."""
        self.numbers[rows] = numbers
        self.targets[rows] = targets
        self.pos[rows] = 0
        self.state[rows] = START
        if len(rows):
            self._largest = max(self._largest, int(np.max(numbers)))

    def feed(self, tokens: np.ndarray, active: np.ndarray, all_active: bool = False) -> None:
        """Append ``tokens`` (B,) to the rows where ``active`` (B,) is True (``all_active``: all are)."""
        if all_active:
            self._tok_flat[self._tok_base + self.pos] = tokens
            self.pos += 1
            self.state = self._next[self.state * self._vocab + tokens]
            return
        self._tok_flat[self._tok_base + np.where(active, self.pos, self.max_length)] = tokens
        self.pos += active
        self.state = np.where(active, self._next[self.state * self._vocab + tokens], self.state)

    def finish(self, rows: np.ndarray, truncated: np.ndarray, distinct: np.ndarray) -> BatchVerdict:
        """Score the answers on ``rows`` (k,); ``truncated`` (k,) marks rows cut off at the maximum
        length, ``distinct`` (k,) rows whose answer used no slot twice (the env's mask automaton was
        not in its dead state before the last token). An answer is inside the masks' language when its
        shape state accepts (every token allowed, slots renamed) and its slots are distinct."""
        k = len(rows)
        legal = self.programs.accept[self.state[rows]] & distinct
        correct = np.zeros(k, dtype=bool)
        well_formed = np.zeros(k, dtype=bool)
        value_num = np.zeros(k, dtype=np.int64)
        value_den = np.zeros(k, dtype=np.int64)
        fallback = np.zeros(k, dtype=bool)
        fast = legal & ~truncated
        if self._largest > self._bound:
            fast &= self.numbers[rows].max(axis=1) <= self._bound
        big: dict[int, Fraction] = {}
        if fast.any():
            r = rows[fast]
            states = self.state[r]
            col = r[:, None]
            slots = self.tokens[col, self.programs.operands[states]]  # (f, N) slot ids (= token ids)
            num, den, err = evaluate(self.programs, states, self.numbers[col, slots],
                                     self.grammar.integer_division)
            ok = ~err  # inside the masks' language the number-use rule holds by construction
            well_formed[fast] = ok
            value_num[fast] = np.where(ok, num, 0)
            value_den[fast] = np.where(ok, den, 0)
            correct[fast] = ok & (den == 1) & (num == self.targets[r])
        has_value = well_formed.copy()
        slow = ~fast & ~truncated
        if slow.any():
            idx = np.flatnonzero(slow)
            r = rows[idx]
            verdict = batch_verify(self.tokens[r], self.numbers[r], self.targets[r], table=self.table,
                                   grammar=self.grammar, weights=self.weights, lengths=self.pos[r])
            correct[idx] = verdict.correct
            well_formed[idx] = verdict.well_formed
            has_value[idx] = verdict.has_value
            value_num[idx] = verdict.value_num
            value_den[idx] = verdict.value_den
            fallback[idx] = verdict.fallback
            big = {int(idx[j]): value for j, value in verdict.big_values.items()}
        out = assemble_verdict(self.weights, correct, well_formed, has_value, value_num, value_den, fallback)
        out.big_values.update(big)
        return out
