"""Smoke tests of the GRPO-vs-PPO benchmark: it runs, writes every file, parses, and resumes.

Nothing here depends on which contender wins.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
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
from benchmarks.core.stats import iqm, iqm_ci, ratio_ci
from benchmarks.core.store import check_run, save_run

SMOKE_CONTENDERS = "grpo_tabular,ppo_default"
OUTPUT_FILES = ("runs.csv", "curves.csv", "summary.csv", "summary.json", "table.md", "curves_steps.png",
                "curves_wall.png")


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One embedded local Ray (2 CPUs, loopback only) for the module; the executor reuses it."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="warning")
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory: pytest.TempPathFactory, local_ray: None) -> Path:
    out = tmp_path_factory.mktemp("compare")
    argv = ["--seeds", "0-1", "--budget", "400", "--contenders", SMOKE_CONTENDERS, "--out", str(out), "--quiet"]
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
        versions = check_run(path)["versions"]
        for name in ("python", "torch", "stable-baselines3", "numpy", "gymnasium"):
            assert versions[name], (path.name, name)
    assert "Library versions of the runs: python" in (smoke_out / "table.md").read_text()
    assert "Every run trained exactly 400 env steps" in (smoke_out / "table.md").read_text()


@pytest.mark.parametrize("contender, budget",
                         [("grpo_mlp", 1000), ("ppo_tuned", 1000), ("grpo_tabular", 640)])
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


def test_grpo_with_dynamic_sampling_on_countdown_trains_exactly_the_budget() -> None:
    """Variable-length answers and DAPO's resampled batches: the crossing iteration is still rolled back."""
    from benchmarks.compare.run import run_one
    from benchmarks.compare.study import contender_hyperparams

    hyperparams = contender_hyperparams("grpo_mlp_masked", {"dynamic_sampling": True, "group_size": 4,
                                                            "prompts_per_iter": 2})
    record = run_one(RunSpec("grpo_mlp_masked", "rlvr/Countdown-v0", 0, 1001, 500, hyperparams,
                             env_kwargs={"n_numbers": 3}, eval_prompts=8, sampled_k=2))
    assert record["num_timesteps"] == 1001 and record["learned_steps"] < 1001
    assert record["final_test_sampled"] is not None and record["masked"]


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


