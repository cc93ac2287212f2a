"""GMPO (Zhao et al. 2025, arXiv 2507.20673): the geometric mean of an answer's token ratios has a
narrower spread than their arithmetic mean, so it tolerates a wider clip (log-ratio 0.4) and learns
more stably and better than GRPO."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    ci,
    Claim,
    collapsed_per_arm,
    collapsed_text,
    fmt,
    MU_HI,
    per_seed,
    series,
    two_arm_row,
)
from benchmarks.lab.figures import curves_figure, to_png

#: GMPO's clip range in log space (the paper's (e^-0.4, e^0.4)).
GMPO_LOG_CLIP = 0.4


def analyse_gmpo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    clip = {a.name: per_seed(runs, a.name, lambda r: float(np.nanmean(series(r, "clip_frac"))))
            for a in claim.arms}
    coll = collapsed_per_arm(claim, runs)
    n = len(acc[claim.arms[0].name])
    extra = ("; clip fraction over training: " + ", ".join(
        f"{a.label} {fmt(ci(clip[a.name]), 3)}" for a in claim.arms) + "; " + collapsed_text(claim, coll, n))
    rows = [two_arm_row(claim, f"the geometric mean of token ratios with a wider clip (log-ratio "
                        f"{GMPO_LOG_CLIP:g}) learns better than GRPO's arithmetic mean at mu = {MU_HI}",
                        "held-out sampled success", acc, extra=extra)]
    return {"rows": rows, "final_sampled": acc, "clip_frac": clip, "collapsed": coll}


def plot_gmpo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return to_png(curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                              ("clip_frac", "clip fraction"),
                                              ("entropy", "policy entropy (nats/token)")]))


CLAIM = Claim("gmpo", "GMPO (Zhao et al. 2025)",
              "the geometric-mean ratio tolerates a wider clip and learns better",
              (Arm("grpo_hi", f"token ratios, clip 0.2 / 0.28, mu={MU_HI}", {"epochs": MU_HI}),
               Arm("gmpo_hi", f"geometric mean, log clip {GMPO_LOG_CLIP:g}, mu={MU_HI}",
                   {"epochs": MU_HI, "policy_loss": "geo_mean", "clip_eps": GMPO_LOG_CLIP,
                    "clip_eps_high": GMPO_LOG_CLIP})),
              BUDGET, analyse_gmpo, plot_gmpo)
