"""Aggregate statistics over seeds, as rliable recommends (Agarwal et al. 2021, "Deep RL at the Edge of the
Statistical Precipice"): the interquartile mean (IQM) with a 95% percentile-bootstrap confidence interval.

The resampling is ``scipy.stats.bootstrap`` (not a hand-written loop), seeded, so a table regenerates
exactly. With one seed there is nothing to resample and the interval is the point itself.

>>> float(iqm([0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 100.0]))
1.0
>>> round(iqm_ci([0.2, 0.4, 0.6, 0.8]).point, 2)
0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Interval", "ci", "iqm", "iqm_band", "iqm_ci", "paired", "ratio_ci", "verdict", "N_RESAMPLES",
           "CONFIDENCE", "NO_INTERVAL", "ONE_SEED"]

#: Bootstrap resamples per interval; 2,000 keeps a whole table under a second, and the seeded generator
#: makes the interval repeat exactly.
N_RESAMPLES = 2000
#: Two-sided confidence level of every interval.
CONFIDENCE = 0.95
#: What stands instead of a verdict read from one seed, and instead of its (empty) interval.
ONE_SEED = "n/a: one seed"
NO_INTERVAL = "one seed, not an interval"


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval ``[low, high]``; ``n`` is the sample's size (seeds)
    when known. From one seed there is no interval (``low == high == point``): :meth:`fmt` says so and
    no verdict is read from it (:data:`ONE_SEED`)."""

    point: float
    low: float
    high: float
    n: int | None = None

    @property
    def single(self) -> bool:
        """Made from one seed: a point, not an interval."""
        return self.n is not None and self.n < 2

    def overlaps(self, other: Interval) -> bool:
        return not (self.high < other.low or other.high < self.low)

    def fmt(self, digits: int = 2, scale: float = 1.0) -> str:
        """``"0.95 [0.90, 1.00]"``; values divided by ``scale`` (e.g. 1000 for thousands of steps)."""
        if np.isnan(self.point):
            return "n/a"
        p, lo, hi = (v / scale for v in (self.point, self.low, self.high))
        if self.single:
            return f"{p:.{digits}f} ({NO_INTERVAL})"
        return f"{p:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def iqm(x: Sequence[float] | np.ndarray, axis: int | None = None) -> float | np.ndarray:
    """Interquartile mean: the mean of the middle 50% of values (25% trimmed from each end)."""
    return stats.trim_mean(np.asarray(x, dtype=float), 0.25, axis=axis)


def _check(x: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"need a non-empty 1-D sample, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"sample has non-finite values: {arr.tolist()}")
    return arr


def iqm_ci(x: Sequence[float] | np.ndarray, seed: int = 0) -> Interval:
    """IQM of ``x`` and its 95% percentile-bootstrap CI (rliable's interval method is the percentile one)."""
    arr = _check(x)
    point = float(iqm(arr))
    if arr.size < 2 or np.all(arr == arr[0]):
        return Interval(point, point, point, int(arr.size))  # no spread to resample
    res = stats.bootstrap(
        (arr,), lambda s, axis=-1: iqm(s, axis=axis), n_resamples=N_RESAMPLES, vectorized=True,
        confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed),
    )
    return Interval(point, float(res.confidence_interval.low), float(res.confidence_interval.high),
                    int(arr.size))


def ratio_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, seed: int = 0) -> Interval:
    """IQM(a) / IQM(b) with a 95% percentile-bootstrap CI, resampling the two (independent) samples."""
    xa, xb = _check(a), _check(b)
    denom = float(iqm(xb))
    if denom == 0:
        nan = float("nan")
        return Interval(nan, nan, nan)
    point = float(iqm(xa)) / denom
    n = int(min(xa.size, xb.size))
    if xa.size < 2 or xb.size < 2:
        return Interval(point, point, point, n)

    def statistic(sa: np.ndarray, sb: np.ndarray, axis: int = -1) -> np.ndarray:
        return iqm(sa, axis=axis) / np.maximum(iqm(sb, axis=axis), 1e-12)

    res = stats.bootstrap(
        (xa, xb), statistic, n_resamples=N_RESAMPLES, vectorized=True, paired=False,
        confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed),
    )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.isnan(lo) or np.isnan(hi):  # degenerate resamples (e.g. constant samples)
        lo = hi = point
    return Interval(point, lo, hi, n)


def iqm_band(curves: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pointwise IQM and 95% bootstrap CI of ``curves`` (n_seeds, n_points), for plotting bands."""
    arr = np.asarray(curves, dtype=float)  # (S, T)
    mid = np.asarray(iqm(arr, axis=0))  # (T,)
    if arr.shape[0] < 2:
        return mid, mid.copy(), mid.copy()
    res = stats.bootstrap(
        (arr,), lambda s, axis=-1: iqm(s, axis=axis), n_resamples=1000, vectorized=True, axis=0,
        confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed),
    )
    lo = np.where(np.isnan(res.confidence_interval.low), mid, res.confidence_interval.low)
    hi = np.where(np.isnan(res.confidence_interval.high), mid, res.confidence_interval.high)
    return mid, lo, hi


def ci(values: Sequence[float] | np.ndarray, seed: int = 0) -> Interval:
    """:func:`iqm_ci` of the finite ``values`` (NaN for none)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan)
    return iqm_ci(arr, seed=seed)


def paired(a: Sequence[float], b: Sequence[float]) -> Interval:
    """IQM and interval of the per-seed differences a - b (seeds where both are finite)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return ci(d)


def verdict(diff: Interval, sign: int, margin: float = 0.0) -> str:
    """"agree" when the claimed difference (sign +1: positive, -1: negative) excludes ``-margin`` on its
    side, "disagree" when it lies wholly beyond ``-margin`` on the other side, "inconclusive" otherwise.
    ``margin`` 0 asks for a strict difference; a positive margin reads "no worse than by ``margin``"
    (e.g. "at no accuracy cost", "matches"). From one seed: ``"n/a: one seed"`` (no interval to read).
    """
    if margin < 0 or not np.isfinite(margin):
        raise ValueError(f"margin={margin!r} must be a finite number >= 0")
    if diff.single:  # one seed: a point, not an interval, so no verdict
        return ONE_SEED
    if np.isnan(diff.point):
        return "inconclusive"
    lo, hi = diff.low * sign, diff.high * sign
    if sign < 0:
        lo, hi = hi, lo
    if lo > -margin:
        return "agree"
    if hi < -margin:
        return "disagree"
    return "inconclusive"
