"""Prompt families (tasks) that the token-emission environment runs on: the contract (:mod:`.base`), the
tasks by name (:mod:`.registry`), and one package per family (:mod:`.expression`, :mod:`.countdown`;
:mod:`.digits` is one module)."""

from rlvr_env.tasks.base import SPLITS, ContextTokens, Task
from rlvr_env.tasks.registry import TASKS, register_task
from rlvr_env.tasks.expression import ArithmeticTask, ExpressionTask, Prompt
from rlvr_env.tasks.countdown import CountdownTask
from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask

__all__ = ["ArithmeticTask", "ContextTokens", "CountdownTask", "DigitsPrompt", "DigitsTask", "ExpressionTask",
           "Prompt", "SPLITS", "TASKS", "Task", "register_task"]
