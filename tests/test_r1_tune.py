"""The R1 GRPO tuning's summary (``python -m benchmarks.r1.tune --summary``): every run file of the
tuning folder becomes a row, with the overrides of the preset and the best setting per seed marked."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from agents.grpo.config import GRPOConfig  # noqa: E402
from benchmarks.r1 import tune  # noqa: E402


def _record(name: str, seed: int, sampled: float, **overrides: object) -> dict:
    config = GRPOConfig.preset("transformer", **overrides).to_dict()
    return {"name": name, "seed": seed, "config": config, "base_test_greedy": 0.5, "base_test_sampled": 0.4,
            "test_greedy": 0.6, "test_sampled": sampled, "test_pass_at_k": 0.9, "train_greedy": 0.7,
            "train_sampled": 0.65, "num_timesteps": 300_100, "steps_per_second": 5000.0, "eval_k": 64}


def test_the_summary_tabulates_every_setting_and_marks_the_best(tmp_path, monkeypatch, capsys) -> None:
    runs = tmp_path / "runs"
    (runs / "tune").mkdir(parents=True)
    for rec in (_record("preset", 0, 0.50), _record("lr3e-4", 0, 0.55, learning_rate=3e-4),
                _record("beta0", 0, 0.52, beta=0.0)):
        (runs / "tune" / f"{rec['name']}_s0.json").write_text(json.dumps(rec))
    (runs / "tune" / "base_only_s0.json").write_text(json.dumps({"name": "base_only", "seed": 0}))
    monkeypatch.setattr(tune, "OUT", runs)
    tune.main(["--summary", "--out", str(tmp_path / "out")])
    table = (tmp_path / "out" / "tune.md").read_text()
    assert "| **lr3e-4** | 0 | learning_rate=0.0003 | 300,100 |" in table and "| **0.550** |" in table
    assert "| preset | 0 | none |" in table and "| beta0 | 0 | beta=0.0 |" in table
    assert "base_only" not in table
    data = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert [r["name"] for r in data["rows"]] == ["beta0", "lr3e-4", "preset"]
    assert [r.get("chosen", False) for r in data["rows"]] == [False, True, False]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        tune.main([])
    assert "--name is required (or --summary)" in capsys.readouterr().err
    monkeypatch.setattr(tune, "OUT", tmp_path / "empty")
    with pytest.raises(SystemExit):
        tune.main(["--summary", "--out", str(tmp_path / "out2")])
    assert "no tuning run files" in capsys.readouterr().err
