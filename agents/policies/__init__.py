"""Policies an agent can train, a package of their own (it imports nothing of ``agents.grpo``): what a
policy is (``protocol``: :class:`Policy`, :class:`CriticPolicy`, the :class:`Loss` an update is given,
:class:`UpdateStats`), the NumPy side every policy and the rollout share (``sampling``), the lesson's
table (``tabular``), what the torch policies share (``torch_base``, including the learned critic), the
torch MLP (``mlp``) and causal transformer (``transformer``), and policies by name (``registry``).

Importing this package does not import torch: the torch policies are in their own modules
(``agents.policies.torch_base``, ``agents.policies.mlp``, ``agents.policies.transformer``), and the
registry imports them when their name is first asked for. docs/agent.md, "Add a policy architecture",
says how a policy of yours joins.
"""

from agents.policies.protocol import CriticPolicy, GradLogp, GradVpred, Loss, LossFn, Policy, UpdateStats
from agents.policies.registry import (
    MOVED_POLICY_PATHS,
    class_path,
    import_path,
    moved_policy_path,
    policy_class,
    policy_names,
    register_policy,
    registered_name,
)
from agents.policies.sampling import apply_mask, log_softmax, sample_categorical, sample_from_logp
from agents.policies.tabular import TABULAR_DEFAULT_LR, TabularPolicy, check_tabular_observations

__all__ = [
    "MOVED_POLICY_PATHS",
    "TABULAR_DEFAULT_LR",
    "CriticPolicy",
    "GradLogp",
    "GradVpred",
    "Loss",
    "LossFn",
    "Policy",
    "TabularPolicy",
    "UpdateStats",
    "apply_mask",
    "check_tabular_observations",
    "class_path",
    "import_path",
    "log_softmax",
    "moved_policy_path",
    "policy_class",
    "policy_names",
    "register_policy",
    "registered_name",
    "sample_categorical",
    "sample_from_logp",
]
