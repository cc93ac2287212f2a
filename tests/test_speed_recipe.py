"""The recipe measurement (``python -m benchmarks.speed recipe``): it times the README's own R1 command in
a child process and tabulates what the command wrote; a tiny budget runs the real path here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytest.importorskip("torch")

from benchmarks.speed import recipe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _commands(text: str) -> list[str]:
    """Shell commands of the fenced bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        out += [" ".join(line.split()) for line in joined.splitlines() if line.strip()
                and not line.lstrip().startswith("#")]
    return out


def test_the_measured_command_is_the_readmes_r1_command() -> None:
    readme = [c for c in _commands((ROOT / "README.md").read_text()) if "--policy transformer" in c
              and "--sft" in c]
    assert readme, "the README shows no R1 command"
    assert any(c.startswith(recipe.RECIPE + " ") or c == recipe.RECIPE for c in readme), readme
    argv = recipe.recipe_argv(12, 2, Path("/tmp/x.json"))
    assert argv[argv.index("--seed") + 1] == "12" and argv[-4:] == ["--threads", "2", "--json", "/tmp/x.json"]
    # the rest is the README's command as written (the interpreter in place of "python")
    assert argv[1:-4] == [*shlex.split(recipe.RECIPE)[1:-1], "12"]


def test_a_tiny_recipe_is_timed_and_tabulated(monkeypatch) -> None:
    tiny = recipe.RECIPE.replace("--sft 100000", "--sft 300").replace("--total-timesteps 300000",
                                                                       "--total-timesteps 600")
    monkeypatch.setattr(recipe, "RECIPE", tiny + " --eval-prompts 8 --sft-epochs 1")
    run = recipe.measure(seed=3, threads=1)
    assert run["wall_seconds"] > 0 and run["cpu_seconds"] > 0 and run["threads"] == 1
    assert run["num_timesteps"] >= 600 and run["sft_seconds"] > 0
    assert 0.0 <= run["test_greedy"] <= 1.0 and 0.0 <= run["base_test_sampled"] <= 1.0
    table = recipe.markdown({"runs": [run], "command": "cmd", "machine": {}})
    assert "| 3 | 1 |" in table and "end to end in <= 600 s" in table
    assert "held-out greedy >= 0.8 |" in table and "**missed**" in table  # a tiny run cannot reach 0.8


def test_bad_threads_are_a_usage_error(capsys) -> None:
    for bad in ("0", "two", ""):
        with pytest.raises(SystemExit):
            recipe.main(["--threads", bad, "--out", "/tmp/unused-recipe-out"])
    err = capsys.readouterr().err
    assert "--threads '0'" in err and "--threads 'two'" in err and "at least one" in err
