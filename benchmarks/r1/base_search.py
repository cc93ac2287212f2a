"""How the R1 recipe's base was chosen: a small grid of supervised cold starts on the choosing seeds.

    python -m benchmarks.r1.base_search [--seeds 0-2] [--grid 2layers,gpt2:0,...] [--workers 1]
                                        [--table base_search] [--update-results]

Each cell is one cold start (:func:`agents.sft.cold_start`) of the ``transformer`` policy on
``rlvr/Countdown-v0`` (three numbers, ``observation="tokens"``, grammar masks), evaluated alone by the
R1 study's scores (:meth:`agents.grpo.agent.GRPO.success`: greedy, sampled = mean@k and unbiased pass@k
from ``--eval-k`` samples on ``--eval-prompts`` fixed prompts per split), with its SFT seconds and torch
threads. A cell varies one lever of a starting point (:data:`START`, :data:`GRID`): the
initialisation, the network's size, the data budget and epochs, the minibatch scheme; the last cells
combine the levers that helped (:data:`CHOSEN` became the recipe). ``--grid`` defaults to the cells
and seeds of the committed table (:data:`DEFAULT_GRID`). Seeds 0-2 only choose; the study
reports 10-14 (``benchmarks.r1``), so this script refuses seeds >= 10.

Every run is one executor task (:mod:`benchmarks.core.executor`, one run at a time by default: the
timings are the point); run files are kept in ``benchmark-runs/r1_base/runs`` (git-ignored), so a
repeated command reuses them. The table goes to ``benchmark-runs/r1_base/`` unless ``--update-results``
(``benchmarks/results/r1/base_search.md`` and ``.json``; ``--table`` names another pair, for a
grid of further levers beside the committed one).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import Any

import numpy as np

from benchmarks.core.common import (
    LOCAL_OUT,
    RESULTS_DIR,
    add_executor_arguments,
    add_output_arguments,
    command_line,
    limit_threads,
    machine_info,
    output_folder,
    positive_int,
    write_results,
)
from benchmarks.core.executor import Run, run_all
from benchmarks.core.store import run_key
from benchmarks.core.common import seeds_argument
from benchmarks.core.bases import DEFAULT_ENV_KWARGS, ENV_ID, KS

#: The run files: a git-ignored cache (the committed output is the table).
CACHE = LOCAL_OUT / "r1_base"
#: The starting point every cell changes (the previous recipe's cold start with PyTorch's init); a cell
#: overrides some of it (``policy`` = policy_kwargs, ``sft`` = :func:`agents.sft.cold_start`'s
#: arguments, ``threads`` = torch threads).
START: dict[str, Any] = {
    "policy": {"n_layers": 2, "d_model": 128, "init": "torch"},
    "sft": {"n": 100_000, "epochs": 8, "batch_size": 256, "learning_rate": 1e-3, "minibatch": "prompts",
            "warmup": 0.0},
    "threads": 1,
}
#: The cells (name -> overrides of :data:`START`): one lever each, then the chosen combination.
GRID: dict[str, dict[str, Any]] = {
    "2layers": {},
    "gpt2": {"policy": {"init": "gpt2"}},
    "epochs16": {"sft": {"epochs": 16}},
    "3layers": {"policy": {"n_layers": 3}},
    "200k_x4": {"sft": {"n": 200_000, "epochs": 4}},
    "shuffled": {"sft": {"minibatch": "answers"}},
    "3layers_epochs12": {"policy": {"n_layers": 3}, "sft": {"epochs": 12}},
    "4layers": {"policy": {"n_layers": 4}},
    "3layers_epochs12_2threads": {"policy": {"n_layers": 3}, "sft": {"epochs": 12}, "threads": 2},
    "3layers_epochs12_whole": {"policy": {"n_layers": 3}, "sft": {"epochs": 12},
                               "env": {"number_tokens": "whole"}},
    # the cross-entropy over every token instead of under the grammar masks; decoded with the masks
    "3layers_epochs12_fit_unmasked": {"policy": {"n_layers": 3}, "sft": {"epochs": 12, "masked": False}},
    # the chosen cell's gradient steps spread over twice the solutions (each seen 6 times, not 12)
    "3layers_200k_x6": {"policy": {"n_layers": 3}, "sft": {"n": 200_000, "epochs": 6}},
}
#: The committed table's cells and seeds: the levers on seed 0, the promising ones on seeds 0-2. Not in
#: it: "shuffled" (its fit costs ~3.8x the per-prompt one, over the 5-minute budget), "200k_x4" and the
#: chosen cell timed on 2 threads, "3layers_epochs12_2threads" (out of time on a shared machine).
DEFAULT_GRID = "2layers,gpt2:0,epochs16:0,4layers:0,3layers,3layers_epochs12"

#: The cell that became the recipe (agents.grpo.config.COLD_START, the transformer's DEFAULT_ARCH).
CHOSEN = "3layers_epochs12"


def _merge(overrides: dict[str, Any]) -> dict[str, Any]:
    merged = {k: ({**START[k], **overrides.get(k, {})} if isinstance(START[k], dict)
                  else overrides.get(k, START[k])) for k in START}
    if "env" in overrides:  # env kwargs besides DEFAULT_ENV_KWARGS; only a cell that sets some has the key
        merged["env"] = dict(overrides["env"])
    return merged


def base_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """One cold start on ``spec["seed"]`` with ``spec``'s settings, evaluated alone (no weights kept)."""
    threads = limit_threads(int(spec["threads"]), import_torch=True)
    import rlvr_env  # noqa: F401 - registers the envs
    from agents.grpo import GRPO, GRPOConfig
    from agents.sft import cold_start

    config = GRPOConfig.preset("transformer")
    model = GRPO(ENV_ID, config, policy="transformer", seed=spec["seed"],
                 env_kwargs={**DEFAULT_ENV_KWARGS, **spec.get("env", {}), "observation": "tokens"},
                 policy_kwargs=spec["policy"])
    load = os.getloadavg()[0]
    cpu = time.process_time()
    info = cold_start(model, **spec["sft"])
    cpu = time.process_time() - cpu  # every thread of this process: less sensitive to a shared machine
    ev = spec["eval"]
    scores: dict[str, Any] = {}
    start = time.perf_counter()
    for split in ("train", "test"):
        rep = model.success(split, k=ev["k"], n_prompts=ev["prompts"])
        pass_at = rep.pass_at([j for j in KS if j <= ev["k"]])
        scores[split] = {"greedy": rep.greedy, "sampled": rep.sampled,
                         "pass_at": {str(j): v for j, v in pass_at.items()}}
    return {"seed": spec["seed"], "sft_seconds": info["sft_seconds"], "sft_cpu_seconds": cpu,
            "sft_losses": info["sft_losses"],
            "sft_tokens": info["sft_tokens"], "eval": scores,
            "eval_seconds": time.perf_counter() - start,
            "parameters": model.num_parameters(), "torch_threads": threads, "load_before": load,
            "load_after": os.getloadavg()[0]}


