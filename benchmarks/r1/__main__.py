"""``python -m benchmarks.r1``: see :mod:`benchmarks.r1`."""

import sys

from benchmarks.r1 import main
from benchmarks.core.common import cli

if __name__ == "__main__":
    sys.exit(cli(main))
