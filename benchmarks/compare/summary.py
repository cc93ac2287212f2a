"""Summarising a study: per-contender IQM and bootstrap intervals, verdicts, GRPO / PPO ratios and goals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.core.stats import ONE_SEED, Interval, iqm_ci, ratio_ci
from benchmarks.compare.study import CONTENDERS, REFERENCES, VERDICT_COLUMNS

__all__ = ["summarize"]

REFERENCE = REFERENCES[0]


def _censored(records: Sequence[Mapping[str, Any]], what: str) -> tuple[np.ndarray, int]:
    """Per-seed steps (``what="steps"``) or seconds to 95% held-out success; a run that never got there
    counts at the budget (the same for every contender, not the run's own overshoot past it, which
    depends on rollout size) / at its whole training time. Returns the values and how many were
    censored."""
    values, censored = [], 0
    for r in records:
        hit = r[f"{what}_to_95"]
        if hit is None:
            censored += 1
            hit = r["budget"] if what == "steps" else r["train_seconds"]
        values.append(float(hit))
    return np.asarray(values), censored


def _compare(c: Interval, ref: Interval, higher_is_better: bool) -> int:
    """+1 if ``c`` is better than ``ref`` with disjoint 95% CIs, -1 if worse, 0 if the CIs overlap."""
    if c.overlaps(ref) or np.isnan(c.point) or np.isnan(ref.point):
        return 0
    better = c.point > ref.point if higher_is_better else c.point < ref.point
    return 1 if better else -1


def _verdict(row: Mapping[str, Any], ref: Mapping[str, Any] | None, ref_label: str) -> str:
    if ref is None:
        return f"no {ref_label} runs to compare with"
    if row["contender"] == ref["contender"]:
        return "reference"
    if row["n_seeds"] < 2 or ref["n_seeds"] < 2:  # no interval, so nothing to read a verdict from
        return ONE_SEED
    aspects = [("final held-out success", _compare(row["_final"], ref["_final"], True))]
    if row["steps95_censored"] == row["n_seeds"] and ref["steps95_censored"] == ref["n_seeds"]:
        aspects.append(("steps to 95% (neither reached it)", 0))
    else:
        aspects.append(("steps to 95%", _compare(row["_steps"], ref["_steps"], False)))
    wins = [name for name, s in aspects if s > 0]
    losses = [name for name, s in aspects if s < 0]
    ties = [name for name, s in aspects if s == 0]
    parts = []
    if wins:
        parts.append("better on " + " and ".join(wins))
    if losses:
        parts.append(f"{ref_label} better on " + " and ".join(losses))
    if ties:
        overlap = any("neither" not in name for name in ties)
        parts.append("tie on " + " and ".join(ties) + (" (CIs overlap)" if overlap else ""))
    if losses and not wins:
        head = f"{ref_label} wins"
    elif wins and not losses:
        head = "wins"
    elif wins and losses:
        head = "mixed"
    else:
        head = f"tie with {ref_label}"
    return f"{head}: " + "; ".join(parts)


def _goal(ratio: Interval, limit: float, censored: int, ref_censored: int) -> str:
    """"met", "missed" or "undetermined": censored runs count at the budget, which shortens their true
    time, so with censored GRPO runs the true ratio is at least the measured one (only "missed" can be
    concluded), with censored PPO runs at most (only "met" can be concluded). From one seed (either
    side): :data:`~benchmarks.core.stats.ONE_SEED`."""
    if ratio.single:
        return ONE_SEED
    point = ratio.point
    if np.isnan(point):
        return "undetermined"
    if point <= limit and censored == 0:
        return "met"
    if point > limit and ref_censored == 0:
        return "missed"
    return "undetermined (censored runs)"


def summarize(records: Sequence[Mapping[str, Any]], contenders: Sequence[str]) -> dict[str, Any]:
    """Per-contender IQM and CIs, verdicts against each PPO reference, and the GRPO / PPO ratios. Long
    because every column of the summary is computed here once, in the order the table shows them."""
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        by_name.setdefault(r["contender"], []).append(r)
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(contenders):
        runs = sorted(by_name.get(name, []), key=lambda r: r["seed"])
        if not runs:
            continue
        final = iqm_ci([r["final_test_success"] for r in runs], seed=i)
        sampled = {split: iqm_ci([r[f"final_{split}_sampled"] for r in runs], seed=i)
                   if all(r.get(f"final_{split}_sampled") is not None for r in runs) else None
                   for split in ("test", "train")}
        final_train = iqm_ci([r["final_train_success"] for r in runs], seed=i)
        steps, n_cens = _censored(runs, "steps")
        seconds, _ = _censored(runs, "seconds")
        steps_ci, seconds_ci = iqm_ci(steps, seed=i), iqm_ci(seconds, seed=i)
        threads = sorted({str(r["torch_threads"]) for r in runs})
        rows.append({
            "contender": name, "label": CONTENDERS[name].label if name in CONTENDERS else name,
            "n_seeds": len(runs),
            "final_test_iqm": final.point, "final_test_lo": final.low, "final_test_hi": final.high,
            "final_train_iqm": final_train.point, "final_train_lo": final_train.low,
            "final_train_hi": final_train.high,
            **{f"final_{split}_sampled_{k}": (None if ci is None else getattr(ci, attr))
               for split, ci in sampled.items()
               for k, attr in (("iqm", "point"), ("lo", "low"), ("hi", "high"))},
            "steps95_iqm": steps_ci.point, "steps95_lo": steps_ci.low, "steps95_hi": steps_ci.high,
            "steps95_censored": n_cens,
            "seconds95_iqm": seconds_ci.point, "seconds95_lo": seconds_ci.low,
            "seconds95_hi": seconds_ci.high,
            "frac_reached_100": float(np.mean([r["reached_100"] for r in runs])),
            "frac_collapsed": float(np.mean([r["collapsed"] for r in runs])),
            "params_actor": runs[0]["params_actor"], "params_critic": runs[0]["params_critic"],
            "params_total": runs[0]["params_total"],
            "steps_per_second_median": float(np.median([r["steps_per_second"] for r in runs])),
            "peak_rss_mb_median": float(np.median([r["peak_rss_mb"] for r in runs])),
            "torch_threads": "/".join(threads),
            "env_steps": "/".join(str(v) for v in sorted({int(r["num_timesteps"]) for r in runs})),
            "_final": final, "_steps": steps_ci, "_steps_raw": steps, "_seconds_raw": seconds,
        })
    refs = {name: next((r for r in rows if r["contender"] == name), None) for name in REFERENCES}
    for row in rows:
        for name, column in zip(REFERENCES, VERDICT_COLUMNS):
            row[column] = _verdict(row, refs[name], CONTENDERS[name].label)
    ratios: list[dict[str, Any]] = []
    for k, (ref_name, ref) in enumerate(refs.items()):
        if ref is None:
            continue
        for j, row in enumerate(rows):
            if CONTENDERS.get(row["contender"], None) is None or CONTENDERS[row["contender"]].algo != "GRPO":
                continue
            s = ratio_ci(row["_steps_raw"], ref["_steps_raw"], seed=100 * (k + 1) + j)
            w = ratio_ci(row["_seconds_raw"], ref["_seconds_raw"], seed=100 * (k + 1) + 50 + j)
            p = row["params_total"] / ref["params_total"]
            ratios.append({
                "contender": row["contender"], "reference": ref_name,
                "steps95_ratio": s.point, "steps95_ratio_lo": s.low, "steps95_ratio_hi": s.high,
                "seconds95_ratio": w.point, "seconds95_ratio_lo": w.low, "seconds95_ratio_hi": w.high,
                "params_ratio": p,
                "censored": row["steps95_censored"], "reference_censored": ref["steps95_censored"],
                "goal_steps": _goal(s, 0.5, row["steps95_censored"], ref["steps95_censored"]),
                "goal_seconds": _goal(w, 0.5, row["steps95_censored"], ref["steps95_censored"]),
                "goal_params": "met" if p <= 0.55 else "missed",
            })
    public = [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows]
    return {"rows": public, "ratios": ratios}
