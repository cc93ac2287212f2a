"""Helpers every benchmark shares: where outputs go, atomic result files, the thread limit, machine facts.

Outputs: every experiment writes by default into ``benchmark-runs/<experiment>/`` (relative to where the
command runs; git ignores it), so running any command leaves a clone clean. The committed folder under
``benchmarks/results/`` is written only with ``--update-results`` (:func:`add_output_arguments`,
:func:`output_folder`), and only when every run of the study succeeded: until then its new run files and
any table go to its scratch folder (:func:`scratch_folder`), and a table written with runs missing says
so in its first line (:func:`incomplete_line`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "LOCAL_OUT", "RESULTS_DIR", "ROOT", "SetupError", "add_output_arguments", "check_writable", "cli",
    "command_line", "cpu_model", "incomplete_line", "is_committed", "limit_threads", "machine_info",
    "output_folder", "parse_seeds", "positive_int", "scratch_folder", "seeds_argument", "write_atomically",
    "write_json", "write_results",
]

#: The repository (the folder holding ``benchmarks/``).
ROOT = Path(__file__).resolve().parent.parent.parent
#: The committed results, rewritten only with ``--update-results``.
RESULTS_DIR = ROOT / "benchmarks" / "results"
#: Default outputs: a git-ignored folder in the working directory (``/benchmark-runs/`` in .gitignore).
LOCAL_OUT = Path("benchmark-runs")


class SetupError(Exception):
    """A study cannot start as set up (an unwritable folder, a bad or silent cluster address): the CLIs
    print its message as one line (:func:`cli`), with no traceback."""


class FolderNotWritable(SetupError, PermissionError):
    """An output folder that cannot be created or written."""


def is_committed(folder: Path) -> bool:
    """Whether ``folder`` is the committed results folder or inside it."""
    return Path(folder).resolve().is_relative_to(Path(RESULTS_DIR).resolve())


def scratch_folder(folder: Path) -> Path:
    """Where a study writes what must not reach ``folder`` yet: ``folder`` itself when it is not committed;
    for a committed folder, ``benchmark-runs/update-results/<folder relative to benchmarks/results>``
    (git-ignored), which holds the new run files until every run of the study succeeded, and the tables
    of a study that lost runs."""
    if not is_committed(folder):
        return Path(folder)
    rel = Path(folder).resolve().relative_to(Path(RESULTS_DIR).resolve())
    return LOCAL_OUT / "update-results" / rel


def incomplete_line(missing: list[str] | tuple[str, ...], total: int) -> str:
    """The first line of every table written while runs are missing ("" when none is)."""
    if not missing:
        return ""
    return (f"INCOMPLETE: {len(missing)} of {total} run(s) failed and are missing from these results: "
            + ", ".join(missing))


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``, so a
    reader never sees a half-written file and an interrupted run leaves the old results intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    write_atomically(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_results(out: Path, stem: str, result: dict[str, Any], table: str, incomplete: str = "") -> None:
    """Write ``<out>/<stem>.json`` (raw figures) and ``<out>/<stem>.md`` (the table); print the table.
    ``incomplete`` (:func:`incomplete_line`), when given, is the table's first line and the json's
    ``"incomplete"``."""
    if incomplete:
        result = {"incomplete": incomplete, **result}
        table = f"{incomplete}\n\n{table}"
    write_json(Path(out) / f"{stem}.json", result)
    write_atomically(Path(out) / f"{stem}.md", table)
    print(table)


def check_writable(folder: Path) -> None:
    """Fail now, before anything trains, if ``folder`` cannot be created or written: a
    :class:`FolderNotWritable` (a ``PermissionError``) that names the folder."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise FolderNotWritable(f"the output folder {folder} is not writable ({err.strerror or err}); "
                              "choose another with --out or fix its permissions") from err


def add_output_arguments(parser: argparse.ArgumentParser, experiment: str, committed: Path) -> None:
    """``--out`` (default ``benchmark-runs/<experiment>/``, git-ignored) and ``--update-results`` (write
    the committed ``committed`` folder instead)."""
    shown = committed.relative_to(ROOT) if committed.is_relative_to(ROOT) else committed
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default {LOCAL_OUT / experiment}/, git-ignored)")
    parser.add_argument("--update-results", action="store_true",
                        help=f"write the committed results in {shown}/ instead (maintainers)")
    parser.set_defaults(_experiment=experiment, _committed=committed)


