"""GRPO's advantage estimators: one scalar per answer from its group's rewards (outcome supervision,
DeepSeekMath section 4.1.2), registered by name in :data:`ADVANTAGE_ESTIMATORS` with
:func:`register_advantage` (a new estimator is one function here, or in your own code); and DAPO's
dynamic-sampling filter. Shapes: ``B`` groups of ``G`` answers. Part of :mod:`agents.grpo.objective`,
which re-exports every name."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "dr_grpo_advantages",
    "grpo_advantages",
    "grpo_batch_std_advantages",
    "grpo_passk_advantages",
    "informative_groups",
    "register_advantage",
    "reinforce_pp_baseline_advantages",
    "reinforce_pp_baseline_verl_advantages",
    "rloo_advantages",
]

AdvantageFn = Callable[..., np.ndarray]  # (rewards (B, G), eps, unbiased_std, lengths=(B, G) | None)
#: Group advantage estimators by name (``GRPOConfig.advantage``); :func:`register_advantage` adds one.
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {}


def register_advantage(name: str) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator: register ``fn(rewards (B, G), eps, unbiased_std, lengths=None) -> (B, G)`` as
    ``GRPOConfig(advantage=name)`` (one advantage per answer from its group's rewards; ``lengths`` (B, G)
    are the answers' token counts). ``ValueError`` for a name that is taken or not a non-empty string."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an advantage estimator's name must be a non-empty string, got {name!r}")
    if name in ADVANTAGE_ESTIMATORS:
        raise ValueError(f"advantage estimator {name!r} is already registered; choose another name")

    def add(fn: AdvantageFn) -> AdvantageFn:
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return add


# --------------------------------------------------------------------------------------------------
# Advantages: one scalar per answer, broadcast to its tokens (outcome supervision, DeepSeekMath 4.1.2)
# --------------------------------------------------------------------------------------------------
@register_advantage("grpo")
def grpo_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
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


@register_advantage("dr_grpo")
def dr_grpo_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", section 3.1): mean-centred
    rewards without the std division, which removes GRPO's question-difficulty bias. ``eps`` and
    ``unbiased_std`` are accepted for a uniform signature and unused."""
    r = _check_rewards(rewards)
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    return np.where(tied, 0.0, r - r.mean(axis=1, keepdims=True))


@register_advantage("rloo")
def rloo_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """RLOO (Ahmadian et al. 2024): ``r_i`` minus the mean of the other G-1 rewards of its group,
    i.e. ``G/(G-1) * (r_i - mean(r))``. ``eps``/``unbiased_std`` are unused (uniform signature)."""
    r = _check_rewards(rewards)
    g = r.shape[1]
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    return np.where(tied, 0.0, (r - r.mean(axis=1, keepdims=True)) * g / (g - 1))


@register_advantage("grpo_batch_std")
def grpo_batch_std_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """Group-mean baseline scaled by the *batch's* reward std: ``(r_i - mean(r_group)) / (std(r_batch) +
    eps)`` (TRL ``scale_rewards="batch"``, after "PPO Lite", Liu et al. 2025 "Tricks or Traps?").
    One scale for every group, so an easy or hard prompt is not weighted up by its small std
    (Dr. GRPO's difficulty bias) while the advantages keep unit scale. Tied groups are exactly zero."""
    r = _check_rewards(rewards)
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    std = r.std(ddof=1 if unbiased_std else 0)
    return np.where(tied, 0.0, (r - r.mean(axis=1, keepdims=True)) / (std + eps))


@register_advantage("reinforce_pp_baseline")
def reinforce_pp_baseline_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """REINFORCE++-baseline (Hu et al. 2025, "REINFORCE++", arXiv 2501.03262): subtract each
    group's mean reward, then normalise the whole batch, ``A = (a - mean(a)) / (std(a) + eps)`` over all
    B x G centred rewards ``a``. Each answer counts once, and a tied group's centred rewards are exactly
    zero before the batch shift and stay zero after it. This is not verl's ``reinforce_plus_plus_baseline``,
    even on fixed-length tasks: verl whitens the token copies (``masked_whiten``: mean and Bessel-corrected
    variance over all T tokens, ``(a - m) / sqrt(v + 1e-8)``), so rewards [[1, 0], [1, 0]] with 3 tokens
    each give +-0.8659 here and +-0.9574 there; :func:`reinforce_pp_baseline_verl_advantages` is verl's.
    ``lengths`` is unused (uniform signature)."""
    r = _check_rewards(rewards)
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    centred = np.where(tied, 0.0, r - r.mean(axis=1, keepdims=True))
    std = centred.std(ddof=1 if unbiased_std else 0)
    return np.where(tied, 0.0, (centred - centred.mean()) / (std + eps))


