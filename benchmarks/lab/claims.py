"""Every claim of the lab, in the order the table lists them (one module per claim)."""

from __future__ import annotations

from benchmarks.lab import dapo, dr_grpo, gmpo, gspo, high_entropy, kimi, kl, passk, sapo
from benchmarks.lab.base import Claim

__all__ = ["CLAIMS"]

CLAIMS: dict[str, Claim] = {m.CLAIM.name: m.CLAIM
                            for m in (dr_grpo, dapo, gspo, kimi, kl, sapo, gmpo, passk, high_entropy)}
