"""Learning-curve figures for :mod:`benchmarks.compare` (matplotlib, Agg backend: no display needed).

Each contender's curve is the IQM over seeds of greedy success at each x, with a 95% bootstrap band
(:func:`benchmarks.core.stats.iqm_band`). Runs checkpoint at slightly different step counts (SB3 rounds to
whole rollouts, GRPO to whole iterations) and at different wall times, so every run's curve is first
read on a common grid as a step function (the success of the last checkpoint at or before x; a run that
ended before x keeps its final value). A contender's curve stops where its own last run stopped (a dot
marks it), so a fast contender is never drawn flat out to a slow contender's end on the wall-clock axis;
every run of the comparison trains exactly the budget, so on the step axis every curve ends at the
budget, where the axis ends.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.core.stats import iqm_band

__all__ = ["plot_curves", "step_interpolate"]


def step_interpolate(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """(len(grid),) value of the step function through (x, y) (x sorted ascending) at each grid point."""
    idx = np.searchsorted(x, grid, side="right") - 1  # last checkpoint at or before the grid point
    return np.asarray(y)[np.clip(idx, 0, len(x) - 1)]


def plot_curves(
    records: Sequence[Mapping[str, Any]],
    contenders: Sequence[str],
    labels: Mapping[str, str],
    x: str = "num_timesteps",
    meta: Mapping[str, Any] | None = None,
    n_grid: int = 101,
) -> bytes:
    """PNG bytes: train and held-out success vs ``x`` ("num_timesteps" or "train_seconds"). Long because one
    figure's panels, bands and labels are drawn in one pass."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs_of = {name: [r for r in records if r["contender"] == name] for name in contenders}
    x_max = max((float(p[x]) for r in records for p in r["curve"]), default=1.0) or 1.0
    if x == "num_timesteps" and meta and meta.get("budget"):
        x_max = float(meta["budget"])  # the axis ends at the budget every run trained
    # Wall times span orders of magnitude between contenders, so seconds go on a log axis.
    log_x = x == "train_seconds"
    if log_x:
        x_min = min((float(p[x]) for r in records for p in r["curve"] if float(p[x]) > 0), default=1e-3)
        grid = np.geomspace(x_min, x_max, n_grid)
    else:
        grid = np.linspace(0.0, x_max, n_grid)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2), sharey=True)
    colors = plt.get_cmap("tab10")
    for ax, split in zip(axes, ("test", "train")):
        for i, name in enumerate(contenders):
            runs = runs_of.get(name) or []
            ys, ends = [], []
            for r in runs:
                pts = [p for p in r["curve"] if p.get(f"{split}_success") is not None]
                if not pts:
                    continue
                xs = np.array([float(p[x]) for p in pts])
                vals = np.array([float(p[f"{split}_success"]) for p in pts])
                ys.append(step_interpolate(xs, vals, grid))
                ends.append(xs[-1])
            if not ys:
                continue
            # Up to the end of this contender's last run, plus the point where it ends.
            end = max(ends)
            upto = int(np.searchsorted(grid, end, side="right"))
            g = np.append(grid[:upto], end) if upto < len(grid) else grid
            cols = upto if upto < len(grid) else len(grid)
            arr = np.stack(ys)[:, :cols]
            if upto < len(grid):
                arr = np.concatenate([arr, arr[:, -1:]], axis=1)
            mid, lo, hi = iqm_band(arr, seed=i)  # (T,) each
            color = colors(i % 10)
            ax.plot(g, mid, color=color, label=f"{labels.get(name, name)} (n={len(ys)})")
            ax.fill_between(g, lo, hi, color=color, alpha=0.2, linewidth=0)
            ax.plot(g[-1:], mid[-1:], "o", color=color, markersize=4)
        ax.set_title(f"greedy success, {'held-out (test)' if split == 'test' else 'train'} prompts")
        ax.set_xlabel("environment steps" if x == "num_timesteps" else "training wall seconds (log)")
        if log_x:
            ax.set_xscale("log")
            ax.set_xlim(grid[0], grid[-1])
        else:
            ax.set_xlim(0.0, x_max)
        ax.set_ylim(-0.02, 1.02)
        ax.axhline(0.95, color="grey", linestyle=":", linewidth=1, label="95% success (the threshold)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success rate (IQM over seeds, 95% CI band)")
    # One legend for both panels, below them, so it never covers a curve.
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=8, frameon=False)
    if meta:
        title = f"{meta.get('env_id', '')}: budget {meta.get('budget', 0):,} env steps per run"
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
