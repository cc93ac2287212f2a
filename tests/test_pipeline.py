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

from benchmarks.core import cluster, executor, store
from benchmarks.core.common import LOCAL_OUT, ROOT, output_folder
from benchmarks.core.executor import Run, run_all
from benchmarks.compare.run import comparable, spec_run
from benchmarks.core.store import check_run, load_run, save_run
from benchmarks.compare.study import RunSpec

#: Every experiment's CLI module (under benchmarks/): each has build_parser(); those that take --seeds parse
#: them alike.
EXPERIMENTS = ("compare", "lab", "countdown", "grpo_targets", "compare.scale", "compare.tune",
               "compare.spread", "speed.env", "speed.throughput", "speed.vector", "llm_rewards",
               "tools.fresh_install", "speed.goals", "tabular_hold", "speed.profile_grpo", "speed.r1",
               "speed.recipe", "r1", "r1.base_search", "r1.tune", "tools.mutation", "think.solver", "think",
               "speed.think", "stages")


def test_every_benchmark_command_is_in_the_experiment_list() -> None:
    # a new `python -m benchmarks.X` command must join EXPERIMENTS, so the output and seed tests cover it
    root = Path(__file__).resolve().parent.parent / "benchmarks"
    commands = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if path.name == "__main__.py":
            commands.add(".".join(parts[:-1]))
        elif 'if __name__ == "__main__"' in path.read_text():
            commands.add(".".join(parts))
    # maintenance, a demo and the speed package's dispatcher (its measurements are listed); the two
    # before/after tools take --out only (their tests check that its default is git-ignored)
    helpers = {"tools.update_readme", "tools.migrate_runs", "demo", "speed", "tools.iteration_walk",
               "tools.ab_speed"}
    assert "compare" in commands and "speed.goals" in commands  # packages and their modules are both seen
    assert commands - helpers <= set(EXPERIMENTS), sorted(commands - helpers - set(EXPERIMENTS))


SEEDED = ("compare", "lab", "countdown", "grpo_targets", "compare.scale", "compare.tune", "tabular_hold")
#: The learning columns of runs.csv: everything that is not time, memory or provenance.
LEARNING = ("contender", "seed", "num_timesteps", "learned_steps", "final_train_success",
            "final_test_success",
            "steps_to_95", "reached_95", "steps_to_100", "reached_100", "collapsed", "greedy_constant")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import ray

    # The workers import `benchmarks` from the checkout (the package ships only rlvr_env and agents), also
    # when a test has changed the working directory.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="warning", runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
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
    task = spec_run(_specs()[0])
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
    assert fns == ["benchmarks.countdown.runs:grpo_run", "benchmarks.countdown.runs:maskable_run"]
    out = tmp_path / "targets"
    result = grpo_targets.main(["--policies", "tabular", "--seeds", "10", "--budget-tabular", "640",
                                "--no-generic", "--out", str(out), "--quiet"])
    assert [r["seed"] for r in result["arithmetic"]] == [10] and result["arithmetic"][0]["steps_run"] >= 640
    (path,) = (out / "runs").glob("*.json")
    assert check_run(path)["execution"]["fn"] == "benchmarks.grpo_targets:arithmetic_run"


@pytest.mark.parametrize("name", SEEDED)
def test_every_cli_parses_seeds_the_same_way(name: str) -> None:
    parser = importlib.import_module(f"benchmarks.{name}").build_parser()
    required = {"compare.spread": ["a", "b"]}.get(name, [])
    if name == "compare.tune":
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
    args = module.build_parser().parse_args({"compare.spread": ["a", "b"]}.get(name, []))
    if name == "compare":
        out = module.resolve_out(args)
    elif name == "compare.tune":
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
        run_all([spec_run(s) for s in _specs()], tmp_path, address=f"127.0.0.1:{port}", progress=False)
    assert time.monotonic() - t0 < 60
    t0 = time.monotonic()  # a closed loopback port refuses at once
    with pytest.raises(ConnectionError, match="nothing answers"):
        cluster.check_reachable(f"127.0.0.1:{_free_port()}", timeout=3.0)
    assert time.monotonic() - t0 < 60 and cluster.CONNECT_TIMEOUT < 60
    assert not list(tmp_path.glob("runs/*.json"))


