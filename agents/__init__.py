"""Agents that train on rlvr_env (and on any Discrete-action Gymnasium env): a generic GRPO agent.

``from agents import GRPO, GRPOConfig``. Importing this package does not import torch; the "mlp"
policy and SB3's logger import it when they are used.
"""

from agents.config import GRPOConfig
from agents.grpo.agent import GRPO

__all__ = ["GRPO", "GRPOConfig"]
