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

The presets and :data:`UNSET` are :mod:`agents.grpo.presets` (re-exported here), the checks that refuse
impossible settings :mod:`agents.grpo.validation`; this module is the dataclass, whose every field
carries its symbol, source and recommended value in its own docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from agents.grpo.objective import CRITIC_ESTIMATORS, POLICY_LOSSES, LossSettings, SurrogateSettings
from agents.grpo.presets import COLD_START, PRESETS, UNSET, Unset, is_unset
from agents.grpo.validation import validate

__all__ = ["COLD_START", "GRPOConfig", "PRESETS", "PRESET_FIELDS", "UNSET", "Unset"]

#: The value network's fields (``advantage="gae"``), read by no other estimator.
_CRITIC_FIELDS = frozenset({"gamma", "lam", "cliprange_value", "critic_learning_rate", "critic_warmup"})


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
        validate(self)  # each concern's checks, in order (agents.grpo.validation)

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
            if is_unset(name, getattr(self, name))
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


#: The fields a preset fills when a config leaves them unset (None, or UNSET where None is a setting).
PRESET_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(GRPOConfig)
    if (f.default is None or f.default is UNSET) and any(f.name in p for p in PRESETS.values())
)
