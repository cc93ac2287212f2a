"""The GRPO objective as small pure NumPy functions (one implementation, used by every policy).

Each function returns its value and, where the trainer needs it, its derivative with respect to the
new policy's log-probabilities ``logp`` of the sampled tokens. The tabular policy chains that
derivative through its softmax table by hand; the neural policy hands it to torch's autograd as the
upstream gradient (``logp.backward(grad)``). So the clip, the KL estimator and the aggregation are
written exactly once. Shapes: ``N`` episodes (B prompts x G answers), ``L`` token positions.

Variants are looked up by name in the ``ADVANTAGE_ESTIMATORS``, ``KL_ESTIMATORS``, ``POLICY_LOSSES``
and ``LOSS_AGGREGATIONS`` tables rather than chained in if-ladders. README, "GRPO variants (verl / TRL
names)", maps every variant to verl's and TRL's option names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_ESTIMATORS",
    "LOG_RATIO_CLAMP",
    "LOSS_AGGREGATIONS",
    "POLICY_LOSSES",
    "LossSettings",
    "LossTerms",
    "SurrogateSettings",
    "clip_ratio",
    "clipped_surrogate",
    "cispo_surrogate",
    "clip_cov_surrogate",
    "entropy_bonus",
    "gspo_surrogate",
    "informative_groups",
    "kl_cov_surrogate",
    "geo_mean_surrogate",
    "sapo_surrogate",
    "high_entropy_tokens",
    "non_empty_rows",
    "token_entropies",
    "PER_ANSWER_LOSSES",
    "SEQ_MEAN_ROWS",
    "grpo_passk_advantages",
    "reinforce_pp_baseline_verl_advantages",
    "mask_truncated",
    "grpo_advantages",
    "grpo_batch_std_advantages",
    "dr_grpo_advantages",
    "reinforce_pp_baseline_advantages",
    "rloo_advantages",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "grpo_token_loss",
]


# --------------------------------------------------------------------------------------------------
# Advantages: one scalar per answer, broadcast to its tokens (outcome supervision, DeepSeekMath 4.1.2)
# --------------------------------------------------------------------------------------------------
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


def dr_grpo_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", section 3.1): mean-centred
    rewards without the std division, which removes GRPO's question-difficulty bias. ``eps`` and
    ``unbiased_std`` are accepted for a uniform signature and unused."""
    r = _check_rewards(rewards)
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    return np.where(tied, 0.0, r - r.mean(axis=1, keepdims=True))


def rloo_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """RLOO (Ahmadian et al. 2024): ``r_i`` minus the mean of the other G-1 rewards of its group,
    i.e. ``G/(G-1) * (r_i - mean(r))``. ``eps``/``unbiased_std`` are unused (uniform signature)."""
    r = _check_rewards(rewards)
    g = r.shape[1]
    tied = np.all(r == r[:, :1], axis=1, keepdims=True)
    return np.where(tied, 0.0, (r - r.mean(axis=1, keepdims=True)) * g / (g - 1))


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


def reinforce_pp_baseline_verl_advantages(
    rewards: np.ndarray, eps: float = 1e-4, unbiased_std: bool = True, lengths: np.ndarray | None = None
) -> np.ndarray:
    """verl's ``reinforce_plus_plus_baseline`` exactly: group mean subtracted, then whitened over the
    batch's *token copies*. With ``a_i`` the centred reward of answer i and ``L_i`` its token count
    (``lengths``, (B, G); None = one token each), T = sum L_i, ``m = sum L_i a_i / T``, ``v = sum L_i
    (a_i - m)^2 / (T - 1)`` (``/ T`` if not ``unbiased_std``) and ``A_i = (a_i - m) / sqrt(v + 1e-8)``
    (verl ``masked_whiten``; its 1e-8 is fixed, so ``eps`` is unused). A long answer weighs once per
    token, and, unlike every other estimator here, a tied group gets ``-m / sqrt(v + 1e-8)``, not 0.
    """
    r = _check_rewards(rewards)
    n_tok = np.ones_like(r) if lengths is None else np.asarray(lengths, dtype=np.float64).reshape(r.shape)
    if np.any(n_tok < 0) or n_tok.sum() < 2:
        raise ValueError(f"lengths must be non-negative token counts summing to at least 2, got "
                         f"{n_tok.sum()}")
    a = r - r.mean(axis=1, keepdims=True)  # (B, G)
    total = n_tok.sum()
    m = (n_tok * a).sum() / total
    v = (n_tok * (a - m) ** 2).sum() / (total - 1.0 if unbiased_std else total)
    return (a - m) / np.sqrt(v + 1e-8)


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


