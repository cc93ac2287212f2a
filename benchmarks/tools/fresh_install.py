"""The README's main command on a fresh machine, measured: ``python -m benchmarks.tools.fresh_install``.

Clones the repository's committed HEAD into a temporary folder, creates a new virtual environment there
(no system site-packages), runs the README's main command line verbatim (the first line that installs
and then runs ``python -m benchmarks.compare``) and records:

- the install's wall time and the size of the new environment on disk,
- the wall time of the main command (training every run of the quick study from nothing),
- whether ``git status`` in the clone is still clean afterwards (the default output is git-ignored),
- the verdict lines the command printed.

With ``--install-lines`` it measures instead every install line of docs/install.md's "Which install"
table, one at a time, each in a new virtual environment on a fresh clone that is removed afterwards: the
install's wall time, the environment's size on disk (``du`` of the virtual environment) and the torch
build it brought (version and CUDA packages), so the sizes the page gives are the ones these lines produce.

Writes ``fresh_install.{json,md}`` (or ``install_sizes.{json,md}`` with ``--install-lines``) into the
git-ignored ``benchmark-runs/fresh_install/``, or with ``--update-results`` into ``benchmarks/results/`` of
this checkout (docs/install.md copies both tables). pip's download cache is the machine's, so the install
time is that of a machine that has the wheels at hand (a first download adds the transfer of the size
shown).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.core.common import (
    RESULTS_DIR,
    ROOT,
    add_output_arguments,
    cli,
    command_line,
    machine_info,
    output_folder,
    write_results,
)


def readme_main_command(readme: str) -> str:
    """The README's main command line: ``python -m pip install ... && python -m benchmarks.compare``."""
    for line in readme.splitlines():
        if re.match(r"^python -m pip install .*&& python -m benchmarks\.compare\b", line):
            return line.strip()
    raise ValueError("README.md has no line 'python -m pip install ... && python -m benchmarks.compare'")


#: the page whose "Which install" table lists the install lines ``--install-lines`` measures
INSTALL_PAGE = ROOT / "docs" / "install.md"


def install_lines(page: str) -> list[str]:
    """The install commands of a page's "Which install" table: every code span of the table's column
    headed "install (from a clone)", in the table's order, each once."""
    section = page.split("\n## Which install\n", 1)
    if len(section) != 2:
        raise ValueError("docs/install.md has no '## Which install' section")
    rows = [line for line in section[1].split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    if not rows:
        raise ValueError("docs/install.md's 'Which install' section has no table")
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    if "install (from a clone)" not in header:
        raise ValueError(f"the 'Which install' table has no column 'install (from a clone)': {header}")
    column = header.index("install (from a clone)")
    lines: list[str] = []
    for row in rows[2:]:
        cell = [c.strip() for c in row.strip("|").split("|")][column]
        for command in re.findall(r"`([^`]+)`", cell):
            if re.match(r"^(python -m )?pip install ", command) and command not in lines:
                lines.append(command)
    if not lines:
        raise ValueError("the 'Which install' table names no install command")
    return lines


def _du_bytes(path: Path) -> int:
    """The size of ``path`` on disk, as ``du`` counts it (blocks, hard links once)."""
    try:
        out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
        return int(out.split()[0]) * 1024
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):  # pragma: no cover - no du
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _installed(venv: Path) -> dict[str, str]:
    """Distribution name -> version of every package installed in ``venv``."""
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split("==", 1) for line in out.splitlines() if "==" in line)


