"""What the torch policies (``mlp``, ``transformer``, and any registered one) share: the masked
log-softmax, the log-probabilities of sampled tokens (with gradient for the supervised fit, without for
the KL reference), the RL update, parameters, arrays and optimiser state for checkpoints, and the
learned critic of ``advantage="gae"``. A subclass holds ``self.net`` (trained), ``self.reference`` (the
frozen KL reference), ``self.optimizer`` and ``self.max_grad_norm``, names itself in ``kind`` for error
messages, and implements one method, :meth:`TorchPolicy.network_logits` (the (T, V) logits of token
rows under a network). A subclass that serves ``advantage="gae"`` also lists
:class:`agents.policies.CriticPolicy` among its bases (this class implements its methods) and gives
:meth:`TorchPolicy._value_network`.

The critic (:meth:`TorchPolicy.init_critic`) is a separate value network started from the policy's
current weights: a copy of the policy's network whose action head is replaced by a one-output value head
(zero weights and bias, so it starts predicting 0 everywhere), trained by its own Adam optimiser. LLM
PPO also keeps its critic as a separate model, started otherwise: InstructGPT (Ouyang et al. 2022) from
the reward model, verl from ``critic.model.path`` with a randomly drawn value head (docs/variants.md,
"The critic against verl"). docs/agent.md says why a separate network and not a value head on the
policy's trunk.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from agents.extras import missing_extra
from agents.policies.protocol import Loss, Policy, TermsT, UpdateStats, ValueTermsT

try:
    import torch
except ImportError as err:  # installed without the torch extra: the tabular policy still works
    raise missing_extra("the neural policies (agents.policies.torch_base)", "torch") from err

__all__ = ["TorchPolicy", "masked_log_softmax"]


def masked_log_softmax(logits: torch.Tensor, masks: np.ndarray | None) -> torch.Tensor:
    """log-softmax over the tokens ``masks`` allows (-inf elsewhere). ``masked_fill`` passes no gradient
    to masked logits, and every allowed token's log-prob is finite, so gradients stay finite."""
    if masks is None:
        return torch.log_softmax(logits, dim=-1)
    m = torch.as_tensor(np.asarray(masks, dtype=bool).reshape(logits.shape))
    if not bool(m.any(dim=-1).all()):
        raise ValueError("an action mask allows no token in some row; a mask must allow at least one")
    return torch.log_softmax(logits.masked_fill(~m, float("-inf")), dim=-1)


def _taken(logp_all: torch.Tensor, actions: np.ndarray) -> torch.Tensor:
    """(T,) the entries of (T, V) log-probabilities at the taken ``actions`` (T,)."""
    return logp_all[torch.arange(len(actions)), torch.as_tensor(np.asarray(actions))]


