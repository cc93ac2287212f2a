"""One lab run: an arm on one seed, observed through the agent's public group hook.

:func:`run_arm` is the executor's run function (``"benchmarks.lab.runner:run_arm"``): it trains
``GRPO(ENV_ID, config, policy="mlp", seed=s)`` for the budget, keeps each iteration's logged metrics (a
callback) and, through ``model.add_group_hook`` (:mod:`agents.grpo.hooks`), each iteration's groups:
the lengths of correct and wrong answers and each group's rewards, from which the advantage weights of
both estimators are computed. Then it scores the run on held-out prompts. It writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from benchmarks.core.executor import Task
from benchmarks.lab.base import EVAL_K, EVAL_PROMPTS, Arm, run_key

__all__ = ["ITERATION_METRICS", "run_arm", "run_name", "task_for"]

#: The logged metrics kept per iteration (``rollout/solve_rate`` is kept as ``solve_rate``, ...).
ITERATION_METRICS = ("rollout/solve_rate", "rollout/ep_len_mean", "rollout/zero_std_group_frac",
                     "train/entropy", "train/clip_frac", "train/kl", "train/policy_loss",
                     "time/total_timesteps", "rollout/sampling_rounds", "rollout/trained_groups")


def run_name(key: Mapping[str, Any]) -> str:
    """The run file's stem: a digest of the settings and the seed. Arms of different claims with equal
    settings (e.g. the base configuration) share one run."""
    settings = {k: v for k, v in key.items() if k != "seed"}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return f"{digest}_seed{key['seed']}"


def task_for(arm: Arm, seed: int, budget: int) -> Task:
    key = run_key(arm, seed, budget)
    return Task("benchmarks.lab.runner:run_arm", key, run_name(key), group=arm.name,
                label=f"{arm.name} s{seed}")


def run_arm(key: dict[str, Any]) -> dict[str, Any]:
    """Train one arm on one seed as ``key`` says; return the per-iteration record and the final scores."""
    import rlvr_env  # noqa: F401  (registers the env ids)
    from agents import GRPO, GRPOConfig
    from agents.grpo.objective import ADVANTAGE_ESTIMATORS

    cfg = GRPOConfig.from_dict(key["config"])
    seed = int(key["seed"])
    start = time.perf_counter()
    model = GRPO(key["env_id"], cfg, policy="mlp", seed=seed, env_kwargs=key["env_kwargs"])
    bc_loss = None
    if key["warm_start"]:
        from agents.bc import demonstrations, warm_start

        demos = demonstrations(model.env, key["warm_start"]["demos"], seed=10_000 + seed)
        bc_loss = warm_start(model, demos, epochs=key["warm_start"]["epochs"])[-1]
    warm_report = (model.success("test", k=EVAL_K, n_prompts=EVAL_PROMPTS).as_dict()
                   if key["warm_start"] else None)

    g = cfg.group_size
    events: list[Any] = []  # this iteration's GroupEvent (one per iteration)
    model.add_group_hook(events.append)
    # Advantage mass by number of correct answers in the group (0..G): summed |A| per group under the
    # std-normalised and the mean-only estimator, over untied groups; and the count of such groups.
    mass = {"grpo": np.zeros(g + 1), "dr_grpo": np.zeros(g + 1)}
    untied = np.zeros(g + 1)
    tied = np.zeros(g + 1)
    iters: list[dict[str, float]] = []

    def callback(m: Any, metrics: dict[str, float]) -> None:
        event = events.pop()
        lengths, correct, rewards = event.lengths, event.correct, event.rewards  # (groups, G) each
        row = {k.split("/")[1]: float(metrics[k]) for k in ITERATION_METRICS if k in metrics}
        row["updated"] = float("train/entropy" in metrics)
        row["len_correct"] = float(lengths[correct].mean()) if correct.any() else float("nan")
        row["len_wrong"] = float(lengths[~correct].mean()) if (~correct).any() else float("nan")
        row["frac_correct"] = float(correct.mean())
        iters.append(row)
        n_correct = correct.sum(axis=1)  # (groups,)
        is_tied = np.all(rewards == rewards[:, :1], axis=1)
        for name in mass:
            adv = ADVANTAGE_ESTIMATORS[name](rewards, cfg.adv_eps, cfg.unbiased_std)
            np.add.at(mass[name], n_correct[~is_tied], np.abs(adv[~is_tied]).sum(axis=1))
        np.add.at(untied, n_correct[~is_tied], 1)
        np.add.at(tied, n_correct[is_tied], 1)

    model.learn(int(key["budget"]), callback=callback)
    train_seconds = time.perf_counter() - start
    report = model.success("test", k=EVAL_K, n_prompts=EVAL_PROMPTS)
    return {
        "key": key,
        "iterations": iters,
        "final": report.as_dict(),
        "warm": warm_report,
        "bc_final_loss": bc_loss,
        "adv_mass": {k: v.tolist() for k, v in mass.items()},
        "untied_groups": untied.tolist(),
        "tied_groups": tied.tolist(),
        "num_timesteps": model.num_timesteps,
        "seconds": train_seconds,
        "eval_seconds": time.perf_counter() - start - train_seconds,
    }
