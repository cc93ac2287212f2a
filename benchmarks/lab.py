"""The GRPO lab (issue 11 item 3): published claims about GRPO's variants, each as a small seeded
experiment on ``rlvr/Countdown-v0`` (N = 3 numbers, grammar masks), the result stated whatever it is.

    python -m benchmarks.lab [--claim NAME[,NAME]] [--seeds 100-107] [--budget-scale 1.0] [--workers 2]
                             [--out benchmarks/results/lab]

Claims (``--claim``; every arm of a claim runs on the same seeds, so arms are compared seed by seed):

* ``dr_grpo`` (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783): dividing each
  answer's token sum by its own length (``seq_mean_token_mean``) makes *wrong* answers grow longer
  during training; a constant normaliser (``seq_mean_token_sum``) does not. And the std in GRPO's
  advantage weights too-easy and too-hard prompts up (measured on the groups of these runs).
* ``dapo`` (Yu et al. 2025, arXiv 2503.14476, sections 3.1-3.2): symmetric clipping collapses entropy;
  clip-higher keeps it and learns faster; dynamic sampling reaches a given success in fewer policy
  updates (at the price of more env steps, counted).
* ``gspo`` (Zheng et al. 2025, arXiv 2507.18071): a sequence-level ratio is more stable than the
  token-level one when each batch is reused for more epochs (higher mu).
* ``kimi`` (Kimi k1.5, arXiv 2501.12599, section 2.3.3): the length reward shortens correct answers
  without costing accuracy.
* ``kl``: beta = 0 against the lesson's range (0.001-0.04), the KL reference being a behaviour-cloned
  warm start (``agents.bc.warm_start``, DeepSeek-R1's cold start).

Method. Every run is ``GRPO("rlvr/Countdown-v0", config, policy="mlp", seed=s)`` with the
:data:`ENV_KWARGS` below and the base configuration :data:`BASE` (the best Countdown setting the code
offers: the "countdown" preset when it exists, else the mlp one, and the "lookahead" observation when the
task has it) plus what the claim changes (:data:`CLAIMS`); one torch thread per process, at most ``--workers`` processes. A callback
keeps each iteration's logged metrics (``rollout/solve_rate``, ``train/entropy``,
``train/clip_frac``, ``train/kl``, ...); a probe wrapped around the agent's per-group reward function
(``GRPO._group_rewards``: no agent code changes) records the lengths of correct and wrong answers and
each group's rewards, from which the advantage weights of both estimators are computed. After training
the run is scored on 256 held-out prompts (greedy, sampled mean@8, pass@8, all under the grammar masks).
Each run writes one JSON file (atomically), ``<out>/runs/<settings hash>_seed<s>.json``; a rerun skips
a run whose file exists with the same settings, and arms of different claims with equal settings share
runs. Statistics: per-seed values, the IQM over seeds with a 95%
percentile-bootstrap interval (:mod:`benchmarks.core.stats`); differences between arms are paired by seed.
A verdict is "agree" when the interval of the claimed difference excludes zero on the claimed side,
"disagree" when it excludes zero on the other side, "inconclusive" otherwise. Settings (budgets,
thresholds) were chosen on seeds 0-1 (0-9 are kept for choosing); the reported seeds start at 100.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.core.common import command_line, limit_threads, machine_info, write_atomically, write_json
from benchmarks.core.stats import Interval, iqm, iqm_ci

__all__ = ["Arm", "CLAIMS", "Claim", "main", "run_one", "analyse"]

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "lab"
ENV_ID = "rlvr/Countdown-v0"


def _best_countdown_setting() -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The best Countdown GRPO setting the code base offers: the "countdown" preset of
    ``agents.config.PRESETS`` when it exists (else the mlp preset), and the richest observation the
    Countdown task offers ("lookahead", else "relations"). Both go into every run's key, so stored runs
    made with another setting are rerun."""
    from agents.config import PRESETS
    from rlvr_env.tasks import countdown

    preset = "countdown" if "countdown" in PRESETS else "mlp"
    observations = getattr(countdown, "OBSERVATIONS", ("bits",))
    observation = next(o for o in ("lookahead", "relations", "bits") if o in observations)
    return preset, dict(PRESETS[preset]), {"n_numbers": 3, "observation": observation}


#: The preset every arm starts from, its values, and the env kwargs (Countdown with three numbers).
BASE_PRESET, BASE, ENV_KWARGS = _best_countdown_setting()
#: Held-out evaluation after training: prompts and sampled answers per prompt.
EVAL_PROMPTS, EVAL_K = 256, 8
#: Run-file format; bump to invalidate stored runs when the per-run record changes.
RUN_FORMAT = 1
#: The lesson's beta range (README, "The GRPO agent"): its two ends.
LESSON_BETAS = (0.001, 0.04)
#: Env steps per run (every claim; at --budget-scale 1). Chosen on seeds 0-1: the base configuration's
#: rollout solve rate climbs from ~0.05 to ~0.4 in it (0.6 at 300k), so every claim sees learning.
BUDGET = 150_000
#: GSPO: the epochs (mu) of the low (the base configuration's) and the high setting.
MU_LO, MU_HI = 4, 12


