"""The thinking study: does room to think (a trace, a calculator) help a small transformer on Countdown?

    python -m benchmarks.think [--seeds 10-12] [--sft 8000] [--epochs 6] [--budget 60000]
                               [--workers 2] [--update-results]

Every run is one cold start (:func:`agents.sft.cold_start`, the R1 recipe's settings except the budget:
``--sft`` train-split solutions x ``--epochs``, per-prompt minibatches of 256, Adam 1e-3) of the
transformer, evaluated on held-out prompts (greedy, sampled = mean@k, pass@k from ``--eval-k`` samples
on ``--eval-prompts`` fixed prompts; the sampled answers' trace statistics), then, for the RL arms, RL
for ``--budget`` env steps (policy tokens) and the same evaluation again, with the per-iteration
response length of right and wrong answers. Arms:

* **the ablation** (cold start only, equal optimizer steps: the same solutions, epochs and minibatches;
  the tokens each processed and its CPU seconds are reported): today's expression recipe on
  ``rlvr/Countdown-v0`` (``countdown``), and on ``rlvr/CountdownThink-v0`` each solver style
  (``expression``, ``path``, ``search``) without and with the calculator (``_calc``; the expression
  style writes no step, so the calculator changes nothing there and is not run), and search +
  calculator with the pool in the masks (``search_calc_pool``: each step's operands are limited to the
  numbers the steps before it leave, in the cold start's cross-entropy and in decoding alike);
* **the headline**: GRPO and the agent's PPO with a critic (``advantage="gae"``) from the expression base
  and from the search + calculator base, GRPO with the k1.5 length term (``length_weight`` 0.1) from
  the latter, and GRPO and PPO from the pool-masked base.

The runs are kept in ``benchmark-runs/think/runs`` (git-ignored) or, with ``--update-results``,
``benchmarks/results/think/runs`` (committed), so a repeated command trains nothing and regenerates the
tables (``study.md``, the RL table alone in ``study_headline.md``) and the length plot
(``study_length.png``) from them in seconds.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from benchmarks.core.common import (
    RESULTS_DIR, ROOT, add_executor_arguments, add_output_arguments, cli, command_line, limit_threads,
    machine_info, output_folder, positive_int, seeds_argument, write_atomically, write_results,
)
from benchmarks.core.executor import Run, run_all
from benchmarks.core.store import run_key

THINK, COUNTDOWN = "rlvr/CountdownThink-v0", "rlvr/Countdown-v0"
#: The ablation's bases: (arm, env id, env keywords).
BASES: dict[str, tuple[str, dict[str, Any]]] = {
    "countdown": (COUNTDOWN, {}),
    "expression": (THINK, {"solution_style": "expression"}),
    "path": (THINK, {"solution_style": "path"}),
    "path_calc": (THINK, {"solution_style": "path", "calculator": True}),
    "search": (THINK, {"solution_style": "search"}),
    "search_calc": (THINK, {"solution_style": "search", "calculator": True}),
    "search_calc_pool": (THINK, {"solution_style": "search", "calculator": True, "pool_masks": True}),
}
#: The headline's RL arms: (arm, base, agent config fields).
RL_ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "countdown+grpo": ("countdown", {}),
    "countdown+ppo": ("countdown", {"advantage": "gae"}),
    "search_calc+grpo": ("search_calc", {}),
    "search_calc+ppo": ("search_calc", {"advantage": "gae"}),
    "search_calc+grpo_k15": ("search_calc", {"length_weight": 0.1}),
    "search_calc_pool+grpo": ("search_calc_pool", {}),
    "search_calc_pool+ppo": ("search_calc_pool", {"advantage": "gae"}),
}


def _model(spec: dict[str, Any]) -> Any:
    import rlvr_env  # noqa: F401 - registers the envs
    from agents.grpo import GRPO, GRPOConfig

    config = GRPOConfig.preset("transformer", **spec.get("grpo", {}))
    return GRPO(spec["env_id"], config, policy="transformer", seed=spec["seed"],
                env_kwargs={"n_numbers": spec["n_numbers"], **spec["env_kwargs"], "observation": "tokens"})


def _scores(model: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Held-out greedy, sampled, pass@k, and the sampled answers' lengths and trace statistics."""
    from agents.grpo import VectorGroupRunner

    ev = spec["eval"]
    start = time.perf_counter()
    rep = model.success("test", k=ev["k"], n_prompts=ev["prompts"])
    out: dict[str, Any] = {"greedy": rep.greedy, "sampled": rep.sampled,
                           "pass_at": {str(j): v for j, v in rep.pass_at([1, 4, ev["k"]]).items()}}
    runner = VectorGroupRunner(spec["env_id"], {"n_numbers": spec["n_numbers"], **spec["env_kwargs"],
                                                "observation": "tokens", "split": "test"},
                               n_groups=ev["prompts"], group_size=4, use_masks=True)
    batch = runner.collect(model.policy, np.random.default_rng(0))
    runner.close()
    right = batch.correct == 1
    out["length_correct"] = float(batch.lengths[right].mean()) if right.any() else None
    out["length_wrong"] = float(batch.lengths[~right].mean()) if (~right).any() else None
    for name, values in batch.stats.items():
        out[name] = float(values.mean())
    if "steps" in batch.stats:  # the share of all written steps that pass, and of answers with no step
        steps = batch.stats["steps"]
        passing = (batch.stats["step_pass_rate"] * steps).sum()
        out["step_share"] = float(passing / steps.sum()) if steps.any() else None
        out["stepless"] = float((steps == 0).mean())
    if "consistent" in batch.stats and right.any():
        out["consistency"] = float(batch.stats["consistent"][right].mean())
    out["eval_seconds"] = time.perf_counter() - start
    return out


