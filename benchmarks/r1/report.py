"""The R1 study's vocabulary and its report: arm names, the summary over seeds, the study's targets
as computed verdicts, the Yue et al. (2025) rows and the markdown table.

:mod:`benchmarks.r1` runs the study and calls :func:`summarize` and :func:`markdown` on its run records;
nothing here trains or reads files.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from benchmarks.core.bases import DEFAULT_ENV_KWARGS, KS, base_name
from benchmarks.core.stats import NO_INTERVAL, iqm_ci, paired, ratio_ci, verdict

#: The agent's arms, each the ``transformer`` preset with these fields changed (one thing per arm).
#: PPO with a critic has no use for DAPO's dynamic sampling: its advantages are not zero on tied groups.
AGENT_ALGOS: dict[str, dict[str, Any]] = {
    "grpo": {},
    "gae": {"advantage": "gae", "dynamic_sampling": False},
    "rloo": {"advantage": "rloo"},
    "reinforce_pp_baseline": {"advantage": "reinforce_pp_baseline"},
}
SB3_ALGOS = ("maskable_ppo", "ppo")
ALGOS = (*AGENT_ALGOS, *SB3_ALGOS)
NAMES = {"grpo": "GRPO", "gae": "PPO with a critic (GAE)", "rloo": "RLOO",
         "reinforce_pp_baseline": "REINFORCE++-baseline", "maskable_ppo": "SB3 MaskablePPO",
         "ppo": "SB3 PPO (unmasked)"}


def _first_at(curve: list[dict[str, Any]], level: float) -> int | None:
    """Env steps of the first checkpoint whose held-out sampled success is at least ``level``."""
    return next((c["steps"] for c in curve if c["test_sampled"] >= level), None)


def summarize(bases: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm (``base_<n>`` or ``<algo>_<start>``): IQM [95% CI] over seeds of every score, the
    pass@k curve per split, censoring of "base + 0.1 held-out sampled", and the per-seed values."""
    start_of = {(b["seed"], base_name(b["sft"])): b["curve_start"] for b in bases}
    rows: dict[str, list[dict[str, Any]]] = {}
    for b in bases:
        rows.setdefault(base_name(b["sft"]), []).append({"seed": b["seed"], "eval": b["eval"],
                                                         "seconds": b["sft_seconds"]})
    for r in runs:
        goal = None
        if r["start"] != "scratch":
            level = start_of.get((r["seed"], r["start"]))
            goal = None if level is None else _first_at(r["curve"], level + 0.1)
        rows.setdefault(f"{r['algo']}_{r['start']}", []).append(
            {"seed": r["seed"], "eval": r["eval"], "seconds": r["train_seconds"], "steps_to_plus_0.1": goal,
             "steps_per_second": r["steps_per_second"], "curve": r["curve"], "budget": r["budget"],
             "steps_run": r["steps_run"]})
    out: dict[str, Any] = {}
    for arm, rs in rows.items():
        rs.sort(key=lambda r: r["seed"])
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in rs],
                                 "seconds": iqm_ci([r["seconds"] for r in rs]).point}
        for split in ("train", "test"):
            for metric in ("greedy", "sampled"):
                ci = iqm_ci([r["eval"][split][metric] for r in rs])
                entry[f"{split}_{metric}"] = [ci.point, ci.low, ci.high]
            entry[f"{split}_pass_at"] = {k: float(np.mean([r["eval"][split]["pass_at"][k] for r in rs]))
                                         for k in rs[0]["eval"][split]["pass_at"]}
        entry["per_seed"] = [r["eval"] for r in rs]
        if "curve" in rs[0]:
            hits = [r["steps_to_plus_0.1"] for r in rs]
            entry["budget"] = rs[0]["budget"]
            entry["steps_to_plus_0.1"] = hits
            entry["steps_per_second"] = iqm_ci([r["steps_per_second"] for r in rs]).point
            entry["steps_run"] = [r["steps_run"] for r in rs]
            entry["curves"] = {r["seed"]: r["curve"] for r in rs}
        out[arm] = entry
    return out


