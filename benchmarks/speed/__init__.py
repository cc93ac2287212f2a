"""The speed measurements, one CLI: ``python -m benchmarks.speed <name> [args]``.

=================  =====================================================================================
``env``            steps per second of one env, Arithmetic and Countdown (``results/env_speed.md``)
``vector``         the native vector env against Gymnasium's, and the batch verifier (``vector_speed.md``)
``goals``          the speed targets side by side (``speed_goals.md``)
``throughput``     training env steps per second, GRPO and SB3 PPO (``throughput.md``)
``profile_grpo``   where a GRPO iteration spends its time (``profile_grpo.md``)
``r1``             the R1 study's arms' speed in one process (``results/r1/speed.md``)
``recipe``         the README's R1 command end to end, timed from outside (``results/r1/recipe.md``)
``think``          the thinking env's arms' speed, and TRL at trace length (``results/think/speed.md``)
=================  =====================================================================================

Each is a module of this package with its own ``main(argv)``; ``python -m benchmarks.speed <name> --help``
prints its options. A measurement is not a study on the executor: it times one process on purpose.
What several measurements share (arms taking turns, TRL's side) is in :mod:`benchmarks.speed.side_by_side`.
"""

from __future__ import annotations

#: The CLI name of each measurement and its module in this package.
MEASUREMENTS = {"env": "env", "vector": "vector", "goals": "goals", "throughput": "throughput",
                "profile_grpo": "profile_grpo", "r1": "r1", "recipe": "recipe", "think": "think"}
#: Modules of this package that are not measurements: code the measurements share.
SHARED = ("side_by_side",)

__all__ = ["MEASUREMENTS", "SHARED"]
