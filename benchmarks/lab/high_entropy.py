"""Wang et al. 2025, "Beyond the 80/20 Rule" (arXiv 2506.01939; TRL ``top_entropy_quantile``): the
policy gradient of the 20% highest-entropy tokens ("forking tokens") carries the learning; training on
them alone matches or beats training on every token."""

from __future__ import annotations

from typing import Any

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    ci,
    Claim,
    fmt,
    per_seed,
    two_arm_row,
    window_mean,
)
from benchmarks.lab.figures import curves_figure, to_png

#: The share of tokens trained on (the paper's rho = 0.2).
TOP_QUANTILE = 0.2
#: "Matches": the top-entropy arm's held-out sampled success may trail by at most this much (the lower
#: end of the paired difference's interval must lie above minus this).
MATCH_MARGIN = 0.02


def analyse_high_entropy(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    ent = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "entropy", True)) for a in claim.arms}
    extra = "; entropy (nats/token), last quarter: " + ", ".join(
        f"{a.label} {fmt(ci(ent[a.name]))}" for a in claim.arms)
    rows = [two_arm_row(claim, f"training only on the {TOP_QUANTILE:.0%} highest-entropy tokens matches or "
                        "beats training on every token", "held-out sampled success", acc,
                        margin=MATCH_MARGIN, extra=extra)]
    return {"rows": rows, "final_sampled": acc, "entropy_end": ent}


def plot_high_entropy(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return to_png(curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                              ("entropy", "policy entropy (nats/token)"),
                                              ("clip_frac", "clip fraction")]))


CLAIM = Claim("high_entropy", "Wang et al. 2025 (Beyond the 80/20 Rule)",
              f"the {TOP_QUANTILE:.0%} highest-entropy tokens suffice",
              (Arm("all_tokens", "every token", {"top_entropy_quantile": 1.0}),
               Arm("top20", f"top {TOP_QUANTILE:.0%} entropy tokens", {"top_entropy_quantile": TOP_QUANTILE})),
              BUDGET, analyse_high_entropy, plot_high_entropy)
