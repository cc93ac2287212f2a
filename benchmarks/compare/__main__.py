"""``python -m benchmarks.compare``: see :mod:`benchmarks.compare`."""

import sys

from benchmarks.compare import main
from benchmarks.core.common import cli

if __name__ == "__main__":
    sys.exit(cli(main))