@register_advantage("reinforce_pp_baseline_verl")
def reinforce_pp_baseline_verl_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """verl's ``reinforce_plus_plus_baseline`` exactly: group mean subtracted, then whitened over the
    batch's *token copies*. With ``a_i`` the centred reward of answer i and ``L_i`` its token count
    (``lengths``, (B, G); None = one token each), T = sum L_i, ``m = sum L_i a_i / (T + 1e-8)``, ``v =
    sum L_i (a_i - m)^2 / (T + 1e-8) * T / (T - 1)`` (without the last factor if not ``unbiased_std``) and
    ``A_i = (a_i - m) / sqrt(v + 1e-8)`` (verl ``masked_whiten`` and its ``masked_mean``, 1e-8s included;
    they are fixed, so ``eps`` is unused). A long answer weighs once per
    token, and, unlike every other estimator here, a tied group gets ``-m / sqrt(v + 1e-8)``, not 0.
    """
    r = _check_rewards(rewards)
    n_tok = np.ones_like(r) if lengths is None else np.asarray(lengths, dtype=np.float64).reshape(r.shape)
    if np.any(n_tok < 0) or n_tok.sum() < 2:
        raise ValueError(f"lengths must be non-negative token counts summing to at least 2, got "
                         f"{n_tok.sum()}")
    a = r - r.mean(axis=1, keepdims=True)  # (B, G)
    total = n_tok.sum()
    # verl's masked_mean divides by the token count + 1e-8, for the mean and for the variance alike;
    # masked_var then applies Bessel's T / (T - 1) with the exact count
    m = (n_tok * a).sum() / (total + 1e-8)
    v = (n_tok * (a - m) ** 2).sum() / (total + 1e-8)
    if unbiased_std:
        v = v * (total / (total - 1.0))
    return (a - m) / np.sqrt(v + 1e-8)


@register_advantage("grpo_passk")
def grpo_passk_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """Pass@k training (verl ``adv_estimator="grpo_passk"``, after Tang et al. 2025, "Optimizing Language
    Models for Inference Time Objectives using Reinforcement Learning", arXiv 2503.19595): only each
    group's best answer is credited, ``A = (r_max - r_second) / (std(r) + eps)``, every other answer
    gets 0. The group is worth its best reward (pass@G), and an answer is pushed up only by what it adds
    over the rest of the group (the leave-one-out pass@k gradient with k = G). A tied best, or a tied
    group, gives 0 (so the first of tied bests is credited with 0). ``lengths`` is unused."""
    r = _check_rewards(rewards)
    top2 = -np.sort(-r, axis=1)[:, :2]  # (B, 2): r_max, r_second (equal when the best is tied)
    std = r.std(axis=1, ddof=1 if unbiased_std else 0)  # (B,)
    out = np.zeros_like(r)
    out[np.arange(r.shape[0]), r.argmax(axis=1)] = (top2[:, 0] - top2[:, 1]) / (std + eps)
    return out


def informative_groups(rewards: np.ndarray) -> np.ndarray:
    """(B,) True where a group's rewards are not all tied: DAPO's dynamic-sampling filter (Yu et al.
    2025, section 3.2: keep a prompt only if ``0 < |{correct o_i}| < G``), generalised from
    accuracy to the whole reward. A tied group has zero advantage under every estimator above, so it
    contributes no policy gradient (only KL and entropy terms)."""
    r = _check_rewards(rewards)
    return ~np.all(r == r[:, :1], axis=1)


def _check_rewards(rewards: np.ndarray) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError(f"rewards must have shape (B, G) with G >= 2, got {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite")
    return r
