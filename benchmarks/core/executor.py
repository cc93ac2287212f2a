"""The one executor: every experiment's runs go to Ray through :func:`run_all`, from a laptop to a cluster.

A run is a :class:`Run`: a named run function (``"module:function"``, imported by the worker) and a
JSON-able spec; the function returns the run's record (a JSON-able dict) and writes nothing. The GRPO-vs-PPO
runs (:func:`benchmarks.compare.run.run_spec`), the lab's arms, the Countdown study's and the GRPO targets'
runs are all runs of this executor (each one Ray task), so each experiment runs on a cluster with
``--ray-address``. ``docs/experiments.md`` shows a new experiment on it.

- Only the driver writes files: each record goes atomically into ``<out>/runs/<key>.json`` with its key,
  fingerprint and checksum (:mod:`benchmarks.core.store`), so a cluster needs no shared filesystem. A
  stored run whose file passes every check is reused; a bad file is quarantined with a warning and the
  run trains again. Every folder the study writes (``out`` and its ``runs/``) is checked for writing
  before anything is submitted; a write that fails loses only that run (reported at the end, the others
  are kept).
- A committed ``out`` (under ``benchmarks/results/``) changes only when every run succeeded: new run
  files are written to its scratch folder (:func:`~benchmarks.core.common.scratch_folder`) and moved
  into ``out/runs`` at the end of a call without failures; its stored files are read, never moved. A
  study whose :class:`Outcome` is not :attr:`~Outcome.complete` writes its tables to
  :meth:`Outcome.destination` (the scratch folder) with :meth:`Outcome.incomplete` as their first line.
- With no address an embedded, isolated local Ray is started (``address="local"``: a new cluster of
  ``workers`` CPUs even if a ``ray start`` head is already up on the machine) and shut down at the end.
  ``address`` (``--ray-address``, or ``RAY_ADDRESS``) joins a cluster, whose nodes need this checkout
  installed; an address where nothing answers, or where something that is not a Ray head answers, fails
  within :data:`~benchmarks.core.cluster.CONNECT_TIMEOUT` seconds, saying what to check; a head that uses
  token authentication (``ray start --head`` does once a token exists in ``~/.ray/auth_token``) is joined
  with the same token (``RAY_AUTH_MODE=token``, set before Ray reads its configuration). Connecting is
  :mod:`benchmarks.core.cluster`'s.
- Every record carries its worker's code version (:func:`worker_version`: the store's code version and a
  digest of this checkout's sources); one that differs from the driver's fails that run loudly.
- Faults: a task whose worker process dies is retried up to ``max_retries`` times by Ray; the attempts
  are counted (``execution.attempts`` in each record, ``retried`` in the outcome). A run that raises is a
  failure of that run only. Ctrl-C cancels the pending tasks, keeps every finished run and re-raises.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.core.common import (
    ROOT,
    check_writable,
    incomplete_line,
    limit_threads,
    scratch_folder,
    write_atomically,
)
from benchmarks.core.cluster import check_reachable, ray_session
from benchmarks.core.store import RunFileError, check_run, code_version, fingerprint, load_run, save_run

__all__ = ["MAX_RETRIES", "Outcome", "Run", "git_commit", "run_all", "worker_version"]

#: Times Ray resubmits a run whose worker process died before giving up on that run.
MAX_RETRIES = 3


@dataclass(frozen=True)
class Run:
    """One run: ``fn(spec) -> record``. ``key`` names its run file; ``arm`` is the setting under comparison
    it belongs to, what ``--rerun`` names; ``label`` shows on the progress bar."""

    fn: str | Callable[[dict[str, Any]], dict[str, Any]]
    spec: Mapping[str, Any]
    key: str
    arm: str = ""
    label: str = ""

    @property
    def fn_name(self) -> str:
        return self.fn if isinstance(self.fn, str) else f"{self.fn.__module__}:{self.fn.__qualname__}"

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.fn_name, self.spec)


@dataclass
class Outcome:
    """What :func:`run_all` gives back: records by key (stored and new), one message per failed run and
    the failed runs' keys (``missing``), how many runs there were (``total``) and were found on disk
    (``found``), and how many needed more than one attempt."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    retried: int = 0
    missing: list[str] = field(default_factory=list)
    total: int = 0
    found: int = 0

    def ordered(self, runs: Iterable[Run]) -> list[dict[str, Any]]:
        return [self.records[r.key] for r in runs if r.key in self.records]

    @property
    def complete(self) -> bool:
        """Every run has its record: the study may write its committed folder."""
        return not self.failures

    def incomplete(self) -> str:
        """The first line of every table made from these records ("" when complete)."""
        return incomplete_line(self.missing or [f.partition(":")[0] for f in self.failures], self.total)

    def destination(self, out: Path) -> Path:
        """Where the study writes its tables: ``out`` when complete, else ``out``'s scratch folder (a
        committed folder is never written with runs missing)."""
        return Path(out) if self.complete else scratch_folder(out)

    def __add__(self, other: Outcome) -> Outcome:
        """The outcome of two calls (e.g. a study's bases, then its runs)."""
        return Outcome({**self.records, **other.records}, self.failures + other.failures,
                       self.retried + other.retried, self.missing + other.missing,
                       self.total + other.total, self.found + other.found)


