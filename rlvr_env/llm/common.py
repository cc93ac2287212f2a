"""Tasks by name, and the seeded prompt sets every bridge draws from (the env's train / held-out split)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvr_env.tasks.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import Prompt, Task, check_split
from rlvr_env.tasks.countdown import CountdownTask

__all__ = ["TASKS", "make_task", "resolve_task", "sample_prompts", "task_spec", "DEFAULT_COUNTDOWN_SIZE"]

#: Task names the bridges know, and the class each builds.
TASKS: dict[str, type[Task]] = {"countdown": CountdownTask, "arithmetic": ArithmeticTask}
#: Prompts drawn when a Countdown set's size is not given (the family is unbounded).
DEFAULT_COUNTDOWN_SIZE = 1000


def make_task(name: str = "countdown", **kwargs: Any) -> Task:
    """Build a task by name: ``"countdown"`` (keyword arguments as :class:`rlvr_env.CountdownEnv`'s
    task arguments: ``n_numbers``, ``number_range``, ...) or ``"arithmetic"`` (no arguments)."""
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
    """The task's name and grammar as plain JSON values (what ground truths and task data carry)."""
    g = task.grammar
    return {
        "task": task.name,
        "operators": "".join(o for o in "+-*/" if o in g.operators),
        "parentheses": bool(g.parentheses),
        "number_use": g.number_use,
        "integer_division": bool(g.integer_division),
    }


def sample_prompts(task: Task, split: str = "train", size: int | None = None, seed: int = 0) -> list[Prompt]:
    """``size`` prompts of ``split``, drawn with ``numpy.random.default_rng(seed)``; the same arguments
    always give the same list.

    A finite task (Arithmetic) with ``size=None`` gives every prompt of the split, in order; with a
    size, prompts are drawn as the env's ``reset`` draws them (uniformly, with repetition). Countdown
    draws ``size`` prompts (default :data:`DEFAULT_COUNTDOWN_SIZE`) with the env's generator, so
    every prompt is solvable and belongs to ``split`` by the env's multiset rule.
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
    if isinstance(task, CountdownTask):
        k = DEFAULT_COUNTDOWN_SIZE if size is None else int(size)
        numbers, targets, _ = task.sample_arrays(rng, split, k)
        return [Prompt(tuple(int(x) for x in row), int(t))
                for row, t in zip(numbers.tolist(), targets.tolist())]
    if size is None:
        raise ValueError(f"task {task.name!r} has no finite prompt list; give a size")
    return [task.sample_prompt(rng, split) for _ in range(int(size))]
