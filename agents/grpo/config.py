"""``GRPOConfig``: every GRPO constant, named once, with its symbol and source.

**What "default" means** (one rule): a field left unset takes the value of the preset of the
policy that trains with the config, so ``GRPOConfig()``, ``GRPO(env)`` and ``GRPO(env,
GRPOConfig(beta=0.01))`` all start from ``GRPOConfig.preset(policy)`` and change only what was named.
The papers' values are the preset ``"paper"`` (``GRPOConfig.preset("paper")``; it leaves
``learning_rate`` to the policy, the papers' LLM step sizes meaning nothing here).
:meth:`GRPOConfig.resolve` fills the unset fields; the agent stores the resolved config (and
checkpoints it).

"Unset" is ``None`` for the fields where ``None`` means nothing else (``group_size``, ``beta``, ...), and
:data:`UNSET` (the default) for ``clip_eps_high``, where ``None`` is a setting of its own: the symmetric
clip. So ``GRPOConfig(clip_eps_high=None)``, ``GRPOConfig.preset("transformer", clip_eps_high=None)`` and
``python -m agents.grpo --clip-eps-high none`` train with the symmetric clip under every preset, while a
config that does not name ``clip_eps_high`` takes the preset's (0.28 for "transformer" and "countdown").

Why one long module: it is one frozen dataclass whose every field carries its symbol, source and
recommended value in its own docstring, plus the checks that refuse impossible settings; the length is
those field docs.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from agents.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    CRITIC_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    POLICY_LOSSES,
    SEQ_MEAN_ROWS,
    LossSettings,
    SurrogateSettings,
)

__all__ = ["COLD_START", "GRPOConfig", "PRESETS", "PRESET_FIELDS", "UNSET"]


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


#: "Not set by the caller: take the policy's preset" for a field whose ``None`` is a value of its own
#: (``clip_eps_high=None`` is the symmetric clip). :meth:`GRPOConfig.resolve` replaces it.
UNSET = Unset.UNSET
#: The value network's fields (``advantage="gae"``), read by no other estimator.
_CRITIC_FIELDS = frozenset({"gamma", "lam", "cliprange_value", "critic_learning_rate", "critic_warmup"})
#: Fields where ``None`` is a setting (not "unset"); their unset value is :data:`UNSET`.
_NONE_IS_A_VALUE = frozenset({"clip_eps_high"})


@dataclass(frozen=True)
class GRPOConfig:
    """Hyperparameters of the GRPO agent. Impossible settings raise ``ValueError`` at construction.

    Fields whose default is None are taken from the training policy's preset (module docstring).
    """

    group_size: int | None = None
    """G: answers sampled per prompt; the group's reward statistics are the baseline (DeepSeekMath
    section 4.1, G=64 there; the lesson: "G=8 is common"). At least 2, or 1 with advantage="gae" (a
    learned critic is the baseline: PPO needs no group; verl rollout.n = 1). None: the policy's
    preset."""

    prompts_per_iter: int | None = None
    """B: prompts per iteration, so one iteration runs B x G episodes in lockstep. None: the preset."""

    epochs: int | None = None
    """mu: optimisation passes over each batch of groups (DeepSeekMath Algorithm 1 "GRPO iterations mu";
    PPO-style multi-epoch reuse kept near on-policy by the clip). None: the policy's preset (4, the
    paper preset's; 1 for "tabular" and "transformer")."""

    minibatches: int = 1
    """Minibatches per epoch (groups are kept whole inside a minibatch). 1 = full-batch steps."""

    clip_eps: float = 0.2
    """epsilon: PPO clip range of the per-token ratio rho = pi_theta / pi_old (lesson: ~0.2)."""

    beta: float | None = None
    """beta: weight of the KL penalty to the frozen reference policy (lesson: 0.001-0.04; DeepSeekMath
    uses 0.04; None: the policy's preset). Here the reference is the initial policy, which for the
    tabular table is uniform, so
    beta also keeps exploration alive: it is what stops the collapse onto one well-formed wrong answer
    (see docs/agent.md, "What made tabular GRPO robust")."""

    kl_estimator: str = "k3"
    """Estimator of KL(pi_theta || pi_ref): "k3" = r - log r - 1, r = pi_ref/pi_theta (DeepSeekMath eq. 4,
    Schulman 2020), or "k1", "k2"."""

    advantage: str | None = None
    """Advantage estimator: "grpo" = (r - mean) / (std + eps) (DeepSeekMath 4.1.2), "dr_grpo" = r - mean
    (Liu et al. 2025), "rloo" = leave-one-out baseline (Ahmadian et al. 2024), "grpo_batch_std" = (r -
    group mean) / (batch std + eps) (TRL scale_rewards="batch"), "reinforce_pp_baseline" = group mean
    subtracted, then the batch normalised over answers (REINFORCE++-baseline, Hu et al. 2025),
    "reinforce_pp_baseline_verl" = the same normalised over token copies as verl does (its exact numbers),
    "grpo_passk" = only each group's best answer credited, (r_max - r_second) / (std + eps) (pass@k
    training, Tang et al. 2025, arXiv 2503.19595; verl adv_estimator="grpo_passk"); "gae" = PPO with a
    learned critic: token-level GAE from a value network started from the policy's current weights
    (verl adv_estimator="gae"; TRL 1.12 trl.experimental.ppo; see gamma, lam, cliprange_value,
    critic_learning_rate, critic_warmup and docs/agent.md; the mlp and transformer policies only).
    None: the preset."""

    unbiased_std: bool = True
    """Use the sample std (ddof=1) in the "grpo" advantage, as TRL and verl do."""

    adv_eps: float = 1e-4
    """Added to the group std before dividing (TRL uses 1e-4)."""

    loss_aggregation: str = "seq_mean_token_mean"
    """How token losses are averaged: "seq_mean_token_mean" (GRPO paper eq. 3), "token_mean" (DAPO),
    "seq_mean_token_sum" (Dr. GRPO: token sums over N x max_length, max_length fixed: see
    token_sum_norm; TRL loss_type="dr_grpo"; verl 0.9.1 "seq-mean-token-sum-norm" with loss_scale_factor
    = max_length is equal to it; see seq_mean_rows for answers with no token in the loss)."""

    seq_mean_rows: str = "all"
    """How "seq_mean_token_mean" and "seq_mean_token_sum" count answers: "all" = divide by every answer
    of the minibatch (ours and TRL's), "non_empty" = only by answers with a token in the loss (verl's
    agg_loss). They differ only when mask_truncated removes whole answers. With policy_loss="geo_mean",
    "non_empty" divides only the KL term by the non-empty answers and the policy term by all of them,
    as verl's geo_mean does (its torch.mean over answers)."""

    length_weight: float = 0.1
    """Weight of the Kimi k1.5 length reward (Kimi k1.5 section 2.3.3) added to each group's rewards,
    from ``rlvr_env.length_reward``. Zero for a group whose lengths are all equal (always, on the
    fixed-length Arithmetic task). Applied only on envs whose final info says "correct" and "length"."""

    learning_rate: float | None = None
    """Step size. Unset (None) takes the policy's preset: 300 for "tabular" (plain SGD: the aggregated
    loss averages over the B x G x L tokens of a batch, so one answer's gradient on its table rows is
    ~1/(B G L) of its advantage) and 1e-3 for "mlp" (Adam, as SB3 PPO, whose default is 3e-4). The
    tabular 300 belongs to SGD: with ``tabular_optimizer="adam"`` an unset step size is 0.1."""

    tabular_optimizer: str = "sgd"
    """Optimiser of the tabular policy: "sgd" (plain gradient steps, the lesson's) or "adam". Adam
    rescales each table row's step to about ``learning_rate`` whatever the advantage's size, so a
    0.1 format reward moves a row as far as a 1.0 accuracy reward and the KL pull as far as either;
    SGD keeps the objective's scale. The mlp policy always uses Adam (as SB3 PPO does)."""

    max_grad_norm: float | None = 0.5
    """Global gradient-norm clip for the neural policy (SB3 PPO's default 0.5); None disables it.
    The tabular policy ignores it."""

    action_masks: bool = True
    """Grammar-constrained decoding: when the env offers ``action_masks()`` (every ``rlvr_env`` token env
    and its native vector env; the protocol sb3-contrib's MaskablePPO reads; ``rlvr/Arithmetic-v0``'s
    allows every token unless made with ``grammar_mask=True``; Countdown's is a grammar mask), sample
    from the policy restricted to the allowed tokens and compute every log-prob of the update (current,
    old, reference) under the same mask, as LLM RLVR stacks do with constrained decoding. Evaluation and
    ``predict`` then mask too. False samples from the full vocabulary. An env without masks is never
    masked."""

    clip_eps_high: float | None | Unset = UNSET
    """epsilon_high: DAPO's "clip-higher" (Yu et al. 2025, section 3.1; 0.28 there): the ratio is
    clipped to [1 - clip_eps, 1 + clip_eps_high], so unlikely tokens can gain probability faster than
    likely ones lose it (keeps entropy up). None = clip_eps (symmetric), under every preset; unset
    (UNSET, the default) = the policy's preset. verl clip_ratio_high, TRL epsilon_high (TRL's is 1 +
    ours for policy_loss="cispo")."""

    dual_clip_c: float | None = None
    """c: dual-clip PPO (Ye et al. 2020, "Mastering Complex Control in MOBA Games"): for a
    negative advantage the per-token objective is at least c * A, so a token whose ratio has grown
    far past 1 + epsilon cannot push an unbounded penalty. Must exceed 1 + clip_eps_high (below it verl
    and TRL disagree, and the dual clip would cut into the clipped objective); None = off. verl
    clip_ratio_c (on at 3.0 there), TRL delta (INTELLECT-2's two-sided clip, the same bound above
    1 + epsilon_high). policy_loss "vanilla" only."""

    policy_loss: str = "vanilla"
    """The surrogate (verl actor.policy_loss.loss_mode): "vanilla" = PPO-clip per token (DeepSeekMath
    eq. 3); "gspo" = one length-normalised ratio per answer, clipped per answer (GSPO, Zheng et al.
    2025; TRL importance_sampling_level="sequence"; GSPO uses far smaller clip ranges, e.g.
    3e-4 / 4e-4; verl clamps its log-ratio at +10, we at +-20); "sapo" = a smooth gate
    sigmoid(tau (rho - 1)) 4 / tau in place of the clip (SAPO, Gao et al. 2025, arXiv 2511.20347; verl and
    TRL "sapo"; see sapo_tau_pos); "geo_mean" = the geometric mean of each answer's token ratios, clipped
    in log space to [-clip_eps, clip_eps_high] (GMPO, Zhao et al. 2025, arXiv 2507.20673; verl "geo_mean";
    the paper's range is 0.4); "cispo" = REINFORCE with the clipped importance weight as a constant
    (MiniMax-M1, 2025; TRL loss_type="cispo"); "kl_cov" = unclipped ratio, KL penalty on the
    highest-covariance tokens (KL-Cov, Cui et al. 2025, arXiv 2505.22617); "clip_cov" = PPO-clip with
    a random few high-covariance tokens left out of the loss (Clip-Cov, same paper)."""

    kl_cov_ratio: float = 2e-4
    """k: fraction of a minibatch's tokens that KL-Cov penalises (Cui et al. 2025; verl kl_cov_ratio,
    2e-4 there; at least one token is always chosen). In (0, 1]. Used by policy_loss="kl_cov"."""

    kl_cov_coef: float = 0.1
    """beta_KL: weight of |log pi - log pi_old| on KL-Cov's selected tokens (Cui et al. 2025; verl
    ppo_kl_coef, whose config default is 0.1; it was 1.0 here once, verl's fallback when the
    config gives None). >= 0. Used by policy_loss="kl_cov"."""

    sapo_tau_pos: float = 1.0
    """tau_pos: SAPO's gate temperature on tokens with A > 0 (Gao et al. 2025; verl tau_pos, TRL
    sapo_temperature_pos; 1.0 in all three). > 0. Used by policy_loss="sapo"."""

    sapo_tau_neg: float = 1.05
    """tau_neg: SAPO's temperature on tokens with A <= 0; larger than tau_pos, so negative updates fade
    sooner off-policy (verl tau_neg, TRL sapo_temperature_neg; 1.05). > 0. Used by policy_loss="sapo"."""

    top_entropy_quantile: float = 1.0
    """rho: train the policy term only on the top-rho fraction of a minibatch's tokens by policy entropy
    (Wang et al. 2025, "Beyond the 80/20 Rule", arXiv 2506.01939, rho = 0.2 there; TRL
    top_entropy_quantile). The KL term and the loss's normalisation still cover every token; the entropy
    bonus covers the selected ones (as in TRL). 1.0 = every token (off). In [0, 1]."""

    clip_cov_ratio: float = 2e-4
    """r: fraction of a minibatch's tokens that Clip-Cov removes from the loss (Cui et al. 2025; verl
    clip_cov_ratio, 2e-4 there; at least one token while candidates exist). In (0, 1]. Drawn with the
    agent's seeded generator. Used by policy_loss="clip_cov"."""

    clip_cov_lb: float = 1.0
    """omega_low: Clip-Cov draws only tokens whose centred covariance is above this (verl clip_cov_lb)."""

    clip_cov_ub: float = 5.0
    """omega_high: ... and below this (verl clip_cov_ub). Must exceed clip_cov_lb."""

    entropy_coef: float = 0.0
    """Entropy bonus weight: the loss subtracts entropy_coef times the mean per-token policy entropy
    (nats) of the tokens in the loss (Williams & Peng 1991; Mnih et al. 2016; TRL entropy_coef, verl
    actor.entropy_coeff). 0 = off. >= 0."""

    mask_truncated: bool = False
    """Leave answers that hit the length limit out of the loss (DAPO section 3.4, "overlong
    filtering"; TRL mask_truncated_completions). Their rewards still enter their group's advantages;
    only their tokens are out of the policy, KL and entropy terms."""

    dynamic_sampling: bool = False
    """DAPO dynamic sampling (Yu et al. 2025, section 3.2; verl algorithm.filter_groups.enable): drop
    groups whose rewards all tie (zero advantage, no policy gradient) and roll out more groups of B
    prompts until B informative groups are collected (extras are dropped). Every rolled-out env step
    counts toward total_timesteps and num_timesteps."""

    dynamic_sampling_max_rounds: int = 10
    """Most rollout rounds (of B groups each) per iteration under dynamic sampling (verl
    max_num_gen_batches, which verl 0.9.1 ignores with a warning: it refills without a bound). When the
    budget is spent with fewer than B informative groups, the iteration trains on those it has (none:
    no update). At least 1."""

    gamma: float = 1.0
    """gamma: discount of the critic's token-level GAE, per token (Schulman et al. 2016, arXiv
    1506.02438; verl algorithm.gamma, 1.0 there; TRL 1.12 PPOConfig gamma, 1.0). In [0, 1]. Used by
    advantage="gae"."""

    lam: float = 1.0
    """lambda: GAE's bias-variance trade-off (Schulman et al. 2016; verl algorithm.lam, 1.0 there; TRL
    1.12 PPOConfig lam, 0.95). With gamma = lam = 1 a token's advantage is the answer's reward minus the
    critic's value of the token's state. In [0, 1]. Used by advantage="gae"."""

    cliprange_value: float = 0.5
    """c_v: the critic's new value predictions are clipped to [V_old - c_v, V_old + c_v] inside the value
    loss 0.5 max((v - R)^2, (clip(v) - R)^2) (PPO2's value clipping; verl critic.cliprange_value, 0.5
    there; TRL 1.12 PPOConfig cliprange_value, 0.2). > 0. Used by advantage="gae"."""

    critic_learning_rate: float | None = None
    """The critic's Adam step size (verl critic.optim.lr, 1e-5 there against the actor's 1e-6). None:
    the policy's learning_rate (one step size for both, as SB3 PPO and TRL 1.12's PPOTrainer). The critic is
    a separate network with its own optimiser, so this is also its value loss's weight: verl's critic
    loss has no coefficient beyond the 0.5, and TRL's vf_coef (0.1) weighs the value loss against the
    policy loss in one optimiser (docs/agent.md). > 0. Used by advantage="gae"."""

    critic_warmup: int = 0
    """Iterations at the start of training in which only the critic learns (the policy is not
    updated), so the first policy steps see a fitted baseline (verl trainer.critic_warmup, 0 there:
    k gives k critic-only iterations here and k - 1 in verl, whose step counter starts at 1).
    Counted with the agent's iterations (from the first learn(), continued by
    reset_num_timesteps=False). >= 0; > 0 needs advantage="gae"."""

    token_sum_norm: int | None = None
    """The constant length in "seq_mean_token_sum" (Dr. GRPO's generation budget; verl
    loss_scale_factor; TRL max_completion_length). None = the env's maximum episode length (the
    task's max_length, or the env spec's max_episode_steps). At least 1."""

    def __post_init__(self) -> None:
        critic = self.advantage in CRITIC_ESTIMATORS
        if self.group_size is not None:
            if critic:
                _int_at_least("group_size", self.group_size, 1, "")
            else:
                _int_at_least("group_size", self.group_size, 2, "a group needs two answers to have a "
                              "baseline (with advantage='gae' the critic is the baseline and G may be 1)")
        if self.prompts_per_iter is not None:
            _int_at_least("prompts_per_iter", self.prompts_per_iter, 1, "")
        if self.epochs is not None:
            _int_at_least("epochs", self.epochs, 1, "")
        _int_at_least("minibatches", self.minibatches, 1, "")
        if self.prompts_per_iter is not None and self.minibatches > self.prompts_per_iter:
            raise ValueError(
                f"minibatches={self.minibatches} must not exceed prompts_per_iter={self.prompts_per_iter}:"
                " a minibatch holds whole groups"
            )
        _real_in("clip_eps", self.clip_eps, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
        if self.beta is not None:
            _real_in("beta", self.beta, lo=0.0)
        _real_in("adv_eps", self.adv_eps, lo=0.0, lo_open=True)
        _real_in("length_weight", self.length_weight, lo=0.0)
        if self.learning_rate is not None:
            _real_in("learning_rate", self.learning_rate, lo=0.0, lo_open=True)
        if self.max_grad_norm is not None:
            _real_in("max_grad_norm", self.max_grad_norm, lo=0.0, lo_open=True)
        _choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        if self.advantage is not None:
            _choice("advantage", self.advantage, {**ADVANTAGE_ESTIMATORS, **CRITIC_ESTIMATORS})
        _real_in("gamma", self.gamma, lo=0.0, hi=1.0)
        _real_in("lam", self.lam, lo=0.0, hi=1.0)
        _real_in("cliprange_value", self.cliprange_value, lo=0.0, lo_open=True)
        if self.critic_learning_rate is not None:
            _real_in("critic_learning_rate", self.critic_learning_rate, lo=0.0, lo_open=True)
        _int_at_least("critic_warmup", self.critic_warmup, 0, "")
        if not critic and self.advantage is not None and (
                self.critic_warmup or self.critic_learning_rate is not None):
            raise ValueError(
                f"critic_warmup={self.critic_warmup!r} / critic_learning_rate={self.critic_learning_rate!r} "
                f"need a learned critic (advantage='gae'), not advantage={self.advantage!r}"
            )
        if critic and self.dynamic_sampling and self.group_size == 1:
            raise ValueError(
                "dynamic_sampling=True with group_size=1 would drop every group: a group of one answer "
                "always ties (DAPO's filter keeps groups whose rewards differ)"
            )
        _choice("loss_aggregation", self.loss_aggregation, LOSS_AGGREGATIONS)
        _choice("tabular_optimizer", self.tabular_optimizer, {"sgd": None, "adam": None})
        for flag in ("unbiased_std", "mask_truncated", "dynamic_sampling"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag}={getattr(self, flag)!r} must be a bool")
        _choice("policy_loss", self.policy_loss, POLICY_LOSSES)
        if self.clip_eps_high is not None and self.clip_eps_high is not UNSET:
            _real_in("clip_eps_high", self.clip_eps_high, lo=0.0, lo_open=True)
        if self.dual_clip_c is not None:
            _real_in("dual_clip_c", self.dual_clip_c, lo=1.0, lo_open=True)
            high = self.clip_eps_high
            if high is None or high is UNSET:
                high = self.clip_eps
            if self.dual_clip_c <= 1.0 + high:
                raise ValueError(
                    f"dual_clip_c={self.dual_clip_c!r} must exceed 1 + clip_eps_high = {1.0 + high:g} "
                    "(clip_eps when clip_eps_high is unset): at or below the clip's upper bound the dual "
                    "clip cuts into the clipped objective itself, where verl's clip_ratio_c and TRL's delta "
                    "(it clamps the ratio before the clip, for either sign of the advantage) disagree; TRL "
                    "recommends delta > 1 + epsilon"
                )
            readers = [name for name, loss in POLICY_LOSSES.items() if "dual_clip_c" in loss.settings]
            if self.policy_loss not in readers:
                raise ValueError(
                    f"dual_clip_c={self.dual_clip_c!r} applies to "
                    f"{' / '.join(f'policy_loss={name!r}' for name in readers)} only, not "
                    f"{self.policy_loss!r} (verl applies clip_ratio_c only to its vanilla loss too)"
                )
        if not POLICY_LOSSES[self.policy_loss].clip_high and self.clip_eps_high not in (None, UNSET):
            raise ValueError(
                f"clip_eps_high={self.clip_eps_high!r} has no effect with policy_loss={self.policy_loss!r}: "
                "it does not clip the ratio"
            )
        if POLICY_LOSSES[self.policy_loss].per_answer and self.loss_aggregation != "seq_mean_token_mean":
            raise ValueError(
                f"policy_loss={self.policy_loss!r} needs loss_aggregation='seq_mean_token_mean', not "
                f"{self.loss_aggregation!r}: its objective is one number per answer, so each answer is "
                "weighted once (the paper's objective; verl hard-codes it for 'sapo' and 'geo_mean' and "
                "accepts other modes for 'gspo', where the answer-level ratio is then reweighted by length)"
            )
        _choice("seq_mean_rows", self.seq_mean_rows, SEQ_MEAN_ROWS)
        if self.seq_mean_rows != "all" and not self.loss_aggregation.startswith("seq_mean"):
            raise ValueError(
                f"seq_mean_rows={self.seq_mean_rows!r} has no effect with loss_aggregation="
                f"{self.loss_aggregation!r}: it only changes how seq_mean_* aggregations count answers"
            )
        _real_in("sapo_tau_pos", self.sapo_tau_pos, lo=0.0, lo_open=True)
        _real_in("sapo_tau_neg", self.sapo_tau_neg, lo=0.0, lo_open=True)
        _real_in("top_entropy_quantile", self.top_entropy_quantile, lo=0.0, hi=1.0)
        _real_in("kl_cov_ratio", self.kl_cov_ratio, lo=0.0, lo_open=True, hi=1.0)
        _real_in("kl_cov_coef", self.kl_cov_coef, lo=0.0)
        _real_in("clip_cov_ratio", self.clip_cov_ratio, lo=0.0, lo_open=True, hi=1.0)
        _real_in("clip_cov_lb", self.clip_cov_lb)
        _real_in("clip_cov_ub", self.clip_cov_ub)
        if self.clip_cov_ub <= self.clip_cov_lb:
            raise ValueError(
                f"clip_cov_ub={self.clip_cov_ub!r} must exceed clip_cov_lb={self.clip_cov_lb!r}: the window "
                "Clip-Cov draws tokens from would be empty"
            )
        _real_in("entropy_coef", self.entropy_coef, lo=0.0)
        _int_at_least("dynamic_sampling_max_rounds", self.dynamic_sampling_max_rounds, 1, "")
        if self.token_sum_norm is not None:
            _int_at_least("token_sum_norm", self.token_sum_norm, 1, "")
        if not isinstance(self.action_masks, bool):
            raise ValueError(f"action_masks={self.action_masks!r} must be a bool")

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready; a field left :data:`UNSET` is omitted (``from_dict`` leaves it unset
        again), and so are the critic's fields at their defaults when no critic trains (a run key of a
        critic-free config is what it was before those fields existed), so
        ``GRPOConfig.from_dict(c.to_dict()) == c``."""
        out = {name: value for name, value in asdict(self).items() if value is not UNSET}
        if self.advantage not in CRITIC_ESTIMATORS:
            for f in fields(self):
                if f.name in _CRITIC_FIELDS and out.get(f.name) == f.default:
                    del out[f.name]
        return out

    def loss_settings(self, max_length: int | None = None,
                      rng: np.random.Generator | None = None) -> LossSettings:
        """The settings :func:`agents.grpo.objective.grpo_token_loss` reads, built from this (resolved)
        config: the one place a config field becomes a loss constant. ``max_length`` is the fixed length
        of "seq_mean_token_sum" (``token_sum_norm`` when set, else this one: the env's maximum episode
        length); ``rng`` is the generator a loss registered with ``uses_rng`` draws with (Clip-Cov's tokens).
        The policy loss gets the config fields it registered
        (:func:`agents.grpo.surrogates.register_policy_loss`)."""
        if self.beta is None or self.clip_eps_high is UNSET:
            what = "beta" if self.beta is None else "clip_eps_high"
            raise ValueError(f"{what} is unset: resolve the config first (GRPOConfig.resolve(policy))")
        if self.token_sum_norm is not None and max_length is not None and self.token_sum_norm < max_length:
            raise ValueError(
                f"token_sum_norm={self.token_sum_norm} is shorter than the env's maximum episode length "
                f"{max_length}: the normaliser must bound every answer's length"
            )
        norm = None
        if self.loss_aggregation == "seq_mean_token_sum":
            norm = self.token_sum_norm or max_length
            if norm is None:
                raise ValueError(
                    "loss_aggregation='seq_mean_token_sum' divides by a fixed maximum length, and this "
                    "env declares none (no task max_length, no spec max_episode_steps); set token_sum_norm"
                )
        loss = POLICY_LOSSES[self.policy_loss]
        missing = [name for name in loss.settings if not hasattr(self, name)]
        if missing:
            raise ValueError(f"policy_loss={self.policy_loss!r} reads the settings {missing}, which are not "
                             f"fields of {type(self).__name__}; add them as fields (docs/agent.md)")
        surrogate = SurrogateSettings(rng=rng if loss.uses_rng else None,
                                      **{name: getattr(self, name) for name in loss.settings})
        return LossSettings(beta=self.beta, kl_estimator=self.kl_estimator, aggregation=self.loss_aggregation,
                            policy_loss=self.policy_loss, max_length=None if norm is None else int(norm),
                            surrogate=surrogate, seq_mean_rows=self.seq_mean_rows)

    def resolve(self, policy: str) -> GRPOConfig:
        """This config with every unset field of :data:`PRESET_FIELDS` (None, or :data:`UNSET` where None
        is a setting) taken from ``policy``'s preset, or from the ``"paper"`` preset where that one does
        not set it (None when neither does). Fields already set are kept. A preset's ``learning_rate``
        is for its optimiser: a tabular config with another ``tabular_optimizer`` keeps None, and the
        policy takes that optimiser's step size (Adam: 0.1)."""
        if policy not in PRESETS:
            raise ValueError(f"no preset for policy={policy!r}; presets exist for {sorted(PRESETS)}")
        filled = {
            name: PRESETS[policy].get(name, PRESETS["paper"].get(name))
            for name in PRESET_FIELDS
            if _is_unset(name, getattr(self, name))
        }
        own = PRESETS[policy].get("tabular_optimizer")
        if own is not None and self.tabular_optimizer != own:
            filled.pop("learning_rate", None)
        if policy == "tabular" and self.advantage in CRITIC_ESTIMATORS:
            raise ValueError(
                f"advantage={self.advantage!r} needs a value network, and the tabular policy has none; "
                "use policy='mlp' or 'transformer'"
            )
        if not POLICY_LOSSES[self.policy_loss].clip_high and "clip_eps_high" in filled:
            filled["clip_eps_high"] = None  # e.g. KL-Cov clips nothing; a preset's clip-higher does not apply
        return dataclasses.replace(self, **filled) if filled else self

    @classmethod
    def preset(cls, policy: str, **overrides: Any) -> GRPOConfig:
        """A named preset with ``overrides`` applied, every field set: ``"tabular"`` and ``"mlp"`` are
        the tuned defaults of those policies (what ``GRPO(env, policy=...)`` uses), ``"paper"`` the
        papers' values. See :data:`PRESETS` for the values and the measurements behind them."""
        if policy not in PRESETS:
            raise ValueError(f"no preset for policy={policy!r}; presets exist for {sorted(PRESETS)}")
        values = {**PRESETS[policy], **overrides}
        own = PRESETS[policy].get("tabular_optimizer")
        if own is not None and "learning_rate" not in overrides and values["tabular_optimizer"] != own:
            values.pop("learning_rate", None)  # the preset's step size was for its own optimiser
        return cls.from_dict(values).resolve(policy)

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Each field's docstring (read from this source file), for ``--help`` texts."""
        tree = ast.parse(inspect.getsource(cls))
        body = tree.body[0].body  # type: ignore[attr-defined]
        docs: dict[str, str] = {}
        for node, nxt in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                    docs[node.target.id] = " ".join(str(nxt.value.value).split())
        return docs

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GRPOConfig:
        """Build a config from a dict (e.g. a checkpoint or a tuned-hyperparameter file)."""
        if not isinstance(data, dict):
            raise ValueError(f"a GRPOConfig needs a dict of fields, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown GRPOConfig fields {unknown}; known fields are {sorted(known)}")
        return cls(**data)


def _is_unset(name: str, value: object) -> bool:
    """Whether field ``name`` holding ``value`` was left for the preset to fill."""
    return value is UNSET or (value is None and name not in _NONE_IS_A_VALUE)


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


#: Named presets. "paper": the papers' values (DeepSeekMath; the lesson's G = 8). "tabular", "mlp": the
#: per-policy defaults, measured on rlvr/Arithmetic-v0 over 10 seeds (docs/agent.md, "What made tabular
#: GRPO robust"; ``python -m benchmarks.grpo_targets``); a field they do not set takes the paper's value.
#:
#: * tabular: with the paper's std-normalised advantage the agent collapsed on 10 of 10 seeds: a group
#:   whose only difference is one well-formed (0.1) answer among malformed (0.0) ones gets advantages as
#:   large as a group that found the correct (1.1) answer, so the table commits to the first
#:   grammatical but wrong expression family it meets; then every group ties and learning stops.
#:   Dr. GRPO's mean-only advantage keeps the 10:1 ratio between accuracy and format, plain SGD keeps
#:   it per table row (Adam would rescale every row's step), and G = 32 answers per prompt make it
#:   likely that a group contains a correct answer once the table has started to commit.
#:   mu = 1 and beta = 0.02 (they were the paper's mu = 4, beta = 0.04): with plain SGD at
#:   lr 300, a row that one step has just concentrated on a rewarded token gives every other token the
#:   group sampled a k3 gradient r - 1 of up to ~12 (r = pi_ref / pi), and the stale epochs 2-4 took
#:   that step on all of the row's answers at once, overshooting: in 9 of 9 such updates on seeds 0-9 a
#:   target's correct answers went from 0.47-0.77 (after epoch 1) to < 0.01 (after epoch 2). The first
#:   correct answers of the last target were thrown away again and again, and meanwhile its held-out
#:   greedy answer, read off near-uniform rows, was sometimes right by chance: the "solved, then lost"
#:   runs (3/10) were never solved under sampling. mu = 1, beta = 0.02 on seeds 0-9: 0/10 such drops
#:   at 300k steps, median steps to solved 53k instead of 88k (``python -m benchmarks.tabular_hold``;
#:   0/10 at 1M too; beta = 0.005 left 2 of 10 seeds unsolved: the KL is also the table's exploration
#:   floor). Reported on fresh seeds in docs/agent.md, "What made tabular GRPO robust" ("Solved, then
#:   lost?").
#: * mlp: the paper's advantage works when the KL anchor is strong: with beta = 0.04 (the lesson's upper
#:   end) 8 of 10 seeds reached 100% and the rest collapsed onto one wrong answer for a target; with
#:   beta = 0.2 all 10 did, and the policy keeps ~0.2 nats of entropy (the reference is the random
#:   initial network, so beta here is an exploration floor: the lesson's "raise beta" hint).
#:   B = 8 prompts per iteration with G = 16 generalised to held-out prompts better than B = 2-4.
#: * countdown: the mlp preset changed where Countdown N=3 (``rlvr/Countdown-v0``, grammar masks on)
#:   needed it, measured on seeds 0-1 at 300k steps (docs/countdown.md, "GRPO on Countdown";
#:   ``python -m benchmarks.countdown`` reports fresh seeds). length_weight = 0: under masks every
#:   answer is well-formed, so the k1.5 term is the only thing telling answers of a failed group apart
#:   and it pays the shortest (one number + EOS): every seed collapsed to length 2 (held-out greedy
#:   0.12) and learned nothing after; without it 0.30. beta = 0 with DAPO's dynamic sampling and
#:   clip-higher (0.28): sampled success rose from 0.47 to 0.59 (the beta = 0.2 anchor to the random
#:   initial net kept entropy, and so sampled success, artificially low) at equal greedy success.
#:   Tried and not kept (no gain in held-out greedy success at 300k): a 256-256 net, 4 minibatches
#:   with B = 16, an entropy bonus of 0.01.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "epochs": 4,
        "group_size": 8,
        "prompts_per_iter": 8,
        "advantage": "grpo",
        "beta": 0.04,
    },
    "tabular": {
        "group_size": 32,
        "prompts_per_iter": 2,
        "advantage": "dr_grpo",
        "tabular_optimizer": "sgd",
        "learning_rate": 300.0,
        "epochs": 1,
        "beta": 0.02,
    },
    "mlp": {
        "group_size": 16,
        "prompts_per_iter": 8,
        "advantage": "grpo",
        "learning_rate": 1e-3,
        "beta": 0.2,
    },
    "countdown": {
        "group_size": 16,
        "prompts_per_iter": 8,
        "advantage": "grpo",
        "learning_rate": 1e-3,
        "beta": 0.0,
        "length_weight": 0.0,
        "dynamic_sampling": True,
        "clip_eps_high": 0.28,
    },
    # the R1 recipe: the causal transformer after a supervised cold start (agents.sft), on Countdown N=3
    # with grammar masks; the countdown preset's choices (no k1.5 length term under masks, dynamic
    # sampling, clip-higher) with a small step size for a pretrained policy and B x G = 256 episodes;
    # mu = 2 epochs of 4 minibatches (8 gradient steps per batch, as many as the R1 study's MaskablePPO
    # takes per rollout). Chosen on seed 0 (never reported) from the recipe's base, among five settings
    # at 300k steps by held-out sampled success (the search budget MaskablePPO's settings got; python -m
    # benchmarks.r1.tune --summary, benchmarks/results/r1/tune.md): mu = 1 (the previous preset) 0.576,
    # lr 3e-4 0.604, lr 1e-3 0.453, beta = 0 0.589, this one 0.629 (base 0.499), at 0.57x mu = 1's
    # env steps/s.
    "transformer": {
        "epochs": 2,
        "minibatches": 4,
        "group_size": 16,
        "prompts_per_iter": 16,
        "advantage": "grpo",
        "learning_rate": 1e-4,
        "beta": 0.01,
        "length_weight": 0.0,
        "dynamic_sampling": True,
        "clip_eps_high": 0.28,
    },
}

#: The R1 recipe's supervised cold start before GRPO (:func:`agents.sft.cold_start`'s defaults and the
#: CLI's ``--sft-*`` defaults; the data budget is the caller's, 100,000 solutions in the recipe), for the
#: ``transformer`` policy at its default architecture (3 layers, width 128, PyTorch's default init).
#: Chosen on the choosing seeds 0-2 by ``python -m benchmarks.r1.base_search`` (docs/r1.md, "the base"):
#: 12 epochs of per-prompt minibatches.
COLD_START: dict[str, Any] = {"epochs": 12, "batch_size": 256, "learning_rate": 1e-3, "minibatch": "prompts",
                              "warmup": 0.0}

#: The fields a preset fills when a config leaves them unset (None, or UNSET where None is a setting).
PRESET_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(GRPOConfig)
    if (f.default is None or f.default is UNSET) and any(f.name in p for p in PRESETS.values())
)
