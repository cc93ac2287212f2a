"""What a policy is to the agents that train it: the :class:`Policy` base, the :class:`CriticPolicy`
declaration of a learned critic, and the :class:`Loss` an update is given.

The trainer never hands a policy a gradient formula, and a policy imports nothing of the trainer: the
trainer builds the loss (for GRPO, :mod:`agents.grpo.update` from :mod:`agents.grpo.objective`) and passes
it to :meth:`Policy.update`, as verl's ``core_algos`` hands each loss its config. The policy computes the
log-probabilities, calls the loss, and chains the gradients it returns through its own parameters (the
tabular policy by hand, the torch policies by autograd).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from agents.policies.sampling import apply_mask, sample_categorical

__all__ = ["CriticPolicy", "GradLogp", "GradVpred", "Loss", "LossFn", "Policy", "UpdateStats"]


class GradLogp(Protocol):
    """What a loss returns to the policy: the trainer's own numbers (the policy hands them back in
    :class:`UpdateStats` untouched), among them ``grad_logp`` (T,), d loss / d logp of each taken token."""

    @property
    def grad_logp(self) -> np.ndarray: ...


class GradVpred(Protocol):
    """What a value loss returns to the critic: the trainer's numbers, among them ``grad_vpred`` (T,),
    d loss / d V of each token's state."""

    @property
    def grad_vpred(self) -> np.ndarray: ...


TermsT = TypeVar("TermsT", bound=GradLogp)
ValueTermsT = TypeVar("ValueTermsT", bound=GradVpred)

#: ``loss_fn(logp) -> terms``: the loss of the taken tokens' (T,) log-probabilities.
LossFn = Callable[[np.ndarray], TermsT]


@dataclass(frozen=True)
class Loss(Generic[TermsT]):
    """The loss one :meth:`Policy.update` step minimises, built by the trainer.

    * ``fn(logp) -> terms``: ``logp`` (T,) the log-probabilities of the taken tokens (float64, under the
      update's masks); ``terms.grad_logp`` (T,) is d loss / d logp.
    * ``logits_grad(logp_all) -> (T, V)``, optional: for a term that reads each token's whole
      distribution (an entropy bonus), its gradient with respect to the logits given the (T, V)
      log-softmax rows (-inf where masked), added to what flows through ``logp``; None: the loss reads
      the taken tokens' log-probabilities only.
    """

    fn: Callable[[np.ndarray], TermsT]
    logits_grad: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass(frozen=True)
class UpdateStats(Generic[TermsT]):
    terms: TermsT  # what the loss returned
    entropy: float  # mean policy entropy over the update's valid tokens (nats)