AdvantageFn = Callable[..., np.ndarray]  # (rewards (B, G), eps, unbiased_std, lengths=(B, G) | None)
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
    "rloo": rloo_advantages,
    "grpo_batch_std": grpo_batch_std_advantages,
    "reinforce_pp_baseline": reinforce_pp_baseline_advantages,
    "reinforce_pp_baseline_verl": reinforce_pp_baseline_verl_advantages,
    "grpo_passk": grpo_passk_advantages,
}


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


# --------------------------------------------------------------------------------------------------
# Importance ratio and the policy-gradient surrogates (one per POLICY_LOSSES entry)
# --------------------------------------------------------------------------------------------------
#: log(pi / pi_old) is clamped to +-LOG_RATIO_CLAMP before exp() in every ratio-based loss here
#: (vanilla, GSPO's sequence ratio, CISPO, KL-Cov, Clip-Cov, SAPO): beyond ~710 exp() overflows to inf
#: and inf * 0 gives NaN. Where the clamp is active the ratio is constant (no ratio gradient). verl 0.9.1
#: clamps at +-20 only in vanilla, CISPO and SAPO; it clamps GSPO's sequence log-ratio at +10 one-sided
#: and KL-Cov, Clip-Cov and geo_mean not at all (tests/test_variants_parity.py pins the difference).
LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class SurrogateSettings:
    """The clip constants of a policy loss (``GRPOConfig`` fields of the same meaning).

    * ``clip_eps``: epsilon (PPO; epsilon_low in DAPO): the ratio is clipped below at ``1 - clip_eps``.
    * ``clip_eps_high``: DAPO's epsilon_high ("clip-higher", Yu et al. 2025 section 3.1): the upper
      clip ``1 + clip_eps_high``; None means ``clip_eps`` (symmetric PPO clip).
    * ``dual_clip_c``: the dual-clip constant c > 1 (Ye et al. 2020, "Mastering Complex Control in MOBA
      Games"): for A < 0 the objective is bounded below by ``c * A``; None turns it off.
    * ``kl_cov_ratio``, ``kl_cov_coef``: KL-Cov's k (fraction of tokens) and its KL weight (Cui et al.
      2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617).
    * ``clip_cov_ratio``, ``clip_cov_bounds``, ``rng``: Clip-Cov's fraction r of tokens, the covariance
      window (omega_low, omega_high) they are drawn from, and the generator that draws them (same paper).
    * ``sapo_tau_pos``, ``sapo_tau_neg``: SAPO's gate temperatures for A > 0 and A <= 0 (Gao et al.
      2025, arXiv 2511.20347; verl ``tau_pos`` / ``tau_neg``, TRL ``sapo_temperature_pos`` / ``_neg``).
    """

    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    dual_clip_c: float | None = None
    kl_cov_ratio: float = 2e-4
    kl_cov_coef: float = 0.1
    clip_cov_ratio: float = 2e-4
    clip_cov_bounds: tuple[float, float] = (1.0, 5.0)
    rng: np.random.Generator | None = None
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05


def clip_ratio(ratio: np.ndarray, clip_eps: float, clip_eps_high: float | None = None) -> np.ndarray:
    """``clip(rho, 1 - eps_low, 1 + eps_high)`` with ``eps_low = clip_eps`` and ``eps_high =
    clip_eps_high`` (None: ``clip_eps``): always inside that band."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    return np.clip(ratio, 1.0 - clip_eps, 1.0 + high)


def _log_ratio(logp: np.ndarray, logp_old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(clamped log-ratio, True where the clamp is inactive so the ratio has a gradient)."""
    raw = logp - logp_old
    return np.clip(raw, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), np.abs(raw) < LOG_RATIO_CLAMP


