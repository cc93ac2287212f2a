"""The pipeline (benchmarks/core): run files that cannot be mixed up, one executor for every experiment,
one seed syntax, git-ignored default outputs, and Ray that behaves (a head already up, a cluster address
with token auth, an unreachable address, an unwritable folder, a failed write, another worker version)."""

from __future__ import annotations

import csv
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.core import executor, store
from benchmarks.core.common import LOCAL_OUT, ROOT, output_folder
from benchmarks.core.executor import Task, run_tasks
from benchmarks.core.run import comparable, spec_task
from benchmarks.core.store import check_run, load_run, save_run
from benchmarks.core.study import RunSpec

#: Every experiment's CLI module: each has build_parser(); those that take --seeds parse them alike.
EXPERIMENTS = ("compare", "lab", "countdown", "grpo_targets", "scale", "tune", "spread", "env_speed",
               "throughput", "vector_speed", "llm_rewards", "fresh_install", "speed_goals", "tabular_hold",
               "profile_grpo", "r1_speed", "r1")


def test_every_benchmark_command_is_in_the_experiment_list() -> None:
    # a new `python -m benchmarks.X` command must join EXPERIMENTS, so the output and seed tests cover it
    root = Path(__file__).resolve().parent.parent / "benchmarks"
    commands = {p.stem for p in root.glob("*.py") if 'if __name__ == "__main__"' in p.read_text()}
    # maintenance, a demo, and r1_tune (choosing-seed runs, never committed; writes benchmark-runs/r1_tune/)
    helpers = {"update_readme", "migrate_runs", "demo", "r1_tune"}
    assert commands - helpers - {"lab"} <= set(EXPERIMENTS), sorted(commands - helpers - set(EXPERIMENTS))
SEEDED = ("compare", "lab", "countdown", "grpo_targets", "scale", "tune", "tabular_hold")
#: The learning columns of runs.csv: everything that is not time, memory or provenance.
LEARNING = ("contender", "seed", "num_timesteps", "learned_steps", "final_train_success",
            "final_test_success",
            "steps_to_95", "reached_95", "steps_to_100", "reached_100", "collapsed", "greedy_constant")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="warning")
    try:
        yield
    finally:
        ray.shutdown()


def _specs() -> list[RunSpec]:
    return [RunSpec("grpo_tabular", "rlvr/Arithmetic-v0", seed, 400, 200) for seed in (0, 1)]


def _learning(out: Path) -> list[tuple[str, ...]]:
    with (out / "runs.csv").open(newline="") as f:
        return sorted(tuple(row[c] for c in LEARNING) for row in csv.DictReader(f))


# ------------------------------------------------------------------------------------------------
# Run files: key, fingerprint, checksum; bad files quarantined and retrained
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, local_ray: None) -> Path:
    from benchmarks.compare import main

    out = tmp_path_factory.mktemp("clean")
    assert main(["--seeds", "0-1", "--budget", "400", "--contenders", "grpo_tabular", "--out", str(out),
                 "--quiet", "--no-plots"]) == 0
    return out


def _tamper_edited(path: Path, other: Path) -> None:
    data = json.loads(path.read_text())
    data["record"]["final_test_success"] = 1.0 - data["record"]["final_test_success"]  # a verdict moves
    path.write_text(json.dumps(data))


def _tamper_copied(path: Path, other: Path) -> None:
    shutil.copyfile(other, path)  # another run's record under this run's name


