"""Group-level reward terms: pure functions of a finished group of answers to one prompt.

They are not computed inside an episode because they depend on the whole group; an agent applies them
after its G episodes finish, between the verifier and the group advantages (docs/agent.md, "The GRPO
agent").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["length_reward"]


def length_reward(lengths: Sequence[int] | np.ndarray, correct: Sequence[bool] | np.ndarray) -> np.ndarray:
    """Kimi k1.5 length reward (Kimi Team 2025, "Kimi k1.5", section 2.3.3) for one group.

    ``lambda_i = 0.5 - (len_i - min_len) / (max_len - min_len)``; a correct answer earns ``lambda_i``, a
    wrong one ``min(0, lambda_i)``. So the shortest correct answer earns +0.5, the longest -0.5, and a
    wrong answer is only ever penalised, hardest when longest. When every length in the group is equal
    the term is zero for all (k1.5 leaves it undefined; zero keeps it a pure reshaping).

    Args:
        lengths: (G,) response lengths in tokens.
        correct: (G,) whether each answer is correct.

    Returns:
        (G,) float64 array of length rewards.

    >>> length_reward([3, 5, 7], [True, True, False]).tolist()
    [0.5, 0.0, -0.5]
    """
    lens = np.asarray(lengths, dtype=np.float64)  # (G,)
    ok = np.asarray(correct, dtype=bool)  # (G,)
    if lens.ndim != 1 or ok.shape != lens.shape:
        raise ValueError(
            f"lengths {lens.shape} and correct {ok.shape} must be 1-D arrays of the same length"
        )
    if lens.size == 0:
        return np.zeros(0)
    if not np.all(np.isfinite(lens)) or np.any(lens < 0):
        raise ValueError(f"lengths must be finite and non-negative, got {lens.tolist()}")
    lo, hi = lens.min(), lens.max()
    if hi == lo:
        return np.zeros_like(lens)
    lam = 0.5 - (lens - lo) / (hi - lo)  # (G,)
    return np.where(ok, lam, np.minimum(0.0, lam))
