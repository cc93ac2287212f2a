"""The GRPO agent. ``python -m agents.grpo`` trains it from the shell (see ``agents/grpo/__main__.py``)."""

from agents.config import GRPOConfig
from agents.grpo.agent import GRPO

__all__ = ["GRPO", "GRPOConfig"]
