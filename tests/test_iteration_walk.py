"""benchmarks.tools.iteration_walk: the counting of modules, files and boundary crossings on a synthetic
trace, the profiler's caller walk on functions that claim project module names, and the output files."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tools import iteration_walk as walk
from benchmarks.tools.iteration_walk import Call, package_of, summarize

ROOT = Path(__file__).resolve().parent.parent

FILES = {"agents.grpo.agent": "/c/agents/grpo/agent.py", "agents.grpo.rollout": "/c/agents/grpo/rollout.py",
         "rlvr_env.vector": "/c/rlvr_env/vector.py", "rlvr_env.tasks": "/c/rlvr_env/tasks/__init__.py"}
TRACE = Counter({
    Call(None, "agents.grpo.agent", False): 1,                      # the entry: not a crossing
    Call("agents.grpo.agent", "agents.grpo.rollout", True): 2,
    Call("agents.grpo.rollout", "rlvr_env.vector", False): 3,       # through a library frame
    Call("rlvr_env.vector", "rlvr_env.vector", True): 5,            # inside one module: not a crossing
    Call("rlvr_env.vector", "rlvr_env.tasks", True): 4,
})


def test_summarize_counts_modules_files_and_crossings_of_a_trace() -> None:
    s = summarize(TRACE, FILES)
    assert s["modules"] == ["agents.grpo.agent", "agents.grpo.rollout", "rlvr_env.tasks", "rlvr_env.vector"]
    assert s["files"] == sorted(FILES.values())
    assert s["by_package"] == {"agents.grpo": ["agents.grpo.agent", "agents.grpo.rollout"],
                               "rlvr_env": ["rlvr_env.vector"], "rlvr_env.tasks": ["rlvr_env.tasks"]}
    assert s["calls"] == 15
    assert (s["crossings"], s["crossings_direct"], s["crossings_through_library"]) == (9, 6, 3)
    assert s["pairs"] == 3
    assert s["top_pairs"] == [["rlvr_env.vector", "rlvr_env.tasks", 4],
                              ["agents.grpo.rollout", "rlvr_env.vector", 3],
                              ["agents.grpo.agent", "agents.grpo.rollout", 2]]
    assert summarize(TRACE, FILES, top=1)["top_pairs"] == [["rlvr_env.vector", "rlvr_env.tasks", 4]]
    # a caller that was never a callee is still a module crossed (its file unknown)
    s = summarize(Counter({Call("agents.x", "agents.y", True): 1}), {"agents.y": "/c/agents/y.py"})
    assert s["modules"] == ["agents.x", "agents.y"] and s["files"] == ["/c/agents/y.py"]
    assert s["by_package"] == {"agents": ["agents.x", "agents.y"]}


def test_the_report_lists_counts_packages_and_pairs() -> None:
    text = walk.report(summarize(TRACE, FILES), ["head"])
    lines = text.splitlines()
    assert lines[0] == "head"
    assert "project modules crossed: 4, in 4 files; 15 calls" in lines[1]
    assert "  agents.grpo (2): agent, rollout" in lines
    assert "  rlvr_env.tasks (1): (tasks)" in lines
    assert "9 (6 direct, 3 through a library frame), over 3 module pairs" in text
    assert lines[-1] == "  2  agents.grpo.agent -> agents.grpo.rollout"


def test_package_of_and_is_project() -> None:
    assert package_of("agents.grpo.agent", "/c/agents/grpo/agent.py") == "agents.grpo"
    assert package_of("rlvr_env.tasks.countdown", "/c/rlvr_env/tasks/countdown/__init__.py") == (
        "rlvr_env.tasks.countdown")
    assert package_of("agents", None) == "agents"
    assert [walk.is_project(m) for m in ("rlvr_env.vector", "agents", "benchmarks.core.store")] == [True] * 3
    assert [walk.is_project(m) for m in ("rlvr_env_countdown", "agentsx", "torch.nn", "__main__",
                                         "benchmarks.tools.iteration_walk")] == [False] * 5


def _functions() -> dict[str, Any]:
    """Functions that claim module names, as a module's functions do (their globals' ``__name__``)."""
    lib: dict[str, Any] = {"__name__": "somelib"}
    exec("def call(fn, x):\n    return fn(x)\n", lib)  # a library's Python frame in between
    b: dict[str, Any] = {"__name__": "rlvr_env.fake_b", "__file__": "/c/rlvr_env/fake_b.py"}
    exec("def leaf(x):\n    return x + 1\n", b)
    a: dict[str, Any] = {"__name__": "agents.fake_a", "__file__": "/c/agents/fake_a.py",
                         "leaf": b["leaf"], "call": lib["call"]}
    exec("def direct(x):\n    return leaf(x)\ndef through(x):\n    return call(leaf, x)\n", a)
    return a


def test_trace_finds_each_call_s_nearest_project_caller() -> None:
    a = _functions()
    calls, files = walk.trace(lambda: (a["direct"](1), a["through"](2)))
    assert calls == Counter({Call(None, "agents.fake_a", False): 2,
                             Call("agents.fake_a", "rlvr_env.fake_b", True): 1,
                             Call("agents.fake_a", "rlvr_env.fake_b", False): 1})
    assert files == {"agents.fake_a": "/c/agents/fake_a.py", "rlvr_env.fake_b": "/c/rlvr_env/fake_b.py"}
    assert sys.getprofile() is None  # the profiler is removed again


def test_main_writes_the_report_to_the_ignored_default_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(walk, "walk", lambda *a: (TRACE, FILES, {"iteration": 2, "env_steps": 838}))
    result = walk.main(["--top", "2"])
    out = capsys.readouterr().out
    assert out.startswith('iteration_walk: rlvr/Countdown-v0 {"n_numbers": 3}, policy mlp, preset countdown')
    assert "traced: iteration 2 (838 env steps)" in out and result["crossings"] == 9
    folder = Path("benchmark-runs") / "iteration_walk"
    assert (tmp_path / folder / "iteration_walk.md").read_text() == out
    assert Path(result["imported_from"]["rlvr_env"]).is_relative_to(ROOT)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(folder / "iteration_walk.json")], cwd=ROOT)
    assert ignored.returncode == 0


def test_a_checkout_is_refused_when_it_cannot_be_the_one_imported(tmp_path: Path) -> None:
    import rlvr_env  # noqa: F401 - imported, as in any process that already ran the project

    with pytest.raises(SystemExit, match="no rlvr_env/__init__.py"):
        walk.use_checkout(tmp_path)
    with pytest.raises(SystemExit, match="already imported"):
        walk.use_checkout(ROOT)
    with pytest.raises(SystemExit, match="imported"):
        walk.imported_from(tmp_path)
