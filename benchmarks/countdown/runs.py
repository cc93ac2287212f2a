"""The Countdown study's run functions (one run each, a record back) and the plans that name them.

Every run is one task of the executor; a plan is a :class:`~benchmarks.core.executor.Run` whose key is
made of its spec, so a stored run is found again by the next invocation.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks.core.executor import Run
from benchmarks.core.store import run_key
from benchmarks.countdown.settings import BC_EPOCHS, ENV_ID, K, TASK


def _report(predict: Any, env: Any, prompts: list[Any], masked: bool) -> dict[str, float]:
    from agents.evaluation import success_report

    rep = success_report(predict, env, prompts=prompts, k=K, masked=masked)
    return {"greedy": rep.greedy, "sampled": rep.sampled, f"pass@{K}": rep.pass_at_k}


def fixed_prompts(task: dict[str, Any], n: int) -> dict[str, list[Any]]:
    """The fixed evaluation prompts of each split (the same for every run of a task)."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401
    from agents.evaluation import evaluation_prompts

    env = gym.make(ENV_ID, **task)
    return {s: evaluation_prompts(env, s, n, seed=0) for s in ("train", "test")}


def grpo_plan(seed: int, budget: int, cfg: dict[str, Any], env_kwargs: dict[str, Any], preset: str,
              eval_prompts: int, eval_every: int, demos: int = 0, task: dict[str, Any] | None = None,
              part: str = "") -> Run:
    spec = {"seed": seed, "budget": budget, "cfg": cfg, "env_kwargs": env_kwargs, "preset": preset,
            "eval_prompts": eval_prompts, "eval_every": eval_every, "demos": demos,
            "task": TASK if task is None else task}
    return _run_of("benchmarks.countdown.runs:grpo_run", spec, f"grpo_{part}")


def maskable_plan(seed: int, budget: int, env_kwargs: dict[str, Any], eval_prompts: int, eval_every: int,
                  demos: int = 0, part: str = "") -> Run:
    spec = {"seed": seed, "budget": budget, "env_kwargs": env_kwargs, "eval_prompts": eval_prompts,
            "eval_every": eval_every, "demos": demos}
    return _run_of("benchmarks.countdown.runs:maskable_run", spec, f"maskable_ppo_{part}")


def arithmetic_plan(policy: str, seed: int, budget: int) -> Run:
    spec = {"policy": policy, "seed": seed, "budget": budget}
    return _run_of("benchmarks.countdown.runs:arithmetic_run", spec, f"arithmetic_{policy}")


def _run_of(fn: str, spec: dict[str, Any], group: str) -> Run:
    return Run(fn, spec, run_key(group, spec), arm=group, label=f"{group} s{spec['seed']}")


def grpo_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One GRPO run: periodic held-out greedy success (for steps-to-threshold), final reports."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401
    from agents.bc import demonstrations, warm_start
    from agents.grpo import GRPO, GRPOConfig

    seed, budget, cfg, env_kwargs = spec["seed"], spec["budget"], spec["cfg"], spec["env_kwargs"]
    eval_every, demos, task = spec["eval_every"], spec["demos"], spec["task"]
    prompts = fixed_prompts(task, spec["eval_prompts"])
    config = GRPOConfig.preset(spec["preset"], **cfg)
    kwargs = {**task, **env_kwargs}
    model = GRPO(ENV_ID, config, policy="mlp", seed=seed, env_kwargs=kwargs)
    env = gym.make(ENV_ID, **kwargs)
    out: dict[str, Any] = {"seed": seed, "config": config.to_dict(), "env_kwargs": kwargs}
    if demos:
        start = time.perf_counter()
        warm_start(model, demonstrations(env, demos, seed=seed), epochs=BC_EPOCHS)
        out["bc_seconds"] = time.perf_counter() - start
        out["start"] = {s: _report(_grpo_predict(model, seed), env, prompts[s], model.use_masks)
                        for s in ("train", "test")}
    curve: list[tuple[int, float]] = []
    next_eval = [eval_every]
    eval_time = [0.0]

    def callback(m: Any, metrics: dict[str, float]) -> bool:
        if m.num_timesteps >= next_eval[0]:  # the clock pauses: evaluation is not training time
            t = time.perf_counter()
            next_eval[0] += eval_every
            curve.append((int(m.num_timesteps), _greedy(m, env, prompts["test"][:200])))
            eval_time[0] += time.perf_counter() - t
        return True

    start = time.perf_counter()
    model.learn(budget, callback=callback)
    out["train_seconds"] = time.perf_counter() - start - eval_time[0]
    out["curve"] = curve
    out["final_len"] = float(model.last_metrics["rollout/ep_len_mean"])
    out["final"] = {s: _report(_grpo_predict(model, seed), env, prompts[s], model.use_masks)
                    for s in ("train", "test")}
    out["steps"] = int(model.num_timesteps)
    return out


