"""Training throughput: environment steps per second of a whole ``learn`` call, GRPO (tabular, MLP)
beside Stable-Baselines3 PPO (``MlpPolicy``, SB3 defaults) on ``rlvr/Arithmetic-v0``, in one process.

    python -m benchmarks.speed throughput [--steps 20480] [--repeats 3] [--threads 1]
                                          [--out DIR | --update-results]

Method: the contenders are timed alternately, ``--repeats`` times each, each on a freshly built model
(construction not timed), and the median steps/s is reported, so a drift of this shared machine's speed
hits all of them alike. Each learns ``--steps`` environment steps from scratch: GRPO with its default
configuration (``GRPOConfig.preset(policy)``; its rollouts go through the env's native vector env),
PPO with SB3's defaults on one ``gym.make`` env (the usual DummyVecEnv). torch uses ``--threads``
intra-op threads.
Targets: tabular >= 10x PPO, MLP >= 2x PPO. Results go atomically to
``<out>/throughput.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    cli,
    command_line,
    limit_threads,
    machine_info,
    output_folder,
    write_results,
)

ENV_ID = "rlvr/Arithmetic-v0"
GOALS = {"GRPO tabular": 10.0, "GRPO MLP": 2.0}


def _ppo(seed: int) -> Any:
    import gymnasium as gym
    from stable_baselines3 import PPO

    return PPO("MlpPolicy", gym.make(ENV_ID), seed=seed, device="cpu", verbose=0)


def _grpo(policy: str) -> Callable[[int], Any]:
    def build(seed: int) -> Any:
        from agents import GRPO

        return GRPO(ENV_ID, None, policy=policy, seed=seed)  # None: the policy's preset

    return build


CONTENDERS: dict[str, Callable[[int], Any]] = {
    "SB3 PPO": _ppo,
    "GRPO tabular": _grpo("tabular"),
    "GRPO MLP": _grpo("mlp"),
}


def measure(steps: int, repeats: int) -> dict[str, list[float]]:
    import rlvr_env  # noqa: F401

    rates: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for rep in range(repeats):
        for name, build in CONTENDERS.items():
            model = build(rep)
            start = time.perf_counter()
            model.learn(steps)
            seconds = time.perf_counter() - start
            rates[name].append(model.num_timesteps / seconds)
    return rates


def markdown(result: dict[str, Any]) -> str:
    base = result["median_steps_per_second"]["SB3 PPO"]
    lines = [
        f"### Training throughput on {ENV_ID} ({result['steps']:,} env steps per learn call, "
        f"median of {result['repeats']}, torch threads = {result['torch_threads']})",
        "",
        "| contender | env steps / s (median) | all repeats | ratio to SB3 PPO | goal |",
        "|---|---:|---|---:|---|",
    ]
    for name, med in result["median_steps_per_second"].items():
        reps = ", ".join(f"{r:,.0f}" for r in result["steps_per_second"][name])
        goal = GOALS.get(name)
        ratio = med / base
        verdict = "" if goal is None else f">= {goal:g}x: {'met' if ratio >= goal else 'NOT met'}"
        lines.append(f"| {name} | {med:,.0f} | {reps} | {ratio:.1f}x | {verdict} |")
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}.", ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_480)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    add_output_arguments(parser, "throughput", RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    if args.steps < 2048 or args.repeats < 1 or args.threads < 1:
        raise SystemExit("--steps must be >= 2048 (one PPO rollout), --repeats and --threads >= 1")
    threads = limit_threads(args.threads, import_torch=True)
    rates = measure(args.steps, args.repeats)
    result = {
        "command": command_line("benchmarks.speed throughput", argv),
        "machine": machine_info(),
        "steps": args.steps,
        "repeats": args.repeats,
        "torch_threads": threads,
        "steps_per_second": rates,
        "median_steps_per_second": {k: statistics.median(v) for k, v in rates.items()},
    }
    result["ratios_to_ppo"] = {
        k: v / result["median_steps_per_second"]["SB3 PPO"]
        for k, v in result["median_steps_per_second"].items()
    }
    write_results(output_folder(args), "throughput", result, markdown(result))
    return result


if __name__ == "__main__":
    sys.exit(cli(main))
