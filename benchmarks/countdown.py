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
  observation (``relations`` / ``lookahead``, env kwargs of ``rlvr/Countdown-v0``). A run *collapses* when
  its final rollout mean length is at the minimum answer (one number + EOS = 2 tokens) while its held-out
  greedy success is below the single-number floor (answer the number equal to the target).
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

At about 530 lines this module is longer than the rest: its five parts share the evaluator, the run
functions and the tables of one page (docs/countdown.md), read together.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    cli,
    command_line,
    machine_info,
    output_folder,
    write_results,
)
from benchmarks.core.executor import Run, run_all
from benchmarks.core.baselines import single_number_floor
from benchmarks.core.store import run_key
from benchmarks.core.common import seeds_argument
from benchmarks.core.stats import iqm_ci, ratio_ci

ENV_ID = "rlvr/Countdown-v0"
TASK = {"n_numbers": 3}
K = 16
THRESHOLD = 0.3  # held-out greedy success for the steps-to-threshold comparison
MIN_LENGTH = 2.0  # one number + EOS

#: name -> (preset, GRPOConfig overrides, env kwargs on top of TASK, note). Rows are cumulative.
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {
    "mlp preset, no masks": ("mlp", {"action_masks": False}, {}, "the starting point"),
    "+ masks": ("mlp", {}, {}, "grammar-constrained decoding"),
    "+ length term off": ("mlp", {"length_weight": 0.0}, {}, "k1.5 term paid short wrong answers"),
    "+ dyn. sampling, clip-higher, beta 0": ("countdown", {}, {}, "the countdown preset, bits obs"),
    "+ relations obs": ("countdown", {}, {"observation": "relations"}, "pair residuals (no search)"),
    "+ lookahead obs": ("countdown", {}, {"observation": "lookahead"}, "one-step search in the obs"),
}
#: the warm start's GRPO: the Countdown preset with the papers' KL weight, so the clone is an anchor
WARM_CONFIG = {"beta": 0.04}
BEST = "+ lookahead obs"


def _report(predict: Any, env: Any, prompts: list[Any], masked: bool) -> dict[str, float]:
    from agents.evaluation import success_report

    rep = success_report(predict, env, prompts=prompts, k=K, masked=masked)
    return {"greedy": rep.greedy, "sampled": rep.sampled, f"pass@{K}": rep.pass_at_k}


