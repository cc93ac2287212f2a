"""Does the tabular preset keep a solved task when it trains on? (issue 17 item 10)

Trains ``GRPO("rlvr/Arithmetic-v0", policy="tabular")`` with the tabular preset (plus ``--set``
overrides) for ``--budget`` env steps per seed, scoring held-out greedy success
(:meth:`GRPO.evaluate`, all 10 test prompts) every ``--eval-every`` env steps. A run *reaches* the task
when a checkpoint scores >= 0.95 held-out; it *loses* it when, after reaching, a later checkpoint scores
below ``--floor`` (default 0.8) or the final one below 0.95. Once a target is solved its groups tie
(zero advantages), so only the KL pull to the reference acts on it: this measures whether that pull
undoes the task within a long budget.

Runs are seconds each (the tabular policy is NumPy), so they run one after another in this process,
one thread, not through the Ray pipeline. Results go to ``benchmark-runs/tabular_hold/<name>.json``
(git-ignored; ``--update-results``: benchmarks/results/tabular_hold/) and a summary line per config::

    python -m benchmarks.tabular_hold --seeds 0-9 --budget 300000             # the preset as shipped
    python -m benchmarks.tabular_hold --seeds 0-9 --budget 300000 --set '{"beta": 0.0}'
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from benchmarks.core.common import RESULTS_DIR, add_output_arguments, output_folder
from benchmarks.core.study import seeds_argument


def run_one(seed: int, budget: int, eval_every: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """One seed's held-out greedy curve: ``[(num_timesteps, success), ...]`` every ``eval_every`` steps."""
    from agents import GRPO, GRPOConfig

    model = GRPO("rlvr/Arithmetic-v0", GRPOConfig.preset("tabular", **overrides), policy="tabular",
                 seed=seed)
    curve: list[tuple[int, float]] = []
    next_eval = eval_every

    def watch(m: Any, metrics: dict[str, float]) -> None:
        nonlocal next_eval
        if m.num_timesteps >= next_eval:
            curve.append((int(m.num_timesteps), float(m.evaluate("test"))))
            next_eval += eval_every

    t0 = time.perf_counter()
    model.learn(budget, callback=watch)
    if not curve or curve[-1][0] != model.num_timesteps:
        curve.append((int(model.num_timesteps), float(model.evaluate("test"))))
    return {"seed": seed, "curve": curve, "seconds": time.perf_counter() - t0}


def judge(curve: list[tuple[int, float]], floor: float) -> dict[str, Any]:
    """Reached 0.95, first step at it, lost it (a later checkpoint < floor or the final < 0.95)."""
    scores = np.array([s for _, s in curve])
    hit = np.flatnonzero(scores >= 0.95)
    if not len(hit):
        return {"reached": False, "steps_to_95": None, "lost": False, "min_after": None,
                "final": float(scores[-1])}
    after = scores[hit[0]:]
    lost = bool(after.min() < floor or scores[-1] < 0.95)
    return {"reached": True, "steps_to_95": int(curve[hit[0]][0]), "lost": lost,
            "min_after": float(after.min()), "final": float(scores[-1])}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tabular_hold", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=seeds_argument(), default=list(range(10)),
                        help="seeds (0-9: the ones presets are chosen on; report on fresh ones, 100-109)")
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=4096)
    parser.add_argument("--floor", type=float, default=0.8)
    parser.add_argument("--set", default="{}", help="JSON dict of GRPOConfig overrides on the preset")
    parser.add_argument("--name", default=None, help="output file name (default: from --set and seeds)")
    add_output_arguments(parser, "tabular_hold", RESULTS_DIR / "tabular_hold")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        overrides = json.loads(args.set)
    except json.JSONDecodeError as err:
        parser.error(f"--set {args.set!r} is not JSON: {err}")
    if args.budget < 1 or args.eval_every < 1:
        parser.error(f"--budget {args.budget} and --eval-every {args.eval_every} must be positive")
    runs = []
    for seed in args.seeds:
        rec = run_one(seed, args.budget, args.eval_every, overrides)
        rec.update(judge(rec["curve"], args.floor))
        runs.append(rec)
        print(f"seed {seed}: reached {rec['reached']} at {rec['steps_to_95']}, lost {rec['lost']}, "
              f"min after {rec['min_after']}, final {rec['final']:.2f} ({rec['seconds']:.1f} s)", flush=True)
    reached = [r for r in runs if r["reached"]]
    steps = [r["steps_to_95"] for r in reached]
    summary = {
        "overrides": overrides, "seeds": args.seeds, "budget": args.budget, "eval_every": args.eval_every,
        "floor": args.floor, "reached": len(reached), "lost": sum(r["lost"] for r in runs),
        "median_steps_to_95": float(np.median(steps)) if steps else None,
        "final_mean": float(np.mean([r["final"] for r in runs])), "runs": runs,
    }
    name = args.name or (f"{'_'.join(f'{k}{v}' for k, v in sorted(overrides.items())) or 'preset'}"
                         f"__s{args.seeds[0]}-{args.seeds[-1]}__b{args.budget}")
    out = output_folder(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1))
    print(f"{overrides or 'preset'}: reached 95% {len(reached)}/{len(runs)}, lost after reaching "
          f"{summary['lost']}, median steps to 95% {summary['median_steps_to_95']}, final mean "
          f"{summary['final_mean']:.3f} -> {out / (name + '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
