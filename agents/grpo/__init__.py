"""The GRPO agent and everything it is made of: ``config`` (GRPOConfig), ``objective`` (the loss as
pure functions; ``surrogates`` and ``advantages`` hold the registered loss variants and advantage
estimators), ``rollout`` (groups of episodes), ``policies`` (Policy, the tabular policy),
``torch_policy`` (what the torch policies share), ``mlp`` and ``transformer`` (the torch policies),
``registry`` (policies by name), ``agent`` (the GRPO class), ``checkpoint`` (save/load), ``hooks``
(callbacks and the group hook), ``logging`` (SB3's logger). ``python -m agents.grpo`` trains it from the
shell (see ``agents/grpo/__main__.py``). The three ``register_*`` functions are how a new policy, loss
variant or advantage estimator joins (docs/agent.md)."""

from agents.grpo.advantages import register_advantage
from agents.grpo.agent import GRPO, Advantages
from agents.grpo.config import GRPOConfig
from agents.grpo.hooks import GroupEvent
from agents.grpo.registry import register_policy
from agents.grpo.surrogates import register_policy_loss

__all__ = ["GRPO", "Advantages", "GRPOConfig", "GroupEvent", "register_advantage", "register_policy",
           "register_policy_loss"]