def _tamper_truncated(path: Path, other: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def _tamper_binary(path: Path, other: Path) -> None:
    path.write_bytes(bytes(range(256)) * 4)


def _tamper_schema(path: Path, other: Path) -> None:
    path.write_text('{"format": 2}')


@pytest.mark.parametrize("case, reason", [
    (_tamper_edited, "checksum"), (_tamper_copied, "key"), (_tamper_truncated, "corrupt"),
    (_tamper_binary, "binary"), (_tamper_schema, "format"),
])
def test_a_bad_run_file_is_quarantined_named_and_retrained(case, reason, clean: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.compare import main

    out = tmp_path / "study"
    shutil.copytree(clean / "runs", out / "runs")
    victim, other = sorted((out / "runs").glob("*.json"))
    case(victim, other)
    assert main(["--seeds", "0-1", "--budget", "400", "--contenders", "grpo_tabular", "--out", str(out),
                 "--quiet", "--no-plots"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning: run file")]
    assert len(warnings) == 1 and str(victim) in warnings[0]
    assert (out / "runs" / "quarantine" / f"{victim.name}.{reason}").is_file()
    check_run(victim)  # retrained: a valid file again
    assert _learning(out) == _learning(clean)  # the final table equals a clean run's
    seeds = [row[1] for row in _learning(out)]
    assert seeds == ["0", "1"]  # each seed once


def test_load_run_checks_the_format_even_when_everything_else_matches(tmp_path: Path) -> None:
    record = {"key": "k", "value": 1}
    path = save_run(tmp_path, "k", "fp", record)
    assert load_run(path, "k", "fp") == record
    data = json.loads(path.read_text())
    data["format"] = store.STORE_FORMAT - 1  # a file of an older layout, checksum still valid
    path.write_text(json.dumps(data))
    assert load_run(path, "k", "fp") is None
    assert (tmp_path / "quarantine" / "k.json.format").is_file()


def test_a_changed_spec_or_code_version_is_not_reused(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    task = spec_task(_specs()[0])
    save_run(tmp_path, task.key, task.fingerprint, {"key": task.key})
    assert load_run(tmp_path / f"{task.key}.json", task.key, task.fingerprint) is not None
    monkeypatch.setattr(store, "CODE_VERSION", store.CODE_VERSION + 1)
    assert load_run(tmp_path / f"{task.key}.json", task.key, task.fingerprint) is None
    assert (tmp_path / "quarantine" / f"{task.key}.json.fingerprint").is_file()


def test_the_committed_run_files_pass_their_checks() -> None:
    files = sorted((ROOT / "benchmarks" / "results").glob("**/runs/*.json"))
    assert len(files) > 100
    for path in files:
        check_run(path)  # key, checksum, format (fingerprints depend on the libraries installed)


# ------------------------------------------------------------------------------------------------
# One executor for every experiment
# ------------------------------------------------------------------------------------------------
def test_a_countdown_run_and_a_grpo_targets_run_go_through_the_executor(tmp_path: Path,
                                                                        local_ray: None) -> None:
    from benchmarks import countdown, grpo_targets

    out = tmp_path / "countdown"
    assert countdown.main(["--parts", "maskable", "--maskable-seeds", "10", "--maskable-budget", "600",
                           "--eval-prompts", "8", "--eval-every", "300", "--out", str(out), "--quiet"]) == 0
    result = json.loads((out / "countdown.json").read_text())
    runs = result["maskable"]["grpo"] + result["maskable"]["maskable_ppo"]
    assert len(runs) == 2 and all(r["steps"] >= 600 for r in runs)
    files = sorted((out / "runs").glob("*.json"))
    fns = [check_run(p)["execution"]["fn"] for p in files]
    assert fns == ["benchmarks.countdown:grpo_run", "benchmarks.countdown:maskable_run"]
    out = tmp_path / "targets"
    result = grpo_targets.main(["--policies", "tabular", "--seeds", "10", "--budget-tabular", "640",
                                "--no-generic", "--out", str(out), "--quiet"])
    assert [r["seed"] for r in result["arithmetic"]] == [10] and result["arithmetic"][0]["steps_run"] >= 640
    (path,) = (out / "runs").glob("*.json")
    assert check_run(path)["execution"]["fn"] == "benchmarks.grpo_targets:arithmetic_run"


@pytest.mark.parametrize("name", SEEDED)
def test_every_cli_parses_seeds_the_same_way(name: str) -> None:
    parser = importlib.import_module(f"benchmarks.{name}").build_parser()
    required = {"spread": ["a", "b"]}.get(name, [])
    if name == "tune":
        cases = {"1000-1002": [1000, 1001, 1002], "1000,1002,1005": [1000, 1002, 1005]}
        bad = ["1000", "12", "3-1"]
    else:
        minimum = 2 if name == "lab" else 1
        cases = {"10-12": [10, 11, 12], "10,11": [10, 11], "100-101,7": [100, 101, 7]}
        if minimum == 1:
            cases["5"] = [5]  # a bare number is that seed, never a count
        bad = ["1-x", "3-1", "1,1", ""] + (["5"] if minimum == 2 else [])
    for text, seeds in cases.items():
        assert parser.parse_args([*required, "--seeds", text]).seeds == seeds, (name, text)
    for text in bad:
        with pytest.raises(SystemExit):
            parser.parse_args([*required, "--seeds", text])


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_default_output_is_git_ignored(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    args = module.build_parser().parse_args({"spread": ["a", "b"]}.get(name, []))
    if name == "compare":
        out = module.resolve_out(args)
    elif name == "tune":
        out = args.out or LOCAL_OUT / "tune" / args.study
    else:
        out = output_folder(args)
    assert not out.is_absolute() and out.parts[0] == str(LOCAL_OUT)
    probe = subprocess.run(["git", "check-ignore", "-q", str(out / "runs" / "x.json")], cwd=ROOT)
    assert probe.returncode == 0, f"{name}: {out} is not ignored by git"
    if hasattr(args, "_committed") or name == "compare":
        args.update_results = True
        committed = module.resolve_out(args) if name == "compare" else output_folder(args)
        assert committed.is_relative_to(ROOT / "benchmarks" / "results")


def test_the_lab_has_one_module_per_claim_and_no_private_probe() -> None:
    from benchmarks import lab

    for name in lab.CLAIMS:
        assert importlib.import_module(f"benchmarks.lab.{name}").CLAIM is lab.CLAIMS[name]
    for path in (ROOT / "benchmarks").rglob("*.py"):
        assert "_group_rewards" not in path.read_text(), path  # observed through add_group_hook only
        assert "ProcessPoolExecutor" not in path.read_text(), path  # one executor


# ------------------------------------------------------------------------------------------------
# Ray that behaves
# ------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_address_fails_fast_saying_what_to_check(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="ray start --head"):
        run_tasks([spec_task(s) for s in _specs()], tmp_path, address=f"127.0.0.1:{port}", progress=False)
    assert time.monotonic() - t0 < 60
    t0 = time.monotonic()  # an address that never answers (TEST-NET-1, RFC 5737): the timeout
    with pytest.raises(ConnectionError, match="nothing answers"):
        executor._check_reachable("192.0.2.1:6379", timeout=3.0)
    assert time.monotonic() - t0 < 60 and executor.CONNECT_TIMEOUT < 60
    assert not list(tmp_path.glob("runs/*.json"))


def test_an_unwritable_output_folder_fails_before_anything_trains(tmp_path: Path) -> None:
    ran = tmp_path / "ran"

    def must_not_run(spec: dict) -> dict:  # pragma: no cover - the point is that it never runs
        ran.write_text("trained")
        return {}

    if os.geteuid() == 0:  # root writes anywhere permissions say no; /sys is a read-only filesystem
        out = Path("/sys/rlvr-env-test")
    else:
        out = tmp_path / "ro"
        out.mkdir()
        out.chmod(0o555)
    with pytest.raises(PermissionError, match="not writable"):
        run_tasks([Task(must_not_run, {"seed": 0}, "k")], out, progress=False)
    assert not ran.exists()


def test_a_failed_write_keeps_the_other_runs_and_names_the_failed_one(
        tmp_path: Path, local_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [spec_task(s) for s in _specs()]
    real = executor.save_run

    def flaky(run_dir: Path, key: str, fp: str, record: dict) -> Path:
        if key == tasks[0].key:
            raise OSError(28, "No space left on device")
        return real(run_dir, key, fp, record)

    monkeypatch.setattr(executor, "save_run", flaky)
    outcome = run_tasks(tasks, tmp_path, progress=False)
    assert list(outcome.records) == [tasks[1].key]
    assert len(outcome.failures) == 1 and outcome.failures[0].startswith(tasks[0].key)
    assert "No space" in outcome.failures[0]
    assert [p.stem for p in (tmp_path / "runs").glob("*.json")] == [tasks[1].key]


def test_a_worker_on_other_code_fails_loudly(tmp_path: Path, local_ray: None,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The driver's code version differs from what the workers report (as with a node on another
    checkout): no run is saved, each fails naming both versions."""
    real = executor.worker_version()
    monkeypatch.setattr(executor, "worker_version", lambda: {**real, "source": "another-checkout"})
    outcome = run_tasks([spec_task(s) for s in _specs()], tmp_path, progress=False)
    assert not outcome.records and len(outcome.failures) == 2
    assert all("runs other code" in f and "another-checkout" in f for f in outcome.failures)
    assert "error:" in capsys.readouterr().err
    assert not list((tmp_path / "runs").glob("*.json"))


@pytest.fixture
def ray_head(tmp_path: Path) -> Iterator[str]:
    """A `ray start --head` of this checkout on a free port, stopped by its own pid afterwards."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_AUTH_MODE", None)
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}", "--num-cpus=1",
           "--include-dashboard=false", "--disable-usage-stats", "--block"]
    head = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not come up in 90 s")
        time.sleep(3)  # the raylet registers after the GCS
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()  # `ray start --block` stops what it started when terminated
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()


def test_with_a_head_up_the_default_and_the_cluster_recipe_both_work(ray_head: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A head already up on the machine: the default (embedded) ignores it; ``--ray-address`` joins it,
    token authentication included (a token exists once any embedded Ray has run)."""
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "")  # "" is "no address" to ray_session, whatever the shell has
    tasks = [spec_task(s) for s in _specs()]
    default = run_tasks(tasks, tmp_path / "default", workers=1, progress=False)
    assert default.failures == [] and len(default.records) == 2
    assert (Path.home() / ".ray" / "auth_token").is_file() or os.environ.get("RAY_AUTH_TOKEN")
    joined = run_tasks(tasks, tmp_path / "joined", address=ray_head, progress=False)
    assert joined.failures == [] and len(joined.records) == 2
    hosts = {r["execution"]["host"] for r in joined.records.values()}
    assert hosts == {socket.gethostname()}
    for key, record in joined.records.items():  # the same run wherever it ran
        assert comparable(record) == comparable(default.records[key])