def _ci(v: list[float], n: int = 2) -> str:
    """``point [lo, hi]`` of ``n`` seeds; from one seed the point alone, saying it is not an interval."""
    return f"{v[0]:.3f} ({NO_INTERVAL})" if n < 2 else f"{v[0]:.3f} [{v[1]:.2f}, {v[2]:.2f}]"


def _sft_label(base: str) -> str:
    """``base_100000`` -> "SFT 100,000", ``base_100000_nomask`` -> "SFT 100,000 without masks"."""
    n, _, mask = base[5:].partition("_")
    if not n.isdigit() or mask not in ("", "nomask"):
        raise ValueError(f"unknown base {base!r}")
    return f"SFT {int(n):,}" + (" without masks" if mask else "")


def _label(arm: str) -> str:
    """``base_100000`` -> "base alone (SFT 100,000)", ``grpo_base_1000`` -> "base (SFT 1,000) + GRPO",
    ``ppo_base_100000_nomask`` -> "base (SFT 100,000 without masks) + PPO (unmasked)", ``ppo_scratch``
    -> "PPO (unmasked) from scratch"."""
    if arm.startswith("base_"):
        return f"base alone ({_sft_label(arm)})"
    for algo in sorted(ALGOS, key=len, reverse=True):
        if arm == f"{algo}_scratch":
            return f"{NAMES[algo]} from scratch"
        if arm.startswith(f"{algo}_base_"):
            return f"base ({_sft_label(arm[len(algo) + 1:])}) + {NAMES[algo]}"
    raise ValueError(f"unknown arm {arm!r}")


def goals(summary: dict[str, Any], recipe: int, env_kwargs: dict[str, Any] | None = None
          ) -> list[tuple[str, str, bool | None]]:
    """The study's targets for this setting (Countdown-3's, Countdown-4's; none for another), each with
    the measured value and whether it is met (None: undetermined)."""
    base, rl = summary.get(f"base_{recipe}"), summary.get(f"grpo_base_{recipe}")
    out: list[tuple[str, str, bool | None]] = []
    if env_kwargs not in (None, DEFAULT_ENV_KWARGS):
        if env_kwargs == {"n_numbers": 4}:
            for algo in ("grpo", "gae"):
                e = summary.get(f"{algo}_base_{recipe}")
                if e:
                    out.append((f"Countdown-4: base + {NAMES[algo]} >= 0.5 held-out greedy within 1M env "
                                f"steps (ran {e['budget']:,})", f"{e['test_greedy'][0]:.3f}",
                                e["test_greedy"][0] >= 0.5 and e["budget"] <= 1_000_000))
        return out
    if base:
        out.append(("base alone >= 0.65 held-out greedy", f"{base['test_greedy'][0]:.3f}",
                    base["test_greedy"][0] >= 0.65))
        out.append(("base trained in <= 5 min (one core here)", f"{base['seconds']:.0f} s",
                    base["seconds"] <= 300))
    if rl:
        out.append(("base + GRPO >= 0.8 held-out greedy", f"{rl['test_greedy'][0]:.3f}",
                    rl["test_greedy"][0] >= 0.8))
        out.append(("base + GRPO >= 0.75 held-out sampled", f"{rl['test_sampled'][0]:.3f}",
                    rl["test_sampled"][0] >= 0.75))
    if base and rl:
        gain = rl["test_sampled"][0] - base["test_sampled"][0]
        out.append(("GRPO adds >= +0.15 held-out sampled over its base", f"{gain:+.3f}", gain >= 0.15))
        top = str(max(int(k) for k in base["test_pass_at"]))
        drop = base["test_pass_at"][top] - rl["test_pass_at"][top]
        out.append((f"held-out pass@{top} after GRPO no lower than the base's by more than 0.05",
                    f"{-drop:+.3f}", drop <= 0.05))
    short = [(arm, e) for arm, e in summary.items() if "budget" in e and min(e["steps_run"]) < e["budget"]]
    runs = [e for e in summary.values() if "budget" in e]
    if runs:
        out.append(("every RL run trains its full budget", "all" if not short else
                    ", ".join(f"{_label(a)}: {min(e['steps_run']):,}" for a, e in short), not short))
    gae = summary.get(f"gae_base_{recipe}")
    if rl and gae:
        ratio = gae["steps_per_second"] / rl["steps_per_second"]
        out.append(("the agent's PPO with a critic >= 0.5x GRPO's env steps/s (IQM over runs)",
                    f"{ratio:.2f}x", ratio >= 0.5))
    for algo in SB3_ALGOS:
        e = summary.get(f"{algo}_base_{recipe}") or summary.get(f"{algo}_base_{recipe}_nomask")
        if e:
            out.append((f"{NAMES[algo]} >= 1k env steps/s", f"{e['steps_per_second']:,.0f}",
                        e["steps_per_second"] >= 1000))
    return out


