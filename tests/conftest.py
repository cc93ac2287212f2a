"""Test-session set-up: one torch thread (the machine is shared; tiny nets gain nothing from more), and
nothing written outside pytest's temporary folders.

Stable-Baselines3 makes a logger folder for every ``learn()`` of a model that has no logger set: in
``$SB3_LOGDIR``, else a new ``SB3-<date>`` folder in the system temp folder (``stable_baselines3.common.
logger.configure``), one per run, left behind. The session points ``SB3_LOGDIR`` into pytest's own
temporary folder (subprocesses and Ray workers inherit it), and every test fails that still makes an
``SB3-*`` folder in the system temp folder from this process (an audit hook sees each ``os.mkdir``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

try:
    import torch
except ImportError:  # pragma: no cover - torch comes with stable-baselines3
    pass
else:
    torch.set_num_threads(1)

_SYSTEM_TEMP = os.path.realpath(tempfile.gettempdir())
#: SB3-* folders this process made directly in the system temp folder (the audit hook appends)
_SB3_FOLDERS_MADE: list[str] = []


def _watch_sb3_folders(event: str, args: tuple) -> None:
    if event != "os.mkdir":
        return
    path = os.fsdecode(args[0])
    if os.path.basename(path).startswith("SB3-") and os.path.realpath(os.path.dirname(path)) == _SYSTEM_TEMP:
        _SB3_FOLDERS_MADE.append(path)


sys.addaudithook(_watch_sb3_folders)


@pytest.fixture(scope="session", autouse=True)
def _sb3_logs_in_pytest_temp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``SB3_LOGDIR`` for the whole session: SB3 loggers made without a folder write under pytest's
    temporary folder instead of leaving ``SB3-<date>`` folders in the system temp folder."""
    folder = tmp_path_factory.mktemp("sb3-logs")
    old = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop("SB3_LOGDIR", None)
        else:
            os.environ["SB3_LOGDIR"] = old


@pytest.fixture(autouse=True)
def _no_sb3_folders_in_system_temp() -> Iterator[None]:
    """Fails the test that made an ``SB3-*`` folder in the system temp folder (and names the folders)."""
    before = len(_SB3_FOLDERS_MADE)
    yield
    made = _SB3_FOLDERS_MADE[before:]
    if made:
        pytest.fail(
            f"this test made {len(made)} SB3 logger folder(s) in the system temp folder {_SYSTEM_TEMP}: "
            f"{made[:3]}; give the SB3 model a logger or a folder under tmp_path (SB3_LOGDIR is "
            "set for the session, so something cleared it or passed the temp folder itself)",
            pytrace=False,
        )