class TorchPolicy(Policy):
    """A :class:`Policy` whose network and reference are torch modules (checkpoint arrays ``net.*`` and
    ``ref.*``; the optimiser's state is saved beside them by :mod:`agents.grpo.checkpoint`).

    A subclass's constructor takes ``(observation_space, n_actions, learning_rate, *, seed,
    max_grad_norm, **policy_kwargs)`` (what :meth:`agents.policies.Policy.build` passes) and sets
    ``net``, ``reference``, ``optimizer`` and ``max_grad_norm``; it implements
    :meth:`network_logits`. Everything else (rollout logits, reference log-probs, the update, the
    supervised fit's log-probs, checkpoints, the critic) is here."""

    kind = "torch"
    uses_torch = True
    net: torch.nn.Module
    reference: torch.nn.Module
    optimizer: torch.optim.Optimizer
    max_grad_norm: float | None
    #: the value network of ``advantage="gae"`` (None without one) and its own optimiser
    critic: torch.nn.Module | None = None
    critic_optimizer: torch.optim.Optimizer | None = None

    # -- the one method a subclass implements ----------------------------------------------------
    def network_logits(self, net: torch.nn.Module, obs: np.ndarray, actions: np.ndarray | None
                       ) -> torch.Tensor:
        """(T, V) logits of the observation rows ``obs`` (T, ...) under ``net`` (``self.net``,
        ``self.reference`` or ``self.critic``, whose one output column is the value), with autograd.
        ``actions`` (T,) are the tokens taken from those rows (a sequence model reads a whole answer in
        one teacher-forced pass from them); None when only the logits are wanted."""
        raise NotImplementedError(f"the {self.kind} policy does not implement network_logits")

    # -- log-probabilities and the update (one implementation for every torch policy) ------------
    def logits(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.network_logits(self.net, obs, None).double().numpy()

    def log_prob(self, obs: np.ndarray, actions: np.ndarray, masks: np.ndarray | None = None
                 ) -> torch.Tensor:
        """(T,) log-probabilities of ``actions`` under the trained network, with gradient (renormalised
        over the tokens ``masks`` (T, V) allows, when given): what the supervised fit
        (:mod:`agents.supervised`) maximises."""
        return _taken(masked_log_softmax(self.network_logits(self.net, obs, actions), masks), actions)

    def reference_logp(self, obs: np.ndarray, actions: np.ndarray,
                       masks: np.ndarray | None = None) -> np.ndarray:
        with torch.inference_mode():
            logp_all = masked_log_softmax(self.network_logits(self.reference, obs, actions), masks)
            return _taken(logp_all, actions).double().numpy()

    def update(self, obs: np.ndarray, actions: np.ndarray, loss: Loss[TermsT],
               masks: np.ndarray | None = None) -> UpdateStats[TermsT]:
        self._drop_caches()  # the weights change: what was cached from them goes stale
        logits = self.network_logits(self.net, obs, actions)  # (T, V)
        logp_all = masked_log_softmax(logits, masks)  # (T, V); -inf where masked
        logp = _taken(logp_all, actions)  # (T,)
        terms = loss.fn(logp.detach().double().numpy())
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        for param in params:  # optimizer.zero_grad()'s default (set_to_none), minus its overhead
            param.grad = None
        # The loss's math lives in NumPy (the trainer's); autograd only chains its gradient with respect
        # to logp (and, for a term of the whole distribution such as an entropy bonus, the logits)
        # through the network.
        tensors = [logp]
        grads = [torch.as_tensor(terms.grad_logp.reshape(-1), dtype=logp.dtype)]
        if loss.logits_grad is not None:
            tensors.append(logits)
            grads.append(torch.as_tensor(loss.logits_grad(logp_all.detach().double().numpy()),
                                         dtype=logits.dtype))
        torch.autograd.backward(tensors, grads)
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():
            # Zero the -inf log-probs of masked tokens before the sum (0 * -inf is NaN).
            plogp = torch.where(torch.isfinite(logp_all), logp_all.exp() * logp_all, 0.0)
            entropy = float(-plogp.sum(-1).mean()) if len(actions) else 0.0
        return UpdateStats(terms, entropy)

    def parameters(self) -> list[torch.nn.Parameter]:
        """The trained network's trainable parameters (what the supervised fit's optimiser steps)."""
        return [p for p in self.net.parameters() if p.requires_grad]

    # -- the critic (advantage="gae"; agents.policies.CriticPolicy's methods) ------------------------
    def _value_network(self) -> torch.nn.Module:
        """A copy of ``self.net`` with its action head replaced by a zero-initialised one-output head."""
        raise NotImplementedError(f"the {self.kind} policy has no value network")

    def _critic_forward(self, obs: np.ndarray, actions: np.ndarray) -> torch.Tensor:
        """(T,) the critic's values of the token rows ``obs`` (T, ...) (``actions`` (T,) chain the rows of
        one answer, as the policy's teacher-forced pass reads them)."""
        assert self.critic is not None
        return self.network_logits(self.critic, obs, actions)[:, 0]

    def init_critic(self, learning_rate: float | None = None) -> None:
        """Start the critic from the policy's current weights (module docstring), with a fresh Adam
        (eps 1e-5, as the policy's) of step size ``learning_rate`` (None: the policy's step size)."""
        if learning_rate is None:  # one step size for both networks
            learning_rate = self.optimizer.param_groups[0]["lr"]
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
                      loss_fn: Callable[[np.ndarray], ValueTermsT],
                      vpreds: torch.Tensor | None = None) -> ValueTermsT:
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
        self._drop_caches()

    def reset_to_reference(self) -> None:
        """Put the frozen KL reference's weights back into the trained network: the start the current RL
        pass began from (the init, or the last :meth:`restart_from_current`, e.g. a cold start's fit).
        The RL optimiser restarts with it, since its moments belong to the weights left behind; the
        reference and a critic are untouched. What a fine-tune from the base (STaR) starts with."""
        self.net.load_state_dict(self.reference.state_dict())
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr, eps=1e-5)
        self._drop_caches()

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
        self._drop_caches()

    def _drop_caches(self) -> None:
        """Called whenever the weights change (an update, :meth:`load_state`, a restart): a subclass drops
        what it cached from the old weights (the transformer's KV cache)."""
