"""One run of a study: train one contender on one seed for exactly the budget, evaluating as it goes.

:func:`run_one` is the only function that trains; ``benchmarks.compare`` and ``benchmarks.compare.tune`` both
submit it (through :mod:`benchmarks.core.executor`), so a tuning trial and a reported run are measured alike.
It returns the run's record (a JSON-able dict) and writes nothing: the driver writes files.

How a run is measured:

- training proceeds in chunks to checkpoints at the first rollout / iteration boundary at or after each
  multiple of ``eval_every`` env steps, and ends at exactly ``budget`` env steps for every contender: SB3
  is stopped by a callback at the budget (a rollout cut there is taken but never learned from: SB3
  updates after whole rollouts); a GRPO iteration that would end past the budget is rolled back (the
  model before it is restored and credited with exactly the budget: like SB3's cut rollout, nothing is
  learned from it). ``learned_steps`` records where the last update ended;
- after each chunk: greedy success (and with ``sampled_k``, sampled success over k answers per prompt)
  on the train and the held-out (test) split, by the shared evaluator of ``agents.evaluation``; masked
  contenders are given the env's grammar masks when scored, as in training. Evaluation never moves the
  training generators (their states are saved and restored around it);
- wall seconds are training time only (the ``learn`` calls), never evaluation;
- steps / seconds to 95% and 100% held-out greedy success are those of the first checkpoint at or above
  the threshold (upper bounds with a resolution of one chunk); a run that never gets there is censored;
- collapse: GRPO: at the end every group of the last iteration tied (``rollout/zero_std_group_frac`` ==
  1) while the mean reward is below a correct answer's, so no group gives a gradient any more. SB3 has no
  groups; there a collapse is a greedy policy that ignores the prompt: the same expression for every
  train prompt, with train success below 1. ``greedy_constant`` is recorded for every contender;
- trainable parameters of actor and critic, env steps per second of training, torch threads (one), the
  peak resident memory of the process during this run, and the library versions.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.core.common import limit_threads
from benchmarks.core.store import LIBRARIES
from benchmarks.core.store import library_versions as store_versions
from benchmarks.core.executor import Run
from benchmarks.compare.study import CONTENDERS, KEY_TAG, THRESHOLDS, RunSpec

__all__ = ["build_model", "comparable", "library_versions", "run_one", "run_spec", "spec_run",
           "TIMING_FIELDS"]

#: Fields of a record that measure the process rather than the run: time, memory, and torch's thread
#: count (None where the tabular path never loaded torch, 1 in a process that had); everything else in a
#: record is determined by the spec and the library versions.
TIMING_FIELDS = ("train_seconds", "wall_seconds_total", "steps_per_second", "peak_rss_mb", "seconds_to_95",
                 "seconds_to_100", "git_commit", "last_metrics", "torch_threads", "execution")


def comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` without its timing fields (and a curve without ``train_seconds``): what must be equal
    between two runs of one spec, whichever way they were executed."""
    out = {k: v for k, v in record.items() if k not in TIMING_FIELDS}
    out["curve"] = [{k: v for k, v in p.items() if k != "train_seconds"} for p in record["curve"]]
    metrics = dict(record.get("last_metrics") or {})
    out["last_metrics"] = {k: v for k, v in metrics.items() if not k.startswith("time/fps")}
    return json.loads(json.dumps(out))  # as stored (tuples become lists)


