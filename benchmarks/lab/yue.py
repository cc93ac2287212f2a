"""Yue et al. 2025 ("Does reinforcement learning really incentivize reasoning capacity in LLMs beyond the
base model?", arXiv 2504.13837): RLVR raises pass@1 but narrows pass@k at large k. A claim of the
base-model regime (``--regime r1``): the base alone (0 RL steps) against GRPO from it, unbiased pass@k
for k = 1..64 from 64 samples per held-out prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.lab.base import Arm, Claim, fmt, row, seeds_of, ci, paired, per_seed, verdict

#: Samples per held-out prompt, so pass@k is estimated for k = 1..YUE_K.
YUE_K = 64


def _curve(rec: dict[str, Any]) -> dict[int, float]:
    return {int(k): float(v) for k, v in rec["final"]["pass_at"].items()}


def _at(k: int) -> Callable[[dict[str, Any]], float]:
    return lambda rec: _curve(rec)[k]


def analyse_yue(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Two rows, paired by seed (the RL arm minus the base): pass@1 up (sign +1) and pass@K down at the
    largest K every run has (sign -1); the second also names the smallest k where the RL arm's IQM
    pass@k falls below the base's ("none" if it never does)."""
    base, rl = claim.arms[0], claim.arms[1]
    ks = sorted(set.intersection(*(set(_curve(r)) for recs in runs.values() for r in recs)))
    top = ks[-1]
    at = {k: {a.name: per_seed(runs, a.name, _at(k)) for a in claim.arms} for k in ks}
    iqm = {a.name: [ci(at[k][a.name]).point for k in ks] for a in claim.arms}
    cross = next((k for k, b, r in zip(ks, iqm[base.name], iqm[rl.name]) if r < b), None)
    rows = []
    for k, sign, text in ((1, +1, "RLVR (GRPO from the base) raises held-out pass@1"),
                          (top, -1, f"RLVR narrows held-out pass@k at large k (k = {top})")):
        d = paired(at[k][rl.name], at[k][base.name])
        measured = (f"held-out pass@{k}: {base.label} {fmt(ci(at[k][base.name]))}, {rl.label} "
                    f"{fmt(ci(at[k][rl.name]))}; difference {fmt(d)}")
        if sign < 0:
            measured += ("; the IQM curves cross at k = " + str(cross) if cross is not None
                         else f"; GRPO's IQM pass@k stays above the base's up to k = {top}")
        rows.append(row(claim, text, measured, verdict(d, sign)))
    return {"rows": rows, "ks": ks, "pass_at": {str(k): v for k, v in at.items()}, "cross_k": cross,
            "greedy": {a.name: per_seed(runs, a.name, lambda r: r["final"]["greedy"]) for a in claim.arms}}


def plot_yue(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    """Held-out pass@k against k (log scale) for both arms, IQM over seeds and 95% bootstrap band; and
    the paired difference RL - base per k."""
    from benchmarks.core.stats import iqm_band
    from benchmarks.lab.figures import pyplot, to_png

    plt = pyplot()
    colors = plt.get_cmap("tab10")
    ks = np.array(res["ks"])
    per_k = {a.name: np.array([res["pass_at"][str(k)][a.name] for k in ks]).T for a in claim.arms}  # (S, K)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.9))
    for i, arm in enumerate(claim.arms):
        mid, lo, hi = iqm_band(per_k[arm.name])
        axes[0].plot(ks, mid, color=colors(i), label=arm.label)
        axes[0].fill_between(ks, lo, hi, color=colors(i), alpha=0.2)
    diff = per_k[claim.arms[1].name] - per_k[claim.arms[0].name]
    mid, lo, hi = iqm_band(diff)
    axes[1].plot(ks, mid, color=colors(3))
    axes[1].fill_between(ks, lo, hi, color=colors(3), alpha=0.2)
    axes[1].axhline(0.0, color="k", lw=0.6, ls=":")
    axes[0].set_title("held-out pass@k (unbiased, 64 samples per prompt)", fontsize=10)
    axes[1].set_title(f"{claim.arms[1].label} minus {claim.arms[0].label}, paired by seed", fontsize=10)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{claim.paper}: IQM over {len(seeds_of(runs))} seeds, 95% bootstrap band", fontsize=10)
    return to_png(fig)


CLAIM = Claim("yue", "Yue et al. 2025 (RLVR and pass@k)",
              "RLVR raises pass@1 but narrows pass@k at large k",
              (Arm("base", "base (0 RL steps)", {}, rl=False),
               Arm("grpo", "base + GRPO", {})),
              300_000, analyse_yue, plot_yue, eval_k=YUE_K)
