"""Every install line of README.md and docs/ installs the torch the README's two commands pin, and
docs/install.md's sizes are those ``python -m benchmarks.tools.fresh_install --install-lines`` measured
for exactly the lines of its table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.tools import fresh_install
from benchmarks.tools.fresh_install import INSTALL_PAGE, install_lines

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: a pip line that installs this package with an extra (each extra brings torch): from a clone or by name
_WITH_EXTRA = re.compile(r"pip install\b[^`\n#]*?(?:\"?\.\[|rlvr-env\[)")


def _pin() -> str:
    commands = [line for line in README.splitlines()
                if re.match(r"^python -m pip install .*&& python -m (benchmarks\.compare|pytest)", line)]
    assert len(commands) == 2, commands
    pins = {m for line in commands for m in re.findall(r'"(torch==[^"]+)"', line)}
    assert len(pins) == 1, f"the two commands must pin one torch: {pins}"
    return pins.pop()


def test_every_install_line_with_an_extra_pins_the_two_commands_torch() -> None:
    pin = _pin()
    unpinned = []
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            # a line of a code block, or each code span of a prose or table line
            for command in (re.findall(r"`([^`]+)`", line) or [line]):
                if _WITH_EXTRA.search(command) and f'"{pin}"' not in command:
                    unpinned.append(f"{page.relative_to(ROOT)}:{n}: {command.strip()}")
    assert unpinned == [], f"install lines without {pin}:\n" + "\n".join(unpinned)


def test_install_page_says_how_to_get_the_cpu_build() -> None:
    text = " ".join(INSTALL_PAGE.read_text(encoding="utf-8").split())
    assert f'python -m pip install "{_pin()}" --index-url https://download.pytorch.org/whl/cpu' in text
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text


def test_install_lines_are_the_table_column() -> None:
    lines = install_lines(INSTALL_PAGE.read_text(encoding="utf-8"))
    assert lines[0] == "pip install ." and len(lines) == len(set(lines)) >= 7
    assert 'python -m pip install "torch==2.13.0" -e ".[bench]"' in lines  # the main command's install
    page = ("# p\n\n## Which install\n\n| you want | install (from a clone) | brings |\n|---|---|---|\n"
            "| a | `pip install .` or `pip install -e .` | x |\n| b | `pip install .` | `not a command` |\n\n"
            "## Next\n\n`pip install elsewhere`\n")
    assert install_lines(page) == ["pip install .", "pip install -e ."]
    with pytest.raises(ValueError, match="no '## Which install' section"):
        install_lines("# p\n")
    with pytest.raises(ValueError, match="no column 'install \\(from a clone\\)'"):
        install_lines("# p\n\n## Which install\n\n| a | b |\n|---|---|\n| `pip install .` | y |\n")


def test_the_committed_sizes_are_of_the_tables_lines_with_the_pinned_cpu_torch() -> None:
    record = json.loads((ROOT / "benchmarks" / "results" / "install_sizes.json").read_text())
    lines = install_lines(INSTALL_PAGE.read_text(encoding="utf-8"))
    assert [r["command"] for r in record["lines"]] == lines, "rerun fresh_install --install-lines"
    version = _pin().split("==", 1)[1]
    for r in record["lines"]:
        assert r["cuda_packages"] == [], r["command"]
        if r["command"] == "pip install .":
            assert r["torch"] is None
        else:
            assert r["torch"] is not None and r["torch"].split("+")[0] == version, r
        assert r["venv_bytes"] > 0 and r["install_seconds"] > 0
    assert "<!-- BEGIN benchmarks/results/install_sizes.md -->" in INSTALL_PAGE.read_text(encoding="utf-8")


def test_install_lines_writes_only_the_git_ignored_folder_without_update_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[list[str]] = []

    def measure(lines: list[str]) -> tuple[str, list[dict]]:
        measured.append(lines)
        return "0123456789abcdef", [{"command": line, "install_seconds": 1.0, "venv_bytes": 2**30,
                                     "torch": None, "cuda_packages": ["nvidia-x"] * i}
                                    for i, line in enumerate(lines)]

    monkeypatch.setattr(fresh_install, "measure_install_lines", measure)
    monkeypatch.chdir(tmp_path)
    committed = ROOT / "benchmarks" / "results" / "install_sizes.md"
    before = committed.read_text() if committed.exists() else None
    assert fresh_install.main(["--install-lines"]) == 0
    assert measured == [install_lines(INSTALL_PAGE.read_text(encoding="utf-8"))]
    table = (tmp_path / "benchmark-runs" / "fresh_install" / "install_sizes.md").read_text()
    assert "| `pip install .` | none | 1.00 GiB | 1 s |" in table
    assert "+ 1 CUDA packages" in table and "fresh clone of 0123456" in table
    assert (committed.read_text() if committed.exists() else None) == before
