"""``rlvr/CountdownThink-v0``: Countdown answered with a reasoning trace, then the expression
(:class:`~rlvr_env.tasks.think.task.ThinkTask` has the rules), and ``rlvr/CountdownThinkText-v0``, its text
env (the completion is the transcript as text; with ``calculator=True`` a multi-turn
:class:`~rlvr_env.text_tool_env.TextToolEnv` that writes each step's result), registered through
:func:`rlvr_env.register_envs` when ``rlvr_env`` is imported.

    >>> import gymnasium as gym, rlvr_env
    >>> env = gym.make("rlvr/CountdownThink-v0", n_numbers=3, calculator=True, observation="tokens")

Keywords: Countdown's settings (``n_numbers``, ``number_range``, ...; its expression cap ``max_length``
is not one of them), ``calculator`` (the env writes each step's result), ``pool_masks`` (the mask keeps
each step's operands in the pool), ``max_length`` (the
transcript's cap, the calculator's tokens included), ``solution_style`` (what a cold start is shown),
and the env keywords every id takes (``observation``: ``"features"``, Countdown's prompt bits and the
transcript one-hot, or ``"tokens"``, the token context). The text id takes the text envs' keywords
(``answer_format``'s ``max_chars`` caps the transcript's characters) and, with the calculator, ``max_turns``.

    >>> text_env = gym.make("rlvr/CountdownThinkText-v0", n_numbers=3, calculator=True)
    >>> prompt_text, info = text_env.reset(options={"prompt": ((9, 1, 2), 8)})
    >>> text_env.step("<think> 9 - 1 =")[0]
    ' 8 ;'
    >>> _, reward, terminated, truncated, info = text_env.step(" </think> <answer> 9 - 1 </answer>")
    >>> reward, terminated, info["transcript"], info["env_spans"]
    (1.1, True, '<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>', [(15, 19)])
"""

from __future__ import annotations

from rlvr_env.registration import register_envs
from rlvr_env.tasks.registry import register_task
from rlvr_env.tasks.think.task import ThinkTask

__all__ = ["ENV_ID", "TEXT_ID"]

ENV_ID = "rlvr/CountdownThink-v0"
TEXT_ID = "rlvr/CountdownThinkText-v0"

register_envs(ENV_ID, ThinkTask, text_id=TEXT_ID)
register_task(ThinkTask.name, ThinkTask)
