"""The importance ratio and the policy-gradient surrogates of GRPO's variants, each registered in
:data:`POLICY_LOSSES` by :func:`register_policy_loss` (verl's ``register_policy_loss`` is the model) with
the :class:`agents.grpo.config.GRPOConfig` fields it reads, and returning its value and its derivative
with respect to ``logp``. Shapes: ``N`` episodes, ``L`` token positions. Part of
:mod:`agents.grpo.objective`, which re-exports every name.

A new variant is one function here and, when it has a constant of its own, one ``GRPOConfig`` field
(docs/agent.md, "Add a loss variant"): the registration names the fields, and
:meth:`GRPOConfig.loss_settings` copies exactly those into the :class:`SurrogateSettings` the function
reads them from (``s.clip_eps``, ``s.sapo_tau_pos``, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LOG_RATIO_CLAMP",
    "POLICY_LOSSES",
    "PolicyLoss",
    "SurrogateSettings",
    "cispo_surrogate",
    "clip_cov_surrogate",
    "clip_ratio",
    "clipped_surrogate",
    "geo_mean_surrogate",
    "gspo_surrogate",
    "kl_cov_surrogate",
    "register_policy_loss",
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


class SurrogateSettings:
    """The constants of a policy loss, read as attributes named after their ``GRPOConfig`` fields
    (``s.clip_eps``, ``s.kl_cov_ratio``, ...), and ``rng``, the agent's generator for a loss that draws
    (Clip-Cov). :meth:`agents.grpo.config.GRPOConfig.loss_settings` fills in the fields the loss
    registered; a direct call names them: ``SurrogateSettings(clip_eps=0.2, sapo_tau_pos=1.0,
    sapo_tau_neg=1.05)``. The PPO clip's constants default to the paper's symmetric clip
    (``clip_eps`` 0.2, ``clip_eps_high`` None: ``clip_eps``, ``dual_clip_c`` None: off); reading any other
    constant that was not given raises ``AttributeError`` naming it. Immutable; equal when the
    constants are equal and the generator is the same object."""

    __slots__ = ("_values", "rng")
    _values: dict[str, Any]
    rng: np.random.Generator | None

    def __init__(self, clip_eps: float = 0.2, clip_eps_high: float | None = None,
                 dual_clip_c: float | None = None, *, rng: np.random.Generator | None = None,
                 **own: Any) -> None:
        values = {"clip_eps": clip_eps, "clip_eps_high": clip_eps_high, "dual_clip_c": dual_clip_c, **own}
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "rng", rng)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"this policy loss reads the setting {name!r}, which its SurrogateSettings do "
                             f"not hold (they hold {sorted(values)}); register the loss with "
                             f"settings=(..., {name!r})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"SurrogateSettings are immutable (tried to set {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SurrogateSettings):
            return NotImplemented
        return self._values == other._values and self.rng is other.rng

    def __hash__(self) -> int:
        return hash((tuple(sorted(self._values.items())), id(self.rng)))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any], np.random.Generator | None]]:
        return _rebuild_settings, (self._values, self.rng)  # pickling (Ray) and copying

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"SurrogateSettings({inner}{', rng=...' if self.rng is not None else ''})"


def _rebuild_settings(values: dict[str, Any], rng: np.random.Generator | None) -> SurrogateSettings:
    return SurrogateSettings(rng=rng, **values)


SurrogateFn = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray, SurrogateSettings],
    tuple[np.ndarray, np.ndarray, np.ndarray],
]


@dataclass(frozen=True)
class PolicyLoss:
    """A registered policy loss: the surrogate ``fn(logp, logp_old, adv, mask, settings)`` (each (N, L);
    returns the per-token objective, its derivative with respect to ``logp`` and a bool mask of clipped
    tokens), called through this object, and what it declares about itself (:func:`register_policy_loss`)."""

    name: str
    fn: SurrogateFn
    settings: tuple[str, ...] = ()
    per_answer: bool = False
    all_rows: bool = False
    clip_high: bool = True
    uses_rng: bool = False

    def __call__(self, logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray,
                 settings: SurrogateSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.fn(logp, logp_old, adv, mask, settings)


#: Policy losses by verl's ``actor.policy_loss.loss_mode`` names (and any registered one).
POLICY_LOSSES: dict[str, PolicyLoss] = {}


def register_policy_loss(name: str, *, settings: Iterable[str] = (), per_answer: bool = False,
                         all_rows: bool = False, clip_high: bool = True, uses_rng: bool = False
                         ) -> Callable[[SurrogateFn], SurrogateFn]:
    """Decorator: register a surrogate as ``GRPOConfig(policy_loss=name)``.

    Args:
        settings: the ``GRPOConfig`` fields it reads (``s.<field>``); :meth:`GRPOConfig.loss_settings`
            passes exactly these. A config that sets ``dual_clip_c`` for a loss that does not read it
            is refused.
        per_answer: its objective is one number per answer, so the loss must weight each answer once
            (the config requires ``loss_aggregation="seq_mean_token_mean"``).
        all_rows: its answer mean counts every answer of the minibatch whatever ``seq_mean_rows`` says
            (verl's ``geo_mean`` takes ``torch.mean`` over its answers, an empty one adding 0, while its KL
            and entropy terms go through ``agg_loss``, which divides by the non-empty answers).
        clip_high: whether clip-higher means anything to it; False refuses an explicit ``clip_eps_high``
            and drops a preset's (KL-Cov clips nothing).
        uses_rng: it draws with the agent's seeded generator (``s.rng``).

    ``ValueError`` for a name that is taken or not a non-empty string."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a policy loss name must be a non-empty string, got {name!r}")
    if name in POLICY_LOSSES:
        raise ValueError(f"policy loss {name!r} is already registered; choose another name")
    names = tuple(settings)
    if not all(isinstance(f, str) and f for f in names):
        raise ValueError(f"settings={names!r} must name GRPOConfig fields")

    def add(fn: SurrogateFn) -> SurrogateFn:
        POLICY_LOSSES[name] = PolicyLoss(name, fn, names, per_answer, all_rows, clip_high, uses_rng)
        return fn

    return add


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


