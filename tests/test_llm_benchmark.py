"""benchmarks.llm_rewards on a small sample: every bridge agrees with verify(); no hostile completion is
paid."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.llm_rewards import main


def test_llm_rewards_benchmark_small(tmp_path: Path) -> None:
    assert main(["--n", "400", "--speed-n", "100", "--repeats", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "llm_rewards.json").read_text())
    assert set(result["agreement"]) == {"TRL reward functions", "verl compute_score",
                                        "verifiers taskset (task.score)", "text env (step)"}
    assert all(a["disagreements"] == 0 for a in result["agreement"].values())
    mix = result["mix"]
    assert min(mix.values()) > 20 and sum(mix.values()) == 400  # all three kinds are planted
    assert result["hostile"]["exceptions"] == 0
    assert set(result["hostile"]["paid"]) == {"score_completion", "TRL", "verl", "verifiers", "text env"}
    assert all(v == 0 for v in result["hostile"]["paid"].values())
    assert result["throughput"]["trl_median"] > 0
    assert "Disagreements" in (tmp_path / "llm_rewards.md").read_text()
