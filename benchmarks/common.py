"""Helpers every benchmark script shares: atomic result files, thread limits, machine facts."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_atomically", "write_json", "write_results", "command_line", "limit_threads", "machine_info"]


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


def write_results(out: Path, stem: str, result: dict[str, Any], table: str) -> None:
    """Write ``<out>/<stem>.json`` (raw figures) and ``<out>/<stem>.md`` (the table); print the table."""
    write_json(Path(out) / f"{stem}.json", result)
    write_atomically(Path(out) / f"{stem}.md", table)
    print(table)


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that produced a result, as a reader would retype it."""
    import sys

    return " ".join(["python -m " + module, *(sys.argv[1:] if argv is None else argv)])


def limit_threads(n: int = 1) -> int:
    """Cap BLAS/OpenMP threads (before numpy/torch spin up pools) and torch's intra-op threads.

    Returns the torch thread count in force (``n`` when torch is importable)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch comes with stable-baselines3
        return n
    torch.set_num_threads(n)
    return int(torch.get_num_threads())


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
        "load_average_1min": load,
    }