def test_rerun_reuses_finished_runs(smoke_out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_files = sorted((smoke_out / "runs").glob("*.json"))
    before = {p.name: p.stat().st_mtime_ns for p in run_files}
    argv = ["--seeds", "0-1", "--budget", "400", "--contenders", SMOKE_CONTENDERS, "--out", str(smoke_out),
            "--quiet", "--no-plots"]
    capsys.readouterr()
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()  # it says that it reused every run, and where it wrote
    assert printed[0] == "arithmetic: 4 run(s): 4 found on disk, 0 to run (all found on disk, nothing trains)"
    assert f"results in {smoke_out}/" in printed[-1]
    assert "*.png" not in printed[-1] and "curves.csv, runs/)" in printed[-1]  # --no-plots wrote none
    after = {p.name: p.stat().st_mtime_ns for p in (smoke_out / "runs").glob("*.json")}
    assert after == before  # nothing retrained, nothing rewritten
    meta = json.loads((smoke_out / "summary.json").read_text())["meta"]
    assert meta["elapsed_seconds_this_invocation"] < 5.0
    # --rerun replaces exactly the named contender's runs (and is not ignored)
    assert main([*argv, "--rerun", "ppo_default"]) == 0
    again = {p.name: p.stat().st_mtime_ns for p in (smoke_out / "runs").glob("*.json")}
    assert {n for n in again if again[n] != before[n]} == {n for n in before if n.startswith("ppo_default")}


def test_ray_and_in_process_runs_give_identical_records(smoke_out: Path) -> None:
    """The same specs through local Ray (the smoke study's workers) and in this process give the same
    per-run records, timing fields aside (seeded runs are deterministic wherever they run)."""
    from benchmarks.compare.run import comparable, run_one

    for path in sorted((smoke_out / "runs").glob("*__s0__*.json")):
        record = check_run(path)
        again = run_one(RunSpec.from_dict(record["spec"]))
        assert comparable(again) == comparable(record), path.name


def test_a_killed_worker_is_retried_and_leaves_no_partial_file(tmp_path: Path, local_ray: None) -> None:
    """SIGKILL the worker process of a running task: Ray retries the run (bounded), the retry is counted,
    the retry's record is the run's record, and the runs folder holds only complete files."""
    import os
    import signal
    import threading
    import time

    from benchmarks.core.executor import Run, run_all
    from benchmarks.compare.run import comparable, run_one, run_spec

    marker = tmp_path / "first_attempt.pid"

    def slow_first_attempt(spec: dict) -> dict:  # pickled by value into the worker
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            time.sleep(120)  # killed long before this ends
        return run_spec(spec)

    specs = [RunSpec("grpo_tabular", "rlvr/Arithmetic-v0", seed, 400, 200) for seed in (0, 1)]
    out = tmp_path / "out"
    tasks = [Run(slow_first_attempt, s.to_dict(), s.key) for s in specs]
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(outcome=run_all(tasks, out, progress=False)))
    thread.start()
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "no task started within 120 s"
    time.sleep(0.5)
    os.kill(int(marker.read_text()), signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive(), "the grid did not finish after the kill"
    outcome = result["outcome"]
    assert outcome.failures == []
    assert [r["key"] for r in outcome.ordered(tasks)] == [s.key for s in specs]
    assert outcome.retried == 1  # the killed run, counted
    files = sorted(p.name for p in (out / "runs").iterdir())
    assert files == sorted(f"{s.key}.json" for s in specs)  # no temp or partial files
    attempts = []
    for spec in specs:
        saved = check_run(out / "runs" / f"{spec.key}.json")
        attempts.append(saved["execution"]["attempts"])
        assert comparable(saved) == comparable(run_one(spec))
    assert sorted(attempts) == [1, 2]


def test_a_run_that_raises_fails_alone(tmp_path: Path, local_ray: None) -> None:
    from benchmarks.core.executor import run_all
    from benchmarks.compare.run import spec_run

    good = RunSpec("grpo_tabular", "rlvr/Arithmetic-v0", 0, 400, 200)
    bad = RunSpec("grpo_tabular", "rlvr/Arithmetic-v0", 1, 400, 200, {"group_size": -1})
    outcome = run_all([spec_run(good), spec_run(bad)], tmp_path, progress=False)
    records, failures = list(outcome.records.values()), outcome.failures
    assert [r["key"] for r in records] == [good.key]
    assert len(failures) == 1 and failures[0].startswith(bad.key)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [f"{good.key}.json"]


@pytest.mark.parametrize("name", ["grpo_mlp_tuned", "ppo_tuned"])
def test_tuned_hyperparameters_build(name: str) -> None:
    """The committed hparams files of the Arithmetic study exist and every contender builds with them."""
    spec = RunSpec(name, "rlvr/Arithmetic-v0", 0, 100, 10, resolve_hyperparams(name))
    model = build_model(spec)
    assert model.num_timesteps == 0


@pytest.mark.parametrize(
    "text, seeds",
    [("3", [3]), ("0", [0]), ("0,4,7", [0, 4, 7]), ("10-12", [10, 11, 12]), ("10-11,5", [10, 11, 5])],
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["-1", "a", "1,1", "1000-1001", "", "5-3", "1-2-3"])
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
def test_bad_cli_input(argv: list[str], match: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # a usage error (exit status 2), not a traceback
        main([*argv, "--out", str(tmp_path), "--quiet"])
    assert exc.value.code == 2 and match in capsys.readouterr().err


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "a.txt", "one")
    atomic_write_text(tmp_path / "a.txt", "two")
    assert (tmp_path / "a.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write goes to a temp file that replaces the target only when complete: a failure mid-write
    (here: the flush to disk) leaves the previous content intact and no temp file behind."""
    import os

    path = tmp_path / "run.json"
    atomic_write_text(path, "the finished run")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(path, "half of another")
    assert path.read_text() == "the finished run"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_stats() -> None:
    x = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0])
    assert iqm(x) == pytest.approx(np.mean(np.sort(x)[2:6]))
    ci = iqm_ci(x, seed=0)
    assert ci.low <= ci.point <= ci.high
    assert iqm_ci(x, seed=0) == ci  # seeded bootstrap repeats exactly
    assert iqm_ci([1.0, 1.0, 1.0]).low == 1.0
    # The interval is the IQM's, which ignores the outlier: the mean's would reach far above 1.
    outlier = iqm_ci([0.0] * 6 + [1.0] * 6 + [1000.0], seed=0)
    assert 0.0 <= outlier.low <= outlier.point <= outlier.high <= 1.0
    r = ratio_ci([10.0, 12.0, 14.0], [20.0, 24.0, 28.0], seed=0)
    assert r.point == pytest.approx(0.5) and r.low <= 0.5 <= r.high


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_next_invocation_resumes(tmp_path: Path) -> None:
    """SIGINT to ``python -m benchmarks.compare`` once a run is on disk: it exits, leaves only complete
    run files, and the same command then trains only the missing runs."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "benchmarks.compare", "--seeds", "6", "--budget", "20480",
           "--contenders", "grpo_mlp", "--workers", "1", "--out", str(out), "--quiet", "--no-plots"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not list(out.glob("runs/*.json")):
        time.sleep(0.2)
    assert proc.poll() is None, f"finished before the interrupt: {proc.communicate()}"
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode != 0
    assert "interrupted" in err
    first = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    assert first and all(name.endswith(".json") and not name.startswith(".") for name in first)
    for name in first:
        json.loads((out / "runs" / name).read_text())
    assert len(first) < 6
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    assert len(after) == 6
    assert all(after[name] == mtime for name, mtime in first.items())  # resumed, not redone


def test_core_packages_never_import_ray() -> None:
    import subprocess
    import sys

    code = ("import sys, rlvr_env, agents, agents.grpo, benchmarks.core.baselines, agents.evaluation; "
            "from agents import GRPO; GRPO('rlvr/Arithmetic-v0', policy='mlp').learn(640); "
            "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


@pytest.mark.slow
def test_tune_runs_trials_through_ray_tune_on_three_seeds(tmp_path: Path) -> None:
    pytest.importorskip("ray.tune", reason="benchmarks.compare.tune needs the tune extra (ray[tune])")
    from benchmarks.compare.tune import main as tune_main

    assert tune_main(["--contenders", "grpo_mlp_tuned", "--trials", "2", "--budget", "1280", "--workers", "2",
                      "--out", str(tmp_path / "out"), "--hparams-dir", str(tmp_path), "--quiet"]) == 0
    result = json.loads((tmp_path / "grpo_mlp_tuned.json").read_text())
    assert result["tuning_seeds"] == [1000, 1001, 1002] and len(result["trials"]) == 2
    assert result["trials"][0]["hyperparams"]["group_size"] == 16  # the defaults are tried first
    runs = list((tmp_path / "out" / "runs").glob("*.json"))
    assert len(runs) == 6 and all(check_run(p)["num_timesteps"] == 1280 for p in runs)


def test_spread_finds_identical_and_changed_runs(smoke_out: Path, tmp_path: Path) -> None:
    import shutil

    from benchmarks.compare.spread import main as spread_main

    other = tmp_path / "other"
    shutil.copytree(smoke_out / "runs", other / "runs")
    changed = sorted((other / "runs").glob("*.json"))[0]
    record = check_run(changed)  # another valid run file of the same run, with another curve
    record["curve"][-1]["test_success"] = 1.0 - record["curve"][-1]["test_success"]
    save_run(changed.parent, changed.stem, json.loads(changed.read_text())["fingerprint"], record)
    assert spread_main([str(smoke_out), str(other), "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "spread.json").read_text())
    n = len(list(other.glob("runs/*.json")))
    assert result["n"] == n and result["identical"] == n - 1 and result["same_versions"]
    assert "| NO |" in (tmp_path / "spread.md").read_text()


def test_tune_seeds_take_a_list_or_a_range_and_need_three() -> None:
    # the one seed syntax (a range 1000-1002 or a list); fewer than 3, or reported seeds, refused by the
    # parser before any Ray is started
    from benchmarks.compare.tune import main as tune_main

    for seeds, match in (("1000-1001", "at least 3"), ("1000,1001", "at least 3"), ("1000-x", "a range"),
                         ("10-12", "1000 and up")):
        with pytest.raises(SystemExit):
            tune_main(["--contenders", "grpo_mlp_tuned", "--seeds", seeds])
        with pytest.raises(ValueError, match=match):
            parse_seeds(seeds, minimum=3, tuning=True)


def test_one_seed_gives_no_verdict_and_no_interval(tmp_path: Path, local_ray: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """From one seed an "interval" is a point: the table says so and no verdict or goal is read from it."""
    out = tmp_path / "one"
    assert main(["--seeds", "0", "--budget", "400", "--contenders", SMOKE_CONTENDERS, "--out", str(out),
                 "--quiet", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    grpo = next(r for r in summary["rows"] if r["contender"] == "grpo_tabular")
    assert grpo["n_seeds"] == 1 and grpo["verdict_vs_ppo_default"] == "n/a: one seed"
    assert {q["goal_steps"] for q in summary["ratios"]} == {"n/a: one seed"}
    row = next(line for line in (out / "table.md").read_text().splitlines() if line.startswith("| GRPO"))
    assert "(one seed, not an interval)" in row and "[" not in row
    verdicts = [line for line in printed.splitlines() if line.startswith("Verdict:")]
    assert verdicts and all("n/a: one seed" in line and "wins" not in line for line in verdicts)


def test_the_lab_and_r1_read_no_verdict_from_one_seed() -> None:
    from benchmarks.core.stats import paired, verdict
    from benchmarks.r1.report import yue_claim

    assert verdict(paired([0.9], [0.1]), 1) == "n/a: one seed"
    assert verdict(paired([0.9, 0.8], [0.1, 0.2]), 1) == "agree"
    ev = {s: {"pass_at": {"1": 0.2, "64": 0.9}} for s in ("test", "train")}
    better = {s: {"pass_at": {"1": 0.6, "64": 0.8}} for s in ("test", "train")}
    means = {f"{s}_pass_at": {"1": 0.2, "64": 0.9} for s in ("test", "train")}
    summary = {"base_10": {"seeds": [10], "per_seed": [ev], **means},
               "grpo_base_10": {"seeds": [10], "per_seed": [better], **means}}
    rows = [r for r in yue_claim(summary, 10, [1, 64]) if r[0].startswith("GRPO")]
    assert len(rows) == 4
    for _, measured, said in rows:
        assert said == "n/a: one seed" and "(one seed, not an interval)" in measured


def test_the_committed_quick_study_runs_are_found_under_this_code_s_keys() -> None:
    """A config field added later (the critic's, say) must not change the key of a run that does not use
    it: every run of the committed quick study is found under the key this code computes, so a rerun
    with --update-results reuses them instead of training again."""
    from benchmarks import compare
    from benchmarks.core.common import RESULTS_DIR
    from benchmarks.compare.study import STUDIES

    folder = RESULTS_DIR / "compare"
    stored = {p.stem for p in (folder / "runs").glob("*.json")}
    meta = json.loads((folder / "summary.json").read_text())["meta"]
    names = sorted({k.split("__")[0] for k in stored})
    specs = compare.specs_for(STUDIES["arithmetic"], names, [10, 11, 12], 102_400, 4096)
    assert len(specs) == len(stored) and meta
    assert [s.key for s in specs if s.key not in stored] == []


def test_moved_run_functions_keep_the_fingerprints_of_the_committed_runs() -> None:
    """A run function that moved (the compare study's, the R1 base's) is fingerprinted under the name its
    stored runs were made with, so moving code does not make the committed runs train again: each committed
    quick-study run file's fingerprint is what this code computes from its spec and its worker's versions."""
    from benchmarks.compare.run import spec_run
    from benchmarks.core.common import RESULTS_DIR
    from benchmarks.core.store import STORED_NAMES, fingerprint

    files = sorted((RESULTS_DIR / "compare" / "runs").glob("*.json"))
    assert files and "benchmarks.compare.run:run_spec" in STORED_NAMES
    for path in files:
        data = json.loads(path.read_text())
        record = data["record"]
        run = spec_run(RunSpec.from_dict(record["spec"]))
        worker = record["execution"]["worker"]
        version = {"code": worker["code"], "libraries": worker["libraries"]}
        assert run.fn_name != record["execution"]["fn"]  # the function moved since the run was stored
        assert fingerprint(run.fn_name, run.spec, version) == data["fingerprint"], path.name