def _prompts(task: dict[str, Any], n: int) -> dict[str, list[Any]]:
    """The fixed evaluation prompts of each split (the same for every run of a task)."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401
    from agents.evaluation import evaluation_prompts

    env = gym.make(ENV_ID, **task)
    return {s: evaluation_prompts(env, s, n, seed=0) for s in ("train", "test")}


def grpo_plan(seed: int, budget: int, cfg: dict[str, Any], env_kwargs: dict[str, Any], preset: str,
              eval_prompts: int, eval_every: int, demos: int = 0, task: dict[str, Any] | None = None,
              part: str = "") -> Run:
    spec = {"seed": seed, "budget": budget, "cfg": cfg, "env_kwargs": env_kwargs, "preset": preset,
            "eval_prompts": eval_prompts, "eval_every": eval_every, "demos": demos,
            "task": TASK if task is None else task}
    return _run_of("benchmarks.countdown:grpo_run", spec, f"grpo_{part}")


def maskable_plan(seed: int, budget: int, env_kwargs: dict[str, Any], eval_prompts: int, eval_every: int,
                  demos: int = 0, part: str = "") -> Run:
    spec = {"seed": seed, "budget": budget, "env_kwargs": env_kwargs, "eval_prompts": eval_prompts,
            "eval_every": eval_every, "demos": demos}
    return _run_of("benchmarks.countdown:maskable_run", spec, f"maskable_ppo_{part}")


def _run_of(fn: str, spec: dict[str, Any], group: str) -> Run:
    return Run(fn, spec, run_key(group, spec), arm=group, label=f"{group} s{spec['seed']}")


def grpo_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One GRPO run: periodic held-out greedy success (for steps-to-threshold), final reports."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401
    from agents.bc import demonstrations, warm_start
    from agents.grpo import GRPO, GRPOConfig

    seed, budget, cfg, env_kwargs = spec["seed"], spec["budget"], spec["cfg"], spec["env_kwargs"]
    eval_every, demos, task = spec["eval_every"], spec["demos"], spec["task"]
    prompts = _prompts(task, spec["eval_prompts"])
    config = GRPOConfig.preset(spec["preset"], **cfg)
    kwargs = {**task, **env_kwargs}
    model = GRPO(ENV_ID, config, policy="mlp", seed=seed, env_kwargs=kwargs)
    env = gym.make(ENV_ID, **kwargs)
    out: dict[str, Any] = {"seed": seed, "config": config.to_dict(), "env_kwargs": kwargs}
    if demos:
        start = time.perf_counter()
        warm_start(model, demonstrations(env, demos, seed=seed), epochs=BC_EPOCHS)
        out["bc_seconds"] = time.perf_counter() - start
        out["start"] = {s: _report(_grpo_predict(model, seed), env, prompts[s], model.use_masks)
                        for s in ("train", "test")}
    curve: list[tuple[int, float]] = []
    next_eval = [eval_every]
    eval_time = [0.0]

    def callback(m: Any, metrics: dict[str, float]) -> bool:
        if m.num_timesteps >= next_eval[0]:  # the clock pauses: evaluation is not training time
            t = time.perf_counter()
            next_eval[0] += eval_every
            curve.append((int(m.num_timesteps), _greedy(m, env, prompts["test"][:200])))
            eval_time[0] += time.perf_counter() - t
        return True

    start = time.perf_counter()
    model.learn(budget, callback=callback)
    out["train_seconds"] = time.perf_counter() - start - eval_time[0]
    out["curve"] = curve
    out["final_len"] = float(model.last_metrics["rollout/ep_len_mean"])
    out["final"] = {s: _report(_grpo_predict(model, seed), env, prompts[s], model.use_masks)
                    for s in ("train", "test")}
    out["steps"] = int(model.num_timesteps)
    return out


BC_EPOCHS = 20


def _grpo_predict(model: Any, seed: int) -> Any:
    rng = np.random.default_rng(10_000 + seed)
    return lambda obs, masks, det: model.policy.predict(obs, det, rng, masks)


def _greedy(model: Any, env: Any, prompts: list[Any]) -> float:
    from agents.evaluation import answer_correct

    return float(answer_correct(_grpo_predict(model, 0), env, prompts, deterministic=True,
                                masked=model.use_masks).mean())


def maskable_run(spec: dict[str, Any]) -> dict[str, Any]:
    """sb3-contrib MaskablePPO (defaults; 8 env copies x n_steps 256 = the default 2,048-step rollout)."""
    import gymnasium as gym
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import set_random_seed

    import rlvr_env  # noqa: F401
    from agents.evaluation import answer_correct, sb3_predictor
    from benchmarks.core.baselines import make_training_env

    seed, budget, env_kwargs = spec["seed"], spec["budget"], spec["env_kwargs"]
    eval_every, demos = spec["eval_every"], spec["demos"]
    prompts = _prompts(TASK, spec["eval_prompts"])
    kwargs = {**TASK, **env_kwargs}
    env = gym.make(ENV_ID, **kwargs)
    train_env = make_training_env(ENV_ID, seed, n_envs=8, env_kwargs={**kwargs, "split": "train"})
    model = MaskablePPO("MlpPolicy", train_env, seed=seed, n_steps=256, device="cpu", verbose=0)
    out: dict[str, Any] = {"seed": seed, "env_kwargs": kwargs}
    if demos:
        from agents.bc import behaviour_clone, copy_actor_to_sb3, demonstrations
        from agents.policies.mlp import MLPPolicy

        actor = MLPPolicy(env.observation_space, int(env.action_space.n), 1e-3, seed=seed)
        behaviour_clone(actor, demonstrations(env, demos, seed=seed), epochs=BC_EPOCHS, seed=seed)
        copy_actor_to_sb3(actor, model)
        out["start"] = {s: _report(sb3_predictor(model), env, prompts[s], True) for s in ("train", "test")}
    curve: list[tuple[int, float]] = []
    eval_time = [0.0]

    class Eval(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                t = time.perf_counter()
                self.next += eval_every
                acc = answer_correct(sb3_predictor(model), env, prompts["test"][:200],
                                     deterministic=True, masked=True)
                curve.append((int(self.num_timesteps), float(acc.mean())))
                eval_time[0] += time.perf_counter() - t
            return True

    start = time.perf_counter()
    model.learn(budget, callback=Eval())
    out["train_seconds"] = time.perf_counter() - start - eval_time[0]
    out["curve"] = curve
    set_random_seed(10_000 + seed)
    out["final"] = {s: _report(sb3_predictor(model), env, prompts[s], True) for s in ("train", "test")}
    out["steps"] = int(model.num_timesteps)
    return out


def arithmetic_run(spec: dict[str, Any]) -> dict[str, Any]:
    """The Arithmetic preset ``policy`` for ``budget`` steps: sampled success (k=64) on every prompt."""
    import rlvr_env  # noqa: F401
    from agents.grpo import GRPO

    policy, seed, budget = spec["policy"], spec["seed"], spec["budget"]
    model = GRPO("rlvr/Arithmetic-v0", policy=policy, seed=seed)
    start = time.perf_counter()
    model.learn(budget)
    seconds = time.perf_counter() - start
    reps = [model.success(s, k=64, seed=seed) for s in ("train", "test")]
    per = np.concatenate([r.per_prompt_sampled for r in reps])
    return {"policy": policy, "seed": seed, "budget": budget, "seconds": seconds,
            "greedy": [r.greedy for r in reps], "sampled": [r.sampled for r in reps],
            "min_prompt_sampled": float(per.min())}


# -------------------------------------------------------------------------------------------------
# Tables
# -------------------------------------------------------------------------------------------------
def _steps_to(curve: list[tuple[int, float]], budget: int) -> float:
    for steps, value in curve:
        if value >= THRESHOLD:
            return float(steps)
    return float(budget)  # censored


def _ci(values: list[float]) -> str:
    return iqm_ci(values).fmt(2)


def ablation_table(runs: dict[str, list[dict[str, Any]]], floor: float) -> str:
    lines = [
        "| variant | what changed | held-out greedy | held-out sampled (mean@16) | held-out pass@16 "
        "| train greedy | collapsed | s/run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    # VARIANTS order (the stored JSON sorts its keys); rows no longer defined keep their stored order
    order = [n for n in VARIANTS if n in runs] + [n for n in runs if n not in VARIANTS]
    for name in order:
        rs = runs[name]
        note = VARIANTS[name][3] if name in VARIANTS else ""
        test = [r["final"]["test"] for r in rs]
        collapsed = sum(r["final_len"] <= MIN_LENGTH + 0.05 and r["final"]["test"]["greedy"] < floor
                        for r in rs)
        lines.append(
            f"| {name} | {note} | {_ci([t['greedy'] for t in test])} | {_ci([t['sampled'] for t in test])} "
            f"| {_ci([t[f'pass@{K}'] for t in test])} | {_ci([r['final']['train']['greedy'] for r in rs])} "
            f"| {collapsed}/{len(rs)} | {np.median([r['train_seconds'] for r in rs]):.0f} |"
        )
    return "\n".join(lines)


def versus_table(grpo: list[dict[str, Any]], ppo: list[dict[str, Any]], budget: int) -> str:
    g = [_steps_to(r["curve"], budget) for r in grpo]
    p = [_steps_to(r["curve"], budget) for r in ppo]
    lines = [
        f"| contender | seeds | steps to {THRESHOLD} held-out greedy (IQM, k) | reached | held-out greedy "
        f"at {budget // 1000}k | held-out sampled at {budget // 1000}k | s/run |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rs, steps in (("GRPO (countdown preset)", grpo, g), ("MaskablePPO (defaults)", ppo, p)):
        lines.append(
            f"| {name} | {len(rs)} | {iqm_ci(steps).fmt(0, 1000)} | "
            f"{sum(s < budget for s in steps)}/{len(rs)} "
            f"| {_ci([r['final']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['final']['test']['sampled'] for r in rs])} "
            f"| {np.median([r['train_seconds'] for r in rs]):.0f} |"
        )
    ratio = ratio_ci(g, p)
    lines.append("")
    lines.append(f"Steps-to-{THRESHOLD} ratio GRPO / MaskablePPO (IQM, censored runs count at the budget): "
                 f"{ratio.fmt(2)}; goal <= 0.5.")
    return "\n".join(lines)


def warm_table(grpo: list[dict[str, Any]], ppo: list[dict[str, Any]], demos: int, budget: int) -> str:
    lines = [
        f"| contender (from the clone of {demos} demonstrations) | seeds | held-out greedy at start "
        f"| held-out greedy after {budget // 1000}k | held-out sampled at start | held-out sampled after "
        f"| gain (greedy) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rs in (("GRPO (KL reference = clone, beta 0.04)", grpo), ("MaskablePPO (fresh critic)", ppo)):
        if not rs:
            continue
        gain = [r["final"]["test"]["greedy"] - r["start"]["test"]["greedy"] for r in rs]
        lines.append(
            f"| {name} | {len(rs)} | {_ci([r['start']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['final']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['start']['test']['sampled'] for r in rs])} "
            f"| {_ci([r['final']['test']['sampled'] for r in rs])} | {_ci(gain)} |"
        )
    return "\n".join(lines)


def arithmetic_table(runs: list[dict[str, Any]]) -> str:
    lines = ["| preset | seeds | budget | greedy train / test (min over seeds) | sampled train / test (mean) "
             "| worst prompt's sampled success (min over seeds) | seeds with every prompt >= 0.95 |",
             "|---|---|---|---|---|---|---|"]
    for policy in ("tabular", "mlp"):
        rs = [r for r in runs if r["policy"] == policy]
        if not rs:
            continue
        lines.append(
            f"| {policy} | {len(rs)} | {rs[0]['budget'] // 1000}k "
            f"| {min(r['greedy'][0] for r in rs):.2f} / {min(r['greedy'][1] for r in rs):.2f} "
            f"| {float(np.mean([r['sampled'][0] for r in rs])):.3f} / "
            f"{float(np.mean([r['sampled'][1] for r in rs])):.3f} "
            f"| {min(r['min_prompt_sampled'] for r in rs):.3f} "
            f"| {sum(r['min_prompt_sampled'] >= 0.95 for r in rs)}/{len(rs)} |"
        )
    return "\n".join(lines)


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
    floor = single_number_floor(gym.make(ENV_ID, **TASK), _prompts(TASK, args.eval_prompts)["test"])
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
        plan["arithmetic"] = [_run_of("benchmarks.countdown:arithmetic_run",
                                      {"policy": pol, "seed": s, "budget": budget}, f"arithmetic_{pol}")
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
        result["n4"] = {"runs": got["n4"], "budget": args.n4_budget,
                        "floor": single_number_floor(gym.make(ENV_ID, **task4), _prompts(task4, n)["test"])}
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


def render(result: dict[str, Any]) -> str:
    """The markdown tables of every part present in ``result``."""
    floor = result["single_number_floor_test"]
    cmds = result.get("commands", {})
    sections = [f"Countdown N=3 (`{ENV_ID}`, n_numbers=3), {result['eval_prompts']} fixed prompts per split; "
                f"IQM over seeds with 95% bootstrap intervals (settings chosen on seeds 0-1, reported seeds "
                f"are fresh). Single-number floor (held-out greedy of \"answer the number equal to the "
                f"target\"): {floor:.2f}."]
    if "ablation" in result:
        a = result["ablation"]
        sections.append(f"#### Ablation: GRPO from scratch, {a['budget'] // 1000}k env steps, seeds "
                        f"{a['seeds']} (`{cmds.get('ablation', '')}`)\n\n" + ablation_table(a["runs"], floor))
    if "maskable" in result:
        m = result["maskable"]
        sections.append(f"#### GRPO vs MaskablePPO from scratch, {m['budget'] // 1000}k env steps, same "
                        f"observation `{m['env_kwargs']}` (`{cmds.get('maskable', '')}`)\n\n"
                        + versus_table(m["grpo"], m["maskable_ppo"], m["budget"]))
    if "warm" in result:
        w = result["warm"]
        sections.append(f"#### Warm start: behaviour cloning on {w['demos']} train demonstrations "
                        f"({BC_EPOCHS} epochs), then {w['budget'] // 1000}k env steps "
                        f"(`{cmds.get('warm', '')}`)\n\n"
                        + warm_table(w["grpo"], w["maskable_ppo"], w["demos"], w["budget"]))
    if "n4" in result:
        n4 = result["n4"]
        rs = n4["runs"]
        sections.append(
            f"#### Countdown N=4 (`n_numbers=4`), GRPO countdown preset, lookahead observation, "
            f"{n4['budget'] // 1000}k env steps (`{cmds.get('n4', '')}`)\n\n"
            "| seeds | held-out greedy | held-out sampled (mean@16) | held-out pass@16 | train greedy "
            "| single-number floor | s/run |\n|---|---|---|---|---|---|---|\n"
            f"| {len(rs)} | {_ci([r['final']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['final']['test']['sampled'] for r in rs])} "
            f"| {_ci([r['final']['test'][f'pass@{K}'] for r in rs])} "
            f"| {_ci([r['final']['train']['greedy'] for r in rs])} | {n4['floor']:.2f} "
            f"| {np.median([r['train_seconds'] for r in rs]):.0f} |")
    if "arithmetic" in result:
        sections.append(f"#### Arithmetic presets: sampled success on every prompt (k=64) "
                        f"(`{cmds.get('arithmetic', '')}`)\n\n" + arithmetic_table(result["arithmetic"]))
    return "\n\n".join(sections)


if __name__ == "__main__":
    sys.exit(cli(main))
