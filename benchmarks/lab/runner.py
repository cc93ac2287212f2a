"""One lab run: an arm on one seed, observed through the agent's public group hook.

:func:`run_arm` is the executor's run function (``"benchmarks.lab.runner:run_arm"``): it trains
``GRPO(ENV_ID, config, policy="mlp", seed=s)`` for the budget, keeps each iteration's logged metrics (a
callback) and, through ``model.add_group_hook`` (:mod:`agents.grpo.hooks`), each iteration's groups:
the lengths of correct and wrong answers and each group's rewards, from which the advantage weights of
both estimators are computed. Then it scores the run on held-out prompts. It writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from benchmarks.core.executor import Run
from benchmarks.core.store import digest
from benchmarks.lab.base import EVAL_K, EVAL_PROMPTS, Arm, run_key

__all__ = ["GroupObserver", "ITERATION_METRICS", "run_arm", "run_name", "run_for"]

#: The logged metrics kept per iteration (``rollout/solve_rate`` is kept as ``solve_rate``, ...).
ITERATION_METRICS = ("rollout/solve_rate", "rollout/ep_len_mean", "rollout/zero_std_group_frac",
                     "train/entropy", "train/clip_frac", "train/kl", "train/policy_loss",
                     "time/total_timesteps", "rollout/sampling_rounds", "rollout/trained_groups")


def run_name(key: Mapping[str, Any]) -> str:
    """The run file's stem: a digest of the settings and the seed. Arms of different claims with equal
    settings (e.g. the base configuration) share one run."""
    settings = {k: v for k, v in key.items() if k != "seed"}
    return f"{digest(settings)}_seed{key['seed']}"


def run_for(arm: Arm, seed: int, budget: int) -> Run:
    key = run_key(arm, seed, budget)
    return Run("benchmarks.lab.runner:run_arm", key, run_name(key), arm=arm.name,
               label=f"{arm.name} s{seed}")


class GroupObserver:
    """What a lab run sees of training: each iteration's logged metrics (the ``learn`` callback) and,
    through ``model.add_group_hook``, its groups: the lengths of correct and wrong answers and, per
    number of correct answers in a group, the summed |advantage| under the std-normalised and the
    mean-only estimator (untied groups) and the counts of untied and tied groups. Every regime's run
    function uses it, so the records of all regimes hold the same per-iteration fields."""

    def __init__(self, model: Any, cfg: Any) -> None:
        self.cfg = cfg
        g = cfg.group_size
        self.events: list[Any] = []  # this iteration's GroupEvent (one per iteration)
        model.add_group_hook(self.events.append)
        self.mass = {"grpo": np.zeros(g + 1), "dr_grpo": np.zeros(g + 1)}
        self.untied = np.zeros(g + 1)
        self.tied = np.zeros(g + 1)
        self.iterations: list[dict[str, float]] = []

    def callback(self, m: Any, metrics: dict[str, float]) -> None:
        from agents.grpo import ADVANTAGE_ESTIMATORS

        event = self.events.pop()
        lengths, correct, rewards = event.lengths, event.correct, event.rewards  # (groups, G) each
        row = {k.split("/")[1]: float(metrics[k]) for k in ITERATION_METRICS if k in metrics}
        row["updated"] = float("train/entropy" in metrics)
        row["len_correct"] = float(lengths[correct].mean()) if correct.any() else float("nan")
        row["len_wrong"] = float(lengths[~correct].mean()) if (~correct).any() else float("nan")
        row["frac_correct"] = float(correct.mean())
        self.iterations.append(row)
        n_correct = correct.sum(axis=1)  # (groups,)
        is_tied = np.all(rewards == rewards[:, :1], axis=1)
        for name in self.mass:
            adv = ADVANTAGE_ESTIMATORS[name](rewards, self.cfg.adv_eps, self.cfg.unbiased_std)
            np.add.at(self.mass[name], n_correct[~is_tied], np.abs(adv[~is_tied]).sum(axis=1))
        np.add.at(self.untied, n_correct[~is_tied], 1)
        np.add.at(self.tied, n_correct[is_tied], 1)

    def record(self) -> dict[str, Any]:
        return {"iterations": self.iterations, "adv_mass": {k: v.tolist() for k, v in self.mass.items()},
                "untied_groups": self.untied.tolist(), "tied_groups": self.tied.tolist()}


def run_arm(key: dict[str, Any]) -> dict[str, Any]:
    """Train one arm on one seed as ``key`` says; return the per-iteration record and the final scores."""
    import rlvr_env  # noqa: F401  (registers the env ids)
    from agents import GRPO, GRPOConfig

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

    observer = GroupObserver(model, cfg)
    model.learn(int(key["budget"]), callback=observer.callback)
    train_seconds = time.perf_counter() - start
    report = model.success("test", k=EVAL_K, n_prompts=EVAL_PROMPTS)
    observed = observer.record()
    return {
        "key": key,
        "iterations": observed["iterations"],
        "final": report.as_dict(),
        "warm": warm_report,
        "bc_final_loss": bc_loss,
        "adv_mass": observed["adv_mass"],
        "untied_groups": observed["untied_groups"],
        "tied_groups": observed["tied_groups"],
        "num_timesteps": model.num_timesteps,
        "seconds": train_seconds,
        "eval_seconds": time.perf_counter() - start - train_seconds,
    }
