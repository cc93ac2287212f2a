"""The thinking study regenerates its tables and plot from stored runs without training anything."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "benchmarks" / "results" / "think" / "runs"


@pytest.mark.skipif(not any(RUNS.glob("*.json")), reason="no stored runs of the thinking study")
def test_the_study_regenerates_from_its_stored_runs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from benchmarks.think.__main__ import build_parser, main, runs

    args = build_parser().parse_args([])
    args.arms = args.arms.split(",")
    first = runs(args)[0]
    stored = json.loads((RUNS / f"{first.key}.json").read_text())
    if stored["fingerprint"] != first.fingerprint:  # another Python or library version: it would train
        pytest.skip("the stored runs were made with another Python or library versions (store.code_version): "
                    "regenerating them here would train every run")
    shutil.copytree(RUNS, tmp_path / "runs")
    assert main(["--out", str(tmp_path), "--quiet"]) == 0
    said = capsys.readouterr().out
    assert "70 found on disk, 0 to run" in said
    table = (tmp_path / "study.md").read_text()
    for arm in ("countdown", "expression", "path_calc", "search_calc", "search_calc+ppo", "search_calc+grpo_k15",
                "search_calc_pool", "search_calc_pool+grpo", "search_calc_pool+ppo"):
        assert f"| {arm} |" in table
    assert "Missing" not in table
    assert (tmp_path / "study_length.png").stat().st_size > 0
    assert "| search_calc+grpo |" in (tmp_path / "study_headline.md").read_text()
    greedy = sorted(json.loads(p.read_text())["record"]["base"]["greedy"]
                    for p in RUNS.glob("countdown__s1[0-4]__*.json"))
    assert len(greedy) == 5
    assert f"| countdown | {np.mean(greedy[1:4]):.3f} [" in table  # five seeds: the IQM is the middle three's mean


def test_the_study_refuses_an_unknown_arm():
    from benchmarks.think.__main__ import main

    with pytest.raises(SystemExit):
        main(["--arms", "search_calc,nonsense", "--out", "/nonexistent-never-written"])


def test_one_run_of_the_study_cold_starts_evaluates_and_trains():
    pytest.importorskip("torch")
    from benchmarks.think.__main__ import think_run

    spec = {"seed": 0, "env_id": "rlvr/CountdownThink-v0", "n_numbers": 3,
            "env_kwargs": {"solution_style": "path", "calculator": True},
            "sft": {"n": 64, "epochs": 1, "batch_size": 64, "learning_rate": 1e-3},
            "eval": {"k": 4, "prompts": 6}, "grpo": {"length_weight": 0.1}, "budget": 500}
    rec = think_run(spec)
    assert rec["sft_tokens"] > 64 and 0.0 <= rec["base"]["greedy"] <= 1.0
    assert set(rec["base"]) >= {"sampled", "pass_at", "steps", "backs", "calculator_calls", "step_pass_rate"}
    assert rec["rl_steps"] >= 500 and rec["curve"] and "rollout/ep_len_mean" in rec["curve"][0]
    assert set(rec["after"]["pass_at"]) == {"1", "4"}