def clipped_surrogate(
    logp: np.ndarray,
    logp_old: np.ndarray,
    adv: np.ndarray,
    clip_eps: float,
    clip_eps_high: float | None = None,
    dual_clip_c: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPO's clipped surrogate per token, ``min(rho * A, clip(rho) * A)`` with ``rho = exp(logp - logp_old)``
    (log-ratio clamped to :data:`LOG_RATIO_CLAMP`), optionally clip-higher and dual-clip.

    Args:
        logp, logp_old: (N, L) log-probabilities of the sampled tokens under the policy being updated
            and under the policy that sampled them.
        adv: (N, L) advantages (the answer's advantage on each of its tokens).
        clip_eps: the clip range epsilon (the lower one when ``clip_eps_high`` is set).
        clip_eps_high: DAPO's epsilon_high; None = ``clip_eps``.
        dual_clip_c: for A < 0, ``max(c * A, min(rho A, clip(rho) A))`` (dual-clip PPO); None = off.

    Returns:
        (objective (N, L), d objective / d logp (N, L), clipped (N, L) bool: a clip won (PPO's or the
        dual clip), so the token contributes no gradient).
    """
    log_ratio, live = _log_ratio(logp, logp_old)
    ratio = np.exp(log_ratio)  # (N, L)
    unclipped = ratio * adv
    clipped_obj = clip_ratio(ratio, clip_eps, clip_eps_high) * adv
    use_clipped = clipped_obj < unclipped  # ties go to the unclipped branch, which has the gradient
    objective = np.where(use_clipped, clipped_obj, unclipped)
    if dual_clip_c is not None:
        floor = dual_clip_c * adv
        dual = (adv < 0) & (floor > objective)
        objective = np.where(dual, floor, objective)
        use_clipped = use_clipped | dual
    # d(rho * A)/d logp = rho * A; the clipped branches are constant in logp where they are active.
    grad = np.where(use_clipped | ~live, 0.0, unclipped)
    return objective, grad, use_clipped


def _vanilla_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPO-clip per token (DeepSeekMath eq. 3), with clip-higher and dual clip when set."""
    return clipped_surrogate(logp, logp_old, adv, s.clip_eps, s.clip_eps_high, s.dual_clip_c)


def gspo_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization", arXiv 2507.18071): one ratio per answer,
    ``s_i = exp(mean_t log(pi / pi_old))`` over the answer's real tokens, clipped per answer:
    ``min(s_i A_i, clip(s_i) A_i)``, written on each of its tokens.

    With ``seq_mean_token_mean`` aggregation (each answer weighted once, as GSPO's objective is; the
    config enforces it) the loss is exactly GSPO's, and the returned gradient is its derivative:
    ``d s_i / d logp_t = s_i / |y_i|``, of which the aggregation's 1/|y_i| weight supplies the
    1/|y_i|, so the per-token gradient here is ``s_i A_i`` (the paper's "GSPO-token" form, with
    all token advantages equal). ``mask`` is (N, L), 1 on real tokens.
    """
    lengths = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)  # (N, 1)
    seq_log_ratio = ((logp - logp_old) * mask).sum(axis=1, keepdims=True) / lengths  # (N, 1)
    clamped = np.clip(seq_log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    live = np.abs(seq_log_ratio) < LOG_RATIO_CLAMP
    s_i = np.broadcast_to(np.exp(clamped), logp.shape)  # (N, L)
    unclipped = s_i * adv
    clipped_obj = clip_ratio(s_i, s.clip_eps, s.clip_eps_high) * adv
    use_clipped = clipped_obj < unclipped
    objective = np.where(use_clipped, clipped_obj, unclipped)
    grad = np.where(use_clipped | ~live, 0.0, unclipped) * mask
    return objective, grad, use_clipped


def cispo_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CISPO (MiniMax-M1, 2025, arXiv 2506.13585): REINFORCE weighted by the *clipped,
    stop-gradient* importance weight, ``sg(clip(rho, 1 - eps_low, 1 + eps_high)) * A * logp``. Unlike
    PPO's clip, no token loses its gradient: the clip only bounds the weight.

    The value is the surrogate as written (it contains ``logp``, so it is not a ratio-scale number);
    the gradient is ``clip(rho) * A`` (the weight is a constant). ``clipped`` marks tokens whose weight
    was clipped.
    """
    log_ratio, _ = _log_ratio(logp, logp_old)
    ratio = np.exp(log_ratio)
    weight = clip_ratio(ratio, s.clip_eps, s.clip_eps_high)
    return weight * adv * logp, weight * adv, weight != ratio


def kl_cov_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """KL-Cov (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617):
    the *unclipped* ``rho * A`` on every token, minus ``kl_cov_coef * |logp - logp_old|`` on the
    ``max(1, int(kl_cov_ratio * T))`` real tokens with the largest centred covariance
    ``(A_t - mean A) * (logp_t - mean logp)`` over the batch's T real tokens. Those tokens are the
    ones whose update lowers entropy fastest; the KL term holds them near the sampling policy.

    The token selection is a constant (computed from the values, no gradient), as in verl's
    ``kl_cov`` loss. ``clipped`` marks the selected tokens.
    """
    log_ratio, live = _log_ratio(logp, logp_old)
    ratio = np.exp(log_ratio)
    valid = mask > 0
    selected = np.zeros(logp.shape, dtype=bool)
    n_valid = int(valid.sum())
    if n_valid:
        a, lp = adv[valid], logp[valid]
        cov = (a - a.mean()) * (lp - lp.mean())
        k = max(1, int(n_valid * s.kl_cov_ratio))
        top = np.argsort(-cov, kind="stable")[:k]
        flat = np.zeros(n_valid, dtype=bool)
        flat[top] = True
        selected[valid] = flat
    diff = logp - logp_old
    objective = ratio * adv - np.where(selected, s.kl_cov_coef * np.abs(diff), 0.0)
    grad = np.where(live, ratio * adv, 0.0) - np.where(selected, s.kl_cov_coef * np.sign(diff), 0.0)
    return objective, grad, selected


def clip_cov_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617):
    PPO-clip per token, except that ``max(1, int(clip_cov_ratio * T))`` of the T real tokens, drawn at
    random (with ``s.rng``) among those PPO did not clip whose centred covariance ``(A_t - mean A) *
    (logp_t - mean logp)`` lies strictly inside ``clip_cov_bounds``, are removed from the loss (value and
    gradient zero): the high-covariance updates that drive entropy down are skipped. As in verl's
    ``clip_cov`` loss; ``clipped`` marks PPO-clipped and removed tokens.
    """
    if s.rng is None:
        raise ValueError("clip_cov needs a random generator (SurrogateSettings.rng) to draw its tokens")
    objective, grad, clipped = clipped_surrogate(logp, logp_old, adv, s.clip_eps, s.clip_eps_high)
    valid = mask > 0
    n_valid = int(valid.sum())
    removed = np.zeros(logp.shape, dtype=bool)
    if n_valid:
        a, lp = adv[valid], logp[valid]
        cov = (a - a.mean()) * (lp - lp.mean())  # (T,)
        lo, hi = s.clip_cov_bounds
        candidates = np.flatnonzero((cov > lo) & (cov < hi) & ~clipped[valid])
        k = min(max(1, int(s.clip_cov_ratio * n_valid)), len(candidates))
        flat = np.zeros(n_valid, dtype=bool)
        flat[s.rng.permutation(candidates)[:k]] = True
        removed[valid] = flat
    return np.where(removed, 0.0, objective), np.where(removed, 0.0, grad), clipped | removed


def sapo_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SAPO (Gao et al. 2025, "Soft Adaptive Policy Optimization", arXiv 2511.20347; verl
    ``loss_mode="sapo"``, TRL ``loss_type="sapo"``): the hard clip replaced by a smooth gate,
    ``f(rho) A`` with ``f(rho) = sigmoid(tau (rho - 1)) * 4 / tau`` per token, ``tau = sapo_tau_pos`` where
    A > 0 and ``sapo_tau_neg`` elsewhere. ``f'(1) = 1``, so on-policy it is the plain policy gradient; far
    from ``rho = 1`` the gradient ``f'(rho) rho A = 4 sigma (1 - sigma) rho A`` fades instead of dropping to
    zero at a clip edge. No token is clipped (``clipped`` is all False). verl and TRL average it per answer
    (``seq_mean_token_mean``, which the config requires)."""
    log_ratio, live = _log_ratio(logp, logp_old)
    ratio = np.exp(log_ratio)  # (N, L)
    tau = np.where(adv > 0, s.sapo_tau_pos, s.sapo_tau_neg)
    sig = 1.0 / (1.0 + np.exp(-tau * (ratio - 1.0)))
    objective = sig * (4.0 / tau) * adv
    grad = np.where(live, 4.0 * sig * (1.0 - sig) * ratio * adv, 0.0)
    return objective, grad, np.zeros(logp.shape, dtype=bool)


def geo_mean_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GMPO (Zhao et al. 2025, "Geometric-Mean Policy Optimization", arXiv 2507.20673; verl
    ``loss_mode="geo_mean"``): the answer's objective is ``A_i`` times the *geometric* mean of its token
    ratios, each clipped in log space on the side that would profit: ``m_t = sgn(A) min(sgn(A) d_t,
    sgn(A) clip(d_t, -clip_eps, clip_eps_high))`` with ``d_t = log(pi / pi_old)`` (so ``clip_eps`` bounds
    the *log*-ratio here; the paper uses 0.4), and ``A_i exp(mean_t m_t)``, written on each of its tokens.
    A geometric mean is less swayed by one outlier token than GRPO's arithmetic one.

    As for GSPO, ``seq_mean_token_mean`` (each answer once, verl's ``mean`` over answers; the config
    requires it) makes the loss exactly GMPO's and the returned per-token gradient ``A_i exp(mean m)`` on
    tokens whose clip is inactive supplies, with the aggregation's ``1 / |y_i|``, its derivative. verl
    applies no log-ratio clamp here, nor do we (the clip bounds every ``m_t``); it divides by ``|y_i| +
    1e-8`` where we divide by ``|y_i|``. ``clipped`` marks tokens whose clip is active.
    """
    sgn = np.sign(adv)
    d = logp - logp_old  # (N, L)
    high = s.clip_eps if s.clip_eps_high is None else s.clip_eps_high
    d_clip = np.clip(d, -s.clip_eps, high)
    clipped = sgn * d_clip < sgn * d  # the clipped branch wins the min
    m = np.where(clipped, d_clip, d) * mask
    lengths = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)  # (N, 1)
    seq_adv = (adv * mask).sum(axis=1, keepdims=True) / lengths  # (N, 1): the answer's advantage
    value = np.broadcast_to(seq_adv * np.exp(m.sum(axis=1, keepdims=True) / lengths), logp.shape)
    grad = np.where(clipped, 0.0, value) * mask
    return value, grad, clipped & (mask > 0)


SurrogateFn = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray, SurrogateSettings],
    tuple[np.ndarray, np.ndarray, np.ndarray],
]
#: Policy losses by verl's ``actor.policy_loss.loss_mode`` names.
POLICY_LOSSES: dict[str, SurrogateFn] = {
    "vanilla": _vanilla_surrogate,
    "gspo": gspo_surrogate,
    "cispo": cispo_surrogate,
    "kl_cov": kl_cov_surrogate,
    "clip_cov": clip_cov_surrogate,
    "sapo": sapo_surrogate,
    "geo_mean": geo_mean_surrogate,
}
#: Policy losses whose objective is one number per answer, so the loss must weight each answer once.
PER_ANSWER_LOSSES = frozenset({"gspo", "sapo", "geo_mean"})


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
def _seq_mean_token_mean(mask: np.ndarray, max_length: int | None = None) -> np.ndarray:
    """GRPO paper (DeepSeekMath eq. 3): mean over each answer's tokens, then over answers."""
    lengths = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)  # (N, 1)
    return mask / lengths / mask.shape[0]


