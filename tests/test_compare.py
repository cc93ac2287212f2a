"""Smoke tests of the GRPO-vs-PPO benchmark: it runs, writes every file, parses, and resumes.

Nothing here depends on which contender wins.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.compare import (
    CONTENDERS,
    CURVE_COLUMNS,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    RunSpec,
    atomic_write_text,
    build_model,
    build_parser,
    main,
    parse_seeds,
    resolve_hyperparams,
)
from benchmarks.stats import iqm, iqm_ci, ratio_ci

SMOKE_CONTENDERS = "grpo_tabular,ppo_default"
OUTPUT_FILES = ("runs.csv", "curves.csv", "summary.csv", "summary.json", "table.md", "curves_steps.png",
                "curves_wall.png")


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compare")
    argv = ["--seeds", "2", "--budget", "400", "--contenders", SMOKE_CONTENDERS, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return out


def test_every_output_exists_and_parses(smoke_out: Path) -> None:
    for name in OUTPUT_FILES:
        assert (smoke_out / name).is_file(), name
    runs = _read_csv(smoke_out / "runs.csv")
    assert list(runs[0]) == RUN_COLUMNS
    assert len(runs) == 2 * len(SMOKE_CONTENDERS.split(","))
    assert {r["contender"] for r in runs} == set(SMOKE_CONTENDERS.split(","))
    assert {r["seed"] for r in runs} == {"0", "1"}
    for r in runs:
        for col in ("final_train_success", "final_test_success"):
            assert 0.0 <= float(r[col]) <= 1.0
        assert int(r["num_timesteps"]) == 400  # exactly the budget, whatever the rollout size
        # GRPO tabular's iterations are 320 steps (the one crossing 400 is rolled back); PPO's first
        # 2,048-step rollout is cut at 400 before any update.
        assert int(r["learned_steps"]) == {"grpo_tabular": 320, "ppo_default": 0}[r["contender"]]
        assert float(r["train_seconds"]) > 0 and float(r["peak_rss_mb"]) > 0
        assert int(r["params_actor"]) > 0
        assert (int(r["params_critic"]) > 0) == (r["algo"] != "GRPO")
    curves = _read_csv(smoke_out / "curves.csv")
    assert list(curves[0]) == CURVE_COLUMNS
    assert all(0.0 <= float(c[k]) <= 1.0 for c in curves for k in ("train_success", "test_success"))
    summary = _read_csv(smoke_out / "summary.csv")
    assert list(summary[0]) == SUMMARY_COLUMNS
    for row in summary:
        lo, mid, hi = (float(row[k]) for k in ("final_test_lo", "final_test_iqm", "final_test_hi"))
        assert 0.0 <= lo <= mid <= hi <= 1.0
        assert row["verdict"]
    data = json.loads((smoke_out / "summary.json").read_text())
    assert {"meta", "rows", "ratios"} <= set(data)
    table = (smoke_out / "table.md").read_text()
    assert all(CONTENDERS[n].label in table for n in SMOKE_CONTENDERS.split(","))
    assert (smoke_out / "curves_steps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list((smoke_out / "runs").glob("*.json"))) == len(runs)


def test_runs_record_library_versions(smoke_out: Path) -> None:
    for path in (smoke_out / "runs").glob("*.json"):
        versions = json.loads(path.read_text())["versions"]
        for name in ("python", "torch", "stable-baselines3", "numpy", "gymnasium"):
            assert versions[name], (path.name, name)
    assert "Library versions of the runs: python" in (smoke_out / "table.md").read_text()
    assert "Every run trained exactly 400 env steps" in (smoke_out / "table.md").read_text()


@pytest.mark.parametrize("contender, budget", [("grpo_mlp", 1000), ("ppo_tuned", 1000), ("grpo_tabular", 640)])
def test_every_contender_trains_exactly_the_budget(contender: str, budget: int) -> None:
    """Budgets that no rollout / iteration divides still end at exactly the budget (GRPO-MLP's
    iterations are 640 steps, tuned PPO's rollouts 8 x 512), and a divisible one learns from all of it."""
    from benchmarks.compare import run_one

    record = run_one(RunSpec(contender, "rlvr/Arithmetic-v0", 0, budget, budget // 2,
                             resolve_hyperparams(contender)))
    assert record["num_timesteps"] == budget
    assert record["curve"][-1]["num_timesteps"] == budget
    expected = {"grpo_mlp": 640, "ppo_tuned": 0, "grpo_tabular": 640}[contender]
    assert record["learned_steps"] == expected


def test_default_output_is_untracked_and_committed_results_need_a_flag(tmp_path: Path) -> None:
    import subprocess

    from benchmarks.compare import FULL, QUICK, RESULTS_DIR, resolve_out

    parser = build_parser()
    assert resolve_out(parser.parse_args([])) == QUICK.out
    assert resolve_out(parser.parse_args(["--full"])) == FULL.out
    assert resolve_out(parser.parse_args(["--update-results"])) == RESULTS_DIR / "compare"
    assert resolve_out(parser.parse_args(["--out", str(tmp_path)])) == tmp_path
    with pytest.raises(ValueError, match="--update-results"):
        resolve_out(parser.parse_args(["--update-results", "--out", str(tmp_path)]))
    root = RESULTS_DIR.parent.parent
    for out in (QUICK.out, FULL.out):
        assert not out.is_absolute()  # relative to where the command runs
        probe = subprocess.run(["git", "check-ignore", "-q", str(out / "runs" / "x.json")], cwd=root)
        assert probe.returncode == 0, f"{out} is not ignored by git"
    probe = subprocess.run(["git", "check-ignore", "-q", str(QUICK.committed / "runs" / "x.json")], cwd=root)
    assert probe.returncode == 1, "committed run files must not be git-ignored"


def test_rerun_reuses_finished_runs(smoke_out: Path) -> None:
    run_files = sorted((smoke_out / "runs").glob("*.json"))
    before = {p.name: p.stat().st_mtime_ns for p in run_files}
    argv = ["--seeds", "2", "--budget", "400", "--contenders", SMOKE_CONTENDERS, "--out", str(smoke_out),
            "--quiet", "--no-plots"]
    assert main(argv) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (smoke_out / "runs").glob("*.json")}
    assert after == before  # nothing retrained, nothing rewritten
    meta = json.loads((smoke_out / "summary.json").read_text())["meta"]
    assert meta["elapsed_seconds_this_invocation"] < 5.0


