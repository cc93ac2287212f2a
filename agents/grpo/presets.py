"""The named presets a :class:`agents.grpo.GRPOConfig` takes its unset fields from, the measurements behind
them, and :data:`UNSET`, the marker of a field left for the preset where ``None`` is a setting of its own.

:meth:`agents.grpo.GRPOConfig.resolve` fills a config's unset fields from here (``agents.grpo.config``'s
module docstring says what "unset" means); the fields a preset may fill are
:data:`agents.grpo.config.PRESET_FIELDS`.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["COLD_START", "NONE_IS_A_VALUE", "PRESETS", "UNSET", "Unset", "is_unset"]


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


#: "Not set by the caller: take the policy's preset" for a field whose ``None`` is a value of its own
#: (``clip_eps_high=None`` is the symmetric clip). :meth:`GRPOConfig.resolve` replaces it.
UNSET = Unset.UNSET
#: Fields where ``None`` is a setting (not "unset"); their unset value is :data:`UNSET`.
NONE_IS_A_VALUE = frozenset({"clip_eps_high"})


def is_unset(name: str, value: object) -> bool:
    """Whether field ``name`` holding ``value`` was left for the preset to fill."""
    return value is UNSET or (value is None and name not in NONE_IS_A_VALUE)


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
