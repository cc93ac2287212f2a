"""Prompt families (tasks) that the token-emission environment runs on."""

from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import SPLITS, BatchArrays, ContextTokens, Task
from rlvr_env.tasks.expression.prompt import Prompt
from rlvr_env.tasks.countdown.task import CountdownTask
from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.registry import TASKS, register_task

__all__ = ["ArithmeticTask", "BatchArrays", "ContextTokens", "CountdownTask", "DigitsPrompt", "DigitsTask",
           "ExpressionTask", "Prompt", "SPLITS", "TASKS", "Task", "register_task"]
