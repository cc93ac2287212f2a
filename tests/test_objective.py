"""The GRPO objective pinned to hand-computed numbers (the lesson's "Verify It" list and more)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.objective import (
    ADVANTAGE_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    clip_ratio,
    clipped_surrogate,
    dr_grpo_advantages,
    grpo_advantages,
    grpo_token_loss,
    kl_k3,
    rloo_advantages,
)


def test_grpo_advantages_hand_computed() -> None:
    r = np.array([[1.0, 0.0, 0.0, 1.0]])
    # mean 0.5, unbiased std = sqrt(sum((r-0.5)^2) / 3) = sqrt(1/3)
    expected = (r - 0.5) / (np.sqrt(1 / 3) + 1e-4)
    np.testing.assert_allclose(grpo_advantages(r), expected)
    biased = (r - 0.5) / (0.5 + 1e-4)
    np.testing.assert_allclose(grpo_advantages(r, unbiased_std=False), biased)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
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


@pytest.mark.parametrize("kl", sorted(KL_ESTIMATORS))
@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
def test_loss_gradient_matches_finite_differences(kl: str, agg: str) -> None:
    rng = np.random.default_rng(3)
    n, length = 6, 4
    mask = np.ones((n, length))
    mask[0, 2:] = 0
    mask[3, 1:] = 0
    logp_old = np.log(rng.uniform(0.1, 0.9, (n, length))) * mask
    logp_ref = np.log(rng.uniform(0.1, 0.9, (n, length))) * mask
    # stay away from the clip kinks, where the loss is not differentiable
    logp = logp_old + rng.choice([-0.05, 0.05, 0.5, -0.6], size=(n, length)) * mask
    adv = np.repeat(rng.normal(size=(n, 1)), length, axis=1)

    def loss(x: np.ndarray) -> float:
        return grpo_token_loss(x, logp_old, logp_ref, adv, mask, clip_eps=0.2, beta=0.04,
                               kl_estimator=kl, aggregation=agg).loss

    terms = grpo_token_loss(logp, logp_old, logp_ref, adv, mask, clip_eps=0.2, beta=0.04,
                            kl_estimator=kl, aggregation=agg)
    h = 1e-6
    numeric = np.zeros_like(logp)
    for idx in np.ndindex(*logp.shape):
        up, down = logp.copy(), logp.copy()
        up[idx] += h
        down[idx] -= h
        numeric[idx] = (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(terms.grad_logp, numeric, atol=1e-7)
    assert np.all(terms.grad_logp[mask == 0] == 0)


def test_aggregations_weight_tokens_as_documented() -> None:
    mask = np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(LOSS_AGGREGATIONS["seq_mean_token_mean"](mask),
                               [[0.25, 0.25, 0, 0], [0.125] * 4])
    np.testing.assert_allclose(LOSS_AGGREGATIONS["token_mean"](mask), mask / 6)
    np.testing.assert_allclose(LOSS_AGGREGATIONS["seq_mean_token_sum"](mask), mask / 8)
