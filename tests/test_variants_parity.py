"""The GRPO variants against hand transcriptions of verl 0.9.1
(``verl/trainer/ppo/core_algos.py``) and TRL 1.16.0 (``trl/trainer/grpo_trainer.py``) in float64 torch,
to 1e-10, and every remaining difference from them pinned to a hand-computed value."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from agents import GRPO, GRPOConfig
from agents.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    LOSS_AGGREGATIONS,
    LossSettings,
    SurrogateSettings,
    geo_mean_surrogate,
    gspo_surrogate,
    grpo_passk_advantages,
    grpo_token_loss,
    high_entropy_tokens,
    kl_cov_surrogate,
    reinforce_pp_baseline_advantages,
    reinforce_pp_baseline_verl_advantages,
    sapo_surrogate,
)

torch = pytest.importorskip("torch")
TOL = 1e-10


def _batch(seed: int = 0, n: int = 6, length: int = 5, empty_row: bool = False, scale: float = 0.3):
    rng = np.random.default_rng(seed)
    logp_old = np.log(rng.uniform(0.05, 0.95, size=(n, length)))
    logp = logp_old + rng.normal(scale=scale, size=(n, length))
    adv = np.repeat(rng.normal(size=(n, 1)), length, axis=1)
    lengths = rng.integers(1, length + 1, size=n)
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.float64)
    if empty_row:
        mask[1] = 0.0
    return logp, logp_old, adv, mask


def _loss(logp, logp_old, logp_ref, adv, mask, *, policy_tokens=None, clip_eps=0.2, beta=0.0,
          kl_estimator="k3", aggregation="seq_mean_token_mean", policy_loss="vanilla", max_length=None,
          seq_mean_rows="all", sapo_taus=(1.0, 1.05), **surrogate):
    """grpo_token_loss with its settings spelled as keywords (the names of GRPOConfig's fields)."""
    settings = LossSettings(beta=beta, kl_estimator=kl_estimator, aggregation=aggregation,
                            policy_loss=policy_loss, max_length=max_length, seq_mean_rows=seq_mean_rows,
                            surrogate=SurrogateSettings(clip_eps=clip_eps, sapo_tau_pos=sapo_taus[0],
                                                        sapo_tau_neg=sapo_taus[1], **surrogate))
    return grpo_token_loss(logp, logp_old, logp_ref, adv, mask, settings, policy_tokens=policy_tokens)


def _loss_and_grad(fn, logp: np.ndarray):
    """A torch transcription's loss and d loss / d logp (autograd), in float64."""
    x = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    loss = fn(x)
    loss.backward()
    return float(loss.detach()), x.grad.numpy()


def _ours(logp, logp_old, adv, mask, **kw):
    terms = _loss(logp, logp_old, logp_old, adv, mask, clip_eps=kw.pop("clip_eps", 0.2), beta=0.0,
                  aggregation=kw.pop("aggregation", "seq_mean_token_mean"), **kw)
    return terms.loss, terms.grad_logp


def _t(a: np.ndarray):
    return torch.tensor(a, dtype=torch.float64)


# ------------------------------------------------------------------------------------------------
# SAPO
# ------------------------------------------------------------------------------------------------
def _sapo_reference(logp_old, adv, mask, tau_pos, tau_neg, len_eps):
    """verl compute_policy_loss_sapo / TRL loss_type="sapo": -sigmoid(tau (r - 1)) 4 / tau * A, then the
    per-answer token mean (TRL: / clamp(len, 1); verl: / (len + 1e-8)) and the mean over answers."""
    def fn(logp):
        ratio = torch.exp(torch.clamp(logp - _t(logp_old), -20.0, 20.0))
        a = _t(adv)
        taus = torch.where(a > 0, torch.tensor(tau_pos, dtype=torch.float64),
                           torch.tensor(tau_neg, dtype=torch.float64))
        per_token = -torch.sigmoid(taus * (ratio - 1.0)) * (4.0 / taus) * a
        m = _t(mask)
        lengths = m.sum(-1).clamp(min=1.0) if len_eps == 0 else m.sum(-1) + len_eps
        return ((per_token * m).sum(-1) / lengths).mean()
    return fn


@pytest.mark.parametrize("taus", [(1.0, 1.05), (0.5, 2.0)])
def test_sapo_matches_trl_and_verl_to_1e10(taus) -> None:
    logp, logp_old, adv, mask = _batch(1)
    ours = _ours(logp, logp_old, adv, mask, policy_loss="sapo", sapo_taus=taus)
    ref = _loss_and_grad(_sapo_reference(logp_old, adv, mask, *taus, len_eps=0.0), logp)
    assert abs(ours[0] - ref[0]) <= TOL
    np.testing.assert_allclose(ours[1], ref[1], atol=TOL, rtol=0)
    # verl divides each answer by |y| + 1e-8: the one remaining difference, of relative size 1e-8 / |y|
    verl = _loss_and_grad(_sapo_reference(logp_old, adv, mask, *taus, len_eps=1e-8), logp)
    assert 0 < abs(ours[0] - verl[0]) <= 1e-8 * abs(ours[0])


def test_sapo_hand_computed_gate() -> None:
    # rho = e^0.5, A = 1, tau = 1: f = sigmoid(e^0.5 - 1) * 4; df/dlogp = 4 s (1 - s) e^0.5
    s = 1 / (1 + math.exp(-(math.exp(0.5) - 1)))
    obj, grad, clipped = sapo_surrogate(np.array([[0.5]]), np.zeros((1, 1)), np.ones((1, 1)), np.ones((1, 1)),
                                        SurrogateSettings(sapo_tau_pos=1.0, sapo_tau_neg=1.05))
    assert obj[0, 0] == pytest.approx(4 * s, abs=1e-15) and not clipped.any()
    assert grad[0, 0] == pytest.approx(4 * s * (1 - s) * math.exp(0.5), abs=1e-15)
    # on-policy it is the plain policy gradient: f(1) = 2 / tau ... and f'(1) = 1
    _, g1, _ = sapo_surrogate(np.zeros((1, 1)), np.zeros((1, 1)), -np.ones((1, 1)), np.ones((1, 1)),
                              SurrogateSettings(sapo_tau_pos=1.0, sapo_tau_neg=3.0))
    assert g1[0, 0] == pytest.approx(-1.0, abs=1e-15)


# ------------------------------------------------------------------------------------------------
# GMPO (verl geo_mean)
# ------------------------------------------------------------------------------------------------
def _geo_mean_reference(logp_old, adv, mask, low, high, len_eps):
    """verl compute_policy_loss_geo_mean, with its ``+ 1e-8`` on the lengths as ``len_eps``."""
    def fn(logp):
        d = logp - _t(logp_old)
        a, m = _t(adv), _t(mask)
        sgn = torch.sign(a)
        d_clamp = torch.clamp(d, -low, high)
        d_min = sgn * torch.min(sgn * d, sgn * d_clamp)
        n = m.sum(-1) + len_eps if len_eps else m.sum(-1).clamp(min=1.0)  # 0 / 0 guard on empty rows
        ratio = torch.exp((d_min * m).sum(-1) / n)
        seq_adv = (a * m).sum(-1) / n
        return torch.mean(-seq_adv * ratio)
    return fn


@pytest.mark.parametrize("clip", [(0.4, 0.4), (0.1, 0.3)])
def test_geo_mean_matches_verl_to_1e10(clip) -> None:
    logp, logp_old, adv, mask = _batch(2, empty_row=True, scale=0.6)
    ours = _ours(logp, logp_old, adv, mask, policy_loss="geo_mean", clip_eps=clip[0], clip_eps_high=clip[1])
    ref = _loss_and_grad(_geo_mean_reference(logp_old, adv, mask, *clip, len_eps=0.0), logp)
    assert abs(ours[0] - ref[0]) <= TOL
    np.testing.assert_allclose(ours[1], ref[1], atol=TOL, rtol=0)
    _, _, clipped = geo_mean_surrogate(logp, logp_old, adv, mask, SurrogateSettings(*clip))
    assert clipped.any() and not clipped.all()  # the batch exercises both branches
    # the remaining difference: verl's |y| + 1e-8 in both the ratio's and the advantage's mean
    verl = _loss_and_grad(_geo_mean_reference(logp_old, adv, mask, *clip, len_eps=1e-8), logp)
    assert 0 < abs(ours[0] - verl[0]) <= 1e-7 * abs(ours[0])


def test_geo_mean_hand_computed() -> None:
    # two tokens, A = 1, log-ratios 0.1 and 0.9 with clip 0.4: the second is clipped to 0.4, so the
    # geometric-mean ratio is exp((0.1 + 0.4) / 2) and only the first token has a gradient.
    obj, grad, clipped = geo_mean_surrogate(np.array([[0.1, 0.9]]), np.zeros((1, 2)), np.ones((1, 2)),
                                            np.ones((1, 2)), SurrogateSettings(clip_eps=0.4))
    np.testing.assert_allclose(obj, [[math.exp(0.25)] * 2], atol=1e-15)
    np.testing.assert_allclose(grad, [[math.exp(0.25), 0.0]], atol=1e-15)
    assert clipped.tolist() == [[False, True]]
    # A < 0 clips the other side: log-ratio -0.9 becomes -0.4, +0.9 is kept
    obj, _, clipped = geo_mean_surrogate(np.array([[-0.9, 0.9]]), np.zeros((1, 2)), -np.ones((1, 2)),
                                         np.ones((1, 2)), SurrogateSettings(clip_eps=0.4))
    np.testing.assert_allclose(obj, [[-math.exp(0.25)] * 2], atol=1e-15)
    assert clipped.tolist() == [[True, False]]


def _k3(logp_ref: float, logp: float) -> float:
    return math.exp(logp_ref - logp) - (logp_ref - logp) - 1.0


def test_geo_mean_with_an_empty_answer_and_beta_counts_rows_as_verl_hand_computed() -> None:
    # three answers, the middle one wholly out of the loss (mask_truncated), k3 KL to a reference at
    # logp = 0 with beta = 0.1, advantages zero on padding (verl's convention), no clip active (0.4).
    # verl: the policy term is torch.mean over all 3 answers (the empty one adds 0), the KL term goes
    # through agg_loss, which divides by the 2 non-empty answers.
    logp = np.array([[0.1, 0.2], [0.5, 0.6], [0.3, 0.7]])
    mask = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    adv = np.array([[1.0, 1.0], [0.0, 0.0], [-1.0, 0.0]])
    old, ref = np.zeros_like(logp), np.zeros_like(logp)
    beta = 0.1
    policy = (-math.exp(0.15) + math.exp(0.3)) / 3
    kl = ((_k3(0, 0.1) + _k3(0, 0.2)) / 2 + _k3(0, 0.3)) / 2
    grad = np.array([[-math.exp(0.15) / 6 + beta * (1 - math.exp(-0.1)) / 4,
                      -math.exp(0.15) / 6 + beta * (1 - math.exp(-0.2)) / 4],
                     [0.0, 0.0],
                     [math.exp(0.3) / 3 + beta * (1 - math.exp(-0.3)) / 2, 0.0]])
    config = GRPOConfig(policy_loss="geo_mean", clip_eps=0.4, beta=beta, seq_mean_rows="non_empty",
                        clip_eps_high=None)
    terms = grpo_token_loss(logp, old, ref, adv, mask, config.loss_settings())
    assert terms.policy_loss == pytest.approx(policy, abs=1e-15)
    assert terms.kl == pytest.approx(kl, abs=1e-15)
    assert terms.loss == pytest.approx(policy + beta * kl, abs=1e-15)
    np.testing.assert_allclose(terms.grad_logp, grad, atol=1e-15, rtol=0)
    # the default ("all", TRL's count) divides the KL term by all 3 answers instead
    default = grpo_token_loss(logp, old, ref, adv, mask, dataclasses.replace(config, seq_mean_rows="all")
                              .loss_settings())
    assert default.policy_loss == pytest.approx(policy, abs=1e-15)
    assert default.kl == pytest.approx(kl * 2 / 3, abs=1e-15)


def test_geo_mean_with_an_empty_answer_and_beta_matches_verl() -> None:
    """verl 0.9.1's geo_mean loss plus its KL term (workers/utils/losses.py: agg_loss of low_var_kl with
    seq-mean-token-mean), advantages zero on padding, transcribed in float64 torch."""
    logp, logp_old, adv, mask = _batch(8, empty_row=True, scale=0.6)
    adv = adv * mask
    logp_ref = logp_old + np.random.default_rng(8).normal(scale=0.3, size=logp.shape)
    beta, (low, high) = 0.04, (0.4, 0.4)
    geo = _geo_mean_reference(logp_old, adv, mask, low, high, len_eps=1e-8)

    def verl(x):
        kl_in = torch.clamp(_t(logp_ref) - x, -20.0, 20.0)
        kld = torch.clamp(torch.exp(kl_in) - kl_in - 1, -10.0, 10.0)
        m = _t(mask)
        n = m.sum(-1)
        seq = (kld * m).sum(-1) / (n + 1e-8)
        non_empty = (n > 0).double()
        return geo(x) + beta * (seq * non_empty).sum() / non_empty.sum()

    ref_loss, ref_grad = _loss_and_grad(verl, logp)
    config = GRPOConfig(policy_loss="geo_mean", clip_eps=low, clip_eps_high=high, beta=beta,
                        seq_mean_rows="non_empty")
    terms = grpo_token_loss(logp, logp_old, logp_ref, adv, mask, config.loss_settings())
    # the one remaining difference is verl's 1e-8 on the lengths (relative size 1e-8 / |y|)
    assert abs(terms.loss - ref_loss) <= 1e-7 * abs(ref_loss)
    np.testing.assert_allclose(terms.grad_logp, ref_grad, rtol=1e-7, atol=1e-12)


def test_geo_mean_averages_the_advantage_over_the_answer_tokens_only() -> None:
    # verl's convention: advantages are zero on padding. The answer's advantage is the mean over its own
    # tokens (here 2 of 4 columns), not over the padded row: A = 1, ratio exp(0.2) on its two tokens.
    mask = np.array([[1.0, 1.0, 0.0, 0.0]])
    adv = np.array([[1.0, 1.0, 0.0, 0.0]])
    logp = np.array([[0.2, 0.2, 0.9, 0.9]])
    obj, grad, clipped = geo_mean_surrogate(logp, np.zeros_like(logp), adv, mask, SurrogateSettings(0.4))
    np.testing.assert_allclose(obj[0, :2], [math.exp(0.2)] * 2, atol=1e-15)
    np.testing.assert_allclose(grad, [[math.exp(0.2), math.exp(0.2), 0.0, 0.0]], atol=1e-15)
    assert not clipped.any()
    terms = _loss(logp, np.zeros_like(logp), logp, adv, mask, clip_eps=0.4, policy_loss="geo_mean")
    assert terms.loss == pytest.approx(-math.exp(0.2), abs=1e-15)


# ------------------------------------------------------------------------------------------------
# pass@k advantage (verl grpo_passk)
# ------------------------------------------------------------------------------------------------
def _passk_reference(rewards: np.ndarray, eps: float) -> np.ndarray:
    """verl compute_grpo_passk_outcome_advantage (norm_adv_by_std_in_grpo=True) on (B, G) scores."""
    out = np.zeros_like(rewards)
    for b, row in enumerate(torch.tensor(rewards, dtype=torch.float64)):
        topk, idx = torch.topk(row, 2)
        out[b, int(idx[0])] = float((topk[0] - topk[1]) / (torch.std(row) + eps))
    return out


def test_grpo_passk_matches_verl_to_1e10_and_by_hand() -> None:
    rng = np.random.default_rng(3)
    r = rng.normal(size=(20, 8))
    np.testing.assert_allclose(grpo_passk_advantages(r, 1e-6), _passk_reference(r, 1e-6), atol=TOL, rtol=0)
    # by hand: rewards [1, 0, 0, 0.5]: best 1, second 0.5; mean 3/8, squared deviations sum to 11/16,
    # so the unbiased std is sqrt(11/48)
    adv = grpo_passk_advantages(np.array([[1.0, 0.0, 0.0, 0.5]]), 0.0)
    np.testing.assert_allclose(adv, [[0.5 / math.sqrt(11 / 48), 0, 0, 0]], atol=1e-15)
    # a tied best, or a tied group, earns nothing
    assert np.all(grpo_passk_advantages(np.array([[1.0, 1.0, 0.0], [0.1, 0.1, 0.1]])) == 0.0)


# ------------------------------------------------------------------------------------------------
# REINFORCE++-baseline: ours (per answer) vs verl's (per token), both pinned
# ------------------------------------------------------------------------------------------------
def _verl_rpp_reference(rewards: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """verl compute_reinforce_plus_plus_baseline_outcome_advantage + masked_whiten, per answer."""
    b, g = rewards.shape
    width = int(lengths.max())
    scores = torch.tensor(rewards, dtype=torch.float64).reshape(-1)
    scores = scores - torch.tensor(rewards.mean(axis=1), dtype=torch.float64).repeat_interleave(g)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths.reshape(-1))[:, None]).double()
    tok = scores[:, None].tile([1, width]) * mask
    # masked_mean divides by the count + 1e-8; masked_var applies Bessel's correction with the exact count
    mean = (tok * mask).sum() / (mask.sum() + 1e-8)
    var = (((tok - mean) ** 2) * mask).sum() / (mask.sum() + 1e-8) * (mask.sum() / (mask.sum() - 1))
    white = (tok - mean) * torch.rsqrt(var + 1e-8) * mask
    return white[:, 0].numpy().reshape(b, g)


