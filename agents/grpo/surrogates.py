"""The importance ratio and the policy-gradient surrogates of GRPO's variants, one per
:data:`POLICY_LOSSES` entry, each returning its value and its derivative with respect to ``logp``.
Shapes: ``N`` episodes, ``L`` token positions. Part of :mod:`agents.grpo.objective`, which re-exports
every name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ALL_ROWS_POLICY_LOSSES",
    "LOG_RATIO_CLAMP",
    "PER_ANSWER_LOSSES",
    "POLICY_LOSSES",
    "SurrogateSettings",
    "cispo_surrogate",
    "clip_cov_surrogate",
    "clip_ratio",
    "clipped_surrogate",
    "geo_mean_surrogate",
    "gspo_surrogate",
    "kl_cov_surrogate",
    "sapo_surrogate",
]


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
#: Policy losses whose answer mean counts every answer of the minibatch whatever ``seq_mean_rows`` says:
#: verl's ``geo_mean`` takes ``torch.mean`` over its answers (an empty one adds 0), while its KL and entropy
#: terms go through ``agg_loss``, which divides by the non-empty answers.
ALL_ROWS_POLICY_LOSSES = frozenset({"geo_mean"})
