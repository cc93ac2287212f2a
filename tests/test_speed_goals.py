"""benchmarks.speed.goals: the Amdahl ceiling row computed from measured times, pinned by hand."""

from __future__ import annotations

import pytest

from benchmarks.speed.goals import amdahl_ceiling


def test_amdahl_ceiling_by_hand() -> None:
    # DummyVecEnv: learn 10 s of which the update is 8 s; the adapter's update took 7.5 s (noise):
    # the generous bound uses the smaller update, 10 / 7.5 = 1.333...
    out = amdahl_ceiling({"learn_seconds": 10.0, "update_seconds": 8.0},
                         {"learn_seconds": 8.2, "update_seconds": 7.5})
    assert out["update_seconds"] == 7.5
    assert out["ceiling"] == pytest.approx(10.0 / 7.5)
    # an update that is a fifth of learn() allows exactly 5x
    assert amdahl_ceiling({"learn_seconds": 5.0, "update_seconds": 1.0},
                          {"learn_seconds": 2.0, "update_seconds": 1.0})["ceiling"] == pytest.approx(5.0)
