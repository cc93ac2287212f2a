"""The neural GRPO policy: exactly the actor of SB3 PPO's default ``MlpPolicy`` (no critic, except the
value network ``advantage="gae"`` adds, :mod:`agents.policies.torch_base`).

SB3's ``ActorCriticPolicy`` with default arguments is: observation preprocessing (Box: cast to float;
Discrete: one-hot) -> ``FlattenExtractor`` -> policy MLP ``[64, 64]`` with ``Tanh`` -> ``action_net``
Linear(64, n_actions), orthogonally initialised with gains sqrt(2) (MLP) and 0.01 (action head), trained
with Adam(eps=1e-5). We rebuild that actor here, so a GRPO-vs-PPO comparison differs only in
"group baseline" vs "learned critic". ``tests/test_agents.py`` checks the parameter count against
SB3's own actor.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from agents.extras import missing_extra
from agents.policies.protocol import CriticPolicy
from agents.policies.torch_base import TorchPolicy

try:
    import torch
    from torch import nn
except ImportError as err:  # installed without the torch extra: the tabular policy still works
    raise missing_extra("the mlp policy (agents.policies.mlp)", "torch") from err

__all__ = ["MLPPolicy"]


class MLPPolicy(TorchPolicy, CriticPolicy):
    """SB3 PPO's actor (``net_arch=[64, 64]``, Tanh, orthogonal init) trained by GRPO; with
    ``advantage="gae"`` its critic is a copy of the network with a value head (:meth:`_value_network`)."""

    kind = "mlp"
    preset = "mlp"

    def __init__(
        self,
        observation_space: gym.Space,
        n_actions: int,
        learning_rate: float,
        *,
        seed: int,
        max_grad_norm: float | None = 0.5,
        net_arch: Sequence[int] = (64, 64),
        activation: str = "tanh",
    ) -> None:
        if isinstance(observation_space, gym.spaces.Discrete):
            self._one_hot: int | None = int(observation_space.n)
            in_dim = self._one_hot
        elif isinstance(observation_space, gym.spaces.Box):
            self._one_hot = None
            in_dim = int(np.prod(observation_space.shape))
        else:
            raise ValueError(
                f"the mlp policy takes Box or Discrete observations, not {observation_space}"
            )
        acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
        if activation not in acts:
            raise ValueError(f"activation={activation!r} is not one of {sorted(acts)}")
        if not net_arch or any(int(h) < 1 for h in net_arch):
            raise ValueError(f"net_arch={list(net_arch)!r} must be a non-empty list of positive widths")
        self.n_actions = n_actions
        self.net_arch = tuple(int(h) for h in net_arch)
        self.activation = activation
        self.max_grad_norm = max_grad_norm

        layers: list[nn.Module] = []
        last = in_dim
        for width in self.net_arch:
            layers += [nn.Linear(last, width), acts[activation]()]
            last = width
        self.net = nn.Sequential(*layers, nn.Linear(last, n_actions)).double()
        gen = torch.Generator().manual_seed(int(seed))
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        for module in linears[:-1]:
            nn.init.orthogonal_(module.weight, gain=math.sqrt(2), generator=gen)
            nn.init.zeros_(module.bias)
        head = linears[-1]
        nn.init.orthogonal_(head.weight, gain=0.01, generator=gen)
        nn.init.zeros_(head.bias)
        # float64 keeps the NumPy objective and torch in one precision (the nets are tiny).
        self.reference = copy.deepcopy(self.net).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=learning_rate, eps=1e-5)
        self._act = {"tanh": torch.tanh, "relu": torch.relu}[activation]

    def _forward(self, net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
        """``net(x)`` with the same kernels (``Linear.forward`` is ``F.linear``, ``Tanh.forward``
        ``torch.tanh``, ``ReLU.forward`` ``torch.relu``) without the module-call overhead, which on
        these tiny nets is a large part of a rollout step's forward."""
        linears: list[nn.Linear] = [m for m in net if isinstance(m, nn.Linear)]
        for linear in linears[:-1]:
            x = self._act(nn.functional.linear(x, linear.weight, linear.bias))
        return nn.functional.linear(x, linears[-1].weight, linears[-1].bias)

    def _input(self, obs: np.ndarray) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(obs))
        if self._one_hot is not None:
            return nn.functional.one_hot(x.reshape(-1).long(), self._one_hot).double()
        return x.reshape(x.shape[0], -1).double()

    def network_logits(self, net: nn.Module, obs: np.ndarray, actions: np.ndarray | None) -> torch.Tensor:
        return self._forward(net, self._input(obs))  # type: ignore[arg-type]

    def _value_network(self) -> nn.Sequential:
        """The network with its action head replaced by a zero-initialised value head (SB3 PPO's critic
        is a separate MLP of the same shape with a one-output head; ours starts from the actor's
        hidden layers, module docstring of :mod:`agents.policies.torch_base`)."""
        critic = copy.deepcopy(self.net)
        last = critic[-1]
        assert isinstance(last, nn.Linear)
        head = nn.Linear(last.in_features, 1).double()
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)
        critic[-1] = head
        return critic
