"""Dr. GRPO (Liu et al. 2025, arXiv 2503.20783): per-answer length normalisation lengthens wrong
answers; the std in the advantage up-weights too-easy and too-hard prompts."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.lab.base import (
    Arm,
    BUDGET,
    by_seed,
    ci,
    Claim,
    fmt,
    paired,
    per_seed,
    row,
    seeds_of,
    verdict,
    window_mean,
)
from benchmarks.lab.figures import curves_figure, pyplot, to_png


def analyse_dr_grpo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    growth = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "len_wrong", True)
                               - window_mean(r, "len_wrong", False)) for a in claim.arms}
    g_pa, g_c = ci(growth["per_answer"]), ci(growth["constant"])
    diff = paired(growth["per_answer"], growth["constant"])
    v1 = verdict(diff, +1)
    if v1 == "agree" and verdict(g_pa, +1) != "agree":
        v1 = "inconclusive"  # longer than under the constant normaliser, but not growing
    rows = [row(claim, "per-answer length normalisation makes wrong answers grow longer; a constant "
                "normaliser does not",
                f"wrong-answer length, last quarter - first quarter of training (tokens): per-answer "
                f"{fmt(g_pa)}, constant {fmt(g_c)}; paired difference {fmt(diff)}", v1)]
    # Std normalisation: share of the advantage mass on too-hard (<= 1/4 correct) and too-easy
    # (>= 3/4 correct) untied groups, under GRPO's std-normalised vs the mean-only advantage, computed
    # on every group of these runs (both arms).
    share: dict[str, list[float]] = {"grpo": [], "dr_grpo": []}
    for s in seeds_of(runs):
        for est in share:
            m = sum(np.asarray(by_seed(runs, a.name)[s]["adv_mass"][est]) for a in claim.arms)
            g = len(m) - 1
            k = np.arange(g + 1)
            extreme = (k <= g / 4) | (k >= 3 * g / 4)
            share[est].append(float(m[extreme].sum() / max(m.sum(), 1e-12)))
    sh_std, sh_mean = ci(share["grpo"]), ci(share["dr_grpo"])
    d2 = paired(share["grpo"], share["dr_grpo"])
    rows.append(row(claim, "std normalisation weights too-easy and too-hard prompts up",
                    f"share of the summed absolute advantage on groups with <= 1/4 or >= 3/4 correct: std-normalised "
                    f"{fmt(sh_std)}, mean-only {fmt(sh_mean)} (same groups); difference {fmt(d2)}",
                    verdict(d2, +1)))
    return {"rows": rows, "wrong_length_growth": growth, "extreme_share": share}


def plot_dr_grpo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    plt = pyplot()
    colors = plt.get_cmap("tab10")
    seeds = seeds_of(runs)

    def mass_panel(ax: Any) -> None:
        m = {est: sum(np.asarray(by_seed(runs, a.name)[s]["adv_mass"][est]) for a in claim.arms for s in seeds)
             for est in ("grpo", "dr_grpo")}
        k = np.arange(len(m["grpo"]))
        ok = m["dr_grpo"] > 0
        ax.plot(k[ok] / (len(k) - 1), m["grpo"][ok] / m["dr_grpo"][ok], "o-", color=colors(3))
        ax.set_title("sum |A|, (r - mean)/std over r - mean, by group", fontsize=10)
        ax.set_xlabel("fraction of the group correct (untied groups, all runs)")
        ax.set_yscale("log")

    return to_png(curves_figure(claim, runs, [("len_wrong", "wrong answers: mean length (tokens)"),
                                              ("len_correct", "correct answers: mean length (tokens)"),
                                              ("solve_rate", "rollout solve rate")], mass_panel))


CLAIM = Claim("dr_grpo", "Dr. GRPO (Liu et al. 2025)",
              "length normalisation lengthens wrong answers; std normalisation up-weights easy/hard prompts",
              (Arm("per_answer", "per-answer 1/|o| (seq_mean_token_mean)",
                   {"loss_aggregation": "seq_mean_token_mean"}),
               Arm("constant", "constant 1/L_max (seq_mean_token_sum)",
                   {"loss_aggregation": "seq_mean_token_sum"})),
              BUDGET, analyse_dr_grpo, plot_dr_grpo)