def test_reinforce_pp_baseline_verl_matches_verl_and_the_documented_numbers() -> None:
    rng = np.random.default_rng(4)
    r = rng.normal(size=(5, 4))
    r[2] = 0.3  # a tied group: verl shifts it by the batch's token-weighted mean
    lengths = rng.integers(1, 7, size=(5, 4))
    ours = reinforce_pp_baseline_verl_advantages(r, lengths=lengths)
    # to verl's 1e-8 conventions (count + 1e-8 in masked_mean): equal to rounding, at every reward scale,
    # near-zero variance included
    np.testing.assert_allclose(ours, _verl_rpp_reference(r, lengths), atol=1e-14, rtol=0)
    for scale in (1e-6, 1e-3, 10.0):
        small = r * scale
        np.testing.assert_allclose(reinforce_pp_baseline_verl_advantages(small, lengths=lengths),
                                   _verl_rpp_reference(small, lengths), atol=1e-14, rtol=0)
    assert np.all(ours[2] == ours[2, 0]) and ours[2, 0] != 0.0
    # docs/variants.md: rewards [[1, 0], [1, 0]], 3 tokens each: ours +-0.8659, verl +-0.9574
    two = np.array([[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(reinforce_pp_baseline_advantages(two),
                               0.5 / (math.sqrt(1 / 3) + 1e-4) * np.array([[1, -1], [1, -1]]), atol=1e-15)
    # verl: 12 token copies of +-0.5, variance 3 / (12 + 1e-8) * 12 / 11
    verl_two = 0.5 / math.sqrt(3 / (12 + 1e-8) * 12 / 11 + 1e-8)
    np.testing.assert_allclose(reinforce_pp_baseline_verl_advantages(two, lengths=np.full((2, 2), 3)),
                               verl_two * np.array([[1, -1], [1, -1]]), atol=1e-15)
    assert round(0.5 / (math.sqrt(1 / 3) + 1e-4), 4) == 0.8659
    assert round(verl_two, 4) == 0.9574


# ------------------------------------------------------------------------------------------------
# top_entropy_quantile (TRL): the mask from TRL's own method, the loss from its transcription
# ------------------------------------------------------------------------------------------------
def _trl_high_entropy_mask(entropies: np.ndarray, mask: np.ndarray, rho: float) -> np.ndarray:
    from trl import GRPOTrainer

    one_process = SimpleNamespace(pad_across_processes=lambda t, dim, pad_index: t, gather=lambda t: t)
    out = GRPOTrainer.get_high_entropy_mask(SimpleNamespace(accelerator=one_process), _t(entropies),
                                            _t(mask), 1 - rho)
    return out.numpy()


@pytest.mark.parametrize("rho", [0.0, 0.2, 0.5, 0.9])
def test_high_entropy_tokens_match_trl(rho: float) -> None:
    pytest.importorskip("trl")
    rng = np.random.default_rng(5)
    _, _, _, mask = _batch(5, n=8, length=6, empty_row=True)
    # float32 values: TRL takes the quantile in float32 and compares in the entropies' dtype
    entropies = rng.uniform(0, 2, size=mask.shape).astype(np.float32).astype(np.float64)
    entropies[0, :2] = entropies[0, 2]  # ties at the threshold are kept, as TRL's >= keeps them
    ours = high_entropy_tokens(entropies, mask, rho)
    np.testing.assert_array_equal(ours, _trl_high_entropy_mask(entropies, mask, rho))
    if rho == 0.0:
        assert ours.sum() == 1  # the highest only
    assert np.array_equal(high_entropy_tokens(entropies, mask, 1.0), mask > 0)  # rho = 1 keeps every token


def test_top_entropy_loss_matches_trl_to_1e10() -> None:
    # TRL loss_type="grpo": -min(r A, clip(r) A) * entropy_mask + beta * k3, per-answer token mean
    pytest.importorskip("trl")
    logp, logp_old, adv, mask = _batch(6, n=8, length=6)
    rng = np.random.default_rng(6)
    logp_ref = logp_old + rng.normal(scale=0.2, size=logp.shape)
    chosen = high_entropy_tokens(rng.uniform(0, 2, size=mask.shape), mask, 0.2)
    beta = 0.04
    terms = _loss(logp, logp_old, logp_ref, adv, mask, clip_eps=0.2, beta=beta,
                  policy_tokens=chosen)

    def trl(x):
        coef_1 = torch.exp(x - _t(logp_old))
        coef_2 = torch.clamp(coef_1, 0.8, 1.2)
        per_token = -torch.min(coef_1 * _t(adv), coef_2 * _t(adv)) * _t(chosen.astype(float))
        ref = _t(logp_ref)
        per_token = per_token + beta * (torch.exp(ref - x) - (ref - x) - 1)
        m = _t(mask)
        return ((per_token * m).sum(-1) / m.sum(-1).clamp(min=1.0)).mean()

    loss, grad = _loss_and_grad(trl, logp)
    assert abs(terms.loss - loss) <= TOL
    np.testing.assert_allclose(terms.grad_logp, grad, atol=TOL, rtol=0)


# ------------------------------------------------------------------------------------------------
# the statements of docs/variants.md, pinned
# ------------------------------------------------------------------------------------------------
def _verl_agg(loss_mat: np.ndarray, mask: np.ndarray, mode: str, scale: int | None = None) -> float:
    """verl 0.9.1 agg_loss (dp_size 1, global sizes None)."""
    seq_losses = (loss_mat * mask).sum(-1)
    non_empty = (mask.sum(-1) > 0).astype(float)
    if mode == "seq-mean-token-sum-norm":
        return float((seq_losses * non_empty).sum() / non_empty.sum() / (scale or mask.shape[-1]))
    assert mode == "seq-mean-token-mean"
    return float(((seq_losses / (mask.sum(-1) + 1e-8)) * non_empty).sum() / non_empty.sum())


def test_seq_mean_token_sum_equals_verl_norm_mode_and_non_empty_rows_are_verls() -> None:
    rng = np.random.default_rng(7)
    _, _, _, mask = _batch(7, n=4, length=5)
    loss_mat = rng.normal(size=mask.shape)
    ours = float((loss_mat * LOSS_AGGREGATIONS["seq_mean_token_sum"](mask, 8)).sum())
    assert abs(ours - _verl_agg(loss_mat, mask, "seq-mean-token-sum-norm", 8)) <= 1e-15  # equal, not N x
    # one answer wholly out of the loss (mask_truncated): verl divides by the 3 non-empty rows, we by 4
    mask[2] = 0.0
    ours = float((loss_mat * LOSS_AGGREGATIONS["seq_mean_token_sum"](mask, 8)).sum())
    verl = _verl_agg(loss_mat, mask, "seq-mean-token-sum-norm", 8)
    assert ours == pytest.approx(verl * 3 / 4, abs=1e-15)
    logp, logp_old, adv, _ = _batch(7, n=4, length=5)
    for agg, mode in (("seq_mean_token_sum", "seq-mean-token-sum-norm"), ("seq_mean_token_mean", None)):
        kw = dict(clip_eps=0.2, beta=0.0, aggregation=agg, max_length=8 if mode else None)
        all_rows = _loss(logp, logp_old, logp_old, adv, mask, **kw)
        non_empty = _loss(logp, logp_old, logp_old, adv, mask, seq_mean_rows="non_empty", **kw)
        assert non_empty.loss == pytest.approx(all_rows.loss * 4 / 3, abs=1e-14)
    with pytest.raises(ValueError, match="seq_mean_rows='non_empty' has no effect with loss_aggregation="):
        GRPOConfig(seq_mean_rows="non_empty", loss_aggregation="token_mean")


def test_log_ratio_clamps_differ_from_verl_where_pinned() -> None:
    one = np.ones((1, 1))
    # GSPO: a sequence log-ratio of 15 with A = -1 is not clipped (min picks s A): ours e^15 (clamp
    # +-20), verl's clamp at +10 gives -e^10
    obj, _, _ = gspo_surrogate(np.array([[15.0]]), np.zeros((1, 1)), -one, one, SurrogateSettings())
    assert obj[0, 0] == pytest.approx(-math.exp(15.0), rel=1e-15)
    # KL-Cov: verl does not clamp; at log-ratio 25 ours is e^20 A (minus the selected KL term)
    obj, _, selected = kl_cov_surrogate(np.array([[25.0]]), np.zeros((1, 1)), one, one,
                                        SurrogateSettings(kl_cov_ratio=1.0, kl_cov_coef=0.1))
    assert selected.all() and obj[0, 0] == pytest.approx(math.exp(20.0) - 0.1 * 25.0, rel=1e-15)


def test_config_defaults_and_messages_say_what_verl_does() -> None:
    assert GRPOConfig().kl_cov_coef == 0.1  # verl's ppo_kl_coef config default
    with pytest.raises(ValueError, match="hard-codes it for 'sapo' and 'geo_mean' and accepts other modes"):
        GRPOConfig(policy_loss="gspo", loss_aggregation="token_mean")
    for name in ("sapo", "geo_mean"):
        with pytest.raises(ValueError, match=f"policy_loss='{name}' needs loss_aggregation"):
            GRPOConfig(policy_loss=name, loss_aggregation="token_mean")
    for field, bad in (("sapo_tau_pos", 0.0), ("sapo_tau_neg", -1.0), ("top_entropy_quantile", 1.5)):
        with pytest.raises(ValueError, match=f"{field}="):
            GRPOConfig(**{field: bad})


# ------------------------------------------------------------------------------------------------
# each new variant trains through GRPOConfig
# ------------------------------------------------------------------------------------------------
NEW_VARIANTS = {
    "sapo": ({"policy_loss": "sapo"}, "tabular"),
    "geo_mean": ({"policy_loss": "geo_mean", "clip_eps": 0.4}, "tabular"),
    "grpo_passk": ({"advantage": "grpo_passk"}, "tabular"),
    "reinforce_pp_baseline_verl": ({"advantage": "reinforce_pp_baseline_verl"}, "tabular"),
    "top_entropy": ({"top_entropy_quantile": 0.2, "entropy_coef": 0.01}, "tabular"),
    # masked mlp answers on Arithmetic all tie at the start; Countdown's groups differ from step one
    "top_entropy_mlp": ({"top_entropy_quantile": 0.2}, "mlp"),
    "non_empty_rows": ({"seq_mean_rows": "non_empty", "mask_truncated": True}, "tabular"),
}


@pytest.mark.parametrize("name", sorted(NEW_VARIANTS))
def test_each_new_variant_trains(name: str) -> None:
    overrides, policy = NEW_VARIANTS[name]
    env, env_kwargs = (("rlvr/Countdown-v0", {}) if policy == "mlp"
                       else ("rlvr/Arithmetic-v0", {"format_weight": 1.0}))
    model = GRPO(env, GRPOConfig(group_size=4, prompts_per_iter=4, **overrides), policy=policy, seed=0,
                 env_kwargs=env_kwargs)
    before = {k: v.copy() for k, v in model.policy.state().items()}
    model.learn(1000)
    assert np.isfinite(model.last_metrics["train/loss"])
    after = model.policy.state()
    assert any(before[k].shape != after[k].shape or not np.array_equal(before[k], after[k]) for k in after)
    assert all(np.all(np.isfinite(v)) for v in after.values() if v.dtype.kind == "f")


def test_top_entropy_quantile_trains_only_the_chosen_tokens(monkeypatch) -> None:
    from agents.grpo import update as update_module

    seen: list = []
    original = update_module.grpo_token_loss
    monkeypatch.setattr(update_module, "grpo_token_loss",
                        lambda *a, **kw: seen.append((a[4], kw["policy_tokens"])) or original(*a, **kw))
    model = GRPO("rlvr/Arithmetic-v0", GRPOConfig(group_size=4, prompts_per_iter=4, top_entropy_quantile=0.2,
                                                  epochs=1), seed=0)
    model.learn(100)
    mask, chosen = seen[0]
    n = int(mask.sum())
    assert chosen.shape == mask.shape and not chosen[mask == 0].any()
    assert 1 <= chosen.sum() <= n and chosen.sum() >= math.floor(0.2 * (n - 1))
    assert ADVANTAGE_ESTIMATORS  # the tables are the only way in (no if-ladder): names resolve there
