"""Tune the "tuned" contenders of :mod:`benchmarks.compare` with one and the same search budget each.

``python -m benchmarks.tune`` writes ``benchmarks/hparams/<contender>.json`` (committed; ``compare`` reads
them). The protocol, identical for every tuned contender:

- **sampler**: optuna's TPE sampler, seeded (``--sampler-seed``, default 0), **10 trials** per contender
  (``--trials``), asked two at a time and run in parallel (``--workers``); the first trial is the
  library's defaults (enqueued), so "tuned" is never worse than "defaults" on the tuning objective. TPE's
  first 10 trials are random draws (optuna's ``n_startup_trials``), so at this budget the search is in
  effect a seeded random search plus the defaults, for every contender alike;
- **objective**: mean greedy success on the **train** split over the 25 checkpoints of one run of
  **50,000 env steps** (the area under the learning curve: rewards reaching high success early, which
  is what steps-to-95% measures) on **tuning seed 1000** (``--seeds``; more seeds cost proportionally
  more: the budget was set by a shared 2-core machine on which SB3 PPO runs at 300-1,500 env steps/s).
  The held-out split is never evaluated while tuning, and reported runs use seeds 0..N-1;
- every trial run goes through :func:`benchmarks.compare.run_one` (same env, same evaluator, same
  process isolation as the reported runs); finished trial runs are cached under ``--out``, so an
  interrupted tuning resumes.

Search spaces (:data:`SEARCH_SPACES`; the network is never tuned, so parameter counts stay those of
SB3's default ``MlpPolicy`` actor / critic):

- ``ppo_tuned`` (SB3 PPO): ``learning_rate`` log-uniform [1e-4, 3e-3]; ``n_envs`` {1, 8} (synchronous
  env copies, as GRPO batches its groups); ``n_steps`` per env {64, 128, 256, 512, 1024, 2048};
  ``batch_size`` {32, 64, 128, 256} (capped at the rollout size n_steps * n_envs); ``n_epochs``
  {1, 4, 10, 20}; ``gamma`` {0.99, 1.0}; ``gae_lambda`` {0.9, 0.95, 1.0}; ``ent_coef``
  {0, 0.001, 0.01, 0.05}.
- ``grpo_mlp_tuned`` (GRPO, MLP policy; fields not searched keep ``GRPOConfig.preset("mlp")``):
  ``learning_rate`` log-uniform [1e-4, 3e-3]; ``group_size`` G {4, 8, 16, 32}; ``prompts_per_iter`` B
  {2, 4, 8, 16}; ``epochs`` mu {1, 2, 4, 8}; ``beta`` {0, 0.01, 0.04, 0.2}; ``clip_eps`` {0.1, 0.2, 0.3}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.compare import (  # noqa: F401
    CONTENDERS,
    EVALS_PER_RUN,
    RESULTS_DIR,
    RunSpec,
    atomic_write_text,
    contender_hyperparams,
    run_one,
)
from benchmarks.executor import run_grid as run_all

__all__ = ["SEARCH_SPACES", "DEFAULT_TRIAL", "HPARAMS_DIR", "objective_value", "tune", "main"]

HPARAMS_DIR = Path(__file__).resolve().parent / "hparams"
TUNE_SEEDS = (1000,)
TUNE_BUDGET = 50_000
N_TRIALS = 10


def _ppo_space(trial: Any) -> dict[str, Any]:
    n_envs = trial.suggest_categorical("n_envs", [1, 8])
    n_steps = trial.suggest_categorical("n_steps", [64, 128, 256, 512, 1024, 2048])
    batch_size = trial.suggest_categorical("batch_size", [32, 64, 128, 256])
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-3, log=True),
        "n_envs": n_envs,
        "n_steps": n_steps,
        # SB3 wants batch_size <= n_steps * n_envs; cap rather than waste the trial.
        "batch_size": min(batch_size, n_steps * n_envs),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 4, 10, 20]),
        "gamma": trial.suggest_categorical("gamma", [0.99, 1.0]),
        "gae_lambda": trial.suggest_categorical("gae_lambda", [0.9, 0.95, 1.0]),
        "ent_coef": trial.suggest_categorical("ent_coef", [0.0, 0.001, 0.01, 0.05]),
    }


def _grpo_space(trial: Any) -> dict[str, Any]:
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-3, log=True),
        "group_size": trial.suggest_categorical("group_size", [4, 8, 16, 32]),
        "prompts_per_iter": trial.suggest_categorical("prompts_per_iter", [2, 4, 8, 16]),
        "epochs": trial.suggest_categorical("epochs", [1, 2, 4, 8]),
        "beta": trial.suggest_categorical("beta", [0.0, 0.01, 0.04, 0.2]),
        "clip_eps": trial.suggest_categorical("clip_eps", [0.1, 0.2, 0.3]),
    }


#: contender -> function(optuna trial) -> hyperparameters for that contender's factory.
SEARCH_SPACES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "ppo_tuned": _ppo_space,
    "grpo_mlp_tuned": _grpo_space,
}

#: The first (enqueued) trial of each search: the library defaults, in the search space's own terms
#: (for GRPO the agent's MLP preset, ``GRPOConfig.preset("mlp")``, with the dataclass default mu = 4).
DEFAULT_TRIAL: dict[str, dict[str, Any]] = {
    "ppo_tuned": {"learning_rate": 3e-4, "n_envs": 1, "n_steps": 2048, "batch_size": 64, "n_epochs": 10,
                  "gamma": 0.99, "gae_lambda": 0.95, "ent_coef": 0.0},
    "grpo_mlp_tuned": {"learning_rate": 1e-3, "group_size": 16, "prompts_per_iter": 8, "epochs": 4,
                       "beta": 0.2, "clip_eps": 0.2},
}


def objective_value(records: Sequence[dict[str, Any]]) -> float:
    """Mean over seeds of the mean train success over a run's checkpoints (area under the curve)."""
    per_run = [float(np.mean([p["train_success"] for p in r["curve"][1:]])) for r in records]
    return float(np.mean(per_run))


