"""Copy the benchmark result tables into README.md, so no figure in the README is typed by hand.

    python -m benchmarks.update_readme [--check]

README.md marks each generated block with ``<!-- BEGIN <path> -->`` ... ``<!-- END <path> -->``, where
``<path>`` is a markdown file a benchmark command writes (e.g. ``benchmarks/results/throughput.md``).
This command replaces every block with the current file; ``--check`` only reports blocks that differ
(exit 1), which the test suite runs so the README cannot drift from the results.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from benchmarks.core.common import write_atomically

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"(<!-- BEGIN (?P<path>[^ ]+) -->\n)(?P<body>.*?)(<!-- END (?P=path) -->)", re.S)


def render(readme: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """README text with every block refreshed, and the paths whose blocks changed. A block whose file
    does not exist yet is left as it is and reported as ``"<path> (missing)"``."""
    changed: list[str] = []

    def fill(match: re.Match[str]) -> str:
        path = match.group("path")
        source = root / path
        if not source.is_file():
            changed.append(f"{path} (missing: run its benchmark)")
            return match.group(0)
        body = source.read_text(encoding="utf-8").strip() + "\n"
        if body != match.group("body"):
            changed.append(path)
        return match.group(1) + body + match.group(4)

    return _BLOCK.sub(fill, readme), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.update_readme", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale blocks, change nothing")
    args = parser.parse_args(argv)
    readme_path = ROOT / "README.md"
    text, changed = render(readme_path.read_text(encoding="utf-8"))
    if args.check:
        for path in changed:
            print(f"README block for {path} is stale; run python -m benchmarks.update_readme")
        return 1 if changed else 0
    if text != readme_path.read_text(encoding="utf-8"):
        write_atomically(readme_path, text)
    print(f"refreshed {len(changed)} block(s): {', '.join(changed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
