"""Run files that cannot be mixed up: ``<out>/runs/<key>.json``, one per run, written by the driver only.

A run file is ``{"format", "key", "fingerprint", "checksum", "record"}``:

- ``key`` names the run (the file's stem); a record copied under another key's name is caught;
- ``fingerprint`` digests the run's whole spec: the run function, everything its spec holds (contender,
  config / hyperparameters, env id and kwargs, seed, budget, evaluation), and the *code version*
  (:func:`code_version`): :data:`CODE_VERSION` plus the versions of the libraries a run's numbers depend
  on. Not the git commit: a finished study stays valid across commits that do not change what runs
  measure (docs, refactors, other experiments); a change that does bumps :data:`CODE_VERSION`, and a
  new torch / numpy / SB3 / Gymnasium makes every run train again, since their numbers can move.
- ``checksum`` is the SHA-256 of the key, fingerprint and record as canonical JSON, so a record edited
  by hand (a verdict changed, a seed swapped) is caught.

:func:`load_run` checks all of it. A file that fails is never used and never crashes the study: it is
moved to ``runs/quarantine/<name>.<reason>`` (``.1``, ``.2``, ... when that name is taken) with a one-line
warning naming the file and the reason, and the run is trained again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.core.common import write_atomically

__all__ = ["CODE_VERSION", "STORED_NAMES", "STORE_FORMAT", "RunFileError", "checksum", "code_version",
           "digest", "fingerprint", "check_run", "library_versions", "load_run", "quarantine", "run_key",
           "save_run", "wrap"]

#: The run file's layout; a file of another format is set aside. The one format constant: a study's run
#: keys carry no version of their own (what a run measures is versioned by :data:`CODE_VERSION`).
STORE_FORMAT = 3
#: Bumped when a code change alters what a run measures (a metric's definition, the evaluator, a run
#: function's output): every stored run then trains again. Commits that do not alter records leave it.
CODE_VERSION = 1
#: The libraries whose versions can move a run's numbers (Ray, tqdm, matplotlib cannot).
LIBRARIES = ("torch", "stable-baselines3", "sb3-contrib", "numpy", "gymnasium", "scipy")


def library_versions(dists: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Python's and ``dists``' versions, read from package metadata (so no torch import)."""
    import platform
    from importlib import metadata

    versions: dict[str, str | None] = {"python": platform.python_version()}
    for dist in dists:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def code_version(libraries: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What "the same code" means for a stored run: :data:`CODE_VERSION` and the library versions."""
    return {"code": CODE_VERSION, "libraries": dict(library_versions() if libraries is None else libraries)}


def digest(obj: Any, length: int = 12) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``obj`` as JSON with sorted keys: the one hash
    every run key is made of. It uses ``json.dumps``' default separators (not :func:`_canonical`'s),
    the form every stored key was made with, so it never changes."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:length]


def run_key(arm: str, spec: Mapping[str, Any]) -> str:
    """The run key of ``arm`` (a setting under comparison) with ``spec``: ``<arm>__s<seed>__<digest>``, the
    digest of the whole spec (seed included)."""
    return f"{arm}__s{spec['seed']}__{digest(spec)}"


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


#: Run functions that moved since runs of theirs were stored, by their new name: the fingerprint names a
#: function as its stored runs do, so moving code (which changes no number) never retrains a study.
STORED_NAMES = {
    "benchmarks.compare.run:run_spec": "benchmarks.core.run:run_spec",
    "benchmarks.core.bases:base_run": "benchmarks.r1:base_run",
    "benchmarks.r1.base_search:base_cell": "benchmarks.r1_base:base_cell",
    "benchmarks.countdown.runs:grpo_run": "benchmarks.countdown:grpo_run",
    "benchmarks.countdown.runs:maskable_run": "benchmarks.countdown:maskable_run",
    "benchmarks.countdown.runs:arithmetic_run": "benchmarks.countdown:arithmetic_run",
}


def fingerprint(fn: str, spec: Mapping[str, Any], version: Mapping[str, Any] | None = None) -> str:
    """SHA-256 of the run function's name (as in :data:`STORED_NAMES`), its whole spec and the code
    version."""
    payload = {"fn": STORED_NAMES.get(fn, fn), "spec": spec,
               "version": code_version() if version is None else version}
    return hashlib.sha256(_canonical(payload)).hexdigest()


def checksum(key: str, fp: str, record: Any) -> str:
    return hashlib.sha256(_canonical({"key": key, "fingerprint": fp, "record": record})).hexdigest()


def wrap(key: str, fp: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The run file's content for ``record`` (a JSON round trip first, so the checksum is of what is
    stored: tuples become lists)."""
    stored = json.loads(json.dumps(record, default=str))
    return {"format": STORE_FORMAT, "key": key, "fingerprint": fp, "checksum": checksum(key, fp, stored),
            "record": stored}


def save_run(run_dir: Path, key: str, fp: str, record: Mapping[str, Any]) -> Path:
    """Write ``run_dir/<key>.json`` atomically (temp file + ``os.replace``)."""
    path = Path(run_dir) / f"{key}.json"
    write_atomically(path, json.dumps(wrap(key, fp, record), indent=1) + "\n")
    return path


class RunFileError(ValueError):
    """A run file that must not be used; ``reason`` is one word (the quarantine suffix)."""

    def __init__(self, path: Path, reason: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path, self.reason, self.detail = Path(path), reason, detail


def check_run(path: Path, key: str | None = None, fp: str | None = None) -> dict[str, Any]:
    """The record of the run file ``path``, or :class:`RunFileError` saying what is wrong with it. ``key``
    defaults to the file's stem; with ``fp`` None the fingerprint is not compared (reading a stored
    study, not deciding whether to reuse a run)."""
    path = Path(path)
    key = path.stem if key is None else key
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise RunFileError(path, "unreadable", f"cannot be read ({err.strerror or err})") from err
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RunFileError(path, "binary", "is not UTF-8 text (binary garbage?)") from None
    except json.JSONDecodeError as err:
        raise RunFileError(path, "corrupt",
                           f"is not valid JSON (truncated?): {err.msg} at {err.pos}") from None
    if not isinstance(data, dict):
        raise RunFileError(path, "schema", f"holds a JSON {type(data).__name__}, not a run file object")
    if data.get("format") != STORE_FORMAT:
        raise RunFileError(path, "format",
                           f"has format {data.get('format')!r}, not this code's run-file format "
                           f"{STORE_FORMAT}")
    missing = [k for k in ("key", "fingerprint", "checksum", "record") if k not in data]
    if missing or not isinstance(data["record"], dict):
        raise RunFileError(path, "schema", f"lacks {missing or ['a record object']}")
    if data["checksum"] != checksum(data["key"], data["fingerprint"], data["record"]):
        raise RunFileError(path, "checksum", "fails its checksum (its content was edited)")
    if data["key"] != key:
        raise RunFileError(path, "key",
                           f"holds the run {data['key']!r}, not {key!r} (copied under another name?)")
    if fp is not None and data["fingerprint"] != fp:
        raise RunFileError(path, "fingerprint",
                           "was made from another spec or code version (settings, library versions or "
                           "CODE_VERSION changed)")
    return data["record"]


def quarantine(err: RunFileError, warn: bool = True) -> Path:
    """Move the bad file (or whatever stands at its name) to ``runs/quarantine/<name>.<reason>``, with a
    counter suffix (``.1``, ``.2``, ...) when that name is taken, so every copy set aside is kept, and
    print a one-line warning naming both."""
    folder = err.path.parent / "quarantine"
    folder.mkdir(parents=True, exist_ok=True)
    base = f"{err.path.name}.{err.reason}"
    target, n = folder / base, 0
    while target.exists() or target.is_symlink():
        n += 1
        target = folder / f"{base}.{n}"
    os.replace(err.path, target)  # a move (a directory too, the target being new), never a copy
    if warn:
        print(f"warning: run file {err.path} {err.detail}; moved to {target}, training the run again",
              file=sys.stderr)
    return target


def load_run(path: Path, key: str, fp: str) -> dict[str, Any] | None:
    """The stored record of run ``key`` if ``path`` holds it, exactly as made from this spec and code;
    None when there is no file, or when the file fails a check (it is then quarantined with a warning)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return check_run(path, key, fp)
    except RunFileError as err:
        quarantine(err)
        return None