def tasks(args: argparse.Namespace) -> list[Run]:
    out = []
    for name, seeds in args.grid:
        for seed in seeds:
            spec = {"seed": seed, **_merge(GRID[name]),
                    "eval": {"k": args.eval_k, "prompts": args.eval_prompts}}
            out.append(Run("benchmarks.r1.base_search:base_cell", spec, run_key(name, spec), arm=name,
                           label=f"{name} s{seed}"))
    return out


def _describe(spec: dict[str, Any]) -> str:
    p, s = spec["policy"], spec["sft"]
    kind = "per-prompt" if s["minibatch"] == "prompts" else "shuffled"
    env = "".join(f", {k} {v}" for k, v in spec.get("env", {}).items())
    fit = "" if s.get("masked", True) else ", cross-entropy over every token (decoded with the masks)"
    return (f"{p['n_layers']} x {p['d_model']}, init {p['init']}; {s['n']:,} x {s['epochs']} epochs, "
            f"{kind} minibatches of {s['batch_size']}, lr {s['learning_rate']:g}{env}{fit}")


def summarize(task_list: list[Run], records: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for task in task_list:
        rec = records.get(task.key)
        if rec is None:
            continue
        row = rows.setdefault(task.arm, {"name": task.arm, "settings": _describe(dict(task.spec)),
                                         "threads": task.spec["threads"], "seeds": [], "runs": []})
        row["seeds"].append(rec["seed"])
        keep = ("seed", "sft_seconds", "sft_cpu_seconds", "eval", "parameters", "torch_threads",
                "load_before", "load_after", "sft_losses")
        row["runs"].append({k: rec[k] for k in keep})
    for row in rows.values():
        runs = row["runs"]
        row["parameters"] = runs[0]["parameters"]
        for split in ("test", "train"):
            for metric in ("greedy", "sampled"):
                row[f"{split}_{metric}"] = [r["eval"][split][metric] for r in runs]
            last = max(runs[0]["eval"][split]["pass_at"], key=int)
            row[f"{split}_pass_at_k"] = [r["eval"][split]["pass_at"][last] for r in runs]
            row["k"] = int(last)
        row["sft_seconds"] = [r["sft_seconds"] for r in runs]
        row["sft_cpu_seconds"] = [r["sft_cpu_seconds"] for r in runs]
        row["load"] = [r["load_before"] for r in runs]
    return list(rows.values())


def _cell(values: list[float], digits: int = 3) -> str:
    per_seed = " / ".join(f"{v:.{digits}f}" for v in values)
    return f"**{np.mean(values):.{digits}f}** ({per_seed})" if len(values) > 1 else per_seed


def markdown(result: dict[str, Any]) -> str:
    rows = result["rows"]
    k = rows[0]["k"] if rows else result["eval"]["k"]
    lines = [
        "### Choosing the R1 base: cold starts of the transformer on Countdown-3 (seeds "
        f"{result['seeds']}, never reported)",
        "",
        f"Mean over seeds (per seed in brackets); {result['eval']['prompts']} fixed prompts per split, "
        f"{k} samples each (sampled = mean@{k}, pass@{k} unbiased); SFT seconds = the cold start alone "
        "(data + fit) in wall-clock seconds and in CPU seconds of the process (all its threads; less "
        "sensitive to other work on a shared machine), with the torch threads shown; the 1-minute load "
        "average before each run in the last column.",
        "",
        f"| cell | settings | parameters | held-out greedy | held-out sampled | held-out pass@{k} "
        f"| train greedy | train sampled | train pass@{k} | SFT seconds | SFT CPU seconds | threads | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name'] + (' (chosen)' if r['name'] == CHOSEN else '')} | {r['settings']} | "
            f"{r['parameters']:,} | {_cell(r['test_greedy'])} | "
            f"{_cell(r['test_sampled'])} | {_cell(r['test_pass_at_k'])} | {_cell(r['train_greedy'])} | "
            f"{_cell(r['train_sampled'])} | {_cell(r['train_pass_at_k'])} | {_cell(r['sft_seconds'], 0)} | "
            f"{_cell(r['sft_cpu_seconds'], 0)} | "
            f"{r['threads']} | {' / '.join(f'{v:.1f}' for v in r['load'])} |")
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}.", ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.r1.base_search", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=seeds_argument(), default="0-2",
                        help="choosing seeds (< 10: the study reports 10-14)")
    parser.add_argument("--grid", default=DEFAULT_GRID,
                        help=f"comma-separated cells of {', '.join(GRID)}; a cell may name its own seeds "
                             "(gpt2:0 or 3layers:0-1), else it runs on --seeds")
    parser.add_argument("--eval-k", type=positive_int, default=64, help="samples per prompt")
    parser.add_argument("--eval-prompts", type=positive_int, default=256, help="prompts per split")
    parser.add_argument("--table", type=_table_name, default="base_search",
                        help="the table's file name without suffix (a .md and a .json of that name), so a "
                             "grid of further levers gets a table of its own beside the committed one")
    add_executor_arguments(parser, "cells")
    add_output_arguments(parser, "r1_base", RESULTS_DIR / "r1")  # base_search.md / .json; runs: the cache
    return parser


