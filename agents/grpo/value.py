"""PPO with a learned critic inside the GRPO agent (``advantage="gae"``, verl's ``adv_estimator="gae"``):
token-level Generalized Advantage Estimation and the clipped value loss, as small pure NumPy functions.

The critic's advantages are per token, ``(N, L)``, and go into the same surrogate, KL and aggregation
code as GRPO's per-answer advantages broadcast to their tokens
(:func:`agents.grpo.objective.grpo_token_loss`); only how they are computed differs. The advantages and
returns equal verl 0.9.1's ``compute_gae_advantage_return`` (``verl/trainer/ppo/core_algos.py``) to
float64 round-off, and the value loss its ``compute_value_loss`` under the ``token_mean`` aggregation;
under ``seq_mean_token_mean`` verl divides each answer's token sum by its count + 1e-8 (ours by the
count: 1e-8 / count relative), and a seq-mean divides by every answer unless
``seq_mean_rows="non_empty"`` (verl's: only answers with a token in the loss). docs/variants.md,
"The critic against verl", gives both, row by row; ``tests/test_value.py`` pins them to hand-computed
values and to a plain loop. Shapes: ``N`` episodes,
``L`` token positions; ``mask`` is 1.0 on an episode's real tokens and 0.0 after it ends. Part of
:mod:`agents.grpo.objective`, which re-exports every name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CRITIC_ESTIMATORS",
    "ValueLossTerms",
    "clipped_value_loss",
    "gae_advantages",
    "masked_whiten",
    "terminal_token_rewards",
]

#: verl's ``masked_mean`` adds this to its denominator and ``masked_whiten`` to the variance under the
#: square root; we keep both so our numbers are verl's, not merely close (the mean of 100 tokens would
#: otherwise differ in the 10th digit).
_VERL_EPS = 1e-8


def terminal_token_rewards(rewards: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(N, L) token-level rewards of outcome supervision: each episode's reward at its last real token,
    0 elsewhere (verl's ``token_level_rewards`` for a scalar verifier score).

    Args:
        rewards: (N,) one reward per episode. mask: (N, L) 1.0 on real tokens (a prefix of each row).
    """
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    m = np.asarray(mask, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != r.shape[0]:
        raise ValueError(f"mask has shape {m.shape}; expected ({r.shape[0]}, L) for {r.shape[0]} rewards")
    lengths = (m > 0).sum(axis=1)  # (N,)
    if np.any(lengths == 0):
        raise ValueError(f"every episode needs at least one token; rows {np.flatnonzero(lengths == 0)} "
                         "have none")
    out = np.zeros(m.shape)
    out[np.arange(len(r)), lengths - 1] = r
    return out


def masked_whiten(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``(x - m) / sqrt(v + 1e-8)`` with the masked mean ``m = sum(x mask) / (sum(mask) + 1e-8)`` and the
    Bessel-corrected masked variance ``v`` (verl ``masked_whiten``, the last step of its GAE). Needs at
    least two tokens in the mask (one has no sample variance: ``ValueError``, as verl raises)."""
    x = np.asarray(values, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)
    n = float(m.sum())
    if n < 2:
        raise ValueError(f"whitening needs at least two tokens in the mask, got {n:g}")
    mean = (x * m).sum() / (n + _VERL_EPS)
    var = ((x - mean) ** 2 * m).sum() / (n + _VERL_EPS) * (n / (n - 1.0))
    return (x - mean) / np.sqrt(var + _VERL_EPS)


def gae_advantages(token_rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float,
                   lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Token-level GAE (Schulman et al. 2016, arXiv 1506.02438) over each episode's tokens, as verl's
    ``compute_gae_advantage_return``: ``delta_t = r_t + gamma V_{t+1} - V_t`` and
    ``A_t = delta_t + gamma lam A_{t+1}``, where ``t + 1`` is the episode's next token in the mask (a
    token with mask 0 is skipped: its reward and value are not used, and it carries the later
    advantage and value through), and ``V`` after the last token is 0 (the episode has ended; a
    truncated answer is not bootstrapped, as in verl). The returns ``A + V`` are the critic's
    regression targets; the advantages are then whitened over the mask (:func:`masked_whiten`).

    Args:
        token_rewards: (N, L) reward per token (:func:`terminal_token_rewards` for outcome rewards).
        values: (N, L) the critic's V(s_t) of each token's state (the context before the token).
        mask: (N, L) 1.0 on real tokens.
        gamma, lam: the discount and the GAE lambda (verl ``algorithm.gamma``, ``algorithm.lam``).

    Returns:
        (advantages (N, L) whitened, returns (N, L) = unwhitened advantages + values).
    """
    r = np.asarray(token_rewards, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)
    if not (r.shape == v.shape == m.shape) or r.ndim != 2:
        raise ValueError(f"token_rewards {r.shape}, values {v.shape} and mask {m.shape} must be one (N, L) "
                         "shape")
    n_rows, n_cols = r.shape
    adv = np.zeros((n_rows, n_cols))
    next_value = np.zeros(n_rows)  # V of the next real token (0 past the end)
    next_adv = np.zeros(n_rows)  # A of the next real token
    for t in range(n_cols - 1, -1, -1):  # (N,) vectors, one token position at a time, right to left
        delta = r[:, t] + gamma * next_value - v[:, t]
        here = delta + gamma * lam * next_adv
        keep = m[:, t]
        next_value = keep * v[:, t] + (1.0 - keep) * next_value
        next_adv = keep * here + (1.0 - keep) * next_adv
        adv[:, t] = next_adv
    returns = adv + v
    return masked_whiten(adv, m), returns


@dataclass(frozen=True)
class ValueLossTerms:
    """The value loss, its gradient with respect to each token's prediction, and diagnostics."""

    loss: float
    grad_vpred: np.ndarray  # (N, L) d loss / d vpred
    clip_frac: float  # fraction of tokens in the mask where the clipped error was the larger
    explained_variance: float  # 1 - Var(returns - vpred) / Var(returns) over the mask (nan if Var = 0)


def clipped_value_loss(vpreds: np.ndarray, returns: np.ndarray, values: np.ndarray, mask: np.ndarray,
                       cliprange_value: float, weights: np.ndarray) -> ValueLossTerms:
    """PPO's clipped value loss (verl ``compute_value_loss``, after TRL's former ``PPOTrainer``):
    ``0.5 * sum_t w_t max((v_t - R_t)^2, (clip(v_t, V_t - c, V_t + c) - R_t)^2)``, ``v`` the critic's
    new predictions, ``V`` its predictions when the batch was collected (``values``), ``R`` the GAE
    returns and ``c`` = ``cliprange_value``: the critic is not rewarded for moving further than ``c``
    from its old value. The 0.5 is verl's and TRL's. ``weights`` (N, L) are the loss aggregation's token
    weights (the policy loss's: :func:`agents.grpo.objective.loss_weights`; verl's critic also takes the
    actor's ``loss_agg_mode``), zero outside the mask.

    The gradient: where the unclipped error is the larger (always inside the clip range, where both are
    equal) it is ``w_t (v_t - R_t)``; where the clipped one is, ``v_t`` lies outside the range and the
    clipped term does not depend on it, so it is 0.
    """
    v = np.asarray(vpreds, dtype=np.float64)
    ret = np.asarray(returns, dtype=np.float64)
    old = np.asarray(values, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if not (v.shape == ret.shape == old.shape == m.shape == w.shape):
        raise ValueError(f"vpreds {v.shape}, returns {ret.shape}, values {old.shape}, mask {m.shape} and "
                         f"weights {w.shape} must have one shape")
    if not (np.isfinite(cliprange_value) and cliprange_value > 0):
        raise ValueError(f"cliprange_value={cliprange_value!r} must be a positive finite number")
    clipped = np.maximum(np.minimum(v, old + cliprange_value), old - cliprange_value)
    err1 = (v - ret) ** 2
    err2 = (clipped - ret) ** 2
    larger = np.maximum(err1, err2)
    on = m > 0
    w = np.where(on, w, 0.0)
    n_valid = float(on.sum())
    resid = (ret - v)[on]
    var_ret = float(np.var(ret[on])) if n_valid else 0.0
    return ValueLossTerms(
        loss=0.5 * float((larger * w).sum()),
        grad_vpred=np.where(err1 >= err2, w * (v - ret), 0.0),
        clip_frac=float((err2 > err1)[on].sum() / n_valid) if n_valid else 0.0,
        explained_variance=1.0 - float(np.var(resid)) / var_ret if var_ret > 0 else float("nan"),
    )


CriticAdvantageFn = Callable[..., tuple[np.ndarray, np.ndarray]]
#: Advantage estimators that need a learned critic (the per-answer group estimators are
#: :data:`agents.grpo.advantages.ADVANTAGE_ESTIMATORS`): name -> fn(token_rewards, values, mask, gamma,
#: lam) -> (advantages, returns), all (N, L).
CRITIC_ESTIMATORS: dict[str, CriticAdvantageFn] = {"gae": gae_advantages}