@dataclass(frozen=True)
class Arm:
    """One setting of a claim: GRPOConfig overrides (on top of :data:`BASE`) and the run options."""

    name: str
    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    warm_start: bool = False  #: behaviour-clone the policy first; the clone is the KL reference


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str
    statement: str
    arms: tuple[Arm, ...]
    budget: int  #: env steps per run at --budget-scale 1
    analyse: Callable[[Claim, dict[str, list[dict[str, Any]]]], dict[str, Any]]
    plot: Callable[[Claim, dict[str, list[dict[str, Any]]], dict[str, Any]], bytes]


# -------------------------------------------------------------------------------------------------
# One run
# -------------------------------------------------------------------------------------------------
#: Warm start: demonstrations (the task's own solutions to train prompts) and behaviour-cloning epochs.
WARM_DEMOS, WARM_EPOCHS = 64, 30


def run_key(arm: Arm, seed: int, budget: int) -> dict[str, Any]:
    """Everything that determines a run; a stored run is reused only when its key is equal. Arms of
    different claims with the same settings (e.g. the base configuration) share their runs."""
    from agents import GRPOConfig

    # Built from the preset's values (not GRPOConfig.preset, whose resolve would refill a field an arm
    # sets back to None, e.g. clip_eps_high); the mlp policy's preset fills what the base leaves unset.
    config = GRPOConfig.from_dict({**BASE, **arm.overrides}).resolve("mlp")
    return {
        "format": RUN_FORMAT,
        "seed": seed,
        "budget": budget,
        "env_id": ENV_ID,
        "env_kwargs": ENV_KWARGS,
        "config": config.to_dict(),
        "warm_start": {"demos": WARM_DEMOS, "epochs": WARM_EPOCHS} if arm.warm_start else None,
        "eval": {"prompts": EVAL_PROMPTS, "k": EVAL_K},
    }


def run_one(key: dict[str, Any]) -> dict[str, Any]:
    """Train one arm on one seed as ``key`` says; return the per-iteration record and the final scores."""
    limit_threads(1)
    import rlvr_env  # noqa: F401  (registers the env ids)
    from agents import GRPO, GRPOConfig
    from agents.objective import ADVANTAGE_ESTIMATORS

    cfg = GRPOConfig.from_dict(key["config"])
    seed = int(key["seed"])
    start = time.perf_counter()
    model = GRPO(key["env_id"], cfg, policy="mlp", seed=seed, env_kwargs=key["env_kwargs"])
    bc_loss = None
    if key["warm_start"]:
        from agents.bc import demonstrations, warm_start

        demos = demonstrations(model.env, key["warm_start"]["demos"], seed=10_000 + seed)
        bc_loss = warm_start(model, demos, epochs=key["warm_start"]["epochs"])[-1]
    warm_report = model.success("test", k=EVAL_K, n_prompts=EVAL_PROMPTS).as_dict() if key["warm_start"] else None

    # Probe: every scored batch (several per iteration under dynamic sampling) passes through
    # _group_rewards; record answer lengths by verdict and each group's rewards.
    g = cfg.group_size
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    original = model._group_rewards

    def probe(batch: Any) -> np.ndarray:
        rewards = original(batch)
        pending.append((batch.lengths.copy(), batch.correct.astype(bool).copy(), rewards.copy()))
        return rewards

    model._group_rewards = probe  # type: ignore[method-assign]
    # Advantage mass by number of correct answers in the group (0..G): summed |A| per group under the
    # std-normalised and the mean-only estimator, over untied groups; and the count of such groups.
    mass = {"grpo": np.zeros(g + 1), "dr_grpo": np.zeros(g + 1)}
    untied = np.zeros(g + 1)
    tied = np.zeros(g + 1)
    iters: list[dict[str, float]] = []
    keys = ("rollout/solve_rate", "rollout/ep_len_mean", "rollout/zero_std_group_frac", "train/entropy",
            "train/clip_frac", "train/kl", "train/policy_loss", "time/total_timesteps",
            "rollout/sampling_rounds", "rollout/trained_groups")

    def callback(m: Any, metrics: dict[str, float]) -> None:
        lengths = np.concatenate([p[0] for p in pending])
        correct = np.concatenate([p[1] for p in pending])
        rewards = np.concatenate([p[2] for p in pending])  # (groups, G)
        pending.clear()
        row = {k.split("/")[1]: float(metrics[k]) for k in keys if k in metrics}
        row["updated"] = float("train/entropy" in metrics)
        row["len_correct"] = float(lengths[correct].mean()) if correct.any() else float("nan")
        row["len_wrong"] = float(lengths[~correct].mean()) if (~correct).any() else float("nan")
        row["frac_correct"] = float(correct.mean())
        iters.append(row)
        n_correct = correct.reshape(rewards.shape).sum(axis=1)  # (groups,)
        is_tied = np.all(rewards == rewards[:, :1], axis=1)
        for name in mass:
            adv = ADVANTAGE_ESTIMATORS[name](rewards, cfg.adv_eps, cfg.unbiased_std)
            np.add.at(mass[name], n_correct[~is_tied], np.abs(adv[~is_tied]).sum(axis=1))
        np.add.at(untied, n_correct[~is_tied], 1)
        np.add.at(tied, n_correct[is_tied], 1)

    model.learn(int(key["budget"]), callback=callback)
    train_seconds = time.perf_counter() - start
    report = model.success("test", k=EVAL_K, n_prompts=EVAL_PROMPTS)
    return {
        "key": key,
        "iterations": iters,
        "final": report.as_dict(),
        "warm": warm_report,
        "bc_final_loss": bc_loss,
        "adv_mass": {k: v.tolist() for k, v in mass.items()},
        "untied_groups": untied.tolist(),
        "tied_groups": tied.tolist(),
        "num_timesteps": model.num_timesteps,
        "seconds": train_seconds,
        "eval_seconds": time.perf_counter() - start - train_seconds,
    }


