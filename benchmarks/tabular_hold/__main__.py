"""``python -m benchmarks.tabular_hold``: see :mod:`benchmarks.tabular_hold`."""

import sys

from benchmarks.tabular_hold import main
from benchmarks.core.common import cli

if __name__ == "__main__":
    sys.exit(cli(main))
