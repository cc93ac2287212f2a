"""Every claim of the lab, in the order the table lists them (one module per claim)."""

from __future__ import annotations

from benchmarks.lab import dapo, dr_grpo, gspo, kimi, kl
from benchmarks.lab.base import Claim

__all__ = ["CLAIMS"]

CLAIMS: dict[str, Claim] = {m.CLAIM.name: m.CLAIM for m in (dr_grpo, dapo, gspo, kimi, kl)}
