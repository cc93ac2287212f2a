"""``GRPOConfig``: every GRPO constant, named once, with its symbol and source."""

from __future__ import annotations

import ast
import inspect
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from agents.objective import ADVANTAGE_ESTIMATORS, KL_ESTIMATORS, LOSS_AGGREGATIONS

__all__ = ["GRPOConfig", "PRESETS"]


@dataclass(frozen=True)
class GRPOConfig:
    """Hyperparameters of the GRPO agent. Impossible settings raise ``ValueError`` at construction."""

    group_size: int = 8
    """G: answers sampled per prompt; the group's reward statistics are the baseline (DeepSeekMath
    section 4.1, G=64 there; the lesson: "G=8 is common"). At least 2."""

    prompts_per_iter: int = 8
    """B: prompts per iteration, so one iteration runs B x G episodes in lockstep."""

    epochs: int = 4
    """mu: optimisation passes over each batch of groups (DeepSeekMath Algorithm 1 "GRPO iterations mu";
    PPO-style multi-epoch reuse kept near on-policy by the clip)."""

    minibatches: int = 1
    """Minibatches per epoch (groups are kept whole inside a minibatch). 1 = full-batch steps."""

    clip_eps: float = 0.2
    """epsilon: PPO clip range of the per-token ratio rho = pi_theta / pi_old (lesson: ~0.2)."""

    beta: float = 0.04
    """beta: weight of the KL penalty to the frozen reference policy (lesson: 0.001-0.04; DeepSeekMath
    uses 0.04). Here the reference is the initial policy, which for the tabular table is uniform, so
    beta also keeps exploration alive: it is what stops the collapse onto one well-formed wrong answer
    (see README, "What made tabular GRPO robust")."""

    kl_estimator: str = "k3"
    """Estimator of KL(pi_theta || pi_ref): "k3" = r - log r - 1, r = pi_ref/pi_theta (DeepSeekMath eq. 4,
    Schulman 2020), or "k1", "k2"."""

    advantage: str = "grpo"
    """Advantage estimator: "grpo" = (r - mean) / (std + eps) (DeepSeekMath 4.1.2), "dr_grpo" = r - mean
    (Liu et al. 2025), "rloo" = leave-one-out baseline (Ahmadian et al. 2024)."""

    unbiased_std: bool = True
    """Use the sample std (ddof=1) in the "grpo" advantage, as TRL and verl do."""

    adv_eps: float = 1e-4
    """Added to the group std before dividing (TRL uses 1e-4)."""

    loss_aggregation: str = "seq_mean_token_mean"
    """How token losses are averaged: "seq_mean_token_mean" (GRPO paper eq. 3), "token_mean" (DAPO),
    "seq_mean_token_sum" (Dr. GRPO)."""

    length_weight: float = 0.1
    """Weight of the Kimi k1.5 length reward (Kimi k1.5 section 2.3.3) added to each group's rewards,
    from ``rlvr_env.length_reward``. Zero for a group whose lengths are all equal (always, on the
    fixed-length Arithmetic task). Applied only on envs whose final info says "correct" and "length"."""

    learning_rate: float | None = None
    """Step size. None picks the policy's default: for "tabular", 300 with SGD (the aggregated loss
    averages over the B x G x L tokens of a batch, so one answer's gradient on its table rows is
    ~1/(B G L) of its advantage) or 0.1 with Adam; for "mlp", 3e-4 (SB3 PPO's Adam default, so the
    two agents share an optimiser setting)."""

    tabular_optimizer: str = "sgd"
    """Optimiser of the tabular policy: "sgd" (plain gradient steps, the lesson's) or "adam". Adam
    rescales each table row's step to about ``learning_rate`` whatever the advantage's size, so a
    0.1 format reward moves a row as far as a 1.0 accuracy reward and the KL pull as far as either;
    SGD keeps the objective's scale. The mlp policy always uses Adam (as SB3 PPO does)."""

    max_grad_norm: float | None = 0.5
    """Global gradient-norm clip for the neural policy (SB3 PPO's default 0.5); None disables it.
    The tabular policy ignores it."""

    action_masks: bool = True
    """Grammar-constrained decoding: when the env offers ``action_masks()`` (every ``rlvr_env`` env and
    its native vector env; the protocol sb3-contrib's MaskablePPO reads), sample from the policy
    restricted to the allowed tokens and compute every log-prob of the update (current, old, reference)
    under the same mask, as LLM RLVR stacks do with constrained decoding. Evaluation and ``predict``
    then mask too. False samples from the full vocabulary. An env without masks is never masked."""

    def __post_init__(self) -> None:
        _int_at_least("group_size", self.group_size, 2, "a group needs two answers to have a baseline")
        _int_at_least("prompts_per_iter", self.prompts_per_iter, 1, "")
        _int_at_least("epochs", self.epochs, 1, "")
        _int_at_least("minibatches", self.minibatches, 1, "")
        if self.minibatches > self.prompts_per_iter:
            raise ValueError(
                f"minibatches={self.minibatches} must not exceed prompts_per_iter={self.prompts_per_iter}:"
                " a minibatch holds whole groups"
            )
        _real_in("clip_eps", self.clip_eps, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
        _real_in("beta", self.beta, lo=0.0)
        _real_in("adv_eps", self.adv_eps, lo=0.0, lo_open=True)
        _real_in("length_weight", self.length_weight, lo=0.0)
        if self.learning_rate is not None:
            _real_in("learning_rate", self.learning_rate, lo=0.0, lo_open=True)
        if self.max_grad_norm is not None:
            _real_in("max_grad_norm", self.max_grad_norm, lo=0.0, lo_open=True)
        _choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        _choice("advantage", self.advantage, ADVANTAGE_ESTIMATORS)
        _choice("loss_aggregation", self.loss_aggregation, LOSS_AGGREGATIONS)
        _choice("tabular_optimizer", self.tabular_optimizer, {"sgd": None, "adam": None})
        if not isinstance(self.unbiased_std, bool):
            raise ValueError(f"unbiased_std={self.unbiased_std!r} must be a bool")
        if not isinstance(self.action_masks, bool):
            raise ValueError(f"action_masks={self.action_masks!r} must be a bool")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def preset(cls, policy: str, **overrides: Any) -> GRPOConfig:
        """The tuned default for a policy (what ``GRPO(env, config=None, policy=...)`` uses), with
        ``overrides`` applied. See :data:`PRESETS` for the values and the measurements behind them."""
        if policy not in PRESETS:
            raise ValueError(f"no preset for policy={policy!r}; presets exist for {sorted(PRESETS)}")
        return cls.from_dict({**PRESETS[policy], **overrides})

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


#: Per-policy defaults, measured on rlvr/Arithmetic-v0 over 10 seeds (README, "What made tabular GRPO
#: robust"; ``python -m benchmarks.grpo_targets``). The dataclass defaults above are the papers'.
#:
#: * tabular: with the paper's std-normalised advantage the agent collapsed on 10 of 10 seeds: a group
#:   whose only difference is one well-formed (0.1) answer among malformed (0.0) ones gets advantages as
#:   large as a group that found the correct (1.1) answer, so the table commits to the first
#:   grammatical but wrong expression family it meets; then every group ties and learning stops.
#:   Dr. GRPO's mean-only advantage keeps the 10:1 ratio between accuracy and format, plain SGD keeps
#:   it per table row (Adam would rescale every row's step), and G = 32 answers per prompt make it
#:   likely that a group contains a correct answer once the table has started to commit.
#: * mlp: the paper's advantage works when the KL anchor is strong: with beta = 0.04 (the lesson's upper
#:   end) 8 of 10 seeds reached 100% and the rest collapsed onto one wrong answer for a target; with
#:   beta = 0.2 all 10 did, and the policy keeps ~0.2 nats of entropy (the reference is the random
#:   initial network, so beta here is an exploration floor: the lesson's "raise beta" hint).
#:   B = 8 prompts per iteration with G = 16 generalised to held-out prompts better than B = 2-4.
PRESETS: dict[str, dict[str, Any]] = {
    "tabular": {
        "group_size": 32,
        "prompts_per_iter": 2,
        "advantage": "dr_grpo",
        "tabular_optimizer": "sgd",
        "learning_rate": 300.0,
    },
    "mlp": {
        "group_size": 16,
        "prompts_per_iter": 8,
        "advantage": "grpo",
        "learning_rate": 1e-3,
        "beta": 0.2,
    },
}
