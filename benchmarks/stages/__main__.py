"""The R1 recipe's four stages: one seed in this process, or a study over seeds on Ray.

    python -m benchmarks.stages --seed 0                       # one seed, a table after each stage
    python -m benchmarks.stages [--seeds 10-14] [--workers 2] [--update-results]   # the study

:mod:`benchmarks.stages` has the stages and the run function. The study's runs are kept in
``benchmark-runs/stages/runs`` (git-ignored) or, with ``--update-results``, ``benchmarks/results/stages/runs``
(committed), so a repeated command trains nothing and regenerates ``study.md`` and ``study.png`` from them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from benchmarks.core.common import (
    RESULTS_DIR, add_executor_arguments, add_output_arguments, cli, command_line, machine_info,
    output_folder, positive_int, seeds_argument, write_results,
)
from benchmarks.core.executor import Run, run_all
from benchmarks.core.store import run_key
from benchmarks.stages.run import DEFAULT_SPEC, SIDE_ARMS, STAGES, stage_table, stages_run

#: The paired differences the lab reads (a - b), with the claimed sign and margin; ``other`` rows are read
#: on every task but the reasoning one.
CLAIMS: tuple[tuple[str, str, str, str, int, float, str], ...] = (
    ("RS-FT vs GRPO from the same base at equal sampled answers (RS-FT - GRPO)",
     "side:rsft_from_base", "stages:reasoning_rl", "reasoning", +1, 0.02, "RS-FT within 0.02 of GRPO or better"),
    ("RL on the reasoning task alone lowers the other tasks (stage 2 - stage 1)",
     "stages:reasoning_rl", "stages:cold_start", "other", -1, 0.0, "it lowers them"),
    ("Re-mixing in stage 3 keeps the other tasks within 0.02 of the cold start (stage 3 - stage 1)",
     "stages:rejection_sft", "stages:cold_start", "other", +1, 0.02, "within 0.02"),
    ("Stage 3 without the re-mix, for contrast (- stage 1)",
     "side:rejection_sft_noremix", "stages:cold_start", "other", +1, 0.02, "within 0.02"),
    ("Stage 3 reaches stage 2 on the reasoning task (stage 3 - stage 2)",
     "stages:rejection_sft", "stages:reasoning_rl", "reasoning", +1, 0.0, "stage 3 >= stage 2"),
    ("The second RL pass keeps the reasoning gain (stage 4 - stage 2)",
     "stages:mix_rl", "stages:reasoning_rl", "reasoning", +1, 0.02, "no worse than by 0.02"),
    ("... while the other tasks recover or improve (stage 4 - stage 2)",
     "stages:mix_rl", "stages:reasoning_rl", "other", +1, 0.0, "they recover"),
)


def _spec(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    spec = json.loads(json.dumps(DEFAULT_SPEC))
    spec.update(seed=seed, env_id=args.env, env_kwargs=json.loads(args.env_kwargs), reasoning=args.reasoning)
    spec["sft"].update(n=args.sft, epochs=args.epochs)
    spec["rl"]["budget"] = args.budget
    spec["mix_rl"]["budget"] = args.mix_budget
    spec["rejection"].update(n_prompts=args.rs_prompts, k=args.rs_k, cap=args.rs_cap, remix=args.remix,
                             epochs=args.rs_epochs)
    spec["eval"].update(k=args.eval_k, prompts=args.eval_prompts)
    return spec


def _values(records: list[dict[str, Any]], where: str, task: str, metric: str = "greedy",
            split: str = "eval") -> list[float]:
    kind, name = where.split(":")
    return [float(r[kind][name][split][task][metric]) for r in records]


def study_tables(records: list[dict[str, Any]], k: int, reasoning: str) -> list[str]:
    """The study's tables: IQM [95% CI] per stage and task; each stage's paired gain over the one before;
    the lab's claims with their verdicts."""
    from benchmarks.core.stats import ci, paired, verdict

    tasks = records[0]["tasks"]
    lines = ["| stage | " + " | ".join(f"{t} held-out greedy" for t in tasks)
             + f" | {reasoning} sampled | {reasoning} pass@{k} | answers sampled | CPU s |",
             "|---|" + "---:|" * (len(tasks) + 4)]
    rows = [("stages", s) for s in STAGES] + [("side", s) for s in SIDE_ARMS]
    for kind, name in rows:
        where = f"{kind}:{name}"
        cells = [ci(_values(records, where, t)).fmt(3) for t in tasks]
        costs = [r[kind][name]["cost"] for r in records]
        lines.append(f"| {name if kind == 'stages' else f'({name})'} | " + " | ".join(cells)
                     + f" | {ci(_values(records, where, reasoning, 'sampled')).fmt(3)}"
                     + f" | {ci([r[kind][name]['eval'][reasoning]['pass_at'][str(k)] for r in records]).fmt(3)}"
                     + f" | {np.mean([c['answers'] for c in costs]):,.0f} | {np.mean([c['cpu_seconds'] for c in costs]):.0f} |")
    lines += ["", "Train-split greedy (the skills as trained; a held-out split can ask another question, e.g. "
              "Digits' longer operands):", "",
              "| stage | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for kind, name in rows:
        cells = [ci(_values(records, f"{kind}:{name}", t, split="eval_train")).fmt(3) for t in tasks]
        lines.append(f"| {name if kind == 'stages' else f'({name})'} | " + " | ".join(cells) + " |")
    lines += ["", "Each stage's paired gain over the stage before (held-out greedy, IQM [95% CI] of per-seed "
              "differences):", "",
              "| stage - previous | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for before, after in zip(STAGES, STAGES[1:]):
        cells = [paired(_values(records, f"stages:{after}", t), _values(records, f"stages:{before}", t)).fmt(3)
                 for t in tasks]
        lines.append(f"| {after} - {before} | " + " | ".join(cells) + " |")
    lines += ["", "The lab's claims (held-out greedy, paired by seed; verdict \"agree\" when the interval "
              "lies on the claimed side of -margin):", "",
              "| claim | task | difference | claimed | verdict |", "|---|---|---:|---|---|"]
    for text, a, b, which, sign, margin, claimed in CLAIMS:
        for task in ([reasoning] if which == "reasoning" else [t for t in tasks if t != reasoning]):
            for split, label in (("eval", "held-out"), ("eval_train", "train")):
                if split == "eval_train" and which == "reasoning":
                    continue
                diff = paired(_values(records, a, task, split=split), _values(records, b, task, split=split))
                floor = max(max(_values(records, a, task, split=split)), max(_values(records, b, task, split=split)))
                said = "no signal" if floor <= 0.0 else verdict(diff, sign, margin)
                lines.append(f"| {text} | {task} ({label}) | {diff.fmt(3)} | {claimed} | {said} |")
    return lines


def fraction_line(records: list[dict[str, Any]]) -> str:
    """Stage 3's sampled answers as a fraction of stage 2's, and what one seed's run took."""
    f = [r["stages"]["rejection_sft"]["cost"]["answers"] / max(r["stages"]["reasoning_rl"]["cost"]["answers"], 1)
         for r in records]
    line = f"Stage 3 sampled {np.mean(f):.2f}x the answers stage 2's GRPO sampled (mean over seeds)."
    if all("seconds" in r for r in records):
        line += (f" One seed's whole run (four stages, two side arms, every evaluation; one torch thread): "
                 f"{np.median([r['seconds'] for r in records]) / 60:.1f} min wall (median; max "
                 f"{max(r['seconds'] for r in records) / 60:.1f}), {np.median([r['cpu_seconds'] for r in records]) / 60:.1f} "
                 "CPU min.")
    return line


def plot(records: list[dict[str, Any]], tasks: list[str], path: Any) -> None:
    """Greedy success per task across the four stages: held-out (mean over seeds, a faint line per seed)
    and train-split (dashed: where a held-out split asks another question, retention shows there)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks), 3.2), sharey=True)
    for ax, task in zip(np.atleast_1d(axes), tasks):
        ys = np.array([[r["stages"][s]["eval"][task]["greedy"] for s in STAGES] for r in records])
        for row in ys:
            ax.plot(range(len(STAGES)), row, color="0.8", lw=0.8)
        ax.plot(range(len(STAGES)), ys.mean(axis=0), marker="o", label="held-out")
        train = np.array([[r["stages"][s]["eval_train"][task]["greedy"] for s in STAGES] for r in records])
        ax.plot(range(len(STAGES)), train.mean(axis=0), marker="s", ls="--", label="train split")
        ax.set(title=task, xticks=range(len(STAGES)), ylim=(0, 1))
        ax.set_xticklabels([s.replace("_", "\n") for s in STAGES], fontsize=7)
    np.atleast_1d(axes)[0].set_ylabel("greedy success")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    d = DEFAULT_SPEC
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stages", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="one seed in this process, a table per stage")
    parser.add_argument("--seeds", type=seeds_argument(), default=[10, 11, 12, 13, 14])
    parser.add_argument("--env", default=d["env_id"])
    parser.add_argument("--env-kwargs", default="{}", help="JSON keywords of the mix env")
    parser.add_argument("--reasoning", default=d["reasoning"], help="the mix's reasoning task")
    parser.add_argument("--sft", type=positive_int, default=d["sft"]["n"], help="cold-start solutions")
    parser.add_argument("--epochs", type=positive_int, default=d["sft"]["epochs"])
    parser.add_argument("--budget", type=positive_int, default=d["rl"]["budget"], help="stage 2's env steps")
    parser.add_argument("--mix-budget", type=positive_int, default=d["mix_rl"]["budget"], help="stage 4's env steps")
    parser.add_argument("--rs-prompts", type=positive_int, default=d["rejection"]["n_prompts"])
    parser.add_argument("--rs-k", type=positive_int, default=d["rejection"]["k"])
    parser.add_argument("--rs-cap", type=positive_int, default=d["rejection"]["cap"])
    parser.add_argument("--rs-epochs", type=positive_int, default=d["rejection"]["epochs"])
    parser.add_argument("--remix", type=float, default=d["rejection"]["remix"],
                        help="re-mixed solutions of the other tasks per kept answer")
    parser.add_argument("--eval-k", type=positive_int, default=d["eval"]["k"])
    parser.add_argument("--eval-prompts", type=positive_int, default=d["eval"]["prompts"])
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads of a run")
    add_output_arguments(parser, "stages", RESULTS_DIR / "stages")
    add_executor_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    k = args.eval_k
    if args.seed is not None:  # one seed, here, a table after each stage
        spec = {**_spec(args, args.seed), "threads": args.threads}

        def show(stage: str, record: dict[str, Any]) -> None:
            print(f"\nafter {stage}:\n{stage_table(record, k)}", flush=True)

        stages_run(spec, report=show)
        return 0
    out = output_folder(args)
    runs = [Run("benchmarks.stages:stages_run", {**_spec(args, s), "threads": args.threads},
                run_key("stages", _spec(args, s)), arm="stages", label=f"stages s{s}") for s in args.seeds]
    got = run_all(runs, out, address=args.ray_address, workers=args.workers or 1, progress=not args.quiet,
                  desc="stages", rerun=[r for r in args.rerun.split(",") if r], log=print)
    records = [got.records[r.key] for r in runs if r.key in got.records]
    missing = [r.label for r in runs if r.key not in got.records]
    dest = got.destination(out)
    lines = [f"### The R1 recipe's four stages on {args.env} (reasoning task: {args.reasoning})", ""]
    if records:
        lines += [f"Seeds {','.join(map(str, args.seeds))}; IQM [95% bootstrap CI] over seeds; {args.eval_prompts} "
                  f"held-out prompts per task, {k} samples each. Stage 1: {args.sft:,} solutions x {args.epochs} "
                  f"epochs; stage 2: GRPO, {args.budget:,} env steps on the reasoning task; stage 3: {args.rs_k} "
                  f"answers on {args.rs_prompts:,} reasoning prompts, at most {args.rs_cap} kept per prompt, "
                  f"{args.rs_epochs} epochs, re-mixed {args.remix:g} other-task solutions per kept answer; "
                  f"stage 4: GRPO, {args.mix_budget:,} env steps on the mix. Side arms in parentheses.", "",
                  *study_tables(records, k, args.reasoning), "", fraction_line(records), "",
                  "The plot of greedy success per task across the stages (held-out and train split) is `study.png` beside this table."]
        plot(records, records[0]["tasks"], dest / "study.png")
    if missing:
        lines += ["", f"Missing (failed or not run): {', '.join(missing)}."]
    lines += ["", f"Command: `{command_line('benchmarks.stages', argv)}`. Machine: {machine_info()}."]
    result = {"command": command_line("benchmarks.stages", argv), "seeds": args.seeds, "missing": missing,
              "failures": got.failures, "records": records}
    write_results(dest, "study", result, "\n".join(lines) + "\n", incomplete=got.incomplete())
    for failure in got.failures:
        print(f"FAILED: {failure}")
    return 1 if got.failures else 0


if __name__ == "__main__":
    raise SystemExit(cli(main))
