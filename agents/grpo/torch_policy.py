"""What the torch policies (``mlp``, ``transformer``) share: parameters, arrays and optimiser state for
checkpoints, and the learned critic of ``advantage="gae"``. Each subclass holds ``self.net`` (trained),
``self.reference`` (the frozen KL reference) and ``self.optimizer``, and names itself in ``kind`` for
error messages.

The critic (:meth:`TorchPolicy.init_critic`) is a separate value network started from the policy's
current weights: a copy of the policy's network whose action head is replaced by a one-output value head
(zero weights and bias, so it starts predicting 0 everywhere), trained by its own Adam optimiser. LLM
PPO starts its critic the same way, as a separate model initialised from the policy or the reward model
(Ouyang et al. 2022; verl's critic is its own model loaded from ``critic.model.path``). docs/agent.md
says why a separate network and not a value head on the policy's trunk.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from agents.extras import missing_extra
from agents.grpo.policies import Policy
from agents.grpo.value import ValueLossTerms

try:
    import torch
except ImportError as err:  # installed without the torch extra: the tabular policy still works
    raise missing_extra("the neural policies (agents.grpo.torch_policy)", "torch") from err

__all__ = ["TorchPolicy"]


class TorchPolicy(Policy):
    """A :class:`Policy` whose network and reference are torch modules (checkpoint arrays ``net.*`` and
    ``ref.*``; the optimiser's state is saved beside them by :mod:`agents.grpo.checkpoint`)."""

    kind = "torch"
    net: torch.nn.Module
    reference: torch.nn.Module
    optimizer: torch.optim.Optimizer
    max_grad_norm: float | None
    #: the value network of ``advantage="gae"`` (None without one) and its own optimiser
    critic: torch.nn.Module | None = None
    critic_optimizer: torch.optim.Optimizer | None = None

    # -- the critic (advantage="gae") -------------------------------------------------------------
    def _value_network(self) -> torch.nn.Module:
        """A copy of ``self.net`` with its action head replaced by a zero-initialised one-output head."""
        raise NotImplementedError(f"the {self.kind} policy has no value network")

    def _critic_forward(self, obs: np.ndarray, actions: np.ndarray) -> torch.Tensor:
        """(T,) the critic's values of the token rows ``obs`` (T, ...) (``actions`` (T,) chain the rows of
        one answer, as the policy's teacher-forced pass reads them)."""
        raise NotImplementedError(f"the {self.kind} policy has no value network")

    def init_critic(self, learning_rate: float) -> None:
        """Start the critic from the policy's current weights (module docstring), with a fresh Adam
        (eps 1e-5, as the policy's) of step size ``learning_rate``."""
        self.critic = self._value_network().requires_grad_(True)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=learning_rate, eps=1e-5)

    def values(self, obs: np.ndarray, actions: np.ndarray, keep: bool = False
               ) -> tuple[np.ndarray, torch.Tensor | None]:
        """(T,) float64 V(s) of each token row: the critic's values when a batch is collected, which
        GAE and the value clip read. With ``keep``, also the (T,) predictions with their autograd graph,
        which :meth:`update_critic` can take as its forward pass while the critic is unchanged (one
        pass instead of two when the first critic step covers exactly these rows); else None."""
        if self.critic is None:
            raise ValueError(f"the {self.kind} policy has no critic: it is made by advantage='gae'")
        if keep:
            vpreds = self._critic_forward(obs, actions)
            return vpreds.detach().double().numpy(), vpreds
        with torch.inference_mode():
            return self._critic_forward(obs, actions).double().numpy(), None

    def update_critic(self, obs: np.ndarray, actions: np.ndarray,
                      loss_fn: Callable[[np.ndarray], ValueLossTerms],
                      vpreds: torch.Tensor | None = None) -> ValueLossTerms:
        """One critic step on ``loss_fn(vpreds)`` (:func:`agents.grpo.value.clipped_value_loss` of the
        (T,) predictions), chained through the critic by autograd as the policy's loss is; the
        gradient norm is clipped at ``max_grad_norm`` as the policy's (verl clips both). ``vpreds``:
        the kept forward pass of these rows from :meth:`values` (only valid before any critic step)."""
        if self.critic is None or self.critic_optimizer is None:
            raise ValueError(f"the {self.kind} policy has no critic: it is made by advantage='gae'")
        if vpreds is None:
            vpreds = self._critic_forward(obs, actions)  # (T,)
        terms = loss_fn(vpreds.detach().double().numpy())
        self.critic_optimizer.zero_grad()
        vpreds.backward(torch.as_tensor(terms.grad_vpred.reshape(-1), dtype=vpreds.dtype))
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_grad_norm)
        self.critic_optimizer.step()
        return terms

    def restart_from_current(self) -> None:
        """Make the current network the frozen KL reference and restart the RL optimiser (what the
        cold start does before RL, as DeepSeek-R1 starts RL from its SFT checkpoint); a critic is
        started again from the current network too, as LLM PPO starts its value model from the
        fine-tuned policy, with a fresh optimiser of the same step size."""
        self.reference = copy.deepcopy(self.net).requires_grad_(False)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr, eps=1e-5)
        if self.critic is not None and self.critic_optimizer is not None:
            self.init_critic(self.critic_optimizer.param_groups[0]["lr"])
        self._loaded()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.net.parameters() if p.requires_grad)

    def state(self) -> dict[str, np.ndarray]:
        out = {f"net.{k}": v.detach().numpy().copy() for k, v in self.net.state_dict().items()}
        out.update({f"ref.{k}": v.numpy().copy() for k, v in self.reference.state_dict().items()})
        if self.critic is not None:
            out.update({f"critic.{k}": v.detach().numpy().copy()
                        for k, v in self.critic.state_dict().items()})
        return out

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def critic_optimizer_state(self) -> dict | None:
        return None if self.critic_optimizer is None else self.critic_optimizer.state_dict()

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        modules = [("net.", self.net), ("ref.", self.reference)]
        if self.critic is not None:
            modules.append(("critic.", self.critic))
        for prefix, module in modules:
            expected = module.state_dict()
            for k, v in expected.items():
                arr = arrays.get(prefix + k)
                if arr is None:
                    raise ValueError(f"{self.kind} policy state lacks the array {prefix + k!r}")
                if tuple(arr.shape) != tuple(v.shape) or not np.all(np.isfinite(arr)):
                    raise ValueError(
                        f"array {prefix + k!r} has shape {arr.shape}; expected {tuple(v.shape)} "
                        "with finite values"
                    )
            module.load_state_dict({k: torch.as_tensor(arrays[prefix + k]) for k in expected})
        self._loaded()

    def _loaded(self) -> None:
        """Called after :meth:`load_state` (a subclass drops what it cached from the old weights)."""
