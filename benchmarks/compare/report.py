"""Reporting a study: CSV files, the markdown table, verdict lines and plots, all written atomically."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.core.common import write_atomically
from benchmarks.core.stats import Interval
from benchmarks.compare.study import CONTENDERS, REFERENCES, VERDICT_COLUMNS
from benchmarks.compare.summary import summarize

__all__ = ["CURVE_COLUMNS", "RUN_COLUMNS", "SUMMARY_COLUMNS", "markdown_table", "verdict_lines",
           "write_outputs"]

atomic_write_text = atomic_write_bytes = write_atomically


def _csv_text(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buf.getvalue()


def _csv_value(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True)
    if v is None:
        return ""
    return v


RUN_COLUMNS = [
    "contender", "algo", "policy", "env_id", "seed", "budget", "eval_every", "num_timesteps", "learned_steps",
    "train_seconds",
    "final_train_success", "final_test_success", "final_train_sampled", "final_test_sampled",
    "steps_to_95", "seconds_to_95", "reached_95",
    "steps_to_100", "seconds_to_100", "reached_100", "collapsed", "collapse_rule", "greedy_constant",
    "params_actor", "params_critic", "params_total", "steps_per_second", "peak_rss_mb", "torch_threads",
    "wall_seconds_total", "hyperparams", "git_commit", "key",
]
CURVE_COLUMNS = ["contender", "seed", "num_timesteps", "train_seconds", "train_success", "test_success",
                 "train_sampled", "test_sampled"]
SUMMARY_COLUMNS = [
    "contender", "label", "n_seeds", "final_test_iqm", "final_test_lo", "final_test_hi",
    "final_train_iqm", "final_train_lo", "final_train_hi", "final_test_sampled_iqm", "final_test_sampled_lo",
    "final_test_sampled_hi", "final_train_sampled_iqm", "final_train_sampled_lo", "final_train_sampled_hi",
    "steps95_iqm", "steps95_lo", "steps95_hi",
    "steps95_censored", "seconds95_iqm", "seconds95_lo", "seconds95_hi", "frac_reached_100",
    "frac_collapsed", "params_actor", "params_critic", "params_total", "steps_per_second_median",
    "peak_rss_mb_median", "torch_threads", "env_steps", *VERDICT_COLUMNS,
]


def _fmt_ci(point: float, lo: float, hi: float, digits: int, scale: float = 1.0, n: int | None = None) -> str:
    """``point [lo, hi]``; from ``n`` = 1 seed the point alone, saying it is not an interval."""
    return Interval(point, lo, hi, n).fmt(digits, scale)


def _steps_line(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    counts = {r["env_steps"] for r in summary["rows"]}
    if counts == {str(meta["budget"])}:
        return (f"Every run trained exactly {meta['budget']:,} env steps (`num_timesteps` in runs.csv; "
                "`learned_steps` is where its last update ended).")
    per = ", ".join(f"{r['label']}: {r['env_steps']}" for r in summary["rows"])
    return f"Env steps trained per run (NOT all equal to the budget {meta['budget']:,}): {per}."


def _versions_line(meta: Mapping[str, Any]) -> str:
    runs = [json.loads(v) for v in meta.get("run_versions", []) if v != "null"]
    if not runs:
        return "Library versions: not recorded."
    names = ("python", "torch", "stable-baselines3", "numpy", "gymnasium")
    text = "; ".join(", ".join(f"{n} {v.get(n)}" for n in names) for v in runs)
    many = " (runs ran under DIFFERENT versions; compare with care)" if len(runs) > 1 else ""
    return f"Library versions of the runs: {text}{many}."


def markdown_table(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """The results table (markdown), the ratios against tuned PPO, and the conditions of the run. Long
    because the table's columns, its notes and the run conditions are one text read top to bottom."""
    sampled = any(r.get("final_test_sampled_iqm") is not None for r in summary["rows"])
    maskable = any(r["contender"] == REFERENCES[2] for r in summary["rows"])
    env = f"`{meta['env_id']}`" + (f" {json.dumps(meta['env_kwargs'])}" if meta.get("env_kwargs") else "")
    lines = [
        f"Env {env}, budget {meta['budget']:,} env steps per run, seeds {meta['seeds_text']}, "
        f"checkpoint every {meta['eval_every']:,} steps; IQM [95% bootstrap CI] over seeds; success is "
        "greedy unless marked sampled"
        + (f" (sampled: mean over {meta.get('sampled_k')} sampled answers per prompt)." if sampled else "."),
        "",
        "| contender | seeds | final held-out success | final train success "
        + ("| final held-out sampled | final train sampled " if sampled else "")
        + "| steps to 95% held-out (k) "
        "| censored | train s to 95% | reached 100% | collapsed | params actor / critic | env steps/s "
        "| peak RSS MB | verdict vs tuned PPO | verdict vs PPO defaults |"
        + (" verdict vs MaskablePPO defaults |" if maskable else ""),
        "|---|---|---|---|" + ("---|---|" if sampled else "") + "---|---|---|---|---|---|---|---|---|---|"
        + ("---|" if maskable else ""),
    ]
    for r in summary["rows"]:
        n = r["n_seeds"]
        extra = ""
        if sampled:
            extra = "".join(
                "| " + _fmt_ci(r[f"final_{s}_sampled_iqm"], r[f"final_{s}_sampled_lo"],
                               r[f"final_{s}_sampled_hi"], 2, n=r["n_seeds"]) + " "
                if r.get(f"final_{s}_sampled_iqm") is not None else "| n/a " for s in ("test", "train"))
        lines.append(
            f"| {r['label']} | {r['n_seeds']} "
            f"| {_fmt_ci(r['final_test_iqm'], r['final_test_lo'], r['final_test_hi'], 2, n=n)} "
            f"| {_fmt_ci(r['final_train_iqm'], r['final_train_lo'], r['final_train_hi'], 2, n=n)} "
            + extra
            + f"| {_fmt_ci(r['steps95_iqm'], r['steps95_lo'], r['steps95_hi'], 1, 1000.0, n=n)} "
            f"| {r['steps95_censored']}/{r['n_seeds']} "
            f"| {_fmt_ci(r['seconds95_iqm'], r['seconds95_lo'], r['seconds95_hi'], 1, n=n)} "
            f"| {r['frac_reached_100']:.0%} | {r['frac_collapsed']:.0%} "
            f"| {r['params_actor']:,} / {r['params_critic']:,} | {r['steps_per_second_median']:,.0f} "
            f"| {r['peak_rss_mb_median']:.0f} | {r['verdict']} | {r['verdict_vs_ppo_default']} |"
            + (f" {r[VERDICT_COLUMNS[2]]} |" if maskable else "")
        )
    lines += [
        "",
        "Censored runs (never reached 95% held-out) count at the budget / at their whole training time, "
        "which flatters them. Steps and seconds to a threshold are those of the first checkpoint at or above "
        "it. Wall seconds are training time only, one torch thread per run "
        f"({meta['workers']} runs in parallel on {meta['cpu_count']} cores of a shared machine).",
        "",
        _steps_line(summary, meta),
        _versions_line(meta),
    ]
    if summary["ratios"]:
        lines += [
            "",
            "Ratios GRPO ÷ PPO, IQM ratio [95% bootstrap CI], same study. Targets, against tuned "
            "PPO: steps <= 0.5, wall <= 0.5, params <= 0.55; the same lines are applied to the other "
            "references. "
            "A goal is \"undetermined\" when censored runs leave its side of the line open:",
            "",
            "| GRPO contender | ÷ | env steps to 95% held-out | train seconds to 95% held-out "
            "| trainable params | goals against this PPO |",
            "|---|---|---|---|---|---|",
        ]
        seeds = {r["contender"]: r["n_seeds"] for r in summary["rows"]}
        for q in summary["ratios"]:
            n = min(seeds[q["contender"]], seeds[q["reference"]])
            goals = "; ".join(f"{name} {q[f'goal_{name}']}" for name in ("steps", "seconds", "params"))
            cens = ""
            if q["censored"] or q["reference_censored"]:
                cens = f" (censored: {q['censored']} GRPO, {q['reference_censored']} PPO)"
            steps = _fmt_ci(q["steps95_ratio"], q["steps95_ratio_lo"], q["steps95_ratio_hi"], 2, n=n)
            wall = _fmt_ci(q["seconds95_ratio"], q["seconds95_ratio_lo"], q["seconds95_ratio_hi"], 3, n=n)
            lines.append(
                f"| {CONTENDERS[q['contender']].label} | {CONTENDERS[q['reference']].label} "
                f"| {steps}{cens} | {wall} | {q['params_ratio']:.2f} | {goals} |"
            )
    return "\n".join(lines) + "\n"


