"""``rlvr/CountdownThink-v0``: Countdown answered with a reasoning trace, then the expression
(:class:`~rlvr_env.tasks.think.task.ThinkTask` has the rules), registered through
:func:`rlvr_env.register_envs` when ``rlvr_env`` is imported.

    >>> import gymnasium as gym, rlvr_env
    >>> env = gym.make("rlvr/CountdownThink-v0", n_numbers=3, calculator=True, observation="tokens")

Keywords: Countdown's settings (``n_numbers``, ``number_range``, ...; its expression cap ``max_length``
is not one of them), ``calculator`` (the env writes each step's result), ``pool_masks`` (the mask keeps
each step's operands in the pool), ``max_length`` (the
transcript's cap, the calculator's tokens included), ``solution_style`` (what a cold start is shown),
and the env keywords every id takes (``observation``: ``"features"``, Countdown's prompt bits and the
transcript one-hot, or ``"tokens"``, the token context).
"""

from __future__ import annotations

from rlvr_env.registration import register_envs
from rlvr_env.tasks.registry import register_task
from rlvr_env.tasks.think.task import ThinkTask

__all__ = ["ENV_ID"]

ENV_ID = "rlvr/CountdownThink-v0"

register_envs(ENV_ID, ThinkTask)
register_task(ThinkTask.name, ThinkTask)
