"""The GRPO lab (benchmarks/lab.py): a tiny-budget run of one claim end to end, and its statistics."""

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


def test_seed_parsing_and_bad_arguments() -> None:
    assert lab.parse_seeds("100-102,7") == [100, 101, 102, 7]
    with pytest.raises(ValueError, match="at least 2"):
        lab.parse_seeds("5")
    with pytest.raises(ValueError, match="LOW-HIGH"):
        lab.parse_seeds("9-3")
    with pytest.raises(ValueError, match="unknown claim"):
        lab.main(["--claim", "nonsense"])


def test_arms_with_equal_settings_share_their_runs() -> None:
    base = lab.Arm("a", "a", {})
    same = lab.Arm("b", "b", {k: v for k, v in lab.BASE.items() if k == "group_size"})
    other = lab.Arm("c", "c", {"epochs": 7})
    path = lab._run_path
    assert path(lab.Path("x"), lab.run_key(base, 3, 100)) == path(lab.Path("x"), lab.run_key(same, 3, 100))
    assert path(lab.Path("x"), lab.run_key(base, 3, 100)) != path(lab.Path("x"), lab.run_key(other, 3, 100))
    assert path(lab.Path("x"), lab.run_key(base, 3, 100)) != path(lab.Path("x"), lab.run_key(base, 4, 100))


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
    claim = lab.CLAIMS["dr_grpo"]
    scale = 1200 / claim.budget
    argv = ["--claim", "dr_grpo", "--seeds", "0-1", "--budget-scale", str(scale), "--workers", "1",
            "--out", str(tmp_path)]
    assert lab.main(argv) == 0
    first = capsys.readouterr().out
    assert "4 distinct run(s): 0 found on disk, 4 to run" in first

    summary = json.loads((tmp_path / "lab.json").read_text())
    res = summary["claims"]["dr_grpo"]
    assert res["seeds"] == [0, 1] and res["budget"] == 1200
    assert len(res["rows"]) == 2
    for row in res["rows"]:
        assert row["verdict"] in {"agree", "disagree", "inconclusive"}
        assert row["paper"] == claim.paper
    png = (tmp_path / "dr_grpo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "lab.md").read_text()
    assert md.count("| Dr. GRPO") == 2 and "python -m benchmarks.lab --seeds 0-1" in md

    # The numbers come from the run files: recompute the wrong-answer length growth per seed.
    for arm in claim.arms:
        for i, seed in enumerate((0, 1)):
            rec = json.loads(lab._run_path(tmp_path, lab.run_key(arm, seed, 1200)).read_text())
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

    # A rerun reuses every stored run; a run whose settings changed is run again.
    path = lab._run_path(tmp_path, lab.run_key(claim.arms[1], 1, 1200))
    rec = json.loads(path.read_text())
    rec["key"]["budget"] = 1
    path.write_text(json.dumps(rec))
    assert lab.main(argv) == 0
    assert "3 found on disk, 1 to run" in capsys.readouterr().out
    assert json.loads(path.read_text())["key"]["budget"] == 1200
