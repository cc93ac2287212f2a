"""Tasks by name, and the seeded prompt sets every bridge draws from (the env's train / held-out split)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvr_env.tasks.base import Task, check_split
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.registry import TASKS
from rlvr_env.tasks.expression.verifier import Grammar

__all__ = ["TASKS", "make_task", "resolve_task", "sample_prompts", "task_spec", "grammar_spec",
           "DEFAULT_SIZE"]

#: Prompts drawn when the size of an unbounded task's set (Countdown's) is not given.
DEFAULT_SIZE = 1000


def make_task(name: str = "countdown", **kwargs: Any) -> Task:
    """Build a registered task by name (:data:`rlvr_env.tasks.registry.TASKS`): ``"countdown"``
    (keyword arguments: :class:`rlvr_env.tasks.countdown.settings.CountdownSettings`' fields),
    ``"arithmetic"`` (no arguments), or a task registered with :func:`rlvr_env.tasks.register_task`."""
    if name not in TASKS:
        raise ValueError(f"task {name!r} is not one of {sorted(TASKS)}")
    if name == "arithmetic" and kwargs:
        raise ValueError(f"the arithmetic task takes no arguments, got {sorted(kwargs)}")
    return TASKS[name](**kwargs)


def resolve_task(task: str | Task) -> Task:
    """A :class:`Task` instance, or a task name (built with its defaults)."""
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        return make_task(task)
    raise ValueError(f"task={task!r} must be a task name {sorted(TASKS)} or an rlvr_env Task")


def task_spec(task: Task) -> dict[str, Any]:
    """The task's name and, for an arithmetic task, its grammar as plain JSON values (what ground truths
    and task data carry)."""
    if not isinstance(task, ExpressionTask):
        return {"task": task.name}
    return {"task": task.name, **grammar_spec(task.grammar)}


def grammar_spec(grammar: Grammar) -> dict[str, Any]:
    """A grammar as plain JSON values: ``operators``, ``parentheses``, ``number_use`` and
    ``integer_division``."""
    return {
        "operators": "".join(o for o in "+-*/" if o in grammar.operators),
        "parentheses": bool(grammar.parentheses),
        "number_use": grammar.number_use,
        "integer_division": bool(grammar.integer_division),
    }


def sample_prompts(task: Task, split: str = "train", size: int | None = None, seed: int = 0) -> list[Any]:
    """``size`` prompts of ``split``, drawn with ``numpy.random.default_rng(seed)``; the same arguments
    always give the same list.

    A finite task (Arithmetic) with ``size=None`` gives every prompt of the split, in order; otherwise
    ``size`` prompts (default :data:`DEFAULT_SIZE` for an unbounded task) are drawn by the task's
    :meth:`~rlvr_env.Task.sample_prompts`, as the envs draw them (Countdown: every prompt solvable and
    in ``split`` by the env's multiset rule).
    """
    check_split(split)
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1):
        raise ValueError(f"size={size!r} must be a positive integer or None")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed={seed!r} must be an integer")
    rng = np.random.default_rng(int(seed))
    finite = task.prompts(split)
    if finite is not None and size is None:
        return list(finite)
    return list(task.sample_prompts(rng, split, DEFAULT_SIZE if size is None else int(size)))
