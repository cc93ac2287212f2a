"""Learning-curve figures for :mod:`benchmarks.compare` (matplotlib, Agg backend: no display needed).

Each contender's curve is the IQM over seeds of greedy success at each x, with a 95% bootstrap band
(:func:`benchmarks.stats.iqm_band`). Runs checkpoint at slightly different step counts (SB3 rounds to
whole rollouts, GRPO to whole iterations) and at different wall times, so every run's curve is first
read on a common grid as a step function (the success of the last checkpoint at or before x; a run that
ended before x keeps its final value).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.stats import iqm_band

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
    """PNG bytes: train and held-out success vs ``x`` ("num_timesteps" or "train_seconds")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs_of = {name: [r for r in records if r["contender"] == name] for name in contenders}
    x_max = max((float(p[x]) for r in records for p in r["curve"]), default=1.0) or 1.0
    # Wall times span orders of magnitude between contenders, so seconds go on a log axis.
    log_x = x == "train_seconds"
    if log_x:
        x_min = min((float(p[x]) for r in records for p in r["curve"] if float(p[x]) > 0), default=1e-3)
        grid = np.geomspace(x_min, x_max, n_grid)
    else:
        grid = np.linspace(0.0, x_max, n_grid)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    colors = plt.get_cmap("tab10")
    for ax, split in zip(axes, ("test", "train")):
        for i, name in enumerate(contenders):
            runs = runs_of.get(name) or []
            if not runs:
                continue
            ys = []
            for r in runs:
                pts = [p for p in r["curve"] if p.get(f"{split}_success") is not None]
                if not pts:
                    continue
                xs = np.array([float(p[x]) for p in pts])
                vals = np.array([float(p[f"{split}_success"]) for p in pts])
                ys.append(step_interpolate(xs, vals, grid))
            if not ys:
                continue
            mid, lo, hi = iqm_band(np.stack(ys), seed=i)  # (T,) each
            color = colors(i % 10)
            ax.plot(grid, mid, color=color, label=f"{labels.get(name, name)} (n={len(ys)})")
            ax.fill_between(grid, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_title(f"greedy success, {'held-out (test)' if split == 'test' else 'train'} prompts")
        ax.set_xlabel("environment steps" if x == "num_timesteps" else "training wall seconds (log)")
        if log_x:
            ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.axhline(0.95, color="grey", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success rate (IQM over seeds, 95% CI band)")
    axes[0].legend(loc="lower right", fontsize=8)
    if meta:
        title = f"{meta.get('env_id', '')}: budget {meta.get('budget', 0):,} env steps per run"
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