def _run_path(out: Path, key: dict[str, Any]) -> Path:
    import hashlib

    settings = {k: v for k, v in key.items() if k != "seed"}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return out / "runs" / f"{digest}_seed{key['seed']}.json"


def _load_done(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return rec if rec.get("key") == json.loads(json.dumps(key)) else None


def _run_and_store(args: tuple[str, dict[str, Any]]) -> str:
    path, key = Path(args[0]), args[1]
    rec = run_one(key)
    write_json(path, rec)
    return str(path)


# -------------------------------------------------------------------------------------------------
# Statistics helpers
# -------------------------------------------------------------------------------------------------
def _frac_window(n: int, frac: float, last: bool) -> slice:
    k = max(1, int(round(n * frac)))
    return slice(n - k, n) if last else slice(0, k)


def series(rec: dict[str, Any], name: str) -> np.ndarray:
    return np.array([it.get(name, np.nan) for it in rec["iterations"]], dtype=float)


def window_mean(rec: dict[str, Any], name: str, last: bool, frac: float = 0.25) -> float:
    """Mean of a per-iteration metric over the first (or last) ``frac`` of the run's iterations."""
    s = series(rec, name)
    w = s[_frac_window(len(s), frac, last)]
    w = w[np.isfinite(w)]
    return float(w.mean()) if w.size else float("nan")


def ci(values: list[float] | np.ndarray, seed: int = 0) -> Interval:
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan)
    return iqm_ci(arr, seed=seed)


