"""``python -m benchmarks.lab``: see :mod:`benchmarks.lab`."""

import sys

from benchmarks.core.common import cli
from benchmarks.lab.cli import main

if __name__ == "__main__":
    sys.exit(cli(main))
