"""The GRPO objective as small pure NumPy functions (one implementation, used by every policy).

Each function returns its value and, where the trainer needs it, its derivative with respect to the
new policy's log-probabilities ``logp`` of the sampled tokens. The tabular policy chains that
derivative through its softmax table by hand; the neural policy hands it to torch's autograd as the
upstream gradient (``logp.backward(grad)``). So the clip, the KL estimator and the aggregation are
written exactly once. Shapes: ``N`` episodes (B prompts x G answers), ``L`` token positions.

Variants are looked up by name in the ``ADVANTAGE_ESTIMATORS``, ``KL_ESTIMATORS`` and
``LOSS_AGGREGATIONS`` tables rather than chained in if-ladders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_ESTIMATORS",
    "LOSS_AGGREGATIONS",
    "LossTerms",
    "clip_ratio",
    "clipped_surrogate",
    "grpo_advantages",
    "dr_grpo_advantages",
    "rloo_advantages",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "grpo_token_loss",
]


# --------------------------------------------------------------------------------------------------
# Advantages: one scalar per answer, broadcast to its tokens (outcome supervision, DeepSeekMath 4.1.2)
# --------------------------------------------------------------------------------------------------
def grpo_advantages(rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True) -> np.ndarray:
    """GRPO group-relative advantages ``A_i = (r_i - mean(r)) / (std(r) + eps)`` per group.

    Args:
        rewards: (B, G) rewards of G answers to each of B prompts.
        eps: added to the std so that a group with (nearly) tied rewards does not divide by ~0.
        unbiased_std: use the sample std (``ddof=1``), as TRL's ``GRPOTrainer`` and verl's
            ``compute_grpo_outcome_advantage`` do (``torch.std`` defaults to the unbiased estimator);
            we follow them so our numbers match theirs. The choice only rescales each group.

    Returns:
        (B, G) advantages: zero-mean within each group, and exactly zero for a group whose rewards
        all tie (``r_i - mean(r)`` is exactly 0.0 in floating point when all ``r_i`` are equal).
    """
    r = _check_rewards(rewards)  # (B, G)
    centered = r - r.mean(axis=1, keepdims=True)  # (B, G)
    # A tied group is set to exactly zero rather than trusting mean() to round back to r_i.
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)  # (B, 1)
    std = r.std(axis=1, ddof=1 if unbiased_std else 0, keepdims=True)  # (B, 1)
    return np.where(tied, 0.0, centered / (std + eps))


def dr_grpo_advantages(rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", section 3.1): mean-centred
    rewards without the std division, which removes GRPO's question-difficulty bias. ``eps`` and
    ``unbiased_std`` are accepted for a uniform signature and unused."""
    r = _check_rewards(rewards)
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    return np.where(tied, 0.0, r - r.mean(axis=1, keepdims=True))


def rloo_advantages(rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True) -> np.ndarray:
    """RLOO (Ahmadian et al. 2024): ``r_i`` minus the mean of the other G-1 rewards of its group,
    i.e. ``G/(G-1) * (r_i - mean(r))``. ``eps``/``unbiased_std`` are unused (uniform signature)."""
    r = _check_rewards(rewards)
    g = r.shape[1]
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    return np.where(tied, 0.0, (r - r.mean(axis=1, keepdims=True)) * g / (g - 1))


AdvantageFn = Callable[[np.ndarray, float, bool], np.ndarray]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
    "rloo": rloo_advantages,
}


def _check_rewards(rewards: np.ndarray) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError(f"rewards must have shape (B, G) with G >= 2, got {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite")
    return r


# --------------------------------------------------------------------------------------------------
# Importance ratio and PPO clip
# --------------------------------------------------------------------------------------------------
def clip_ratio(ratio: np.ndarray, clip_eps: float) -> np.ndarray:
    """``clip(rho, 1 - eps, 1 + eps)``: always inside ``[1 - eps, 1 + eps]``."""
    return np.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)


