"""``python -m benchmarks.speed <name> [args]``: run one speed measurement (see :mod:`benchmarks.speed`)."""

from __future__ import annotations

import importlib
import sys

from benchmarks.core.common import cli
from benchmarks.speed import MEASUREMENTS

USAGE = ("usage: python -m benchmarks.speed <name> [args]\n"
         f"  name: one of {', '.join(MEASUREMENTS)}; "
         "`python -m benchmarks.speed <name> --help` for its options")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in MEASUREMENTS:
        print(f"error: {name!r} is not a speed measurement; choose from {', '.join(MEASUREMENTS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.speed.{MEASUREMENTS[name]}")
    if argv is None:  # a measurement that records sys.argv as its command sees its own arguments only
        sys.argv = [f"python -m benchmarks.speed {name}", *rest]
    return cli(module.main, rest)


if __name__ == "__main__":
    sys.exit(main())
