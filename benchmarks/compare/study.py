"""A study as data: its env and kwargs, contenders, seeds and budget, in one readable place.

Adding a contender is one :class:`Contender` line in :data:`CONTENDERS` (plus a search space in
:mod:`benchmarks.compare.tune` if it is tuned); adding a study is one :class:`Study` in :data:`STUDIES`, which
``python -m benchmarks.compare --study NAME`` then runs.

Seeds: reported studies use seeds from 10 up (the GRPO agent's presets were chosen in sweeps over seeds
0..9, ``agents/grpo/config.py``); tuning uses seeds 1000+ (:mod:`benchmarks.compare.tune`), which no
study reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.core.common import LOCAL_OUT, RESULTS_DIR, parse_seeds, seeds_argument
from benchmarks.core.store import digest

__all__ = [
    "CONTENDERS", "Contender", "DEFAULT_STUDY", "VERDICT_COLUMNS", "EVALS_PER_RUN", "HPARAMS_DIR",
    "LOCAL_OUT", "REFERENCES",
    "RESULTS_DIR", "KEY_TAG", "RunSpec", "STUDIES", "Study", "THRESHOLDS", "contender_hyperparams",
    "hparams_path", "parse_contenders", "parse_seeds", "resolve_hyperparams", "seeds_argument",
]

#: The tag every stored run key and record of a study carries: fixed, since changing it would change every
#: key (a change of what a run measures bumps :data:`benchmarks.core.store.CODE_VERSION` instead).
KEY_TAG = 2
# A GRPO spec carries its whole resolved GRPOConfig (the policy's preset plus any tuned overrides), so a
# change of the agent's preset changes the run key and old runs are not reused; SB3 specs carry only
# what differs from SB3's defaults.
HPARAMS_DIR = Path(__file__).resolve().parent.parent / "hparams"
#: Checkpoints per run (a checkpoint every budget / EVALS_PER_RUN env steps).
EVALS_PER_RUN = 25
THRESHOLDS = (0.95, 1.0)


@dataclass(frozen=True)
class Contender:
    """One entry of a comparison: an algorithm, a policy, and where its hyperparameters come from."""

    name: str
    algo: str  # "GRPO", "PPO", "A2C" or "MaskablePPO"
    policy: str  # "tabular" or "mlp"
    tuned: bool  # hyperparameters from benchmarks/hparams/<name>[__<study>].json
    label: str
    #: Fixed hyperparameters applied before any tuned ones (SB3 keywords, or GRPOConfig fields).
    base: Mapping[str, Any] = field(default_factory=dict)
    #: Trained and scored with the env's grammar masks (``action_masks()``).
    masked: bool = False
    #: GRPO only: the named ``GRPOConfig`` preset to start from (default: the policy's own); if the
    #: agent does not define it (yet), the policy's preset is used and the run records which it was.
    preset: str | None = None


# SB3 PPO "defaults": SB3's defaults per update (2,048-step rollouts, minibatch 64, 10 epochs, lr 3e-4,
# ...), with the rollout collected from 8 env copies x 256 steps instead of 1 x 2,048: the same updates on
# the same amount of data (episodes are independent answers), ~1.7x the env steps/s here.
_PPO_ROLLOUT = {"n_envs": 8, "n_steps": 256}
# The fair wall-clock: the same per-update batch as SB3's defaults, n_envs * n_steps = 2,048
# exactly (minibatch 64, 10 epochs unchanged), collected at GRPO's width on Countdown (B x G = 8 x 16 =
# 128 rows) from the native vector env through rlvr_env.to_sb3_vec_env instead of DummyVecEnv copies.
_PPO_NATIVE = {"n_envs": 128, "n_steps": 16, "vec_env": "native"}
_UNMASKED = {"action_masks": False}

CONTENDERS: dict[str, Contender] = {
    c.name: c
    for c in (
        # Unmasked GRPO (samples from the whole vocabulary, as PPO does): the Arithmetic comparison.
        Contender("grpo_tabular", "GRPO", "tabular", False, "GRPO tabular (defaults)", _UNMASKED),
        Contender("grpo_mlp", "GRPO", "mlp", False, "GRPO MLP (defaults)", _UNMASKED),
        Contender("grpo_mlp_tuned", "GRPO", "mlp", True, "GRPO MLP (tuned)", _UNMASKED),
        # GRPO with grammar-constrained decoding (the agent's default where the env offers masks), as
        # LLM RLVR stacks decode; compared with MaskablePPO, which gets the same masks.
        # On Countdown: the agent's Countdown preset (chosen by the Countdown ablation, benchmarks.countdown).
        Contender("grpo_mlp_masked", "GRPO", "mlp", False, "GRPO MLP (defaults, masked)",
                  {"action_masks": True}, masked=True, preset="countdown"),
        Contender("grpo_mlp_masked_tuned", "GRPO", "mlp", True, "GRPO MLP (tuned, masked)",
                  {"action_masks": True}, masked=True, preset="countdown"),
        Contender("ppo_default", "PPO", "mlp", False, "SB3 PPO (defaults)", _PPO_ROLLOUT),
        Contender("ppo_tuned", "PPO", "mlp", True, "SB3 PPO (tuned)"),
        Contender("a2c_default", "A2C", "mlp", False, "SB3 A2C (defaults)"),
        Contender("maskable_ppo_default", "MaskablePPO", "mlp", False, "MaskablePPO (defaults, masked)",
                  _PPO_ROLLOUT, masked=True),
        Contender("maskable_ppo_tuned", "MaskablePPO", "mlp", True, "MaskablePPO (tuned, masked)",
                  masked=True),
        Contender("ppo_native", "PPO", "mlp", False, "SB3 PPO (defaults, native vector env)", _PPO_NATIVE),
        Contender("maskable_ppo_native", "MaskablePPO", "mlp", False,
                  "MaskablePPO (defaults, masked, native vector env)", _PPO_NATIVE, masked=True),
    )
}
#: Verdicts and ratios are given against each of these that ran: tuned PPO (the main reference) and
#: PPO with SB3's defaults, which can be the stronger of the two (tuning on the train split can pick a
#: configuration that memorises train prompts).
#: On Countdown, MaskablePPO with its defaults is a third reference: it gets the same grammar masks as
#: the masked GRPO contenders.
REFERENCES = ("ppo_tuned", "ppo_default", "maskable_ppo_default")
#: The summary column of each reference's verdicts.
VERDICT_COLUMNS = ("verdict", "verdict_vs_ppo_default", "verdict_vs_maskable_ppo_default")


@dataclass(frozen=True)
class Study:
    """A comparison: every contender trains on ``env_id(**env_kwargs, split="train")`` for exactly
    ``budget`` env steps on each seed, checkpointing every ``budget // EVALS_PER_RUN`` steps."""

    name: str
    description: str
    env_id: str
    contenders: tuple[str, ...]
    seeds: str  # as --seeds takes it
    budget: int
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: Prompts per evaluation: None = every prompt of the split (finite tasks), else that many drawn
    #: with a fixed seed (the same list at every checkpoint and for every contender).
    eval_prompts: int | None = None
    #: Sampled answers per prompt for the sampled success rate (0: greedy success only).
    sampled_k: int = 0

    @property
    def out(self) -> Path:
        """Default (untracked) output folder."""
        return LOCAL_OUT / self.name

    @property
    def committed(self) -> Path:
        """The committed results folder ``--update-results`` rewrites."""
        return RESULTS_DIR / _COMMITTED.get(self.name, self.name)


