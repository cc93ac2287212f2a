"""Countdown's prompt generator: random expression trees over candidate numbers, by arithmetic or by table.

A candidate prompt is N numbers and N-1 random merges (pick item i, another item j, an operator); the
merged expression's value is the target when it is an integer in ``target_range`` (and, without
parentheses or with a short ``max_length``, when its text fits). :func:`draw_picks` makes the generator
calls (the only random draws; their number and order fix the stream) and :func:`merge` does the exact
arithmetic on them. For small settings (few numbers, a narrow number range) :class:`DrawTable` holds
:func:`merge`'s verdict for *every* (numbers, picks) combination, so the vector env's prompt refill
(thousands of candidates per call) is one gather instead of ~20 array operations per merge
(docs/speed.md). The table is :func:`merge` applied to every combination, so both paths agree exactly (a
test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rlvr_env.tasks.expression.token_kinds import ADD, DIV, MUL, SUB

__all__ = ["ATOM", "ADDITIVE", "MULTIPLICATIVE", "DrawRules", "DrawTable", "Picks", "draw_picks", "merge",
           "history_of", "raw_history", "resolve_history", "cached_draw_table", "MAX_DRAW_TABLE"]

#: Top operator classes of an item's minimal-parenthesis text.
ATOM, ADDITIVE, MULTIPLICATIVE = 0, 1, 2
_LIMIT = 1 << 31  # generation rejects intermediate values this large (int64 products stay exact)
#: By op kind: the sign of ``b_n * a_d`` in a merged numerator (0 for ``*`` and ``/``).
_ADDEND = np.array([0 if k in (MUL, DIV) else -1 if k == SUB else 1 for k in range(DIV + 1)], dtype=np.int64)
#: Settings with more (numbers, picks) combinations than this draw by arithmetic (e.g. N >= 4 over 1..10,
#: N = 3 over more than 13 numbers): the build's temporaries grow with it (~100 bytes per entry).
MAX_DRAW_TABLE = 1 << 19

#: One merge's raw draws, each (k,) int64: item i in [0, m), the other item's raw index in [0, m-1)
#: (``j = raw + (raw >= i)``), and the operator's index into ``DrawRules.op_kinds``.
Picks = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class DrawRules:
    """What prompt generation depends on (hashable: tables are cached by it)."""

    n: int
    number_range: tuple[int, int]
    target_range: tuple[int, int]
    op_kinds: tuple[int, ...]  # allowed operator kinds, in vocabulary order
    parentheses: bool
    integer_division: bool
    max_length: int


def draw_picks(rng: np.random.Generator, k: int, rules: DrawRules) -> Picks:
    """The generator calls of k candidates' merges, in stream order (i, j, op per merge, N-1 merges)."""
    out: Picks = []
    for m in range(rules.n, 1, -1):
        i = rng.integers(m, size=k)
        j_raw = rng.integers(m - 1, size=k)
        out.append((i, j_raw, rng.integers(len(rules.op_kinds), size=k)))
    return out


