"""One registration call for a task: its token env, native vector env and text env under Gymnasium ids.

:func:`register_envs` is what ``docs/add-a-task.md`` means by "one registration": given a task class (or
any callable that builds a :class:`~rlvr_env.tasks.base.Task` from keyword arguments), it registers

* ``env_id`` for ``gym.make`` (a :class:`~rlvr_env.envs.TokenEnv`) and for ``gym.make_vec(...,
  vectorization_mode="vector_entry_point")`` (a :class:`~rlvr_env.vector.TokenVectorEnv`);
* ``text_id``, when given, for the one-step text env (:class:`~rlvr_env.text_env.TextEnv`);
* a task class under its ``name`` in :data:`rlvr_env.tasks.registry.TASKS`, which the language-model
  bridges build tasks from (``rlvr_env.llm.make_dataset("digits")``, a verl row's ``"rlvr/digits"``).

The keyword arguments of ``gym.make`` are split by name: the env's own (``split``, ``accuracy_weight``,
``format_weight``, ``render_mode``, ``observation``, and the vector / text env's) go to the env, every
other one to the task's constructor, which refuses what it does not know (so a task parameter may not
share a name with an env keyword: :func:`register_envs` refuses such a task). The factories are module-level
functions bound with :func:`functools.partial`, so a spec pickles (subprocess vector envs, Ray workers).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

from gymnasium.envs.registration import register, registry

from rlvr_env.envs import TokenEnv
from rlvr_env.tasks.base import Task
from rlvr_env.tasks.registry import register_task
from rlvr_env.text_env import TextEnv
from rlvr_env.vector import TokenVectorEnv

__all__ = ["register_envs", "make_token_env", "make_vector_env", "make_text_env"]

TaskFactory = Callable[..., Task[Any]]


def _env_keywords(cls: type) -> frozenset[str]:
    """The keyword parameters of ``cls.__init__`` other than the task (and ``num_envs``)."""
    names = inspect.signature(cls.__init__).parameters
    return frozenset(n for n in names if n not in ("self", "task", "num_envs"))


def _split_kwargs(cls: type, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    own = _env_keywords(cls)
    env = {k: v for k, v in kwargs.items() if k in own}
    task = {k: v for k, v in kwargs.items() if k not in own}
    return env, task


def make_token_env(task: TaskFactory, **kwargs: Any) -> TokenEnv:
    """A :class:`TokenEnv` over ``task(**task_kwargs)``; ``kwargs`` are split as the module says."""
    env_kwargs, task_kwargs = _split_kwargs(TokenEnv, kwargs)
    return TokenEnv(task(**task_kwargs), **env_kwargs)


def make_vector_env(task: TaskFactory, num_envs: int = 1, **kwargs: Any) -> TokenVectorEnv:
    """A :class:`TokenVectorEnv` of ``num_envs`` rows over ``task(**task_kwargs)``."""
    env_kwargs, task_kwargs = _split_kwargs(TokenVectorEnv, kwargs)
    return TokenVectorEnv(task(**task_kwargs), num_envs, **env_kwargs)


def make_text_env(task: TaskFactory, **kwargs: Any) -> TextEnv:
    """A :class:`TextEnv` over ``task(**task_kwargs)``."""
    env_kwargs, task_kwargs = _split_kwargs(TextEnv, kwargs)
    return TextEnv(task(**task_kwargs), **env_kwargs)


def register_envs(env_id: str, task: TaskFactory, *, text_id: str | None = None) -> None:
    """Register ``task``'s token env (single and native vector) as ``env_id``, with ``text_id`` its text
    env, and a task class under its ``name`` for the language-model bridges. An id that is already
    registered is left as it is (re-importing must not warn); a task name taken by another class is a
    ``ValueError``."""
    if not callable(task):
        raise ValueError(f"task={task!r} must be a Task class or a callable that returns a Task")
    try:
        params = set(inspect.signature(task).parameters)
    except (TypeError, ValueError):  # a callable without a signature: nothing to check
        params = set()
    env_keywords = _env_keywords(TokenEnv) | _env_keywords(TokenVectorEnv) | _env_keywords(TextEnv)
    clash = sorted(params & env_keywords)
    if clash:
        raise ValueError(f"task {task!r} takes {clash}, which are env keywords "
                         "(gym.make passes them to the env, never to the task); rename them")
    for name, value in (("env_id", env_id), ("text_id", text_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name}={value!r} must be a non-empty Gymnasium id such as 'me/MyTask-v0'")
    if env_id not in registry:
        register(id=env_id, entry_point=partial(make_token_env, task),  # type: ignore[arg-type]
                 vector_entry_point=partial(make_vector_env, task))
    if text_id is not None and text_id not in registry:
        register(id=text_id, entry_point=partial(make_text_env, task))  # type: ignore[arg-type]
    if isinstance(task, type) and issubclass(task, Task):
        register_task(task.name, task)
