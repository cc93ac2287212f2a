"""How long the thinking env's solver transcripts are, and how many fit the default cap uncut.

    python -m benchmarks.think.solver [--prompts 2000] [--update-results]

For Countdown-3 and Countdown-4 (train split, seeded draws), each style of the solver
(:mod:`rlvr_env.tasks.think.solver`): the share of prompts it solves within the cap, the share of search
traces that fit without cutting failed branches, and the mean and 90th percentile of transcript tokens
and of the policy's own tokens (actions) with and without the calculator. It writes
``benchmark-runs/think/solver.{md,json}`` (git-ignored) or, with ``--update-results``, the committed
``benchmarks/results/think/``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from benchmarks.core.common import (
    RESULTS_DIR, add_output_arguments, cli, command_line, output_folder, positive_int, write_results,
)
from rlvr_env.tasks.think import ThinkTask
from rlvr_env.tasks.think.solver import STYLES


def measure(n_numbers: int, prompts: int, seed: int) -> dict[str, Any]:
    task = ThinkTask(n_numbers=n_numbers)
    calc = ThinkTask(n_numbers=n_numbers, calculator=True)
    drawn = task.sample_prompts(np.random.default_rng(seed), "train", prompts)
    out: dict[str, Any] = {"n_numbers": n_numbers, "max_length": task.max_length, "styles": {}}
    for style in STYLES:
        solved = [task.solve(p, style) for p in drawn]
        ok = [s for s in solved if s is not None]
        length = np.array([len(s.tokens) for s in ok])
        actions = np.array([len(s.tokens) - sum(s.written_by_calculator) for s in ok])
        out["styles"][style] = {
            "solved": len(ok) / len(drawn),
            "uncut": float(np.mean([not s.cut for s in ok])) if ok else 0.0,
            "tokens_mean": float(length.mean()), "tokens_p90": float(np.percentile(length, 90)),
            "actions_calculator_mean": float(actions.mean()),
            "search_tokens_uncapped_mean": float(np.mean([s.search_length for s in ok])),
        }
        assert calc.max_length == task.max_length
    return out


def table(results: list[dict[str, Any]], command: str) -> str:
    lines = ["### The thinking env's solver transcripts (train-split prompts, default cap)", "",
             "| N | cap | style | solved within the cap | search uncut | transcript tokens (mean / p90) | "
             "policy tokens with the calculator (mean) | uncapped search (mean tokens) |",
             "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        for style, s in r["styles"].items():
            uncut = f"{s['uncut']:.3f}" if style == "search" else ""
            lines.append(f"| {r['n_numbers']} | {r['max_length']} | {style} | {s['solved']:.3f} | {uncut} | "
                         f"{s['tokens_mean']:.1f} / {s['tokens_p90']:.0f} | {s['actions_calculator_mean']:.1f} | "
                         f"{s['search_tokens_uncapped_mean']:.1f} |")
    lines += ["", f"Command: `{command}`."]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.think.solver",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--prompts", type=positive_int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(parser, "think", RESULTS_DIR / "think")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = output_folder(args)
    results = [measure(n, args.prompts, args.seed) for n in (3, 4)]
    write_results(out, "solver", {"results": results, "prompts": args.prompts, "seed": args.seed},
                  table(results, command_line("benchmarks.think.solver", argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(main))