def verdict_lines(summary: Mapping[str, Any]) -> list[str]:
    """One plain line per GRPO contender against tuned PPO (and PPO defaults), with the goals."""
    lines = []
    by_name = {r["contender"]: r for r in summary["rows"]}
    for row in summary["rows"]:
        if CONTENDERS.get(row["contender"]) is None or CONTENDERS[row["contender"]].algo != "GRPO":
            continue
        for ref, column in zip(REFERENCES, VERDICT_COLUMNS):
            if ref not in by_name:
                continue
            goals = [q for q in summary["ratios"]
                     if q["contender"] == row["contender"] and q["reference"] == ref]
            goal_text = ""
            if goals:
                q = goals[0]
                goal_text = " | goals: " + ", ".join(
                    f"{n} {q[f'goal_{n}']}" for n in ("steps", "seconds", "params"))
            lines.append(f"Verdict: {row['label']} vs {CONTENDERS[ref].label}: {row[column]}{goal_text}")
    return lines


def write_outputs(
    records: Sequence[Mapping[str, Any]], contenders: Sequence[str], out: Path, meta: Mapping[str, Any],
    plots: bool = True, incomplete: str = "",
) -> dict[str, Any]:
    """Write runs.csv, curves.csv, summary.csv/json, table.md and the PNGs into ``out`` (atomically).
    ``incomplete`` (the runs missing, :meth:`benchmarks.core.executor.Outcome.incomplete`) is the first
    line of every table (``# ...`` in the CSVs) and the summary's ``"incomplete"``."""
    out = Path(out)
    summary = summarize(records, contenders)
    first = f"# {incomplete}\n" if incomplete else ""
    atomic_write_text(out / "runs.csv", first + _csv_text(records, RUN_COLUMNS))
    curve_rows = [
        {"contender": r["contender"], "seed": r["seed"], **point} for r in records for point in r["curve"]
    ]
    atomic_write_text(out / "curves.csv", first + _csv_text(curve_rows, CURVE_COLUMNS))
    atomic_write_text(out / "summary.csv", first + _csv_text(summary["rows"], SUMMARY_COLUMNS))
    head = {"incomplete": incomplete} if incomplete else {}
    atomic_write_text(out / "summary.json", json.dumps({**head, "meta": dict(meta), **summary}, indent=1))
    table = (f"{incomplete}\n\n" if incomplete else "") + markdown_table(summary, meta)
    atomic_write_text(out / "table.md", table)
    if plots:
        from benchmarks.core.plots import plot_curves

        labels = {name: CONTENDERS[name].label for name in contenders if name in CONTENDERS}
        for x, file in (("num_timesteps", "curves_steps.png"), ("train_seconds", "curves_wall.png")):
            atomic_write_bytes(out / file, plot_curves(records, contenders, labels, x=x, meta=meta))
    return {"summary": summary, "table": table}
