"""Tasks by name: what the language-model bridges build from a name (``make_dataset("countdown")``,
a verl row's ``data_source="rlvr/<name>"``). A new task registers here once, beside its
``gymnasium.register`` call."""

from __future__ import annotations

from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import Task
from rlvr_env.tasks.countdown.task import CountdownTask

__all__ = ["TASKS", "register_task"]

#: Task names and the class each builds (called with the task's keyword arguments).
TASKS: dict[str, type[Task]] = {"countdown": CountdownTask, "arithmetic": ArithmeticTask}


def register_task(name: str, cls: type[Task]) -> None:
    """Make ``cls`` buildable by ``name``; ``ValueError`` for a name taken by another class."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"task name {name!r} must be a non-empty string")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"task class {cls!r} must be a subclass of rlvr_env.Task")
    if TASKS.get(name, cls) is not cls:
        raise ValueError(f"task name {name!r} is taken by {TASKS[name].__name__}")
    TASKS[name] = cls