def test_runs_are_seeded(smoke_out: Path) -> None:
    """Same seed, same learning curve in environment steps and success (wall times differ)."""
    from benchmarks.compare import _run_isolated

    record = json.loads(next((smoke_out / "runs").glob("grpo_tabular__*__s0__*.json")).read_text())
    spec = RunSpec(**{**record["spec"], "eval_splits": tuple(record["spec"]["eval_splits"])})
    again = _run_isolated(spec)  # a fresh process, as in the benchmark
    strip = [{k: v for k, v in p.items() if k != "train_seconds"} for p in record["curve"]]
    assert [{k: v for k, v in p.items() if k != "train_seconds"} for p in again["curve"]] == strip


@pytest.mark.parametrize("name", [n for n, c in CONTENDERS.items() if c.tuned])
def test_tuned_hyperparameters_build(name: str) -> None:
    """The committed hparams files exist and every contender builds with them."""
    spec = RunSpec(name, "rlvr/Arithmetic-v0", 0, 100, 10, resolve_hyperparams(name))
    model = build_model(spec)
    assert model.num_timesteps == 0


@pytest.mark.parametrize(
    "text, seeds",
    [("3", [0, 1, 2]), ("0,4,7", [0, 4, 7]), ("10-12", [10, 11, 12])],
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["0", "-1", "a", "1,1", "1000-1001", ""])
def test_parse_seeds_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="--seeds"):
        parse_seeds(text)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--budget", "0"], "--budget"),
        (["--budget", "100", "--eval-every", "200"], "--eval-every"),
        (["--contenders", "ppo,grpo"], "--contenders"),
        (["--workers", "0"], "--workers"),
        (["--rerun", "ppo"], "--rerun"),
        (["--env", "NoSuchEnv-v9"], "--env"),
    ],
)
def test_bad_cli_input(argv: list[str], match: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=match):
        main([*argv, "--out", str(tmp_path), "--quiet"])


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "a.txt", "one")
    atomic_write_text(tmp_path / "a.txt", "two")
    assert (tmp_path / "a.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_stats() -> None:
    x = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0])
    assert iqm(x) == pytest.approx(np.mean(np.sort(x)[2:6]))
    ci = iqm_ci(x, seed=0)
    assert ci.low <= ci.point <= ci.high
    assert iqm_ci(x, seed=0) == ci  # seeded bootstrap repeats exactly
    assert iqm_ci([1.0, 1.0, 1.0]).low == 1.0
    r = ratio_ci([10.0, 12.0, 14.0], [20.0, 24.0, 28.0], seed=0)
    assert r.point == pytest.approx(0.5) and r.low <= 0.5 <= r.high