def steps_ratio(summary: dict[str, Any], arm: str, reference: str) -> tuple[str, str] | None:
    """Env steps to base + 0.1 held-out sampled, ``arm`` over ``reference``: IQM ratio [95% CI] over
    seeds with censored runs counted at their budget (which flatters them), and how many were censored
    on each side; None when either arm is missing."""
    a, b = summary.get(arm), summary.get(reference)
    if not a or not b:
        return None
    xa = [a["budget"] if h is None else h for h in a["steps_to_plus_0.1"]]
    xb = [b["budget"] if h is None else h for h in b["steps_to_plus_0.1"]]
    r = ratio_ci(xa, xb)
    ca, cb = (sum(h is None for h in e["steps_to_plus_0.1"]) for e in (a, b))
    interval = (f"{r.point:.2f} [{r.low:.2f}, {r.high:.2f}]" if min(len(xa), len(xb)) >= 2
                else f"{r.point:.2f} ({NO_INTERVAL})")
    return interval, f"censored {ca}/{len(xa)} and {cb}/{len(xb)}"


def _paired_evals(base: dict[str, Any], rl: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the base's evaluation, the RL arm's) for every seed both have, in the RL arm's seed order."""
    by_seed = dict(zip(base["seeds"], base["per_seed"]))
    return [(by_seed[s], e) for s, e in zip(rl["seeds"], rl["per_seed"]) if s in by_seed]


def _diff_text(diff: Any) -> str:
    """A paired difference as ``+0.123 [+0.045, +0.200]``; from one seed the point alone."""
    if diff.single:
        return f"{diff.point:+.3f} ({NO_INTERVAL})"
    return f"{diff.point:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]"


def yue_claim(summary: dict[str, Any], recipe: int, ks: list[int]) -> list[tuple[str, str, str]]:
    """Yue et al. (2025): RLVR raises pass@1 but narrows pass@k at large k. Per split, the per-seed
    differences RL - base (paired by seed; IQM and 95% CI, the lab's verdict rule) at k = 1 and k = 64,
    and the smallest k where the RL policy's mean pass@k falls below the base's."""

    base, rl = summary.get(f"base_{recipe}"), summary.get(f"grpo_base_{recipe}")
    if not base or not rl:
        return []
    pairs = _paired_evals(base, rl)
    rows = []
    for split in ("test", "train"):
        name = "held-out" if split == "test" else "train"
        for k, sign, text in (("1", 1, "raises pass@1"), (str(max(ks)), -1, f"narrows pass@{max(ks)}")):
            diff = paired([e[split]["pass_at"][k] for _, e in pairs],
                          [b[split]["pass_at"][k] for b, _ in pairs])
            rows.append((f"GRPO {text} ({name})", _diff_text(diff), verdict(diff, sign)))  # 1 seed: none
        mine, theirs = rl[f"{split}_pass_at"], base[f"{split}_pass_at"]
        cross = next((k for k in ks if mine[str(k)] < theirs[str(k)]), None)
        rows.append((f"smallest k where GRPO's mean pass@k < the base's ({name})",
                     f"none up to {max(ks)}" if cross is None else f"k = {cross}", ""))
    return rows