def _grpo_predict(model: Any, seed: int) -> Any:
    rng = np.random.default_rng(10_000 + seed)
    return lambda obs, masks, det: model.policy.predict(obs, det, rng, masks)


def _greedy(model: Any, env: Any, prompts: list[Any]) -> float:
    from agents.evaluation import answer_correct

    return float(answer_correct(_grpo_predict(model, 0), env, prompts, deterministic=True,
                                masked=model.use_masks).mean())


def maskable_run(spec: dict[str, Any]) -> dict[str, Any]:
    """sb3-contrib MaskablePPO (defaults; 8 env copies x n_steps 256 = the default 2,048-step rollout)."""
    import gymnasium as gym
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import set_random_seed

    import rlvr_env  # noqa: F401
    from agents.evaluation import answer_correct, sb3_predictor
    from benchmarks.core.baselines import make_training_env

    seed, budget, env_kwargs = spec["seed"], spec["budget"], spec["env_kwargs"]
    eval_every, demos = spec["eval_every"], spec["demos"]
    prompts = fixed_prompts(TASK, spec["eval_prompts"])
    kwargs = {**TASK, **env_kwargs}
    env = gym.make(ENV_ID, **kwargs)
    train_env = make_training_env(ENV_ID, seed, n_envs=8, env_kwargs={**kwargs, "split": "train"})
    model = MaskablePPO("MlpPolicy", train_env, seed=seed, n_steps=256, device="cpu", verbose=0)
    out: dict[str, Any] = {"seed": seed, "env_kwargs": kwargs}
    if demos:
        from agents.bc import behaviour_clone, copy_actor_to_sb3, demonstrations
        from agents.policies.mlp import MLPPolicy

        actor = MLPPolicy(env.observation_space, int(env.action_space.n), 1e-3, seed=seed)
        behaviour_clone(actor, demonstrations(env, demos, seed=seed), epochs=BC_EPOCHS, seed=seed)
        copy_actor_to_sb3(actor, model)
        out["start"] = {s: _report(sb3_predictor(model), env, prompts[s], True) for s in ("train", "test")}
    curve: list[tuple[int, float]] = []
    eval_time = [0.0]

    class Eval(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                t = time.perf_counter()
                self.next += eval_every
                acc = answer_correct(sb3_predictor(model), env, prompts["test"][:200],
                                     deterministic=True, masked=True)
                curve.append((int(self.num_timesteps), float(acc.mean())))
                eval_time[0] += time.perf_counter() - t
            return True

    start = time.perf_counter()
    model.learn(budget, callback=Eval())
    out["train_seconds"] = time.perf_counter() - start - eval_time[0]
    out["curve"] = curve
    set_random_seed(10_000 + seed)
    out["final"] = {s: _report(sb3_predictor(model), env, prompts[s], True) for s in ("train", "test")}
    out["steps"] = int(model.num_timesteps)
    return out


def arithmetic_run(spec: dict[str, Any]) -> dict[str, Any]:
    """The Arithmetic preset ``policy`` for ``budget`` steps: sampled success (k=64) on every prompt."""
    import rlvr_env  # noqa: F401
    from agents.grpo import GRPO

    policy, seed, budget = spec["policy"], spec["seed"], spec["budget"]
    model = GRPO("rlvr/Arithmetic-v0", policy=policy, seed=seed)
    start = time.perf_counter()
    model.learn(budget)
    seconds = time.perf_counter() - start
    reps = [model.success(s, k=64, seed=seed) for s in ("train", "test")]
    per = np.concatenate([r.per_prompt_sampled for r in reps])
    return {"policy": policy, "seed": seed, "budget": budget, "seconds": seconds,
            "greedy": [r.greedy for r in reps], "sampled": [r.sampled for r in reps],
            "min_prompt_sampled": float(per.min())}
