"""Countdown with room to think: a reasoning trace, a calculator the env runs, the answer after them."""

from rlvr_env.tasks.think.task import DEFAULT_MAX_LENGTH, ThinkTask

__all__ = ["DEFAULT_MAX_LENGTH", "ThinkTask"]
