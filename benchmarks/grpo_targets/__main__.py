"""``python -m benchmarks.grpo_targets``: see :mod:`benchmarks.grpo_targets`."""

import sys

from benchmarks.grpo_targets import main
from benchmarks.core.common import cli

if __name__ == "__main__":
    sys.exit(cli(main))