def build_model(spec: RunSpec) -> Any:
    """The model a contender trains, on ``spec.env_id``'s train split, seeded with ``spec.seed``."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401  (registers the rlvr/* ids)

    contender = CONTENDERS[spec.contender]
    env_kwargs = {**spec.env_kwargs, "split": "train"}
    if contender.algo == "GRPO":
        from agents import GRPO, GRPOConfig

        config = GRPOConfig.from_dict(dict(spec.hyperparams))  # resolved by contender_hyperparams
        return GRPO(gym.make(spec.env_id, **env_kwargs), config, policy=contender.policy, seed=spec.seed)
    if contender.algo == "MaskablePPO":
        from sb3_contrib import MaskablePPO

        from benchmarks.core.baselines import make_training_env

        params = dict(spec.hyperparams)
        n_envs = int(params.pop("n_envs", 1))
        env = make_training_env(spec.env_id, spec.seed, n_envs=n_envs, env_kwargs=env_kwargs,
                                vec_env=params.pop("vec_env", "dummy"))
        return MaskablePPO("MlpPolicy", env, seed=spec.seed, device="cpu", verbose=0, **params)
    from benchmarks.core.baselines import make_sb3

    return make_sb3(contender.algo, spec.env_id, spec.seed, spec.hyperparams, env_kwargs=env_kwargs)


def _trainable_parameters(model: Any) -> dict[str, int]:
    if hasattr(model, "num_parameters"):  # GRPO: an actor and no critic
        n = int(model.num_parameters())
        return {"actor": n, "critic": 0, "total": n}
    from benchmarks.core.baselines import count_parameters

    counts = count_parameters(model)
    return {"actor": counts["actor"], "critic": counts["critic"], "total": counts["total"]}


@contextlib.contextmanager
def _generators_kept(model: Any) -> Iterator[None]:
    """Evaluation (sampled answers in particular) must not move the training's random generators:
    torch's global one (SB3 samples with it) and the GRPO agent's own."""
    torch_state = None
    if "torch" in sys.modules:
        import torch

        torch_state = torch.random.get_rng_state()
    rng = getattr(model, "rng", None)
    np_state = rng.bit_generator.state if isinstance(rng, np.random.Generator) else None
    try:
        yield
    finally:
        if torch_state is not None:
            import torch

            torch.random.set_rng_state(torch_state)
        if np_state is not None:
            rng.bit_generator.state = np_state


def _evaluate(model: Any, env: Any, split: str, spec: RunSpec, masked: bool) -> dict[str, Any]:
    """Greedy (and with ``spec.sampled_k``, sampled) success on ``split`` by the shared evaluator, and
    whether the greedy policy answered every prompt with the same token sequence."""
    from agents import evaluation

    prompts = evaluation.evaluation_prompts(env, split, spec.eval_prompts, seed=0)
    constant = True

    def predict(obs: np.ndarray, masks: np.ndarray | None = None, deterministic: bool = True) -> np.ndarray:
        nonlocal constant
        if masks is None:
            actions = model.predict(obs, deterministic=deterministic)[0]
        else:
            actions = model.predict(obs, deterministic=deterministic, action_masks=masks)[0]
        actions = np.asarray(actions).reshape(-1)  # (N,)
        if deterministic:
            constant = constant and bool(np.all(actions == actions[0]))
        return actions

    result: dict[str, Any] = {}
    with _generators_kept(model):
        greedy = evaluation.answer_correct(predict, env, prompts, deterministic=True, masked=masked)
        result["greedy"] = float(greedy.mean())
        result["sampled"] = None
        if spec.sampled_k:  # mean over prompts of the fraction of k sampled answers that are correct
            sampled = evaluation.answer_correct(predict, env, prompts, deterministic=False, masked=masked,
                                                repeats=spec.sampled_k)
            result["sampled"] = float(sampled.mean())
    result["constant"] = constant
    return result


def _peak_rss_reset() -> None:
    """Start this run's peak-memory count afresh (Linux: VmHWM), since a Ray worker runs many runs."""
    with contextlib.suppress(OSError):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")


def _peak_rss_mb() -> float:
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB (whole process)


def _max_iteration_steps(model: Any) -> int:
    """The most env steps one GRPO iteration can take: B x G episodes of at most the env's episode
    limit (the task's ``max_length`` for rlvr envs, else the TimeLimit)."""
    inner = model.env.unwrapped
    task = getattr(inner, "task", None)
    if task is not None:
        horizon = int(task.max_length)
    else:
        spec = getattr(model.env, "spec", None)
        horizon = int(getattr(spec, "max_episode_steps", None) or 10**9)
    rounds = 1
    if getattr(model.config, "dynamic_sampling", False):  # DAPO: up to this many batches per iteration
        rounds = int(model.config.dynamic_sampling_max_rounds)
    return int(model.config.prompts_per_iter * model.config.group_size * horizon * rounds)


