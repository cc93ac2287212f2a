"""Countdown's prompt features (``observation="bits"``, ``"relations"``, ``"lookahead"``): what a policy
that does not read tokens sees of a prompt, as named segments of one float32 vector."""

from __future__ import annotations

import numpy as np

__all__ = ["CountdownFeatures", "OBSERVATIONS"]

_MAX_CODE_TABLE = 4096  # number / target range widths encoded by table lookup, at most
#: Prompt encodings (``observation=``): "bits" (numbers and target as scaled values and binary codes)
#: or "relations" (those plus one-hot numbers and target and the pair residuals; see
#: :meth:`CountdownFeatures._relations`).
OBSERVATIONS = ("bits", "relations", "lookahead")
_PAIR_RESULTS = ("a+b", "a*b", "a-b", "b-a", "a/b", "b/a")
_RESIDUALS = ("r+c", "r-c", "c-r", "r*c", "r/c", "c/r")


def _pair_results(a: np.ndarray, b: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The integer results of combining a and b (k,) as in ``_PAIR_RESULTS``, each with a (k,) flag that
    is False where the result is not an integer (inexact division)."""
    true = np.ones(a.shape, dtype=bool)
    a_div = (b != 0) & (a % np.where(b == 0, 1, b) == 0)
    b_div = (a != 0) & (b % np.where(a == 0, 1, a) == 0)
    return [(a + b, true), (a * b, true), (a - b, true), (b - a, true),
            (np.where(a_div, a // np.where(b == 0, 1, b), 0), a_div),
            (np.where(b_div, b // np.where(a == 0, 1, a), 0), b_div)]


def _residuals(r: np.ndarray, t: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The integer c that makes ``r op c`` (or ``c op r``) equal t, as in ``_RESIDUALS``, with flags."""
    true = np.ones(r.shape, dtype=bool)
    safe_r = np.where(r == 0, 1, r)
    safe_t = np.where(t == 0, 1, t)
    div_r = (r != 0) & (t % safe_r == 0)  # t = r * c
    div_t = (t != 0) & (r % safe_t == 0)  # t = r / c  ->  c = r / t
    return [(t - r, true), (r - t, true), (t + r, true),
            (np.where(div_r, t // safe_r, 0), div_r),
            (np.where(div_t, r // safe_t, 0), div_t),
            (t * r, r != 0)]


def _bits(values: np.ndarray, width: int) -> np.ndarray:
    """(..., width) float32 binary code of non-negative ints, least significant bit first."""
    return ((values[..., None] >> np.arange(width)) & 1).astype(np.float32)


class CountdownFeatures:
    """The feature encoder of one Countdown setting: :attr:`layout` names the segments of the vector
    :meth:`encode_arrays` writes (see :class:`rlvr_env.CountdownEnv` for the table)."""

    def __init__(self, n: int, number_range: tuple[int, int], target_range: tuple[int, int],
                 observation: str) -> None:
        self.n_numbers = n
        self.number_range, self.target_range = number_range, target_range
        lo, hi = self.number_range
        tlo, thi = self.target_range
        self._number_bits = max(1, (hi - lo).bit_length())
        self._target_bits = max(1, (thi - tlo).bit_length())
        nb, tb = self._number_bits, self._target_bits
        self.layout = {
            "numbers": slice(0, n),
            "number_bits": slice(n, n + n * nb),
            "target": slice(n + n * nb, n + n * nb + 1),
            "target_bits": slice(n + n * nb + 1, n + n * nb + 1 + tb),
        }
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation={observation!r} is not one of {OBSERVATIONS}")
        self.observation = observation
        if observation in ("relations", "lookahead"):
            width = hi - lo + 1
            if width > 64 or thi - tlo + 1 > 1024:
                raise ValueError(
                    f"observation='relations' one-hot encodes numbers and targets: number_range="
                    f"{self.number_range} must span at most 64 values and target_range={self.target_range}"
                    " at most 1024"
                )
            pairs = n * (n - 1) // 2
            end = self.layout["target_bits"].stop
            for name, size in (("number_onehot", n * width), ("target_onehot", thi - tlo + 1),
                               ("pair_residuals", pairs * len(_PAIR_RESULTS) * len(_RESIDUALS) * width)):
                self.layout[name] = slice(end, end + size)
                end += size
            if observation == "lookahead":
                for name, size in (("number_hits", n), ("pair_hits", pairs * len(_PAIR_RESULTS)),
                                   ("pair_matches", pairs * len(_PAIR_RESULTS) * len(_RESIDUALS) * (n - 2))):
                    self.layout[name] = slice(end, end + size)
                    end += size

    @property
    def prompt_dim(self) -> int:
        return max(s.stop for s in self.layout.values())

    def encode_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, prompt_dim) float32 encodings of prompts given as numbers (k, N) and targets (k,)."""
        lo, hi = self.number_range
        tlo, thi = self.target_range
        k = numbers.shape[0]
        rel = np.asarray(numbers, dtype=np.int64) - lo  # (k, N)
        trel = np.asarray(targets, dtype=np.int64) - tlo  # (k,)
        out = np.empty((k, self.prompt_dim), dtype=np.float32)
        tables = self._code_tables()
        if tables is not None and k and rel.min() >= 0 and rel.max() <= hi - lo and trel.min() >= 0 \
                and trel.max() <= thi - tlo:  # a gather from the codes of every value (same floats)
            scaled, bits, target = tables
            out[:, self.layout["numbers"]] = scaled[rel]
            out[:, self.layout["number_bits"]] = bits[rel].reshape(k, -1)
            target_segment = slice(self.layout["target"].start, self.layout["target_bits"].stop)
            out[:, target_segment] = target.take(trel, axis=0)
        else:
            self._codes(rel, trel, out)
        if self.observation in ("relations", "lookahead"):
            self._relations(numbers, targets, out)
        if self.observation == "lookahead":
            self._lookahead(numbers, targets, out)
        return out

    def _codes(self, rel: np.ndarray, trel: np.ndarray, out: np.ndarray) -> None:
        """The scaled values and binary codes of numbers ``rel`` (k, N) and targets ``trel`` (k,), both
        relative to their range's low end, into ``out`` (k, prompt_dim)."""
        k = rel.shape[0]
        out[:, self.layout["numbers"]] = rel / max(self.number_range[1] - self.number_range[0], 1)
        out[:, self.layout["number_bits"]] = _bits(rel, self._number_bits).reshape(k, -1)
        out[:, self.layout["target"]] = (trel / max(self.target_range[1] - self.target_range[0], 1))[:, None]
        out[:, self.layout["target_bits"]] = _bits(trel, self._target_bits)

    def _code_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """:meth:`_codes` of every number and target of the ranges (when both span at most
        ``_MAX_CODE_TABLE`` values): scaled (W,), bits (W, bits), target segment (T, 1 + bits); built on
        first use. The vector env encodes every prompt it draws, so a gather beats the arithmetic."""
        if not hasattr(self, "_tables"):
            w = self.number_range[1] - self.number_range[0] + 1
            t = self.target_range[1] - self.target_range[0] + 1
            self._tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
            if max(w, t) <= _MAX_CODE_TABLE:
                m = max(w, t)
                values = np.arange(m, dtype=np.int64)
                out = np.zeros((m, self.prompt_dim), dtype=np.float32)
                self._codes(np.repeat(values[:, None], self.n_numbers, axis=1), values, out)
                target = out[:t, self.layout["target"].start : self.layout["target_bits"].stop].copy()
                bits = out[:w, self.layout["number_bits"]][:, : self._number_bits].copy()
                self._tables = (out[:w, 0].copy(), bits, target)
        return self._tables

    def _relations(self, numbers: np.ndarray, targets: np.ndarray, out: np.ndarray) -> None:
        """Fill the ``observation="relations"`` segments of ``out`` (k, prompt_dim).

        * ``number_onehot``: slot k's number, one-hot over ``number_range``;
        * ``target_onehot``: the target, one-hot over ``target_range``;
        * ``pair_residuals``: for every pair of slots (i < j), every result r of combining them
          (``a+b, a*b, a-b, b-a, a/b, b/a``; a division counts only when exact) and every way a third
          number c could finish the answer from r (``r+c, r-c, c-r, r*c, r/c, c/r`` = target), the value
          c would need, one-hot over ``number_range`` (all zero when c would fall outside it). These are
          relations of one pair with the target, what a person writes down first ("5*4 = 20, 20 short
          of 23 by 3"); they do not say whether the needed c is one of the prompt's numbers, which the
          policy has to find by comparing with ``number_onehot``.
        """
        lo, hi = self.number_range
        width = hi - lo + 1
        k, n = numbers.shape
        rows = np.arange(k)
        nums = np.asarray(numbers, dtype=np.int64)
        t = np.asarray(targets, dtype=np.int64)
        onehot = np.zeros((k, n, width), dtype=np.float32)
        onehot[rows[:, None], np.arange(n)[None, :], nums - lo] = 1.0
        out[:, self.layout["number_onehot"]] = onehot.reshape(k, -1)
        tgt = np.zeros((k, self.target_range[1] - self.target_range[0] + 1), dtype=np.float32)
        tgt[rows, t - self.target_range[0]] = 1.0
        out[:, self.layout["target_onehot"]] = tgt
        res = np.zeros((k, n * (n - 1) // 2, len(_PAIR_RESULTS), len(_RESIDUALS), width), dtype=np.float32)
        p = 0
        for i in range(n):
            for j in range(i + 1, n):
                a, b = nums[:, i], nums[:, j]
                for ri, (r_num, r_ok) in enumerate(_pair_results(a, b)):
                    for ci, (c_val, c_ok) in enumerate(_residuals(r_num, t)):
                        ok = r_ok & c_ok & (c_val >= lo) & (c_val <= hi)
                        res[rows[ok], p, ri, ci, c_val[ok] - lo] = 1.0
                p += 1
        out[:, self.layout["pair_residuals"]] = res.reshape(k, -1)

    def _lookahead(self, numbers: np.ndarray, targets: np.ndarray, out: np.ndarray) -> None:
        """Fill the ``observation="lookahead"`` segments: a one-step search, written into the
        observation. ``number_hits``: slot k's number equals the target; ``pair_hits``: a pair result
        (as in ``pair_residuals``) equals the target; ``pair_matches``: for each pair result, each way
        to finish and each *other* slot k (in slot order), whether n_k is the number that finishes it.
        For N = 3 this names every correct two-operator expression (the policy still has to write it
        as tokens); for N >= 4 it sees one merge ahead of a pair, not a whole answer."""
        k, n = numbers.shape
        nums = np.asarray(numbers, dtype=np.int64)
        t = np.asarray(targets, dtype=np.int64)
        out[:, self.layout["number_hits"]] = (nums == t[:, None]).astype(np.float32)
        hits = np.zeros((k, n * (n - 1) // 2, len(_PAIR_RESULTS)), dtype=np.float32)
        match = np.zeros((k, n * (n - 1) // 2, len(_PAIR_RESULTS), len(_RESIDUALS), n - 2), dtype=np.float32)
        p = 0
        for i in range(n):
            for j in range(i + 1, n):
                others = [s for s in range(n) if s not in (i, j)]
                for ri, (r_num, r_ok) in enumerate(_pair_results(nums[:, i], nums[:, j])):
                    hits[:, p, ri] = r_ok & (r_num == t)
                    for ci, (c_val, c_ok) in enumerate(_residuals(r_num, t)):
                        for oi, other in enumerate(others):
                            match[:, p, ri, ci, oi] = r_ok & c_ok & (c_val == nums[:, other])
                p += 1
        out[:, self.layout["pair_hits"]] = hits.reshape(k, -1)
        out[:, self.layout["pair_matches"]] = match.reshape(k, -1)
