"""The mix's env ids, registered through :func:`rlvr_env.register_envs` when ``rlvr_env`` is imported:

* ``rlvr/Mix-v0``: members by registered task name, ``tasks={"countdown": {"n_numbers": 3}, "digits": {},
  "arithmetic": {}}`` (that is the default), and ``weights`` (default equal);
* ``rlvr/CountdownMix-v0``: Countdown-3, Digits and Arithmetic, weights 0.5 / 0.25 / 0.25; its other
  keywords are Countdown's (``n_numbers=4``);
* ``rlvr/CountdownThinkMix-v0``: the thinking Countdown-3 (``rlvr/CountdownThink-v0``'s task), Digits and
  Arithmetic, weights 0.5 / 0.25 / 0.25; its other keywords are the thinking task's (``calculator=True``).

    >>> import gymnasium as gym, rlvr_env
    >>> env = gym.make("rlvr/CountdownThinkMix-v0", calculator=True, observation="tokens")
    >>> env.unwrapped.task.names, env.unwrapped.task.members["countdown_think"].calculator
    (('countdown_think', 'digits', 'arithmetic'), True)

Every keyword the env takes (``observation``, ``split``, ...) goes to the env, as for every id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvr_env.registration import register_envs
from rlvr_env.tasks.mix.task import MixTask
from rlvr_env.tasks.registry import register_task

__all__ = ["COUNTDOWN_MIX_WEIGHTS", "DEFAULT_TASKS", "countdown_mix", "countdown_think_mix", "mix_task"]

#: ``rlvr/Mix-v0``'s members when ``tasks`` is not given.
DEFAULT_TASKS: dict[str, dict[str, Any]] = {"countdown": {"n_numbers": 3}, "digits": {}, "arithmetic": {}}
#: The Countdown mixes' weights: half Countdown, a quarter each of the two short arithmetic tasks.
COUNTDOWN_MIX_WEIGHTS = {"digits": 0.25, "arithmetic": 0.25}


def mix_task(tasks: Mapping[str, Mapping[str, Any] | None] | None = None,
             weights: Mapping[str, float] | None = None) -> MixTask:
    """The task of ``rlvr/Mix-v0``: ``tasks`` maps registered task names to their keywords (None: ``{}``)."""
    if tasks is None:
        tasks = DEFAULT_TASKS
    if not isinstance(tasks, Mapping):
        raise ValueError(f"tasks={tasks!r:.120} must map registered task names to their keywords, e.g. "
                         "{'countdown': {'n_numbers': 3}, 'digits': {}}")
    members: dict[str, Mapping[str, Any]] = {}
    for name, keywords in tasks.items():
        if keywords is not None and not isinstance(keywords, Mapping):
            raise ValueError(f"tasks[{name!r}]={keywords!r:.80} must be a dict of the task's keywords")
        members[name] = dict(keywords or {})
    return MixTask(members, weights)


def countdown_mix(weights: Mapping[str, float] | None = None, **countdown: Any) -> MixTask:
    """The task of ``rlvr/CountdownMix-v0``: Countdown (``n_numbers=3`` unless given), Digits, Arithmetic."""
    members = {"countdown": {"n_numbers": 3, **countdown}, "digits": {}, "arithmetic": {}}
    return MixTask(members, weights if weights is not None else {"countdown": 0.5, **COUNTDOWN_MIX_WEIGHTS})


def countdown_think_mix(weights: Mapping[str, float] | None = None, **think: Any) -> MixTask:
    """The task of ``rlvr/CountdownThinkMix-v0``: the thinking Countdown (``n_numbers=3`` unless given; its
    keywords such as ``calculator``), Digits, Arithmetic."""
    members = {"countdown_think": {"n_numbers": 3, **think}, "digits": {}, "arithmetic": {}}
    default = {"countdown_think": 0.5, **COUNTDOWN_MIX_WEIGHTS}
    return MixTask(members, weights if weights is not None else default)


register_envs("rlvr/Mix-v0", mix_task)
register_envs("rlvr/CountdownMix-v0", countdown_mix)
register_envs("rlvr/CountdownThinkMix-v0", countdown_think_mix)
register_task(MixTask.name, MixTask)
