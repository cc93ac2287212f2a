"""Imported first by :mod:`benchmarks.compare`: the study's statistics (scipy), plots (matplotlib),
executor (Ray) and contenders (SB3) come with the ``[bench]`` extra, which the light install lacks, so a
missing one is an ``ImportError`` naming the install that brings it rather than a bare
``No module named ...`` from deep inside an import."""

from __future__ import annotations

import importlib.util
import sys

#: Top-level modules of the ``[bench]`` extra that ``python -m benchmarks.compare`` imports.
BENCH_MODULES = ("scipy", "matplotlib", "ray", "stable_baselines3")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a broken or blocked install counts as missing
        return True


def _run_as_command() -> bool:
    """True in ``python -m benchmarks.compare[.<module>]``, where the package is imported before its
    ``__main__`` and a traceback would bury the one line that matters."""
    argv = list(getattr(sys, "orig_argv", []))
    return "-m" in argv[:-1] and argv[argv.index("-m") + 1].startswith("benchmarks.compare")


_NEEDED = [m for m in BENCH_MODULES if _missing(m)]
if _NEEDED:
    _MESSAGE = (f"python -m benchmarks.compare needs {', '.join(_NEEDED)}, which the light install lacks; "
                'the benchmark extra brings them: pip install ".[bench]" (in a clone of the repository)')
    if _run_as_command():
        print(f"error: {_MESSAGE}", file=sys.stderr)
        raise SystemExit(2)
    raise ImportError(_MESSAGE)
