"""The R1 recipe whole: four stages on one policy over a task mix (docs/stages.md).

DeepSeek-R1's pipeline (Guo et al. 2025, section 2.3) has four stages; this runs all four on one small
transformer over a task mix (:mod:`rlvr_env.tasks.mix`: a reasoning task and other skills sharing one
vocabulary and token context):

1. **cold start**: supervised fine-tuning on solutions of every task of the mix (:func:`agents.sft.cold_start`);
2. **reasoning RL**: GRPO on the reasoning task alone (the same env with the other tasks' weights at 0,
   so the spaces are the mix's);
3. **rejection sampling + SFT**: sample ``k`` answers per reasoning train prompt from the stage-2 model,
   keep what the verifier pays (deduplicated, capped per prompt), fine-tune on them re-mixed with the
   other tasks' solutions at a stated ratio (:mod:`agents.rejection`);
4. **RL for all scenarios**: a second GRPO pass over the whole mix.

After each stage every task is evaluated on held-out prompts (greedy, sampled = mean@k, pass@k) and the
stage's cost is recorded (answers sampled, policy tokens, CPU seconds); train-split prompts are scored
too, since a task's held-out split can ask something else (Digits holds out longer operands: length
generalisation), where retention of the trained skill shows on the train split. Two side arms answer the lab's
questions within the same run: **rejection sampling from the base** (stage 3's step applied to the
stage-1 base with as many sampled answers as stage 2's GRPO used: RS-FT vs GRPO at equal answers) and
**stage 3 without re-mixing** (what the re-mix protects).

:func:`stages_run` is one seed's run (a run function of :mod:`benchmarks.core.executor`);
``python -m benchmarks.stages`` runs one seed in this process with a table after each stage, or a study
over seeds on Ray (``--seeds``) that regenerates its tables and plot from stored runs.
"""

from __future__ import annotations

from typing import Any

from benchmarks.stages.run import DEFAULT_SPEC, SIDE_ARMS, STAGES, evaluate_tasks, stage_table, stages_run

__all__ = ["DEFAULT_SPEC", "STAGES", "SIDE_ARMS", "build_parser", "evaluate_tasks", "main", "stage_table",
           "stages_run"]


def build_parser() -> Any:
    """The command's argument parser (its module is the package's ``__main__``)."""
    from benchmarks.stages.__main__ import build_parser as command_parser

    return command_parser()


def main(argv: list[str] | None = None) -> int:
    """The command: one seed here, or the study."""
    from benchmarks.stages.__main__ import main as command_main

    return command_main(argv)
