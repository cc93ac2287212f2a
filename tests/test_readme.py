"""README.md and the docs/ pages: their result tables are the files the benchmark commands write, their
commands exist, the README stays short and its examples run (their links: tests/test_references.py)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

from benchmarks.tools.update_readme import pages, rebase_links, refresh, render, render_all

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: the README is what a newcomer reads in five minutes; everything else lives in docs/
README_MAX_LINES = 300


def test_every_page_block_matches_its_result_file() -> None:
    stale = {page.relative_to(ROOT).as_posix(): changed
             for page, (_, _, changed) in render_all().items() if changed}
    assert stale == {}, f"run `python -m benchmarks.tools.update_readme`; stale blocks: {stale}"


def test_the_pages_are_the_readme_and_the_docs() -> None:
    found = pages()
    assert found[0] == ROOT / "README.md"
    assert {p.name for p in found[1:]} >= {"results.md", "variants.md", "llm.md", "cluster.md"}
    for page in found[1:]:
        assert f"(docs/{page.name})" in README, f"README does not link docs/{page.name}"


def test_every_result_table_is_on_a_page() -> None:
    """Each markdown table a benchmark writes is shown on a page as a block, or its folder is named."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages())
    results = sorted((ROOT / "benchmarks" / "results").rglob("*.md"))
    missing = [md.relative_to(ROOT).as_posix() for md in results
               if "runs" not in md.relative_to(ROOT).parts
               and f"<!-- BEGIN {md.relative_to(ROOT).as_posix()} -->" not in text
               and f"{md.parent.relative_to(ROOT).as_posix()}/`" not in text]
    assert missing == [], f"result files shown on no page: {missing}"