_COMMITTED = {"arithmetic": "compare", "arithmetic-full": "compare_full"}
_ARITHMETIC = ("grpo_tabular", "grpo_mlp", "grpo_mlp_tuned", "ppo_default", "ppo_tuned")
# Countdown: GRPO (MLP, grammar-masked decoding), SB3 PPO (unmasked: it can write
# malformed answers and is scored as written) and MaskablePPO (masked in training and scoring); each with
# its defaults and, once `python -m benchmarks.compare.tune --study ...` has written their files, tuned.
_COUNTDOWN = ("grpo_mlp_masked", "ppo_default", "maskable_ppo_default")
_COUNTDOWN_TUNED = ("grpo_mlp_masked_tuned", "ppo_tuned", "maskable_ppo_tuned")

STUDIES: dict[str, Study] = {
    s.name: s
    for s in (
        # Budgets are multiples of 20,480 env steps, which every Arithmetic contender's rollout /
        # iteration divides (GRPO 160, 320, 640; PPO 2,048, 4,096), so each ends its last update at
        # exactly the budget and no step is wasted (other budgets also end at exactly the budget; see
        # benchmarks.compare.run). 102,400 is where every GRPO seed of the 10-seed study had reached 95%
        # held-out.
        Study("arithmetic", "the quick look (the main command): 3 seeds", "rlvr/Arithmetic-v0", _ARITHMETIC,
              "10-12", 102_400),
        Study("arithmetic-full", "the reported Arithmetic study: 10 seeds", "rlvr/Arithmetic-v0",
              _ARITHMETIC, "10-19", 102_400),
        Study("countdown3", "Countdown with 3 numbers: 10 seeds", "rlvr/Countdown-v0",
              _COUNTDOWN + _COUNTDOWN_TUNED, "10-19", 409_600, {"n_numbers": 3}, eval_prompts=200,
              sampled_k=4),
        # The fair wall-clock: PPO and MaskablePPO on DummyVecEnv and on the native vector env
        # side by side with GRPO, at a small budget (a wall-clock comparison, not a learning one).
        Study("countdown3-wallclock", "Countdown-3 wall-clock, DummyVecEnv vs native vector env: 2 seeds",
              "rlvr/Countdown-v0", ("grpo_mlp_masked", "ppo_default", "ppo_native", "maskable_ppo_default",
                                    "maskable_ppo_native"), "10-11", 102_400, {"n_numbers": 3},
              eval_prompts=200, sampled_k=4),
        Study("countdown4", "Countdown with 4 numbers: 10 seeds", "rlvr/Countdown-v0",
              _COUNTDOWN + _COUNTDOWN_TUNED, "10-19", 1_024_000, {"n_numbers": 4}, eval_prompts=200,
              sampled_k=4),
        # The second task family: multi-digit addition written digit by digit, trained on 1-digit operands
        # and held out on 2-digit ones (length generalisation); the same contenders as Countdown.
        Study("digits", "multi-digit addition, 1-digit train / 2-digit held-out: 3 seeds", "rlvr/Digits-v0",
              _COUNTDOWN, "10-12", 204_800, {"max_digits": 2, "train_digits": 1}, eval_prompts=200,
              sampled_k=4),
    )
}
DEFAULT_STUDY = "arithmetic"


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one run; ``key`` names its result file."""

    contender: str
    env_id: str
    seed: int
    budget: int
    eval_every: int
    hyperparams: dict[str, Any] = field(default_factory=dict)
    eval_splits: tuple[str, ...] = ("train", "test")
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_prompts: int | None = None
    sampled_k: int = 0

    @property
    def key(self) -> str:
        parts: list[Any] = [KEY_TAG, self.hyperparams, self.eval_every, list(self.eval_splits)]
        # Only non-default fields join the digest, so runs written before they existed keep their keys.
        extra = {k: v for k, v in (("env_kwargs", self.env_kwargs), ("eval_prompts", self.eval_prompts),
                                   ("sampled_k", self.sampled_k)) if v}
        if extra:
            parts.append(extra)
        env_slug = re.sub(r"[^A-Za-z0-9]+", "-", self.env_id).strip("-")
        return f"{self.contender}__{env_slug}__b{self.budget}__s{self.seed}__{digest(parts, 10)}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        d = dict(data)
        d["eval_splits"] = tuple(d.get("eval_splits", ("train", "test")))
        return cls(**d)


def hparams_path(contender: str, study: str | None = None) -> Path:
    """``benchmarks/hparams/<contender>.json`` for Arithmetic (the files tuned before studies had names),
    ``<contender>__<study>.json`` for every other study."""
    if study is None or study.startswith("arithmetic"):
        return HPARAMS_DIR / f"{contender}.json"
    return HPARAMS_DIR / f"{contender}__{study}.json"


def contender_hyperparams(contender: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full hyperparameters of a run: for GRPO the whole config, ``GRPOConfig.preset(policy)`` (what
    ``GRPO(env, policy=...)`` uses when given no config) with the contender's base and ``overrides``
    applied; for SB3 just base and ``overrides`` (SB3 fills in its own defaults)."""
    c = CONTENDERS[contender]
    if c.algo == "GRPO":
        from agents import GRPOConfig
        from agents.grpo import PRESETS

        preset = c.preset if c.preset in PRESETS else c.policy
        return GRPOConfig.preset(preset, **{**c.base, **dict(overrides or {})}).to_dict()
    return {**c.base, **dict(overrides or {})}


def resolve_hyperparams(contender: str, study: str | None = None) -> dict[str, Any]:
    """The hyperparameters a contender runs with: its defaults, or those plus its tuned file's."""
    if CONTENDERS[contender].tuned:
        from benchmarks.core.baselines import load_hparams

        return contender_hyperparams(contender, load_hparams(contender, hparams_path(contender, study)))
    return contender_hyperparams(contender)


def parse_contenders(text: str, flag: str = "--contenders") -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTENDERS]
    if not names or unknown:
        raise ValueError(f"{flag} {text!r}: unknown {unknown}; choose from {sorted(CONTENDERS)}")
    return names


def study_contenders(study: Study, names: Sequence[str] | None = None) -> list[str]:
    """The contenders to run: ``names`` or the study's; a tuned contender whose hyperparameter file does
    not exist yet is left out of a study's default list (and named by :func:`missing_tuned`)."""
    if names is not None:
        return list(names)
    return [n for n in study.contenders if not CONTENDERS[n].tuned or hparams_path(n, study.name).is_file()]


def missing_tuned(study: Study) -> list[str]:
    return [n for n in study.contenders if CONTENDERS[n].tuned and not hparams_path(n, study.name).is_file()]
