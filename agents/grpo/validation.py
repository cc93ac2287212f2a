"""The checks :class:`agents.grpo.GRPOConfig` runs at construction (``__post_init__``): small named
validators, each over the fields of one concern, run in the order of :data:`VALIDATORS`. Each raises a
``ValueError`` naming the field, its value and the rule; a field left unset (None, or :data:`UNSET`) is
checked once the preset has filled it.

A validator takes the config being built (typed ``Any`` here: this module is imported by
:mod:`agents.grpo.config`, not the other way round).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from agents.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    CRITIC_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    POLICY_LOSSES,
    SEQ_MEAN_ROWS,
)
from agents.grpo.presets import UNSET

__all__ = ["VALIDATORS", "validate"]


def _int_at_least(name: str, value: object, lo: int, why: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r} must be an integer")
    if value < lo:
        raise ValueError(f"{name}={value!r} must be at least {lo}" + (f": {why}" if why else ""))


def _real_in(
    name: str,
    value: object,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} must be a finite real number")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise ValueError(f"{name}={value!r} must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and (value > hi or (hi_open and value == hi)):
        raise ValueError(f"{name}={value!r} must be {'<' if hi_open else '<='} {hi}")


def _choice(name: str, value: object, table: dict[str, Any]) -> None:
    if value not in table:
        raise ValueError(f"{name}={value!r} is not one of {sorted(table)}")


def check_batch_shape(c: Any) -> None:
    """G, B, mu and the minibatches: positive counts, whole groups per minibatch; G >= 2 unless a
    critic is the baseline."""
    if c.group_size is not None:
        if c.advantage in CRITIC_ESTIMATORS:
            _int_at_least("group_size", c.group_size, 1, "")
        else:
            _int_at_least("group_size", c.group_size, 2, "a group needs two answers to have a "
                          "baseline (with advantage='gae' the critic is the baseline and G may be 1)")
    if c.prompts_per_iter is not None:
        _int_at_least("prompts_per_iter", c.prompts_per_iter, 1, "")
    if c.epochs is not None:
        _int_at_least("epochs", c.epochs, 1, "")
    _int_at_least("minibatches", c.minibatches, 1, "")
    if c.prompts_per_iter is not None and c.minibatches > c.prompts_per_iter:
        raise ValueError(
            f"minibatches={c.minibatches} must not exceed prompts_per_iter={c.prompts_per_iter}:"
            " a minibatch holds whole groups"
        )


def check_step_sizes(c: Any) -> None:
    """epsilon, beta, the advantage's eps, the length weight, the step size and the gradient clip."""
    _real_in("clip_eps", c.clip_eps, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
    if c.beta is not None:
        _real_in("beta", c.beta, lo=0.0)
    _real_in("adv_eps", c.adv_eps, lo=0.0, lo_open=True)
    _real_in("length_weight", c.length_weight, lo=0.0)
    if c.learning_rate is not None:
        _real_in("learning_rate", c.learning_rate, lo=0.0, lo_open=True)
    if c.max_grad_norm is not None:
        _real_in("max_grad_norm", c.max_grad_norm, lo=0.0, lo_open=True)


def check_estimators(c: Any) -> None:
    """The KL and advantage estimators are registered names."""
    _choice("kl_estimator", c.kl_estimator, KL_ESTIMATORS)
    if c.advantage is not None:
        _choice("advantage", c.advantage, {**ADVANTAGE_ESTIMATORS, **CRITIC_ESTIMATORS})


def check_critic(c: Any) -> None:
    """The critic's constants (gamma, lambda, the value clip, its step size and warm-up), and that only
    a critic estimator sets its own ones."""
    critic = c.advantage in CRITIC_ESTIMATORS
    _real_in("gamma", c.gamma, lo=0.0, hi=1.0)
    _real_in("lam", c.lam, lo=0.0, hi=1.0)
    _real_in("cliprange_value", c.cliprange_value, lo=0.0, lo_open=True)
    if c.critic_learning_rate is not None:
        _real_in("critic_learning_rate", c.critic_learning_rate, lo=0.0, lo_open=True)
    _int_at_least("critic_warmup", c.critic_warmup, 0, "")
    if not critic and c.advantage is not None and (c.critic_warmup or c.critic_learning_rate is not None):
        raise ValueError(
            f"critic_warmup={c.critic_warmup!r} / critic_learning_rate={c.critic_learning_rate!r} "
            f"need a learned critic (advantage='gae'), not advantage={c.advantage!r}"
        )
    if critic and c.dynamic_sampling and c.group_size == 1:
        raise ValueError(
            "dynamic_sampling=True with group_size=1 would drop every group: a group of one answer "
            "always ties (DAPO's filter keeps groups whose rewards differ)"
        )


def check_names_and_flags(c: Any) -> None:
    """The loss aggregation, the tabular optimiser and the policy loss are known names; the switches
    are bools."""
    _choice("loss_aggregation", c.loss_aggregation, LOSS_AGGREGATIONS)
    _choice("tabular_optimizer", c.tabular_optimizer, {"sgd": None, "adam": None})
    for flag in ("unbiased_std", "mask_truncated", "dynamic_sampling"):
        if not isinstance(getattr(c, flag), bool):
            raise ValueError(f"{flag}={getattr(c, flag)!r} must be a bool")
    _choice("policy_loss", c.policy_loss, POLICY_LOSSES)


def check_clip(c: Any) -> None:
    """clip-higher and the dual clip: in range, above the clip, and only where the policy loss reads
    them."""
    if c.clip_eps_high is not None and c.clip_eps_high is not UNSET:
        _real_in("clip_eps_high", c.clip_eps_high, lo=0.0, lo_open=True)
    if c.dual_clip_c is not None:
        _real_in("dual_clip_c", c.dual_clip_c, lo=1.0, lo_open=True)
        high = c.clip_eps_high
        if high is None or high is UNSET:
            high = c.clip_eps
        if c.dual_clip_c <= 1.0 + high:
            raise ValueError(
                f"dual_clip_c={c.dual_clip_c!r} must exceed 1 + clip_eps_high = {1.0 + high:g} "
                "(clip_eps when clip_eps_high is unset): at or below the clip's upper bound the dual "
                "clip cuts into the clipped objective itself, where verl's clip_ratio_c and TRL's delta "
                "(it clamps the ratio before the clip, for either sign of the advantage) disagree; TRL "
                "recommends delta > 1 + epsilon"
            )
        readers = [name for name, loss in POLICY_LOSSES.items() if "dual_clip_c" in loss.settings]
        if c.policy_loss not in readers:
            raise ValueError(
                f"dual_clip_c={c.dual_clip_c!r} applies to "
                f"{' / '.join(f'policy_loss={name!r}' for name in readers)} only, not "
                f"{c.policy_loss!r} (verl applies clip_ratio_c only to its vanilla loss too)"
            )
    if not POLICY_LOSSES[c.policy_loss].clip_high and c.clip_eps_high not in (None, UNSET):
        raise ValueError(
            f"clip_eps_high={c.clip_eps_high!r} has no effect with policy_loss={c.policy_loss!r}: "
            "it does not clip the ratio"
        )


def check_aggregation(c: Any) -> None:
    """A per-answer policy loss weighs each answer once; ``seq_mean_rows`` only with a seq-mean."""
    if POLICY_LOSSES[c.policy_loss].per_answer and c.loss_aggregation != "seq_mean_token_mean":
        raise ValueError(
            f"policy_loss={c.policy_loss!r} needs loss_aggregation='seq_mean_token_mean', not "
            f"{c.loss_aggregation!r}: its objective is one number per answer, so each answer is "
            "weighted once (the paper's objective; verl hard-codes it for 'sapo' and 'geo_mean' and "
            "accepts other modes for 'gspo', where the answer-level ratio is then reweighted by length)"
        )
    _choice("seq_mean_rows", c.seq_mean_rows, SEQ_MEAN_ROWS)
    if c.seq_mean_rows != "all" and not c.loss_aggregation.startswith("seq_mean"):
        raise ValueError(
            f"seq_mean_rows={c.seq_mean_rows!r} has no effect with loss_aggregation="
            f"{c.loss_aggregation!r}: it only changes how seq_mean_* aggregations count answers"
        )


def check_variant_constants(c: Any) -> None:
    """The constants of SAPO, the high-entropy tokens, KL-Cov, Clip-Cov and the entropy bonus."""
    _real_in("sapo_tau_pos", c.sapo_tau_pos, lo=0.0, lo_open=True)
    _real_in("sapo_tau_neg", c.sapo_tau_neg, lo=0.0, lo_open=True)
    _real_in("top_entropy_quantile", c.top_entropy_quantile, lo=0.0, hi=1.0)
    _real_in("kl_cov_ratio", c.kl_cov_ratio, lo=0.0, lo_open=True, hi=1.0)
    _real_in("kl_cov_coef", c.kl_cov_coef, lo=0.0)
    _real_in("clip_cov_ratio", c.clip_cov_ratio, lo=0.0, lo_open=True, hi=1.0)
    _real_in("clip_cov_lb", c.clip_cov_lb)
    _real_in("clip_cov_ub", c.clip_cov_ub)
    if c.clip_cov_ub <= c.clip_cov_lb:
        raise ValueError(
            f"clip_cov_ub={c.clip_cov_ub!r} must exceed clip_cov_lb={c.clip_cov_lb!r}: the window "
            "Clip-Cov draws tokens from would be empty"
        )
    _real_in("entropy_coef", c.entropy_coef, lo=0.0)


def check_sampling_and_masks(c: Any) -> None:
    """Dynamic sampling's round budget, the fixed length of "seq_mean_token_sum", the masks switch."""
    _int_at_least("dynamic_sampling_max_rounds", c.dynamic_sampling_max_rounds, 1, "")
    if c.token_sum_norm is not None:
        _int_at_least("token_sum_norm", c.token_sum_norm, 1, "")
    if not isinstance(c.action_masks, bool):
        raise ValueError(f"action_masks={c.action_masks!r} must be a bool")


#: Every validator, in the order a config runs them (the first broken rule is the one reported).
VALIDATORS: tuple[Callable[[Any], None], ...] = (
    check_batch_shape,
    check_step_sizes,
    check_estimators,
    check_critic,
    check_names_and_flags,
    check_clip,
    check_aggregation,
    check_variant_constants,
    check_sampling_and_masks,
)


def validate(config: Any) -> None:
    """Run :data:`VALIDATORS` on ``config`` (a ``ValueError`` for the first rule it breaks)."""
    for check in VALIDATORS:
        check(config)