@pytest.fixture
def http_server() -> Iterator[str]:
    """A tiny HTTP server on a free loopback port (something that answers, but is not Ray)."""
    import http.server
    import threading

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_address_that_answers_but_is_not_ray_fails_fast_saying_so(http_server: str,
                                                                     tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="not a Ray head") as err:
        cluster.check_reachable(http_server)
    assert "it answered b'" in str(err.value) and "ray start --head" in str(err.value)
    with pytest.raises(ConnectionError, match="not a Ray head"):
        run_all([spec_run(s) for s in _specs()], tmp_path, address=http_server, progress=False)
    assert time.monotonic() - t0 < cluster.CONNECT_TIMEOUT + 5
    assert not list(tmp_path.glob("runs/*.json"))
    with socket.socket() as silent:  # accepts, then says nothing: the timeout, not a hang
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        t0 = time.monotonic()
        with pytest.raises(ConnectionError, match="said nothing within 2 s"):
            cluster.check_reachable(f"127.0.0.1:{silent.getsockname()[1]}", timeout=2.0)
        assert time.monotonic() - t0 < 10


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
        run_all([Run(must_not_run, {"seed": 0}, "k")], out, progress=False)
    assert not ran.exists()


def test_a_failed_write_keeps_the_other_runs_and_names_the_failed_one(
        tmp_path: Path, local_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [spec_run(s) for s in _specs()]
    real = executor.save_run

    def flaky(run_dir: Path, key: str, fp: str, record: dict) -> Path:
        if key == tasks[0].key:
            raise OSError(28, "No space left on device")
        return real(run_dir, key, fp, record)

    monkeypatch.setattr(executor, "save_run", flaky)
    outcome = run_all(tasks, tmp_path, progress=False)
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
    outcome = run_all([spec_run(s) for s in _specs()], tmp_path, progress=False)
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
    tasks = [spec_run(s) for s in _specs()]
    default = run_all(tasks, tmp_path / "default", workers=1, progress=False)
    assert default.failures == [] and len(default.records) == 2
    assert (Path.home() / ".ray" / "auth_token").is_file() or os.environ.get("RAY_AUTH_TOKEN")
    joined = run_all(tasks, tmp_path / "joined", address=ray_head, progress=False)
    assert joined.failures == [] and len(joined.records) == 2
    hosts = {r["execution"]["host"] for r in joined.records.values()}
    assert hosts == {socket.gethostname()}
    for key, record in joined.records.items():  # the same run wherever it ran
        assert comparable(record) == comparable(default.records[key])


# ------------------------------------------------------------------------------------------------
# Results that cannot hide a failure
# ------------------------------------------------------------------------------------------------
def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_study_that_lost_a_run_leaves_the_committed_folder_alone_and_says_which_run(
        tmp_path: Path, local_ray: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One run's save fails under ``--update-results``: the committed folder keeps every byte, the table
    in the scratch folder names the missing run in its first line, the exit status is 1; once the save
    works, the same command completes and only then writes the committed folder."""
    from benchmarks import compare
    from benchmarks.compare import study
    from benchmarks.core import common

    results = tmp_path / "results"
    monkeypatch.setattr(common, "RESULTS_DIR", results)
    monkeypatch.setattr(study, "RESULTS_DIR", results)
    monkeypatch.chdir(tmp_path)  # the scratch folders (benchmark-runs/) land here
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # Ray's workers import benchmarks from the checkout
    committed = results / "compare"
    argv = ["--contenders", "grpo_tabular", "--budget", "400", "--quiet", "--no-plots"]
    assert compare.main([*argv, "--seeds", "0", "--update-results"]) == 0  # a committed study of seed 0
    before = _snapshot(committed)
    assert "runs/" in " ".join(before) and "table.md" in before
    real = executor.save_run

    def fails_for_seed_1(run_dir: Path, key: str, fp: str, record: dict) -> Path:
        if "__s1__" in key:
            raise OSError(28, "No space left on device")
        return real(run_dir, key, fp, record)

    monkeypatch.setattr(executor, "save_run", fails_for_seed_1)
    capsys.readouterr()
    assert compare.main([*argv, "--seeds", "0-1", "--update-results"]) == 1
    assert _snapshot(committed) == before  # not one committed byte moved
    scratch = tmp_path / LOCAL_OUT / "update-results" / "compare"
    table = (scratch / "table.md").read_text().splitlines()
    assert table[0].startswith("INCOMPLETE: 1 of 2 run(s) failed") and "__s1__" in table[0], table[0]
    assert any(line.startswith("| GRPO tabular (defaults) | 1 |") for line in table)  # seed 0 only
    for name in ("runs.csv", "summary.csv", "curves.csv"):
        assert (scratch / name).read_text().startswith("# INCOMPLETE: 1 of 2"), name
    assert "INCOMPLETE" in json.loads((scratch / "summary.json").read_text())["incomplete"]
    assert f"results in {scratch.relative_to(tmp_path)}/" in capsys.readouterr().out

    monkeypatch.setattr(executor, "save_run", real)  # the disk has room again
    assert compare.main([*argv, "--seeds", "0-1", "--update-results"]) == 0
    after = _snapshot(committed)
    assert not after["table.md"].startswith(b"INCOMPLETE")
    assert b"| GRPO tabular (defaults) | 2 |" in after["table.md"]
    assert len([k for k in after if k.startswith("runs/")]) == 2
    assert not list((scratch / "runs").glob("*.json"))  # the staged run moved into the committed folder


def test_every_folder_the_study_writes_is_probed_before_anything_trains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only output folder whose runs/ is writable fails before the first run (it would train,
    then fail writing runs.csv)."""
    ran = tmp_path / "ran"

    def must_not_run(spec: dict) -> dict:  # pragma: no cover - the point is that it never runs
        ran.write_text("trained")
        return {}

    out = tmp_path / "ro"
    (out / "runs").mkdir(parents=True)
    if os.geteuid() == 0:  # root writes through permissions: the folder refuses new files instead
        import tempfile

        real = tempfile.mkstemp

        def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
            if Path(str(kwargs.get("dir", ""))) == out:
                raise PermissionError(13, "Permission denied", str(out))
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(tempfile, "mkstemp", refuse)
    else:
        out.chmod(0o555)
    with pytest.raises(PermissionError, match=f"{out} is not writable"):
        run_all([Run(must_not_run, {"seed": 0}, "k")], out, progress=False)
    assert not ran.exists()


def test_a_run_file_copied_over_a_longer_key_is_caught(tmp_path: Path) -> None:
    """The key check is an exact comparison: ``h_seed1``'s file under ``h_seed10``'s name (one key a prefix
    of the other) is refused and quarantined."""
    good = save_run(tmp_path, "h_seed1", "fp", {"seed": 1})
    victim = tmp_path / "h_seed10.json"
    shutil.copyfile(good, victim)
    with pytest.raises(store.RunFileError) as err:
        check_run(victim, "h_seed10", "fp")
    assert err.value.reason == "key"
    assert load_run(victim, "h_seed10", "fp") is None
    assert not victim.exists(), "a quarantine moves the bad file out of runs/, it does not copy it"
    assert (tmp_path / "quarantine" / "h_seed10.json.key").read_bytes() == good.read_bytes()


def test_the_quarantine_keeps_every_copy_and_never_crashes(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The same name and reason quarantined again gets a counter suffix; a directory standing at a run
    file's name is set aside as well, however often."""
    path = tmp_path / "k.json"
    contents = [b"\xff\xfe one", b"\xff\xfe two", b"\xff\xfe three"]
    for raw in contents:
        path.write_bytes(raw)
        assert load_run(path, "k", "fp") is None
    kept = sorted((tmp_path / "quarantine").iterdir())
    assert [p.name for p in kept] == ["k.json.binary", "k.json.binary.1", "k.json.binary.2"]
    assert [p.read_bytes() for p in kept] == contents
    for _ in range(2):  # a folder where a run file should be (e.g. an unpacked archive)
        (path / "inside").mkdir(parents=True)
        assert load_run(path, "k", "fp") is None
        assert not path.exists()
    assert sorted(p.name for p in (tmp_path / "quarantine").glob("k.json.unreadable*")) == [
        "k.json.unreadable", "k.json.unreadable.1"]
    assert capsys.readouterr().err.count("warning: run file") == 5


def test_write_atomically_replaces_the_file_and_a_failed_replace_keeps_the_old_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new content goes to a new file (a new inode) that replaces the old one in one step: when that
    step fails, the old content is whole and no temp file is left."""
    from benchmarks.core.common import write_atomically

    path = tmp_path / "table.md"
    write_atomically(path, "old")
    inode = path.stat().st_ino
    write_atomically(path, "new")
    assert path.read_text() == "new" and path.stat().st_ino != inode

    def fails(src: object, dst: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OSError, match="Input/output"):
        write_atomically(path, "half of another")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]


def _ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _worker_port_range(width: int = 16) -> tuple[int, int]:
    """A run of ``width`` free loopback ports (Ray's worker processes bind in it)."""
    for base in range(24000, 60000, 97):
        try:
            held = []
            for port in range(base, base + width):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base, base + width - 1
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no free run of ports")  # pragma: no cover


def _ray_node(args: list[str], env: dict[str, str], temp: Path, lo_hi: tuple[int, int]) -> subprocess.Popen:
    """``ray start ... --block`` on 127.0.0.1 with its own temp dir and ports, in its own session."""
    node, obj, agent, agent_grpc, runtime_env, metrics = _ports(6)
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args, "--node-ip-address=127.0.0.1",
           f"--temp-dir={temp}", "--num-cpus=1", f"--node-manager-port={node}",
           f"--object-manager-port={obj}",
           f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
           f"--runtime-env-agent-port={runtime_env}", f"--metrics-export-port={metrics}",
           f"--min-worker-port={lo_hi[0]}", f"--max-worker-port={lo_hi[1]}", "--disable-usage-stats",
           "--block"]
    log = (temp.parent / f"{temp.name}.log").open("wb")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    """Stop a `ray start --block` (it stops what it started) by its own pid."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.slow
def test_the_documented_cluster_commands_work_verbatim(tmp_path_factory: pytest.TempPathFactory) -> None:
    """docs/cluster.md's commands on this machine: an embedded run first (it leaves a token, as any local
    Ray does), then `ray start --head`, a second node joined as the docs say, and `python -m
    benchmarks.compare ... --ray-address HEAD` in a fresh process with no RAY_AUTH_MODE of its own: the
    study runs on the cluster and its records equal the local run's."""
    base = tmp_path_factory.mktemp("r")  # short: Ray's socket paths must stay under ~107 characters
    home = base / "home"  # the token Ray writes goes here, not into the real ~/.ray
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    study = [sys.executable, "-m", "benchmarks.compare", "--seeds", "0-1", "--budget", "400", "--contenders",
             "grpo_tabular", "--quiet", "--no-plots"]
    local = subprocess.run([*study, "--workers", "1", "--out", str(base / "local")], env=env, cwd=base,
                           capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr[-3000:]
    assert (home / ".ray" / "auth_token").is_file()  # what makes `ray start --head` use token auth
    (gcs,) = _ports(1)
    head = _ray_node(["--head", f"--port={gcs}", "--include-dashboard=false"], env, base / "h",
                     _worker_port_range())
    nodes = [head]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", gcs), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None, (base / "h.log").read_text()[-3000:]
                time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not come up in 120 s")
        time.sleep(3)  # the raylet registers after the GCS
        # docs/cluster.md: other nodes join with the head's token and RAY_AUTH_MODE=token
        nodes.append(_ray_node([f"--address=127.0.0.1:{gcs}"], {**env, "RAY_AUTH_MODE": "token"},
                               base / "w", _worker_port_range()))
        time.sleep(8)
        assert nodes[1].poll() is None, (base / "w.log").read_text()[-3000:]
        t0 = time.monotonic()
        joined = subprocess.run([*study, "--ray-address", f"127.0.0.1:{gcs}", "--out", str(base / "joined")],
                                env=env, cwd=base, capture_output=True, text=True, timeout=600)
        assert joined.returncode == 0, joined.stderr[-3000:]
        print(f"the 2-run study on the 2-node cluster took {time.monotonic() - t0:.1f} s")
    finally:
        for proc in reversed(nodes):
            _stop(proc)
    local_runs = {p.name: check_run(p) for p in (base / "local" / "runs").glob("*.json")}
    joined_runs = {p.name: check_run(p) for p in (base / "joined" / "runs").glob("*.json")}
    assert len(local_runs) == 2 and set(joined_runs) == set(local_runs)
    for name, record in joined_runs.items():  # the same runs wherever they ran
        assert comparable(record) == comparable(local_runs[name])


def _read_only_folder(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes anywhere permissions say no; /sys is a read-only filesystem
        return Path("/sys/rlvr-env-test")
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    return out


@pytest.mark.parametrize("argv, says", [
    (["benchmarks.compare", "--seeds", "0", "--budget", "400", "--contenders", "grpo_tabular",
      "--ray-address", "127.0.0.1:{port}"], "nothing answers there"),
    (["benchmarks.lab", "--claim", "kl", "--out", "{ro}"], "is not writable"),
])
def test_a_set_up_error_is_one_line(argv: list[str], says: str, tmp_path: Path) -> None:
    """A bad address or a read-only folder: the message alone (no chained traceback), exit status 2."""
    argv = [a.format(port=_free_port(), ro=_read_only_folder(tmp_path)) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", *argv, "--quiet"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and says in lines[0]


def test_migrate_runs_names_a_file_it_cannot_read_and_goes_on(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.tools import migrate_runs

    runs = tmp_path / "study" / "runs"
    runs.mkdir(parents=True)
    (runs / "a.json").write_bytes(bytes(range(256)))
    (runs / "b.json").write_text("[1, 2]")
    save_run(runs, "c", "fp", {"key": "c"})  # a run file already: nothing to do
    assert migrate_runs.main([str(tmp_path / "study")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"warning: {runs / 'a.json'}: is not UTF-8 text (binary garbage?); left alone"
    assert err[1].startswith(f"warning: {runs / 'b.json'}: holds a JSON list")
    assert "2 file(s) left alone" in err[2] and len(err) == 3


def test_the_embedded_ray_prints_no_token_warning(tmp_path: Path) -> None:
    """Ray's "Token authentication is enabled" warning (its default for a new local Ray) stays out of
    the progress bar: the executor sets that mode itself before Ray starts."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path))  # Ray's token file lands under tmp_path
    code = ("from benchmarks.core.executor import run_all\n"
            "from benchmarks.compare.run import spec_run\n"
            "from benchmarks.compare.study import RunSpec\n"
            "t = spec_run(RunSpec('grpo_tabular', 'rlvr/Arithmetic-v0', 0, 400, 200))\n"
            f"o = run_all([t], {str(tmp_path / 'out')!r}, workers=1)\n"
            "assert not o.failures, o.failures\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Token authentication" not in done.stderr, done.stderr
    assert "1/1" in done.stderr  # the progress bar was there


def test_two_outcomes_add_up_their_totals() -> None:
    bases = executor.Outcome(failures=["base_s0: boom"], missing=["base_s0"], total=2, found=1)
    both = bases + executor.Outcome(records={"arm_s0": {}}, total=3, found=3)
    assert (both.total, both.found) == (5, 4)
    assert both.incomplete().startswith("INCOMPLETE: 1 of 5 run(s) failed") and "base_s0" in both.incomplete()


def test_a_failed_run_keeps_every_new_run_out_of_the_committed_folder(
        tmp_path: Path, local_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.core import common

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.chdir(tmp_path)  # the scratch folder (benchmark-runs/) lands here

    def seed_2_fails(spec: dict) -> dict:
        if spec["seed"] == 2:
            raise RuntimeError("seed 2 diverged")
        return {"seed": spec["seed"]}

    committed = tmp_path / "results" / "study"
    outcome = run_all([Run(seed_2_fails, {"seed": s}, f"s{s}") for s in range(3)], committed, progress=False)
    assert not outcome.complete and outcome.missing == ["s2"]
    assert not list((committed / "runs").glob("*.json"))
    staged = tmp_path / LOCAL_OUT / "update-results" / "study" / "runs"
    assert sorted(p.stem for p in staged.glob("*.json")) == ["s0", "s1"]  # kept for the next call


def test_a_run_listed_twice_trains_once(tmp_path: Path, local_ray: None) -> None:
    trained = tmp_path / "trained.txt"

    def count(spec: dict) -> dict:
        with open(spec["log"], "a") as f:
            f.write("trained\n")
        return {}

    run = Run(count, {"log": str(trained)}, "once")
    outcome = run_all([run, run], tmp_path / "out", progress=False)
    assert outcome.total == 1 and list(outcome.records) == ["once"]
    assert trained.read_text().splitlines() == ["trained"]
