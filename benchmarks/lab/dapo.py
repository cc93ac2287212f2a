"""DAPO (Yu et al. 2025, arXiv 2503.14476, sections 3.1-3.2): clip-higher keeps entropy and learns
faster; dynamic sampling needs fewer policy updates (at more env steps)."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.core.stats import Interval
from benchmarks.lab.base import (
    Arm,
    BUDGET,
    by_seed,
    ci,
    Claim,
    first_reach,
    fmt,
    paired,
    per_seed,
    row,
    seeds_of,
    series,
    solve_auc,
    verdict,
    window_mean,
)
from benchmarks.lab.figures import curves_figure, pyplot, to_png

#: DAPO: the rollout solve rate (3-iteration mean) that "reaches a given success" means (chosen on
#: seeds 0-1: reached by most runs of every arm within the budget).
DAPO_THRESHOLD = 0.3


def analyse_dapo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    ent_end = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "entropy", True)) for a in claim.arms}
    ent_start = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "entropy", False, 0.1))
                 for a in claim.arms}
    drop_sym = ci(np.array(ent_end["symmetric"]) / np.array(ent_start["symmetric"]))
    d_ent = paired(ent_end["clip_higher"], ent_end["symmetric"])
    rows = [row(claim, "symmetric clipping collapses entropy; clip-higher keeps it",
                f"entropy (nats/token), last quarter: symmetric {fmt(ci(ent_end['symmetric']))} "
                f"({fmt(drop_sym)} of its first tenth), clip-higher {fmt(ci(ent_end['clip_higher']))}; "
                f"difference {fmt(d_ent)}", verdict(d_ent, +1))]
    auc = {a.name: per_seed(runs, a.name, solve_auc) for a in claim.arms}
    d_auc = paired(auc["clip_higher"], auc["symmetric"])
    rows.append(row(claim, "clip-higher learns faster",
                    f"mean rollout solve rate over training: symmetric {fmt(ci(auc['symmetric']))}, "
                    f"clip-higher {fmt(ci(auc['clip_higher']))}; difference {fmt(d_auc)}",
                    verdict(d_auc, +1)))
    threshold = claim.params.get("threshold", DAPO_THRESHOLD)
    reach = {a.name: [first_reach(by_seed(runs, a.name)[s], threshold) for s in seeds_of(runs)]
             for a in claim.arms}
    upd = {k: [u for u, _ in v] for k, v in reach.items()}
    stp = {k: [s for _, s in v] for k, v in reach.items()}
    both = [i for i in range(len(seeds_of(runs)))
            if np.isfinite(upd["clip_higher"][i]) and np.isfinite(upd["dynamic"][i])]
    n_reached = {k: int(np.isfinite(v).sum()) for k, v in upd.items()}
    d_upd = paired([upd["dynamic"][i] for i in both], [upd["clip_higher"][i] for i in both]) if both \
        else Interval(float("nan"), float("nan"), float("nan"))
    r_steps = ci([stp["dynamic"][i] / stp["clip_higher"][i] for i in both]) if both \
        else Interval(float("nan"), float("nan"), float("nan"))
    n = len(seeds_of(runs))
    rows.append(row(claim, f"dynamic sampling reaches a given success (solve rate {threshold:g}) in "
                    "fewer policy updates, at more env steps",
                    f"updates to reach it: clip-higher {fmt(ci(upd['clip_higher']), 1)} "
                    f"({n_reached['clip_higher']}/{n} seeds), + dynamic sampling "
                    f"{fmt(ci(upd['dynamic']), 1)} ({n_reached['dynamic']}/{n}); paired difference "
                    f"{fmt(d_upd, 1)} on {len(both)} seeds; env steps ratio (dynamic / clip-higher) "
                    f"{fmt(r_steps)}", verdict(d_upd, -1)))
    return {"rows": rows, "entropy_end": ent_end, "entropy_start": ent_start, "solve_auc": auc,
            "updates_to_threshold": upd, "steps_to_threshold": stp}


def plot_dapo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    colors = pyplot().get_cmap("tab10")

    def updates_panel(ax: Any) -> None:
        for i, arm in enumerate(claim.arms):
            for rec in runs.get(arm.name, []):
                ax.plot(np.cumsum(series(rec, "updated")), series(rec, "solve_rate"), color=colors(i),
                        alpha=0.5, lw=0.8)
        ax.axhline(claim.params.get("threshold", DAPO_THRESHOLD), color="k", lw=0.6, ls=":")
        ax.set_xlabel("policy updates")
        ax.set_title("rollout solve rate per run vs updates", fontsize=10)

    return to_png(curves_figure(claim, runs, [("entropy", "policy entropy (nats/token)"),
                                              ("solve_rate", "rollout solve rate"),
                                              ("clip_frac", "clip fraction")], updates_panel))


CLAIM = Claim("dapo", "DAPO (Yu et al. 2025)",
              "clip-higher keeps entropy and learns faster; dynamic sampling needs fewer updates",
              (Arm("symmetric", "clip [0.8, 1.2]",
                   {"beta": 0.0, "clip_eps_high": None, "dynamic_sampling": False}),
               Arm("clip_higher", "clip-higher [0.8, 1.28]",
                   {"beta": 0.0, "clip_eps_high": 0.28, "dynamic_sampling": False}),
               Arm("dynamic", "clip-higher + dynamic sampling",
                   {"beta": 0.0, "clip_eps_high": 0.28, "dynamic_sampling": True})),
              BUDGET, analyse_dapo, plot_dapo)
