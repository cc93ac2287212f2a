"""Tune the "tuned" contenders of a study with one and the same search budget each, on Ray Tune.

``python -m benchmarks.compare.tune [--study NAME]`` writes ``benchmarks/hparams/<contender>.json``
(Arithmetic) or ``<contender>__<study>.json`` (other studies); ``compare`` reads them. The protocol, identical for
every tuned contender of a study:

- **search**: Ray Tune with its Optuna searcher (``ray.tune.search.optuna.OptunaSearch``, a seeded TPE
  sampler, ``--sampler-seed``), ``--trials`` trials per contender (default 10), as many at once as the
  Ray cluster has CPUs (one CPU per trial); the first trial is the library's defaults (a point to
  evaluate), so "tuned" is never worse than "defaults" on the tuning objective;
- **objective**: mean over **3 tuning seeds** (``--seeds``, at least 3; 1000+, which no reported run
  uses) of the mean greedy success on the **train** split over a run's checkpoints (the area under the
  learning curve: rewards reaching high success early, which is what steps-to-95% measures), each run
  ``--budget`` env steps (the same for every contender). The held-out split is never evaluated while
  tuning;
- every trial run is :func:`benchmarks.compare.run.run_one` (same env, kwargs, evaluator and exact budget as
  the reported runs); the records of every trial come back to the driver, which writes them (with the
  chosen values) atomically.

Search spaces (:data:`SEARCH_SPACES`; the network is never tuned, so parameter counts stay those of
SB3's default ``MlpPolicy`` actor / critic):

- ``ppo_tuned`` and ``maskable_ppo_tuned`` (SB3 PPO, sb3-contrib MaskablePPO): ``learning_rate``
  log-uniform [1e-4, 3e-3]; ``n_envs`` {1, 8} (synchronous env copies, as GRPO batches its groups);
  ``n_steps`` per env {64, 128, 256, 512, 1024, 2048}; ``batch_size`` {32, 64, 128, 256} (capped at the
  rollout size n_steps * n_envs); ``n_epochs`` {1, 4, 10, 20}; ``gamma`` {0.99, 1.0}; ``gae_lambda``
  {0.9, 0.95, 1.0}; ``ent_coef`` {0, 0.001, 0.01, 0.05}.
- ``grpo_mlp_tuned`` and ``grpo_mlp_masked_tuned`` (GRPO, MLP policy, unmasked / masked; fields not
  searched keep ``GRPOConfig.preset("mlp")``):
  ``learning_rate`` log-uniform [1e-4, 3e-3]; ``group_size`` G {4, 8, 16, 32}; ``prompts_per_iter`` B
  {2, 4, 8, 16}; ``epochs`` mu {1, 2, 4, 8}; ``beta`` {0, 0.01, 0.04, 0.2}; ``clip_eps`` {0.1, 0.2, 0.3}.

The committed Arithmetic files predate this protocol: they were chosen by 10 optuna trials on one seed
(1000) of 50,000 steps each (their ``tuning_seeds`` and ``command`` fields say so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.core.common import cli, write_atomically
from benchmarks.core.cluster import ray_session
from benchmarks.compare.run import spec_run
from benchmarks.core.store import save_run
from benchmarks.compare.study import (
    CONTENDERS,
    DEFAULT_STUDY,
    EVALS_PER_RUN,
    HPARAMS_DIR,
    LOCAL_OUT,
    STUDIES,
    RunSpec,
    Study,
    contender_hyperparams,
    hparams_path,
    seeds_argument,
)

__all__ = ["SEARCH_SPACES", "DEFAULT_TRIAL", "HPARAMS_DIR", "objective_value", "tune", "main"]

TUNE_SEEDS = (1000, 1001, 1002)
#: Env steps per tuning run (x 3 seeds per trial), the same for every contender of a study.
TUNE_BUDGET = 40_960
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
    "maskable_ppo_tuned": _ppo_space,
    "grpo_mlp_tuned": _grpo_space,
    "grpo_mlp_masked_tuned": _grpo_space,
}

#: The first (enqueued) trial of each search: the library defaults, in the search space's own terms
#: (for GRPO the agent's MLP preset, ``GRPOConfig.preset("mlp")``, with the dataclass default mu = 4).
DEFAULT_TRIAL: dict[str, dict[str, Any]] = {
    "ppo_tuned": {"learning_rate": 3e-4, "n_envs": 1, "n_steps": 2048, "batch_size": 64, "n_epochs": 10,
                  "gamma": 0.99, "gae_lambda": 0.95, "ent_coef": 0.0},
    "maskable_ppo_tuned": {"learning_rate": 3e-4, "n_envs": 1, "n_steps": 2048, "batch_size": 64,
                           "n_epochs": 10, "gamma": 0.99, "gae_lambda": 0.95, "ent_coef": 0.0},
    "grpo_mlp_masked_tuned": {"learning_rate": 1e-3, "group_size": 16, "prompts_per_iter": 8, "epochs": 4,
                              "beta": 0.2, "clip_eps": 0.2},
    "grpo_mlp_tuned": {"learning_rate": 1e-3, "group_size": 16, "prompts_per_iter": 8, "epochs": 4,
                       "beta": 0.2, "clip_eps": 0.2},
}


def objective_value(records: Sequence[Mapping[str, Any]]) -> float:
    """Mean over seeds of the mean train success over a run's checkpoints (area under the curve)."""
    per_run = [float(np.mean([p["train_success"] for p in r["curve"][1:]])) for r in records]
    return float(np.mean(per_run))