def _table_name(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9_]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} must be lower-case letters, digits and '_'")
    return text


def _grid(text: str, seeds: list[int]) -> list[tuple[str, list[int]]]:
    """``--grid``'s cells with their seeds: ``2layers,gpt2:0`` -> [("2layers", seeds), ("gpt2", [0])].
    """
    cells = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, own = part.partition(":")
        if name not in GRID:
            raise ValueError(f"unknown cell {name!r}; choose from {list(GRID)}")
        cells.append((name, list(seeds_argument()(own)) if own else list(seeds)))
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.grid = _grid(args.grid, args.seeds)
    except (ValueError, argparse.ArgumentTypeError) as err:
        parser.error(f"--grid {args.grid!r}: {err}")
    reported = sorted({s for _, seeds in args.grid for s in seeds if s >= 10})
    if reported:
        parser.error(f"seeds {reported}: seeds >= 10 are the study's reported seeds; choose on 0-9")
    try:
        out = output_folder(args)
    except ValueError as err:
        parser.error(str(err))
    task_list = tasks(args)
    got = run_all(task_list, CACHE, address=args.ray_address, workers=args.workers or 1,
                  progress=not args.quiet, desc="bases", rerun=[r for r in args.rerun.split(",") if r],
                  log=print)
    result = {"command": command_line("benchmarks.r1.base_search", argv), "machine": machine_info(),
              "seeds": ",".join(map(str, sorted({s for _, seeds in args.grid for s in seeds}))),
              "eval": {"k": args.eval_k, "prompts": args.eval_prompts}, "start": START, "chosen": CHOSEN,
              "grid": {g: {"seeds": seeds, **GRID[g]} for g, seeds in args.grid},
              "failures": got.failures,
              "rows": summarize(task_list, got.records)}
    dest = got.destination(out)  # with a cell missing: the scratch folder, never a committed one
    write_results(dest, args.table, result, markdown(result), incomplete=got.incomplete())
    print(f"results in {dest}/ ({args.table}.md, {args.table}.json; the bases' run files in {CACHE}/)")
    for failure in got.failures:
        print(f"FAILED: {failure}")
    return 1 if got.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
