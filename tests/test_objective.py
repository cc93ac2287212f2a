"""The GRPO objective pinned to hand-computed numbers (the lesson's "Verify It" list and more)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from agents.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    CRITIC_ESTIMATORS,
    K3_CLAMP,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    POLICY_LOSSES,
    LossSettings,
    SurrogateSettings,
    cispo_surrogate,
    clip_cov_surrogate,
    clip_ratio,
    clipped_surrogate,
    dr_grpo_advantages,
    entropy_bonus,
    grpo_advantages,
    grpo_batch_std_advantages,
    grpo_token_loss,
    gspo_surrogate,
    informative_groups,
    kl_cov_surrogate,
    kl_k3,
    mask_truncated,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
)
from agents.grpo.config import GRPOConfig
from agents.policies import log_softmax


def _shipped(registry: dict) -> list[str]:
    """The names the package itself registers (other test modules register their own at import)."""
    return [n for n, v in registry.items() if getattr(v, "fn", v).__module__.startswith("agents.")]


def test_grpo_advantages_hand_computed() -> None:
    r = np.array([[1.0, 0.0, 0.0, 1.0]])
    # mean 0.5, unbiased std = sqrt(sum((r-0.5)^2) / 3) = sqrt(1/3)
    expected = (r - 0.5) / (np.sqrt(1 / 3) + 1e-4)
    np.testing.assert_allclose(grpo_advantages(r), expected)
    biased = (r - 0.5) / (0.5 + 1e-4)
    np.testing.assert_allclose(grpo_advantages(r, unbiased_std=False), biased)


# Not group-centred by design (tests/test_variants_parity.py pins them): pass@k credits each group's best
# answer only; verl's REINFORCE++-baseline shifts a tied group by the batch's token-weighted mean.
NOT_GROUP_CENTRED = {"grpo_passk", "reinforce_pp_baseline_verl"}


@pytest.mark.parametrize("name", sorted(set(_shipped(ADVANTAGE_ESTIMATORS)) - NOT_GROUP_CENTRED))
def test_advantages_zero_mean_and_exactly_zero_on_ties(name: str) -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(size=(16, 8))
    r[3] = 0.1  # a tied group: all answers well-formed and wrong
    r[7] = 1.1
    adv = ADVANTAGE_ESTIMATORS[name](r, 1e-4, True)
    np.testing.assert_allclose(adv.mean(axis=1), 0.0, atol=1e-12)
    assert np.all(adv[3] == 0.0) and np.all(adv[7] == 0.0)


def test_dr_grpo_and_rloo_hand_computed() -> None:
    r = np.array([[1.1, 0.1, 0.1]])
    np.testing.assert_allclose(dr_grpo_advantages(r), [[2 / 3, -1 / 3, -1 / 3]])
    # RLOO: r_i - mean of the others
    np.testing.assert_allclose(rloo_advantages(r), [[1.1 - 0.1, 0.1 - 0.6, 0.1 - 0.6]])


def test_advantages_reject_bad_shapes() -> None:
    with pytest.raises(ValueError, match="G >= 2"):
        grpo_advantages(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="finite"):
        grpo_advantages(np.array([[np.nan, 1.0]]))


@pytest.mark.parametrize("eps", [0.1, 0.2, 0.3])
def test_clipped_ratio_stays_in_band_for_extreme_ratios(eps: float) -> None:
    ratios = np.array([0.0, 1e-12, 0.5, 1.0, 2.0, 1e6, np.inf])
    clipped = clip_ratio(ratios, eps)
    assert np.all(clipped >= 1 - eps) and np.all(clipped <= 1 + eps)


def test_clipped_surrogate_values_and_gradient() -> None:
    eps = 0.2
    logp_old = np.zeros(4)
    logp = np.log(np.array([1.5, 1.5, 0.5, 1.1]))  # ratios
    adv = np.array([1.0, -1.0, -1.0, 2.0])
    obj, grad, clipped = clipped_surrogate(logp, logp_old, adv, eps)
    # rho=1.5, A=+1: min(1.5, 1.2) = 1.2 (clipped, no gradient)
    # rho=1.5, A=-1: min(-1.5, -1.2) = -1.5 (unclipped, gradient rho*A)
    # rho=0.5, A=-1: min(-0.5, -0.8) = -0.8 (clipped)
    # rho=1.1, A=2: inside the band, 2.2 with gradient 2.2
    np.testing.assert_allclose(obj, [1.2, -1.5, -0.8, 2.2])
    np.testing.assert_allclose(grad, [0.0, -1.5, 0.0, 2.2])
    assert clipped.tolist() == [True, False, True, False]


def test_k3_nonnegative_and_zero_for_identical_policies() -> None:
    rng = np.random.default_rng(1)
    logp = np.log(rng.dirichlet(np.ones(5), size=200)).reshape(-1)
    logp_ref = np.log(rng.dirichlet(np.ones(5), size=200)).reshape(-1)
    value, _ = kl_k3(logp, logp_ref)
    assert np.all(value >= 0)
    same, grad = kl_k3(logp, logp)
    assert np.all(same == 0.0) and np.all(grad == 0.0)
    # hand value: r = 0.5 -> 0.5 - log 0.5 - 1
    v, g = kl_k3(np.array([np.log(0.4)]), np.array([np.log(0.2)]))
    np.testing.assert_allclose(v, [0.5 - np.log(0.5) - 1.0])
    np.testing.assert_allclose(g, [1 - 0.5])


def test_k3_is_unbiased_for_kl() -> None:
    rng = np.random.default_rng(2)
    p = np.array([0.7, 0.2, 0.1])
    q = np.array([0.3, 0.3, 0.4])
    samples = rng.choice(3, size=200_000, p=p)
    est, _ = kl_k3(np.log(p[samples]), np.log(q[samples]))
    exact = float((p * np.log(p / q)).sum())
    assert abs(est.mean() - exact) < 0.01


def _fd_case(seed: int = 3):
    rng = np.random.default_rng(seed)
    n, length = 6, 4
    mask = np.ones((n, length))
    mask[0, 2:] = 0
    mask[3, 1:] = 0
    logp_old = np.log(rng.uniform(0.1, 0.9, (n, length))) * mask
    logp_ref = np.log(rng.uniform(0.1, 0.9, (n, length))) * mask
    # stay away from the clip kinks, where the loss is not differentiable
    logp = logp_old + rng.choice([-0.05, 0.05, 0.5, -0.6, 1.6], size=(n, length)) * mask
    adv = np.repeat(rng.normal(size=(n, 1)), length, axis=1)
    return logp, logp_old, logp_ref, adv, mask


def _numeric_grad(loss, logp: np.ndarray, h: float = 1e-6) -> np.ndarray:
    numeric = np.zeros_like(logp)
    for idx in np.ndindex(*logp.shape):
        up, down = logp.copy(), logp.copy()
        up[idx] += h
        down[idx] -= h
        numeric[idx] = (loss(up) - loss(down)) / (2 * h)
    return numeric


#: (policy_loss, extra settings) whose value is differentiable in logp (cispo's stop-gradient weight is
#: tested separately). Dual clip c = 1.5 is crossed by the test's ratios exp(0.5), exp(1.6).
SURROGATE_CASES = [
    ("vanilla", {}),
    ("vanilla", {"clip_eps_high": 0.28}),
    ("vanilla", {"clip_eps_high": 0.28, "dual_clip_c": 1.5}),
    ("gspo", {"clip_eps_high": 0.28}),
    ("kl_cov", {"kl_cov_ratio": 0.2, "kl_cov_coef": 0.7}),
]


@pytest.mark.parametrize("kl", sorted(KL_ESTIMATORS))
@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
@pytest.mark.parametrize(("policy_loss", "extra"), SURROGATE_CASES)
def test_loss_gradient_matches_finite_differences(kl: str, agg: str, policy_loss: str, extra: dict) -> None:
    if policy_loss == "gspo" and agg != "seq_mean_token_mean":
        pytest.skip("GSPO is defined with each answer weighted once (the config enforces it)")
    logp, logp_old, logp_ref, adv, mask = _fd_case()
    settings = LossSettings(beta=0.04, kl_estimator=kl, aggregation=agg, policy_loss=policy_loss,
                            max_length=6, surrogate=SurrogateSettings(clip_eps=0.2, **extra))

    def loss(x: np.ndarray) -> float:
        return grpo_token_loss(x, logp_old, logp_ref, adv, mask, settings).loss

    terms = grpo_token_loss(logp, logp_old, logp_ref, adv, mask, settings)
    np.testing.assert_allclose(terms.grad_logp, _numeric_grad(loss, logp), atol=1e-7)
    assert np.all(terms.grad_logp[mask == 0] == 0)


def test_cispo_gradient_is_the_stop_gradient_weight_times_the_advantage() -> None:
    # With the ratio held at its current value (the stop-gradient), the loss is linear in logp with
    # slope -w * clip(rho) * A: finite differences of that frozen-ratio loss match the gradient.
    logp, logp_old, logp_ref, adv, mask = _fd_case(4)
    settings = LossSettings(beta=0.04, policy_loss="cispo",
                            surrogate=SurrogateSettings(clip_eps=0.2, clip_eps_high=0.28))
    shift = logp - logp_old

    def frozen_ratio_loss(x: np.ndarray) -> float:
        return grpo_token_loss(x, x - shift, logp_ref, adv, mask, settings).loss

    terms = grpo_token_loss(logp, logp_old, logp_ref, adv, mask, settings)
    np.testing.assert_allclose(terms.grad_logp, _numeric_grad(frozen_ratio_loss, logp), atol=1e-7)


def test_clip_higher_hand_computed() -> None:
    logp_old = np.zeros(3)
    logp = np.log(np.array([1.25, 1.25, 0.7]))
    adv = np.array([1.0, -1.0, -1.0])
    # symmetric 0.2: rho=1.25, A=+1 is clipped to 1.2; with eps_high = 0.28 it is inside the band
    obj, grad, clipped = clipped_surrogate(logp, logp_old, adv, 0.2)
    np.testing.assert_allclose(obj, [1.2, -1.25, -0.8])
    np.testing.assert_allclose(grad, [0.0, -1.25, 0.0])
    obj, grad, clipped = clipped_surrogate(logp, logp_old, adv, 0.2, clip_eps_high=0.28)
    np.testing.assert_allclose(obj, [1.25, -1.25, -0.8])
    np.testing.assert_allclose(grad, [1.25, -1.25, 0.0])
    assert clipped.tolist() == [False, False, True]
    np.testing.assert_allclose(clip_ratio(np.array([0.0, 5.0]), 0.2, 0.28), [0.8, 1.28])


def test_dual_clip_hand_computed_and_equal_to_trl_delta() -> None:
    logp_old = np.zeros(4)
    logp = np.log(np.array([4.0, 2.0, 4.0, 0.5]))
    adv = np.array([-1.0, -1.0, 1.0, -1.0])
    obj, grad, clipped = clipped_surrogate(logp, logp_old, adv, 0.2, dual_clip_c=3.0)
    # rho=4, A=-1: PPO gives min(-4, -1.2) = -4; the dual clip bounds it at c*A = -3 (no gradient)
    # rho=2, A=-1: -2 (above -3: PPO's value and gradient); rho=4, A=+1: PPO's 1.2; rho=.5: -0.8
    np.testing.assert_allclose(obj, [-3.0, -2.0, 1.2, -0.8])
    np.testing.assert_allclose(grad, [0.0, -2.0, 0.0, 0.0])
    assert clipped.tolist() == [True, False, True, True]
    # TRL's two-sided clip (delta, INTELLECT-2): min(min(rho, delta) A, clip(rho) A) is the same bound.
    rng = np.random.default_rng(0)
    lr = rng.normal(scale=1.5, size=500)
    a = rng.normal(size=500)
    delta, eps = 3.0, 0.2
    ratio = np.exp(lr)
    trl = np.minimum(np.minimum(ratio, delta) * a, np.clip(ratio, 1 - eps, 1 + eps) * a)
    ours, _, _ = clipped_surrogate(lr, np.zeros(500), a, eps, dual_clip_c=delta)
    np.testing.assert_allclose(ours, trl)


def test_log_ratio_is_clamped_so_extreme_ratios_stay_finite() -> None:
    # exp(800) overflows to inf, and inf * 0 is NaN; verl clamps log rho to +-20.
    logp = np.array([0.0, 0.0, 0.0, -900.0])
    logp_old = np.array([-800.0, -800.0, -800.0, 0.0])
    adv = np.array([0.0, -1.0, 1.0, -1.0])
    with np.errstate(all="raise"):
        obj, grad, _ = clipped_surrogate(logp, logp_old, adv, 0.2)
    assert np.all(np.isfinite(obj)) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(obj, [0.0, -np.exp(20.0), 1.2, -0.8])
    np.testing.assert_allclose(grad, 0.0)  # clamped (or clipped): constant in logp
    for name in _shipped(POLICY_LOSSES):
        mask = np.ones((1, 4))
        cfg = GRPOConfig.preset("paper", policy_loss=name)
        defaults = {f: getattr(cfg, f) for f in POLICY_LOSSES[name].settings}  # what it reads
        settings = SurrogateSettings(rng=np.random.default_rng(0), **defaults)
        o, g, _ = POLICY_LOSSES[name](logp[None], logp_old[None], adv[None], mask, settings)
        assert np.all(np.isfinite(o)) and np.all(np.isfinite(g)), name


def test_gspo_hand_computed() -> None:
    # two answers: log-ratios (0.2, -0.1) -> s = exp(0.05), inside the band; (0.5, pad) -> s = e^0.5,
    # clipped at 1.2 for A > 0.
    logp_old = np.zeros((2, 2))
    logp = np.array([[0.2, -0.1], [0.5, 0.0]])
    mask = np.array([[1.0, 1.0], [1.0, 0.0]])
    adv = np.array([[1.0, 1.0], [2.0, 2.0]])
    obj, grad, clipped = gspo_surrogate(logp, logp_old, adv, mask, SurrogateSettings(clip_eps=0.2))
    s = np.exp(0.05)
    np.testing.assert_allclose(obj[0], [s, s])
    np.testing.assert_allclose(obj[1, 0], 1.2 * 2.0)
    np.testing.assert_allclose(grad, [[s, s], [0.0, 0.0]])
    assert clipped[:, 0].tolist() == [False, True]
    # the loss is GSPO's: each answer's clipped sequence objective once, averaged over answers
    settings = LossSettings(beta=0.0, policy_loss="gspo", surrogate=SurrogateSettings(clip_eps=0.2))
    terms = grpo_token_loss(logp, logp_old, logp, adv, mask, settings)
    np.testing.assert_allclose(terms.policy_loss, -(s + 2.4) / 2)


def test_gspo_and_gmpo_ignore_what_the_padding_holds() -> None:
    from agents.grpo.objective import geo_mean_surrogate

    logp_old = np.zeros((2, 3))
    logp = np.array([[0.1, -0.05, 0.0], [0.3, 0.0, 0.0]])
    mask = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = np.array([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
    noisy = np.where(mask > 0, logp, 3.0)  # padding positions hold large log-ratios
    s = SurrogateSettings(clip_eps=0.2)
    for surrogate in (gspo_surrogate, geo_mean_surrogate):
        clean_obj, clean_grad, _ = surrogate(logp, logp_old, adv, mask, s)
        obj, grad, clipped = surrogate(noisy, logp_old, adv, mask, s)
        np.testing.assert_allclose(obj * mask, clean_obj * mask)
        np.testing.assert_allclose(grad * mask, clean_grad * mask)
        assert not clipped[mask == 0].any(), surrogate.__name__


def test_clip_cov_never_removes_a_token_ppo_clipped() -> None:
    logp_old = np.zeros((1, 4))
    logp = np.array([[0.5, 0.5, 0.0, -0.1]])  # ratio e^0.5 > 1.2 with A > 0 on the first two: PPO clips them
    adv = np.array([[1.0, 2.0, -1.0, 0.5]])
    mask = np.ones((1, 4))
    s = SurrogateSettings(clip_eps=0.2, clip_cov_ratio=1.0, clip_cov_lb=-100.0, clip_cov_ub=100.0,
                          rng=np.random.default_rng(0))  # every unclipped token is a candidate, all removed
    obj, grad, marked = clip_cov_surrogate(logp, logp_old, adv, mask, s)
    np.testing.assert_allclose(obj[0, :2], [1.2, 2.4])
    assert grad[0].tolist() == [0.0, 0.0, 0.0, 0.0] and obj[0, 2:].tolist() == [0.0, 0.0]
    assert marked.all()


def test_cispo_hand_computed() -> None:
    logp_old = np.log(np.array([0.2, 0.5, 0.5]))
    logp = np.log(np.array([0.3, 0.2, 0.55]))  # ratios 1.5, 0.4, 1.1
    adv = np.array([2.0, -1.0, 1.0])
    obj, grad, clipped = cispo_surrogate(logp, logp_old, adv, np.ones(3),
                                         SurrogateSettings(clip_eps=0.2, clip_eps_high=0.28))
    # weights clip(rho, 0.8, 1.28) = 1.28, 0.8, 1.1; every token keeps a gradient (weight * A)
    np.testing.assert_allclose(grad, [1.28 * 2.0, -0.8, 1.1])
    np.testing.assert_allclose(obj, [1.28 * 2.0 * np.log(0.3), -0.8 * np.log(0.2), 1.1 * np.log(0.55)])
    assert clipped.tolist() == [True, True, False]


def test_kl_cov_hand_computed() -> None:
    # 4 real tokens; covariance (A - mean A) * (logp - mean logp) is largest for token 2
    adv = np.array([[1.0, -1.0, 2.0, 0.0]])
    logp = np.log(np.array([[0.5, 0.5, 0.9, 0.1]]))
    logp_old = logp - np.array([[0.1, 0.1, 0.3, 0.1]])
    mask = np.ones((1, 4))
    cov = (adv - adv.mean()) * (logp - logp.mean())
    assert int(np.argmax(cov)) == 2
    obj, grad, selected = kl_cov_surrogate(logp, logp_old, adv, mask,
                                           SurrogateSettings(kl_cov_ratio=0.25, kl_cov_coef=0.5))
    ratio = np.exp([0.1, 0.1, 0.3, 0.1])
    np.testing.assert_allclose(obj[0], ratio * adv[0] - np.array([0, 0, 0.5 * 0.3, 0]))
    np.testing.assert_allclose(grad[0], ratio * adv[0] - np.array([0, 0, 0.5, 0]))
    assert selected.tolist() == [[False, False, True, False]]
    # the ratio is not clipped: a ratio of e^1.6 with A > 0 keeps its gradient
    _, g, _ = kl_cov_surrogate(np.array([[1.6]]), np.zeros((1, 1)), np.ones((1, 1)), np.ones((1, 1)),
                               SurrogateSettings(kl_cov_ratio=1.0, kl_cov_coef=0.0))
    np.testing.assert_allclose(g, [[np.exp(1.6)]])


def test_clip_cov_hand_computed_and_gradient() -> None:
    # covariances (A - mean A)(logp - mean logp) of 4 real tokens: 1.5 and 3 lie inside (1, 5)
    adv = np.array([[2.0, -2.0, 0.0, 0.0]])
    logp = np.array([[-0.25, -1.75, -1.0, -1.0]])  # mean -1: centred (0.75, -0.75, 0, 0)
    logp_old = logp.copy()  # ratio 1: no PPO clip
    mask = np.ones((1, 4))
    cov = (adv - adv.mean()) * (logp - logp.mean())
    np.testing.assert_allclose(cov, [[1.5, 1.5, 0.0, 0.0]])
    s = SurrogateSettings(clip_cov_ratio=0.25, clip_cov_lb=1.0, clip_cov_ub=5.0, rng=np.random.default_rng(0))
    obj, grad, removed = clip_cov_surrogate(logp, logp_old, adv, mask, s)
    # one token (int(0.25 * 4) = 1) of the two candidates is removed: its value and gradient are 0
    assert removed.sum() == 1 and removed[0, :2].sum() == 1
    kept = ~removed[0]
    np.testing.assert_allclose(obj[0][kept], adv[0][kept])
    np.testing.assert_allclose(grad[0][kept], adv[0][kept])
    assert obj[0][~kept] == 0.0 and grad[0][~kept] == 0.0
    # the same seed draws the same token; a window that holds no token removes nothing
    again = clip_cov_surrogate(logp, logp_old, adv, mask, SurrogateSettings(
        clip_cov_ratio=0.25, clip_cov_lb=1.0, clip_cov_ub=5.0, rng=np.random.default_rng(0)))[2]
    np.testing.assert_array_equal(again, removed)
    none = clip_cov_surrogate(logp, logp_old, adv, mask, SurrogateSettings(
        clip_cov_ratio=2e-4, clip_cov_lb=2.0, clip_cov_ub=5.0, rng=np.random.default_rng(0)))[2]
    assert not none.any()
    with pytest.raises(ValueError, match="clip_cov needs a random generator"):
        clip_cov_surrogate(logp, logp_old, adv, mask, SurrogateSettings())


@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
def test_clip_cov_gradient_matches_finite_differences(agg: str) -> None:
    # the token draw is fixed by reseeding, so the loss is a smooth function of logp near the point
    logp, logp_old, logp_ref, adv, mask = _fd_case(6)
    adv = adv * 4.0  # covariances reach the (1, 5) window

    def terms_at(x: np.ndarray):
        surrogate = SurrogateSettings(clip_eps=0.2, clip_cov_ratio=0.1, clip_cov_lb=1.0, clip_cov_ub=5.0,
                                      rng=np.random.default_rng(1))
        return grpo_token_loss(x, logp_old, logp_ref, adv, mask,
                               LossSettings(beta=0.04, aggregation=agg, policy_loss="clip_cov",
                                            max_length=6, surrogate=surrogate))

    terms = terms_at(logp)
    assert terms.clip_frac > 0
    np.testing.assert_allclose(terms.grad_logp, _numeric_grad(lambda x: terms_at(x).loss, logp), atol=1e-7)


def test_k3_clamp_hand_computed() -> None:
    # r = pi_ref / pi = e^5 gives k3 = e^5 - 5 - 1 = 142.4 > K3_CLAMP: clamped to
    # 10 with no gradient (the unclamped gradient 1 - e^5 = -147 would dominate the update).
    logp = np.log(np.array([0.001, 0.5]))
    value, grad = kl_k3(logp, logp + np.array([5.0, 1.0]))
    assert value[0] == K3_CLAMP and grad[0] == 0.0
    np.testing.assert_allclose(value[1], np.e - 1 - 1)
    np.testing.assert_allclose(grad[1], 1 - np.e)


def test_entropy_bonus_hand_computed_and_gradient() -> None:
    logits = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -np.inf, -np.inf]])  # row 2: two masked tokens
    logp_all = log_softmax(np.where(np.isinf(logits), -1e300, logits))
    logp_all[1, 2:] = -np.inf
    value, grad = entropy_bonus(logp_all, np.array([0.5, 0.5]))
    np.testing.assert_allclose(value, 0.5 * np.log(4) + 0.5 * np.log(2))
    np.testing.assert_allclose(grad, 0.0, atol=1e-15)  # uniform rows maximise entropy
    assert np.all(np.isfinite(grad))

    rng = np.random.default_rng(5)
    z = rng.normal(size=(3, 5))
    w = np.array([0.2, 0.3, 0.5])

    def bonus(x: np.ndarray) -> float:
        return entropy_bonus(log_softmax(x), w)[0]

    _, analytic = entropy_bonus(log_softmax(z), w)
    np.testing.assert_allclose(analytic, _numeric_grad(bonus, z), atol=1e-8)


def test_batch_level_advantages_hand_computed() -> None:
    r = np.array([[1.0, 0.0], [1.0, 1.0], [3.0, 1.0]])
    # TRL scale_rewards="batch": group mean subtracted, divided by the std of all six rewards
    batch_std = np.std(r, ddof=1)
    np.testing.assert_allclose(grpo_batch_std_advantages(r),
                               [[0.5 / (batch_std + 1e-4), -0.5 / (batch_std + 1e-4)], [0, 0],
                                [1.0 / (batch_std + 1e-4), -1.0 / (batch_std + 1e-4)]])
    # REINFORCE++-baseline: centred rewards (0.5, -0.5, 0, 0, 1, -1), mean 0, std over the batch
    centred = np.array([0.5, -0.5, 0.0, 0.0, 1.0, -1.0])
    std = centred.std(ddof=1)
    np.testing.assert_allclose(reinforce_pp_baseline_advantages(r).reshape(-1), centred / (std + 1e-4))
    # group-level std would weight the first group up (its std is smaller): batch scaling does not
    adv = grpo_batch_std_advantages(r)
    assert adv[2, 0] == pytest.approx(2 * adv[0, 0])


def test_mask_truncated_and_informative_groups_hand_computed() -> None:
    mask = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    np.testing.assert_array_equal(mask_truncated(mask, np.array([False, True, False])),
                                  [[1, 1, 0], [0, 0, 0], [1, 0, 0]])
    with pytest.raises(ValueError, match="truncated has shape"):
        mask_truncated(mask, np.array([True]))
    r = np.array([[0.1, 0.1, 0.1], [0.0, 1.1, 0.1], [1.1, 1.1, 1.1]])
    assert informative_groups(r).tolist() == [False, True, False]


def test_aggregations_weight_tokens_as_documented() -> None:
    mask = np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(LOSS_AGGREGATIONS["seq_mean_token_mean"](mask),
                               [[0.25, 0.25, 0, 0], [0.125] * 4])
    np.testing.assert_allclose(LOSS_AGGREGATIONS["token_mean"](mask), mask / 6)
    np.testing.assert_allclose(LOSS_AGGREGATIONS["seq_mean_token_sum"](mask), mask / 8)
    np.testing.assert_allclose(LOSS_AGGREGATIONS["seq_mean_token_sum"](mask, 5), mask / 10)


def test_seq_mean_token_sum_weight_does_not_depend_on_the_longest_answer_in_the_batch() -> None:
    # The same 2-token answer, batched once with a 2-token and once with a 4-token
    # answer, must get the same weight (Dr. GRPO / TRL divide by a fixed max length).
    short = np.array([[1.0, 1.0], [1.0, 1.0]])
    long_ = np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    agg = LOSS_AGGREGATIONS["seq_mean_token_sum"]
    assert agg(short, 6)[0, 0] == agg(long_, 6)[0, 0] == 1 / 12
    with pytest.raises(ValueError, match="max_length=3 is shorter than the batch's padded length 4"):
        agg(long_, 3)


def test_readme_maps_every_variant_to_verl_and_trl() -> None:
    # The option-name map is complete for both verl and TRL: every name a user can select and every
    # GRPOConfig field of the objective appears in docs/variants.md's table, with a verl and a TRL column.
    import dataclasses
    from pathlib import Path

    from agents.grpo.config import GRPOConfig

    root = Path(__file__).resolve().parent.parent
    readme = (root / "docs" / "variants.md").read_text(encoding="utf-8")
    start = readme.index("# GRPO variants (verl / TRL names)")
    table = readme[start : readme.index("\n## ", start)]
    assert "| variant (paper) | ours (`GRPOConfig`) | verl | TRL |" in table
    names = [*_shipped(ADVANTAGE_ESTIMATORS), *CRITIC_ESTIMATORS, *KL_ESTIMATORS, *LOSS_AGGREGATIONS,
             *_shipped(POLICY_LOSSES)]
    missing = [n for n in names if f'"{n}"' not in table]
    not_objective = {"group_size", "prompts_per_iter", "minibatches", "learning_rate", "tabular_optimizer",
                     "max_grad_norm"}  # rollout and optimiser settings, not objective variants
    fields = [f.name for f in dataclasses.fields(GRPOConfig) if f.name not in not_objective]
    missing += [f for f in fields if f"`{f}" not in table]
    assert not missing, f"the table of docs/variants.md lacks {missing}"
    for row in table.splitlines()[table.splitlines().index(
            "| variant (paper) | ours (`GRPOConfig`) | verl | TRL |") + 2:]:
        if not row.startswith("|"):
            break
        assert row.count("|") >= 5 and all(c.strip() for c in row.strip("|").split("|")), row


# ------------------------------------------------------------------------------------------------
# The advantage estimators' contract: defaults, both std conventions, eps, dtypes, named errors
# ------------------------------------------------------------------------------------------------
def test_register_advantage_adds_the_function_and_refuses_bad_or_taken_names() -> None:
    from agents.grpo.advantages import register_advantage

    def mine(rewards, eps=1e-4, unbiased_std=True, lengths=None):  # type: ignore[no-untyped-def]
        return np.zeros_like(rewards)

    try:
        assert register_advantage("test_only_estimator")(mine) is mine
        assert ADVANTAGE_ESTIMATORS["test_only_estimator"] is mine
        with pytest.raises(ValueError, match=r"^advantage estimator 'test_only_estimator' is already "
                                             r"registered; choose another name$"):
            register_advantage("test_only_estimator")
    finally:
        ADVANTAGE_ESTIMATORS.pop("test_only_estimator", None)
    for bad in ("", 3, None):
        with pytest.raises(ValueError, match=rf"^an advantage estimator's name must be a non-empty string, "
                                             rf"got {re.escape(repr(bad))}$"):
            register_advantage(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(_shipped(ADVANTAGE_ESTIMATORS)))
def test_every_estimator_takes_two_answers_refuses_one_and_non_finite_rewards(name: str) -> None:
    fn = ADVANTAGE_ESTIMATORS[name]
    adv = fn(np.array([[1, 0], [0, 1]], np.int64))  # the defaults; int rewards give float advantages
    assert adv.dtype == np.float64 and adv.shape == (2, 2)
    if name == "grpo_passk":  # only each group's best answer is credited
        assert adv[0, 0] == adv[1, 1] > 0 and adv[0, 1] == adv[1, 0] == 0
    else:
        assert np.all(adv[:, 0] == -adv[:, 1]) and np.all(adv[0] == adv[1, ::-1])
    for shape in ((3, 1), (4,), (1, 2, 2)):
        with pytest.raises(ValueError, match=rf"^rewards must have shape \(B, G\) with G >= 2, got "
                                             rf"{re.escape(str(shape))}$"):
            fn(np.zeros(shape))
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="^rewards must be finite$"):
            fn(np.array([[0.0, 1.0], [bad, 1.0]]))


def test_each_estimator_s_defaults_std_convention_and_eps_by_hand() -> None:
    from agents.grpo.advantages import grpo_passk_advantages, reinforce_pp_baseline_verl_advantages

    r = np.array([[1.0, 0.0, 0.0], [2.0, 2.0, 5.0]])
    centred = r - r.mean(axis=1, keepdims=True)
    for unbiased, ddof in ((True, 1), (False, 0)):
        for eps in (1e-4, 0.5):
            std = r.std(axis=1, ddof=ddof, keepdims=True)
            np.testing.assert_allclose(grpo_advantages(r, eps, unbiased), centred / (std + eps), rtol=1e-13)
            np.testing.assert_allclose(grpo_batch_std_advantages(r, eps, unbiased),
                                       centred / (r.std(ddof=ddof) + eps), rtol=1e-13)
            np.testing.assert_allclose(reinforce_pp_baseline_advantages(r, eps, unbiased),
                                       (centred - centred.mean()) / (centred.std(ddof=ddof) + eps),
                                       rtol=1e-13)
            best = (r.max(axis=1) - np.sort(r, axis=1)[:, -2]) / (r.std(axis=1, ddof=ddof) + eps)
            np.testing.assert_allclose(grpo_passk_advantages(r, eps, unbiased),
                                       [[best[0], 0, 0], [0, 0, best[1]]], rtol=1e-13)
            # eps and the std convention do not enter Dr. GRPO or RLOO
            np.testing.assert_allclose(dr_grpo_advantages(r, eps, unbiased), centred, rtol=1e-13)
            np.testing.assert_allclose(rloo_advantages(r, eps, unbiased), centred * 3 / 2, rtol=1e-13)
    # the defaults are eps = 1e-4 and the unbiased std
    for fn in (grpo_advantages, grpo_batch_std_advantages, reinforce_pp_baseline_advantages,
               grpo_passk_advantages, reinforce_pp_baseline_verl_advantages):
        np.testing.assert_array_equal(fn(r), fn(r, 1e-4, True))
    # verl's REINFORCE++-baseline: one token each, T = 6; Bessel's T / (T - 1) only when unbiased
    t = 6.0
    m = centred.sum() / (t + 1e-8)
    for unbiased, bessel in ((True, t / (t - 1)), (False, 1.0)):
        v = ((centred - m) ** 2).sum() / (t + 1e-8) * bessel
        np.testing.assert_allclose(reinforce_pp_baseline_verl_advantages(r, 0.3, unbiased),
                                   (centred - m) / np.sqrt(v + 1e-8), rtol=1e-13)


def test_verl_reinforce_pp_weighs_answers_by_their_lengths_and_refuses_bad_lengths() -> None:
    from agents.grpo.advantages import reinforce_pp_baseline_verl_advantages as verl_rpp

    r = np.array([[1.0, 0.0]])
    # lengths 2 and 0: T = 2 token copies of +0.5; m = 1 / (2 + 1e-8), v = 2 (0.5 - m)^2 / (2 + 1e-8) * 2
    got = verl_rpp(r, lengths=np.array([[2, 0]]))
    m = 1.0 / (2 + 1e-8)
    v = 2 * (0.5 - m) ** 2 / (2 + 1e-8) * 2
    np.testing.assert_allclose(got, (np.array([[0.5, -0.5]]) - m) / np.sqrt(v + 1e-8), rtol=1e-12)
    np.testing.assert_array_equal(verl_rpp(r, lengths=[2, 0]), got)  # a flat list of the (B, G) counts
    for bad, total in (([[1, 0]], "1.0"), ([[3, -1]], "2.0"), ([[0, 0]], "0.0")):
        with pytest.raises(ValueError, match=rf"^lengths must be non-negative token counts summing to at "
                                             rf"least 2, got {total}$"):
            verl_rpp(r, lengths=np.array(bad))


def test_token_entropies_are_per_row_nats_and_skip_masked_actions() -> None:
    from agents.grpo.objective import token_entropies
    logp_all = np.log(np.array([[0.5, 0.5, 0.0], [0.25, 0.25, 0.5], [1.0, 0.0, 0.0]]))
    h = token_entropies(logp_all)
    assert h.shape == (3,)
    np.testing.assert_allclose(h, [np.log(2.0), 1.5 * np.log(2.0), 0.0], atol=1e-12)


def test_kl_k1_is_the_log_ratio_with_unit_gradient() -> None:
    from agents.grpo.objective import kl_k1
    logp = np.array([-1.0, -2.0], dtype=np.float32)
    value, grad = kl_k1(logp, np.array([-0.5, -3.0]))
    np.testing.assert_allclose(value, [-0.5, 1.0])
    np.testing.assert_array_equal(grad, [1.0, 1.0])
    assert grad.shape == logp.shape and grad.dtype == logp.dtype