def git_commit() -> str | None:
    """The checkout's commit (with "+dirty" when files differ from it), or None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """SHA-256 over this checkout's Python sources (rlvr_env, agents, benchmarks): two processes with
    equal digests run the same code, whatever their git state."""
    h = hashlib.sha256()
    for package in ("rlvr_env", "agents", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def worker_version() -> dict[str, Any]:
    """This process's code version: the store's (code constant, libraries) and the digest of the sources
    as they were when this module was imported (the code this process runs)."""
    return {**code_version(), "source": _source_digest()}


RunFunction = Callable[[dict[str, Any]], dict[str, Any]]


_source_digest()  # now: the digest of the code this process imports, not of later edits


def _resolve(fn: str | RunFunction) -> RunFunction:
    if not isinstance(fn, str):
        return fn
    module, _, name = fn.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _execute(fn: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """What one Ray task runs: one thread, the run function; return the record with this worker's code
    version and the attempt this is (1 for the first; Ray retries a task whose worker died).

    The task makes no Ray call of its own: a task that waits on Ray (``ray.get``, even a polling
    ``ray.wait``) gives its CPU back to Ray's scheduler, which then starts another run on it, so
    ``--workers 2`` trained three runs at once. The attempt number is the core worker's own count."""
    attempt = _attempt_number() + 1
    limit_threads(1)
    record = _resolve(fn)(spec)
    return {"record": record, "worker": worker_version(), "attempt": attempt, "host": socket.gethostname()}


def _attempt_number() -> int:
    """The current Ray task's attempt number (0 for the first), from its core worker (no public API says
    it; every Ray this project supports, 2.9 on, has the method). ``RuntimeError`` names the Ray version
    if it is missing."""
    import ray

    core = ray._private.worker.global_worker.core_worker  # noqa: SLF001 - no public accessor
    get = getattr(core, "get_current_task_attempt_number", None)
    if get is None:
        raise RuntimeError(f"ray {ray.__version__} does not tell a task its attempt number "
                           "(CoreWorker.get_current_task_attempt_number); install ray>=2.9")
    return int(get())


def run_all(
    runs: Sequence[Run],
    out: Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    desc: str = "runs",
    rerun: Iterable[str] = (),
    max_retries: int = MAX_RETRIES,
    log: Callable[[str], None] | None = None,
) -> Outcome:
    """Train every run whose run file in ``out/runs`` is missing or fails its checks, one Ray task each,
    saving each record as it returns; ``rerun`` names arms whose stored runs are replaced. A committed
    ``out`` gets its new run files only when every run succeeded (see the module's docstring)."""
    from tqdm.auto import tqdm

    out = Path(out)
    run_dir = out / "runs"
    stage_dir = scratch_folder(out) / "runs"  # run_dir itself unless out is committed
    for folder in dict.fromkeys((out, run_dir, stage_dir)):  # every folder written, before anything trains
        check_writable(folder)
    rerun = set(rerun)
    unique = list({t.key: t for t in runs}.values())  # a run listed twice trains once
    outcome = Outcome(total=len(unique))
    todo: list[Run] = []
    for run in unique:
        stored = None
        if run.arm not in rerun:
            stored = load_run(stage_dir / f"{run.key}.json", run.key, run.fingerprint)
            if stored is None and stage_dir != run_dir:
                stored = _committed_run(run_dir / f"{run.key}.json", run)
        if stored is not None:
            outcome.records[run.key] = stored
        else:
            todo.append(run)
    outcome.found = len(outcome.records)
    if log is not None:
        log(f"{desc}: {outcome.total} run(s): {outcome.found} found on disk, {len(todo)} to run"
            + (" (all found on disk, nothing trains)" if not todo else ""))
    if todo:
        _submit(todo, outcome, run_dir=stage_dir, address=address, workers=workers, progress=progress,
                desc=desc, max_retries=max_retries, tqdm=tqdm)
    if outcome.retried:
        print(f"{outcome.retried} run(s) were retried after their worker died (execution.attempts in "
              "their run files)", file=sys.stderr)
    if stage_dir != run_dir:
        if outcome.complete:
            _promote(outcome, stage_dir, run_dir)
        else:
            print(f"{len(outcome.failures)} run(s) failed: the committed {run_dir} is left as it was; the "
                  f"finished new runs wait in {stage_dir} (the same command reuses them)", file=sys.stderr)
    return outcome


