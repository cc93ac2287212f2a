"""Does the GRPO agent reach its targets? Per seed: environment steps and training seconds
until greedy success is 100% on both the train and the held-out prompts of ``rlvr/Arithmetic-v0``,
for the tabular and the MLP policy with their default configuration (``GRPOConfig.preset(policy)``,
what ``GRPO(env, config=None)`` uses); plus GRPO learning on two generic Gymnasium envs (CartPole-v1,
FrozenLake-v1) through the seed-reset group mode.

    python -m benchmarks.grpo_targets [--policies tabular,mlp] [--seeds 10-19] [--workers 2]
                                      [--budget-tabular 200000] [--budget-mlp 300000] [--no-generic]

Method: each run is one task of the executor (:mod:`benchmarks.core.executor`: an embedded local Ray by
default, a cluster with ``--ray-address``) with one torch/BLAS thread, stored as a run file in
``<out>/runs/`` and reused by the next invocation. Every ``--eval-every``
iterations the run pauses its clock and evaluates greedily on all train and all held-out prompts
(agents.evaluation.greedy_success, the evaluator the PPO comparison also uses); the first evaluation at
which both are 1.0 ends the run, and its step count and training seconds (evaluation excluded) are the
result. A run that never gets there is reported as censored at the budget. Results go atomically to
``<out>/grpo_targets.json`` and ``.md`` (``<out>``: ``benchmark-runs/grpo_targets/``, git-ignored, unless
``--out``; ``benchmarks/results/`` with ``--update-results``); the table is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    command_line,
    limit_threads,
    machine_info,
    output_folder,
    write_results,
)
from benchmarks.core.executor import Run, run_all
from benchmarks.core.store import run_key
from benchmarks.core.common import seeds_argument

ENV_ID = "rlvr/Arithmetic-v0"


def _run_of(fn: str, spec: dict[str, Any], group: str) -> Run:
    return Run(f"benchmarks.grpo_targets:{fn}", spec, run_key(group, spec), arm=group,
               label=f"{group} s{spec['seed']}")


def arithmetic_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One seeded run until 100% train and held-out greedy success, or the budget."""
    import rlvr_env  # noqa: F401
    from agents import GRPO

    policy, seed, budget, eval_every = spec["policy"], spec["seed"], spec["budget"], spec["eval_every"]
    threads = limit_threads(1, import_torch=True) if policy == "mlp" else 1
    model = GRPO(ENV_ID, None, policy=policy, seed=seed)  # None: the policy's preset
    eval_seconds = 0.0
    hit: dict[str, Any] = {}
    start = time.perf_counter()

    def callback(m: GRPO, metrics: dict[str, float]) -> bool | None:
        nonlocal eval_seconds
        if m.iterations % eval_every:
            return None
        t = time.perf_counter()
        train, test = m.evaluate("train"), m.evaluate("test")
        eval_seconds += time.perf_counter() - t
        if train == 1.0 and test == 1.0:
            hit["steps"] = m.num_timesteps
            hit["seconds"] = time.perf_counter() - start - eval_seconds
            return False
        return None

    model.learn(budget, callback=callback)
    train_seconds = time.perf_counter() - start - eval_seconds
    return {
        "policy": policy,
        "seed": seed,
        "budget": budget,
        "steps_to_100": hit.get("steps"),
        "seconds_to_100": hit.get("seconds"),
        "reached_100": "steps" in hit,
        "final_train": model.evaluate("train"),
        "final_test": model.evaluate("test"),
        "steps_run": model.num_timesteps,
        "train_seconds": train_seconds,
        "final_entropy": model.last_metrics.get("train/entropy"),
        "final_tied_groups": model.last_metrics.get("rollout/zero_std_group_frac"),
        "parameters": model.num_parameters(),
        "torch_threads": threads,
    }


