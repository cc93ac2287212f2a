"""The speed measurements are one package behind one CLI: ``python -m benchmarks.speed <name> [args]``."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from benchmarks.speed import MEASUREMENTS, SHARED
from benchmarks.speed.__main__ import main


def test_every_measurement_module_is_reachable_by_name() -> None:
    folder = Path(importlib.import_module("benchmarks.speed").__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")}
    assert set(MEASUREMENTS.values()) == modules - set(SHARED)  # a new module must get a CLI name
    assert set(SHARED) <= modules and not set(SHARED) & set(MEASUREMENTS.values())
    for module in MEASUREMENTS.values():
        assert callable(importlib.import_module(f"benchmarks.speed.{module}").main)


@pytest.mark.parametrize("name", sorted(MEASUREMENTS))
def test_a_measurement_runs_under_its_cli_name(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"usage: python -m benchmarks.speed {name}" in capsys.readouterr().out


def test_an_unknown_name_is_a_usage_error_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope' is not a speed measurement" in err and "goals" in err
    assert main([]) == 2 and "usage: python -m benchmarks.speed <name>" in capsys.readouterr().out


@pytest.mark.slow
def test_the_r1_measurement_times_maskable_ppo_in_the_same_turns() -> None:
    pytest.importorskip("sb3_contrib")
    from benchmarks.speed.r1 import SB3_SETTINGS, measure_together

    rows = measure_together([("transformer", "grpo", {})], 600, seed=0, rounds=2, sb3_steps=2048)
    grpo, sb3 = rows
    assert grpo["advantage"] == "grpo" and sb3["advantage"] == "sb3_maskable_ppo"
    rollout = SB3_SETTINGS["n_envs"] * SB3_SETTINGS["n_steps"]
    assert sb3["steps"] >= 2048 and sb3["steps"] % rollout == 0 and sb3["rollouts"] == sb3["steps"] / rollout
    assert 0 < sb3["rollout_seconds"] < sb3["seconds"] and sb3["update_seconds"] > 0
    assert sb3["parameters"] > grpo["parameters"]  # the critic's own trunk and head


def test_the_r1_measurement_renders_its_table_from_its_json(tmp_path, capsys) -> None:
    from benchmarks.speed.r1 import main as r1_main

    def arm(advantage: str, sps: float, epochs: int = 2, minibatches: int = 4) -> dict:
        return {"policy": "transformer", "advantage": advantage, "epochs": epochs, "minibatches": minibatches,
                "steps_per_second": sps, "answers_per_second": sps / 5, "parameters": 405258.0}

    sb3 = {"advantage": "sb3_maskable_ppo", "steps_per_second": 250.0, "parameters": 811935.0,
           "settings": {"n_envs": 256, "n_steps": 8, "batch_size": 512, "n_epochs": 2},
           "seconds_per_update": 6.5, "rollout_steps_per_second": 1700.0}
    record = {"command": "python -m benchmarks.speed r1 --steps 10", "threads": 1, "load_average": [1, 1, 1],
              "runs": [arm("grpo", 5000), arm("gae", 2000), arm("grpo", 90000, 1, 1), arm("grpo", 9000, 1, 1),
                       sb3],
              "gae_over_grpo": 0.4, "sb3_maskable_ppo_steps_per_second": 250.0,
              "trl": {"parameters": 505728.0, "completions_per_second": 20.0, "steps": 5.0},
              "transformer_answers_over_trl_completions": 90.0, "preset_answers_over_trl_completions": 50.0,
              "sft": {"solutions_per_second": 3000.0, "solutions": 1000.0}}
    (tmp_path / "speed.json").write_text(__import__("json").dumps(record))
    assert r1_main(["--render", "--out", str(tmp_path)]) is None
    table = (tmp_path / "speed.md").read_text()
    assert "| PPO with a critic ÷ GRPO, env steps/s | 0.40x | >= 0.5x **missed** |" in table
    assert "| MaskablePPO env steps/s | 250 | >= 1,000 **missed** |" in table
    assert "90.00x | >= 100x **missed** |" in table and "6.5 s per update" in table
    assert "Command: `python -m benchmarks.speed r1 --steps 10`" in table
