"""Copy the benchmark result tables into README.md and the docs/ pages, so no figure there is typed by hand.

    python -m benchmarks.tools.update_readme [--check]

A page (README.md or any ``docs/*.md``) marks each generated block with ``<!-- BEGIN <path> -->`` ...
``<!-- END <path> -->``, where ``<path>`` is a markdown file a benchmark command writes, relative to the
repository root (e.g. ``benchmarks/results/throughput.md``). This command replaces every block of every
page with the current file; ``--check`` only reports blocks that differ (exit 1), which the test suite
runs so no page can drift from the results. A results file's relative links are written for the
repository root (where README.md is); in a page under ``docs/`` they are rebased onto that page
(``benchmarks/results/lab/kl.png`` becomes ``../benchmarks/results/lab/kl.png``), so they resolve there.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from benchmarks.core.common import ROOT, write_atomically

_BLOCK = re.compile(r"(<!-- BEGIN (?P<path>[^ ]+) -->\n)(?P<body>.*?)(<!-- END (?P=path) -->)", re.S)
# a markdown link or image target: ](target) or ](target "title"); the target has no spaces
_LINK_TARGET = re.compile(r"(\]\()([^)\s]+)")
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|/|#)", re.I)


def pages(root: Path = ROOT) -> list[Path]:
    """Every page whose blocks this command keeps: README.md, then docs/*.md in name order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def rebase_links(markdown: str, page_dir: Path, root: Path = ROOT) -> str:
    """``markdown`` (written with links relative to ``root``) with every relative link target rewritten
    relative to ``page_dir``; absolute paths, URLs and ``#anchors`` stay as they are."""
    if page_dir.resolve() == root.resolve():
        return markdown

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        if _EXTERNAL.match(target):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        rebased = Path(os.path.relpath(root / path, page_dir)).as_posix()
        return match.group(1) + rebased + hash_ + anchor

    return _LINK_TARGET.sub(fix, markdown)


def render(text: str, root: Path = ROOT, page_dir: Path | None = None) -> tuple[str, list[str]]:
    """The page ``text`` with every block refreshed, and the paths whose blocks changed. ``page_dir`` is
    the folder the page lives in (default: ``root``, as README.md). A block whose file does not exist
    yet is left as it is and reported as ``"<path> (missing: run its benchmark)"``."""
    changed: list[str] = []
    where = root if page_dir is None else page_dir

    def fill(match: re.Match[str]) -> str:
        path = match.group("path")
        source = root / path
        if not source.is_file():
            changed.append(f"{path} (missing: run its benchmark)")
            return match.group(0)
        body = rebase_links(source.read_text(encoding="utf-8").strip() + "\n", where, root)
        if body != match.group("body"):
            changed.append(path)
        return match.group(1) + body + match.group(4)

    return _BLOCK.sub(fill, text), changed


def render_all(root: Path = ROOT) -> dict[Path, tuple[str, str, list[str]]]:
    """For every page: (current text, refreshed text, paths of its changed blocks)."""
    out: dict[Path, tuple[str, str, list[str]]] = {}
    for page in pages(root):
        current = page.read_text(encoding="utf-8")
        refreshed, changed = render(current, root, page.parent)
        out[page] = (current, refreshed, changed)
    return out


def refresh(root: Path = ROOT, *, check: bool = False) -> list[tuple[str, str]]:
    """Refresh every page's blocks under ``root`` (with ``check``, write nothing); returns the stale
    blocks found as ``(page, results path)`` pairs, the page relative to ``root``."""
    stale: list[tuple[str, str]] = []
    for page, (current, refreshed, changed) in render_all(root).items():
        stale += [(page.relative_to(root).as_posix(), path) for path in changed]
        if not check and refreshed != current:
            write_atomically(page, refreshed)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.update_readme", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale blocks, change nothing")
    args = parser.parse_args(argv)
    stale = refresh(check=args.check)
    if args.check:
        for page, path in stale:
            print(f"{page}: block for {path} is stale; run python -m benchmarks.tools.update_readme")
        return 1 if stale else 0
    print(f"refreshed {len(stale)} block(s): {', '.join(f'{p}: {b}' for p, b in stale) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