def clipped_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, clip_eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPO's clipped surrogate per token, ``min(rho * A, clip(rho) * A)`` with ``rho = exp(logp - logp_old)``.

    Args:
        logp, logp_old: (N, L) log-probabilities of the sampled tokens under the policy being updated
            and under the policy that sampled them.
        adv: (N, L) advantages (the answer's advantage on each of its tokens).
        clip_eps: the clip range epsilon.

    Returns:
        (objective (N, L), d objective / d logp (N, L), clipped (N, L) bool: the clipped branch won,
        so the token contributes no gradient).
    """
    ratio = np.exp(logp - logp_old)  # (N, L)
    unclipped = ratio * adv
    clipped_obj = clip_ratio(ratio, clip_eps) * adv
    use_clipped = clipped_obj < unclipped  # ties go to the unclipped branch, which has the gradient
    objective = np.where(use_clipped, clipped_obj, unclipped)
    # d(rho * A)/d logp = rho * A; the clipped branch is constant in logp where it is active.
    grad = np.where(use_clipped, 0.0, unclipped)
    return objective, grad, use_clipped


# --------------------------------------------------------------------------------------------------
# KL estimators of KL(pi_theta || pi_ref) from samples of pi_theta (Schulman 2020, "Approximating KL")
# --------------------------------------------------------------------------------------------------
def kl_k1(logp: np.ndarray, logp_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """k1 = log(pi/pi_ref): unbiased, high variance, can be negative. Returns (value, d/dlogp)."""
    return logp - logp_ref, np.ones_like(logp)


def kl_k2(logp: np.ndarray, logp_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """k2 = (log r)^2 / 2 with r = pi_ref/pi: biased, low variance, non-negative."""
    log_r = logp_ref - logp
    return 0.5 * log_r**2, -log_r


#: k3 is clamped to this value, as verl's ``kl_penalty(..., "low_var_kl")`` does: where the policy has
#: almost eliminated a token the reference likes, r = pi_ref/pi explodes and so would the gradient 1 - r.
K3_CLAMP = 10.0


def kl_k3(logp: np.ndarray, logp_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """k3 = r - log r - 1 with r = pi_ref/pi_theta (DeepSeekMath eq. 4): unbiased, non-negative,
    exactly zero where the policies agree; clamped at :data:`K3_CLAMP` (no gradient where clamped).
    Returns (value, d/dlogp = 1 - r)."""
    log_r = np.minimum(logp_ref - logp, 50.0)  # exp() stays finite; such tokens are clamped anyway
    r = np.exp(log_r)
    value = r - log_r - 1.0
    clamped = value > K3_CLAMP
    return np.where(clamped, K3_CLAMP, value), np.where(clamped, 0.0, 1.0 - r)


KLFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
KL_ESTIMATORS: dict[str, KLFn] = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


# --------------------------------------------------------------------------------------------------
# Loss aggregation: how per-token losses become one scalar (the weight of each token)
# --------------------------------------------------------------------------------------------------
def _seq_mean_token_mean(mask: np.ndarray) -> np.ndarray:
    """GRPO paper (DeepSeekMath eq. 3): mean over each answer's tokens, then over answers."""
    lengths = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)  # (N, 1)
    return mask / lengths / mask.shape[0]


def _token_mean(mask: np.ndarray) -> np.ndarray:
    """DAPO (Yu et al. 2025, section 3.3): one mean over every token of the batch."""
    return mask / max(float(mask.sum()), 1.0)


def _seq_mean_token_sum(mask: np.ndarray) -> np.ndarray:
    """Dr. GRPO: sum over tokens, divided by a constant (N x L), so length does not reweight answers."""
    return mask / float(mask.shape[0] * mask.shape[1])


AggregationFn = Callable[[np.ndarray], np.ndarray]
LOSS_AGGREGATIONS: dict[str, AggregationFn] = {
    "seq_mean_token_mean": _seq_mean_token_mean,
    "token_mean": _token_mean,
    "seq_mean_token_sum": _seq_mean_token_sum,
}


@dataclass(frozen=True)
class LossTerms:
    """The scalar loss, its gradient w.r.t. each token's logp, and diagnostics."""

    loss: float
    grad_logp: np.ndarray  # (N, L) d loss / d logp
    policy_loss: float  # -(aggregated clipped surrogate)
    kl: float  # aggregated KL estimate to the reference
    clip_frac: float  # fraction of valid tokens on the clipped branch


def grpo_token_loss(
    logp: np.ndarray,
    logp_old: np.ndarray,
    logp_ref: np.ndarray,
    adv: np.ndarray,
    mask: np.ndarray,
    *,
    clip_eps: float,
    beta: float,
    kl_estimator: str = "k3",
    aggregation: str = "seq_mean_token_mean",
) -> LossTerms:
    """The GRPO loss ``-sum_t w_t [min(rho A, clip(rho) A) - beta * KL_t]`` and its gradient.

    Args:
        logp, logp_old, logp_ref: (N, L) log-probabilities of the sampled tokens under the current,
            sampling and reference policies.
        adv: (N, L) advantages.
        mask: (N, L) 1.0 on real tokens, 0.0 on padding after an episode ended.
        clip_eps, beta: the clip range and the KL weight.
        kl_estimator: a key of :data:`KL_ESTIMATORS`.
        aggregation: a key of :data:`LOSS_AGGREGATIONS`.
    """
    weights = LOSS_AGGREGATIONS[aggregation](mask)  # (N, L), zero on padding
    surrogate, d_surrogate, clipped = clipped_surrogate(logp, logp_old, adv, clip_eps)
    kl, d_kl = KL_ESTIMATORS[kl_estimator](logp, logp_ref)
    per_token = -(surrogate - beta * kl)  # (N, L)
    grad = -(d_surrogate - beta * d_kl) * weights  # (N, L)
    n_valid = max(float(mask.sum()), 1.0)
    return LossTerms(
        loss=float((per_token * weights).sum()),
        grad_logp=grad,
        policy_loss=float(-(surrogate * weights).sum()),
        kl=float((kl * weights).sum()),
        clip_frac=float((clipped * mask).sum() / n_valid),
    )
