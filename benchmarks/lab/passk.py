"""Pass@k training (Tang et al. 2025, arXiv 2503.19595; verl ``adv_estimator="grpo_passk"``): crediting
only each group's best answer optimises pass@k rather than pass@1, so held-out pass@k rises."""

from __future__ import annotations

from typing import Any

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    ci,
    Claim,
    EVAL_K,
    fmt,
    per_seed,
    two_arm_row,
)
from benchmarks.lab.figures import curves_figure, to_png


def analyse_passk(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    passk = {a.name: per_seed(runs, a.name, lambda r: r["final"][f"pass@{EVAL_K}"]) for a in claim.arms}
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    extra = "; held-out sampled success (pass@1): " + ", ".join(
        f"{a.label} {fmt(ci(acc[a.name]))}" for a in claim.arms)
    rows = [two_arm_row(claim, f"crediting only each group's best answer raises held-out pass@{EVAL_K} "
                        f"over GRPO (whose objective is pass@1)", f"held-out pass@{EVAL_K}", passk,
                        extra=extra)]
    return {"rows": rows, f"final_pass@{EVAL_K}": passk, "final_sampled": acc}


def plot_passk(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return to_png(curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                              ("zero_std_group_frac", "groups with tied rewards"),
                                              ("entropy", "policy entropy (nats/token)")]))


CLAIM = Claim("passk", "pass@k training (Tang et al. 2025)",
              f"the pass@k advantage raises held-out pass@{EVAL_K}",
              (Arm("grpo", "GRPO advantage", {"advantage": "grpo"}),
               Arm("passk", "pass@k advantage (grpo_passk)", {"advantage": "grpo_passk"})),
              BUDGET, analyse_passk, plot_passk)
