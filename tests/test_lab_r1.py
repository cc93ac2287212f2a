"""The lab's base-model regime (``--regime r1``, benchmarks/lab/regime.py and base_model.py): its arms
start from the R1 recipe's base, the Yue et al. claim's analysis, and the regime's arguments."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchmarks import lab
from benchmarks.lab.regime import MLP, R1, regime_named

#: A base in seconds: 64 train-split solutions, one epoch, a tiny evaluation (not the R1 study's).
TINY = dataclasses.replace(R1, sft={"n": 64, "epochs": 1},
                           base_eval={"k": 2, "prompts": 8, "curve_k": 2, "curve_prompts": 8})


def test_bad_regime_values_raise_naming_the_value(tmp_path) -> None:
    with pytest.raises(ValueError,
                       match=r"--regime 'nonsense': unknown regime; choose from \['mlp', 'r1'\]"):
        lab.main(["--regime", "nonsense", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="'R1'"):
        regime_named("R1")
    # a claim of the other regime is an unknown claim here, named with the regime
    with pytest.raises(ValueError, match=r"unknown claim\(s\) \['yue'\] in the mlp regime"):
        lab.main(["--claim", "yue", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match=r"unknown claim\(s\) \['gspo'\] in the r1 regime"):
        lab.main(["--regime", "r1", "--claims", "dr_grpo", "gspo", "--out", str(tmp_path)])


def test_the_regime_builds_each_arm_on_the_transformer_preset() -> None:
    from agents.grpo.config import PRESETS

    preset = PRESETS["transformer"]
    dapo = {a.name: a for a in R1.claims["dapo"].arms}
    symmetric = lab.base.arm_config(preset, dapo["symmetric"].overrides, "transformer")
    # resolve() would refill clip_eps_high from the preset (0.28): the arm's None must stay None
    assert symmetric.clip_eps_high is None and symmetric.beta == 0.0 and not symmetric.dynamic_sampling
    assert lab.base.arm_config(preset, dapo["clip_higher"].overrides, "transformer").clip_eps_high == 0.28
    kimi = [lab.base.arm_config(preset, a.overrides, "transformer").length_weight
            for a in R1.claims["kimi"].arms]
    assert kimi == [0.0, 0.1]
    yue_grpo = lab.base.arm_config(preset, R1.claims["yue"].arms[1].overrides, "transformer")
    assert yue_grpo.to_dict() == lab.base.arm_config(preset, {}, "transformer").to_dict()
    assert yue_grpo.learning_rate == preset["learning_rate"] and yue_grpo.beta == preset["beta"]
    assert {c.budget for c in R1.claims.values()} == {300_000}
    assert R1.claims["yue"].eval_k == 64 and not R1.claims["yue"].arms[0].rl
    with pytest.raises(ValueError, match="rl=False"):  # the mlp regime has no base to score alone
        MLP.task(R1.claims["yue"], R1.claims["yue"].arms[0], 0, 100, {})


def test_arms_start_from_the_base_weights_and_the_base_arm_is_the_base_alone() -> None:
    """A tiny base trained by the R1 study's own stage-1 function; two arms run from it: the network that
    sampled GRPO's first iteration, and its KL reference, are the base's weights (a fresh network of the
    same seed is not); the yue base arm takes no RL step and is scored with pass@k for k = 1..64."""
    from agents import GRPO
    from benchmarks.lab.base_model import net_digest, run_from_base, weights_digest
    from benchmarks.core.bases import base_run

    seed = 3
    (task,) = TINY.base_runs([seed])
    assert task.fn == "benchmarks.core.bases:base_run" and task.spec["sft"]["n"] == 64
    base = base_run(dict(task.spec))
    bases = {seed: (task, base)}
    base_digest = weights_digest(base["weights"])
    fresh = GRPO("rlvr/Countdown-v0", lab.base.arm_config(TINY.preset_values, {}, "transformer"),
                 policy="transformer", seed=seed, env_kwargs=TINY.env_kwargs)
    fresh_net = fresh.policy.net  # type: ignore[attr-defined]
    assert net_digest(fresh_net) != base_digest  # so the check below can fail

    claim = TINY.claims["dr_grpo"]
    rl_task = TINY.task(claim, claim.arms[1], seed, 1, bases)
    assert rl_task.fn == "benchmarks.lab.base_model:run_from_base"
    assert rl_task.spec["key"]["base"] == {"run": task.key, "sft": task.spec["sft"], "weights": base_digest}
    rec = run_from_base(dict(rl_task.spec))
    assert rec["start_digest"]["policy"] == rec["start_digest"]["reference"] == base_digest
    assert rec["start_digest"]["end"] != base_digest  # and GRPO then changed it
    assert len(rec["iterations"]) >= 1 and rec["num_timesteps"] >= 1
    assert rec["key"]["config"]["loss_aggregation"] == "seq_mean_token_sum"
    assert set(rec["final"]["pass_at"]) == {str(k) for k in range(1, 9)}

    yue = TINY.claims["yue"]
    base_task = TINY.task(yue, yue.arms[0], seed, 300_000, bases)
    assert base_task.spec["key"]["budget"] == 0 and base_task.spec["key"]["eval"]["k"] == 64
    alone = run_from_base(dict(base_task.spec))
    assert alone["num_timesteps"] == 0 and alone["iterations"] == []
    assert alone["start_digest"] == {"loaded": base_digest, "end": base_digest}
    curve = {int(k): v for k, v in alone["final"]["pass_at"].items()}
    assert sorted(curve) == list(range(1, 65))
    assert curve[1] == pytest.approx(alone["final"]["sampled"]) and curve[64] == alone["final"]["pass@64"]
    assert all(a <= b + 1e-12 for a, b in zip(list(curve.values()), list(curve.values())[1:]))


def _curve_record(seed: int, p: float, cap: float) -> dict:
    """A hand-made run: held-out pass@k = min(cap, 1 - (1 - p)^k) for k = 1..64."""
    curve = {str(k): min(cap, 1 - (1 - p) ** k) for k in range(1, 65)}
    return {"key": {"seed": seed, "budget": 300_000}, "iterations": [], "seconds": 1.0, "eval_seconds": 1.0,
            "final": {"greedy": p, "sampled": curve["1"], "pass@64": curve["64"], "pass_at": curve}}


def test_yue_rows_from_hand_made_curves() -> None:
    seeds = range(10, 15)
    claim = R1.claims["yue"]
    base = [_curve_record(s, 0.28 + 0.01 * (s - 10), 0.97) for s in seeds]
    narrowing = [_curve_record(s, 0.37 + 0.005 * (s - 10), 0.86) for s in seeds]
    res = lab.analyse("yue", {"base": base, "grpo": narrowing}, R1)
    up, down = res["rows"]
    assert up["verdict"] == "agree" and down["verdict"] == "agree" and not res["no_signal"]
    assert res["ks"] == list(range(1, 65))
    # the per-seed pass@1 / pass@64 the rows are built from, paired by seed
    d1 = lab.paired([r["final"]["pass_at"]["1"] for r in narrowing],
                    [r["final"]["pass_at"]["1"] for r in base])
    assert f"difference {d1.fmt(2)}" in up["measured"]
    d64 = lab.paired([0.86] * 5, [r["final"]["pass_at"]["64"] for r in base])
    assert d64.high < 0 and f"difference {d64.fmt(2)}" in down["measured"]
    # crossing: the smallest k where GRPO's IQM curve is below the base's
    iqm = {arm: [lab.ci([float(r["final"]["pass_at"][str(k)]) for r in recs]).point for k in range(1, 65)]
           for arm, recs in (("base", base), ("grpo", narrowing))}
    want = next(k for k in range(1, 65) if iqm["grpo"][k - 1] < iqm["base"][k - 1])
    assert res["cross_k"] == want and f"cross at k = {want}" in down["measured"]

    # RL that widens too: pass@64 up is a "disagree" on the second row, and the curves never cross
    widening = [_curve_record(s, 0.37 + 0.005 * (s - 10), 0.99) for s in seeds]
    res = lab.analyse("yue", {"base": base, "grpo": widening}, R1)
    assert [r["verdict"] for r in res["rows"]] == ["agree", "disagree"] and res["cross_k"] is None
    # no arm above the single-answer floor: "no signal" on both rows whatever the differences
    low = [_curve_record(s, 0.01, 0.05 + 0.01 * (s - 10)) for s in seeds]
    res = lab.analyse("yue", {"base": low, "grpo": [_curve_record(s, 0.02, 0.04) for s in seeds]}, R1)
    assert [r["verdict"] for r in res["rows"]] == [lab.NO_SIGNAL] * 2
    runs = {"base": base, "grpo": narrowing}
    png = claim.plot(claim, runs, lab.analyse("yue", runs, R1))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.isfinite(R1.floor()) and 0 < R1.floor() < 0.5
