"""Greedy evaluation on an ``rlvr_env`` split, shared by the GRPO agent and the benchmarks (one
implementation, so GRPO and SB3 PPO are scored by exactly the same code)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np

from rlvr_env.envs import TokenEnv
from rlvr_env.tasks.base import Prompt, check_split

__all__ = ["BatchPredict", "evaluation_prompts", "greedy_success", "as_token_env"]

#: Maps a batch of observations (N, obs_dim) to a batch of token ids (N,).
BatchPredict = Callable[[np.ndarray], np.ndarray]


def as_token_env(env: gym.Env) -> TokenEnv:
    """The :class:`TokenEnv` under any wrappers, or a ``TypeError`` saying the env is not an rlvr env."""
    inner = env.unwrapped
    if not isinstance(inner, TokenEnv):
        raise TypeError(
            f"{type(inner).__name__} is not an rlvr_env TokenEnv; success rates need a verifier"
        )
    return inner


def evaluation_prompts(
    env: gym.Env, split: str, n_prompts: int | None = None, seed: int = 0
) -> list[Prompt]:
    """The prompts an evaluation on ``split`` uses: all of them for a finite task (when ``n_prompts`` is
    None), else ``n_prompts`` drawn with a generator seeded by ``seed`` (the same list every call)."""
    check_split(split)
    task = as_token_env(env).task
    pool = task.prompts(split)
    if pool is not None and n_prompts is None:
        return list(pool)
    n = 256 if n_prompts is None else n_prompts
    if n < 1:
        raise ValueError(f"n_prompts={n_prompts!r} must be at least 1")
    rng = np.random.default_rng(seed)
    if pool is not None:
        idx = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        return [pool[int(i)] for i in np.sort(idx)]
    return [task.sample_prompt(rng, split) for _ in range(n)]


def greedy_success(
    predict: BatchPredict,
    env: gym.Env,
    split: str = "test",
    *,
    prompts: Sequence[Prompt] | None = None,
    n_prompts: int | None = None,
    seed: int = 0,
) -> float:
    """Fraction of ``prompts`` (default: :func:`evaluation_prompts`) that ``predict`` answers correctly.

    All episodes advance in lockstep: one ``predict`` call per token position for the whole batch.
    ``predict`` should be deterministic (greedy) for a greedy success rate.
    """
    base = as_token_env(env)
    if prompts is None:
        prompts = evaluation_prompts(env, split, n_prompts, seed)
    if not prompts:
        raise ValueError("no prompts to evaluate")
    envs = [copy.deepcopy(base) for _ in prompts]
    obs = np.stack([e.reset(options={"prompt": p})[0] for e, p in zip(envs, prompts)])  # (N, D)
    active = np.ones(len(envs), dtype=bool)
    correct = np.zeros(len(envs), dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        actions = np.asarray(predict(obs[idx])).reshape(-1)  # (n_active,)
        for j, i in enumerate(idx):
            o, _, terminated, truncated, info = envs[i].step(int(actions[j]))
            obs[i] = o
            if terminated or truncated:
                active[i] = False
                correct[i] = bool(info["correct"])
    return float(correct.mean())