def test_a_stale_or_missing_block_is_reported_and_refreshed(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    table = "| a |\n|---|\n| 2 | ![p](benchmarks/results/p.png)\n"
    (tmp_path / "benchmarks" / "results" / "t.md").write_text(table)
    block = "<!-- BEGIN benchmarks/results/t.md -->\nold\n<!-- END benchmarks/results/t.md -->\n"
    (tmp_path / "README.md").write_text("# r\n" + block)
    gone = "<!-- BEGIN gone.md -->\nx\n<!-- END gone.md -->\n"
    (tmp_path / "docs" / "page.md").write_text("# p\n" + block + gone)
    assert refresh(tmp_path, check=True) == [("README.md", "benchmarks/results/t.md"),
                                             ("docs/page.md", "benchmarks/results/t.md"),
                                             ("docs/page.md", "gone.md (missing: run its benchmark)")]
    assert "old" in (tmp_path / "README.md").read_text()  # check mode writes nothing
    refresh(tmp_path)
    assert "](benchmarks/results/p.png)" in (tmp_path / "README.md").read_text()
    assert "](../benchmarks/results/p.png)" in (tmp_path / "docs" / "page.md").read_text()  # rebased
    assert refresh(tmp_path, check=True) == [("docs/page.md", "gone.md (missing: run its benchmark)")]


def test_links_in_results_files_are_rebased_onto_the_page() -> None:
    text = "[a](benchmarks/x.png) [b](https://x.org/y) [c](#here) [d](docs/llm.md#verl) ![e](/abs.png)"
    assert rebase_links(text, ROOT / "docs", ROOT) == (
        "[a](../benchmarks/x.png) [b](https://x.org/y) [c](#here) [d](llm.md#verl) ![e](/abs.png)")
    assert rebase_links(text, ROOT, ROOT) == text
    lab = "benchmarks/results/lab/lab.md"
    _, stale = render(f"<!-- BEGIN {lab} -->\n\n<!-- END {lab} -->", ROOT, ROOT / "docs")
    assert stale == ["benchmarks/results/lab/lab.md"]


def test_readme_is_under_the_line_limit() -> None:
    lines = len(README.splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move detail to a docs/ page"


def test_names_on_the_pages_are_where_they_say() -> None:
    """A backticked dotted name on a page (```benchmarks.core.baselines.single_number_floor```) is
    importable, and a function or class it names is defined in the module named (or exported by its
    ``__all__``): a name that moved and is only imported there has moved."""
    import importlib.util
    import inspect

    wrong = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        dotted = r"`((?:benchmarks|agents|rlvr_env)(?:\.[A-Za-z_]\w*)+)(?:[:(][^`]*)?`"
        for match in re.finditer(dotted, text):
            parts = match.group(1).split(".")
            for i in range(len(parts), 0, -1):  # the longest prefix that is a module is the module
                try:
                    found = importlib.util.find_spec(".".join(parts[:i])) is not None
                except ImportError:  # a parent of it is no package
                    found = False
                if found:
                    break
            else:
                wrong.append(f"{page.name}: {match.group(1)} (no such module)")
                continue
            try:
                module = importlib.import_module(".".join(parts[:i]))
            except ModuleNotFoundError as exc:  # an optional extra that is not installed here
                if (exc.name or "").split(".")[0] in ("benchmarks", "agents", "rlvr_env"):
                    raise
                continue
            obj: object = module
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    wrong.append(f"{page.name}: {match.group(1)} (no {attr})")
                    break
                obj = getattr(obj, attr)
            else:
                top = getattr(module, parts[i]) if i < len(parts) else None
                if (inspect.isfunction(top) or inspect.isclass(top)) and \
                        top.__module__ != module.__name__ and parts[i] not in getattr(module, "__all__", ()):
                    wrong.append(f"{page.name}: {match.group(1)} (defined in {top.__module__})")
    assert wrong == []


def test_the_quick_start_says_what_import_registers() -> None:
    """The Quick start's ``import rlvr_env`` comment counts the ids it registers (or names them all), and
    docs/envs.md, where it sends the reader, names every one."""
    import gymnasium as gym

    import rlvr_env  # noqa: F401

    registered = sorted(k for k in gym.registry if k.startswith("rlvr/"))
    line = next(ln for ln in README.splitlines() if ln.startswith("import rlvr_env ") and "#" in ln)
    comment = line.split("#", 1)[1]
    named = sorted(re.findall(r"rlvr/[\w-]+-v\d+", comment))
    numbers = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
               "ten": 10, "eleven": 11, "twelve": 12}
    counted = [numbers[w] for w in re.findall(r"\b(\w+) rlvr/ ids\b", comment) if w in numbers]
    assert named == registered or counted == [len(registered)], (comment, registered)
    envs_page = (ROOT / "docs" / "envs.md").read_text(encoding="utf-8")
    assert [i for i in registered if f"`{i}`" not in envs_page] == []


def test_commands_on_the_pages_name_real_modules() -> None:
    """A command on a page names a module that exists; one inside a generated block names the results
    file to regenerate (its table was written by a command that has moved since)."""
    block = re.compile(r"<!-- BEGIN (?P<path>[^ ]+) -->\n(?P<body>.*?)<!-- END (?P=path) -->", re.S)
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"python -m ((?:benchmarks|agents)(?:\.[a-z_][a-z0-9_]*)+)", text):
            module = match.group(1)
            path = ROOT / (module.replace(".", "/") + ".py")
            package = ROOT / module.replace(".", "/") / "__main__.py"
            if path.is_file() or package.is_file():
                continue
            inside = [b["path"] for b in block.finditer(text)
                      if b.start("body") <= match.start() < b.end("body")]
            assert not inside, (f"{page.name} names {module} in the generated block of {inside[0]}: "
                                "regenerate that file with its command's current name (then update_readme)")
            raise AssertionError(f"{page.name} names {module}, which does not exist")


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` reads the README's test command (the first `python -m pip install ... && python -m
    pytest` line) and runs it in a fresh virtual environment; the README must have exactly that line."""
    lines = [line for line in README.splitlines()
             if re.match(r"^python -m pip install .*&& python -m pytest", line)]
    assert lines, "the README has no test command line"
    assert '".[test]"' in lines[0], lines[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 -m venv" in ci and "README.md" in ci and 'bash -c "$cmd"' in ci
    # the two commands come first, before a newcomer scrolls
    assert README.index(lines[0]) < README.index("## Quick start")


def _python_block(heading: str) -> str:
    section = README.split(f"\n{heading}\n", 1)
    assert len(section) == 2, f"the README has no {heading!r} section"
    block = re.search(r"```python\n(.*?)```", section[1].split("\n## ", 1)[0], re.S)
    assert block is not None, f"the README's {heading!r} section has no python block"
    return block.group(1)


def test_quick_start_runs_pasted_into_a_python_repl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quick start, fed line by line to an interactive console as a paste into ``python`` would be
    (so a compound statement needs its blank line), runs without an error; torch is set to one thread
    before SB3 trains."""
    import code

    import torch

    block = re.search(r"## Quick start\n\n```python\n(.*?)```", README, re.S)
    assert block is not None, "the README has no Quick start code block"
    text = block.group(1)
    assert text.index("torch.set_num_threads(1)") < text.index('PPO("MlpPolicy", env).learn')
    assert "rlvr_env.to_sb3_vec_env(vec)" in text  # SB3 users find the native vector env's adapter here
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


def test_plug_in_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier, task and agent recipe runs as a script: the custom verifier's third part is paid,
    GRPO trains on the registered task, and SB3 PPO is scored by the shared evaluator."""
    import gymnasium as gym
    import torch

    text = _python_block("## Plug in your own verifier, task or agent")
    threads = torch.get_num_threads()
    namespace: dict[str, object] = {}
    try:
        exec(compile(text, "README.md plug-in example", "exec"), namespace)  # noqa: S102 - our own doc
    finally:
        torch.set_num_threads(threads)
        gym.registry.pop("my/NearMiss-v0", None)
    task = namespace["NearMiss"](n_numbers=3)  # type: ignore[operator]
    from rlvr_env import Prompt, RewardWeights

    prompt = Prompt((1, 2, 4), 7)

    def score(*tokens: str):  # noqa: ANN202
        return task.score(prompt, [task.vocab.index(s) for s in tokens], RewardWeights(near=0.5))

    assert score("n0", "+", "n2", "<eos>").parts == {"accuracy": 0.0, "format": 0.1, "near": 0.0}  # off by 2
    near = score("n1", "+", "n2", "<eos>")  # 6 misses by one
    assert near.parts == {"accuracy": 0.0, "format": 0.1, "near": 0.5} and near.reward == pytest.approx(0.6)
    assert score("n0", "+", "n1", "+", "n2", "<eos>").parts == {"accuracy": 1.0, "format": 0.1, "near": 0.0}
    assert task.best_reward(RewardWeights(near=0.5)) == pytest.approx(1.6)
    assert namespace["model"].num_timesteps >= 5_000  # type: ignore[attr-defined]


def test_readme_preset_table_matches_the_presets() -> None:
    """The README's preset table is typed from ``GRPOConfig``'s presets; G, B, advantage and beta must
    be what ``GRPOConfig.preset(name)`` resolves to."""
    from agents import GRPOConfig

    rows = re.findall(r"^\| `\"(\w+)\"` \| (\d+) \| (\d+) \| `(\w+)`[^|]*\|[^|]*\| ([\d.]+) \|", README, re.M)
    from agents.grpo.config import PRESETS

    assert {r[0] for r in rows} == set(PRESETS), rows  # every preset has its row
    for name, group, prompts, advantage, beta in rows:
        config = GRPOConfig.preset(name)
        assert (config.group_size, config.prompts_per_iter, config.advantage, config.beta) == (
            int(group), int(prompts), advantage, float(beta)), name