def _token_mean(mask: np.ndarray, max_length: int | None = None) -> np.ndarray:
    """DAPO (Yu et al. 2025, section 3.3): one mean over every token of the batch."""
    return mask / max(float(mask.sum()), 1.0)


def _seq_mean_token_sum(mask: np.ndarray, max_length: int | None = None) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025, section 3.1): sum over each answer's tokens divided by a constant,
    ``N x max_length``, so neither an answer's own length nor the longest answer in its batch
    reweights it. ``max_length`` is the task's fixed maximum answer length (Dr. GRPO's "generation
    budget", TRL's ``max_completion_length``); None falls back to the padded length ``L`` (only for
    direct calls; the trainer always passes the fixed one)."""
    norm = mask.shape[1] if max_length is None else int(max_length)
    if norm < mask.shape[1]:
        raise ValueError(f"max_length={max_length} is shorter than the batch's padded length {mask.shape[1]}")
    return mask / float(mask.shape[0] * norm)


AggregationFn = Callable[[np.ndarray, "int | None"], np.ndarray]
LOSS_AGGREGATIONS: dict[str, AggregationFn] = {
    "seq_mean_token_mean": _seq_mean_token_mean,
    "token_mean": _token_mean,
    "seq_mean_token_sum": _seq_mean_token_sum,
}


def non_empty_rows(weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Token weights of a ``seq_mean_*`` aggregation re-averaged over the answers that have a token in the
    loss, as verl's ``agg_loss`` does (it divides by the non-empty rows; ours and TRL's by all N rows).
    They differ only when whole answers are out of the loss (``mask_truncated``): with 1 of 4 answers
    masked, verl's loss is 4/3 of ours."""
    n_rows = float((mask.sum(axis=1) > 0).sum())
    return weights * (mask.shape[0] / n_rows) if n_rows else weights