def measure_install_lines(lines: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """Run each install line in a new virtual environment on one fresh clone, one after the other; each
    environment is removed after it is measured. Returns the clone's commit and one record per line."""
    work = Path(tempfile.mkdtemp(prefix="rlvr-install-"))
    records: list[dict[str, Any]] = []
    try:
        clone = work / "rlvr-env"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                              check=True).stdout.strip()
        for line in lines:
            venv = work / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            t0 = time.perf_counter()
            subprocess.run(["bash", "-c", f". {venv}/bin/activate && cd {clone} && {line} -q"], check=True)
            seconds = time.perf_counter() - t0
            packages = _installed(venv)
            records.append({
                "command": line, "install_seconds": seconds, "venv_bytes": _du_bytes(venv),
                "torch": packages.get("torch"),
                "cuda_packages": sorted(name for name in packages if name.lower().startswith("nvidia-")),
            })
            shutil.rmtree(venv)
            # the editable installs leave their metadata in the clone; the next line starts clean
            subprocess.run(["git", "clean", "-qfdx"], cwd=clone, check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return head, records


def install_lines_table(head: str, records: list[dict[str, Any]]) -> str:
    """The markdown table of :func:`measure_install_lines`' records."""
    machine = machine_info()
    rows = [
        f"Measured by `python -m benchmarks.tools.fresh_install --install-lines` (each line in a new virtual "
        f"environment on a fresh clone of {head[:7]}, one at a time; size: `du` of the virtual environment; "
        f"{machine['cpus']} cores):",
        "",
        "| install line | torch | environment on disk | install time |",
        "|---|---|---:|---:|",
    ]
    for r in records:
        torch = "none" if r["torch"] is None else f"`{r['torch']}`"
        if r["cuda_packages"]:
            torch += f" + {len(r['cuda_packages'])} CUDA packages"
        rows.append(f"| `{r['command']}` | {torch} | {r['venv_bytes'] / 2**30:.2f} GiB | "
                    f"{r['install_seconds']:.0f} s |")
    return "\n".join(rows) + "\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.fresh_install",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("--keep", action="store_true", help="keep the temporary clone and environment")
    p.add_argument("--install-lines", action="store_true",
                   help="measure each install line of docs/install.md instead (size and time; no training)")
    add_output_arguments(p, "fresh_install", RESULTS_DIR)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.install_lines:
        lines = install_lines(INSTALL_PAGE.read_text(encoding="utf-8"))
        head, records = measure_install_lines(lines)
        record = {"commit": head, "lines": records, "machine": machine_info(),
                  "measured_by": command_line("benchmarks.tools.fresh_install", argv)}
        write_results(output_folder(args), "install_sizes", record, install_lines_table(head, records))
        return 0
    command = readme_main_command((ROOT / "README.md").read_text(encoding="utf-8"))
    install, run = (part.strip() for part in command.split("&&", 1))
    work = Path(tempfile.mkdtemp(prefix="rlvr-fresh-"))
    try:
        clone = work / "rlvr-env"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                              check=True).stdout.strip()
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        shell = f". {venv}/bin/activate && cd {clone} && "
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", shell + install + " -q"], check=True)
        install_seconds = time.perf_counter() - t0
        venv_bytes = _du_bytes(venv)
        t0 = time.perf_counter()
        result = subprocess.run(["bash", "-c", shell + run + " --quiet"], capture_output=True, text=True)
        run_seconds = time.perf_counter() - t0
        if result.returncode != 0:
            raise RuntimeError(f"{run} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True,
                                check=True).stdout.strip()
        verdicts = [line for line in result.stdout.splitlines() if line.startswith("Verdict")]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    record = {
        "command": command, "commit": head, "install_seconds": install_seconds, "venv_bytes": venv_bytes,
        "main_command_seconds": run_seconds, "git_status_after": status, "verdicts": verdicts,
        "machine": machine_info(), "measured_by": command_line("benchmarks.tools.fresh_install", argv),
    }
    table = "\n".join([
        f"Measured by `python -m benchmarks.tools.fresh_install` (a fresh clone of {head[:7]} and a new "
        f"virtual environment, the README's main command verbatim; {machine_info()['cpus']} cores, "
        f"load average {machine_info()['load_average_1min']:.1f} after):",
        "",
        "| step | wall time | result |",
        "|---|---:|---|",
        f"| `{install}` | {install_seconds:.0f} s | environment of {venv_bytes / 2**30:.2f} GiB on disk |",
        f"| `{run}` | {run_seconds:.0f} s | trains every run of the quick study; `git status` after: "
        f"{'clean' if not status else 'DIRTY: ' + status.replace(chr(10), ', ')} |",
    ]) + "\n"
    write_results(output_folder(args), "fresh_install", record, table)
    return 0


if __name__ == "__main__":
    sys.exit(cli(main))
