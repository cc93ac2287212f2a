"""Scale, measured: Ray's overhead per run, 1 vs 2 workers, runs per hour, and the Countdown-4 projection.

    python -m benchmarks.compare.scale

Writes ``benchmarks/results/scale.{json,md}``. Three measurements, all on this machine:

1. **Ray overhead**: ``--tiny-runs`` tiny runs (GRPO tabular, 640 env steps) executed one after another
   in this process (after one warm-up run), then as a study through an embedded local Ray with one
   worker: the difference, less Ray's start-up (timed on its own), divided by the number of runs, is
   the overhead per run (task submission, a worker process and its imports, returning the record); the
   start-up is a fixed cost per study.
2. **Workers**: the default study's contenders on ``--seeds`` seeds at ``--budget`` env steps (a
   scaled-down default study) through local Ray with 1 worker, then with 2; the ratio of wall times.
   Both folders stay in ``benchmark-runs/scale/`` for ``python -m benchmarks.compare.spread`` (the same runs
   trained twice).
3. **Projection**: each contender of the Countdown-4 study (those that can run today) trained once
   (seed 10) for ``--probe-budget`` env steps: training seconds per env step and evaluation seconds per
   run (25 checkpoints, whatever the budget). The full study's run time is then budget x rate +
   evaluation per run, and its wall time on N nodes of M cores is the total over all runs divided by
   N x M (Ray packs one run per core; no run is shorter than its own time), plus Ray's measured start-up
   and per-run overhead. Tuned contenders are assumed to cost what their default counterpart costs.

The driver's own work per run (receiving the record, writing its JSON file atomically) is timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.core.common import (
    add_output_arguments,
    cli,
    command_line,
    machine_info,
    output_folder,
    write_atomically,
    write_results,
)
from benchmarks.core.cluster import ray_session
from benchmarks.core.executor import run_all
from benchmarks.compare.run import spec_run
from benchmarks.core.store import check_run
from benchmarks.compare.study import (
    EVALS_PER_RUN,
    LOCAL_OUT,
    RESULTS_DIR,
    STUDIES,
    RunSpec,
    parse_seeds,
    seeds_argument,
    resolve_hyperparams,
    study_contenders,
)

OUT = LOCAL_OUT / "scale"
CLUSTERS = ((1, 2), (1, 16), (4, 16), (16, 32))


def _timed_grid(specs: list[RunSpec], out: Path, workers: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    outcome = run_all([spec_run(s) for s in specs], out, workers=workers, progress=False)
    failures, records = outcome.failures, outcome.records
    if failures or len(records) != len(specs):
        raise RuntimeError(f"{len(failures)} runs failed: {failures[:1]}")
    return time.perf_counter() - t0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare.scale",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tiny-runs", type=int, default=12)
    p.add_argument("--seeds", type=seeds_argument(), default="10,11", help="seeds of the scaled-down default study")
    p.add_argument("--budget", type=int, default=20_480, help="env steps per run of the scaled-down study")
    p.add_argument("--probe-budget", type=int, default=10_240, help="env steps per Countdown-4 probe run")
    add_output_arguments(p, "scale", RESULTS_DIR)
    p.add_argument("--work", type=Path, default=OUT, help="scratch folder of the timed runs (git-ignored)")
    return p


def main(argv: list[str] | None = None) -> int:
    """The three measurements of the module's docstring, in order. Long because its steps share the
    study's folders and timings and are read top to bottom."""
    args = build_parser().parse_args(argv)
    out = output_folder(args)
    work = args.work
    from benchmarks.compare import specs_for
    from benchmarks.compare.run import run_one

    # 1. Ray overhead on tiny runs
    tiny = [RunSpec("grpo_tabular", "rlvr/Arithmetic-v0", seed, 640, 320, resolve_hyperparams("grpo_tabular"))
            for seed in range(args.tiny_runs)]
    run_one(tiny[0])  # warm-up: imports
    t0 = time.perf_counter()
    for spec in tiny:
        run_one(spec)
    in_process = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ray_session(workers=1, quiet=True):
        startup = time.perf_counter() - t0
        t1 = time.perf_counter()
        failures = run_all([spec_run(s) for s in tiny], work / "tiny", workers=1, progress=False).failures
        through_ray = time.perf_counter() - t1
    if failures:
        raise RuntimeError(f"tiny runs failed: {failures[:1]}")
    shutil.rmtree(work / "tiny", ignore_errors=True)
    per_run = (through_ray - in_process) / len(tiny)

    # 2. 1 vs 2 workers on a scaled-down default study
    study = STUDIES["arithmetic"]
    seeds = args.seeds
    specs = specs_for(study, study_contenders(study), seeds, args.budget, args.budget // EVALS_PER_RUN)
    one = _timed_grid(specs, work / "workers1", 1)
    two = _timed_grid(specs, work / "workers2", 2)

    # driver work per run: writing one record atomically
    record = check_run(next((work / "workers1" / "runs").glob("*.json")))
    t0 = time.perf_counter()
    for i in range(50):
        write_atomically(work / "driver_probe" / f"{i}.json", json.dumps(record, indent=1))
    driver_per_run = (time.perf_counter() - t0) / 50
    shutil.rmtree(work / "driver_probe", ignore_errors=True)

    # 3. Countdown-4 probe and projection
    c4 = STUDIES["countdown4"]
    probe_names = study_contenders(c4)
    probe = specs_for(c4, probe_names, [10], args.probe_budget, args.probe_budget // EVALS_PER_RUN)
    _timed_grid(probe, work / "countdown4_probe", 2)
    rates: dict[str, dict[str, float]] = {}
    for path in (work / "countdown4_probe" / "runs").glob("*.json"):
        r = check_run(path)
        rates[r["contender"]] = {"train_s_per_step": r["train_seconds"] / r["num_timesteps"],
                                 "eval_s_per_run": r["wall_seconds_total"] - r["train_seconds"]}
    counterpart = {"grpo_mlp_masked_tuned": "grpo_mlp_masked", "ppo_tuned": "ppo_default",
                   "maskable_ppo_tuned": "maskable_ppo_default"}
    n_seeds = len(parse_seeds(c4.seeds))
    run_seconds = {}
    for name in c4.contenders:
        rate = rates.get(name) or rates[counterpart[name]]
        run_seconds[name] = c4.budget * rate["train_s_per_step"] + rate["eval_s_per_run"]
    n_runs = n_seeds * len(c4.contenders)
    total = n_seeds * sum(run_seconds.values())
    longest = max(run_seconds.values())
    projection = []
    for nodes, cores in CLUSTERS:
        cpus = nodes * cores
        wall = max(total / cpus, longest) + startup + per_run * n_runs / cpus
        projection.append({"nodes": nodes, "cores": cores, "hours": wall / 3600})
    quick_runs = [check_run(p) for p in (RESULTS_DIR / "compare" / "runs").glob("*.json")]
    quick_mean = float(np.mean([r["wall_seconds_total"] for r in quick_runs]))
    cpus_here = os.cpu_count() or 1
    overhead = startup + per_run * len(quick_runs)  # Ray's cost for the default study
    result: dict[str, Any] = {
        "tiny_runs": len(tiny), "in_process_seconds": in_process, "ray_seconds": through_ray,
        "ray_startup_seconds": startup, "ray_overhead_per_run_seconds": per_run,
        "workers1_seconds": one, "workers2_seconds": two, "ratio_2_to_1": two / one,
        "scaled_study": {"seeds": seeds, "budget": args.budget, "runs": len(specs)},
        "driver_seconds_per_run": driver_per_run, "countdown4_rates": rates,
        "countdown4_run_seconds": run_seconds, "countdown4_runs": n_runs,
        "countdown4_core_hours": total / 3600,
        "projection": projection, "quick_mean_run_seconds": quick_mean,
        "quick_runs_per_hour": 3600 * cpus_here / quick_mean,
        "countdown4_runs_per_hour": 3600 * cpus_here / (total / n_runs),
        "machine": machine_info(), "command": command_line("benchmarks.compare.scale", argv),
    }
    lines = [
        f"Measured by `python -m benchmarks.compare.scale` on {cpus_here} cores of a machine shared with "
        f"other jobs (load average {machine_info()['load_average_1min']:.1f} at the end), so times are upper bounds.",
        "",
        "| measurement | value |",
        "|---|---|",
        f"| {len(tiny)} tiny runs (GRPO tabular, 640 steps) in this process, one after another "
        f"| {in_process:.2f} s |",
        f"| the same through local Ray, 1 worker (without start-up) | {through_ray:.2f} s |",
        f"| Ray overhead per run | {per_run:.3f} s |",
        f"| Ray start-up (embedded local Ray, once per study) | {startup:.1f} s |",
        f"| driver work per run (record written atomically) | {driver_per_run * 1000:.1f} ms |",
        f"| scaled-down default study ({len(specs)} runs: {len(seeds)} seeds x {args.budget:,} steps), "
        f"1 worker | {one:.0f} s |",
        f"| the same, 2 workers | {two:.0f} s ({two / one:.2f}x; goal <= 0.55x: "
        f"{'met' if two / one <= 0.55 else 'missed'}) |",
        f"| Ray overhead for the default study ({len(quick_runs)} runs of {quick_mean:.0f} s on average, "
        f"2 workers) | {overhead / (overhead + len(quick_runs) * quick_mean / 2):.1%}"
        f" of its wall time (goal <= 5%) |",
        f"| runs per hour here, default study (mean run {quick_mean:.0f} s incl. evaluation) "
        f"| {result['quick_runs_per_hour']:.0f} |",
        f"| runs per hour here, Countdown-4 study (mean run {total / n_runs / 60:.0f} min, projected) "
        f"| {result['countdown4_runs_per_hour']:.1f} |",
        "",
        f"Countdown-4 study (`--study countdown4`: {n_runs} runs = {n_seeds} seeds x {len(c4.contenders)} "
        f"contenders x {c4.budget:,} env steps; tuning not included), projected from one "
        f"{args.probe_budget:,}-step probe run per contender ({', '.join(sorted(rates))}; tuned ones at "
        f"their default's cost): {total / 3600:.1f} core-hours.",
        "",
        "| nodes x cores | projected wall time |",
        "|---|---:|",
    ] + [f"| {q['nodes']} x {q['cores']} | {q['hours']:.1f} h |" for q in projection]
    table = "\n".join(lines) + "\n"
    write_results(out, "scale", result, table)
    return 0


if __name__ == "__main__":
    sys.exit(cli(main))