class Policy(abc.ABC):
    """A stochastic policy over ``Discrete(n)`` actions, trained by :class:`agents.grpo.GRPO`.

    A policy declares on its class what the agent needs to know about it: ``preset`` (the
    :data:`agents.grpo.PRESETS` entry whose values fill the config fields left unset),
    ``token_observation`` (it reads the token context: an env id is made with
    ``observation="tokens"``), ``uses_torch`` (a checkpoint saves its torch optimiser state),
    :meth:`build` (how the agent constructs it) and, when it serves a learned critic,
    :class:`CriticPolicy` among its bases. Register it by name with
    :func:`agents.policies.register_policy`, or pass the class as ``policy=``.
    """

    kind: str
    n_actions: int
    #: the config preset of this policy (:meth:`agents.grpo.GRPOConfig.resolve`)
    preset: ClassVar[str] = "paper"
    #: whether the policy reads the token context (``observation="tokens"``) rather than features
    token_observation: ClassVar[bool] = False
    #: whether the policy has a torch optimiser (``optimizer_state``) that checkpoints save
    uses_torch: ClassVar[bool] = False
    #: the step size when the config leaves ``learning_rate`` unset (and the preset too)
    default_learning_rate: ClassVar[float] = 3e-4

    @classmethod
    def build(cls, model: Any, policy_kwargs: dict[str, Any]) -> Policy:
        """The policy for the :class:`agents.grpo.GRPO` agent ``model`` (its ``observation_space``,
        ``n_actions``, resolved ``config`` and ``seed`` are set): by default
        ``cls(observation_space, n_actions, learning_rate, seed=seed, max_grad_norm=...,
        **policy_kwargs)``, the constructor of the torch policies."""
        lr = model.config.learning_rate
        return cls(model.observation_space, model.n_actions,  # type: ignore[call-arg]
                   cls.resolved_learning_rate(model.config) if lr is None else lr, seed=model.seed,
                   max_grad_norm=model.config.max_grad_norm, **policy_kwargs)

    @classmethod
    def resolved_learning_rate(cls, config: Any) -> float:
        """The step size this policy trains at when ``config.learning_rate`` is unset (also after the
        preset): ``default_learning_rate``. The agent writes it into its resolved config, so
        ``model.config.learning_rate`` is the step size that runs."""
        return cls.default_learning_rate

    @abc.abstractmethod
    def logits(self, obs: np.ndarray) -> np.ndarray:
        """(N, V) float64 logits for a batch of observations, without gradient bookkeeping."""

    @abc.abstractmethod
    def reference_logp(
        self, obs: np.ndarray, actions: np.ndarray, masks: np.ndarray | None = None
    ) -> np.ndarray:
        """(T,) log-probabilities of ``actions`` under the frozen reference policy (renormalised over
        the tokens ``masks`` (T, V) allows, when given)."""

    @abc.abstractmethod
    def update(self, obs: np.ndarray, actions: np.ndarray, loss: Loss[TermsT],
               masks: np.ndarray | None = None) -> UpdateStats[TermsT]:
        """One optimiser step on ``loss`` (:class:`Loss`): ``loss.fn(logp)`` with ``logp`` (T,) of
        ``actions``, plus ``loss.logits_grad`` at the logits when it is given. With ``masks`` (T, V),
        log-probs and entropies are those of the distribution restricted to the allowed tokens (masked
        tokens get no probability and no gradient)."""

    @abc.abstractmethod
    def num_parameters(self) -> int:
        """Trainable parameters."""

    @abc.abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """Arrays that fully describe the policy (weights, reference, optimiser), for checkpoints."""

    @abc.abstractmethod
    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore from :meth:`state`; raise ``ValueError`` on missing or mis-shaped arrays."""

    def observe(self, obs: np.ndarray) -> None:  # noqa: B027 - optional hook
        """Called on every batch of observations the rollout samples from (the table grows here)."""

    def predict(self, obs: np.ndarray, deterministic: bool, rng: np.random.Generator,
                masks: np.ndarray | None = None) -> np.ndarray:
        logits = apply_mask(self.logits(obs), masks)
        if deterministic:
            return logits.argmax(axis=-1).astype(np.int64)
        return sample_categorical(logits, rng)


class CriticPolicy(abc.ABC):
    """A policy that also serves a learned critic: what an advantage estimator with a value network
    (``advantage="gae"``) needs, declared on the class the agent types against (as SB3 declares the value
    head on the policy its algorithms use). A policy class lists it among its bases beside
    :class:`Policy`; the agent refuses a policy without it for such an estimator (a ``ValueError`` naming
    the policy). The torch policies implement it in :class:`agents.policies.torch_base.TorchPolicy`: the
    ``mlp`` and ``transformer`` policies declare it and give their value network (``_value_network``).
    """

    @abc.abstractmethod
    def init_critic(self, learning_rate: float | None = None) -> None:
        """Start the critic (and its optimiser, of step size ``learning_rate``; None: the policy's own)."""

    @abc.abstractmethod
    def values(self, obs: np.ndarray, actions: np.ndarray, keep: bool = False) -> tuple[np.ndarray, Any]:
        """(T,) float64 V(s) of each token row (``actions`` (T,) the tokens taken from them), and with
        ``keep`` a handle on this forward pass that :meth:`update_critic` may take back while the critic
        is unchanged (None otherwise, or when the policy keeps none)."""

    @abc.abstractmethod
    def update_critic(self, obs: np.ndarray, actions: np.ndarray,
                      loss_fn: Callable[[np.ndarray], ValueTermsT], vpreds: Any = None) -> ValueTermsT:
        """One critic step on ``loss_fn(vpreds)`` of the (T,) value predictions of the token rows, whose
        ``grad_vpred`` (T,) the critic chains through its parameters; ``vpreds``: the kept pass of
        :meth:`values` over exactly these rows, or None. Returns what ``loss_fn`` returned."""