def paired(a: list[float], b: list[float]) -> Interval:
    """IQM and interval of the per-seed differences a - b (seeds where both are finite)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return ci(d)


def verdict(diff: Interval, sign: int) -> str:
    """"agree" when the claimed difference (sign +1: positive, -1: negative) excludes 0 on its side."""
    if np.isnan(diff.point):
        return "inconclusive"
    lo, hi = diff.low * sign, diff.high * sign
    if sign < 0:
        lo, hi = hi, lo
    if lo > 0:
        return "agree"
    if hi < 0:
        return "disagree"
    return "inconclusive"


def _by_seed(runs: dict[str, list[dict[str, Any]]], arm: str) -> dict[int, dict[str, Any]]:
    return {r["key"]["seed"]: r for r in runs[arm]}


def _seeds(runs: dict[str, list[dict[str, Any]]]) -> list[int]:
    common = None
    for recs in runs.values():
        s = {r["key"]["seed"] for r in recs}
        common = s if common is None else common & s
    return sorted(common or [])


def per_seed(runs: dict[str, list[dict[str, Any]]], arm: str, fn: Callable[[dict[str, Any]], float]) -> list[float]:
    recs = _by_seed(runs, arm)
    return [float(fn(recs[s])) for s in _seeds(runs)]


def _fmt(x: Interval, digits: int = 2) -> str:
    return x.fmt(digits)


def solve_auc(rec: dict[str, Any]) -> float:
    """Mean rollout solve rate over the run (area under the learning curve per env step)."""
    s = series(rec, "solve_rate")
    steps = series(rec, "total_timesteps")
    if len(s) == 0:
        return float("nan")
    widths = np.diff(np.concatenate([[0.0], steps]))
    return float(np.sum(s * widths) / steps[-1])


def first_reach(rec: dict[str, Any], threshold: float, window: int = 3) -> tuple[float, float]:
    """(policy updates, env steps) until the ``window``-iteration mean rollout solve rate first reaches
    ``threshold``; (nan, nan) if never."""
    s = series(rec, "solve_rate")
    upd = np.cumsum(series(rec, "updated"))
    steps = series(rec, "total_timesteps")
    for i in range(window - 1, len(s)):
        if s[i - window + 1 : i + 1].mean() >= threshold:
            return float(upd[i]), float(steps[i])
    return float("nan"), float("nan")


# -------------------------------------------------------------------------------------------------
# Plot helpers
# -------------------------------------------------------------------------------------------------
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    _plt().close(fig)
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


def _curves_figure(claim: Claim, runs: dict[str, list[dict[str, Any]]], panels: list[tuple[str, str]],
                   extra: Callable[[Any], None] | None = None) -> Any:
    """One panel per (metric, title) against env steps (IQM band per arm), plus ``extra(ax)`` if given."""
    plt = _plt()
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
    n = len(_seeds(runs))
    fig.suptitle(f"{claim.paper}: IQM over {n} seeds, 95% bootstrap band", fontsize=10)
    return fig


# -------------------------------------------------------------------------------------------------
# Claims: analysis (numbers, verdicts) and figures
# -------------------------------------------------------------------------------------------------
def _row(claim: Claim, text: str, measured: str, v: str) -> dict[str, str]:
    return {"claim": text, "paper": claim.paper, "measured": measured, "verdict": v}


def analyse_dr_grpo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    growth = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "len_wrong", True)
                               - window_mean(r, "len_wrong", False)) for a in claim.arms}
    g_pa, g_c = ci(growth["per_answer"]), ci(growth["constant"])
    diff = paired(growth["per_answer"], growth["constant"])
    v1 = verdict(diff, +1)
    if v1 == "agree" and verdict(g_pa, +1) != "agree":
        v1 = "inconclusive"  # longer than under the constant normaliser, but not growing
    rows = [_row(claim, "per-answer length normalisation makes wrong answers grow longer; a constant "
                 "normaliser does not",
                 f"wrong-answer length, last quarter - first quarter of training (tokens): per-answer "
                 f"{_fmt(g_pa)}, constant {_fmt(g_c)}; paired difference {_fmt(diff)}", v1)]
    # Std normalisation: share of the advantage mass on too-hard (<= 1/4 correct) and too-easy
    # (>= 3/4 correct) untied groups, under GRPO's std-normalised vs the mean-only advantage, computed
    # on every group of these runs (both arms).
    share: dict[str, list[float]] = {"grpo": [], "dr_grpo": []}
    for s in _seeds(runs):
        for est in share:
            m = sum(np.asarray(_by_seed(runs, a.name)[s]["adv_mass"][est]) for a in claim.arms)
            g = len(m) - 1
            k = np.arange(g + 1)
            extreme = (k <= g / 4) | (k >= 3 * g / 4)
            share[est].append(float(m[extreme].sum() / max(m.sum(), 1e-12)))
    sh_std, sh_mean = ci(share["grpo"]), ci(share["dr_grpo"])
    d2 = paired(share["grpo"], share["dr_grpo"])
    rows.append(_row(claim, "std normalisation weights too-easy and too-hard prompts up",
                     f"share of the summed absolute advantage on groups with <= 1/4 or >= 3/4 correct: std-normalised "
                     f"{_fmt(sh_std)}, mean-only {_fmt(sh_mean)} (same groups); difference {_fmt(d2)}",
                     verdict(d2, +1)))
    return {"rows": rows, "wrong_length_growth": growth, "extreme_share": share}


def plot_dr_grpo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    plt = _plt()
    colors = plt.get_cmap("tab10")
    seeds = _seeds(runs)

    def mass_panel(ax: Any) -> None:
        m = {est: sum(np.asarray(_by_seed(runs, a.name)[s]["adv_mass"][est]) for a in claim.arms for s in seeds)
             for est in ("grpo", "dr_grpo")}
        k = np.arange(len(m["grpo"]))
        ok = m["dr_grpo"] > 0
        ax.plot(k[ok] / (len(k) - 1), m["grpo"][ok] / m["dr_grpo"][ok], "o-", color=colors(3))
        ax.set_title("sum |A|, (r - mean)/std over r - mean, by group", fontsize=10)
        ax.set_xlabel("fraction of the group correct (untied groups, all runs)")
        ax.set_yscale("log")

    return _png(_curves_figure(claim, runs, [("len_wrong", "wrong answers: mean length (tokens)"),
                                             ("len_correct", "correct answers: mean length (tokens)"),
                                             ("solve_rate", "rollout solve rate")], mass_panel))


#: DAPO: the rollout solve rate (3-iteration mean) that "reaches a given success" means (chosen on
#: seeds 0-1: reached by most runs of every arm within the budget).
DAPO_THRESHOLD = 0.3


def analyse_dapo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    ent_end = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "entropy", True)) for a in claim.arms}
    ent_start = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "entropy", False, 0.1))
                 for a in claim.arms}
    drop_sym = ci(np.array(ent_end["symmetric"]) / np.array(ent_start["symmetric"]))
    d_ent = paired(ent_end["clip_higher"], ent_end["symmetric"])
    rows = [_row(claim, "symmetric clipping collapses entropy; clip-higher keeps it",
                 f"entropy (nats/token), last quarter: symmetric {_fmt(ci(ent_end['symmetric']))} "
                 f"({_fmt(drop_sym)} of its first tenth), clip-higher {_fmt(ci(ent_end['clip_higher']))}; "
                 f"difference {_fmt(d_ent)}", verdict(d_ent, +1))]
    auc = {a.name: per_seed(runs, a.name, solve_auc) for a in claim.arms}
    d_auc = paired(auc["clip_higher"], auc["symmetric"])
    rows.append(_row(claim, "clip-higher learns faster",
                     f"mean rollout solve rate over training: symmetric {_fmt(ci(auc['symmetric']))}, "
                     f"clip-higher {_fmt(ci(auc['clip_higher']))}; difference {_fmt(d_auc)}",
                     verdict(d_auc, +1)))
    reach = {a.name: [first_reach(_by_seed(runs, a.name)[s], DAPO_THRESHOLD) for s in _seeds(runs)]
             for a in claim.arms}
    upd = {k: [u for u, _ in v] for k, v in reach.items()}
    stp = {k: [s for _, s in v] for k, v in reach.items()}
    both = [i for i in range(len(_seeds(runs)))
            if np.isfinite(upd["clip_higher"][i]) and np.isfinite(upd["dynamic"][i])]
    n_reached = {k: int(np.isfinite(v).sum()) for k, v in upd.items()}
    d_upd = paired([upd["dynamic"][i] for i in both], [upd["clip_higher"][i] for i in both]) if both \
        else Interval(float("nan"), float("nan"), float("nan"))
    r_steps = ci([stp["dynamic"][i] / stp["clip_higher"][i] for i in both]) if both \
        else Interval(float("nan"), float("nan"), float("nan"))
    n = len(_seeds(runs))
    rows.append(_row(claim, f"dynamic sampling reaches a given success (solve rate {DAPO_THRESHOLD}) in "
                     "fewer policy updates, at more env steps",
                     f"updates to reach it: clip-higher {_fmt(ci(upd['clip_higher']), 1)} "
                     f"({n_reached['clip_higher']}/{n} seeds), + dynamic sampling "
                     f"{_fmt(ci(upd['dynamic']), 1)} ({n_reached['dynamic']}/{n}); paired difference "
                     f"{_fmt(d_upd, 1)} on {len(both)} seeds; env steps ratio (dynamic / clip-higher) "
                     f"{_fmt(r_steps)}", verdict(d_upd, -1)))
    return {"rows": rows, "entropy_end": ent_end, "entropy_start": ent_start, "solve_auc": auc,
            "updates_to_threshold": upd, "steps_to_threshold": stp}


def plot_dapo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    colors = _plt().get_cmap("tab10")

    def updates_panel(ax: Any) -> None:
        for i, arm in enumerate(claim.arms):
            for rec in runs.get(arm.name, []):
                ax.plot(np.cumsum(series(rec, "updated")), series(rec, "solve_rate"), color=colors(i),
                        alpha=0.5, lw=0.8)
        ax.axhline(DAPO_THRESHOLD, color="k", lw=0.6, ls=":")
        ax.set_xlabel("policy updates")
        ax.set_title("rollout solve rate per run vs updates", fontsize=10)

    return _png(_curves_figure(claim, runs, [("entropy", "policy entropy (nats/token)"),
                                             ("solve_rate", "rollout solve rate"),
                                             ("clip_frac", "clip fraction")], updates_panel))


def collapsed(rec: dict[str, Any]) -> bool:
    """A run collapses when its last-quarter rollout solve rate is below half of its best 5-iteration
    mean (it learned and then lost it), or its entropy falls below 0.01 nats with solve rate < 0.5."""
    s = series(rec, "solve_rate")
    if len(s) < 5:
        return False
    best = max(s[i : i + 5].mean() for i in range(len(s) - 4))
    end = window_mean(rec, "solve_rate", True)
    ent = window_mean(rec, "entropy", True)
    return bool(end < 0.5 * best or (ent < 0.01 and end < 0.5))


def analyse_gspo(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    n = len(_seeds(runs))
    final = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    clip = {a.name: per_seed(runs, a.name, lambda r: float(np.nanmean(series(r, "clip_frac")))) for a in claim.arms}
    coll = {a.name: int(sum(collapsed(r) for r in runs[a.name])) for a in claim.arms}
    drop_tok = np.array(final["token_lo"]) - np.array(final["token_hi"])
    drop_seq = np.array(final["gspo_lo"]) - np.array(final["gspo_hi"])
    d = paired(list(drop_tok), list(drop_seq))
    measured = (
        f"held-out sampled success, mu = {MU_LO} -> {MU_HI}: token {_fmt(ci(final['token_lo']))} -> "
        f"{_fmt(ci(final['token_hi']))}, sequence {_fmt(ci(final['gspo_lo']))} -> "
        f"{_fmt(ci(final['gspo_hi']))}; loss from raising mu, token minus sequence: {_fmt(d)}; "
        f"collapsed runs at mu = {MU_LO}, {MU_HI}: token {coll['token_lo']}, {coll['token_hi']}, sequence "
        f"{coll['gspo_lo']}, {coll['gspo_hi']} of {n}; clip fraction at mu = {MU_HI}: token "
        f"{_fmt(ci(clip['token_hi']), 3)}, sequence {_fmt(ci(clip['gspo_hi']), 3)}"
    )
    rows = [_row(claim, "a sequence-level ratio stays stable at higher mu; the token-level ratio does not",
                 measured, verdict(d, +1))]
    return {"rows": rows, "final_sampled": final, "clip_frac": clip, "collapsed": coll}


def plot_gspo(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return _png(_curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                             ("clip_frac", "clip fraction"),
                                             ("entropy", "policy entropy (nats/token)")]))


#: Kimi: the largest loss of held-out sampled success that still counts as "without costing accuracy"
#: (the lower end of the interval of the paired difference must lie above minus this).
KIMI_MARGIN = 0.05


def analyse_kimi(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    length = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "len_correct", True)) for a in claim.arms}
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    d_len = paired(length["length_term"], length["no_length"])
    d_acc = paired(acc["length_term"], acc["no_length"])
    v_len = verdict(d_len, -1)
    v_acc = "agree" if (np.isfinite(d_acc.low) and d_acc.low > -KIMI_MARGIN) else (
        "disagree" if d_acc.high < -KIMI_MARGIN else "inconclusive")
    v = v_len if v_len != "agree" else v_acc
    rows = [_row(claim, "the length term shortens correct answers without costing accuracy",
                 f"correct-answer length, last quarter (tokens): without {_fmt(ci(length['no_length']))}, "
                 f"with {_fmt(ci(length['length_term']))}, difference {_fmt(d_len)}; held-out sampled "
                 f"success: without {_fmt(ci(acc['no_length']))}, with {_fmt(ci(acc['length_term']))}, "
                 f"difference {_fmt(d_acc)} (no cost: interval above -{KIMI_MARGIN})", v)]
    return {"rows": rows, "len_correct_end": length, "final_sampled": acc}


def plot_kimi(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    return _png(_curves_figure(claim, runs, [("len_correct", "correct answers: mean length (tokens)"),
                                             ("len_wrong", "wrong answers: mean length (tokens)"),
                                             ("solve_rate", "rollout solve rate")]))


def _label(claim: Claim, arm: str) -> str:
    return next(a.label for a in claim.arms if a.name == arm)


def analyse_kl(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    acc = {a.name: per_seed(runs, a.name, lambda r: r["final"]["sampled"]) for a in claim.arms}
    greedy = {a.name: per_seed(runs, a.name, lambda r: r["final"]["greedy"]) for a in claim.arms}
    kl = {a.name: per_seed(runs, a.name, lambda r: window_mean(r, "kl", True)) for a in claim.arms}
    warm = per_seed(runs, "beta0", lambda r: r["warm"]["sampled"])
    rows = []
    parts = [f"warm start {_fmt(ci(warm))}"] + [f"{a.label} {_fmt(ci(acc[a.name]))}" for a in claim.arms]
    lesson = [a.name for a in claim.arms if a.name != "beta0"]
    diffs = {n: paired(acc["beta0"], acc[n]) for n in lesson}
    vs = {verdict(d, +1) for d in diffs.values()}
    # The lesson's claim: beta in its range does better than beta = 0 (keeps the policy near the
    # reference, preventing drift/collapse). Agree if beta=0 is worse than every lesson beta.
    v = "agree" if vs == {"disagree"} else ("disagree" if "agree" in vs else "inconclusive")
    rows.append(_row(claim, "a KL penalty in the lesson's range (0.001-0.04) to the warm-started reference "
                     "trains better than beta = 0",
                     "held-out sampled success: " + ", ".join(parts) + "; beta=0 minus "
                     + ", ".join(f"{_label(claim, n)}: {_fmt(d)}" for n, d in diffs.items()), v))
    kd = paired(kl["beta0"], kl["beta0.04"])
    rows.append(_row(claim, "the penalty keeps the policy near the reference",
                     "KL to the reference (k3, last quarter): " + ", ".join(
                         f"{a.label} {_fmt(ci(kl[a.name]), 3)}" for a in claim.arms)
                     + f"; beta=0 minus beta=0.04: {_fmt(kd, 3)}", verdict(kd, +1)))
    return {"rows": rows, "final_sampled": acc, "final_greedy": greedy, "kl_end": kl, "warm_sampled": warm}


def plot_kl(claim: Claim, runs: dict[str, list[dict[str, Any]]], res: dict[str, Any]) -> bytes:
    fig = _curves_figure(claim, runs, [("solve_rate", "rollout solve rate"),
                                       ("kl", "KL to the warm-started reference"),
                                       ("entropy", "policy entropy (nats/token)")])
    return _png(fig)


CLAIMS: dict[str, Claim] = {
    c.name: c
    for c in (
        Claim("dr_grpo", "Dr. GRPO (Liu et al. 2025)",
              "length normalisation lengthens wrong answers; std normalisation up-weights easy/hard prompts",
              (Arm("per_answer", "per-answer 1/|o| (seq_mean_token_mean)",
                   {"loss_aggregation": "seq_mean_token_mean"}),
               Arm("constant", "constant 1/L_max (seq_mean_token_sum)",
                   {"loss_aggregation": "seq_mean_token_sum"})),
              BUDGET, analyse_dr_grpo, plot_dr_grpo),
        Claim("dapo", "DAPO (Yu et al. 2025)",
              "clip-higher keeps entropy and learns faster; dynamic sampling needs fewer updates",
              (Arm("symmetric", "clip [0.8, 1.2]",
                   {"beta": 0.0, "clip_eps_high": None, "dynamic_sampling": False}),
               Arm("clip_higher", "clip-higher [0.8, 1.28]",
                   {"beta": 0.0, "clip_eps_high": 0.28, "dynamic_sampling": False}),
               Arm("dynamic", "clip-higher + dynamic sampling",
                   {"beta": 0.0, "clip_eps_high": 0.28, "dynamic_sampling": True})),
              BUDGET, analyse_dapo, plot_dapo),
        Claim("gspo", "GSPO (Zheng et al. 2025)",
              "sequence-level ratio stays stable at high mu",
              (Arm("token_lo", f"token ratio, mu={MU_LO}", {"epochs": MU_LO}),
               Arm("token_hi", f"token ratio, mu={MU_HI}", {"epochs": MU_HI}),
               Arm("gspo_lo", f"sequence ratio (GSPO), mu={MU_LO}",
                   {"epochs": MU_LO, "policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4}),
               Arm("gspo_hi", f"sequence ratio (GSPO), mu={MU_HI}",
                   {"epochs": MU_HI, "policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4})),
              BUDGET, analyse_gspo, plot_gspo),
        Claim("kimi", "Kimi k1.5 (2025)",
              "the length term shortens correct answers at no accuracy cost",
              (Arm("no_length", "no length term", {"length_weight": 0.0}),
               Arm("length_term", "length term, weight 0.1", {"length_weight": 0.1})),
              BUDGET, analyse_kimi, plot_kimi),
        Claim("kl", "the lesson (DeepSeekMath beta) vs beta = 0 (DAPO, Dr. GRPO)",
              "beta = 0 vs 0.001-0.04 with a warm-started reference",
              tuple(Arm(f"beta{b:g}", f"beta={b:g}", {"beta": float(b)}, warm_start=True)
                    for b in (0.0, *LESSON_BETAS)),
              BUDGET, analyse_kl, plot_kl),
    )
}


# -------------------------------------------------------------------------------------------------
# Driver
# -------------------------------------------------------------------------------------------------
def parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                raise ValueError(f"seed range {part!r} must read LOW-HIGH with LOW <= HIGH")
            out.extend(range(int(lo), int(hi) + 1))
        elif part.isdigit():
            out.append(int(part))
        else:
            raise ValueError(f"seed {part!r} must be a non-negative integer or a range LOW-HIGH")
    if len(out) < 2:
        raise ValueError(f"--seeds {text!r} names {len(out)} seed(s); intervals need at least 2")
    return out


def run_claims(names: list[str], seeds: list[int], scale: float, workers: int, out: Path,
               log: Callable[[str], None] = print) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Run (or reuse from disk) every arm x seed of the named claims; return the records by claim, arm."""
    todo: list[tuple[str, dict[str, Any]]] = []
    keys: dict[tuple[str, str, int], tuple[Path, dict[str, Any]]] = {}
    for name in names:
        claim = CLAIMS[name]
        budget = max(1, int(round(claim.budget * scale)))
        for seed in seeds:
            for arm in claim.arms:
                key = run_key(arm, seed, budget)
                path = _run_path(out, key)
                keys[(name, arm.name, seed)] = (path, key)
                if _load_done(path, key) is None and str(path) not in {p for p, _ in todo}:
                    todo.append((str(path), key))
    distinct = len({p for p, _ in keys.values()})
    log(f"lab: {len(keys)} arm-seed pairs, {distinct} distinct run(s): {distinct - len(todo)} found on disk, "
        f"{len(todo)} to run with {workers} worker(s)")
    t0 = time.perf_counter()
    if todo:
        if workers == 1:
            for i, job in enumerate(todo):
                _run_and_store(job)
                log(f"  [{i + 1}/{len(todo)}] {Path(job[0]).relative_to(out)} ({time.perf_counter() - t0:.0f} s)")
        else:
            import multiprocessing as mp

            with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
                for i, path in enumerate(pool.map(_run_and_store, todo)):
                    log(f"  [{i + 1}/{len(todo)}] {Path(path).relative_to(out)} ({time.perf_counter() - t0:.0f} s)")
    records: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for (name, arm, seed), (path, key) in keys.items():
        rec = _load_done(path, key)
        if rec is None:
            raise RuntimeError(f"run {path} did not produce a record")
        records.setdefault(name, {}).setdefault(arm, []).append(rec)
    return records


