"""One iteration's learning, after its groups are scored: the advantages (``config.advantage``'s group
estimator, or token-level GAE from the learned critic) and the mu clipped epochs over the groups.

:meth:`agents.grpo.GRPO.compute_advantages` and :meth:`agents.grpo.GRPO.update` call these. The math is
:mod:`agents.grpo.objective`'s (and :mod:`agents.grpo.value`'s); here it becomes the
:class:`agents.policies.Loss` each step hands the policy (the policy loss, plus the entropy bonus's
gradient at the logits) and the value loss each critic step hands the critic, so a policy needs nothing
of ``agents.grpo``: it computes log-probabilities, calls the loss and chains the gradient back.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.grpo.config import GRPOConfig
from agents.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    CRITIC_ESTIMATORS,
    LossSettings,
    LossTerms,
    ValueLossTerms,
    clipped_value_loss,
    entropy_bonus,
    grpo_token_loss,
    high_entropy_tokens,
    loss_weights,
    mask_truncated,
    terminal_token_rewards,
    token_entropies,
)
from agents.grpo.rollout import GroupBatch
from agents.policies import CriticPolicy, Loss, Policy, apply_mask, log_softmax
from rlvr_env.rewards import length_reward

__all__ = ["Advantages", "CriticTargets", "Minibatch", "critic_advantages", "entropy_logits_grad",
           "group_advantages", "group_rewards", "step_loss", "train_epochs"]


@dataclasses.dataclass(frozen=True)
class CriticTargets:
    """The critic's side of one iteration's batch (``advantage="gae"``): its values V(s_t) when the
    batch was collected and the GAE returns, both (N, L); ``first_pass``, when kept, is the critic's
    forward pass (with its graph) over every real token, which the first critic step reuses when its
    minibatch is the whole batch (the critic has not changed yet, so the numbers are the same)."""

    values: np.ndarray
    returns: np.ndarray
    first_pass: Any = None


@dataclasses.dataclass(frozen=True)
class Advantages:
    """One iteration's advantages (:meth:`agents.grpo.GRPO.compute_advantages`): ``per_answer`` (B, G),
    one per trained answer (with a critic, the mean of its tokens'; None when no group is trained), which
    the group hooks see and the group estimators' update reads; with a critic, ``per_token`` (N, L), the
    advantage of every token, and ``critic``, its targets."""

    per_answer: np.ndarray | None
    per_token: np.ndarray | None = None
    critic: CriticTargets | None = None


@dataclasses.dataclass(frozen=True)
class Minibatch:
    """One minibatch's arrays for the update: ``rows`` (n,) of the batch, their (n, L) loss ``mask``,
    ``valid`` tokens, old and reference log-probs and advantages, the (T, ...) tokens in the loss, and
    with a critic its values when the batch was collected and its GAE returns (n, L)."""

    rows: np.ndarray
    mask: np.ndarray
    valid: np.ndarray
    logp_old: np.ndarray
    logp_ref: np.ndarray
    adv: np.ndarray
    obs: np.ndarray
    actions: np.ndarray
    action_masks: np.ndarray | None
    n_tokens: int
    values_old: np.ndarray | None = None
    returns: np.ndarray | None = None

    @classmethod
    def gather(cls, batch: GroupBatch, rows: np.ndarray, valid: np.ndarray, loss_mask: np.ndarray,
               logp_ref: np.ndarray, adv_tok: np.ndarray, critic: CriticTargets | None) -> Minibatch:
        sub_valid = valid[rows]  # (n, L)
        masks = batch.action_masks
        return cls(rows=rows, mask=loss_mask[rows], valid=sub_valid, logp_old=batch.logp_old[rows],
                   logp_ref=logp_ref[rows], adv=adv_tok[rows], obs=batch.obs[rows][sub_valid],
                   actions=batch.actions[rows][sub_valid],
                   action_masks=None if masks is None else masks[rows][sub_valid],
                   n_tokens=int(sub_valid.sum()),
                   values_old=None if critic is None else critic.values[rows],
                   returns=None if critic is None else critic.returns[rows])


# ---------------------------------------------------------------------------------------------------
# Rewards and advantages
# ---------------------------------------------------------------------------------------------------
def group_rewards(batch: GroupBatch, length_weight: float) -> np.ndarray:
    """(B, G) what the advantages are computed from: each answer's verifier reward (the episode return)
    plus ``length_weight`` times the Kimi k1.5 length term of its group (:func:`rlvr_env.length_reward`;
    only on envs whose final info says "correct")."""
    rewards = batch.returns.reshape(batch.n_groups, batch.group_size).copy()  # (B, G)
    w = length_weight
    if w > 0 and not np.isnan(batch.correct).any():
        lengths = batch.lengths.reshape(rewards.shape)
        correct = batch.correct.reshape(rewards.shape).astype(bool)
        for b in range(rewards.shape[0]):  # B small groups; the term is defined per group
            rewards[b] += w * length_reward(lengths[b], correct[b])
    return rewards


def group_advantages(config: GRPOConfig, rewards: np.ndarray, mask: np.ndarray) -> Advantages:
    """``config.advantage``'s group estimator on the (B, G) ``rewards`` of answers whose tokens are
    ``mask`` (N, L)."""
    return Advantages(ADVANTAGE_ESTIMATORS[config.advantage](  # type: ignore[index]
        rewards, config.adv_eps, config.unbiased_std,
        lengths=mask.sum(axis=1).reshape(rewards.shape),
    ))  # (B, G)


def critic_advantages(critic: CriticPolicy, config: GRPOConfig, batch: GroupBatch,
                      rewards: np.ndarray) -> Advantages:
    """(N, L) token-level GAE advantages (whitened), each answer's mean of them, and the critic's targets
    for ``batch``: the answer's reward (verifier + length term, as GRPO's) at its last token, the
    critic's V(s_t) of every token's state, gamma and lambda from the config
    (:func:`agents.grpo.value.gae_advantages`)."""
    real = batch.mask > 0  # (N, L): GAE runs over every real token (verl's response_mask)
    values = np.zeros(batch.mask.shape)
    keep = config.minibatches == 1 and not config.mask_truncated  # the first step's rows
    values[real], first_pass = critic.values(batch.obs[real], batch.actions[real], keep=keep)
    token_rewards = terminal_token_rewards(rewards.reshape(-1), batch.mask)
    adv_tok, returns = CRITIC_ESTIMATORS[config.advantage](  # type: ignore[index]
        token_rewards, values, batch.mask, config.gamma, config.lam)
    targets = CriticTargets(values=values, returns=returns, first_pass=first_pass)
    lengths = np.maximum(batch.mask.sum(axis=1), 1.0)
    per_answer = (adv_tok * batch.mask).sum(axis=1) / lengths
    return Advantages(per_answer.reshape(rewards.shape), adv_tok, targets)


# ---------------------------------------------------------------------------------------------------
# The mu clipped epochs
# ---------------------------------------------------------------------------------------------------
def train_epochs(policy: Policy, critic: CriticPolicy | None, batch: GroupBatch, adv: np.ndarray,
                 targets: CriticTargets | None, config: GRPOConfig, settings: LossSettings,
                 train_policy: bool = True) -> dict[str, float]:
    """mu epochs of clipped steps over the batch with the advantages ``adv``: (N,) one per answer,
    broadcast to its tokens (the group estimators), or (N, L) one per token (the critic's); the same loss
    reads both. Minibatches hold whole groups. With ``critic`` and its ``targets``, each minibatch step
    also takes a critic step on the clipped value loss first; ``train_policy=False`` (the critic's
    warm-up iterations) takes only those. Returns the ``train/*`` metrics."""
    loss_mask = batch.mask
    if config.mask_truncated and batch.truncated is not None:
        loss_mask = mask_truncated(batch.mask, batch.truncated)  # (N, L)
    valid = loss_mask > 0  # (N, L): the tokens in the loss
    adv_tok = adv if adv.ndim == 2 else np.broadcast_to(adv[:, None], batch.mask.shape)  # (N, L)
    # The reference is frozen, so its log-probs are computed once per iteration.
    masks = batch.action_masks  # (N, L, V) or None
    logp_ref = np.zeros_like(batch.logp_old)
    logp_ref[valid] = policy.reference_logp(batch.obs[valid], batch.actions[valid],
                                            None if masks is None else masks[valid])
    # Each minibatch's arrays are gathered once, not once per epoch (the update reads them only).
    chunks = [Minibatch.gather(batch, rows, valid, loss_mask, logp_ref, adv_tok, targets)
              for rows in minibatch_rows(batch, config.minibatches)]
    chunks = [c for c in chunks if c.n_tokens]  # e.g. every answer truncated and masked out
    stats: list[tuple[LossTerms, float]] = []
    value_stats: list[ValueLossTerms] = []
    assert config.epochs is not None  # resolved from the preset at construction
    first_pass = None if targets is None else targets.first_pass
    whole = len(chunks) == 1 and np.array_equal(chunks[0].valid, batch.mask > 0)
    if not whole:
        first_pass = None  # the first step's tokens are not the pass's
    for _ in range(config.epochs):
        for c in chunks:
            if critic is not None:  # the critic's step on this minibatch (policy-independent)
                value_fn = functools.partial(value_loss, c, config.cliprange_value, settings)
                value_stats.append(critic.update_critic(c.obs, c.actions, value_fn, vpreds=first_pass))
                first_pass = None  # the critic has moved: later steps run their own pass
            if not train_policy:
                continue
            chosen = None
            if config.top_entropy_quantile < 1.0:
                chosen = _high_entropy_choice(policy, batch.obs[c.rows], c.valid, c.mask,
                                              None if masks is None else masks[c.rows],
                                              config.top_entropy_quantile)
            result = policy.update(c.obs, c.actions, step_loss(c, settings, chosen, config.entropy_coef),
                                   masks=c.action_masks)
            stats.append((result.terms, result.entropy))
    return _metrics(stats, value_stats, config.entropy_coef)


def step_loss(c: Minibatch, settings: LossSettings, chosen: np.ndarray | None,
              entropy_coef: float) -> Loss[LossTerms]:
    """The loss one policy step on minibatch ``c`` minimises: the GRPO token loss (policy term only on
    the ``chosen`` (n, L) tokens when given), minus ``entropy_coef`` times the mean entropy of the tokens
    in the loss (TRL's definition; of the chosen tokens when given, as TRL)."""
    weights = None
    if entropy_coef > 0:
        weights = np.full(c.n_tokens, entropy_coef / c.n_tokens)
        if chosen is not None:
            picked = chosen[c.valid]
            weights = picked * (entropy_coef / max(int(picked.sum()), 1))
    fn = functools.partial(token_loss, c, settings, policy_tokens=chosen)
    return Loss(fn, None if weights is None else entropy_logits_grad(weights))


def entropy_logits_grad(weights: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``logp_all (T, V) -> (T, V)``: the logit gradient of the loss's ``- sum_t w_t H_t`` term (the
    loss subtracts the bonus, :func:`agents.grpo.objective.entropy_bonus`), for :class:`Loss`."""

    def grad(logp_all: np.ndarray) -> np.ndarray:
        _, d_bonus = entropy_bonus(logp_all, weights)
        return -d_bonus

    return grad


def token_loss(c: Minibatch, settings: LossSettings, logp_tokens: np.ndarray,
               policy_tokens: np.ndarray | None = None) -> LossTerms:
    """The GRPO loss of minibatch ``c`` given the (T,) log-probs of its tokens in the loss; the gradient
    comes back per such token, in the same order."""
    logp = np.zeros(c.mask.shape)
    logp[c.valid] = logp_tokens
    terms = grpo_token_loss(logp, c.logp_old, c.logp_ref, c.adv, c.mask, settings,
                            policy_tokens=policy_tokens)
    return dataclasses.replace(terms, grad_logp=terms.grad_logp[c.valid])


def value_loss(c: Minibatch, cliprange_value: float, settings: LossSettings,
               vpred_tokens: np.ndarray) -> ValueLossTerms:
    """The critic's clipped value loss of minibatch ``c`` given the (T,) predictions for its tokens in
    the loss, with the policy loss's token weights; the gradient comes back per such token."""
    assert c.values_old is not None and c.returns is not None
    vpreds = np.zeros(c.mask.shape)
    vpreds[c.valid] = vpred_tokens
    terms = clipped_value_loss(vpreds, c.returns, c.values_old, c.mask, cliprange_value,
                               loss_weights(c.mask, settings))
    return dataclasses.replace(terms, grad_vpred=terms.grad_vpred[c.valid])


def minibatch_rows(batch: GroupBatch, minibatches: int) -> list[np.ndarray]:
    """The episode rows of each minibatch (whole groups, ``minibatches`` of them)."""
    chunks = np.array_split(np.arange(batch.n_groups), minibatches)
    return [(chunk[:, None] * batch.group_size + np.arange(batch.group_size)).reshape(-1)
            for chunk in chunks]


def _high_entropy_choice(policy: Policy, obs: np.ndarray, valid: np.ndarray, mask: np.ndarray,
                         masks: np.ndarray | None, rho: float) -> np.ndarray:
    """(n, L) the top-rho tokens by the current policy's entropy (``top_entropy_quantile``)."""
    logp_all = log_softmax(apply_mask(policy.logits(obs[valid]),
                                      None if masks is None else masks[valid]))  # (T, V)
    entropies = np.zeros(valid.shape)
    entropies[valid] = token_entropies(logp_all)
    return high_entropy_tokens(entropies, mask, rho)


def _metrics(stats: list[tuple[LossTerms, float]], value_stats: list[ValueLossTerms],
             entropy_coef: float) -> dict[str, float]:
    out = {}
    if value_stats:
        out = {"train/value_loss": float(np.mean([v.loss for v in value_stats])),
               "train/value_clip_frac": float(np.mean([v.clip_frac for v in value_stats])),
               "train/explained_variance": float(np.mean([v.explained_variance for v in value_stats]))}
    if not stats:
        return out
    return {
        **out,
        "train/policy_loss": float(np.mean([s.policy_loss for s, _ in stats])),
        "train/loss": float(np.mean([s.loss - entropy_coef * e for s, e in stats])),
        "train/kl": float(np.mean([s.kl for s, _ in stats])),
        "train/clip_frac": float(np.mean([s.clip_frac for s, _ in stats])),
        "train/entropy": float(np.mean([e for _, e in stats])),
    }