def _committed_run(path: Path, run: Run) -> dict[str, Any] | None:
    """A committed run file's record if it passes every check; a file that fails is left where it is (a
    committed folder changes only when the whole study succeeds) and the run trains again."""
    if not path.exists():
        return None
    try:
        return check_run(path, run.key, run.fingerprint)
    except RunFileError as err:
        print(f"warning: run file {path} {err.detail}; training the run again (the file is replaced once "
              "every run of the study succeeded)", file=sys.stderr)
        return None


def _promote(outcome: Outcome, stage_dir: Path, run_dir: Path) -> None:
    """Move the staged run files of a complete call into the committed ``run_dir``."""
    moved = 0
    for key in outcome.records:
        staged = stage_dir / f"{key}.json"
        if staged.is_file():
            write_atomically(run_dir / staged.name, staged.read_bytes())  # may be another filesystem
            staged.unlink()
            moved += 1
    if moved:
        print(f"{moved} new run file(s) moved into {run_dir}", file=sys.stderr)


def _submit(todo: Sequence[Run], outcome: Outcome, *, run_dir: Path, address: str | None,
            workers: int | None, progress: bool, desc: str, max_retries: int, tqdm: Any) -> None:
    """Send ``todo`` to Ray and collect each record into ``outcome`` (saved in ``run_dir``) as it returns."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        check_reachable(address)  # before the progress bar
    import ray

    commit = git_commit()
    driver = worker_version()
    bar = tqdm(total=outcome.total, initial=len(outcome.records), desc=desc, unit="run",
               disable=not progress, dynamic_ncols=True)
    with ray_session(address, workers, quiet=not progress):
        remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(_execute)
        pending = {remote.remote(t.fn, dict(t.spec)): t for t in todo}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    run = pending.pop(ref)
                    _collect(ray, ref, run, driver, commit, run_dir, outcome)
                    bar.set_postfix_str(run.label or run.key, refresh=False)
                    bar.update(1)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            bar.close()
            print(f"\ninterrupted: {len(outcome.records)} finished runs are in {run_dir}; the same command "
                  "resumes with the rest", file=sys.stderr)
            raise
        finally:
            bar.close()


def _collect(ray: Any, ref: Any, run: Run, driver: Mapping[str, Any], commit: str | None, run_dir: Path,
             outcome: Outcome) -> None:
    """Take one finished run's result: check the worker's code version, stamp it, write the run file."""
    try:
        result = ray.get(ref)
    except Exception as err:  # this run only; the others go on
        trace = "".join(traceback.format_exception(err))
        outcome.failures.append(f"{run.key}: {err!r}\n{trace}")
        outcome.missing.append(run.key)
        return
    if result["worker"] != driver:
        outcome.failures.append(
            f"{run.key}: the worker on {result['host']} runs other code ({result['worker']}) than this "
            f"driver ({dict(driver)}); install the same checkout and libraries on every node. Not saved.")
        outcome.missing.append(run.key)
        print(f"error: {outcome.failures[-1]}", file=sys.stderr)
        return
    record = result["record"]
    record["git_commit"] = commit
    record["execution"] = {"worker": result["worker"], "host": result["host"], "attempts": result["attempt"],
                           "fn": run.fn_name}
    if result["attempt"] > 1:
        outcome.retried += 1
    try:
        save_run(run_dir, run.key, run.fingerprint, record)
    except OSError as err:  # this run is lost, the others are kept
        outcome.failures.append(f"{run.key}: could not write its run file in {run_dir}: {err}")
        outcome.missing.append(run.key)
        return
    outcome.records[run.key] = record
