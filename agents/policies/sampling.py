"""The NumPy side of a categorical policy, shared by every policy and the rollout: the stable
log-softmax, grammar masks on logits, and the seeded categorical draw."""

from __future__ import annotations

import numpy as np

__all__ = ["apply_mask", "log_softmax", "sample_categorical", "sample_from_logp"]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax of (N, V) logits, stable for large values."""
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def apply_mask(logits: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
    """(N, V) logits with the tokens a mask forbids set to -inf (grammar-constrained decoding); the
    logits themselves when ``masks`` is None. Every row must allow at least one token."""
    if masks is None:
        return logits
    m = np.asarray(masks, dtype=bool).reshape(logits.shape)
    if not m.any(axis=-1).all():
        raise ValueError("an action mask allows no token in some row; a mask must allow at least one")
    return np.where(m, logits, -np.inf)


def sample_categorical(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of (N, V) logits with ``rng`` (inverse CDF; one uniform per row)."""
    return sample_from_logp(log_softmax(logits), rng)


def sample_from_logp(logp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`sample_categorical` given the rows' ``log_softmax`` (N, V) already (the rollout needs them
    for the sampled tokens' log-probs too, so it computes them once)."""
    cdf = np.cumsum(np.exp(logp), axis=-1)  # (N, V)
    u = rng.random((logp.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), logp.shape[-1] - 1).astype(np.int64)
