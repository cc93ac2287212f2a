"""Run-to-run spread: the same runs (same contender, seed, budget, hyperparameters) trained twice.

    python -m benchmarks.compare.spread DIR_A DIR_B [--out DIR | --update-results]

``DIR_A`` and ``DIR_B`` are two output folders of ``python -m benchmarks.compare`` (e.g. the default
``benchmark-runs/compare`` and the committed ``benchmarks/results/compare``). For every run present in
both (same run key), compares the success curves checkpoint by checkpoint and the training seconds, and
writes ``spread.{json,md}``: how far the same seeded run moves between two invocations, with the library
versions each ran under (same versions: a run-to-run figure; different versions: a build-to-build one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
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
from benchmarks.core.store import check_run

VERSION_KEYS = ("python", "torch", "stable-baselines3", "numpy", "gymnasium")


def _runs(folder: Path) -> dict[str, dict[str, Any]]:
    runs = {}
    for path in sorted((Path(folder) / "runs").glob("*.json")):
        record = check_run(path)
        runs[record["key"]] = record
    return runs


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Differences between two records of the same run."""
    ca, cb = a["curve"], b["curve"]
    same_steps = [p["num_timesteps"] for p in ca] == [p["num_timesteps"] for p in cb]
    diffs = [abs(float(p[k]) - float(q[k])) for p, q in zip(ca, cb) for k in ("train_success", "test_success")
             if p.get(k) is not None and q.get(k) is not None]
    return {
        "key": a["key"], "contender": a["contender"], "seed": a["seed"],
        "same_checkpoints": same_steps and len(ca) == len(cb),
        "max_abs_success_diff": max(diffs) if diffs else 0.0,
        "final_test": (a["final_test_success"], b["final_test_success"]),
        "steps_to_95": (a["steps_to_95"], b["steps_to_95"]),
        "train_seconds": (a["train_seconds"], b["train_seconds"]),
        "versions": (a.get("versions"), b.get("versions")),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare.spread",
                                description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    add_output_arguments(p, "spread", RESULTS_DIR)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = output_folder(args)
    ra, rb = _runs(args.a), _runs(args.b)
    common = sorted(set(ra) & set(rb))
    if not common:
        raise ValueError(
            f"{args.a} and {args.b} share no run (same contender, seed, budget, hyperparameters)")
    rows = [compare_runs(ra[k], rb[k]) for k in common]
    same_versions = all(
        {k: (r["versions"][0] or {}).get(k) for k in VERSION_KEYS}
        == {k: (r["versions"][1] or {}).get(k) for k in VERSION_KEYS} for r in rows)
    ratios = [max(s) / max(min(s), 1e-9) for s in (r["train_seconds"] for r in rows)]
    identical = sum(r["same_checkpoints"] and r["max_abs_success_diff"] == 0.0 for r in rows)
    kind = ("run-to-run (same library versions)" if same_versions
            else "build-to-build (library versions differ)")
    lines = [
        f"`python -m benchmarks.compare.spread {args.a} {args.b}`: {len(rows)} runs trained twice, {kind}.",
        "",
        "| contender | seed | identical success curves | max abs. success difference | final held-out (a, b) "
        "| steps to 95% (a, b) | train seconds (a, b) |",
        "|---|---:|---|---:|---|---|---|",
    ]
    for r in rows:
        same = "yes" if r["same_checkpoints"] and r["max_abs_success_diff"] == 0.0 else "NO"
        lines.append(
            f"| {r['contender']} | {r['seed']} | {same} | {r['max_abs_success_diff']:.2f} "
            f"| {r['final_test'][0]:.2f}, {r['final_test'][1]:.2f} "
            f"| {r['steps_to_95'][0]}, {r['steps_to_95'][1]} "
            f"| {r['train_seconds'][0]:.1f}, {r['train_seconds'][1]:.1f} |"
        )
    lines += [
        "",
        f"{identical} of {len(rows)} runs repeated their success curves exactly; training seconds of the "
        f"same run differed by a factor of {np.median(ratios):.2f} (median; max {max(ratios):.2f}) between "
        "the two invocations on this shared machine.",
    ]
    table = "\n".join(lines) + "\n"
    record = {"rows": rows, "same_versions": same_versions, "identical": identical, "n": len(rows),
              "seconds_ratio_median": float(np.median(ratios)), "seconds_ratio_max": float(max(ratios)),
              "machine": machine_info(), "command": command_line("benchmarks.compare.spread", argv)}
    write_results(out, "spread", record, table)
    return 0


if __name__ == "__main__":
    sys.exit(cli(main))
