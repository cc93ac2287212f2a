"""Tasks by name: what the language-model bridges build from a name (``make_dataset("countdown")``,
a verl row's ``data_source="rlvr/<name>"``). A task class joins it through
:func:`rlvr_env.register_envs` (or :func:`register_task`, beside a registration of its own); the families
of the package join when ``rlvr_env`` is imported."""

from __future__ import annotations

from rlvr_env.tasks.base import Task

__all__ = ["TASKS", "register_task"]

#: Task names and the class each builds (called with the task's keyword arguments).
TASKS: dict[str, type[Task]] = {}


def register_task(name: str, cls: type[Task]) -> None:
    """Make ``cls`` buildable by ``name``; ``ValueError`` for a name taken by another class."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"task name {name!r} must be a non-empty string")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"task class {cls!r} must be a subclass of rlvr_env.Task")
    if TASKS.get(name, cls) is not cls:
        raise ValueError(f"task name {name!r} is taken by {TASKS[name].__name__}")
    TASKS[name] = cls
