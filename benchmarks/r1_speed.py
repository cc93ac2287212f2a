"""GRPO env steps per second with the transformer policy at batch 256 (16 prompts x 16 answers), side by
side with the MLP policy in one process (issue 16's speed goal: >= 10k steps/s on 2 cores), and the
supervised cold start's solutions per second (one epoch over ``--sft`` train-split solutions).

Ratios measured in one run are what to quote on a shared machine; absolute figures depend on its load.
Writes ``benchmark-runs/r1_speed/speed.json`` (git-ignored; ``--update-results`` writes
``benchmarks/results/r1/speed.json``)::

    python -m benchmarks.r1_speed --steps 20000 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

import rlvr_env  # noqa: F401
from agents.grpo.config import GRPOConfig
from agents.grpo.agent import GRPO
from agents.sft import demonstrations, supervised_fit

from benchmarks.core.common import add_output_arguments, output_folder, write_json

RESULTS = Path(__file__).resolve().parent / "results" / "r1"


def measure(policy: str, steps: int, seed: int) -> dict[str, float]:
    """Steps/s of the training loop (rollouts + updates) after a one-iteration warm-up; the rollout and
    update shares come from wall time around the agent's own calls."""
    preset = "transformer" if policy == "transformer" else "countdown"
    cfg = GRPOConfig.preset(preset, prompts_per_iter=16, group_size=16, epochs=1, dynamic_sampling=False)
    model = GRPO("rlvr/Countdown-v0", cfg, policy=policy, seed=seed, env_kwargs={"n_numbers": 3})
    model.learn(1000)  # warm-up: allocations, first-call overheads
    start = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    seconds = time.perf_counter() - start
    rollout_s = 0.0
    t0 = time.perf_counter()
    batch = model._runner.collect(model.policy, model.rng)
    rollout_s = time.perf_counter() - t0
    return {"policy": policy, "steps": float(steps), "seconds": seconds, "steps_per_second": steps / seconds,
            "rollout_steps_per_second": batch.n_steps / rollout_s,
            "parameters": float(model.num_parameters())}


def measure_sft(n: int, seed: int) -> dict[str, float]:
    """Solutions per second of one cold-start epoch (after the demonstrations are built) over ``n``
    train-split solutions, with the transformer policy's default architecture."""
    model = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("transformer"), policy="transformer", seed=seed,
                 env_kwargs={"n_numbers": 3})
    start = time.perf_counter()
    demos = demonstrations(model.env, n, seed)
    demo_s = time.perf_counter() - start
    start = time.perf_counter()
    supervised_fit(model.policy, demos, epochs=1, seed=seed)
    fit_s = time.perf_counter() - start
    return {"solutions": float(n), "demonstrations_seconds": demo_s, "epoch_seconds": fit_s,
            "solutions_per_second": n / fit_s, "parameters": float(model.num_parameters())}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.r1_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft", type=int, default=100_000, help="solutions for the cold-start epoch")
    add_output_arguments(parser, "r1_speed", RESULTS)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.steps < 1 or args.threads < 1 or args.sft < 1:
        parser.error(f"--steps={args.steps}, --threads={args.threads} and --sft={args.sft} must be >= 1")
    out = output_folder(args)
    torch.set_num_threads(args.threads)
    rows = [measure(p, args.steps, args.seed) for p in ("transformer", "mlp")]
    record = {"threads": args.threads, "load_average": os.getloadavg(), "runs": rows,
              "transformer_over_mlp": rows[0]["steps_per_second"] / rows[1]["steps_per_second"],
              "sft": measure_sft(args.sft, args.seed)}
    write_json(out / "speed.json", record)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
