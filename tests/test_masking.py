"""Grammar-constrained decoding in GRPO: masked tokens get probability 0 and no gradient, every
log-prob (sampling, current, reference) uses the same mask, and unmasked behaviour is unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401
from agents.grpo.config import GRPOConfig
from agents.grpo import GRPO
from agents.policies.mlp import MLPPolicy
from agents.policies.torch_base import masked_log_softmax
from agents.grpo.objective import LossTerms
from agents.policies import Loss, TabularPolicy, apply_mask, log_softmax, sample_categorical


def _masks(rng: np.random.Generator, n: int, v: int) -> np.ndarray:
    m = rng.random((n, v)) < 0.5
    m[np.arange(n), rng.integers(v, size=n)] = True  # at least one allowed token per row
    return m


def _unit_loss(logp: np.ndarray) -> LossTerms:
    return LossTerms(loss=float(-logp.sum()), policy_loss=0.0, kl=0.0, clip_frac=0.0,
                     grad_logp=-np.ones_like(logp))


def test_masked_sampling_never_draws_a_forbidden_token() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2000, 7)) * 3
    masks = _masks(rng, 2000, 7)
    draws = sample_categorical(apply_mask(logits, masks), rng)
    assert masks[np.arange(2000), draws].all()
    # and the allowed tokens keep their relative odds: row-wise renormalisation
    lp = log_softmax(apply_mask(logits, masks))
    assert np.all(np.exp(lp)[~masks] == 0.0)
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0)


def test_a_mask_that_allows_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="allows no token"):
        apply_mask(np.zeros((2, 3)), np.array([[True, False, False], [False, False, False]]))


def test_mlp_masked_tokens_get_zero_probability_and_no_gradient() -> None:
    rng = np.random.default_rng(1)
    masks = torch.as_tensor(_masks(rng, 64, 9))
    logits = torch.randn(64, 9, dtype=torch.float64, requires_grad=True)
    logp_all = masked_log_softmax(logits, masks.numpy())
    assert torch.all(logp_all[~masks] == float("-inf"))
    actions = torch.as_tensor([int(np.flatnonzero(m)[0]) for m in masks.numpy()])
    logp_all[torch.arange(64), actions].sum().backward()
    assert torch.all(torch.isfinite(logits.grad))
    assert torch.all(logits.grad[~masks] == 0.0)
    assert torch.any(logits.grad[masks] != 0.0)


def test_mlp_update_under_masks_has_finite_entropy_and_reference() -> None:
    space = gym.spaces.Box(0.0, 1.0, shape=(5,), dtype=np.float32)
    pol = MLPPolicy(space, 6, 1e-2, seed=0)
    rng = np.random.default_rng(2)
    obs = rng.random((32, 5))
    masks = _masks(rng, 32, 6)
    actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
    ref = pol.reference_logp(obs, actions, masks)
    # the reference is the initial net: its masked log-prob is the renormalised one
    expected = log_softmax(apply_mask(pol.logits(obs), masks))[np.arange(32), actions]
    np.testing.assert_allclose(ref, expected, atol=1e-12)
    stats = pol.update(obs, actions, Loss(_unit_loss), masks=masks)
    assert np.isfinite(stats.entropy) and stats.entropy > 0
    assert all(torch.all(torch.isfinite(p)) for p in pol.net.parameters())
    # the update raised the chosen tokens' masked log-probs
    after = log_softmax(apply_mask(pol.logits(obs), masks))[np.arange(32), actions]
    assert after.mean() > expected.mean()


def test_tabular_update_leaves_masked_logits_untouched() -> None:
    space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    pol = TabularPolicy(space, 5, 1.0)
    obs = np.array([[0.0, 1.0], [1.0, 0.0]])
    masks = np.array([[True, True, False, False, True], [False, True, True, False, False]])
    actions = np.array([0, 2])
    np.testing.assert_allclose(pol.reference_logp(obs, actions, masks), -np.log([3.0, 2.0]))
    stats = pol.update(obs, actions, Loss(_unit_loss), masks=masks)
    assert np.isfinite(stats.entropy)
    rows = pol._row_ids(obs, insert=False)
    assert np.all(pol.table[rows][~masks] == 0.0)
    assert np.all(pol.table[rows][masks] != 0.0)


def test_countdown_rollouts_are_grammatical_with_masks_and_not_without() -> None:
    kwargs = {"n_numbers": 3}
    cfg = GRPOConfig.preset("mlp", group_size=4, prompts_per_iter=4)
    masked = GRPO("rlvr/Countdown-v0", cfg, policy="mlp", seed=0, env_kwargs=kwargs)
    assert masked.use_masks
    batch = masked._runner.collect(masked.policy, masked.rng)
    assert batch.action_masks is not None and batch.action_masks.shape[:2] == batch.mask.shape
    assert batch.truncated is not None and not batch.truncated.any()  # EOS is always reachable
    assert batch.well_formed.mean() > 0.9  # only a division by zero (not masked) is malformed
    valid = batch.mask > 0
    assert batch.action_masks[valid, batch.actions[valid]].all()  # every sampled token was allowed
    assert np.all(np.isfinite(batch.logp_old))
    masked.learn(2000)
    assert np.isfinite(masked.last_metrics["train/entropy"])
    assert masked.last_metrics["rollout/format_violations"] < 0.1

    plain = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("mlp", group_size=4, prompts_per_iter=4,
                                                        action_masks=False),
                 policy="mlp", seed=0, env_kwargs=kwargs)
    assert not plain.use_masks
    batch = plain._runner.collect(plain.policy, plain.rng)
    assert batch.action_masks is None
    assert batch.well_formed.mean() < 0.5  # a random net writes mostly malformed answers


@pytest.mark.parametrize("vectorized", [False, True])
def test_list_and_vector_runners_sample_the_same_masked_answers(vectorized: bool) -> None:
    cfg = GRPOConfig.preset("mlp", group_size=4, prompts_per_iter=2)
    models = [GRPO("rlvr/Countdown-v0", cfg, policy="mlp", seed=3, env_kwargs={"n_numbers": 3},
                   vectorized=v) for v in (False, vectorized)]
    a, b = (m._runner.collect(m.policy, m.rng) for m in models)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.action_masks, b.action_masks)
    np.testing.assert_allclose(a.logp_old, b.logp_old)


@pytest.mark.parametrize("policy", ["tabular", "mlp"])
def test_masks_that_allow_everything_change_nothing(policy: str) -> None:
    """Arithmetic's masks allow every token: masked and unmasked training are identical."""
    runs = []
    for on in (True, False):
        model = GRPO("rlvr/Arithmetic-v0", GRPOConfig.preset(policy, action_masks=on), policy=policy,
                     seed=5)
        assert model.use_masks is on
        model.learn(3000)
        runs.append(model)
    on, off = runs
    for key, value in on.policy.state().items():
        np.testing.assert_array_equal(value, off.policy.state()[key])
    for key in ("rollout/reward_mean", "train/kl", "train/entropy"):
        assert on.last_metrics[key] == off.last_metrics[key]


def test_predict_with_masks_and_evaluation_use_them() -> None:
    model = GRPO("rlvr/Countdown-v0", policy="mlp", seed=0, env_kwargs={"n_numbers": 3})
    env = model.env
    obs, _ = env.reset(seed=0)
    mask = env.unwrapped.action_masks()
    for _ in range(50):
        action, _ = model.predict(obs, action_masks=mask)
        assert mask[int(action)]
    report = model.success("test", k=4, n_prompts=20)
    assert report.k == 4 and report.per_prompt_sampled.shape == (20,)
    assert report.greedy == model.evaluate("test", n_prompts=20)
