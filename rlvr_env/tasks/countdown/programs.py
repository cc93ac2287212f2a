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
are scored by the general :func:`rlvr_env.tasks.expression.batch_verify.batch_verify` instead; both agree with
:func:`rlvr_env.verify` (tests check the vector env against the single env in lockstep).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rlvr_env.tasks.countdown.masks import MaskRules, PrefixStates, advance, masks_of
from rlvr_env.tasks.expression.token_kinds import ADD, DIV, EOS, LPAREN, MUL, NUM, RPAREN, SUB
from rlvr_env.tasks.expression.tokens import TokenTable
from rlvr_env.tasks.expression.verifier import MAX_NUMBER_DIGITS, MAX_TEXT_CHARS, Grammar

__all__ = ["ProgramTable", "ValueTable", "by_programs", "cached_table", "cached_values", "evaluate",
           "count_shapes", "MAX_SHAPES", "MAX_VALUES"]

#: Settings whose shape trie would have more states than this score with the incremental evaluator.
MAX_SHAPES = 100_000
START, DEAD = 0, 1  # the empty answer; the absorbing state of answers outside the masks' language
_PRECEDENCE = {ADD: 1, SUB: 1, MUL: 2, DIV: 2}
#: By op kind (0: a step a program does not use): the sign of ``bn * ad`` in the numerator.
_ADDEND = np.array([0 if k in (MUL, DIV) else -1 if k == SUB else 1 for k in range(DIV + 1)], dtype=np.int64)


@dataclass(frozen=True)
class ProgramTable:
    """The shape trie of one Countdown setting (see the module docstring).

    Attributes:
        next: (S, V) int64 state after each token (state 0: the empty answer, 1: dead, absorbing).
        accept: (S,) bool: the state is a complete answer followed by EOS.
        operands: (S, N) int64 token position of each operand register (unused registers: the first's).
        left, right, ops: (S, N-1) int64 register program; unused steps have ``ops`` 0 and registers N.
        counts: (S,) int64 operands of each accepting state's answer (0 elsewhere).
        n: slots (N).
    """

    next: np.ndarray
    accept: np.ndarray
    operands: np.ndarray
    left: np.ndarray
    right: np.ndarray
    ops: np.ndarray
    counts: np.ndarray
    n: int

    @property
    def num_states(self) -> int:
        return len(self.accept)

    @cached_property
    def walk(self) -> np.ndarray:
        """(S * (V + 1),) the transitions for reading whole rows, flat and premultiplied: from state
        ``s`` (held as ``s * (V + 1)``) token ``t`` leads to ``walk[s * (V + 1) + t]``, again a
        multiple of V + 1. Token id V (past a row's end) stays put, and accepting states are absorbing
        (a row's tokens after its EOS are not read), so a row walks to its verdict column by column."""
        s, v = self.next.shape
        out = np.concatenate([self.next, np.arange(s)[:, None]], axis=1)  # (S, V + 1)
        out[self.accept] = np.flatnonzero(self.accept)[:, None]
        return (out * (v + 1)).ravel()

    def bound(self) -> int:
        """The largest operand magnitude M with ``2**(N-1) * M**N < 2**63`` (int64 stays exact)."""
        return self._bound

    @cached_property
    def _bound(self) -> int:
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
        parsers: list[tuple]
        parsers = [((), (), (), ())]  # (operator stack, operand stack, program, operand positions)
        layer_ids = [START]
        total = 2
        for length in range(rules.max_length):
            masks = masks_of(rules, layer, np.full(len(layer_ids), length))  # (k, V)
            used = layer.used.sum(axis=1)  # (k,) the canonical next slot
            parents: list[int] = []
            toks: list[int] = []
            child_parsers: list[tuple] = []
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
        left = np.full((total, steps), n, dtype=np.int64)  # unused steps: the scratch register n
        right = np.full((total, steps), n, dtype=np.int64)
        ops = np.zeros((total, steps), dtype=np.int64)
        counts = np.zeros(total, dtype=np.int64)
        for state, (positions, program) in programs.items():
            accept[state] = True
            counts[state] = len(positions)
            operands[state] = positions[0]  # unused registers read the first operand (harmless)
            operands[state, : len(positions)] = positions
            for step, (a, b, op) in enumerate(program):
                left[state, step], right[state, step], ops[state, step] = a, b, op
        return cls(np.stack(next_rows).astype(np.int64), accept, operands, left, right, ops, counts, n)


_TABLES: dict[tuple[object, ...], ProgramTable | None] = {}