#: How ``seq_mean_*`` aggregations count answers: "all" (ours, TRL) or "non_empty" (verl).
SEQ_MEAN_ROWS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "all": lambda weights, mask: weights,
    "non_empty": non_empty_rows,
}


def token_entropies(logp_all: np.ndarray) -> np.ndarray:
    """(T,) entropy ``-sum_v p_v log p_v`` (nats) of each row of (T, V) log-probabilities (-inf = masked)."""
    p = np.exp(logp_all)
    return -(p * np.where(p > 0, logp_all, 0.0)).sum(axis=-1)


def high_entropy_tokens(entropies: np.ndarray, mask: np.ndarray, quantile: float) -> np.ndarray:
    """(N, L) True on the tokens of the loss whose entropy is in the top ``quantile`` (rho) of the batch's
    tokens: ``H_t >= q``, q the (1 - rho) quantile (linear interpolation) of the entropies where ``mask``
    is 1. Wang et al. 2025, "Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective RL for
    LLM Reasoning" (arXiv 2506.01939; rho = 0.2 there): the policy gradient only on these "forking"
    tokens. TRL ``top_entropy_quantile`` (``get_high_entropy_mask``); rho = 0 keeps the highest only."""
    valid = mask > 0
    if not valid.any():
        return np.zeros(mask.shape, dtype=bool)
    threshold = np.quantile(entropies[valid], 1.0 - quantile)
    return (entropies >= threshold) & valid


