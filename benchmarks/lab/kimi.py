"""Kimi k1.5 (arXiv 2501.12599, section 2.3.3): the length reward shortens correct answers at no
accuracy cost."""

from __future__ import annotations

from typing import Any

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    ci,
    Claim,
    fmt,
    paired,
    per_seed,
    row,
    verdict,
    window_mean,
)
from benchmarks.lab.figures import curves_figure, to_png

#: Kimi: the largest loss of held-out sampled success that still counts as "without costing accuracy"
#: (the lower end of the interval of the paired difference must lie above minus this).
KIMI_MARGIN = 0.05


def analyse_kimi(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    length = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "len_correct", True)) for a in claim.arms}
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    d_len = paired(length["length_term"], length["no_length"])
    d_acc = paired(acc["length_term"], acc["no_length"])
    v_len = verdict(d_len, -1)
    v_acc = verdict(d_acc, +1, KIMI_MARGIN)
    v = v_len if v_len != "agree" else v_acc
    rows = [row(claim, "the length term shortens correct answers without costing accuracy",
                f"correct-answer length, last quarter (tokens): without {fmt(ci(length['no_length']))}, "
                f"with {fmt(ci(length['length_term']))}, difference {fmt(d_len)}; held-out sampled "
                f"success: without {fmt(ci(acc['no_length']))}, with {fmt(ci(acc['length_term']))}, "
                f"difference {fmt(d_acc)} (no cost: interval above -{KIMI_MARGIN})", v)]
    return {"rows": rows, "len_correct_end": length, "final_sampled": acc}


def plot_kimi(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return to_png(curves_figure(claim, runs, [("len_correct", "correct answers: mean length (tokens)"),
                                              ("len_wrong", "wrong answers: mean length (tokens)"),
                                              ("solve_rate", "rollout solve rate")]))


CLAIM = Claim("kimi", "Kimi k1.5 (2025)",
              "the length term shortens correct answers at no accuracy cost",
              (Arm("no_length", "no length term", {"length_weight": 0.0}),
               Arm("length_term", "length term, weight 0.1", {"length_weight": 0.1})),
              BUDGET, analyse_kimi, plot_kimi)