def sharpening_rows(summary: dict[str, Any], recipe: int) -> list[tuple[str, str]]:
    """Where GRPO's gain over its base comes from, per split, paired by seed (IQM [95% CI] of the
    per-seed differences): its greedy success minus the base's, and its sampled success minus the base's
    greedy success (near zero: RL has made sampling as good as the base's greedy answer, and no better).
    Its sampled success minus the base's is the Yue et al. pass@1 row."""
    base, rl = summary.get(f"base_{recipe}"), summary.get(f"grpo_base_{recipe}")
    if not base or not rl:
        return []
    pairs = _paired_evals(base, rl)
    rows = []
    for split in ("test", "train"):
        name = "held-out" if split == "test" else "train"
        for mine, theirs in (("greedy", "greedy"), ("sampled", "greedy")):  # sampled - sampled: pass@1 above
            diff = paired([e[split][mine] for _, e in pairs], [b[split][theirs] for b, _ in pairs])
            rows.append((f"GRPO {mine} - base {theirs} ({name})", _diff_text(diff)))
    return rows


def _at(curve: list[dict[str, Any]], steps: float) -> float:
    """Held-out sampled success at the last checkpoint at or before ``steps`` env steps (the first one
    when none is)."""
    before = [c for c in curve if c["steps"] <= steps] or curve[:1]
    return before[-1]["test_sampled"]


#: The fractions of the budget at which the learning-curve table reads each run.
CURVE_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def curve_rows(summary: dict[str, Any]) -> list[tuple[str, list[float], str]]:
    """Per RL arm: held-out sampled success (mean over seeds) at :data:`CURVE_FRACTIONS` of its budget
    (the final point is each run's last checkpoint), and the second half's paired change (final minus
    half-budget, IQM [95% CI] over seeds): how far the arm was still climbing when its budget ended."""
    out = []
    for arm, e in summary.items():
        if "curves" not in e:
            continue
        curves = list(e["curves"].values())  # one per seed (keys are strings once read from JSON)
        points = [float(np.mean([_at(c, f * e["budget"]) if f < 1 else c[-1]["test_sampled"]
                                 for c in curves])) for f in CURVE_FRACTIONS]
        late = iqm_ci([c[-1]["test_sampled"] - _at(c, e["budget"] / 2) for c in curves])
        text = (f"{late.point:+.3f} ({NO_INTERVAL})" if len(curves) < 2
                else f"{late.point:+.3f} [{late.low:+.2f}, {late.high:+.2f}]")
        out.append((arm, points, text))
    return out


def _median_steps(hits: list[int | None]) -> float | None:
    """The median of per-seed steps with censored runs (None) counted as infinite; None if censored."""
    m = float(np.median([float("inf") if h is None else h for h in hits]))
    return None if m == float("inf") else m


def _steps(x: float | None) -> str:
    return "censored" if x is None or x == float("inf") else f"{x:,.0f}"