def add_executor_arguments(parser: argparse.ArgumentParser, what: str = "arms") -> None:
    """``--workers``, ``--ray-address``, ``--rerun`` (comma-separated ``what`` whose stored runs are
    replaced) and ``--quiet``: how an experiment's runs go to :mod:`benchmarks.core.executor`."""
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="CPUs of the embedded local Ray, one run each (default: all cores)")
    parser.add_argument("--ray-address", default=None,
                        help="an existing Ray cluster (default: $RAY_ADDRESS, else an embedded local Ray)")
    parser.add_argument("--rerun", default="", help=f"comma-separated {what} whose stored runs are replaced")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def parse_seeds(text: str, *, minimum: int = 1, tuning: bool = False) -> list[int]:
    """The one seed syntax of every CLI: ``"5"`` -> seed 5; ``"10,11"`` -> those seeds; ``"10-19"`` ->
    10..19; parts combine (``"100-102,7"``). Reported seeds are below 1000; ``tuning`` seeds
    (``python -m benchmarks.compare.tune``) are 1000 and up, so no reported run reuses a tuning seed. At
    least ``minimum`` distinct seeds."""
    raw = str(text).strip()
    seeds: list[int] = []
    for part in (p.strip() for p in raw.split(",")):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None:
            raise ValueError(f"--seeds {raw!r}: {part!r} is not a seed; write a seed (5), a list (10,11) "
                             "or a range (10-19)")
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else int(m.group(2))
        if hi < lo:
            raise ValueError(f"--seeds {raw!r}: the range {part!r} must read LOW-HIGH with LOW <= HIGH")
        seeds.extend(range(lo, hi + 1))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {raw!r} names a seed twice; seeds must be distinct")
    if len(seeds) < minimum:
        raise ValueError(f"--seeds {raw!r} names {len(seeds)} seed(s); this command needs at least {minimum}")
    if tuning and any(s < 1000 for s in seeds):
        raise ValueError(f"--seeds {raw!r}: tuning seeds are 1000 and up (0..999 are for reported runs)")
    if not tuning and any(s >= 1000 for s in seeds):
        raise ValueError(f"--seeds {raw!r}: seeds >= 1000 are reserved for tuning "
                         "(``python -m benchmarks.compare.tune``)")
    return seeds


def seeds_argument(minimum: int = 1, tuning: bool = False) -> Callable[[str], list[int]]:
    """``type=`` for an argparse ``--seeds`` option: :func:`parse_seeds` with an argparse error."""
    def parse(text: str) -> list[int]:
        try:
            return parse_seeds(text, minimum=minimum, tuning=tuning)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = "seeds"
    return parse


def positive_int(text: str) -> int:
    """An argparse type: a positive integer, else a usage error naming the value."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return value


def output_folder(args: argparse.Namespace) -> Path:
    """The output folder :func:`add_output_arguments` selects: ``--out``, else the git-ignored default;
    ``--update-results`` (and only it) selects the committed folder."""
    if args.update_results:
        if args.out is not None:
            raise ValueError("--update-results writes the committed results folder; do not pass --out "
                             "with it")
        return Path(args._committed)
    return Path(args.out) if args.out is not None else LOCAL_OUT / args._experiment


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that produced a result, as a reader would retype it."""
    return " ".join(["python -m " + module, *map(shlex.quote, sys.argv[1:] if argv is None else argv)])


def limit_threads(n: int = 1, import_torch: bool = False) -> int | None:
    """Cap BLAS / OpenMP threads (for pools not yet started) and torch's intra-op threads at ``n``, so
    parallel runs do not fight over the cores and throughputs are per core.

    torch is imported only with ``import_torch`` (the tabular GRPO path never loads it); returns torch's
    thread count when torch is loaded, else None."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    if import_torch:
        import importlib.util

        if importlib.util.find_spec("torch") is None:  # pragma: no cover - torch is the [torch] extra
            return None
    if import_torch or "torch" in sys.modules:
        import torch

        torch.set_num_threads(n)
        return int(torch.get_num_threads())
    return None


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "load_average_1min": load,
    }


def cpu_model() -> str:
    """The processor, as ``/proc/cpuinfo`` names it (with its family, model and whether it has AVX-512),
    else ``platform.processor()``: torch's CPU kernels are chosen by instruction set, so the same seeded
    run can differ in its last bits between two processors."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block is enough
            continue
        fields.setdefault(name.strip(), value.strip())
    avx512 = ", AVX-512" if "avx512f" in fields.get("flags", "").split() else ""
    name = fields.get("model name", platform.processor() or "unknown")
    return f"{name} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')}{avx512})"


def cli(main: Any, argv: list[str] | None = None) -> int:
    """Run a benchmark CLI's ``main``: a :class:`SetupError` prints one line (``error: ...``, exit status
    2) instead of a chained traceback; Ctrl-C exits with 130 (the executor has said what was kept)."""
    try:
        status = main(argv)
    except SetupError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status if isinstance(status, int) else 0  # some mains return their result
