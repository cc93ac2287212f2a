"""GRPO on Countdown: which changes made GRPO learn, GRPO vs MaskablePPO, the warm start, and
the Arithmetic presets' sampled success.

    python -m benchmarks.countdown [--parts ablation,maskable,warm,n4,arithmetic] [--seeds 10-12]
                                   [--budget 300000] [--quick] [--render]

Every figure comes from one evaluator, :func:`agents.evaluation.success_report` (greedy success,
sampled success = mean over k=16 sampled answers per prompt, pass@16), on fixed held-out ("test")
and train prompts, under the grammar masks for masked agents (GRPO with ``action_masks=True`` and
MaskablePPO; :func:`agents.evaluation.sb3_predictor` adapts SB3 models). Settings were chosen on
seeds 0-1 (Countdown) and 0-9 (the Arithmetic presets); the reported seeds are fresh (10 and up).

Parts:

* **ablation**: GRPO on Countdown N=3 from scratch, ``--budget`` env steps per run, one row per
  variant (:data:`VARIANTS`, cumulative): the starting point (MLP preset, masks off), then masks,
  the length term off, DAPO's dynamic sampling + clip-higher + beta 0 (the Countdown preset), then the
  observation (``relations`` / ``lookahead``, env kwargs of ``rlvr/Countdown-v0``). A run *collapses*
  when its final rollout mean length is at the minimum answer (one number + EOS = 2 tokens) while its
  held-out greedy success is below the single-number floor (answer the number equal to the target).
* **maskable**: GRPO (the Countdown preset) vs sb3-contrib MaskablePPO (defaults, 8 env copies with
  ``n_steps=256``, so its 2,048-step rollout matches the default) from scratch at equal env steps,
  both with the same observation; steps to 0.3 held-out greedy success (censored at the budget),
  IQM ratio GRPO / MaskablePPO with a 95% bootstrap interval.
* **warm**: behaviour cloning on ``--demos`` train-split solutions (:mod:`agents.bc`), then GRPO with
  the clone as its KL reference, and MaskablePPO from the same cloned actor with a fresh critic, each
  for ``--warm-budget`` steps.
* **n4**: the same GRPO (Countdown preset, lookahead observation) on Countdown N=4, ``--n4-budget``
  env steps (default 1M).
* **arithmetic**: the ``tabular`` and ``mlp`` presets on ``rlvr/Arithmetic-v0`` at their reported
  budgets (200k / 300k steps): greedy, sampled (k=64) and the worst prompt's sampled success.

Every run is one task of the executor (:mod:`benchmarks.core.executor`: an embedded local Ray by default,
a cluster with ``--ray-address``), one torch thread each, stored as a run file in ``<out>/runs/`` and
reused by the next invocation. Results: ``<out>/countdown.json`` (every run) and ``countdown.md`` (the
tables), ``<out>`` being ``benchmark-runs/countdown/`` (git-ignored) unless ``--out``; the committed
``benchmarks/results/countdown/`` only with ``--update-results``.

The package: :mod:`~benchmarks.countdown.settings` (the env, the ablation's variants, the thresholds),
:mod:`~benchmarks.countdown.runs` (the run functions and their plans), :mod:`~benchmarks.countdown.tables`
(the tables of docs/countdown.md) and this module (the command: parts, runs, results).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from benchmarks.core.baselines import single_number_floor
from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    command_line,
    machine_info,
    output_folder,
    seeds_argument,
    write_results,
)
from benchmarks.core.executor import Run, run_all
from benchmarks.countdown.runs import arithmetic_plan, fixed_prompts, grpo_plan, maskable_plan
from benchmarks.countdown.settings import BEST, ENV_ID, TASK, VARIANTS, WARM_CONFIG
from benchmarks.countdown.tables import render

__all__ = ["build_parser", "main", "render"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.countdown", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    seeds = seeds_argument()
    parser.add_argument("--parts", default="ablation,maskable,warm,n4,arithmetic")
    parser.add_argument("--seeds", type=seeds, default="10-12",
                        help="reported seeds: a list (10,11) or a range (10-12); settings were chosen on 0-9")
    parser.add_argument("--budget", type=int, default=300_000, help="env steps per ablation run")
    parser.add_argument("--variants", default=";".join(VARIANTS), help="ablation rows (';'-separated)")
    parser.add_argument("--maskable-budget", type=int, default=100_000)
    parser.add_argument("--maskable-seeds", type=seeds, default="10-11")
    parser.add_argument("--warm-budget", type=int, default=100_000)
    parser.add_argument("--warm-seeds", type=seeds, default="10-11")
    parser.add_argument("--demos", type=int, default=1000)
    parser.add_argument("--n4-budget", type=int, default=1_000_000)
    parser.add_argument("--n4-seeds", type=seeds, default="10-11")
    parser.add_argument("--eval-prompts", type=int, default=500, help="fixed prompts per split")
    parser.add_argument("--eval-every", type=int, default=10_000, help="env steps between curve points")
    parser.add_argument("--quick", action="store_true", help="2 seeds, small budgets (a smoke run)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite countdown.md from the stored countdown.json (no runs)")
    parser.add_argument("--workers", type=int, default=None,
                        help="CPUs of the embedded local Ray, one run each (default: all cores)")
    parser.add_argument("--ray-address", default=None,
                        help="an existing Ray cluster (default: $RAY_ADDRESS, else an embedded local Ray)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_output_arguments(parser, "countdown", RESULTS_DIR / "countdown")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the parts of the Countdown study (``--parts``) and write its tables. Long because each part's
    runs, records and table are assembled in the order the page shows them."""
    import os

    args = build_parser().parse_args(argv)
    out = output_folder(args)
    if args.quick:
        args.seeds = args.maskable_seeds = args.warm_seeds = [10, 11]
        args.budget = args.maskable_budget = args.warm_budget = 20_000
        args.eval_prompts, args.demos = 100, 200
    if args.render:
        stored = json.loads((out / "countdown.json").read_text())
        write_results(out, "countdown", stored, render(stored) + "\n")
        return 0
    import gymnasium as gym

    import rlvr_env  # noqa: F401

    seeds = args.seeds
    parts = set(args.parts.split(","))
    unknown = parts - {"ablation", "maskable", "warm", "n4", "arithmetic"}
    if unknown:
        raise ValueError(f"--parts {args.parts!r}: unknown {sorted(unknown)}")
    for name in args.variants.split(";") if "ablation" in parts else []:
        if name not in VARIANTS:
            raise ValueError(f"--variants: unknown variant {name!r}; variants are {list(VARIANTS)}")
    floor = single_number_floor(gym.make(ENV_ID, **TASK), fixed_prompts(TASK, args.eval_prompts)["test"])
    # Parts can run in separate invocations: each keeps the other parts' stored results.
    stored = out / "countdown.json"
    result: dict[str, Any] = json.loads(stored.read_text()) if stored.is_file() and not args.quick else {}
    if result.get("eval_prompts") not in (None, args.eval_prompts):
        raise SystemExit(f"{stored} was measured on {result['eval_prompts']} prompts per split, not "
                         f"{args.eval_prompts}; remove it or match --eval-prompts")
    result.update({"machine": machine_info(), "single_number_floor_test": floor,
                   "eval_prompts": args.eval_prompts})
    commands = result.setdefault("commands", {})
    n = args.eval_prompts
    best = VARIANTS[BEST][2]
    task4 = {"n_numbers": 4}
    # Every run of every part is one task of the executor; the parts are assembled from the records.
    plan: dict[str, Any] = {}
    if "ablation" in parts:
        plan["ablation"] = {name: [grpo_plan(s, args.budget, VARIANTS[name][1], VARIANTS[name][2],
                                             VARIANTS[name][0], n, args.eval_every, part="ablation")
                                   for s in seeds] for name in args.variants.split(";")}
    if "maskable" in parts:
        plan["maskable"] = {
            "grpo": [grpo_plan(s, args.maskable_budget, {}, best, "countdown", n, args.eval_every,
                               part="maskable") for s in args.maskable_seeds],
            "maskable_ppo": [maskable_plan(s, args.maskable_budget, best, n, args.eval_every, part="maskable")
                             for s in args.maskable_seeds]}
    if "warm" in parts:
        plan["warm"] = {
            "grpo": [grpo_plan(s, args.warm_budget, WARM_CONFIG, best, "countdown", n, args.eval_every,
                               demos=args.demos, part="warm") for s in args.warm_seeds],
            "maskable_ppo": [maskable_plan(s, args.warm_budget, best, n, args.eval_every, demos=args.demos,
                                           part="warm") for s in args.warm_seeds]}
    if "n4" in parts:
        plan["n4"] = [grpo_plan(s, args.n4_budget, {}, best, "countdown", n, args.n4_budget // 10, task=task4,
                                part="n4") for s in args.n4_seeds]
    if "arithmetic" in parts:
        budgets = (("tabular", 200_000), ("mlp", 300_000)) if not args.quick else (("tabular", 5_000),)
        plan["arithmetic"] = [arithmetic_plan(pol, s, budget)
                              for pol, budget in budgets for s in (seeds if not args.quick else seeds[:1])]
    tasks = [t for part in plan.values() for t in _flatten(part)]
    t0 = time.perf_counter()
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    outcome = run_all(tasks, out, address=address, workers=None if address else args.workers,
                      progress=not args.quiet, desc="countdown", log=print)
    if outcome.failures:
        print(f"{len(outcome.failures)} run(s) failed:\n" + "\n".join(outcome.failures), file=sys.stderr)
        return 1
    got = _assemble(plan, outcome.records)
    if "ablation" in got:
        result["ablation"] = {"runs": got["ablation"], "budget": args.budget, "seeds": seeds}
    if "maskable" in got:
        result["maskable"] = {**got["maskable"], "budget": args.maskable_budget, "env_kwargs": best}
    if "warm" in got:
        result["warm"] = {**got["warm"], "demos": args.demos, "budget": args.warm_budget}
    if "n4" in got:
        floor4 = single_number_floor(gym.make(ENV_ID, **task4), fixed_prompts(task4, n)["test"])
        result["n4"] = {"runs": got["n4"], "budget": args.n4_budget, "floor": floor4}
    if "arithmetic" in got:
        result["arithmetic"] = got["arithmetic"]
    for part in parts:
        commands[part] = command_line("benchmarks.countdown", argv)
    result[f"wall_seconds_{'_'.join(sorted(parts))}"] = time.perf_counter() - t0
    result["retried_runs_this_invocation"] = outcome.retried
    write_results(out, "countdown", result, render(result) + "\n")
    return 0


def _flatten(plan: Any) -> list[Run]:
    if isinstance(plan, Run):
        return [plan]
    items = plan.values() if isinstance(plan, dict) else plan
    return [t for item in items for t in _flatten(item)]


def _assemble(plan: Any, records: dict[str, dict[str, Any]]) -> Any:
    """``plan`` with each task replaced by its record (without the executor's stamps)."""
    if isinstance(plan, Run):
        return {k: v for k, v in records[plan.key].items() if k not in ("execution", "git_commit")}
    if isinstance(plan, dict):
        return {k: _assemble(v, records) for k, v in plan.items()}
    return [_assemble(v, records) for v in plan]
