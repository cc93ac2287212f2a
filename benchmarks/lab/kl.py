"""The lesson's KL penalty (DeepSeekMath beta 0.001-0.04) against beta = 0 (DAPO, Dr. GRPO), the
reference being a behaviour-cloned warm start."""

from __future__ import annotations

from typing import Any

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    ci,
    Claim,
    fmt,
    arm_label,
    LESSON_BETAS,
    paired,
    per_seed,
    row,
    verdict,
    window_mean,
)
from benchmarks.lab.figures import curves_figure, to_png


def analyse_kl(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    greedy = {a.name: per_seed(runs, a.name, lambda r: r["final"]["greedy"]) for a in claim.arms}
    kl = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "kl", True)) for a in claim.arms}
    warm = per_seed(runs, "beta0", lambda r: r["warm"]["sampled"])
    rows = []
    parts = [f"warm start {fmt(ci(warm))}"] + [f"{a.label} {fmt(ci(acc[a.name]))}" for a in claim.arms]
    lesson = [a.name for a in claim.arms if a.name != "beta0"]
    diffs = {n: paired(acc["beta0"], acc[n]) for n in lesson}
    vs = {verdict(d, +1) for d in diffs.values()}
    # The lesson's claim: beta in its range does better than beta = 0 (keeps the policy near the
    # reference, preventing drift/collapse). Agree if beta=0 is worse than every lesson beta.
    v = "agree" if vs == {"disagree"} else ("disagree" if "agree" in vs else "inconclusive")
    rows.append(row(claim, "a KL penalty in the lesson's range (0.001-0.04) to the warm-started reference "
                    "trains better than beta = 0",
                    "held-out sampled success: " + ", ".join(parts) + "; beta=0 minus "
                    + ", ".join(f"{arm_label(claim, n)}: {fmt(d)}" for n, d in diffs.items()), v))
    kd = paired(kl["beta0"], kl["beta0.04"])
    rows.append(row(claim, "the penalty keeps the policy near the reference",
                    "KL to the reference (k3, last quarter): " + ", ".join(
                         f"{a.label} {fmt(ci(kl[a.name]), 3)}" for a in claim.arms)
                    + f"; beta=0 minus beta=0.04: {fmt(kd, 3)}", verdict(kd, +1)))
    return {"rows": rows, "final_sampled": acc, "final_greedy": greedy, "kl_end": kl, "warm_sampled": warm}


def plot_kl(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    fig = curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                      ("kl", "KL to the warm-started reference"),
                                      ("entropy", "policy entropy (nats/token)")])
    return to_png(fig)


CLAIM = Claim("kl", "the lesson (DeepSeekMath beta) vs beta = 0 (DAPO, Dr. GRPO)",
              "beta = 0 vs 0.001-0.04 with a warm-started reference",
              tuple(Arm(f"beta{b:g}", f"beta={b:g}", {"beta": float(b)}, warm_start=True)
                    for b in (0.0, *LESSON_BETAS)),
              BUDGET, analyse_kl, plot_kl)
