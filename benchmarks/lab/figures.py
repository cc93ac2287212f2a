"""Figures of the lab: IQM bands over seeds of per-iteration metrics, one panel per metric."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.lab.base import Claim, seeds_of, series


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (imported when a figure is drawn, not with the lab)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def to_png(fig: Any) -> bytes:
    """``fig`` as PNG bytes without a timestamp (the same runs give the same file); closes it."""
    import io

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    pyplot().close(fig)
    return buf.getvalue()


def _band(ax: Any, runs: list[dict[str, Any]], metric: str, label: str, color: Any, n_grid: int = 60) -> None:
    """IQM over seeds (and 95% bootstrap band) of a per-iteration metric against env steps; each run's
    curve is read on a common step grid (last value at or before each point), NaN where undefined."""
    from benchmarks.core.plots import step_interpolate
    from benchmarks.core.stats import iqm_band

    if not runs:
        return
    end = min(series(r, "total_timesteps")[-1] for r in runs)
    grid = np.linspace(0, end, n_grid)
    curves = []
    for r in runs:
        x, y = series(r, "total_timesteps"), series(r, metric)
        ok = np.isfinite(y)
        if ok.sum() == 0:
            continue
        v = step_interpolate(x[ok], y[ok], grid)
        v[grid < x[ok][0]] = np.nan
        curves.append(v)
    if not curves:
        return
    arr = np.array(curves)
    keep = np.all(np.isfinite(arr), axis=0)
    if not keep.any():
        return
    mid, lo, hi = iqm_band(arr[:, keep])
    ax.plot(grid[keep], mid, color=color, label=label)
    ax.fill_between(grid[keep], lo, hi, color=color, alpha=0.2)


def curves_figure(claim: Claim, runs: dict[str, list[dict[str, Any]]], panels: list[tuple[str, str]],
                  extra: Callable[[Any], None] | None = None) -> Any:
    """One panel per (metric, title) against env steps (IQM band per arm), plus ``extra(ax)`` if given."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    n_axes = len(panels) + (extra is not None)
    fig, axes = plt.subplots(1, n_axes, figsize=(4.6 * n_axes, 3.8))
    axes = np.atleast_1d(axes)
    colors = plt.get_cmap("tab10")
    for ax, (metric, title) in zip(axes, panels):
        for i, arm in enumerate(claim.arms):
            _band(ax, runs.get(arm.name, []), metric, arm.label, colors(i))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
        ax.grid(alpha=0.3)
    with_lines = [ax for ax in axes[: len(panels)] if ax.get_legend_handles_labels()[0]]
    if with_lines:
        with_lines[0].legend(fontsize=8)
    if extra is not None:
        extra(axes[-1])
        axes[-1].grid(alpha=0.3)
    n = len(seeds_of(runs))
    fig.suptitle(f"{claim.paper}: IQM over {n} seeds, 95% bootstrap band", fontsize=10)
    return fig
