"""The lab's common ground: the setting every arm starts from, arms and claims as data, and the
statistics every claim's analysis uses (per-seed values, IQM intervals, paired differences, verdicts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.core.stats import Interval, ci, paired, verdict

ENV_ID = "rlvr/Countdown-v0"


def _best_countdown_setting() -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The best Countdown GRPO setting the code base offers: the "countdown" preset of
    ``agents.grpo.config.PRESETS`` when it exists (else the mlp preset), and the richest observation the
    Countdown task offers ("lookahead", else "relations"). Both go into every run's key, so stored runs
    made with another setting are rerun."""
    from agents.grpo import PRESETS
    from rlvr_env.tasks import countdown

    preset = "countdown" if "countdown" in PRESETS else "mlp"
    observations = getattr(countdown, "OBSERVATIONS", ("bits",))
    observation = next(o for o in ("lookahead", "relations", "bits") if o in observations)
    return preset, dict(PRESETS[preset]), {"n_numbers": 3, "observation": observation}


#: The preset every arm starts from, its values, and the env kwargs (Countdown with three numbers).
BASE_PRESET, BASE, ENV_KWARGS = _best_countdown_setting()
#: Held-out evaluation after training: prompts and sampled answers per prompt.
EVAL_PROMPTS, EVAL_K = 256, 8
#: The tag every stored lab run's spec carries: fixed, since changing it would change every run's name (a
#: change of what a run measures bumps :data:`benchmarks.core.store.CODE_VERSION` instead).
KEY_TAG = 1
#: The lesson's beta range (``GRPOConfig.beta``: 0.001-0.04): its two ends.
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
    #: False: the arm is its start alone, scored without any RL step (the ``r1`` regime's base, the
    #: "0 RL steps" side of Yue et al.'s claim); its run's budget is 0.
    rl: bool = True


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str
    statement: str
    arms: tuple[Arm, ...]
    budget: int  #: env steps per run at --budget-scale 1
    analyse: Callable[[Claim, dict[str, list[dict[str, Any]]]], dict[str, Any]]
    plot: Callable[[Claim, dict[str, list[dict[str, Any]]], dict[str, Any]], bytes]
    #: Samples per held-out prompt after training (the ``r1`` regime; the mlp regime scores EVAL_K).
    eval_k: int = 8
    #: Settings of the claim's analysis that a regime may change (e.g. DAPO's success threshold).
    params: dict[str, Any] = field(default_factory=dict)


#: Warm start: demonstrations (the task's own solutions to train prompts) and behaviour-cloning epochs.
WARM_DEMOS, WARM_EPOCHS = 64, 30


def arm_config(preset: dict[str, Any], overrides: dict[str, Any], policy: str) -> Any:
    """The ``GRPOConfig`` of an arm: the preset's values with the arm's overrides, the rest filled by
    ``policy``'s preset (DAPO's symmetric arm's ``clip_eps_high=None`` is the symmetric clip under every
    preset, and stays None when the agent resolves the config again)."""
    from agents import GRPOConfig

    return GRPOConfig.from_dict({**preset, **overrides}).resolve(policy)


def run_key(arm: Arm, seed: int, budget: int) -> dict[str, Any]:
    """Everything that determines a run; a stored run is reused only when its key is equal. Arms of
    different claims with the same settings (e.g. the base configuration) share their runs."""
    config = arm_config(BASE, arm.overrides, "mlp")
    return {
        "format": KEY_TAG,
        "seed": seed,
        "budget": budget,
        "env_id": ENV_ID,
        "env_kwargs": ENV_KWARGS,
        "config": config.to_dict(),
        "warm_start": {"demos": WARM_DEMOS, "epochs": WARM_EPOCHS} if arm.warm_start else None,
        "eval": {"prompts": EVAL_PROMPTS, "k": EVAL_K},
    }


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


#: What every claim's verdict becomes when no arm learned (no arm above the single-answer floor).
NO_SIGNAL = "no signal"


@functools.cache
def single_answer_floor(env_kwargs: str | None = None) -> float:
    """The held-out success of the best answer that ignores the prompt's arithmetic: answer the one
    number equal to the target (:func:`benchmarks.core.baselines.single_number_floor`), on the lab's own
    held-out prompts (the :data:`EVAL_PROMPTS` test prompts every run is scored on) of the env made with
    ``env_kwargs`` (JSON; default :data:`ENV_KWARGS`, the mlp regime's)."""
    import json

    import gymnasium as gym

    import rlvr_env  # noqa: F401  (registers the env ids)
    from agents.evaluation import evaluation_prompts
    from benchmarks.core.baselines import single_number_floor

    env = gym.make(ENV_ID, **(ENV_KWARGS if env_kwargs is None else json.loads(env_kwargs)))
    return single_number_floor(env, evaluation_prompts(env, "test", EVAL_PROMPTS, seed=0))