def generic_run(spec: dict[str, Any]) -> dict[str, Any]:
    """GRPO on a non-rlvr env: greedy mean return before and after training."""
    from agents import GRPO

    env_id, policy, seed, budget = spec["env"], spec["policy"], spec["seed"], spec["budget"]
    env_kwargs, n_eval = spec["env_kwargs"], spec["n_eval"]
    model = GRPO(env_id, None, policy=policy, seed=seed, env_kwargs=env_kwargs)
    before = model.evaluate(n_episodes=n_eval)
    start = time.perf_counter()
    model.learn(budget)
    seconds = time.perf_counter() - start
    return {
        "env": env_id,
        "env_kwargs": env_kwargs,
        "policy": policy,
        "seed": seed,
        "budget": budget,
        "steps_run": model.num_timesteps,
        "train_seconds": seconds,
        "greedy_return_before": before,
        "greedy_return_after": model.evaluate(n_episodes=n_eval),
        "sampled_return_last_iteration": model.last_metrics["rollout/reward_mean"],
        "episode_length_last_iteration": model.last_metrics["rollout/ep_len_mean"],
        "n_eval_episodes": n_eval,
        "group_mode": model.group_mode,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in sorted({r["policy"] for r in runs}):
        rs = [r for r in runs if r["policy"] == policy]
        reached = [r for r in rs if r["reached_100"]]
        # Censored runs count at their budget (and a median above every finished run says so).
        steps = [r["steps_to_100"] if r["reached_100"] else float("inf") for r in rs]
        secs = [r["seconds_to_100"] if r["reached_100"] else float("inf") for r in rs]
        out[policy] = {
            "seeds": len(rs),
            "reached_100": len(reached),
            "median_steps_to_100": statistics.median(steps),
            "median_seconds_to_100": statistics.median(secs),
            "max_steps_to_100": max(steps),
            "budget": rs[0]["budget"],
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "### GRPO on rlvr/Arithmetic-v0: steps and seconds to 100% greedy success (train and held-out)",
        "",
        "| policy | seed | steps to 100% | train seconds to 100% | final train | final held-out |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in result["arithmetic"]:
        steps = f"{r['steps_to_100']:,}" if r["reached_100"] else f"never (budget {r['budget']:,})"
        secs = f"{r['seconds_to_100']:.2f}" if r["reached_100"] else "-"
        lines.append(f"| {r['policy']} | {r['seed']} | {steps} | {secs} | {r['final_train']:.2f} "
                     f"| {r['final_test']:.2f} |")
    lines += ["", "| policy | seeds reaching 100% | median steps | median seconds | worst steps |",
              "|---|---:|---:|---:|---:|"]
    for policy, s in result["summary"].items():
        lines.append(f"| {policy} | {s['reached_100']}/{s['seeds']} | {_num(s['median_steps_to_100'])} "
                     f"| {_num(s['median_seconds_to_100'], 2)} | {_num(s['max_steps_to_100'])} |")
    if result.get("generic"):
        lines += ["", "### GRPO on generic Gymnasium envs (groups share a start by seeded reset)", "",
                  "| env | policy | seed | env steps | train seconds | greedy return before | greedy after "
                  "| sampled return (last iteration) | episode length |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in result["generic"]:
            lines.append(f"| {r['env']} {json.dumps(r['env_kwargs']) if r['env_kwargs'] else ''} "
                         f"| {r['policy']} | {r['seed']} | {r['steps_run']:,} | {r['train_seconds']:.1f} "
                         f"| {r['greedy_return_before']:.2f} | {r['greedy_return_after']:.2f} "
                         f"| {r['sampled_return_last_iteration']:.2f} "
                         f"| {r['episode_length_last_iteration']:.1f} |")
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}. "
              "One torch/BLAS thread per run; seconds exclude the periodic evaluations.", ""]
    return "\n".join(lines)


def _num(x: float, digits: int = 0) -> str:
    if x == float("inf"):
        return "censored"
    return f"{x:,.{digits}f}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grpo_targets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default="tabular,mlp")
    # Seeds 0-9 were used to choose the presets (agents/grpo/config.py); the reported seeds are fresh ones.
    parser.add_argument("--seeds", type=seeds_argument(), default="10-19",
                        help="a list (10,11) or a range (10-19)")
    parser.add_argument("--budget-tabular", type=int, default=200_000)
    parser.add_argument("--budget-mlp", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=2, help="iterations between evaluations")
    parser.add_argument("--workers", type=int, default=None,
                        help="CPUs of the embedded local Ray, one run each (default: all cores)")
    parser.add_argument("--ray-address", default=None,
                        help="an existing Ray cluster (default: $RAY_ADDRESS, else an embedded local Ray)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--no-generic", action="store_true", help="skip CartPole / FrozenLake")
    add_output_arguments(parser, "grpo_targets", RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import os

    args = build_parser().parse_args(argv)
    out = output_folder(args)
    policies = [p for p in args.policies.split(",") if p]
    for p in policies:
        if p not in ("tabular", "mlp"):
            raise SystemExit(f"--policies: {p!r} is not 'tabular' or 'mlp'")
    seeds = args.seeds
    budgets = {"tabular": args.budget_tabular, "mlp": args.budget_mlp}

    jobs = [_run_of("arithmetic_run",
                    {"policy": p, "seed": s, "budget": budgets[p], "eval_every": args.eval_every},
                    f"arithmetic_{p}") for p in policies for s in seeds]
    generic_jobs = [] if args.no_generic else [
        _run_of("generic_run", {"env": env, "policy": pol, "seed": 0, "budget": budget, "env_kwargs": kw,
                                "n_eval": n_eval}, f"{env}_{pol}")
        for env, pol, budget, kw, n_eval in (
            ("CartPole-v1", "mlp", 100_000, {}, 10),
            ("FrozenLake-v1", "mlp", 100_000, {}, 500),
            ("FrozenLake-v1", "mlp", 60_000, {"is_slippery": False}, 10),
            ("FrozenLake-v1", "tabular", 100_000, {}, 500),
        )
    ]
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    outcome = run_all(jobs + generic_jobs, out, address=address, workers=None if address else args.workers,
                      progress=not args.quiet, desc="grpo_targets")
    if outcome.failures:
        raise RuntimeError(f"{len(outcome.failures)} run(s) failed:\n" + "\n".join(outcome.failures))
    strip = ("execution", "git_commit")
    runs = [{k: v for k, v in r.items() if k not in strip} for r in outcome.ordered(jobs)]
    generic = [{k: v for k, v in r.items() if k not in strip} for r in outcome.ordered(generic_jobs)]
    result = {
        "command": command_line("benchmarks.grpo_targets", argv),
        "machine": machine_info(),
        "arithmetic": runs,
        "summary": summarize(runs),
        "generic": generic,
    }
    result["retried_runs_this_invocation"] = outcome.retried
    write_results(out, "grpo_targets", result, markdown(result))
    return result
