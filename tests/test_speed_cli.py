"""The speed measurements are one package behind one CLI: ``python -m benchmarks.speed <name> [args]``."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from benchmarks.speed import MEASUREMENTS
from benchmarks.speed.__main__ import main


def test_every_measurement_module_is_reachable_by_name() -> None:
    folder = Path(importlib.import_module("benchmarks.speed").__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")}
    assert set(MEASUREMENTS.values()) == modules  # a new module must get a CLI name
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