def tune(
    contender: str,
    env_id: str,
    n_trials: int,
    budget: int,
    seeds: Sequence[int],
    out: Path,
    workers: int = 2,
    sampler_seed: int = 0,
) -> dict[str, Any]:
    """Run the search for one contender; return the hyperparameter-file content."""
    import optuna

    if contender not in SEARCH_SPACES:
        raise ValueError(f"contender {contender!r} has no search space; tunable: {sorted(SEARCH_SPACES)}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=sampler_seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(DEFAULT_TRIAL[contender])
    eval_every = max(1, budget // EVALS_PER_RUN)
    trials: list[dict[str, Any]] = []
    from tqdm.auto import tqdm

    bar = tqdm(total=n_trials, desc=f"tune {contender}", unit="trial", dynamic_ncols=True)
    while len(trials) < n_trials:
        # Ask as many trials as there are workers, run all their runs in parallel, then tell.
        asked = [study.ask() for _ in range(min(workers, n_trials - len(trials)))]
        params_of = [SEARCH_SPACES[contender](trial) for trial in asked]
        specs_of = [[RunSpec(contender, env_id, seed, budget, eval_every,
                             contender_hyperparams(contender, params), eval_splits=("train",))
                     for seed in seeds] for params in params_of]
        t0 = time.time()
        records, failures = run_all([s for specs in specs_of for s in specs], out, workers=workers,
                                    progress=False)
        by_key = {r["key"]: r for r in records}
        for trial, params, specs in zip(asked, params_of, specs_of):
            mine = [by_key[s.key] for s in specs if s.key in by_key]
            if len(mine) != len(specs):
                # A configuration that crashes (e.g. diverges) is a bad configuration, not a broken study.
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                errors = [f.splitlines()[0] for f in failures if any(s.key in f for s in specs)]
                trials.append({"number": trial.number, "hyperparams": params, "value": None,
                               "error": errors[0] if errors else "missing runs"})
            else:
                value = objective_value(mine)
                study.tell(trial, value)
                trials.append({"number": trial.number, "hyperparams": params, "value": value,
                               "final_train_success": [r["final_train_success"] for r in mine],
                               "train_seconds": [r["train_seconds"] for r in mine],
                               "batch_wall_seconds": time.time() - t0})
            bar.update(1)
    bar.close()
    done = [t for t in trials if t["value"] is not None]
    if not done:
        raise RuntimeError(f"every trial of {contender} failed: {trials}")
    best = max(done, key=lambda t: t["value"])
    return {
        "contender": contender,
        "algo": CONTENDERS[contender].algo,
        "policy": CONTENDERS[contender].policy,
        "hyperparams": best["hyperparams"],
        "base": ("GRPOConfig.preset(%r); these fields override it" % CONTENDERS[contender].policy
                 if CONTENDERS[contender].algo == "GRPO" else "SB3 defaults; these keywords override them"),
        "best_value": best["value"],
        "best_trial": best["number"],
        "objective": "mean greedy train success over the checkpoints of a run, averaged over tuning seeds",
        "env_id": env_id,
        "n_trials": n_trials,
        "tuning_budget_env_steps": budget,
        "tuning_seeds": list(seeds),
        "sampler": f"optuna TPESampler(seed={sampler_seed}), first trial = library defaults",
        "search_space": _space_text(contender),
        "trials": trials,
        "command": "python -m benchmarks.tune " + " ".join(sys.argv[1:]),
    }


def _space_text(contender: str) -> str:
    doc = __doc__ or ""
    start = doc.find(f"``{contender}``")
    end = doc.find("\n- ", start + 1)
    return " ".join(doc[start:end if end > 0 else None].split())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tune", description=__doc__.splitlines()[0])
    p.add_argument("--contenders", default=",".join(SEARCH_SPACES),
                   help=f"comma-separated subset of {sorted(SEARCH_SPACES)}")
    p.add_argument("--env", default="rlvr/Arithmetic-v0")
    p.add_argument("--trials", type=int, default=N_TRIALS, help="trials per contender (the same for all)")
    p.add_argument("--budget", type=int, default=TUNE_BUDGET, help="env steps per trial run")
    p.add_argument("--seeds", default=",".join(map(str, TUNE_SEEDS)), help="tuning seeds (>= 1000)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sampler-seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "tune", help="cache of trial runs")
    p.add_argument("--hparams-dir", type=Path, default=HPARAMS_DIR, help="where the chosen values go")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = [n for n in names if n not in SEARCH_SPACES]
    if not names or unknown:
        raise ValueError(
            f"--contenders {args.contenders!r}: unknown {unknown}; tunable: {sorted(SEARCH_SPACES)}"
        )
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds {args.seeds!r} must be a comma-separated list of integers") from None
    if not seeds or any(s < 1000 for s in seeds):
        raise ValueError(
            f"--seeds {args.seeds!r}: tuning seeds must be >= 1000 (0..999 are for reported runs)"
        )
    if args.trials < 1:
        raise ValueError(f"--trials {args.trials} must be at least 1")
    if args.budget < EVALS_PER_RUN:
        raise ValueError(f"--budget {args.budget} must be at least {EVALS_PER_RUN} env steps")
    import rlvr_env  # noqa: F401

    for name in names:
        result = tune(
            name, args.env, args.trials, args.budget, seeds, args.out, args.workers, args.sampler_seed
        )
        path = Path(args.hparams_dir) / f"{name}.json"
        atomic_write_text(path, json.dumps(result, indent=1) + "\n")
        print(f"{name}: best objective {result['best_value']:.3f} (trial {result['best_trial']}) "
              f"-> {path}\n  {json.dumps(result['hyperparams'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
