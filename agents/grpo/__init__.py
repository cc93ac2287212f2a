"""The GRPO agent and everything it is made of: ``config`` (GRPOConfig), ``objective`` (the loss as
pure functions), ``rollout`` (groups of episodes), ``policies`` (Policy, the tabular policy), ``mlp``
(the torch policy), ``agent`` (the GRPO class), ``checkpoint`` (save/load), ``hooks`` (callbacks and
the group hook), ``logging`` (SB3's logger). ``python -m agents.grpo`` trains it from the shell (see
``agents/grpo/__main__.py``)."""

from agents.grpo.agent import GRPO
from agents.grpo.config import GRPOConfig
from agents.grpo.hooks import GroupEvent

__all__ = ["GRPO", "GRPOConfig", "GroupEvent"]