def cached_table(rules: MaskRules) -> ProgramTable | None:
    """:meth:`ProgramTable.build` once per setting and process (building takes up to a second for N = 4,
    and envs and verifier calls repeat settings)."""
    key = rules.key()
    if key not in _TABLES:
        _TABLES[key] = ProgramTable.build(rules)
    return _TABLES[key]


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
        st = PrefixStates(np.array([k[0] for k in keys], dtype=bool),
                          np.array([k[1] for k in keys], dtype=np.int64),
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
    k, n = operands.shape
    regs = n + 1  # register n is scratch: steps a program does not use write there
    base = np.arange(k)[:, None] * regs  # (k, 1)
    ops = table.ops.take(states, axis=0)  # (k, N-1)
    a_idx = table.left.take(states, axis=0) + base  # (k, N-1) flat register indices
    b_idx = table.right.take(states, axis=0) + base
    num = np.zeros((k, regs), dtype=np.int64)
    num[:, :n] = operands
    num = num.ravel()  # (k * regs,)
    den = np.ones(k * regs, dtype=np.int64)
    err = np.zeros(k, dtype=bool)
    # (k, N-1) per step: the op's flags, found once for all steps (the loop runs over columns)
    is_mul, is_div, addend = (ops == MUL).T, (ops == DIV).T, _ADDEND[ops].T
    for step in range(ops.shape[1]):
        a, b = a_idx[:, step], b_idx[:, step]
        an, ad, bn, bd = num[a], den[a], num[b], den[b]
        # a +- b = (an bd +- bn ad) / (ad bd), a * b = (an bn) / (ad bd), a / b = (an bd) / (ad bn)
        num[a] = an * np.where(is_mul[step], bn, bd) + addend[step] * bn * ad
        r_den = ad * np.where(is_div[step], bn, bd)
        den[a] = r_den
        # A zero denominator first appears where a step divides by zero (operands start at den 1, and a
        # product has a zero factor only after an earlier zero): the same rows as is_div & (bn == 0).
        err |= r_den == 0
        if integer_division:
            err |= is_div[step] & (num[a] % np.where(r_den == 0, 1, r_den) != 0)
    value_num, value_den = num[base[:, 0]], den[base[:, 0]]
    value_den = np.where(err, 1, value_den)
    neg = value_den < 0
    if neg.any():
        value_num, value_den = np.where(neg, -value_num, value_num), np.abs(value_den)
    if (value_den != 1).any():
        g = np.gcd(value_num, value_den)
        value_num, value_den = value_num // g, value_den // g
    return value_num, value_den, err


#: Value tables with more entries than this are not built (Countdown-4 over 1..10 would have 3.6M).
MAX_VALUES = 1 << 20


@dataclass(frozen=True)
class ValueTable:
    """:func:`evaluate` of every distinct program of a :class:`ProgramTable` on every operand tuple of a
    number range ``[lo, hi]`` (W = hi - lo + 1 values), so a vector env scores finished answers by one
    gather (docs/speed.md). Entry ``offset[state] + sum((operand_i - lo) * W**(N-1-i))``; the values are
    :func:`evaluate`'s own, so both agree exactly (a test checks it)."""

    offset: np.ndarray  # (S,) int64: program id * W**N of each accepting state (0 elsewhere)
    num: np.ndarray  # (P * W**N,) int64 reduced numerators, 0 where err
    den: np.ndarray  # (P * W**N,) int64 denominators, > 0, and 0 where err
    err: np.ndarray  # (P * W**N,) bool: no value (division by zero, inexact integer division)
    lo: int
    powers: np.ndarray  # (N,) int64 W**(N-1-i)

    def lookup(self, states: np.ndarray, operands: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :func:`evaluate` for accepting ``states`` (k,) on ``operands`` (k, N) within ``[lo, hi]``,
        except that rows without a value (``err``) read 0 / 0 (the vector env's info convention)."""
        flat = self.offset[states] + (operands - self.lo) @ self.powers
        return self.num[flat], self.den[flat], self.err[flat]

    @classmethod
    def build(cls, table: ProgramTable, number_range: tuple[int, int], integer_division: bool,
              max_entries: int = MAX_VALUES) -> ValueTable | None:
        """None when the table would exceed ``max_entries`` or ``hi`` exceeds :meth:`ProgramTable.bound`
        (where :func:`evaluate` itself is not exact)."""
        lo, hi = number_range
        n, w = table.n, hi - lo + 1
        if hi > table.bound() or lo < 1:
            return None
        accepting = np.flatnonzero(table.accept)
        program = np.concatenate([table.left, table.right, table.ops], axis=1)[accepting]
        _, first, inverse = np.unique(program, axis=0, return_index=True, return_inverse=True)
        if len(first) * w**n > max_entries:
            return None
        operands = np.indices((w,) * n).reshape(n, -1).T + lo  # (W**N, N), row i = the digits of i
        states = np.repeat(accepting[first], w**n)
        num, den, err = evaluate(table, states, np.tile(operands, (len(first), 1)), integer_division)
        offset = np.zeros(table.num_states, dtype=np.int64)
        offset[accepting] = inverse.ravel() * w**n
        powers = w ** np.arange(n - 1, -1, -1, dtype=np.int64)
        return cls(offset, np.where(err, 0, num), np.where(err, 0, den), err, lo, powers)


_VALUES: dict[tuple[int, tuple[int, int], bool], tuple[ProgramTable, ValueTable | None]] = {}


def cached_values(
    table: ProgramTable, number_range: tuple[int, int], integer_division: bool
) -> ValueTable | None:
    """:meth:`ValueTable.build` once per program table (held by identity), number range and division rule."""
    key = (id(table), (number_range[0], number_range[1]), integer_division)
    hit = _VALUES.get(key)
    if hit is None or hit[0] is not table:
        hit = _VALUES[key] = (table, ValueTable.build(table, number_range, integer_division))
    return hit[1]


def by_programs(
    tokens: np.ndarray, ends: np.ndarray, numbers: np.ndarray, targets: np.ndarray, table: TokenTable,
    grammar: Grammar, read_all: bool,
) -> tuple[np.ndarray, ...] | None:
    """The batch verifier's shortcut (``batch_verify(..., programs=by_programs)``): score the rows of a slot
    vocabulary (Countdown's) that are answers inside its masks' language (a
    grammatical, complete answer using each slot at most once) by the programs of their shapes
    (:mod:`rlvr_env.tasks.countdown.programs`): one table lookup per column, then a few operations per
    operator (``read_all``: no ``lengths`` were given, rows end at EOS or L). Returns those rows and
    their correct, well-formed, value numerator and denominator; None
    when the vocabulary or setting has no program table (every row then takes the general path)."""
    b, length = tokens.shape
    rules = MaskRules.of_vocab(table.kinds, table.slots, grammar, length + 1)  # + 1: room for EOS
    if rules is None or (rules.exactly_once and numbers.shape[1] != rules.n):
        return None
    if rules.n * MAX_NUMBER_DIGITS + length > MAX_TEXT_CHARS:
        return None  # the text-length rule could fire; it is not tracked here
    programs = cached_table(rules)
    if programs is None:
        return None
    width = len(table.kinds) + 1  # token id V: past the row's end, the state stays
    if read_all:  # every row ends at its first EOS or at L; accepting states absorb what follows EOS
        cols = np.ascontiguousarray(tokens.T, dtype=np.int64)  # (L, B)
    else:
        cols = np.where(np.arange(length) < ends[:, None], tokens, width - 1).T.astype(np.int64, order="C")
    walk = programs.walk
    state = np.zeros(b, dtype=np.int64)  # premultiplied by width
    for col in cols[: int(ends.max(initial=0))]:
        state = walk[state + col]
    state = walk[state + rules.eos_id] // width  # the answer ends here (a no-op after its EOS)
    rows = np.flatnonzero(programs.accept[state])
    states = state[rows]
    flat = rows[:, None] * length + programs.operands[states]  # (k, N) flat index of each operand
    slots = tokens.ravel()[flat].astype(np.int64)  # (k, N) slot of each operand
    operands = numbers.ravel()[slots + rows[:, None] * numbers.shape[1]]
    # Each slot at most once, and operands within the exact bound: a loop over the N columns (a
    # reduction along a short row axis is several times slower in NumPy).
    counts = programs.counts[states]
    seen = np.zeros(len(rows), dtype=np.int64)  # bit set of the slots read so far
    keep = np.ones(len(rows), dtype=bool)
    largest = operands[:, 0]
    for j in range(rules.n):
        bit = np.where(j < counts, 1 << slots[:, j], 0)
        keep &= (seen & bit) == 0
        seen |= bit
        largest = np.maximum(largest, operands[:, j])  # unused registers repeat the first operand
    keep &= largest <= min(programs.bound(), 10**MAX_NUMBER_DIGITS - 1)
    rows, states, operands = rows[keep], states[keep], operands[keep]
    num, den, err = evaluate(programs, states, operands, grammar.integer_division)
    ok = ~err  # inside the masks' language the number-use rule holds by construction
    value_num, value_den = np.where(ok, num, 0), np.where(ok, den, 0)
    return rows, ok & (den == 1) & (num == targets[rows]), ok, value_num, value_den
