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


def test_quick_start_runs_pasted_into_a_python_repl(tmp_path: Path, monkeypatch) -> None:
    """The quick start, fed line by line to an interactive console as a paste into ``python`` would be
    (so a compound statement needs its blank line), runs without an error; torch is set to one thread
    before SB3 trains."""
    import code

    import torch

    block = re.search(r"## Quick start\n\n```python\n(.*?)```", README, re.S)
    assert block is not None, "the README has no Quick start code block"
    text = block.group(1)
    assert text.index("torch.set_num_threads(1)") < text.index('PPO("MlpPolicy", env).learn')
    monkeypatch.chdir(tmp_path)  # the example saves grpo_arith.zip in the working directory
    threads = torch.get_num_threads()
    errors: list[str] = []

    class Console(code.InteractiveConsole):
        def showsyntaxerror(self, filename=None, **kwargs) -> None:  # noqa: ANN001
            errors.append("SyntaxError")

        def showtraceback(self) -> None:
            import traceback

            errors.append(traceback.format_exc())

    console = Console(locals={})
    try:
        more = False
        for line in text.splitlines():
            more = console.push(line)
            assert not errors, f"pasting {line!r} failed: {errors}"
        assert not more, "the block ends inside an unfinished statement"
    finally:
        torch.set_num_threads(threads)
    assert (tmp_path / "grpo_arith.zip").is_file()
    assert 0.0 <= console.locals["model"].evaluate(split="test") <= 1.0
