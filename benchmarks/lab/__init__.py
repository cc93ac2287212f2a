"""The GRPO lab: published claims about GRPO's variants, each a small seeded experiment on
``rlvr/Countdown-v0``, the result stated whatever it is, in one of two regimes (:mod:`benchmarks.lab.regime`:
the MLP from scratch, or the transformer from the R1 recipe's base). ``python -m benchmarks.lab --help`` (the
docstring of :mod:`benchmarks.lab.cli`) gives the claims, the method and the verdict rule."""


from __future__ import annotations

from benchmarks.lab.base import (
    BASE,
    BASE_PRESET,
    BUDGET,
    ENV_ID,
    ENV_KWARGS,
    NO_SIGNAL,
    Arm,
    Claim,
    ci,
    first_reach,
    paired,
    per_seed,
    run_key,
    series,
    single_answer_floor,
    solve_auc,
    verdict,
    window_mean,
)
from benchmarks.lab.claims import CLAIMS
from benchmarks.lab.cli import analyse, build_parser, claim_records, main, run_claims, stored_records
from benchmarks.lab.regime import REGIMES, Regime
from benchmarks.lab.runner import run_arm, run_name, run_for

__all__ = [
    "Arm", "BASE", "BASE_PRESET", "BUDGET", "CLAIMS", "Claim", "ENV_ID", "ENV_KWARGS", "NO_SIGNAL", "REGIMES",
    "Regime", "analyse",
    "build_parser", "ci", "claim_records", "first_reach", "main", "paired", "per_seed", "run_arm", "run_claims",
    "run_key", "run_name", "series", "single_answer_floor", "solve_auc", "stored_records", "run_for", "verdict",
    "window_mean",
]