def _resolve(picks: Picks, rules: DrawRules) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(i, j, op kind) per merge from the raw draws."""
    kinds = np.array(rules.op_kinds, dtype=np.int64)
    return [(i, j_raw + (j_raw >= i), kinds[o]) for i, j_raw, o in picks]


def history_of(picks: Picks, rules: DrawRules) -> np.ndarray:
    """(k, N-1, 3) int64: (i, j, op kind) of each merge (``CountdownTask.solution_tokens`` reads it)."""
    return resolve_history(raw_history(picks), rules)


def raw_history(picks: Picks) -> np.ndarray:
    """(k, N-1, 3) int64: the raw draws of each merge, stacked (:func:`resolve_history` resolves them)."""
    k = len(picks[0][0])
    return np.stack([d for merge_ in picks for d in merge_], axis=1).reshape(k, len(picks), 3)


def resolve_history(raw: np.ndarray, rules: DrawRules) -> np.ndarray:
    """(k, N-1, 3) (i, j, op kind) from stacked raw draws (k, N-1, 3), in place."""
    raw[:, :, 1] += raw[:, :, 1] >= raw[:, :, 0]
    raw[:, :, 2] = np.array(rules.op_kinds, dtype=np.int64)[raw[:, :, 2]]
    return raw


def merge(numbers: np.ndarray, picks: Picks, rules: DrawRules) -> tuple[np.ndarray, np.ndarray]:
    """The expression trees of candidates ``numbers`` (k, N) under ``picks``: value (k,) and whether the
    candidate is usable (an integer value in ``target_range`` whose minimal-parenthesis text fits, no
    division by zero; ``value`` is meaningful only there).

    The checks that cannot fail in a setting are skipped (same result): the 31-bit operand bound when
    ``2**(N-2) * hi**(N-1)`` stays below it (an operand over m <= N-1 numbers has unreduced numerator and
    denominator at most ``2**(m-1) * hi**m``), and the text length and parenthesis rules when parentheses
    are allowed and ``max_length >= 4N-4`` (the longest minimal-parenthesis text over N numbers, plus
    EOS)."""
    k, n = numbers.shape
    hi = rules.number_range[1]
    check_limit = (1 << max(n - 2, 0)) * hi ** (n - 1) >= _LIMIT
    shape = not rules.parentheses or rules.max_length < 4 * n - 4
    base = np.arange(k) * n  # (k,) flat offset of each row's items
    num = numbers.astype(np.int64).ravel()  # (k * N,) items: values num / den, row-major
    den = np.ones(k * n, dtype=np.int64)
    length = np.ones(k * n, dtype=np.int64)  # tokens of each item's minimal-parenthesis text
    cls = np.zeros(k * n, dtype=np.int64)  # top operator class of each item
    ok = np.ones(k, dtype=bool)
    new_len = length[:k]
    for stage, (m, (i, j, op)) in enumerate(zip(range(n, 1, -1), _resolve(picks, rules))):
        fi, fj = base + i, base + j
        a_n, b_n = num[fi], num[fj]
        is_div = op == DIV
        # a +- b = (a_n b_d +- b_n a_d) / (a_d b_d), a * b = a_n b_n / (a_d b_d),
        # a / b = a_n b_d / (a_d b_n). Fractions stay unreduced here (gcd is the slow part); the
        # bound keeps products exact.
        if stage == 0:  # both items are prompt numbers: den 1, value >= 1 (no zero divisor) < _LIMIT
            r_n = a_n * np.where(op == MUL, b_n, 1) + _ADDEND[op] * b_n
            r_d = np.where(is_div, b_n, 1)
        else:
            a_d, b_d = den[fi], den[fj]
            if check_limit:
                ok &= (np.abs(a_n) | np.abs(a_d) | np.abs(b_n) | np.abs(b_d)) < _LIMIT
            r_n = a_n * np.where(op == MUL, b_n, b_d) + _ADDEND[op] * b_n * a_d
            r_d = a_d * np.where(is_div, b_n, b_d)
            zero = r_d == 0  # division by zero
            ok &= ~zero
            r_d[zero] = 1
        if rules.integer_division:
            ok &= ~is_div | (r_n % r_d == 0)
        moved = [(num, r_n), (den, r_d)]
        if shape:
            additive = (op == ADD) | (op == SUB)
            c_a, c_b = cls[fi], cls[fj]
            paren_a = ~additive & (c_a == ADDITIVE)
            paren_b = (
                ((op == MUL) & (c_b == ADDITIVE))
                | (is_div & (c_b != ATOM))
                | ((op == SUB) & (c_b == ADDITIVE))
            )
            if not rules.parentheses:
                ok &= ~paren_a & ~paren_b
            new_len = length[fi] + length[fj] + 1 + 2 * (paren_a.astype(np.int64) + paren_b)
            moved += [(length, new_len), (cls, np.where(additive, ADDITIVE, MULTIPLICATIVE))]
        if m > 2:  # the merged item replaces the first, the last item moves into the second's place
            first, second, last = np.minimum(fi, fj), np.maximum(fi, fj), base + (m - 1)
            for arr, new in moved:
                arr[second] = arr[last]  # drops the item at `second`; a no-op when second is last
                arr[first] = new
    # after the last merge (items 0 and 1) the merged item is the whole expression
    ok &= r_n % r_d == 0
    value = r_n // r_d  # exact where ok
    tlo, thi = rules.target_range
    ok &= (value >= tlo) & (value <= thi)
    if shape:
        ok &= new_len + 1 <= rules.max_length
    return value, ok


def _pick_sizes(rules: DrawRules) -> list[int]:
    """The ranges of the raw draws, in stream order: m, m - 1, operators, per merge."""
    return [size for m in range(rules.n, 1, -1) for size in (m, m - 1, len(rules.op_kinds))]


@dataclass(frozen=True)
class DrawTable:
    """:func:`merge` of every (numbers, picks) combination of one setting, flat: entry
    ``index * P + code`` where ``index`` is the numbers' tuple index (base W digits, first number
    most significant, as :func:`rlvr_env.tasks.countdown.split.tuple_index`) and ``code`` the picks'
    mixed-radix code (first draw most significant; P codes). One int32 per entry: the target minus
    ``target_range``'s low end where the candidate is usable, -1 where it is not."""

    packed: np.ndarray  # (W**N * P,) int32
    low: int  # target_range's low end
    sizes: tuple[int, ...]  # the raw draws' ranges, in stream order
    picks: int  # P: pick combinations, the product of sizes

    def lookup(self, index: np.ndarray, picks: Picks) -> tuple[np.ndarray, np.ndarray]:
        """Value and usable flag (as :func:`merge`) of candidates with tuple ``index`` (k,) and picks."""
        flat = index
        for size, d in zip(self.sizes, (d for merge_ in picks for d in merge_)):
            flat = flat * size + d
        packed = self.packed[flat]
        return np.add(packed, self.low, dtype=np.int64), packed >= 0


@lru_cache(maxsize=16)
def cached_draw_table(rules: DrawRules) -> DrawTable | None:
    """The :class:`DrawTable` of ``rules``, built once per setting and process; None when it would have
    more than :data:`MAX_DRAW_TABLE` entries."""
    lo, hi = rules.number_range
    w, n = hi - lo + 1, rules.n
    sizes = _pick_sizes(rules)
    p = int(np.prod(sizes))
    if w**n * p > MAX_DRAW_TABLE:
        return None
    numbers = np.indices((w,) * n).reshape(n, -1).T + lo  # (W**N, N), row i = the digits of i
    codes = np.indices(sizes).reshape(len(sizes), -1)  # (draws, P), column c = the digits of code c
    every = np.repeat(numbers, p, axis=0)  # (W**N * P, N)
    tiled = np.tile(codes, (1, w**n))  # (draws, W**N * P)
    picks: Picks = [(tiled[3 * s], tiled[3 * s + 1], tiled[3 * s + 2]) for s in range(n - 1)]
    value, ok = merge(every, picks, rules)
    low, high = rules.target_range  # usable values lie in it: high - low < 2**20 fits int32
    packed = np.where(ok, np.clip(value, low, high) - low, -1).astype(np.int32)
    return DrawTable(packed, low, tuple(sizes), p)