def trial_specs(contender: str, study: Study, params: Mapping[str, Any], budget: int,
                seeds: Sequence[int]) -> list[RunSpec]:
    """The runs of one trial: the contender with ``params`` on each tuning seed, train split only."""
    hyperparams = contender_hyperparams(contender, params)
    return [RunSpec(contender, study.env_id, seed, budget, max(1, budget // EVALS_PER_RUN), hyperparams,
                    eval_splits=("train",), env_kwargs=dict(study.env_kwargs),
                    eval_prompts=study.eval_prompts)
            for seed in seeds]


def _trial(config: dict[str, Any]) -> dict[str, Any]:
    """One Ray Tune trial (one CPU): the contender's runs on every tuning seed, one after another."""
    import optuna

    from benchmarks.core.common import limit_threads
    from benchmarks.compare.run import run_one

    limit_threads(1)
    meta = config["_meta"]
    raw = {k: v for k, v in config.items() if k != "_meta"}
    params = SEARCH_SPACES[meta["contender"]](optuna.trial.FixedTrial(raw))  # caps applied as searched
    specs = trial_specs(meta["contender"], STUDIES[meta["study"]], params, meta["budget"], meta["seeds"])
    records = [run_one(spec) for spec in specs]
    return {"score": objective_value(records), "hyperparams": params, "records": records}


class _DefineByRun:
    """Optuna's define-by-run space for Ray Tune (a class, so Tune can pickle the searcher's state):
    suggests the searched parameters (Tune passes ``trial.params`` to :func:`_trial`) and adds what the
    trial needs to know as a constant."""

    def __init__(self, contender: str, study: str, budget: int, seeds: list[int]) -> None:
        self.meta = {"contender": contender, "study": study, "budget": budget, "seeds": seeds}

    def __call__(self, trial: Any) -> dict[str, Any]:
        SEARCH_SPACES[self.meta["contender"]](trial)
        return {"_meta": dict(self.meta)}


def tune(
    contender: str,
    study: Study,
    n_trials: int,
    budget: int,
    seeds: Sequence[int],
    out: Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    sampler_seed: int = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run the search for one contender through Ray Tune; return the hyperparameter-file content. Long
    because Ray Tune's search, its trial function and the file it writes are set up in one place."""
    import optuna

    # Tune's default CSV / JSON / TensorBoard loggers would log every trial's run records; the driver
    # writes those itself.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    from ray import tune as ray_tune
    from ray.tune.search.optuna import OptunaSearch

    if contender not in SEARCH_SPACES:
        raise ValueError(f"contender {contender!r} has no search space; tunable: {sorted(SEARCH_SPACES)}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    define_by_run = _DefineByRun(contender, study.name, budget, list(seeds))
    searcher = OptunaSearch(space=define_by_run, metric="score", mode="max",
                            sampler=optuna.samplers.TPESampler(seed=sampler_seed),
                            points_to_evaluate=[dict(DEFAULT_TRIAL[contender])])
    with ray_session(address, workers, quiet=quiet):
        tuner = ray_tune.Tuner(
            ray_tune.with_resources(_trial, {"cpu": 1}),
            tune_config=ray_tune.TuneConfig(search_alg=searcher, num_samples=n_trials, metric="score",
                                            mode="max"),
            run_config=ray_tune.RunConfig(name=f"{study.name}__{contender}",
                                          storage_path=str(Path(out).resolve() / "ray_tune"),
                                          verbose=0 if quiet else 1),
        )
        results = tuner.fit()
    trials, errors = [], []
    for number, result in enumerate(results):
        if result.error is not None or "score" not in (result.metrics or {}):
            errors.append(f"trial {number}: {result.error!r}")
            trials.append({"number": number, "value": None, "error": repr(result.error)})
            continue
        m = result.metrics
        trials.append({"number": number, "hyperparams": m["hyperparams"], "value": m["score"],
                       "final_train_success": [r["final_train_success"] for r in m["records"]],
                       "train_seconds": [r["train_seconds"] for r in m["records"]]})
        for record in m["records"]:  # the driver writes every trial run, as the executor does
            task = spec_run(RunSpec.from_dict(record["spec"]))
            save_run(Path(out) / "runs", task.key, task.fingerprint, record)
    done = [t for t in trials if t["value"] is not None]
    if not done:
        raise RuntimeError(f"every trial of {contender} failed: {errors}")
    best = max(done, key=lambda t: t["value"])
    c = CONTENDERS[contender]
    return {
        "contender": contender, "algo": c.algo, "policy": c.policy, "study": study.name,
        "hyperparams": best["hyperparams"],
        "base": (f"GRPOConfig.preset({c.policy!r}); these fields override it" if c.algo == "GRPO"
                 else "SB3 defaults; these keywords override them"),
        "best_value": best["value"], "best_trial": best["number"],
        "objective": "mean greedy train success over the checkpoints of a run, averaged over tuning seeds",
        "env_id": study.env_id, "env_kwargs": dict(study.env_kwargs), "n_trials": n_trials,
        "tuning_budget_env_steps": budget, "tuning_seeds": list(seeds),
        "sampler": f"Ray Tune OptunaSearch, TPESampler(seed={sampler_seed}), first trial = library defaults",
        "search_space": _space_text(contender), "trials": trials,
        "command": "python -m benchmarks.compare.tune " + " ".join(sys.argv[1:]),
    }


def _space_text(contender: str) -> str:
    doc = __doc__ or ""
    start = doc.find(f"``{contender}``")
    end = doc.find("\n- ", start + 1)
    return " ".join(doc[start:end if end > 0 else None].split())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare.tune",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("--study", default=DEFAULT_STUDY, choices=sorted(STUDIES))
    p.add_argument("--contenders", default=None,
                   help=f"comma-separated subset of {sorted(SEARCH_SPACES)} "
                        "(default: the study's tuned ones)")
    p.add_argument("--trials", type=int, default=N_TRIALS, help="trials per contender (the same for all)")
    p.add_argument("--budget", type=int, default=TUNE_BUDGET, help="env steps per trial run")
    p.add_argument("--seeds", type=seeds_argument(minimum=3, tuning=True), default=",".join(map(str, TUNE_SEEDS)),
                   help="tuning seeds: a list (1000,1001,1002) or a range (1000-1002), >= 1000, at least 3")
    p.add_argument("--workers", type=int, default=None, help="CPUs of the embedded local Ray (default: all)")
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: $RAY_ADDRESS)")
    p.add_argument("--sampler-seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="trial runs and Ray Tune's files "
                                                          "(default benchmark-runs/tune/<study>)")
    p.add_argument("--hparams-dir", type=Path, default=None,
                   help="where the chosen values go (default: <out>/hparams, git-ignored)")
    p.add_argument("--update-results", action="store_true",
                   help=f"write the chosen values into {HPARAMS_DIR.name}/ that the studies read (maintainers)")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    study = STUDIES[args.study]
    tunable = [n for n in study.contenders if n in SEARCH_SPACES]
    names = [n.strip() for n in args.contenders.split(",") if n.strip()] if args.contenders else tunable
    unknown = [n for n in names if n not in SEARCH_SPACES]
    if not names or unknown:
        raise ValueError(
            f"--contenders {args.contenders!r}: unknown {unknown}; tunable: {sorted(SEARCH_SPACES)}")
    seeds = args.seeds
    if args.trials < 1:
        raise ValueError(f"--trials {args.trials} must be at least 1")
    if args.budget < EVALS_PER_RUN:
        raise ValueError(f"--budget {args.budget} must be at least {EVALS_PER_RUN} env steps")
    out = args.out or LOCAL_OUT / "tune" / study.name
    if args.update_results and args.hparams_dir is not None:
        raise ValueError("--update-results writes the studies' hparams folder; do not pass --hparams-dir with it")
    hparams_dir = HPARAMS_DIR if args.update_results else (args.hparams_dir or Path(out) / "hparams")
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    for name in names:
        result = tune(name, study, args.trials, args.budget, seeds, out, address=address,
                      workers=None if address else args.workers, sampler_seed=args.sampler_seed,
                      quiet=args.quiet)
        path = Path(hparams_dir) / hparams_path(name, study.name).name
        write_atomically(path, json.dumps(result, indent=1) + "\n")
        print(f"{name}: best objective {result['best_value']:.3f} (trial {result['best_trial']}) "
              f"-> {path}\n  {json.dumps(result['hyperparams'])}")
    return 0


if __name__ == "__main__":
    sys.exit(cli(main))
