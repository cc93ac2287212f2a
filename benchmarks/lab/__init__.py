"""The GRPO lab (issue 11 item 3): published claims about GRPO's variants, each as a small seeded
experiment on ``rlvr/Countdown-v0`` (N = 3 numbers, grammar masks), the result stated whatever it is.

    python -m benchmarks.lab [--claim NAME[,NAME]] [--seeds 100-107] [--budget-scale 1.0] [--workers 2]
                             [--ray-address HOST:6379] [--out DIR | --update-results]

Claims (``--claim``; every arm of a claim runs on the same seeds, so arms are compared seed by seed):

* ``dr_grpo`` (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783): dividing each
  answer's token sum by its own length (``seq_mean_token_mean``) makes *wrong* answers grow longer
  during training; a constant normaliser (``seq_mean_token_sum``) does not. And the std in GRPO's
  advantage weights too-easy and too-hard prompts up (measured on the groups of these runs).
* ``dapo`` (Yu et al. 2025, arXiv 2503.14476, sections 3.1-3.2): symmetric clipping collapses entropy;
  clip-higher keeps it and learns faster; dynamic sampling reaches a given success in fewer policy
  updates (at the price of more env steps, counted).
* ``gspo`` (Zheng et al. 2025, arXiv 2507.18071): a sequence-level ratio is more stable than the
  token-level one when each batch is reused for more epochs (higher mu).
* ``kimi`` (Kimi k1.5, arXiv 2501.12599, section 2.3.3): the length reward shortens correct answers
  without costing accuracy.
* ``kl``: beta = 0 against the lesson's range (0.001-0.04), the KL reference being a behaviour-cloned
  warm start (``agents.bc.warm_start``, DeepSeek-R1's cold start).

Method. Every run is ``GRPO("rlvr/Countdown-v0", config, policy="mlp", seed=s)`` with the
:data:`ENV_KWARGS` below and the base configuration :data:`BASE` (the best Countdown setting the code
offers: the "countdown" preset when it exists, else the mlp one, and the "lookahead" observation when the
task has it) plus what the claim changes (one module per claim: ``dr_grpo``, ``dapo``, ``gspo``, ``kimi``,
``kl``).
Every arm x seed is one run of the executor (:mod:`benchmarks.core.executor`: embedded local Ray by
default, a cluster with ``--ray-address``); the run function (:func:`benchmarks.lab.runner.run_arm`, one
torch thread) keeps each iteration's logged metrics (``rollout/solve_rate``, ``train/entropy``,
``train/clip_frac``, ``train/kl``, ...) and observes each iteration's groups through the agent's public
group hook (``model.add_group_hook``): the lengths of correct and wrong answers and each group's rewards,
from which the advantage weights of both estimators are computed. After training the run is scored on
256 held-out prompts (greedy, sampled mean@8, pass@8, all under the grammar masks). Each run is one run
file of the store, ``<out>/runs/<settings hash>_seed<s>.json`` (key, fingerprint, checksum); a rerun
reuses a run whose file passes its checks, and arms of different claims with equal settings share runs.
The default output is ``benchmark-runs/lab/`` (git-ignored); ``--update-results`` writes the committed
``benchmarks/results/lab/``. Statistics: per-seed values, the IQM over seeds with a 95%
percentile-bootstrap interval (:mod:`benchmarks.core.stats`); differences between arms are paired by seed.
A verdict is "agree" when the interval of the claimed difference excludes zero on the claimed side,
"disagree" when it excludes zero on the other side, "inconclusive" otherwise. Settings (budgets,
thresholds) were chosen on seeds 0-1 (0-9 are kept for choosing); the reported seeds start at 100.
"""

from __future__ import annotations

from benchmarks.lab.base import (
    BASE,
    BASE_PRESET,
    BUDGET,
    ENV_ID,
    ENV_KWARGS,
    Arm,
    Claim,
    ci,
    first_reach,
    paired,
    per_seed,
    run_key,
    series,
    solve_auc,
    verdict,
    window_mean,
)
from benchmarks.lab.claims import CLAIMS
from benchmarks.lab.cli import analyse, build_parser, main, run_claims, stored_records
from benchmarks.lab.runner import run_arm, run_name, task_for

__all__ = [
    "Arm", "BASE", "BASE_PRESET", "BUDGET", "CLAIMS", "Claim", "ENV_ID", "ENV_KWARGS", "analyse",
    "build_parser", "ci", "first_reach", "main", "paired", "per_seed", "run_arm", "run_claims", "run_key",
    "run_name", "series", "solve_auc", "stored_records", "task_for", "verdict", "window_mean",
]
