"""Re-wrap run files of the older, bare-record formats into the store's run files (key, fingerprint,
checksum; :mod:`benchmarks.core.store`), leaving every record's content as it is, so every figure made
from them stays the same.

    python -m benchmarks.tools.migrate_runs [FOLDER ...]                   # say what would change
    python -m benchmarks.tools.migrate_runs --update-results [FOLDER ...]  # rewrite (default: committed)

A record's fingerprint is computed from its own spec and the library versions it records (a record
that records none gets ``"unrecorded"``, so its fingerprint matches no running code and a study that
needs it trains it again rather than trusting it). The run function is the study runs' (records with a
``spec``) or the lab's (records whose ``key`` is the lab's settings).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.core.common import RESULTS_DIR, cli
from benchmarks.core.store import LIBRARIES, STORE_FORMAT, CODE_VERSION, fingerprint, save_run

__all__ = ["main", "migrated"]

STUDY_FN = "benchmarks.compare.run:run_spec"
LAB_FN = "benchmarks.lab.runner:run_arm"


def _version(record: dict[str, Any]) -> dict[str, Any]:
    versions = record.get("versions")
    if not isinstance(versions, dict):
        return {"code": CODE_VERSION, "libraries": "unrecorded"}
    return {"code": CODE_VERSION, "libraries": {k: versions.get(k) for k in ("python", *LIBRARIES)}}


def migrated(path: Path) -> tuple[str, str, dict[str, Any]] | None:
    """(key, fingerprint, record) for a bare record file; None if it is already a run file; a
    ``ValueError`` naming the file and what is wrong with it for anything else."""
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: is not UTF-8 text (binary garbage?); left alone") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: is not valid JSON ({err.msg} at {err.pos}); left alone") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: holds a JSON {type(data).__name__}, not a record; left alone")
    if data.get("format") == STORE_FORMAT and "checksum" in data:
        return None
    key = Path(path).stem
    if isinstance(data.get("spec"), dict):  # a study run (benchmarks.compare.run)
        if data.get("key") != key:
            raise ValueError(f"{path}: its record names the run {data.get('key')!r}, not the file's {key!r}")
        return key, fingerprint(STUDY_FN, data["spec"], _version(data)), data
    if isinstance(data.get("key"), dict) and "iterations" in data:  # a lab run
        return key, fingerprint(LAB_FN, data["key"], _version(data)), data
    raise ValueError(f"{path}: neither a study run nor a lab run; left alone")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.migrate_runs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="*", type=Path, help="folders holding runs/ (default: every "
                   "committed results folder)")
    p.add_argument("--update-results", action="store_true", help="rewrite the files (else only report)")
    args = p.parse_args(argv)
    folders = args.folders or sorted(d.parent for d in RESULTS_DIR.glob("**/runs") if d.is_dir())
    changed, refused = 0, 0
    for folder in folders:
        for path in sorted((Path(folder) / "runs").glob("*.json")):
            try:
                item = migrated(path)
            except ValueError as err:  # one line per file it cannot read; the others are migrated
                print(f"warning: {err}", file=sys.stderr)
                refused += 1
                continue
            if item is None:
                continue
            changed += 1
            if args.update_results:
                save_run(path.parent, *item)
    verb = "re-wrapped" if args.update_results else "would re-wrap (pass --update-results)"
    print(f"{verb} {changed} run file(s) in {len(folders)} folder(s)"
          + (f"; {refused} file(s) left alone (named above)" if refused else ""), file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(cli(main))
