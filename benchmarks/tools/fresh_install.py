"""The README's main command on a fresh machine, measured: ``python -m benchmarks.tools.fresh_install``.

Clones the repository's committed HEAD into a temporary folder, creates a new virtual environment there
(no system site-packages), runs the README's main command line verbatim (the first line that installs
and then runs ``python -m benchmarks.compare``) and records:

- the install's wall time and the size of the new environment on disk,
- the wall time of the main command (training every run of the quick study from nothing),
- whether ``git status`` in the clone is still clean afterwards (the default output is git-ignored),
- the verdict lines the command printed.

Writes ``benchmarks/results/fresh_install.{json,md}`` in this checkout (docs/install.md, "The main command
on a fresh machine" copies the table). pip's download cache is the machine's, so the install time is that
of a machine that has the wheels at hand (a first download adds the transfer of the size shown).
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


def _du_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.fresh_install",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("--keep", action="store_true", help="keep the temporary clone and environment")
    add_output_arguments(p, "fresh_install", RESULTS_DIR)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        f"virtual environment, the README's main command verbatim; {machine_info()['cpus']} cores, load average "
        f"{machine_info()['load_average_1min']:.1f} after):",
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
