"""Agents that train on rlvr_env (and on any Discrete-action Gymnasium env): a generic GRPO agent.

``from agents import GRPO, GRPOConfig``. Importing this package does not import torch: the tabular
GRPO needs NumPy only, and the "mlp" policy and SB3's logger import torch where they are used (the
``torch`` extra, ``pip install ".[torch]"`` in a clone). Everything GRPO is made of is in
:mod:`agents.grpo`; the policies it trains are :mod:`agents.policies`.
"""

from agents.grpo import GRPO, GRPOConfig

__all__ = ["GRPO", "GRPOConfig"]