def stored_records(name: str, seeds: list[int], scale: float, out: Path
                   ) -> dict[str, list[dict[str, Any]]] | None:
    """The stored runs of claim ``name`` on ``seeds`` at ``scale``, by arm; None if any is missing."""
    claim = CLAIMS[name]
    budget = max(1, int(round(claim.budget * scale)))
    records: dict[str, list[dict[str, Any]]] = {}
    for arm in claim.arms:
        for seed in seeds:
            key = run_key(arm, seed, budget)
            rec = _load_done(_run_path(out, key), key)
            if rec is None:
                return None
            records.setdefault(arm.name, []).append(rec)
    return records


def analyse(name: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    claim = CLAIMS[name]
    res = claim.analyse(claim, runs)
    res["seeds"] = _seeds(runs)
    res["budget"] = runs[claim.arms[0].name][0]["key"]["budget"]
    res["seconds"] = {a.name: [r["seconds"] + r["eval_seconds"] for r in runs[a.name]] for a in claim.arms}
    # Standalone cost of the claim (every distinct run it needs, shared ones included), on 2 workers.
    distinct = {json.dumps(r["key"], sort_keys=True): r["seconds"] + r["eval_seconds"]
                for a in claim.arms for r in runs[a.name]}
    res["minutes_on_2_workers"] = sum(distinct.values()) / 2 / 60
    res["distinct_runs"] = len(distinct)
    res["arms"] = {a.name: {"label": a.label, "overrides": a.overrides, "warm_start": a.warm_start}
                   for a in claim.arms}
    return res


def table(results: dict[str, dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "| claim | paper | what we measured (IQM over seeds [95% bootstrap CI]) | verdict |",
        "|---|---|---|---|",
    ]
    for name in CLAIMS:
        if name not in results:
            continue
        for row in results[name]["rows"]:
            lines.append(f"| {row['claim']} | {row['paper']} | {row['measured']} | **{row['verdict']}** |")
    seeds = sorted({s for r in results.values() for s in r["seeds"]})
    lines += [
        "",
        f"Seeds {', '.join(map(str, seeds))} (settings chosen on seeds 0-1; seeds 0-9 are reserved for choosing). Env `{ENV_ID}` with "
        f"`{json.dumps(ENV_KWARGS)}`, grammar masks on, `policy=\"mlp\"`; every arm starts from the "
        f"`{BASE_PRESET}` preset (`{json.dumps(BASE, sort_keys=True)}`) and changes what its claim names. Budgets (env steps per run): "
        + ", ".join(f"{n} {results[n]['budget']:,}" for n in CLAIMS if n in results)
        + f". Held-out score: {EVAL_PROMPTS} test prompts, sampled = mean over {EVAL_K} answers. "
        + "Figures: " + ", ".join(f"[{n}]({meta['out']}/{n}.png)" for n in CLAIMS if n in results)
        + ". Time per claim (its distinct runs, training + evaluation, summed / 2 workers; the machine was "
        "shared, so this overstates an idle 2-core machine): "
        + ", ".join(f"{n} {results[n]['distinct_runs']} runs, {results[n]['minutes_on_2_workers']:.1f} min"
                    for n in CLAIMS if n in results)
        + f". Command: `{meta['command']}`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claim", default="all", help=f"comma-separated, from {list(CLAIMS)}, or 'all'")
    parser.add_argument("--seeds", default="100-107", help="reported seeds (choose settings on 0-9)")
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply every claim's budget")
    parser.add_argument("--workers", type=int, default=2, help="parallel runs (processes)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    names = list(CLAIMS) if args.claim == "all" else [c.strip() for c in args.claim.split(",") if c.strip()]
    unknown = [n for n in names if n not in CLAIMS]
    if unknown or not names:
        raise ValueError(f"--claim {args.claim!r}: unknown claim(s) {unknown}; choose from {list(CLAIMS)}")
    if not (args.budget_scale > 0 and np.isfinite(args.budget_scale)):
        raise ValueError(f"--budget-scale={args.budget_scale!r} must be a positive number")
    if args.workers < 1:
        raise ValueError(f"--workers={args.workers!r} must be at least 1")
    seeds = parse_seeds(args.seeds)
    out: Path = args.out
    run_claims(names, seeds, args.budget_scale, args.workers, out)
    # The summary covers every claim whose runs (these seeds, this budget) are all on disk, analysed
    # afresh from the run files, so running one claim never leaves another's figures stale.
    results: dict[str, Any] = {}
    for name in CLAIMS:
        records = stored_records(name, seeds, args.budget_scale, out)
        if records is None:
            continue
        res = analyse(name, records)
        write_atomically(out / f"{name}.png", CLAIMS[name].plot(CLAIMS[name], records, res))
        results[name] = res
    root = Path(__file__).resolve().parent.parent
    shown = out.resolve().relative_to(root) if out.resolve().is_relative_to(root) else out
    # The command that reproduces the whole table (any --claim subset makes the same runs).
    command = f"python -m benchmarks.lab --seeds {args.seeds}" + (
        f" --budget-scale {args.budget_scale:g}" if args.budget_scale != 1.0 else "")
    meta = {"command": command, "invoked": command_line("benchmarks.lab", argv), "machine": machine_info(),
            "out": str(shown)}
    write_json(out / "lab.json", {"meta": meta, "claims": results})
    text = table(results, meta)
    write_atomically(out / "lab.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
