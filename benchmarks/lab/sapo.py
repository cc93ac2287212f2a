"""SAPO (Gao et al. 2025, arXiv 2511.20347): a smooth, temperature-controlled gate in place of PPO's hard
clip keeps learning stable when each batch is reused for many epochs (off-policy)."""

from __future__ import annotations

from typing import Any

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
    two_arm_row,
    window_mean,
)
from benchmarks.lab.figures import curves_figure, to_png


def analyse_sapo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    ent = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "entropy", True)) for a in claim.arms}
    coll = collapsed_per_arm(claim, runs)
    n = len(acc[claim.arms[0].name])
    extra = ("; entropy (nats/token), last quarter: " + ", ".join(
        f"{a.label} {fmt(ci(ent[a.name]))}" for a in claim.arms) + "; " + collapsed_text(claim, coll, n))
    rows = [two_arm_row(claim, f"a smooth gate in place of the hard clip learns better off-policy "
                        f"(mu = {MU_HI} epochs per batch)", "held-out sampled success", acc, extra=extra)]
    return {"rows": rows, "final_sampled": acc, "entropy_end": ent, "collapsed": coll}


def plot_sapo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return to_png(curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                              ("entropy", "policy entropy (nats/token)"),
                                              ("kl", "KL to the reference")]))


CLAIM = Claim("sapo", "SAPO (Gao et al. 2025)",
              "a smooth gate keeps off-policy learning stable",
              (Arm("clip_hi", f"PPO clip, mu={MU_HI}", {"epochs": MU_HI}),
               Arm("sapo_hi", f"SAPO gate (tau 1.0 / 1.05), mu={MU_HI}",
                   {"epochs": MU_HI, "policy_loss": "sapo"})),
              BUDGET, analyse_sapo, plot_sapo)
