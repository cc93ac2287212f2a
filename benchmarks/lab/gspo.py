"""GSPO (Zheng et al. 2025, arXiv 2507.18071): a sequence-level ratio stays stable at high mu."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    ci,
    Claim,
    collapsed_per_arm,
    fmt,
    MU_HI,
    MU_LO,
    paired,
    per_seed,
    row,
    seeds_of,
    series,
    verdict,
)
from benchmarks.lab.figures import curves_figure, to_png


def analyse_gspo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    n = len(seeds_of(runs))
    final = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    clip = {a.name: per_seed(runs, a.name, lambda r: float(np.nanmean(series(r, "clip_frac")))) for a in claim.arms}
    coll = collapsed_per_arm(claim, runs)
    drop_tok = np.array(final["token_lo"]) - np.array(final["token_hi"])
    drop_seq = np.array(final["gspo_lo"]) - np.array(final["gspo_hi"])
    d = paired(list(drop_tok), list(drop_seq))
    measured = (
        f"held-out sampled success, mu = {MU_LO} -> {MU_HI}: token {fmt(ci(final['token_lo']))} -> "
        f"{fmt(ci(final['token_hi']))}, sequence {fmt(ci(final['gspo_lo']))} -> "
        f"{fmt(ci(final['gspo_hi']))}; loss from raising mu, token minus sequence: {fmt(d)}; "
        f"collapsed runs at mu = {MU_LO}, {MU_HI}: token {coll['token_lo']}, {coll['token_hi']}, sequence "
        f"{coll['gspo_lo']}, {coll['gspo_hi']} of {n}; clip fraction at mu = {MU_HI}: token "
        f"{fmt(ci(clip['token_hi']), 3)}, sequence {fmt(ci(clip['gspo_hi']), 3)}"
    )
    rows = [row(claim, "a sequence-level ratio stays stable at higher mu; the token-level ratio does not",
                measured, verdict(d, +1))]
    return {"rows": rows, "final_sampled": final, "clip_frac": clip, "collapsed": coll}


def plot_gspo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return to_png(curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                              ("clip_frac", "clip fraction"),
                                              ("entropy", "policy entropy (nats/token)")]))


CLAIM = Claim("gspo", "GSPO (Zheng et al. 2025)",
              "sequence-level ratio stays stable at high mu",
              (Arm("token_lo", f"token ratio, mu={MU_LO}", {"epochs": MU_LO}),
               Arm("token_hi", f"token ratio, mu={MU_HI}", {"epochs": MU_HI}),
               Arm("gspo_lo", f"sequence ratio (GSPO), mu={MU_LO}",
                   {"epochs": MU_LO, "policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4}),
               Arm("gspo_hi", f"sequence ratio (GSPO), mu={MU_HI}",
                   {"epochs": MU_HI, "policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4})),
              BUDGET, analyse_gspo, plot_gspo)
