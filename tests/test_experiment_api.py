"""A new experiment, defined here outside the package, runs on the executor as docs/experiments.md says:
its runs train through Ray, land in run files keyed by the store's one hasher, and a second call finds
them instead of training again."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.common import ROOT
from benchmarks.core.executor import Run, run_all
from benchmarks.core.store import check_run, digest, run_key

#: The tiny study: how often an answer of random tokens solves an Arithmetic prompt, per arm (a setting
#: under comparison: here the answer's length), on two seeds.
ARMS = {"short": 3, "long": 5}
SEEDS = (0, 1)


def make_run_function(calls: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The study's run function; each call leaves a line in ``calls`` so the test can count trainings
    (defined in a closure, so Ray ships it by value to a worker that cannot import this test module)."""

    def random_answers(spec: dict[str, Any]) -> dict[str, Any]:
        import gymnasium as gym
        import numpy as np

        import rlvr_env  # noqa: F401  (registers the env ids)

        with calls.open("a") as f:
            f.write(f"{spec['seed']}\n")
        env = gym.make("rlvr/Arithmetic-v0")
        rng = np.random.default_rng(spec["seed"])
        solved = 0
        for episode in range(spec["episodes"]):
            env.reset(seed=spec["seed"] * 1000 + episode)
            reward = 0.0
            for _ in range(spec["length"]):
                _, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
                if terminated or truncated:
                    break
            solved += reward >= 1.0
        return {"seed": spec["seed"], "success": solved / spec["episodes"]}

    return random_answers


def study_runs(fn: Callable[[dict[str, Any]], dict[str, Any]]) -> list[Run]:
    """Every run of the study: one per arm and seed, keyed ``<arm>__s<seed>__<digest of the spec>``."""
    runs = []
    for arm, length in ARMS.items():
        for seed in SEEDS:
            spec = {"seed": seed, "length": length, "episodes": 20}
            runs.append(Run(fn, spec, run_key(arm, spec), arm=arm, label=f"{arm} s{seed}"))
    return runs


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One embedded local Ray (1 CPU, loopback only) for the module; the executor reuses it."""
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
             logging_level="warning")
    try:
        yield
    finally:
        ray.shutdown()


def test_an_experiment_from_outside_the_package_runs_stores_and_is_found_again(
        tmp_path: Path, local_ray: None) -> None:
    calls = tmp_path / "calls.txt"
    fn = make_run_function(calls)
    runs = study_runs(fn)
    out = tmp_path / "study"

    first = run_all(runs, out, progress=False)
    assert first.complete and (first.total, first.found) == (4, 0)
    assert len(calls.read_text().splitlines()) == 4  # every run trained once
    for run in runs:
        assert run.key == f"{run.arm}__s{run.spec['seed']}__{digest(dict(run.spec))}"
        stored = check_run(out / "runs" / f"{run.key}.json", run.key, run.fingerprint)
        assert stored["success"] == fn(dict(run.spec))["success"]  # the record is the function's
        assert stored["execution"]["attempts"] == 1
    calls.write_text("")

    again = run_all(runs, out, progress=False)  # the same study: every run is found, nothing trains
    assert (again.total, again.found) == (4, 4) and calls.read_text() == ""
    assert again.ordered(runs) == first.ordered(runs)

    rerun = run_all(runs, out, progress=False, rerun=["long"])  # --rerun names an arm
    assert rerun.found == 2 and sorted(calls.read_text().split()) == ["0", "1"]


def test_the_docs_page_names_files_that_exist() -> None:
    """The "add an experiment" walk of docs/experiments.md names real files and this test."""
    page = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    section = page.split("## Add an experiment", 1)[1].split("\n## ", 1)[0]
    paths = set(re.findall(r"`((?:benchmarks|tests|docs)/[\w/.]+\.(?:py|md))`", section))
    assert "tests/test_experiment_api.py" in paths and "benchmarks/core/executor.py" in paths
    missing = sorted(p for p in paths if "<" not in p and not (ROOT / p).exists())
    assert not missing, missing


def test_one_cpu_runs_one_run_at_a_time(tmp_path: Path, local_ray: None) -> None:
    """The executor's CPUs bound how many runs train at once: a run's own bookkeeping must not free its CPU
    for another run (a task waiting on Ray, even in a polling ``ray.wait``, gives its CPU back to Ray's
    scheduler). Busy runs of a second: with the polling count, two of them overlapped here every time."""
    log = tmp_path / "spans.txt"

    def timed(spec: dict[str, Any]) -> dict[str, Any]:
        import time

        start = time.time()
        while time.time() - start < 1.0:  # busy, as a training run is
            pass
        with log.open("a") as f:
            f.write(f"{start} {time.time()}\n")
        return {"seed": spec["seed"]}

    runs = [Run(timed, {"seed": s}, run_key("timed", {"seed": s}), arm="timed") for s in range(4)]
    outcome = run_all(runs, tmp_path / "out", progress=False)
    assert outcome.complete
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 4
    overlaps = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
    assert not overlaps, f"runs overlapped on a 1-CPU executor: {overlaps}"
    for run in runs:
        assert check_run(tmp_path / "out" / "runs" / f"{run.key}.json")["execution"]["attempts"] == 1
