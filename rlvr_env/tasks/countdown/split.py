"""Countdown's deterministic train / held-out split: a hash of each prompt's number multiset.

:func:`multiset_hash` is the rule. :func:`held_out` applies it, by one table lookup per row when the
setting's number range is small (every ordered tuple of N numbers indexed, at most
``_MAX_TABLE`` entries): the vector env's prompt draw tests thousands of candidates per refill, and the
sort and hash were a sixth of it. The table is the rule applied to every tuple, so both paths agree
exactly (a test checks it).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["HELD_OUT_BUCKETS", "held_out", "held_out_one", "multiset_hash", "tuple_index"]

#: One number multiset in this many is held out (``split="test"``): 20%.
HELD_OUT_BUCKETS = 5
_MAX_TABLE = 1 << 18  # tuples of a setting's numbers indexed by the lookup table, at most


def multiset_hash(numbers: np.ndarray) -> np.ndarray:
    """(k,) uint64 hash of each row's *sorted* numbers (k, N): equal for every order of one multiset.

    An FNV-1a-style fold followed by the splitmix64 finaliser, in wrapping uint64 arithmetic, so the
    split is a fixed function of the numbers (no RNG, no Python ``hash`` randomisation).
    """
    x = np.sort(np.asarray(numbers, dtype=np.int64), axis=1).astype(np.uint64)  # (k, N)
    h = np.full(x.shape[0], 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in x.T:
            h = (h ^ col) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def _rule(numbers: np.ndarray) -> np.ndarray:
    return multiset_hash(numbers) % np.uint64(HELD_OUT_BUCKETS) == 0


@lru_cache(maxsize=16)
def _table(lo: int, hi: int, n: int) -> np.ndarray:
    """(W**N,) bool: the rule for every tuple of N numbers in [lo, hi], W = hi - lo + 1, indexed by
    the tuple's digits in base W (first number most significant)."""
    w = hi - lo + 1
    digits = np.indices((w,) * n).reshape(n, -1).T + lo  # (W**N, N), row i = the digits of i
    return _rule(digits)


def tuple_index(
    numbers: np.ndarray, number_range: tuple[int, int], limit: int = _MAX_TABLE, in_range: bool = False
) -> np.ndarray | None:
    """(k,) each row of ``numbers`` (k, N) as a number in base W = hi - lo + 1 (its digits the numbers
    minus lo, first number most significant), or None when ``W**N > limit`` or a number lies outside
    ``number_range`` (or k is 0). ``in_range``: the caller drew the numbers from the range (not checked
    again)."""
    nums = np.asarray(numbers, dtype=np.int64)
    k, n = nums.shape
    lo, hi = number_range
    w = hi - lo + 1
    if k == 0 or w**n > limit or not in_range and (int(nums.min()) < lo or int(nums.max()) > hi):
        return None
    index = nums[:, 0] - lo
    for col in range(1, n):
        index = index * w + (nums[:, col] - lo)
    return index


def held_out(
    numbers: np.ndarray, number_range: tuple[int, int], index: np.ndarray | None = None
) -> np.ndarray:
    """(k,) bool: True where the multiset of a row of ``numbers`` (k, N) is held out. Rows inside
    ``number_range`` are looked up in the setting's table when it is small (``index``: their
    :func:`tuple_index`, when the caller has it already); others are hashed."""
    nums = np.asarray(numbers, dtype=np.int64)
    if (number_range[1] - number_range[0] + 1) ** nums.shape[1] > _MAX_TABLE:
        return _rule(nums)
    if index is None:
        index = tuple_index(nums, number_range)
        if index is None:
            return _rule(nums)
    return _table(number_range[0], number_range[1], nums.shape[1])[index]


def held_out_one(numbers: tuple[int, ...], number_range: tuple[int, int]) -> bool:
    """:func:`held_out` for one prompt's numbers, in plain Python where the table applies (a GRPO
    iteration asks for a handful of prompts' splits, where NumPy's per-call overhead is the cost)."""
    lo, hi = number_range
    w, n = hi - lo + 1, len(numbers)
    if w**n > _MAX_TABLE or not all(lo <= x <= hi for x in numbers):
        return bool(_rule(np.array([numbers], dtype=np.int64))[0])
    index = 0
    for x in numbers:
        index = index * w + (x - lo)
    return bool(_table(lo, hi, n)[index])
