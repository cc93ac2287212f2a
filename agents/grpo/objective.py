"""The GRPO objective as small pure NumPy functions (one implementation, used by every policy).

Each function returns its value and, where the trainer needs it, its derivative with respect to the
new policy's log-probabilities ``logp`` of the sampled tokens. The tabular policy chains that
derivative through its softmax table by hand; the neural policy hands it to torch's autograd as the
upstream gradient (``logp.backward(grad)``). So the clip, the KL estimator and the aggregation are
written exactly once. Shapes: ``N`` episodes (B prompts x G answers), ``L`` token positions.

Variants are looked up by name in the ``ADVANTAGE_ESTIMATORS`` (:mod:`agents.grpo.advantages`),
``CRITIC_ESTIMATORS`` (token-level GAE with a learned critic, :mod:`agents.grpo.value`),
``POLICY_LOSSES`` (:mod:`agents.grpo.surrogates`), ``KL_ESTIMATORS`` and ``LOSS_AGGREGATIONS`` tables
rather than chained in if-ladders; this module re-exports them all. docs/variants.md maps every variant
to verl's and TRL's option names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agents.grpo.advantages import (  # noqa: F401  (re-exported: the objective's one namespace)
    ADVANTAGE_ESTIMATORS,
    dr_grpo_advantages,
    grpo_advantages,
    grpo_batch_std_advantages,
    grpo_passk_advantages,
    informative_groups,
    register_advantage,
    reinforce_pp_baseline_advantages,
    reinforce_pp_baseline_verl_advantages,
    rloo_advantages,
)
from agents.grpo.value import (  # noqa: F401  (re-exported)
    CRITIC_ESTIMATORS,
    ValueLossTerms,
    clipped_value_loss,
    gae_advantages,
    masked_whiten,
    terminal_token_rewards,
)
from agents.grpo.surrogates import (  # noqa: F401  (re-exported)
    LOG_RATIO_CLAMP,
    POLICY_LOSSES,
    PolicyLoss,
    SurrogateSettings,
    cispo_surrogate,
    clip_cov_surrogate,
    clip_ratio,
    clipped_surrogate,
    geo_mean_surrogate,
    gspo_surrogate,
    kl_cov_surrogate,
    register_policy_loss,
    sapo_surrogate,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "CRITIC_ESTIMATORS",
    "ValueLossTerms",
    "clipped_value_loss",
    "gae_advantages",
    "loss_weights",
    "masked_whiten",
    "terminal_token_rewards",
    "KL_ESTIMATORS",
    "LOG_RATIO_CLAMP",
    "LOSS_AGGREGATIONS",
    "POLICY_LOSSES",
    "PolicyLoss",
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
    "register_advantage",
    "kl_cov_surrogate",
    "geo_mean_surrogate",
    "sapo_surrogate",
    "high_entropy_tokens",
    "non_empty_rows",
    "token_entropies",
    "register_policy_loss",
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


def loss_weights(mask: np.ndarray, settings: LossSettings) -> np.ndarray:
    """(N, L) each token's weight in the aggregated loss (``settings.aggregation``, and for the
    ``seq_mean_*`` ones ``settings.seq_mean_rows``): the policy loss's, and the critic's value loss's
    (verl's critic takes the actor's ``loss_agg_mode``). Zero where ``mask`` is 0."""
    weights = LOSS_AGGREGATIONS[settings.aggregation](mask, settings.max_length)
    if settings.aggregation.startswith("seq_mean"):
        weights = SEQ_MEAN_ROWS[settings.seq_mean_rows](weights, mask)
    return weights


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

    The weights ``w_t`` are the aggregation's, with ``seq_mean_rows`` deciding which answers a seq-mean
    counts. One exception, verl's: under ``seq_mean_rows="non_empty"`` a policy loss registered with
    ``all_rows`` (GMPO's ``geo_mean``) still averages its policy term over every answer
    (verl's ``torch.mean``) while the KL term counts the non-empty answers (verl's ``agg_loss``).

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
    weights = loss_weights(mask, settings)  # (N, L), zero on padding
    policy_loss = POLICY_LOSSES[settings.policy_loss]
    policy_weights = weights  # the policy term's weights (every answer for an all_rows loss)
    if (settings.aggregation.startswith("seq_mean") and settings.seq_mean_rows != "all"
            and policy_loss.all_rows):
        policy_weights = LOSS_AGGREGATIONS[settings.aggregation](mask, settings.max_length)
    surrogate, d_surrogate, clipped = policy_loss(logp, logp_old, adv, mask, settings.surrogate)
    if policy_tokens is not None:
        surrogate, d_surrogate = surrogate * policy_tokens, d_surrogate * policy_tokens
    kl, d_kl = KL_ESTIMATORS[settings.kl_estimator](logp, logp_ref)
    beta = settings.beta
    if policy_weights is weights:
        loss = float((-(surrogate - beta * kl) * weights).sum())
        grad = -(d_surrogate - beta * d_kl) * weights  # (N, L)
    else:  # the two terms count different answers (verl's geo_mean under seq_mean_rows="non_empty")
        loss = float((-surrogate * policy_weights + beta * kl * weights).sum())
        grad = -d_surrogate * policy_weights + beta * d_kl * weights
    n_valid = max(float(mask.sum()), 1.0)
    return LossTerms(
        loss=loss,
        grad_logp=grad,
        policy_loss=float(-(surrogate * policy_weights).sum()),
        kl=float((kl * weights).sum()),
        clip_frac=float((clipped * mask).sum() / n_valid),
    )
