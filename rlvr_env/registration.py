"""One registration call for a task: its token env, native vector env and text env under Gymnasium ids.

:func:`register_envs` is what ``docs/add-a-task.md`` means by "one registration": given a task class (or
any callable that builds a :class:`~rlvr_env.tasks.base.Task` from keyword arguments), it registers

* ``env_id`` for ``gym.make`` (a :class:`~rlvr_env.envs.TokenEnv`) and for ``gym.make_vec(...,
  vectorization_mode="vector_entry_point")`` (a :class:`~rlvr_env.vector.TokenVectorEnv`);
* ``text_id``, when given, for the one-step text env (:class:`~rlvr_env.text_env.TextEnv`), or, for a task
  whose env writes tokens of its own (:attr:`~rlvr_env.Task.reply_after`, a calculator), the multi-turn
  :class:`~rlvr_env.text_tool_env.TextToolEnv`;
* a task class under its ``name`` in :data:`rlvr_env.tasks.registry.TASKS`, which the language-model
  bridges build tasks from (``rlvr_env.llm.make_dataset("digits")``, a verl row's ``"rlvr/digits"``).

The keyword arguments of ``gym.make`` are split by name: the env's own (``split``, ``accuracy_weight``,
``format_weight``, ``reward_weights``, ``render_mode``, ``observation``, and the vector / text env's) go to
the env, every other one to the task's constructor, which refuses what it does not know (so a task
parameter may not share a name with an env keyword: :func:`register_envs` refuses such a task). A family
whose keywords do not split by name alone (Countdown's ``observation`` names its features *or* the token
context) declares, once, a ``keywords`` function that rewrites them first (:data:`Keywords`); its env
aliases (``CountdownEnv``, ...) build through the same function (:func:`env_arguments`). The factories are
module-level functions bound with :func:`functools.partial`, so a spec pickles (subprocess vector envs,
Ray workers).
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
from rlvr_env.text_tool_env import TextToolEnv
from rlvr_env.vector import TokenVectorEnv

__all__ = ["Keywords", "env_arguments", "register_envs", "make_token_env", "make_vector_env", "make_text_env"]

TaskFactory = Callable[..., Task[Any]]
#: A family's keyword rewrite: ``keywords(kwargs, env_class)`` -> the kwargs to split, for an env class
#: (:class:`TokenEnv`, :class:`TokenVectorEnv` or :class:`TextEnv`) built with them.
Keywords = Callable[[dict[str, Any], type], dict[str, Any]]


def _env_keywords(cls: type) -> frozenset[str]:
    """The keyword parameters of ``cls.__init__`` other than the task (and ``num_envs``)."""
    names = inspect.signature(cls.__init__).parameters
    return frozenset(n for n in names if n not in ("self", "task", "num_envs"))


def _split_kwargs(cls: type, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    own = _env_keywords(cls)
    env = {k: v for k, v in kwargs.items() if k in own}
    task = {k: v for k, v in kwargs.items() if k not in own}
    return env, task


def env_arguments(cls: type, task: TaskFactory, keywords: Keywords | None,
                  kwargs: dict[str, Any]) -> tuple[Task[Any], dict[str, Any]]:
    """The task and the env keyword arguments that ``cls`` (:class:`TokenEnv`, :class:`TokenVectorEnv` or
    :class:`TextEnv`) is built with from the keyword arguments of ``gym.make``: rewritten by the family's
    ``keywords`` (if any), then split by name (the module docstring)."""
    if keywords is not None:
        kwargs = keywords(dict(kwargs), cls)
    env_kwargs, task_kwargs = _split_kwargs(cls, kwargs)
    return task(**task_kwargs), env_kwargs


def make_token_env(task: TaskFactory, keywords: Keywords | None = None, **kwargs: Any) -> TokenEnv:
    """A :class:`TokenEnv` over ``task(**task_kwargs)``; ``kwargs`` are split as the module says."""
    built, env_kwargs = env_arguments(TokenEnv, task, keywords, kwargs)
    return TokenEnv(built, **env_kwargs)


def make_vector_env(task: TaskFactory, keywords: Keywords | None = None, num_envs: int = 1,
                    **kwargs: Any) -> TokenVectorEnv:
    """A :class:`TokenVectorEnv` of ``num_envs`` rows over ``task(**task_kwargs)``."""
    built, env_kwargs = env_arguments(TokenVectorEnv, task, keywords, kwargs)
    return TokenVectorEnv(built, num_envs, **env_kwargs)


def make_text_env(task: TaskFactory, keywords: Keywords | None = None, **kwargs: Any) -> TextEnv:
    """A :class:`TextEnv` over ``task(**task_kwargs)``, or a :class:`TextToolEnv` when the task writes
    tokens of its own (its :attr:`~rlvr_env.Task.reply_after` is not empty), so the text env writes what
    the token env writes. ``max_turns`` is the multi-turn env's keyword only."""
    if keywords is not None:
        kwargs = keywords(dict(kwargs), TextEnv)
    env_kwargs, task_kwargs = _split_kwargs(TextToolEnv, kwargs)
    built = task(**task_kwargs)
    if built.reply_after:
        return TextToolEnv(built, **env_kwargs)
    extra = sorted(set(env_kwargs) - _env_keywords(TextEnv))
    if extra:
        raise ValueError(f"{extra} apply only to a task whose env writes tokens of its own (a tool); task "
                         f"{type(built).__name__} writes none")
    return TextEnv(built, **env_kwargs)