def think_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One arm on one seed: the cold start, its evaluation, and (an RL arm) RL then the evaluation again."""
    from agents.sft import cold_start

    threads = limit_threads(1, import_torch=True)
    model = _model(spec)
    sft = spec["sft"]
    load = os.getloadavg()[0]
    cpu = time.process_time()
    info = cold_start(model, sft["n"], epochs=sft["epochs"], batch_size=sft["batch_size"],
                      learning_rate=sft["learning_rate"], minibatch="prompts", warmup=0.0)
    record: dict[str, Any] = {"seed": spec["seed"], "sft_seconds": info["sft_seconds"],
                              "sft_cpu_seconds": time.process_time() - cpu, "sft_tokens": info["sft_tokens"],
                              "base": _scores(model, spec), "torch_threads": threads, "load_before": load,
                              "parameters": model.num_parameters()}
    if spec.get("budget"):
        model.policy.restart_from_current()  # the KL reference is the base
        curve: list[dict[str, float]] = []

        def keep(_model: Any, metrics: dict[str, float]) -> None:
            curve.append({k: float(v) for k, v in metrics.items()
                          if k.startswith("rollout/") or k == "time/total_timesteps"})

        cpu = time.process_time()
        start = time.perf_counter()
        model.learn(int(spec["budget"]), callback=keep)
        record.update(rl_seconds=time.perf_counter() - start, rl_cpu_seconds=time.process_time() - cpu,
                      rl_steps=int(model.num_timesteps), curve=curve, after=_scores(model, spec))
    return record


def runs(args: argparse.Namespace) -> list[Run]:
    out = []
    sft = {"n": args.sft, "epochs": args.epochs, "batch_size": 256, "learning_rate": 1e-3}
    ev = {"k": args.eval_k, "prompts": args.eval_prompts}
    arms: list[tuple[str, str, dict[str, Any], dict[str, Any], int]] = []
    for name in args.arms:
        if name in BASES:
            env_id, kw = BASES[name]
            arms.append((name, env_id, kw, {}, 0))
        else:
            base, grpo = RL_ARMS[name]
            env_id, kw = BASES[base]
            arms.append((name, env_id, kw, grpo, args.budget))
    for seed in args.seeds:
        for name, env_id, kw, grpo, budget in arms:
            spec = {"seed": seed, "env_id": env_id, "n_numbers": args.n_numbers, "env_kwargs": kw,
                    "sft": sft, "eval": ev, "grpo": grpo, "budget": budget}
            out.append(Run("benchmarks.think.__main__:think_run", spec, run_key(name, spec), arm=name,
                           label=f"{name} s{seed}"))
    return out


# -- the report ----------------------------------------------------------------------------------------
def _iqm(values: list[float]) -> float:
    v = np.sort(np.asarray(values, dtype=float))
    n = len(v)
    lo, hi = int(np.floor(n * 0.25)), int(np.ceil(n * 0.75))
    return float(v[lo:hi].mean()) if hi > lo else float(v.mean())


def _ci(values: list[float], seed: int = 0) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return float(v[0]), float(v[0])
    rng = np.random.default_rng(seed)
    boots = [_iqm(list(rng.choice(v, len(v)))) for _ in range(2000)]
    return float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def _cell(values: list[float | None], digits: int = 3) -> str:
    real = [float(x) for x in values if x is not None]
    if not real:
        return ""
    lo, hi = _ci(real)
    return f"{_iqm(real):.{digits}f} [{lo:.{digits - 1}f}, {hi:.{digits - 1}f}]"


def _mean(values: list[float | None], digits: int = 1) -> str:
    real = [float(x) for x in values if x is not None]
    return f"{np.mean(real):.{digits}f}" if real else ""


def _header(result: dict[str, Any]) -> list[str]:
    return [f"Each base: {result['sft']['n']:,} train-split solutions x {result['sft']['epochs']} epochs, "
            "per-prompt minibatches of 256, the transformer (3 x 128); IQM [95% bootstrap CI] over seeds "
            f"{result['seeds']}; held-out: {result['eval']['prompts']} test prompts, {result['eval']['k']} "
            "samples each (greedy, sampled = mean@k, pass@k); lengths (policy tokens) and trace statistics "
            "of 4 sampled answers per test prompt; step check = the mean over answers of the share of "
            "their steps that pass (an answer without a step counts 0); SFT tokens = policy tokens of one "
            "epoch; CPU s = the process's CPU seconds (one torch thread)."]


def ablation_table(result: dict[str, Any]) -> list[str]:
    rows, k = result["rows"], str(result["eval"]["k"])
    lines = ["| arm | held-out greedy | held-out sampled | pass@1 | pass@k | length right / wrong | steps | "
             "backs | step check | consistency | SFT tokens | SFT CPU s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in [a for a in BASES if a in rows]:
        recs = rows[arm]
        b = [r["base"] for r in recs]
        lines.append(
            f"| {arm} | {_cell([x['greedy'] for x in b])} | {_cell([x['sampled'] for x in b])} | "
            f"{_mean([x['pass_at']['1'] for x in b], 3)} | {_cell([x['pass_at'][k] for x in b])} | "
            f"{_mean([x['length_correct'] for x in b])} / {_mean([x['length_wrong'] for x in b])} | "
            f"{_mean([x.get('steps') for x in b])} | {_mean([x.get('backs') for x in b])} | "
            f"{_mean([x.get('step_pass_rate') for x in b], 3)} | {_mean([x.get('consistency') for x in b], 3)} | "
            f"{_mean([r['sft_tokens'] for r in recs], 0)} | {_mean([r['sft_cpu_seconds'] for r in recs], 0)} |")
    return lines


def rl_table(result: dict[str, Any]) -> list[str]:
    rows, k = result["rows"], str(result["eval"]["k"])
    lines = [f"| arm (RL, budget {result['budget']:,} env steps) | held-out greedy before -> after | "
             f"sampled before -> after | pass@{k} before -> after | length right before -> after | "
             "consistency after | env steps run / episodes | env steps/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in [a for a in RL_ARMS if a in rows]:
        recs = rows[arm]
        b, a = [r["base"] for r in recs], [r["after"] for r in recs]
        episodes = [r["rl_steps"] / max(float(np.mean([c.get("rollout/ep_len_mean", 1.0) for c in r["curve"]])),
                                        1e-9) if r["curve"] else 0.0 for r in recs]
        lines.append(
            f"| {arm} | {_cell([x['greedy'] for x in b])} -> {_cell([x['greedy'] for x in a])} | "
            f"{_cell([x['sampled'] for x in b])} -> {_cell([x['sampled'] for x in a])} | "
            f"{_cell([x['pass_at'][k] for x in b])} -> {_cell([x['pass_at'][k] for x in a])} | "
            f"{_mean([x['length_correct'] for x in b])} -> {_mean([x['length_correct'] for x in a])} | "
            f"{_mean([x.get('consistency') for x in a], 3)} | {_mean([r['rl_steps'] for r in recs], 0)} / "
            f"{_mean(episodes, 0)} | "
            f"{_mean([r['rl_steps'] / max(r['rl_seconds'], 1e-9) for r in recs], 0)} |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    lines = [f"### Room to think on Countdown-{result['n_numbers']}: cold starts at equal optimizer steps", "",
             *_header(result)]
    if any(a in result["rows"] for a in BASES):
        lines += ["", *ablation_table(result)]
    if any(a in result["rows"] for a in RL_ARMS):
        lines += ["", "RL from the bases, the same evaluation before and after (env steps = policy tokens; "
                  "episodes = env steps / mean episode length):", "", *rl_table(result)]
    if result.get("missing"):
        lines += ["", f"Missing (failed or not run): {', '.join(result['missing'])}."]
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}."]
    return "\n".join(lines) + "\n"


def headline(result: dict[str, Any], plot: str) -> str:
    """The RL table alone and the length plot: what README.md shows."""
    lines = [f"Countdown-{result['n_numbers']}, seeds {result['seeds']}, bases of {result['sft']['n']:,} "
             f"solutions x {result['sft']['epochs']} epochs; IQM [95% CI]; `python -m benchmarks.think`:", "",
             *rl_table(result), "", f"![response length and success over RL]({plot})"]
    return "\n".join(lines) + "\n"


def plot_lengths(rows: dict[str, list[dict[str, Any]]], path: Any) -> bool:
    """Response length of right answers over RL per arm (mean over seeds): the length curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in RL_ARMS if a in rows]
    if not arms:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for arm in arms:
        for ax, key in zip(axes, ("rollout/ep_len_correct_mean", "rollout/solve_rate")):
            curves = [[(c.get("time/total_timesteps", i), c.get(key, np.nan)) for i, c in enumerate(r["curve"])]
                      for r in rows[arm]]
            n = min(len(c) for c in curves)
            if n == 0:
                continue
            xs = np.mean([[p[0] for p in c[:n]] for c in curves], axis=0)
            ys = np.nanmean([[p[1] for p in c[:n]] for c in curves], axis=0)
            ax.plot(xs, ys, label=arm)
    axes[0].set(title="response length of right answers (policy tokens)", xlabel="env steps")
    axes[1].set(title="sampled success during RL (train prompts)", xlabel="env steps")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.think",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seeds", type=seeds_argument(), default=[10, 11, 12, 13, 14])
    parser.add_argument("--n-numbers", type=positive_int, default=3)
    parser.add_argument("--sft", type=positive_int, default=8000, help="cold-start solutions")
    parser.add_argument("--epochs", type=positive_int, default=6)
    parser.add_argument("--budget", type=positive_int, default=60_000, help="RL env steps of the RL arms")
    parser.add_argument("--eval-k", type=positive_int, default=16)
    parser.add_argument("--eval-prompts", type=positive_int, default=200)
    parser.add_argument("--table", default="study", help="the name of the table files (study.md, ...)")
    parser.add_argument("--arms", default=",".join([*BASES, *RL_ARMS]),
                        help=f"comma-separated, from {[*BASES, *RL_ARMS]}")
    add_output_arguments(parser, "think", RESULTS_DIR / "think")
    add_executor_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in args.arms if a not in BASES and a not in RL_ARMS]
    if unknown:
        parser.error(f"--arms: unknown {unknown}; choose from {[*BASES, *RL_ARMS]}")
    out = output_folder(args)
    task_list = runs(args)
    got = run_all(task_list, out, address=args.ray_address, workers=args.workers or 1,
                  progress=not args.quiet, desc="think", rerun=[r for r in args.rerun.split(",") if r],
                  log=print)
    rows: dict[str, list[dict[str, Any]]] = {}
    missing = []
    for run in task_list:
        rec = got.records.get(run.key)
        if rec is None:
            missing.append(run.label)
        else:
            rows.setdefault(run.arm, []).append(rec)
    result = {"command": command_line("benchmarks.think", argv), "machine": machine_info(),
              "seeds": ",".join(map(str, args.seeds)), "n_numbers": args.n_numbers,
              "sft": {"n": args.sft, "epochs": args.epochs}, "budget": args.budget,
              "eval": {"k": args.eval_k, "prompts": args.eval_prompts}, "missing": missing,
              "failures": got.failures, "rows": rows}
    dest = got.destination(out)
    write_results(dest, args.table, result, markdown(result), incomplete=got.incomplete())
    if plot_lengths(rows, dest / f"{args.table}_length.png"):
        rel = (dest / f"{args.table}_length.png").resolve()
        shown = rel.relative_to(ROOT) if rel.is_relative_to(ROOT) else rel
        if args.table == "study":  # the table README.md shows
            write_atomically(dest / f"{args.table}_headline.md", headline(result, str(shown)))
        print(f"length plot: {dest}/{args.table}_length.png")
    for failure in got.failures:
        print(f"FAILED: {failure}")
    return 1 if got.failures else 0


if __name__ == "__main__":
    raise SystemExit(cli(main))
