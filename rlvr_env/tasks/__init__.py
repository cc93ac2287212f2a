"""Prompt families (tasks) that the token-emission environment runs on."""

from rlvr_env.tasks.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import SPLITS, Prompt, Task
from rlvr_env.tasks.countdown import CountdownTask

__all__ = ["ArithmeticTask", "CountdownTask", "Prompt", "SPLITS", "Task"]
