"""``python -m benchmarks.llm_rewards``: see :mod:`benchmarks.llm_rewards`."""

import sys

from benchmarks.llm_rewards import main
from benchmarks.core.common import cli

if __name__ == "__main__":
    sys.exit(cli(main))
