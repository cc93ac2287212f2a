"""The R1 recipe end to end, as a user runs it: the README's command (cold start, then GRPO, then the
final scores), timed from outside in a child process, with the figures it printed to ``--json``.

    python -m benchmarks.speed recipe [--threads 2] [--seed 10] [--update-results]

The child is :data:`RECIPE` (the README's R1 command; a test checks that the README says the same) plus
``--threads``; its wall-clock seconds, its CPU seconds (user + system, every thread) and the machine's
load average before and after are recorded, with the cold start's and RL's own seconds from its JSON,
and the base's and the final held-out and train scores. The targets (the recipe end to end in at most
10 minutes on 2 quiet cores, reaching 0.80 held-out greedy and 0.75 sampled) are checked in the table.
A busy machine makes the wall-clock figure longer: read it with the load columns.

Writes ``benchmark-runs/r1_recipe/recipe.md`` and ``.json`` (git-ignored; ``--update-results`` writes
``benchmarks/results/r1/recipe.md`` and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.core.common import (
    RESULTS_DIR,
    ROOT,
    add_output_arguments,
    cli,
    command_line,
    machine_info,
    output_folder,
    positive_int,
    write_results,
)

#: The README's R1 command (without ``--json``, which the measurement adds).
RECIPE = ("python -m agents.grpo --env rlvr/Countdown-v0 --env-kwargs '{\"n_numbers\": 3}' "
          "--policy transformer --preset transformer --sft 100000 --total-timesteps 300000 --seed 10")
#: The targets the table checks: seconds end to end, held-out greedy and sampled after GRPO.
TARGETS = {"seconds": 600.0, "test_greedy": 0.80, "test_sampled": 0.75}


def recipe_argv(seed: int, threads: int, json_path: Path) -> list[str]:
    """The child's argv: :data:`RECIPE` with this seed, ``--threads`` and ``--json``."""
    import shlex

    argv = shlex.split(RECIPE)
    argv[argv.index("--seed") + 1] = str(seed)
    return [sys.executable, *argv[1:], "--threads", str(threads), "--json", str(json_path)]


def measure(seed: int, threads: int) -> dict[str, Any]:
    """Run the recipe once in a child process; its timings, load and final figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        argv = recipe_argv(seed, threads, out)
        load_before = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"the recipe command exited with {done.returncode}: {done.stderr[-2000:]}")
        got = json.loads(out.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    keep = ("sft_seconds", "train_seconds", "steps_per_second", "num_timesteps", "parameters", "eval_k")
    scores = {k: got[k] for k in got if k.startswith(("base_", "train_", "test_")) and k != "train_seconds"}
    return {"seed": seed, "threads": threads, "wall_seconds": wall, "cpu_seconds": cpu,
            "load_before": list(load_before), "load_after": list(os.getloadavg()),
            **{k: got[k] for k in keep}, **scores}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "### The R1 recipe end to end: the README's command, timed from outside",
        "",
        f"`{RECIPE}` with `--threads` as shown, one run per row; wall = the whole command (imports, cold "
        "start, GRPO, final scores); CPU = user + system seconds of every thread; the 1-minute load average "
        f"before and after; scores on 256 prompts per split, {result['runs'][0]['eval_k']} samples each "
        "(the command's own evaluation).",
        "",
        "| seed | threads | wall seconds | CPU seconds | cold start s | GRPO s | GRPO env steps/s | load before "
        "/ after | base held-out greedy / sampled | final held-out greedy / sampled | final train greedy / "
        "sampled |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['seed']} | {r['threads']} | {r['wall_seconds']:.0f} | {r['cpu_seconds']:.0f} | "
            f"{r['sft_seconds']:.0f} | {r['train_seconds']:.0f} | {r['steps_per_second']:,.0f} | "
            f"{r['load_before'][0]:.1f} / {r['load_after'][0]:.1f} | "
            f"{r['base_test_greedy']:.3f} / {r['base_test_sampled']:.3f} | "
            f"{r['test_greedy']:.3f} / {r['test_sampled']:.3f} | {r['train_greedy']:.3f} / {r['train_sampled']:.3f} |")
    lines += ["", "| target | measured (each run) | verdict |", "|---|---|---|"]
    for name, key, fmt, better in (
            (f"end to end in <= {TARGETS['seconds']:.0f} s", "wall_seconds", "{:.0f} s", min),
            (f"held-out greedy >= {TARGETS['test_greedy']}", "test_greedy", "{:.3f}", max),
            (f"held-out sampled >= {TARGETS['test_sampled']}", "test_sampled", "{:.3f}", max)):
        values = [r[key] for r in result["runs"]]
        target = TARGETS["seconds" if key == "wall_seconds" else key]
        met = all((v <= target) if better is min else (v >= target) for v in values)
        lines.append(f"| {name} | {', '.join(fmt.format(v) for v in values)} | "
                     f"{'met' if met else '**missed**'} |")
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}.", ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed recipe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="2",
                        help="torch threads of the command, one run each: 2 or a list (1,2)")
    parser.add_argument("--seed", type=positive_int, default=10, help="the README's seed")
    add_output_arguments(parser, "r1_recipe", RESULTS_DIR / "r1")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        threads = [positive_int(t) for t in str(args.threads).split(",") if t.strip()]
    except argparse.ArgumentTypeError as err:
        parser.error(f"--threads {args.threads!r}: {err}")
    if not threads:
        parser.error(f"--threads {args.threads!r}: give at least one thread count")
    out = output_folder(args)
    runs = [measure(args.seed, t) for t in threads]
    result = {"command": command_line("benchmarks.speed recipe", argv), "machine": machine_info(),
              "recipe": RECIPE, "targets": TARGETS, "runs": runs}
    write_results(out, "recipe", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(cli(main))