@register_policy_loss("vanilla", settings=("clip_eps", "clip_eps_high", "dual_clip_c"))
def _vanilla_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPO-clip per token (DeepSeekMath eq. 3), with clip-higher and dual clip when set."""
    return clipped_surrogate(logp, logp_old, adv, s.clip_eps, s.clip_eps_high, s.dual_clip_c)


@register_policy_loss("gspo", settings=("clip_eps", "clip_eps_high"), per_answer=True)
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


@register_policy_loss("cispo", settings=("clip_eps", "clip_eps_high"))
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


@register_policy_loss("kl_cov", settings=("kl_cov_ratio", "kl_cov_coef"), clip_high=False)
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


@register_policy_loss("clip_cov", settings=("clip_eps", "clip_eps_high", "clip_cov_ratio", "clip_cov_lb",
                                            "clip_cov_ub"), uses_rng=True)
def clip_cov_surrogate(
    logp: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, mask: np.ndarray, s: SurrogateSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617):
    PPO-clip per token, except that ``max(1, int(clip_cov_ratio * T))`` of the T real tokens, drawn at
    random (with ``s.rng``) among those PPO did not clip whose centred covariance ``(A_t - mean A) *
    (logp_t - mean logp)`` lies strictly inside (``clip_cov_lb``, ``clip_cov_ub``), are removed from the
    loss (value and gradient zero): the high-covariance updates that drive entropy down are skipped. As
    in verl's
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
        lo, hi = s.clip_cov_lb, s.clip_cov_ub
        candidates = np.flatnonzero((cov > lo) & (cov < hi) & ~clipped[valid])
        k = min(max(1, int(s.clip_cov_ratio * n_valid)), len(candidates))
        flat = np.zeros(n_valid, dtype=bool)
        flat[s.rng.permutation(candidates)[:k]] = True
        removed[valid] = flat
    return np.where(removed, 0.0, objective), np.where(removed, 0.0, grad), clipped | removed


@register_policy_loss("sapo", settings=("sapo_tau_pos", "sapo_tau_neg"), per_answer=True)
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


@register_policy_loss("geo_mean", settings=("clip_eps", "clip_eps_high"), per_answer=True,
                      all_rows=True)
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
