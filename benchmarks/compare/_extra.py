"""Imported first by :mod:`benchmarks.compare`: the study's statistics (scipy), plots (matplotlib),
executor (Ray) and contenders (SB3) come with the ``[bench]`` extra, which the light install lacks, so a
missing one is an ``ImportError`` naming the install that brings it rather than a bare
``No module named ...`` from deep inside an import."""

from __future__ import annotations

import importlib.util

#: Top-level modules of the ``[bench]`` extra that ``python -m benchmarks.compare`` imports.
BENCH_MODULES = ("scipy", "matplotlib", "ray", "stable_baselines3")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a broken or blocked install counts as missing
        return True


_NEEDED = [m for m in BENCH_MODULES if _missing(m)]
if _NEEDED:
    raise ImportError(f"python -m benchmarks.compare needs {', '.join(_NEEDED)}, which the light install "
                      'lacks; the benchmark extra brings them: pip install ".[bench]" (in a clone of the '
                      "repository)")