def mask_truncated(mask: np.ndarray, truncated: np.ndarray) -> np.ndarray:
    """The loss mask with every truncated answer's tokens removed (DAPO section 3.4, "overlong
    filtering"; TRL ``mask_truncated_completions``): an answer cut off at the length limit is neither
    rewarded nor penalised by the loss. Its reward still enters its group's advantages (as in TRL).

    Args:
        mask: (N, L) 1.0 on real tokens. truncated: (N,) True for answers that hit the length limit.
    """
    keep = ~np.asarray(truncated, dtype=bool)
    if keep.shape != (mask.shape[0],):
        raise ValueError(f"truncated has shape {keep.shape}; expected ({mask.shape[0]},)")
    return mask * keep[:, None]


def entropy_bonus(logp_all: np.ndarray, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """``sum_t w_t H(pi(.|s_t))`` and its gradient with respect to the logits (T, V).

    ``H = -sum_v p_v log p_v``; ``dH/dz_j = -p_j (log p_j + H)`` for softmax logits z. Masked-out
    actions (``logp = -inf``, probability 0) contribute 0 to both. The trainer *subtracts*
    ``entropy_coef`` times this from the loss (TRL ``entropy_coef``, verl ``entropy_coeff``).

    Args:
        logp_all: (T, V) log-softmax of each token position's logits. weights: (T,) token weights.
    """
    p = np.exp(logp_all)
    safe_logp = np.where(p > 0, logp_all, 0.0)  # 0 * log 0 = 0 for masked actions
    h = -(p * safe_logp).sum(axis=-1)  # (T,)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    grad = -p * (safe_logp + h[:, None])  # (T, V) dH/dz, zero where p = 0
    return float((w * h).sum()), grad * w[:, None]


@dataclass(frozen=True)
class LossTerms:
    """The scalar loss, its gradient w.r.t. each token's logp, and diagnostics."""

    loss: float
    grad_logp: np.ndarray  # (N, L) d loss / d logp
    policy_loss: float  # -(aggregated surrogate)
    kl: float  # aggregated KL estimate to the reference
    clip_frac: float  # fraction of valid tokens on a clipped branch (or selected, for kl_cov)


@dataclass(frozen=True)
class LossSettings:
    """Everything :func:`grpo_token_loss` reads besides the arrays; the agent builds it once from its
    config (:meth:`agents.grpo.config.GRPOConfig.loss_settings`).

    * ``beta``: the KL weight. ``kl_estimator``: a key of :data:`KL_ESTIMATORS`.
    * ``aggregation``: a key of :data:`LOSS_AGGREGATIONS`; ``max_length`` is its fixed length
      ("seq_mean_token_sum" only; None falls back to the batch's padded length).
    * ``policy_loss``: a key of :data:`POLICY_LOSSES` ("vanilla" is PPO-clip), with its constants in
      ``surrogate``.
    * ``seq_mean_rows``: a key of :data:`SEQ_MEAN_ROWS` (which answers the ``seq_mean_*`` aggregations
      divide by).
    """

    beta: float
    kl_estimator: str = "k3"
    aggregation: str = "seq_mean_token_mean"
    policy_loss: str = "vanilla"
    max_length: int | None = None
    surrogate: SurrogateSettings = SurrogateSettings()
    seq_mean_rows: str = "all"


def grpo_token_loss(
    logp: np.ndarray,
    logp_old: np.ndarray,
    logp_ref: np.ndarray,
    adv: np.ndarray,
    mask: np.ndarray,
    settings: LossSettings,
    policy_tokens: np.ndarray | None = None,
) -> LossTerms:
    """The GRPO loss ``-sum_t w_t [surrogate_t - beta * KL_t]`` and its gradient.

    Args:
        logp, logp_old, logp_ref: (N, L) log-probabilities of the sampled tokens under the current,
            sampling and reference policies.
        adv: (N, L) advantages.
        mask: (N, L) 1.0 on tokens in the loss, 0.0 on padding (and on masked-out answers).
        settings: the variant and its constants (:class:`LossSettings`).
        policy_tokens: (N, L) bool or None: only these tokens carry the policy term (value and gradient),
            e.g. :func:`high_entropy_tokens`; the KL term and the aggregation still use ``mask``, as TRL
            applies ``top_entropy_quantile``.
    """
    weights = LOSS_AGGREGATIONS[settings.aggregation](mask, settings.max_length)  # (N, L), zero on padding
    if settings.aggregation.startswith("seq_mean"):
        weights = SEQ_MEAN_ROWS[settings.seq_mean_rows](weights, mask)
    surrogate, d_surrogate, clipped = POLICY_LOSSES[settings.policy_loss](
        logp, logp_old, adv, mask, settings.surrogate
    )
    if policy_tokens is not None:
        surrogate, d_surrogate = surrogate * policy_tokens, d_surrogate * policy_tokens
    kl, d_kl = KL_ESTIMATORS[settings.kl_estimator](logp, logp_ref)
    beta = settings.beta
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