def register_envs(env_id: str, task: TaskFactory, *, text_id: str | None = None,
                  keywords: Keywords | None = None, envs: tuple[type, type, type] | None = None) -> None:
    """Register ``task``'s token env (single and native vector) as ``env_id``, with ``text_id`` its text
    env, and a task class under its ``name`` for the language-model bridges. ``keywords``: the family's
    keyword rewrite (:data:`Keywords`). ``envs``: the family's env aliases (subclasses of
    :class:`TokenEnv`, :class:`TokenVectorEnv` and :class:`TextEnv` built from keywords alone, through
    :func:`env_arguments` with the same ``task`` and ``keywords``), which the ids then build. An id
    that is already registered is left as it is (re-importing must not warn); a task name taken by
    another class is a ``ValueError``."""
    if not callable(task):
        raise ValueError(f"task={task!r} must be a Task class or a callable that returns a Task")
    try:
        params = set(inspect.signature(task).parameters)
    except (TypeError, ValueError):  # a callable without a signature: nothing to check
        params = set()
    env_keywords = _env_keywords(TokenEnv) | _env_keywords(TokenVectorEnv) | _env_keywords(TextToolEnv)
    clash = sorted(params & env_keywords) if keywords is None else []  # a rewrite may route any name
    if clash:
        raise ValueError(f"task {task!r} takes {clash}, which are env keywords "
                         "(gym.make passes them to the env, never to the task); rename them")
    for name, value in (("env_id", env_id), ("text_id", text_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name}={value!r} must be a non-empty Gymnasium id such as 'me/MyTask-v0'")
    if envs is not None:
        bases = (TokenEnv, TokenVectorEnv, TextEnv)
        if len(envs) != 3 or not all(isinstance(c, type) and issubclass(c, b) for c, b in zip(envs, bases)):
            raise ValueError(f"envs={envs!r} must be subclasses of (TokenEnv, TokenVectorEnv, TextEnv), "
                             "in that order")
        token, vector, text = envs
    else:
        token, vector, text = (partial(make_token_env, task, keywords),
                               partial(make_vector_env, task, keywords),
                               partial(make_text_env, task, keywords))
    if env_id not in registry:
        register(id=env_id, entry_point=token, vector_entry_point=vector)  # type: ignore[arg-type]
    if text_id is not None and text_id not in registry:
        register(id=text_id, entry_point=text)  # type: ignore[arg-type]
    if isinstance(task, type) and issubclass(task, Task):
        register_task(task.name, task)
