"""rlvr_env's exact, safe verifiers as rewards where language models are trained.

- :mod:`rlvr_env.llm.trl_rewards`: reward functions with TRL ``GRPOTrainer``'s signature (one per reward part,
  plus the group-level k1.5 length term) and :func:`make_dataset`, a ``datasets.Dataset`` of prompts.
- :mod:`rlvr_env.llm.verl_reward`: ``compute_score`` for verl's custom reward function, and its rows.
- :mod:`rlvr_env.llm.vf_taskset`: ``verifiers`` tasksets (``vf.load_environment`` ids
  ``rlvr_env_countdown`` and ``rlvr_env_arithmetic``).
- :mod:`rlvr_env.llm.tools`: the thinking env's calculator as a tool function (TRL ``tools=[...]``).

The answer extraction policy is :mod:`rlvr_env.completions`. Nothing here imports trl, transformers,
datasets or verifiers until a function needs it (``pip install ".[llm]"`` in a clone brings them).
"""

from __future__ import annotations

from rlvr_env.llm.common import TASKS, make_task, sample_prompts, task_spec
from rlvr_env.llm.trl_rewards import (
    AccuracyReward,
    FormatReward,
    LengthReward,
    make_dataset,
    reward_functions,
)
from rlvr_env.llm.tools import calculator, make_calculator
from rlvr_env.llm.verl_reward import compute_score, ground_truth, verl_rows

__all__ = [
    "TASKS",
    "calculator",
    "AccuracyReward",
    "FormatReward",
    "LengthReward",
    "compute_score",
    "ground_truth",
    "make_calculator",
    "make_dataset",
    "make_task",
    "reward_functions",
    "sample_prompts",
    "task_spec",
    "verl_rows",
]
