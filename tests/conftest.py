"""Test-session set-up: one torch thread (the machine is shared; tiny nets gain nothing from more)."""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

try:
    import torch
except ImportError:  # pragma: no cover - torch comes with stable-baselines3
    pass
else:
    torch.set_num_threads(1)
