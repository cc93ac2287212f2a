"""The Countdown study's tables (docs/countdown.md), rendered from the stored records alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.core.stats import iqm_ci, ratio_ci
from benchmarks.countdown.settings import BC_EPOCHS, ENV_ID, K, MIN_LENGTH, THRESHOLD, VARIANTS


def _steps_to(curve: list[tuple[int, float]], budget: int) -> float:
    for steps, value in curve:
        if value >= THRESHOLD:
            return float(steps)
    return float(budget)  # censored


def _ci(values: list[float]) -> str:
    return iqm_ci(values).fmt(2)


def ablation_table(runs: dict[str, list[dict[str, Any]]], floor: float) -> str:
    lines = [
        "| variant | what changed | held-out greedy | held-out sampled (mean@16) | held-out pass@16 "
        "| train greedy | collapsed | s/run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    # VARIANTS order (the stored JSON sorts its keys); rows no longer defined keep their stored order
    order = [n for n in VARIANTS if n in runs] + [n for n in runs if n not in VARIANTS]
    for name in order:
        rs = runs[name]
        note = VARIANTS[name][3] if name in VARIANTS else ""
        test = [r["final"]["test"] for r in rs]
        collapsed = sum(r["final_len"] <= MIN_LENGTH + 0.05 and r["final"]["test"]["greedy"] < floor
                        for r in rs)
        lines.append(
            f"| {name} | {note} | {_ci([t['greedy'] for t in test])} | {_ci([t['sampled'] for t in test])} "
            f"| {_ci([t[f'pass@{K}'] for t in test])} | {_ci([r['final']['train']['greedy'] for r in rs])} "
            f"| {collapsed}/{len(rs)} | {np.median([r['train_seconds'] for r in rs]):.0f} |"
        )
    return "\n".join(lines)


def versus_table(grpo: list[dict[str, Any]], ppo: list[dict[str, Any]], budget: int) -> str:
    g = [_steps_to(r["curve"], budget) for r in grpo]
    p = [_steps_to(r["curve"], budget) for r in ppo]
    lines = [
        f"| contender | seeds | steps to {THRESHOLD} held-out greedy (IQM, k) | reached | held-out greedy "
        f"at {budget // 1000}k | held-out sampled at {budget // 1000}k | s/run |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rs, steps in (("GRPO (countdown preset)", grpo, g), ("MaskablePPO (defaults)", ppo, p)):
        lines.append(
            f"| {name} | {len(rs)} | {iqm_ci(steps).fmt(0, 1000)} "
            f"| {sum(s < budget for s in steps)}/{len(rs)} "
            f"| {_ci([r['final']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['final']['test']['sampled'] for r in rs])} "
            f"| {np.median([r['train_seconds'] for r in rs]):.0f} |"
        )
    ratio = ratio_ci(g, p)
    lines.append("")
    lines.append(f"Steps-to-{THRESHOLD} ratio GRPO / MaskablePPO (IQM, censored runs count at the budget): "
                 f"{ratio.fmt(2)}; goal <= 0.5.")
    return "\n".join(lines)


def warm_table(grpo: list[dict[str, Any]], ppo: list[dict[str, Any]], demos: int, budget: int) -> str:
    lines = [
        f"| contender (from the clone of {demos} demonstrations) | seeds | held-out greedy at start "
        f"| held-out greedy after {budget // 1000}k | held-out sampled at start | held-out sampled after "
        f"| gain (greedy) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rs in (("GRPO (KL reference = clone, beta 0.04)", grpo), ("MaskablePPO (fresh critic)", ppo)):
        if not rs:
            continue
        gain = [r["final"]["test"]["greedy"] - r["start"]["test"]["greedy"] for r in rs]
        lines.append(
            f"| {name} | {len(rs)} | {_ci([r['start']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['final']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['start']['test']['sampled'] for r in rs])} "
            f"| {_ci([r['final']['test']['sampled'] for r in rs])} | {_ci(gain)} |"
        )
    return "\n".join(lines)


def arithmetic_table(runs: list[dict[str, Any]]) -> str:
    lines = ["| preset | seeds | budget | greedy train / test (min over seeds) | sampled train / test (mean) "
             "| worst prompt's sampled success (min over seeds) | seeds with every prompt >= 0.95 |",
             "|---|---|---|---|---|---|---|"]
    for policy in ("tabular", "mlp"):
        rs = [r for r in runs if r["policy"] == policy]
        if not rs:
            continue
        lines.append(
            f"| {policy} | {len(rs)} | {rs[0]['budget'] // 1000}k "
            f"| {min(r['greedy'][0] for r in rs):.2f} / {min(r['greedy'][1] for r in rs):.2f} "
            f"| {float(np.mean([r['sampled'][0] for r in rs])):.3f} / "
            f"{float(np.mean([r['sampled'][1] for r in rs])):.3f} "
            f"| {min(r['min_prompt_sampled'] for r in rs):.3f} "
            f"| {sum(r['min_prompt_sampled'] >= 0.95 for r in rs)}/{len(rs)} |"
        )
    return "\n".join(lines)


def render(result: dict[str, Any]) -> str:
    """The markdown tables of every part present in ``result``."""
    floor = result["single_number_floor_test"]
    cmds = result.get("commands", {})
    sections = [f"Countdown N=3 (`{ENV_ID}`, n_numbers=3), {result['eval_prompts']} fixed prompts per split; "
                f"IQM over seeds with 95% bootstrap intervals (settings chosen on seeds 0-1, reported seeds "
                f"are fresh). Single-number floor (held-out greedy of \"answer the number equal to the "
                f"target\"): {floor:.2f}."]
    if "ablation" in result:
        a = result["ablation"]
        sections.append(f"#### Ablation: GRPO from scratch, {a['budget'] // 1000}k env steps, seeds "
                        f"{a['seeds']} (`{cmds.get('ablation', '')}`)\n\n" + ablation_table(a["runs"], floor))
    if "maskable" in result:
        m = result["maskable"]
        sections.append(f"#### GRPO vs MaskablePPO from scratch, {m['budget'] // 1000}k env steps, same "
                        f"observation `{m['env_kwargs']}` (`{cmds.get('maskable', '')}`)\n\n"
                        + versus_table(m["grpo"], m["maskable_ppo"], m["budget"]))
    if "warm" in result:
        w = result["warm"]
        sections.append(f"#### Warm start: behaviour cloning on {w['demos']} train demonstrations "
                        f"({BC_EPOCHS} epochs), then {w['budget'] // 1000}k env steps "
                        f"(`{cmds.get('warm', '')}`)\n\n"
                        + warm_table(w["grpo"], w["maskable_ppo"], w["demos"], w["budget"]))
    if "n4" in result:
        n4 = result["n4"]
        rs = n4["runs"]
        sections.append(
            f"#### Countdown N=4 (`n_numbers=4`), GRPO countdown preset, lookahead observation, "
            f"{n4['budget'] // 1000}k env steps (`{cmds.get('n4', '')}`)\n\n"
            "| seeds | held-out greedy | held-out sampled (mean@16) | held-out pass@16 | train greedy "
            "| single-number floor | s/run |\n|---|---|---|---|---|---|---|\n"
            f"| {len(rs)} | {_ci([r['final']['test']['greedy'] for r in rs])} "
            f"| {_ci([r['final']['test']['sampled'] for r in rs])} "
            f"| {_ci([r['final']['test'][f'pass@{K}'] for r in rs])} "
            f"| {_ci([r['final']['train']['greedy'] for r in rs])} | {n4['floor']:.2f} "
            f"| {np.median([r['train_seconds'] for r in rs]):.0f} |")
    if "arithmetic" in result:
        sections.append(f"#### Arithmetic presets: sampled success on every prompt (k=64) "
                        f"(`{cmds.get('arithmetic', '')}`)\n\n" + arithmetic_table(result["arithmetic"]))
    return "\n\n".join(sections)