def held_out_success(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Per arm, per seed: held-out sampled success after training (mean over :data:`EVAL_K` answers)."""
    return {arm: per_seed(runs, arm, lambda r: r["final"]["sampled"]) for arm in runs}


def no_signal(success: dict[str, list[float]], floor: float) -> bool:
    """True when no arm's held-out success beats ``floor``: the low end of every arm's interval (IQM over
    seeds, 95% bootstrap) is at or below it. Then neither arm learned the task, and a difference between
    them says nothing about the claim."""
    if not np.isfinite(floor):
        raise ValueError(f"floor={floor!r} must be a finite success rate")
    if not success:
        raise ValueError("success has no arm")
    return all(not (ci(v).low > floor) for v in success.values())


def apply_floor(res: dict[str, Any], runs: dict[str, list[dict[str, Any]]], floor: float) -> dict[str, Any]:
    """The lab's one verdict rule on top of a claim's own: every row of ``res`` says :data:`NO_SIGNAL`
    when :func:`no_signal` holds for the claim's arms. Records the floor and each arm's success."""
    success = held_out_success(runs)
    res["floor"] = floor
    res["held_out_sampled"] = success
    res["no_signal"] = no_signal(success, floor)
    if res["no_signal"]:
        for row in res["rows"]:
            row["measured"] += (f"; no arm's held-out sampled success beats the single-answer floor "
                                f"{floor:.2f} ({', '.join(f'{a} {fmt(ci(v))}' for a, v in success.items())})")
            row["verdict"] = NO_SIGNAL
    return res


def by_seed(runs: dict[str, list[dict[str, Any]]], arm: str) -> dict[int, dict[str, Any]]:
    """The records of ``arm`` by seed."""
    return {r["key"]["seed"]: r for r in runs[arm]}


def seeds_of(runs: dict[str, list[dict[str, Any]]]) -> list[int]:
    """The seeds every arm of ``runs`` has a record of, in order (paired comparisons read these)."""
    common = None
    for recs in runs.values():
        s = {r["key"]["seed"] for r in recs}
        common = s if common is None else common & s
    return sorted(common or [])


def per_seed(runs: dict[str, list[dict[str, Any]]], arm: str,
             fn: Callable[[dict[str, Any]], float]) -> list[float]:
    recs = by_seed(runs, arm)
    return [float(fn(recs[s])) for s in seeds_of(runs)]


def fmt(x: Interval, digits: int = 2) -> str:
    """An interval as a table shows it (:meth:`~benchmarks.core.stats.Interval.fmt`)."""
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


def row(claim: Claim, text: str, measured: str, v: str) -> dict[str, str]:
    """One row of the lab's table: the claim's ``text``, its paper, what was ``measured``, the verdict."""
    return {"claim": text, "paper": claim.paper, "measured": measured, "verdict": v}


def two_arm_row(claim: Claim, text: str, what: str, values: dict[str, list[float]], margin: float = 0.0,
                digits: int = 2, extra: str = "") -> dict[str, str]:
    """The row of a claim that its second arm (the challenger) beats its first (the baseline) on the
    per-seed ``values``: both arms' intervals, the paired difference challenger - baseline and its
    verdict (``margin`` > 0: "matches or beats", the difference's low end above ``-margin``)."""
    base, chal = claim.arms[0], claim.arms[1]
    d = paired(values[chal.name], values[base.name])
    measured = (f"{what}: {base.label} {fmt(ci(values[base.name]), digits)}, {chal.label} "
                f"{fmt(ci(values[chal.name]), digits)}; difference {fmt(d, digits)}"
                + (f" (matches: interval above -{margin:g})" if margin else "") + extra)
    return row(claim, text, measured, verdict(d, +1, margin))


def arm_label(claim: Claim, arm: str) -> str:
    """The label of ``claim``'s arm named ``arm``."""
    return next(a.label for a in claim.arms if a.name == arm)


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


def collapsed_per_arm(claim: Claim, runs: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """How many runs of each arm :func:`collapsed`."""
    return {a.name: int(sum(collapsed(r) for r in runs[a.name])) for a in claim.arms}


def collapsed_text(claim: Claim, coll: dict[str, int], n: int) -> str:
    """``"collapsed runs: <arm> k of n, ..."`` for a claim's table row."""
    return "collapsed runs: " + ", ".join(f"{a.label} {coll[a.name]} of {n}" for a in claim.arms)
