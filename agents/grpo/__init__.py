"""The GRPO agent and everything it is made of: ``config`` (GRPOConfig; ``presets`` holds the named
presets, ``validation`` its checks), ``objective`` (the loss as pure functions; ``surrogates`` and
``advantages`` hold the registered loss variants and advantage estimators, ``value`` the critic's GAE and
value loss), ``rollout`` (groups of episodes), ``update`` (an iteration's advantages and its mu clipped
epochs, with the loss each policy step is given), ``build`` (what the constructor builds), ``agent`` (the
GRPO class), ``checkpoint`` (save/load), ``callbacks`` and ``hooks`` (callbacks and the group hook),
``profiling`` (the phase timer), ``logging`` (SB3's logger). The policies it trains are a package of their
own, :mod:`agents.policies`. ``python -m agents.grpo`` trains it from the shell (see
``agents/grpo/__main__.py``). The three ``register_*`` functions are how a new policy, loss variant or
advantage estimator joins (docs/agent.md).

This is the face the rest of the project imports (nothing outside ``agents.grpo`` imports one of its
modules): the agent, its config and presets, the registries, the group event, the phase timer, and the
vector group runner (``VectorGroupRunner``: groups of episodes collected from a vector env, for an
evaluation that needs each episode's length and statistics).
"""

from agents.grpo.advantages import register_advantage
from agents.grpo.agent import GRPO
from agents.grpo.config import COLD_START, PRESETS, UNSET, GRPOConfig
from agents.grpo.hooks import GroupEvent
from agents.grpo.objective import ADVANTAGE_ESTIMATORS, CRITIC_ESTIMATORS, POLICY_LOSSES
from agents.grpo.profiling import PHASES, PhaseTimer
from agents.grpo.rollout import VectorGroupRunner
from agents.grpo.surrogates import register_policy_loss
from agents.grpo.update import Advantages
from agents.policies import register_policy

__all__ = ["ADVANTAGE_ESTIMATORS", "COLD_START", "CRITIC_ESTIMATORS", "GRPO", "PHASES", "POLICY_LOSSES",
           "PRESETS", "UNSET", "Advantages", "GRPOConfig", "GroupEvent", "PhaseTimer", "VectorGroupRunner",
           "register_advantage", "register_policy", "register_policy_loss"]
