"""``python -m benchmarks.countdown``: see :mod:`benchmarks.countdown`."""

import sys

from benchmarks.countdown import main
from benchmarks.core.common import cli

if __name__ == "__main__":
    sys.exit(cli(main))
