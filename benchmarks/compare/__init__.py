"""GRPO against Stable-Baselines3 PPO-with-a-critic on identical work: ``python -m benchmarks.compare``.

Every contender trains on the same env id and kwargs (train split), with the same observation encoding,
the same seeds and exactly the same number of env steps, and is scored by the same code
(:mod:`agents.evaluation`, greedy and, where the study asks, sampled answers on train and held-out
prompts). Each run is one Ray task (:mod:`benchmarks.core.executor`); with no ``--ray-address`` (nor
``RAY_ADDRESS``) an embedded local Ray uses this machine's cores.

    python -m benchmarks.compare                        # the quick study (the main job, a few minutes)
    python -m benchmarks.compare --study arithmetic-full  # the reported 10-seed Arithmetic study (--full)
    python -m benchmarks.compare --study countdown3     # Countdown-3: GRPO, PPO, MaskablePPO
    python -m benchmarks.compare --ray-address HOST:6379 --study countdown4   # on a Ray cluster

The pieces: :mod:`benchmarks.compare.study` (studies and contenders as data),
:mod:`benchmarks.compare.run` (one run), :mod:`benchmarks.core.executor` (a grid on Ray),
:mod:`benchmarks.compare.summary` (IQM, intervals, verdicts, goals) and :mod:`benchmarks.compare.report`
(files, table, plots). "Tuned" hyperparameters come from
``benchmarks/hparams/``, written by ``python -m benchmarks.compare.tune`` with the same search budget per
contender, on the train split and on seeds 1000+ that no reported run uses.

Outputs in the output folder (git-ignored ``benchmark-runs/<study>/`` unless ``--out``; the committed
``benchmarks/results/...`` only with ``--update-results``), all written atomically by the driver:
``runs/<key>.json`` (one per run, keyed by contender, env, budget, checkpoints, hyperparameters and
seed; a rerun with the same folder loads these instead of training again), ``runs.csv``, ``curves.csv``,
``summary.csv``, ``summary.json``, ``table.md``, ``curves_steps.png`` and ``curves_wall.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.compare import _extra  # noqa: F401  (first: a missing [bench] extra is named, not raw)
from benchmarks.core.common import write_atomically
from benchmarks.core.executor import git_commit, run_all
from benchmarks.compare.report import (
    CURVE_COLUMNS,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    markdown_table,
    verdict_lines,
    write_outputs,
)
from benchmarks.compare.run import build_model, library_versions, run_one, spec_run
from benchmarks.compare.study import (
    CONTENDERS,
    DEFAULT_STUDY,
    EVALS_PER_RUN,
    RESULTS_DIR,
    STUDIES,
    RunSpec,
    Study,
    contender_hyperparams,
    missing_tuned,
    parse_contenders,
    parse_seeds,
    resolve_hyperparams,
    seeds_argument,
    study_contenders,
)
from benchmarks.compare.summary import summarize

__all__ = [
    "CONTENDERS", "CURVE_COLUMNS", "RUN_COLUMNS", "SUMMARY_COLUMNS", "FULL", "QUICK", "RunSpec",
    "build_model",
    "build_parser", "contender_hyperparams", "main", "markdown_table", "parse_seeds", "resolve_hyperparams",
    "resolve_out", "run_one", "specs_for", "summarize", "verdict_lines",
]

atomic_write_text = atomic_write_bytes = write_atomically
QUICK = STUDIES[DEFAULT_STUDY]
FULL = STUDIES["arithmetic-full"]
__all__ += ["EVALS_PER_RUN", "RESULTS_DIR", "atomic_write_text"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.compare",
        description="GRPO vs SB3 PPO (and MaskablePPO, A2C) on identical work, each run a Ray task; "
                    "writes tables, plots and raw runs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="studies:\n" + "\n".join(
            f"  {s.name:16s} {s.description}; {s.env_id} "
            f"{json.dumps(dict(s.env_kwargs)) if s.env_kwargs else ''}"
            f" seeds {s.seeds}, {s.budget:,} env steps, contenders {', '.join(s.contenders)}"
            for s in STUDIES.values()),
    )
    p.add_argument("--study", default=DEFAULT_STUDY, choices=sorted(STUDIES),
                   help=f"the study preset (default {DEFAULT_STUDY}); the flags below override its parts")
    p.add_argument("--full", action="store_true", help=f"same as --study {FULL.name}")
    p.add_argument("--env", default=None,
                   help="Gymnasium env id (an rlvr_env TokenEnv; default: the study's)")
    p.add_argument("--seeds", type=seeds_argument(), default=None,
                   help="a seed (5), a list (10,11) or a range (10-19); default: the study's")
    p.add_argument("--budget", type=int, default=None, help="env steps per run; default: the study's")
    p.add_argument("--eval-every", type=int, default=None,
                   help=f"env steps between checkpoints (default budget / {EVALS_PER_RUN})")
    p.add_argument("--contenders", default=None,
                   help=f"comma-separated, from {', '.join(CONTENDERS)} (default: the study's)")
    p.add_argument("--workers", type=int, default=None,
                   help="CPUs of the embedded local Ray, one run each (default: all cores); ignored with "
                        "--ray-address")
    p.add_argument("--ray-address", default=None,
                   help="an existing Ray cluster (default: $RAY_ADDRESS, else an embedded local Ray)")
    p.add_argument("--out", type=Path, default=None,
                   help="results folder (reruns reuse finished runs); default benchmark-runs/<study>/ "
                        "(git-ignored)")
    p.add_argument("--update-results", action="store_true",
                   help="write into the study's committed results folder under benchmarks/results/, "
                        "replacing its runs; for maintainers regenerating the README's tables")
    p.add_argument("--rerun", default="",
                   help="comma-separated contenders whose finished runs in the folder are replaced, "
                        "not reused")
    p.add_argument("--no-plots", action="store_true", help="skip the PNGs")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def resolve_study(args: argparse.Namespace) -> Study:
    if args.full and args.study not in (DEFAULT_STUDY, FULL.name):
        raise ValueError(f"--full is --study {FULL.name}; do not combine it with --study {args.study}")
    return FULL if args.full else STUDIES[args.study]


def resolve_out(args: argparse.Namespace) -> Path:
    """The output folder: ``--out``, else the study's untracked default; ``--update-results`` (and only
    it) selects the study's committed results folder."""
    study = resolve_study(args)
    if args.update_results:
        if args.out is not None:
            raise ValueError(
                "--update-results writes the committed results folder; do not pass --out with it")
        return study.committed
    return Path(args.out) if args.out is not None else study.out