def _advance_sb3(model: Any, target: int, budget: int) -> None:
    """Train an SB3 model until ``num_timesteps >= target`` (SB3 rounds up to whole rollouts), stopping
    at exactly ``budget`` env steps if a rollout would cross it: the steps of that cut rollout are taken
    but never learned from (SB3 updates only after a whole rollout)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAtBudget(BaseCallback):
        def _on_step(self) -> bool:
            return bool(self.model.num_timesteps < budget)

    model.learn(target - int(model.num_timesteps), reset_num_timesteps=False, callback=StopAtBudget())


def _advance_grpo(model: Any, target: int, budget: int) -> tuple[Any, float, int | None]:
    """Train GRPO one iteration at a time until ``num_timesteps >= target``. An iteration that would end
    past ``budget`` is rolled back (the model before it is restored and credited with exactly ``budget``
    steps): like SB3's cut rollout, its steps up to the budget are taken and nothing is learned from them,
    and steps past the budget never count. Returns the model, the training seconds (the rolled-back
    iteration's time excluded) and, if an iteration was rolled back, the steps learned from."""
    import copy

    seconds, learned = 0.0, None
    limit = _max_iteration_steps(model)
    while model.num_timesteps < target:
        snapshot = copy.deepcopy(model) if budget - model.num_timesteps < limit else None
        t0 = time.perf_counter()
        model.learn(1, reset_num_timesteps=False)  # exactly one iteration
        elapsed = time.perf_counter() - t0
        if model.num_timesteps > budget:
            if snapshot is None:
                raise RuntimeError(f"a GRPO iteration took more than its limit of {limit} env steps")
            learned = int(snapshot.num_timesteps)
            model = snapshot
            model.num_timesteps = budget
            break
        seconds += elapsed
    return model, seconds, learned


def library_versions() -> dict[str, str | None]:
    """Versions of everything a run's numbers can depend on, and Ray's (read from package metadata, so
    the tabular GRPO path still never imports torch)."""
    return store_versions((*LIBRARIES, "ray"))


def _first_crossing(curve: Sequence[Mapping[str, Any]], threshold: float) -> tuple[int | None, float | None]:
    for point in curve:
        if point.get("test_success") is not None and point["test_success"] >= threshold - 1e-12:
            return int(point["num_timesteps"]), float(point["train_seconds"])
    return None, None


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train one contender on one seed in chunks, evaluating after each chunk; return the run record. Long
    on purpose: the one function that trains a reported run, read top to bottom (build, train in chunks,
    evaluate, record); splitting it would hide the order the measurement depends on."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401

    started = time.time()
    _peak_rss_reset()
    contender = CONTENDERS[spec.contender]
    model = build_model(spec)
    torch_threads = limit_threads()  # the tabular GRPO path never imports torch; do not import it for it
    eval_env = gym.make(spec.env_id, **{**spec.env_kwargs, "split": "train"})
    inner: Any = eval_env.unwrapped
    correct_reward = inner.task.best_reward(inner.reward_weights)  # from the task's parts and weights

    curve: list[dict[str, Any]] = []
    train_seconds = 0.0
    constant_train = False

    def checkpoint() -> None:
        nonlocal constant_train
        point: dict[str, Any] = {"num_timesteps": int(model.num_timesteps), "train_seconds": train_seconds}
        for split in ("train", "test"):
            if split in spec.eval_splits:
                scores = _evaluate(model, eval_env, split, spec, contender.masked)
                point[f"{split}_success"] = scores["greedy"]
                point[f"{split}_sampled"] = scores["sampled"]
                if split == "train":
                    constant_train = scores["constant"]
            else:
                point[f"{split}_success"] = point[f"{split}_sampled"] = None
        curve.append(point)

    checkpoint()
    # Checkpoints at the first rollout / iteration boundary at or after each multiple of eval_every; the
    # run ends at exactly spec.budget env steps for every contender (see _advance_sb3 / _advance_grpo).
    learned_steps: int | None = None
    targets = sorted({min(spec.budget, k * spec.eval_every)
                      for k in range(1, -(-spec.budget // spec.eval_every) + 1)})
    for target in targets:
        if model.num_timesteps >= target:
            continue
        if contender.algo == "GRPO":
            model, seconds, cut = _advance_grpo(model, target, spec.budget)
            train_seconds += seconds
            learned_steps = cut if cut is not None else learned_steps
        else:
            t0 = time.perf_counter()
            _advance_sb3(model, target, spec.budget)
            train_seconds += time.perf_counter() - t0
        checkpoint()
    if int(model.num_timesteps) != spec.budget:
        raise RuntimeError(
            f"{spec.key}: trained {model.num_timesteps} env steps, not the budget {spec.budget}")
    if contender.algo != "GRPO":
        rollout = int(model.n_steps) * int(model.n_envs)
        learned_steps = spec.budget - spec.budget % rollout  # SB3 updates once per whole rollout
    elif learned_steps is None:
        learned_steps = spec.budget

    final = curve[-1]
    if contender.algo == "GRPO":
        metrics = dict(model.last_metrics)
        collapsed = (
            metrics.get("rollout/zero_std_group_frac", 0.0) >= 1.0
            and metrics.get("rollout/reward_mean", correct_reward) < correct_reward - 1e-9
        )
        collapse_rule = "all groups tied, mean reward < correct"
    else:
        metrics = {}
        collapsed = bool(constant_train and (final["train_success"] or 0.0) < 1.0)
        collapse_rule = "same greedy answer for every train prompt, train success < 1"
    record: dict[str, Any] = {
        "key": spec.key,
        "format": KEY_TAG,
        "spec": spec.to_dict(),
        "contender": spec.contender,
        "label": contender.label,
        "algo": contender.algo,
        "policy": contender.policy,
        "env_id": spec.env_id,
        "seed": spec.seed,
        "budget": spec.budget,
        "eval_every": spec.eval_every,
        "hyperparams": spec.hyperparams,
        "num_timesteps": int(model.num_timesteps),
        "learned_steps": int(learned_steps),
        "train_seconds": train_seconds,
        "final_train_success": final["train_success"],
        "final_test_success": final["test_success"],
        "final_train_sampled": final["train_sampled"],
        "final_test_sampled": final["test_sampled"],
        "env_kwargs": spec.env_kwargs,
        "masked": contender.masked,
        "collapsed": collapsed,
        "collapse_rule": collapse_rule,
        "greedy_constant": constant_train,
        "steps_per_second": model.num_timesteps / max(train_seconds, 1e-9),
        "torch_threads": torch_threads,
        "peak_rss_mb": _peak_rss_mb(),
        "wall_seconds_total": time.time() - started,
        "last_metrics": metrics,
        "versions": library_versions(),
        "curve": curve,
    }
    params = _trainable_parameters(model)
    record.update({"params_actor": params["actor"], "params_critic": params["critic"],
                   "params_total": params["total"]})
    for threshold in THRESHOLDS:
        steps, seconds = _first_crossing(curve, threshold)
        tag = f"{round(threshold * 100)}"
        record[f"steps_to_{tag}"] = steps
        record[f"seconds_to_{tag}"] = seconds
        record[f"reached_{tag}"] = steps is not None
    return record


def run_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The executor's run function for a study's run: :func:`run_one` of the spec dict."""
    return run_one(RunSpec.from_dict(spec))


def spec_run(spec: RunSpec) -> Run:
    """A study's run as a task of the executor (``--rerun`` names its contender)."""
    return Run("benchmarks.compare.run:run_spec", spec.to_dict(), spec.key, arm=spec.contender,
               label=f"{spec.contender} s{spec.seed}")