# -- every python block of the pages runs -------------------------------------------------------------

#: The line before a fence that marks its block as a fragment to adapt (docs/experiments.md, "Code blocks
#: on the pages"): it must parse, but it is not run.
TEMPLATE_MARKER = "<!-- template -->"
#: Blocks that a test of their own runs in this process and checks further (the section each is in): the
#: fresh-process run repeats them only in the slow suite, so the default run stays fast.
RUN_BY_OWN_TEST = {("README.md", "## Quick start"),
                   ("README.md", "## Plug in your own verifier, task or agent"),
                   ("docs/llm.md", "## TRL"), ("docs/llm.md", "## verifiers 0.4")}
_OPEN = re.compile(r"^(?P<indent>[ ]*)```python[ ]*$")


class PythonBlock(NamedTuple):
    page: str  # the page, relative to the repository (docs/envs.md, for one)
    line: int  # the opening fence's line, from 1
    section: str  # the "## " heading the block is under ("" before the first)
    code: str  # dedented by the fence's indentation
    template: bool  # the line before the fence is TEMPLATE_MARKER


def python_blocks(text: str, page: str) -> list[PythonBlock]:
    """The fenced ``python`` blocks of a markdown page, indented ones (inside a list item) included."""
    lines = text.splitlines()
    blocks, section, i = [], "", 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i].strip()
        opened = _OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent = opened.group("indent")
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"
                    and lines[j].startswith(indent)), None)
        assert end is not None, f"{page}:{i + 1}: the python block is never closed"
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        code = textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"
        blocks.append(PythonBlock(page, i + 1, section, code, before == TEMPLATE_MARKER))
        i = end + 1
    return blocks


def _page_blocks() -> list[PythonBlock]:
    return [block for page in pages()
            for block in python_blocks(page.read_text(encoding="utf-8"), page.relative_to(ROOT).as_posix())]


BLOCKS = _page_blocks()


def test_the_block_finder_reads_indented_blocks_and_the_marker() -> None:
    text = ("## A\n\n```python\nx = 1\n```\n\n1. a step:\n\n   <!-- template -->\n   ```python\n"
            "   if x:\n       y = 2\n   ```\n```bash\nls\n```\n")
    assert python_blocks(text, "p.md") == [PythonBlock("p.md", 3, "## A", "x = 1\n", False),
                                           PythonBlock("p.md", 10, "## A", "if x:\n    y = 2\n", True)]


def test_templates_parse_and_the_known_fragments_are_marked() -> None:
    templates = [b for b in BLOCKS if b.template]
    for block in templates:
        ast.parse(block.code, f"{block.page}:{block.line}")
    assert {b.page for b in templates} >= {"docs/agent.md", "docs/experiments.md"}
    own = {(b.page, b.section) for b in BLOCKS if not b.template}
    assert RUN_BY_OWN_TEST <= own, RUN_BY_OWN_TEST - own  # the list names blocks that exist


@pytest.mark.parametrize("block", [
    pytest.param(b, id=f"{b.page}:{b.line}",
                 marks=[pytest.mark.slow] if (b.page, b.section) in RUN_BY_OWN_TEST else [])
    for b in BLOCKS if not b.template])
def test_every_python_block_runs_as_written(block: PythonBlock, tmp_path: Path) -> None:
    """A block pasted into a new ``python`` process in an empty folder runs without an error (one
    torch thread: the machine's cores are shared)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-"], input=block.code, text=True, capture_output=True,
                            cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, (f"{block.page}:{block.line} ({block.section}) fails when pasted; mark it "
                                    f"{TEMPLATE_MARKER!r} only if it is a fragment:\n{result.stderr[-3000:]}")
