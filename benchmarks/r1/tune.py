"""Tune the R1 recipe's GRPO stage on the choosing seeds, reusing each seed's cold-start base.

The base (the supervised cold start, :func:`agents.sft.cold_start`) is the costly part and does not
depend on GRPO's settings, so it is trained once per (seed, architecture, SFT settings) and its weights
are kept in ``benchmark-runs/r1/bases/`` (git-ignored); every GRPO setting then starts from exactly the
weights the CLI recipe (``python -m agents.grpo ... --sft N``) would give it. Each run writes
``benchmark-runs/r1/tune/<name>_s<seed>.json`` with the base's and the final held-out/train metrics
(the CLI's own evaluation, :func:`agents.grpo.__main__._report`)::

    python -m benchmarks.r1.tune --name lr1e-4 --seed 0 --steps 300000 --set learning_rate=1e-4 beta=0.01

``--summary`` tabulates every run file there (``tune.md`` and ``tune.json`` in ``benchmark-runs/r1_tune/``,
or ``benchmarks/results/r1/`` with ``--update-results``): per setting its overrides, the base's and the
final held-out and train scores, and GRPO's env steps/s; the setting with the best final held-out
sampled success is marked (the study's criterion)::

    python -m benchmarks.r1.tune --summary --update-results
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import rlvr_env  # noqa: F401
from agents.evaluation import split_scores
from agents.grpo import COLD_START, GRPO, GRPOConfig
from agents.sft import cold_start

from benchmarks.core.common import (LOCAL_OUT, RESULTS_DIR, add_output_arguments, command_line, machine_info,
                                    output_folder, write_json, write_results)
from benchmarks.core.store import digest

#: Never committed: tuning runs on the choosing seeds (the bases are a cache).
OUT = LOCAL_OUT / "r1_tune"
ENV = "rlvr/Countdown-v0"


def _value(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def run(args: argparse.Namespace) -> dict:
    overrides = dict(item.split("=", 1) for item in args.set)
    config = GRPOConfig.preset(args.preset, **{k: _value(v) for k, v in overrides.items()})
    env_kwargs = json.loads(args.env_kwargs)
    policy_kwargs = json.loads(args.policy_kwargs)
    model = GRPO(ENV, config, policy="transformer", seed=args.seed, env_kwargs=env_kwargs,
                 policy_kwargs=policy_kwargs)
    sft = {"n": args.sft, "epochs": args.sft_epochs, "lr": args.sft_lr, "batch_size": args.sft_batch_size,
           "minibatch": args.sft_minibatch, "warmup": args.sft_warmup}
    net = model.policy.net  # the resolved architecture and initialisation, defaults included
    key = {"env_kwargs": model.env_kwargs, "policy_kwargs": policy_kwargs, "sft": sft,
           "arch": {**net.arch, "init": net.init}, "seed": args.seed}
    base_path = OUT / "bases" / (digest(key, 16) + ".npz")
    eval_args = argparse.Namespace(eval_k=args.eval_k, eval_prompts=None)
    record: dict = {"name": args.name, "seed": args.seed, "sft": sft, "policy_kwargs": policy_kwargs,
                    "env_kwargs": model.env_kwargs, "config": model.config.to_dict(),
                    "threads": torch.get_num_threads()}
    if base_path.exists():
        with np.load(base_path, allow_pickle=False) as npz:
            model.policy.load_state({k: npz[k] for k in npz.files})
        record.update(json.loads(base_path.with_suffix(".json").read_text()))
    else:
        info = cold_start(model, args.sft, epochs=args.sft_epochs, batch_size=args.sft_batch_size,
                          learning_rate=args.sft_lr, minibatch=args.sft_minibatch, warmup=args.sft_warmup)
        info.update(split_scores(model, eval_args.eval_k, eval_args.eval_prompts, "base_"))
        base_path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(base_path, **model.policy.state())  # type: ignore[arg-type]
        base_path.with_suffix(".json").write_text(json.dumps(info))
        record.update(info)
    if args.steps:
        start = time.perf_counter()
        model.learn(args.steps)
        record.update({"num_timesteps": model.num_timesteps, "grpo_seconds": time.perf_counter() - start,
                       "steps_per_second": model.num_timesteps / max(model.train_seconds, 1e-9)})
        record.update(split_scores(model, eval_args.eval_k, eval_args.eval_prompts))
    return record


def summarize(folder: Path) -> dict[str, Any]:
    """Every run file of ``folder`` as a table's rows (sorted by seed, then name), the best by final
    held-out sampled success per seed marked ``chosen``."""
    rows = []
    for path in sorted(folder.glob("*.json")):
        r = json.loads(path.read_text())
        if "test_sampled" not in r:
            continue  # a base-only run
        overrides = {k: v for k, v in r["config"].items()
                     if GRPOConfig.preset("transformer").to_dict().get(k) != v}
        kept = ("base_test_greedy", "base_test_sampled", "test_greedy", "test_sampled", "test_pass_at_k",
                "train_greedy", "train_sampled", "num_timesteps", "steps_per_second", "eval_k")
        rows.append({"name": r["name"], "seed": r["seed"], "overrides": overrides, **{k: r[k] for k in kept}})
    rows.sort(key=lambda row: (row["seed"], row["name"]))
    for seed in {row["seed"] for row in rows}:
        best = max((row for row in rows if row["seed"] == seed), key=lambda row: row["test_sampled"])
        best["chosen"] = True
    return {"rows": rows}


def markdown(result: dict[str, Any]) -> str:
    k = result["rows"][0]["eval_k"] if result["rows"] else "k"
    lines = ["### Tuning GRPO's transformer preset on the choosing seeds, from each seed's base", "",
             "One run per setting from the recipe's base, for the env steps shown; 256 prompts per split, "
             f"{k} samples each (sampled = mean@{k}); overrides are of the `transformer` preset as it is now "
             "(a row with none is the preset itself); the best final held-out sampled success per seed in "
             "bold (the study's criterion).",
             "", "| setting | seed | overrides of the preset | env steps | base held-out greedy / sampled | "
             f"held-out greedy | held-out sampled | held-out pass@{k} | train greedy / sampled | "
             "env steps/s |",
             "|---|---:|---|---:|---|---:|---:|---:|---|---:|"]
    for r in result["rows"]:
        mark = "**" if r.get("chosen") else ""
        over = ", ".join(f"{key}={value}" for key, value in sorted(r["overrides"].items())) or "none"
        lines.append(f"| {mark}{r['name']}{mark} | {r['seed']} | {over} | {r['num_timesteps']:,} | "
                     f"{r['base_test_greedy']:.3f} / {r['base_test_sampled']:.3f} | {r['test_greedy']:.3f} | "
                     f"{mark}{r['test_sampled']:.3f}{mark} | {r['test_pass_at_k']:.3f} | "
                     f"{r['train_greedy']:.3f} / {r['train_sampled']:.3f} | {r['steps_per_second']:,.0f} |")
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}.", ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.r1.tune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", help="the setting's name (its run file's); required unless --summary")
    parser.add_argument("--summary", action="store_true",
                        help="tabulate the run files instead of training (tune.md / tune.json)")
    parser.add_argument("--seed", type=int, default=0, help="a choosing seed (0-9); never a reported one")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--preset", default="transformer")
    parser.add_argument("--set", nargs="*", default=[], help="GRPOConfig overrides, field=value")
    parser.add_argument("--env-kwargs", default='{"n_numbers": 3}')
    parser.add_argument("--policy-kwargs", default="{}")
    parser.add_argument("--sft", type=int, default=100_000)
    parser.add_argument("--sft-epochs", type=int, default=COLD_START["epochs"])
    parser.add_argument("--sft-lr", type=float, default=COLD_START["learning_rate"])
    parser.add_argument("--sft-batch-size", type=int, default=COLD_START["batch_size"])
    parser.add_argument("--sft-minibatch", choices=("prompts", "answers"), default=COLD_START["minibatch"])
    parser.add_argument("--sft-warmup", type=float, default=COLD_START["warmup"])
    parser.add_argument("--eval-k", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    add_output_arguments(parser, "r1_tune", RESULTS_DIR / "r1")  # where --summary writes
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.summary:
        out = output_folder(args)
        result = {"command": command_line("benchmarks.r1.tune", argv), "machine": machine_info(),
                  **summarize(OUT / "tune")}
        if not result["rows"]:
            parser.error(f"no tuning run files in {OUT / 'tune'}/")
        write_results(out, "tune", result, markdown(result))
        return
    if not args.name:
        parser.error("--name is required (or --summary)")
    if not 0 <= args.seed <= 9:
        parser.error(f"--seed={args.seed}: tuning uses the choosing seeds 0-9 only (reported seeds are 10+)")
    torch.set_num_threads(args.threads)
    record = run(args)
    path = OUT / "tune" / f"{args.name}_s{args.seed}.json"
    write_json(path, record)
    keys = ("base_test_greedy", "base_test_sampled", "base_test_pass_at_k", "test_greedy", "test_sampled",
            "test_pass_at_k", "train_greedy", "sft_seconds", "steps_per_second")
    print(path, {k: round(record[k], 3) for k in keys if k in record})


if __name__ == "__main__":
    main()