def specs_for(study: Study, contenders: Sequence[str], seeds: Sequence[int], budget: int, eval_every: int,
              env_id: str | None = None) -> list[RunSpec]:
    """The study's runs, seed-major (an interrupted study has complete seeds for every contender)."""
    hyperparams = {name: resolve_hyperparams(name, study.name) for name in contenders}
    for name in contenders:
        n_envs = int(hyperparams[name].get("n_envs", 1)) if CONTENDERS[name].algo != "GRPO" else 1
        if budget % n_envs:
            raise ValueError(f"--budget {budget} must be a multiple of {name}'s {n_envs} env copies "
                             "(SB3 steps them together), so that every contender trains exactly the budget")
    return [RunSpec(name, env_id or study.env_id, seed, budget, eval_every, hyperparams[name],
                    env_kwargs=dict(study.env_kwargs), eval_prompts=study.eval_prompts,
                    sampled_k=study.sampled_k)
            for seed in seeds for name in contenders]


def _validated(args: argparse.Namespace) -> tuple[Study, list[int], int, int, list[str], list[str], Path,
                                                  str]:
    """The run's settings from the flags; a ``ValueError`` naming the flag for a bad value."""
    study = resolve_study(args)
    seeds = args.seeds if args.seeds is not None else parse_seeds(study.seeds)
    budget = int(args.budget if args.budget is not None else study.budget)
    if budget < 1:
        raise ValueError(f"--budget {budget} must be a positive number of env steps")
    eval_every = args.eval_every if args.eval_every is not None else max(1, budget // EVALS_PER_RUN)
    if not 1 <= eval_every <= budget:
        raise ValueError(f"--eval-every {eval_every} must be between 1 and the budget ({budget})")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers {args.workers} must be at least 1")
    contenders = study_contenders(study, parse_contenders(args.contenders) if args.contenders else None)
    rerun = parse_contenders(args.rerun, "--rerun") if args.rerun.strip() else []
    out = resolve_out(args)
    env_id = args.env or study.env_id

    import gymnasium as gym

    import rlvr_env  # noqa: F401

    if env_id not in gym.registry:
        raise ValueError(f"--env {env_id!r} is not a registered Gymnasium id")
    return study, seeds, budget, eval_every, contenders, rerun, out, env_id


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # every bad flag value is a usage error (exit status 2) naming the value and the rule
        study, seeds, budget, eval_every, contenders, rerun, out, env_id = _validated(args)
    except ValueError as err:
        parser.error(str(err))
    if args.contenders is None and missing_tuned(study):
        print(f"note: no tuned hyperparameters yet for {', '.join(missing_tuned(study))} on {study.name} "
              f"(python -m benchmarks.compare.tune --study {study.name}); running without them",
              file=sys.stderr)
    try:
        specs = specs_for(study, contenders, seeds, budget, eval_every, env_id)
    except ValueError as err:  # e.g. a budget SB3's env copies cannot split evenly
        parser.error(str(err))
    started = time.time()
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    workers = None if address else (args.workers or os.cpu_count() or 1)
    outcome = run_all([spec_run(s) for s in specs], out, address=address, workers=workers,
                      progress=not args.quiet, rerun=rerun, desc=study.name, log=print)
    records, failures = outcome.ordered(spec_run(s) for s in specs), outcome.failures
    dest = outcome.destination(out)  # a committed folder is written only when every run succeeded
    if args.update_results and not failures:
        # The committed folder holds exactly this study: drop run files it no longer contains.
        keep = {f"{s.key}.json" for s in specs}
        for path in (out / "runs").glob("*.json"):
            if path.name not in keep:
                path.unlink()
    meta = {
        "study": study.name, "env_id": env_id, "env_kwargs": dict(study.env_kwargs), "budget": budget,
        "eval_every": eval_every, "seeds": seeds, "sampled_k": study.sampled_k,
        "eval_prompts": study.eval_prompts,
        "seeds_text": (f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1))
                       else str(seeds)),
        "contenders": contenders, "hyperparams": {s.contender: s.hyperparams for s in specs},
        "workers": workers or "a Ray cluster's", "ray_address": address,
        "cpu_count": os.cpu_count(), "versions": library_versions(),
        "run_versions": sorted({json.dumps(r.get("versions"), sort_keys=True) for r in records}),
        "command": "python -m benchmarks.compare " + " ".join(sys.argv[1:] if argv is None else argv),
        "git_commit": git_commit(),
        "run_git_commits": sorted({str(r.get("git_commit")) for r in records}),
        "elapsed_seconds_this_invocation": time.time() - started,
        "retried_runs_this_invocation": outcome.retried,
        "attempts": {r["key"]: r.get("execution", {}).get("attempts") for r in records},
    }
    if records:
        result = write_outputs(records, contenders, dest, meta, plots=not args.no_plots,
                               incomplete=outcome.incomplete())
        print(result["table"])
        print("\n".join(verdict_lines(result["summary"])))
        plots = [] if args.no_plots else ["*.png"]
        written = ["table.md", "summary.csv/json", "runs.csv", "curves.csv", *plots, "runs/"]
        print(f"results in {dest}/ ({', '.join(written)})")
    if failures:
        print(f"{len(failures)} run(s) failed:", file=sys.stderr)
        for f in failures:
            print(f, file=sys.stderr)
        print(outcome.incomplete() + (f"; {out}/ is left as it was" if dest != out else ""), file=sys.stderr)
        return 1
    return 0
