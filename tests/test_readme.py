"""The README's result tables are the files the benchmark commands write, and its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.update_readme import render

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_result_blocks_match_the_result_files() -> None:
    _, stale = render(README)
    assert stale == [], f"run `python -m benchmarks.update_readme`; stale blocks: {stale}"


def test_readme_commands_name_real_modules() -> None:
    for module in set(re.findall(r"python -m ((?:benchmarks|agents)\.[a-z_.]+)", README)):
        path = ROOT / (module.replace(".", "/") + ".py")
        package = ROOT / module.replace(".", "/") / "__main__.py"
        assert path.is_file() or package.is_file(), f"README names {module}, which does not exist"


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` reads the README's test command (the first `python -m pip install ... && python -m
    pytest` line) and runs it in a fresh virtual environment; the README must have exactly that line."""
    lines = [line for line in README.splitlines()
             if re.match(r"^python -m pip install .*&& python -m pytest", line)]
    assert lines, "the README has no test command line"
    assert '".[test]"' in lines[0], lines[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 -m venv" in ci and "README.md" in ci and 'bash -c "$cmd"' in ci


def test_quick_start_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    block = re.search(r"## Quick start\n\n```python\n(.*?)```", README, re.S)
    assert block is not None, "the README has no Quick start code block"
    monkeypatch.chdir(tmp_path)  # the example saves grpo_arith.zip in the working directory
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "README.md quick start", "exec"), namespace)  # noqa: S102 - our own doc
    assert (tmp_path / "grpo_arith.zip").is_file()
    assert 0.0 <= namespace["model"].evaluate(split="test") <= 1.0  # type: ignore[attr-defined]
