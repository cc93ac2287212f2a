"""Rolling out groups: B prompts, G episodes each, all B x G advancing in lockstep.

Group members share their start in one of two ways (DESIGN.md, "Prompt replay"):

* **replay**: the env's ``reset()`` reports ``info["prompt"]`` and ``reset(options={"prompt": p})``
  starts exactly on ``p`` (every ``rlvr_env`` env). The first member of a group draws the prompt with a
  seeded reset; the other G-1 replay it.
* **seed**: any other env; all G members reset with the same seed. This is only a shared start when
  ``reset(seed=s)`` is deterministic, which :func:`detect_group_mode` checks (two resets with one seed
  must give equal observations) and refuses otherwise.

When the env id has a native vector env (``gym.make_vec(..., vectorization_mode="vector_entry_point")``
that accepts one prompt per sub-env), :class:`VectorGroupRunner` uses it, so a rollout step costs array
operations; otherwise :class:`ListGroupRunner` steps a list of env copies.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from agents.policies import Policy, log_softmax, sample_categorical

__all__ = ["GroupBatch", "GroupMode", "ListGroupRunner", "detect_group_mode", "obs_equal"]

GroupMode = Literal["replay", "seed"]
_PROBE_SEED = 12345


def obs_equal(a: Any, b: Any) -> bool:
    """Exact equality of two observations (arrays, scalars, tuples or dicts of them)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(obs_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(obs_equal(x, y) for x, y in zip(a, b))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def detect_group_mode(env: gym.Env) -> GroupMode:
    """How G episodes of ``env`` can share a start; ``ValueError`` if they cannot.

    Uses (and leaves reset) the given env instance.
    """
    probe = copy.deepcopy(env)
    obs1, info = probe.reset(seed=_PROBE_SEED)
    if isinstance(info, dict) and "prompt" in info:
        try:
            obs2, info2 = probe.reset(options={"prompt": info["prompt"]})
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{_name(env)} reports info['prompt'] but refuses reset(options={{'prompt': ...}}): {err}"
            ) from err
        if not obs_equal(obs1, obs2):
            raise ValueError(
                f"{_name(env)}: replaying info['prompt'] gave a different observation; prompt replay "
                "must reproduce the start exactly"
            )
        return "replay"
    obs2, _ = probe.reset(seed=_PROBE_SEED)
    if not obs_equal(obs1, obs2):
        raise ValueError(
            f"{_name(env)} has no prompt-replay option and two reset(seed={_PROBE_SEED}) calls gave "
            "different observations, so G episodes cannot share a start; GRPO needs either "
            "reset(options={'prompt': p}) or a deterministic reset(seed=...)"
        )
    return "seed"


def _name(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__


@dataclass
class GroupBatch:
    """One iteration's B x G episodes, padded to the longest (N = B*G rows, group-major)."""

    obs: np.ndarray  # (N, L, *obs_shape)
    actions: np.ndarray  # (N, L) int64
    logp_old: np.ndarray  # (N, L) log pi_old of the sampled tokens (0 on padding)
    mask: np.ndarray  # (N, L) 1.0 on real steps
    returns: np.ndarray  # (N,) undiscounted episode return (the verifier's reward for rlvr envs)
    lengths: np.ndarray  # (N,) steps per episode
    correct: np.ndarray  # (N,) 1/0, NaN when the env does not say
    well_formed: np.ndarray  # (N,) 1/0, NaN when the env does not say
    group_size: int

    @property
    def n_steps(self) -> int:
        return int(self.lengths.sum())

    @property
    def n_groups(self) -> int:
        return self.returns.shape[0] // self.group_size


class ListGroupRunner:
    """Steps B x G copies of one env in lockstep, one batched policy call per step position."""

    def __init__(self, env: gym.Env, n_groups: int, group_size: int, mode: GroupMode) -> None:
        self.n_groups, self.group_size, self.mode = n_groups, group_size, mode
        self.envs = [copy.deepcopy(env) for _ in range(n_groups * group_size)]

    def _reset_groups(self, seeds: np.ndarray) -> list[Any]:
        g = self.group_size
        obs: list[Any] = []
        for b, seed in enumerate(seeds):
            first = self.envs[b * g]
            o, info = first.reset(seed=int(seed))
            obs.append(o)
            for member in self.envs[b * g + 1 : (b + 1) * g]:
                if self.mode == "replay":
                    o, _ = member.reset(options={"prompt": info["prompt"]})
                else:
                    o, _ = member.reset(seed=int(seed))
                obs.append(o)
        return obs

    def collect(self, policy: Policy, rng: np.random.Generator) -> GroupBatch:
        n = len(self.envs)
        seeds = rng.integers(0, 2**31 - 1, size=self.n_groups)
        obs = np.stack([np.asarray(o) for o in self._reset_groups(seeds)])  # (N, *obs_shape)
        active = np.ones(n, dtype=bool)
        returns = np.zeros(n)
        lengths = np.zeros(n, dtype=np.int64)
        correct = np.full(n, np.nan)
        well_formed = np.full(n, np.nan)
        steps_obs: list[np.ndarray] = []
        steps_act: list[np.ndarray] = []
        steps_logp: list[np.ndarray] = []
        steps_mask: list[np.ndarray] = []
        while active.any():
            idx = np.flatnonzero(active)
            sub = obs[idx]
            policy.observe(sub)
            logits = policy.logits(sub)  # (n_active, V): one batched policy call per position
            actions = sample_categorical(logits, rng)
            logp = log_softmax(logits)[np.arange(len(idx)), actions]
            full_act = np.zeros(n, dtype=np.int64)
            full_logp = np.zeros(n)
            full_act[idx], full_logp[idx] = actions, logp
            steps_obs.append(obs.copy())
            steps_act.append(full_act)
            steps_logp.append(full_logp)
            steps_mask.append(active.astype(np.float64))
            for j, i in enumerate(idx):
                o, r, terminated, truncated, info = self.envs[i].step(int(actions[j]))
                obs[i] = o
                returns[i] += float(r)
                lengths[i] += 1
                if terminated or truncated:
                    active[i] = False
                    if "correct" in info:
                        correct[i] = float(info["correct"])
                    if "well_formed" in info:
                        well_formed[i] = float(info["well_formed"])
        return GroupBatch(
            obs=np.stack(steps_obs, axis=1),
            actions=np.stack(steps_act, axis=1),
            logp_old=np.stack(steps_logp, axis=1),
            mask=np.stack(steps_mask, axis=1),
            returns=returns,
            lengths=lengths,
            correct=correct,
            well_formed=well_formed,
            group_size=self.group_size,
        )