def headline(result: dict[str, Any]) -> str:
    """The study's headline table (README): every arm from the recipe's base at one budget, next to the
    base alone: held-out greedy / sampled / pass@k at the largest k, env steps to base + 0.1 held-out
    sampled (median over seeds, censored runs counted as never) and env steps/s."""
    s, recipe = result["summary"], result["recipe_sft"]["n"]
    n = result["eval"]["k"]
    # the unmasked PPO arm right under its own base (the same cold start fitted without the masks)
    arms = [f"base_{recipe}"] + [f"{a}_base_{recipe}" for a in ALGOS if a != "ppo"] + [
        f"base_{recipe}_nomask", f"ppo_base_{recipe}_nomask"]
    seeds = result["seeds"]
    start = "the same cold-started transformer"
    if result["recipe_sft"].get("fit_masks") is False:
        start += " (its cross-entropy fitted over every token, decoded with the masks)"
    if f"ppo_base_{recipe}_nomask" in s:
        start += (", SB3's unmasked PPO from its own base (the same cold start fitted and decoded without "
                  "the masks)")
    lines = [f"Countdown {json.dumps(result['env_kwargs'])}, seeds {seeds}, every RL arm "
             f"{result.get('budget', 0):,} env steps from {start}; IQM [95% "
             f"bootstrap CI] over seeds, {result['eval']['prompts']} held-out prompts x {n} samples "
             f"(`python -m benchmarks.r1`).", "",
             f"| arm | held-out greedy | held-out sampled | pass@{n} "
             "| steps to base + 0.1 (median; censored) | env steps/s |", "|---|---:|---:|---:|---:|---:|"]
    for arm in arms:
        e = s.get(arm)
        if e is None:
            continue
        if "steps_to_plus_0.1" in e:
            hits = e["steps_to_plus_0.1"]
            steps = f"{_steps(_median_steps(hits))}; {sum(h is None for h in hits)}/{len(hits)}"
            speed = f"{e['steps_per_second']:,.0f}"
        else:
            steps, speed = "", ""
        m = len(e["seeds"])
        lines.append(f"| {_label(arm)} | {_ci(e['test_greedy'], m)} | {_ci(e['test_sampled'], m)} "
                     f"| {e['test_pass_at'][str(n)]:.3f} | {steps} | {speed} |")
    return "\n".join(lines) + "\n"


