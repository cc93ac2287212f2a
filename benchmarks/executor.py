"""Executing a grid of runs on Ray: one code path from a laptop to a cluster.

:func:`run_grid` submits every run that is not already on disk as one Ray task (``num_cpus=1``; the
task pins one torch / BLAS thread and calls :func:`benchmarks.run.run_one`) and collects the records as
they finish. Only the driver writes files, each atomically (temp file + ``os.replace``) into
``<out>/runs/<key>.json``, so a cluster needs no shared filesystem and a reader never sees half a file.

- With no address, an embedded local Ray is started on this machine (``workers`` CPUs, default all
  cores) and shut down at the end; ``address`` (``--ray-address``, or the standard ``RAY_ADDRESS``
  variable) connects to an existing cluster instead, whose nodes need this package installed.
- Faults: a task whose worker process dies (killed, out of memory, node lost) is retried up to
  ``max_retries`` times by Ray; a run that raises is a failure of that run only (a seeded run that raised
  would raise again) and is reported at the end. Nothing is written for a run until its record is back.
- Ctrl-C on the driver cancels the pending tasks, keeps every finished run on disk and re-raises; the
  next invocation loads the finished runs and submits only the rest.
- A tqdm bar counts finished runs; the Ray dashboard URL is printed when a dashboard is up (it needs
  ``ray[default]``; the plain ``ray`` package starts none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import write_atomically
from benchmarks.study import RUN_FORMAT, RunSpec

__all__ = ["MAX_RETRIES", "git_commit", "load_run", "ray_session", "run_grid", "run_task"]

#: Times Ray resubmits a run whose worker process died before giving up on that run.
MAX_RETRIES = 3


def git_commit() -> str | None:
    """The checkout's commit (with "+dirty" when files differ from it), or None outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def load_run(path: Path) -> dict[str, Any] | None:
    """A finished run's record, or None when the file is missing, unreadable or of an older format."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("format") == RUN_FORMAT else None


def run_task(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What one Ray task executes: one thread, then :func:`benchmarks.run.run_one`."""
    from benchmarks.run import limit_threads, run_one

    limit_threads()
    return run_one(RunSpec.from_dict(spec))


class ray_session:  # noqa: N801 - used as a context manager, like open()
    """Connect to Ray: an existing connection is reused, ``address`` (or ``RAY_ADDRESS``) joins a
    cluster, otherwise a local Ray with ``workers`` CPUs is started. Shuts down only what it started."""

    def __init__(self, address: str | None = None, workers: int | None = None, quiet: bool = False) -> None:
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.workers = workers
        self.quiet = quiet
        self.started = False
        self.dashboard_url: str | None = None

    def __enter__(self) -> ray_session:
        import ray

        if not ray.is_initialized():
            # One BLAS / OpenMP thread per worker, inherited by a local Ray's worker processes.
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                os.environ.setdefault(var, "1")
            kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": "warning"}
            if self.address is None:
                kwargs["num_cpus"] = int(self.workers or os.cpu_count() or 1)
                kwargs["include_dashboard"] = None  # up if ray[default] is installed
            ctx = ray.init(address=self.address, **kwargs)
            self.started = True
            url = getattr(ctx, "dashboard_url", None)
            self.dashboard_url = f"http://{url}" if url and not str(url).startswith("http") else url or None
            if self.dashboard_url and not self.quiet:
                print(f"Ray dashboard: {self.dashboard_url}", file=sys.stderr)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.started:
            import ray

            ray.shutdown()


def run_grid(
    specs: Sequence[RunSpec],
    out: Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    desc: str = "runs",
    rerun: Sequence[str] = (),
    max_retries: int = MAX_RETRIES,
    task: Callable[[Mapping[str, Any]], dict[str, Any]] = run_task,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run every spec not already in ``out/runs`` as a Ray task, saving each record as it returns.

    Returns all records (loaded and new) in ``specs`` order, and one message per failed run. ``rerun``
    names contenders whose runs on disk are ignored and replaced. ``task`` is what each Ray task runs
    (tests substitute a slower one to kill it mid-run).
    """
    from tqdm.auto import tqdm

    run_dir = Path(out) / "runs"
    records: dict[str, dict[str, Any]] = {}
    todo: list[RunSpec] = []
    for spec in {s.key: s for s in specs}.values():  # a spec listed twice runs once
        existing = None if spec.contender in rerun else load_run(run_dir / f"{spec.key}.json")
        if existing is not None:
            records[spec.key] = existing
        else:
            todo.append(spec)
    failures: list[str] = []
    if todo:
        import ray

        commit = git_commit()
        bar = tqdm(total=len(records) + len(todo), initial=len(records), desc=desc, unit="run",
                   disable=not progress, dynamic_ncols=True)
        with ray_session(address, workers, quiet=not progress):
            remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(task)
            pending = {remote.remote(spec.to_dict()): spec for spec in todo}
            try:
                while pending:
                    done, _ = ray.wait(list(pending), num_returns=1)
                    for ref in done:
                        spec = pending.pop(ref)
                        try:
                            record = ray.get(ref)
                        except Exception as err:  # this run only; the others go on
                            trace = "".join(traceback.format_exception(err))
                            failures.append(f"{spec.key}: {err!r}\n{trace}")
                        else:
                            record["git_commit"] = commit
                            write_atomically(run_dir / f"{spec.key}.json", json.dumps(record, indent=1))
                            records[spec.key] = record
                        bar.set_postfix_str(f"{spec.contender} s{spec.seed}", refresh=False)
                        bar.update(1)
            except KeyboardInterrupt:
                for ref in pending:
                    ray.cancel(ref, force=True)
                bar.close()
                print(f"\ninterrupted: {len(records)} finished runs are in {run_dir}; the same command "
                      "resumes with the rest", file=sys.stderr)
                raise
            finally:
                bar.close()
    return [records[s.key] for s in specs if s.key in records], failures
