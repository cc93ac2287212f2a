"""Connecting to Ray: an embedded local Ray by default, a cluster by address, failing fast when none answers.

:class:`ray_session` is the one way the benchmarks connect: an existing connection is reused, an address
(``--ray-address`` or ``RAY_ADDRESS``) joins a cluster after :func:`check_reachable` has seen a Ray head
answer there within :data:`CONNECT_TIMEOUT` seconds, and otherwise an isolated local Ray with ``workers``
CPUs is started (and shut down at the end). The executor (:mod:`benchmarks.core.executor`) and the
tuner use it; docs/cluster.md says how the head, the nodes and the driver share a token.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.core.common import ROOT, SetupError

__all__ = ["CONNECT_TIMEOUT", "BadAddress", "ClusterUnreachable", "check_reachable", "ray_session"]

#: Seconds to wait for a cluster address to answer before giving up.
CONNECT_TIMEOUT = 20.0


class ClusterUnreachable(SetupError, ConnectionError):
    """A ``--ray-address`` where no Ray head answers."""


class BadAddress(SetupError, ValueError):
    """A ``--ray-address`` that is not ``HOST:PORT``."""


#: The client's HTTP/2 connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5): a Ray head's
#: GCS speaks gRPC, so it answers with a SETTINGS frame of its own; anything else is not a Ray head.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A ``HOST:PORT`` address must accept a TCP connection and answer as a gRPC server (a Ray head's GCS)
    within ``timeout`` seconds in all, else a :class:`ClusterUnreachable` that says what to check (Ray
    itself would retry for many minutes)."""
    if address in ("auto", "local") or address.startswith(("ray://", "anyscale://")):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise BadAddress(f"--ray-address {address!r} must read HOST:PORT (the head's GCS port, 6379 by "
                         "default)")
    check = (f"Check that the head is up (`ray start --head --port={port}` on {host}, `ray status` there), "
             f"that this machine can reach {host}:{port} (firewall, VPN), and that the address is the head's "
             "GCS port")
    deadline = time.monotonic() + timeout
    try:
        conn = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as err:
        raise ClusterUnreachable(f"--ray-address {address}: nothing answers there within {timeout:.0f} s "
                                 f"({err}). {check}") from err
    reply = b""
    with conn:
        try:
            conn.sendall(_H2_HELLO)
            while len(reply) < 9:
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = conn.recv(64)
                if not chunk:
                    break
                reply += chunk
        except OSError:  # a timeout or a reset: judged by what arrived
            pass
    if len(reply) >= 9 and reply[3] == _SETTINGS:
        return
    said = f"it answered {reply[:32]!r}" if reply else f"it said nothing within {timeout:.0f} s"
    raise ClusterUnreachable(f"--ray-address {address}: something listens there but it is not a Ray head "
                             f"(a Ray head's GCS speaks gRPC; {said}). {check}")


def _auth_mode_for(address: str | None) -> None:
    """Set ``RAY_AUTH_MODE`` for the driver before Ray reads it, unless the user set it.

    ``ray start --head`` turns token authentication on when a token exists (``~/.ray/auth_token``, which
    every local ``ray.init`` of Ray 2.60 creates), but a driver given an explicit address does not: it then
    fails with ``AuthenticationError``. So with an address, the token is used when one is there, as ``ray
    start`` does. A new local Ray turns token authentication on by itself and logs a warning saying so
    (into the progress bar); setting the same mode first keeps it quiet. Ray caches its configuration when
    it is imported, so when it already is, the cache is refreshed, as Ray's own token set-up does."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    if address not in (None, "local"):
        has_token = bool(os.environ.get("RAY_AUTH_TOKEN")) or Path(os.environ.get(
            "RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token")).is_file()
        if not has_token:
            return
    os.environ["RAY_AUTH_MODE"] = "token"
    raylet = sys.modules.get("ray._raylet")
    if raylet is not None:
        raylet.Config.initialize("")


class ray_session:  # noqa: N801 - used as a context manager, like open()
    """Connect to Ray: an existing connection is reused, ``address`` (or ``RAY_ADDRESS``) joins a
    cluster, otherwise an isolated local Ray with ``workers`` CPUs is started. Shuts down only what it
    started."""

    def __init__(self, address: str | None = None, workers: int | None = None, quiet: bool = False) -> None:
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.workers = workers
        self.quiet = quiet
        self.started = False
        self.dashboard_url: str | None = None

    def __enter__(self) -> ray_session:
        if self.address is not None:
            check_reachable(self.address)  # even when connected already: a dead address is a mistake
        import ray

        if not ray.is_initialized():
            _auth_mode_for(self.address)
            # One BLAS / OpenMP thread per worker, inherited by a local Ray's worker processes.
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                os.environ.setdefault(var, "1")
            kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": "warning"}
            if self.address is None:
                # "local": always a new cluster, never a `ray start` head found on the machine (joining
                # one forbids num_cpus, and its workers may run another checkout).
                kwargs.update(address="local", num_cpus=int(self.workers or os.cpu_count() or 1),
                              include_dashboard=None)  # a dashboard if ray[default] is installed
                # The workers import `benchmarks` from this checkout (pip installs only rlvr_env and
                # agents), whatever the driver's working directory.
                path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
                kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
            else:
                kwargs["address"] = self.address
            try:
                ctx = ray.init(**kwargs)
            except Exception as err:  # a join that fails is a set-up error, said in one line
                if self.address is None:
                    raise
                first = (str(err).strip().splitlines() or [""])[0]
                raise ClusterUnreachable(
                    f"--ray-address {self.address}: Ray could not join the cluster ({type(err).__name__}: "
                    f"{first}); docs/cluster.md says how the head, the nodes and this driver share a token"
                ) from err
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
