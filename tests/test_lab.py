"""The GRPO lab (benchmarks/lab/): a tiny-budget run of one claim end to end through the executor's
embedded Ray, and its statistics."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import lab
from benchmarks.core.stats import Interval


def test_verdict_reads_the_interval_on_the_claimed_side() -> None:
    assert lab.verdict(Interval(0.3, 0.1, 0.5), +1) == "agree"
    assert lab.verdict(Interval(-0.3, -0.5, -0.1), +1) == "disagree"
    assert lab.verdict(Interval(0.1, -0.1, 0.3), +1) == "inconclusive"
    assert lab.verdict(Interval(-0.3, -0.5, -0.1), -1) == "agree"
    assert lab.verdict(Interval(0.3, 0.1, 0.5), -1) == "disagree"
    assert lab.verdict(Interval(float("nan"), float("nan"), float("nan")), +1) == "inconclusive"


def test_seed_parsing_and_bad_arguments(tmp_path) -> None:
    parser = lab.build_parser()
    assert parser.parse_args(["--seeds", "100-102,7"]).seeds == [100, 101, 102, 7]
    for bad in ("5", "9-3"):  # intervals need 2 seeds; a range reads LOW-HIGH
        with pytest.raises(SystemExit):
            parser.parse_args(["--seeds", bad])
    with pytest.raises(ValueError, match="unknown claim"):
        lab.main(["--claim", "nonsense", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="--rerun"):
        lab.main(["--claim", "kimi", "--rerun", "nonsense", "--out", str(tmp_path)])


def test_arms_with_equal_settings_share_their_runs() -> None:
    base = lab.Arm("a", "a", {})
    same = lab.Arm("b", "b", {k: v for k, v in lab.BASE.items() if k == "group_size"})
    other = lab.Arm("c", "c", {"epochs": 7})
    key = lab.task_for
    assert key(base, 3, 100).key == key(same, 3, 100).key
    assert key(base, 3, 100).fingerprint == key(same, 3, 100).fingerprint
    assert key(base, 3, 100).key != key(other, 3, 100).key
    assert key(base, 3, 100).key != key(base, 4, 100).key


def test_first_reach_and_auc_on_a_hand_made_record() -> None:
    rec = {"iterations": [
        {"solve_rate": 0.0, "updated": 1.0, "total_timesteps": 100.0},
        {"solve_rate": 0.6, "updated": 0.0, "total_timesteps": 300.0},
        {"solve_rate": 0.6, "updated": 1.0, "total_timesteps": 400.0},
        {"solve_rate": 0.9, "updated": 1.0, "total_timesteps": 500.0},
    ]}
    # 2-iteration means: 0.3, 0.6 (reached at iteration 3: 2 updates, 400 steps)
    assert lab.first_reach(rec, 0.5, window=2) == (2.0, 400.0)
    assert np.isnan(lab.first_reach(rec, 0.95, window=2)[0])
    assert lab.solve_auc(rec) == pytest.approx((0 * 100 + 0.6 * 200 + 0.6 * 100 + 0.9 * 100) / 500)


def test_tiny_lab_run_writes_figures_table_and_reuses_runs(tmp_path, capsys) -> None:
    """One claim through the executor's embedded Ray (2 workers), tiny budget, end to end."""
    from benchmarks.core.store import check_run

    claim = lab.CLAIMS["dr_grpo"]
    scale = 1200 / claim.budget
    argv = ["--claim", "dr_grpo", "--seeds", "0-1", "--budget-scale", str(scale), "--workers", "2",
            "--out", str(tmp_path), "--quiet"]
    assert lab.main(argv) == 0
    first = capsys.readouterr().out
    assert "lab: 4 run(s): 0 found on disk, 4 to run" in first

    summary = json.loads((tmp_path / "lab.json").read_text())
    res = summary["claims"]["dr_grpo"]
    assert res["seeds"] == [0, 1] and res["budget"] == 1200
    assert len(res["rows"]) == 2
    # Issue 17 item 9: 1,200 steps teach nothing, so no arm beats the single-answer floor and the
    # lab says "no signal" instead of a verdict (the one rule of benchmarks.lab_claims_new).
    floor = res["single_answer_floor"]
    assert 0.0 < floor < 0.5
    assert all(low <= floor for low, _, _ in res["held_out_greedy"].values())
    for row in res["rows"]:
        assert row["verdict"] == "no signal" and "single-answer floor" in row["measured"]
        assert row["paper"] == claim.paper
    png = (tmp_path / "dr_grpo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "lab.md").read_text()
    assert md.count("| Dr. GRPO") == 2 and "python -m benchmarks.lab --seeds 0-1" in md

    # The numbers come from the run files: recompute the wrong-answer length growth per seed.
    for arm in claim.arms:
        for i, seed in enumerate((0, 1)):
            rec = check_run(tmp_path / "runs" / f"{lab.task_for(arm, seed, 1200).key}.json")
            assert rec["execution"]["fn"] == "benchmarks.lab.runner:run_arm"
            assert rec["num_timesteps"] >= 1200
            assert rec["key"]["config"]["loss_aggregation"] == arm.overrides["loss_aggregation"]
            assert rec["key"]["env_kwargs"]["n_numbers"] == 3
            assert 0.0 <= rec["final"]["sampled"] <= 1.0
            steps = [it["total_timesteps"] for it in rec["iterations"]]
            assert steps == sorted(steps) and steps[-1] == rec["num_timesteps"]
            lw = np.array([it["len_wrong"] for it in rec["iterations"]], dtype=float)
            k = max(1, round(len(lw) * 0.25))
            want = np.nanmean(lw[-k:]) - np.nanmean(lw[:k])
            assert res["wrong_length_growth"][arm.name][i] == pytest.approx(want)
            assert sum(rec["untied_groups"]) + sum(rec["tied_groups"]) > 0

    # A rerun reuses every stored run; a run file edited by hand is set aside and the run trained again.
    path = tmp_path / "runs" / f"{lab.task_for(claim.arms[1], 1, 1200).key}.json"
    data = json.loads(path.read_text())
    data["record"]["key"]["budget"] = 1
    path.write_text(json.dumps(data))
    assert lab.main(argv) == 0
    out = capsys.readouterr()
    assert "3 found on disk, 1 to run" in out.out
    assert f"run file {path}" in out.err and "checksum" in out.err
    assert check_run(path)["key"]["budget"] == 1200
    assert (tmp_path / "runs" / "quarantine" / f"{path.name}.checksum").is_file()


def test_one_no_signal_rule_for_every_claim() -> None:
    from benchmarks.lab_claims_new import no_signal

    assert no_signal([0.05, 0.06], 0.06) and no_signal([float("nan"), 0.0], 0.1)
    assert not no_signal([0.05, 0.07], 0.06)
