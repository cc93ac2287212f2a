"""``python -m benchmarks.lab``: see :mod:`benchmarks.lab`."""

import sys

from benchmarks.lab.cli import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
