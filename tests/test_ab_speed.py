"""benchmarks.tools.ab_speed: the interleaved order, the medians and per-round ratios on synthetic rounds,
the table, and a measuring process that imports the checkout it is given (and refuses another)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tools import ab_speed
from benchmarks.tools.ab_speed import round_order, rows_of, summarize

ROOT = Path(__file__).resolve().parent.parent
LABELS = list(ab_speed.VECTOR_ENVS)


def _result(vector: float, countdown: float, cartpole: float) -> dict[str, Any]:
    return {"rlvr_env": "x", "vector": {label: vector * (i + 1) for i, label in enumerate(LABELS)},
            "single": {"rlvr/Countdown-v0": countdown, "CartPole-v1": cartpole}}


# (A, B) per round: A's vector [100, 200, 300], B's [110, 180, 330]; single-env ratios A [0.5, 0.25, 1],
# B [0.6, 0.5, 0.5], so B / A of the ratio per round is [1.2, 2, 0.5] (median 1.2, not 0.5 / 0.5 = 1).
ROUNDS = [{"a": _result(100, 10, 20), "b": _result(110, 12, 20)},
          {"a": _result(200, 10, 40), "b": _result(180, 10, 20)},
          {"a": _result(300, 10, 10), "b": _result(330, 10, 20)}]


def test_rounds_alternate_which_checkout_runs_first() -> None:
    assert [round_order(r) for r in range(4)] == [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")]


def test_rows_of_one_process() -> None:
    rows = rows_of(_result(100, 10, 40))
    assert rows[f"vector {LABELS[0]}"] == 100 and rows[f"vector {LABELS[2]}"] == 300
    assert rows["single rlvr/Countdown-v0"] == 10 and rows["single CartPole-v1"] == 40
    assert rows["single rlvr/Countdown-v0 / CartPole-v1"] == pytest.approx(0.25)
    assert len(rows) == len(LABELS) + 3


def test_summarize_gives_medians_and_the_median_of_per_round_ratios() -> None:
    s = summarize(ROUNDS)
    first = s[f"vector {LABELS[0]}"]
    assert (first["a"], first["b"]) == (200, 180)
    assert first["b_over_a"] == pytest.approx(1.1)  # ratios 1.1, 0.9, 1.1
    assert s[f"vector {LABELS[1]}"]["a"] == 400  # each env its own row
    ratio = s["single rlvr/Countdown-v0 / CartPole-v1"]
    assert (ratio["a"], ratio["b"]) == (pytest.approx(0.5), pytest.approx(0.5))
    assert ratio["b_over_a"] == pytest.approx(1.2)
    assert s["single CartPole-v1"] == {"a": 20, "b": 20, "b_over_a": pytest.approx(1.0)}
    with pytest.raises(ValueError, match="no rounds"):
        summarize([])


def test_the_table_has_a_row_per_measurement() -> None:
    text = ab_speed.markdown(summarize(ROUNDS), "/a", "/b", 3)
    lines = text.splitlines()
    assert lines[0].startswith("A = `/a`, B = `/b`; 3 rounds")
    assert f"| vector {LABELS[0]} steps/s | 200 | 180 | 1.100 |" in lines
    assert "| single rlvr/Countdown-v0 / CartPole-v1 | 0.50x | 0.50x | 1.200 |" in lines
    assert len(lines) == 4 + len(LABELS) + 3


def test_main_interleaves_and_writes_to_the_ignored_default_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, int]] = []

    def fake(checkout: Path, settings: dict[str, Any]) -> dict[str, Any]:
        calls.append((checkout, settings["round"]))
        return ROUNDS[settings["round"]]["a" if checkout == ROOT else "b"]

    other = tmp_path / "other"
    (other / "rlvr_env").mkdir(parents=True)
    (other / "rlvr_env" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ab_speed, "measure", fake)
    result = ab_speed.main(["--a", str(ROOT), "--b", str(other), "--rounds", "3"])
    assert calls == [(ROOT, 0), (other, 0), (other, 1), (ROOT, 1), (ROOT, 2), (other, 2)]
    assert result["summary"] == summarize(ROUNDS)
    folder = Path("benchmark-runs") / "ab_speed"
    assert (tmp_path / folder / "ab_speed.md").read_text().startswith(f"A = `{ROOT}`")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(folder / "ab_speed.json")], cwd=ROOT)
    assert ignored.returncode == 0
    with pytest.raises(SystemExit):
        ab_speed.main(["--a", str(tmp_path), "--b", str(ROOT)])  # no rlvr_env there


SMALL = {"seed": 0, "seconds": 0.01, "steps": 50, "num_envs": 4, "round": 0}


def test_the_measuring_process_imports_the_given_checkout() -> None:
    got = ab_speed.measure(ROOT, SMALL)
    assert Path(got["rlvr_env"]) == ROOT / "rlvr_env" / "__init__.py"
    assert set(got["vector"]) == set(LABELS) and all(v > 0 for v in got["vector"].values())
    assert set(got["single"]) == {"rlvr/Countdown-v0", "CartPole-v1"}


def test_a_process_that_imports_another_rlvr_env_fails(tmp_path: Path) -> None:
    # tmp_path holds no rlvr_env: the process finds the installed one, and must say so
    with pytest.raises(RuntimeError, match="not from the checkout"):
        ab_speed.measure(tmp_path, SMALL)