def markdown(result: dict[str, Any]) -> str:
    """The R1 study's markdown table from its result. Long because the table is one text, read top to
    bottom."""
    s = result["summary"]
    n = result["eval"]["k"]
    ks = [k for k in KS if k <= n]
    mid = min(8, n)
    sft = result["recipe_sft"]
    start = (f"a transformer cold-started on {sft['n']:,} solutions x {sft['epochs']} epochs"
             if "epochs" in sft else "a cold-started transformer")
    if sft.get("fit_masks") is False:
        start += " (cross-entropy over every token; decoded with the masks)"
    lines = [f"### The R1 recipe on Countdown {json.dumps(result['env_kwargs'])}: {start}, then RL", "",
             f"Seeds {result['seeds']}; IQM [95% bootstrap CI] over seeds; {result['eval']['prompts']} fixed "
             f"prompts per split, {n} samples each (sampled = mean@{n}, pass@k unbiased).", "",
             f"| arm | held-out greedy | held-out sampled | held-out pass@{mid} | pass@{n} | train greedy "
             "| train sampled | seconds |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for arm, e in s.items():
        m = len(e["seeds"])
        lines.append(f"| {_label(arm)} | {_ci(e['test_greedy'], m)} "
                     f"| {_ci(e['test_sampled'], m)} "
                     f"| {e['test_pass_at'][str(mid)]:.3f} | {e['test_pass_at'][str(n)]:.3f} "
                     f"| {_ci(e['train_greedy'], m)} "
                     f"| {_ci(e['train_sampled'], m)} | {e['seconds']:.0f} |")
    lines += ["", "pass@k (mean over seeds), before and after RL from the recipe's base:", "",
              "| model | split | " + " | ".join(f"k={k}" for k in ks) + " |", "|---|---|" + "---:|" * len(ks)]
    recipe = result["recipe_sft"]["n"]
    for arm in (f"base_{recipe}", *(f"{a}_base_{recipe}" for a in ALGOS), f"base_{recipe}_nomask",
                f"ppo_base_{recipe}_nomask"):
        if arm in s:
            for split in ("test", "train"):
                lines.append(f"| {_label(arm)} | {'held-out' if split == 'test' else 'train'} | "
                             + " | ".join(f"{s[arm][f'{split}_pass_at'][str(k)]:.3f}" for k in ks) + " |")
    lines += ["", "Env steps to base + 0.1 held-out sampled success (8 samples on "
              f"{result['eval']['curve_prompts']} prompts, checked every {result['curve_every']:,} env "
              "steps; censored = never within the budget):", "",
              "| arm | per seed | budget | env steps/s |", "|---|---|---:|---:|"]
    for arm, e in s.items():
        if "steps_to_plus_0.1" in e and not arm.endswith("scratch"):
            lines.append(f"| {_label(arm)} | {', '.join(_steps(x) for x in e['steps_to_plus_0.1'])} "
                         f"| {e['budget']:,} | {e['steps_per_second']:,.0f} |")
    curves = curve_rows(s)
    if curves:
        lines += ["", f"Held-out sampled success along the learning curve (8 samples on "
                  f"{result['eval']['curve_prompts']} prompts; mean over seeds at the last checkpoint at or "
                  "before each fraction of the budget), and what the second half of the budget added (final "
                  "minus half-budget, paired by seed; IQM [95% CI] over seeds): near zero, the arm had "
                  "levelled off within its budget.", "",
                  "| arm | " + " | ".join(f"{f:g} x budget" for f in CURVE_FRACTIONS)
                  + " | second half |", "|---|" + "---:|" * len(CURVE_FRACTIONS) + "---|"]
        lines += [f"| {_label(a)} | " + " | ".join(f"{v:.3f}" for v in pts) + f" | {late} |"
                  for a, pts, late in curves]
    ratios = [(algo, steps_ratio(s, f"grpo_base_{recipe}", f"{algo}_base_{recipe}" if algo != "ppo"
                                 else f"ppo_base_{recipe}_nomask")) for algo in ALGOS if algo != "grpo"]
    ratios = [(a, r) for a, r in ratios if r is not None]
    if ratios:
        lines += ["", "GRPO's env steps to base + 0.1 held-out sampled over each other arm's (IQM ratio "
                  "[95% bootstrap CI] over seeds; < 1: GRPO gets there in fewer steps; censored runs "
                  "count at the budget):", "", "| GRPO ÷ | ratio | censored (GRPO, other) |", "|---|---|---|"]
        lines += [f"| {NAMES[a]} | {r[0]} | {r[1]} |" for a, r in ratios]
    yue = yue_claim(s, recipe, ks)
    if yue:
        lines += ["", "Yue et al. (2025), \"RLVR raises pass@1 but narrows pass@k at large k\": GRPO minus "
                  "its base, paired by seed (IQM [95% CI]; agree / disagree / inconclusive by the lab's "
                  "rule):", "",
                  "| claim | GRPO - base | verdict |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in yue]
    sharp = sharpening_rows(s, recipe)
    if sharp:
        lines += ["", "Where GRPO's gain comes from (its sampled gain is the pass@1 row above): its success "
                  "minus its base's, paired by seed (IQM [95% CI]); sampled minus the base's greedy "
                  "near zero means RL made sampling as good as the base's greedy answer and no better:", "",
                  "| difference | GRPO - base |", "|---|---|"]
        lines += [f"| {a} | {b} |" for a, b in sharp]
    rows = goals(s, result["recipe_sft"]["n"], result["env_kwargs"])
    lines += ["", "| target | measured | verdict |", "|---|---|---|"] if rows else []
    for text, value, ok in rows:
        verdict = ("no signal (censored within the cut budget)" if ok is None
                   else "met" if ok else "**missed**")
        lines.append(f"| {text} | {value} | {verdict} |")
    lines += ["", f"Command: `{result['command']}`. Machine: {result['machine']}. One torch thread per run; "
              "seconds are training only (SFT for a base, RL for the others).", ""]
    return "\n".join(lines)
