"""Policies the GRPO agent can train: the :class:`Policy` base, and the lesson's tabular softmax (NumPy
only). The torch policies build on this module (:mod:`agents.grpo.torch_policy`, :mod:`agents.grpo.mlp`,
:mod:`agents.grpo.transformer`), never the other way round; :mod:`agents.grpo.registry` names them all.

Both implement :class:`Policy`. The trainer never sees a gradient formula: it passes
``loss_fn(logp) -> LossTerms`` (from :mod:`agents.grpo.objective`) to :meth:`Policy.update`, and the policy
chains ``LossTerms.grad_logp`` through its own parameters.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from agents.grpo.objective import LossTerms, entropy_bonus

__all__ = [
    "Policy",
    "TabularPolicy",
    "UpdateStats",
    "log_softmax",
    "sample_categorical",
    "sample_from_logp",
    "apply_mask",
    "TABULAR_DEFAULT_LR",
    "check_tabular_observations",
]

LossFn = Callable[[np.ndarray], LossTerms]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax of (N, V) logits, stable for large values."""
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def apply_mask(logits: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
    """(N, V) logits with the tokens a mask forbids set to -inf (grammar-constrained decoding); the
    logits themselves when ``masks`` is None. Every row must allow at least one token."""
    if masks is None:
        return logits
    m = np.asarray(masks, dtype=bool).reshape(logits.shape)
    if not m.any(axis=-1).all():
        raise ValueError("an action mask allows no token in some row; a mask must allow at least one")
    return np.where(m, logits, -np.inf)


def sample_categorical(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of (N, V) logits with ``rng`` (inverse CDF; one uniform per row)."""
    return sample_from_logp(log_softmax(logits), rng)


def sample_from_logp(logp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`sample_categorical` given the rows' ``log_softmax`` (N, V) already (the rollout needs them
    for the sampled tokens' log-probs too, so it computes them once)."""
    cdf = np.cumsum(np.exp(logp), axis=-1)  # (N, V)
    u = rng.random((logp.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), logp.shape[-1] - 1).astype(np.int64)


@dataclass(frozen=True)
class UpdateStats:
    terms: LossTerms
    entropy: float  # mean policy entropy over the update's valid tokens (nats)


class Policy(abc.ABC):
    """A stochastic policy over ``Discrete(n)`` actions, trained by :class:`agents.grpo.GRPO`.

    A policy declares on its class what the agent needs to know about it: ``preset`` (the
    :data:`agents.grpo.config.PRESETS` entry whose values fill the config fields left unset),
    ``token_observation`` (it reads the token context: an env id is made with
    ``observation="tokens"``), ``uses_torch`` (a checkpoint saves its torch optimiser state) and
    :meth:`build` (how the agent constructs it). Register it by name with
    :func:`agents.grpo.registry.register_policy`, or pass the class as ``policy=``.
    """

    kind: str
    n_actions: int
    #: the config preset of this policy (:meth:`agents.grpo.config.GRPOConfig.resolve`)
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
    def update(self, obs: np.ndarray, actions: np.ndarray, loss_fn: LossFn,
               entropy_weights: np.ndarray | None = None,
               masks: np.ndarray | None = None) -> UpdateStats:
        """One optimiser step on the loss ``loss_fn(logp)``, with ``logp`` (T,) of ``actions``, minus
        the entropy bonus ``sum_t entropy_weights[t] * H_t`` when ``entropy_weights`` (T,) is given
        (:func:`agents.grpo.objective.entropy_bonus` supplies its value and logit gradient). With ``masks``
        (T, V), log-probs and entropies are those of the distribution restricted to the allowed tokens
        (masked tokens get no probability and no gradient)."""

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


def _entropy(logp_all: np.ndarray) -> float:
    # Masked tokens have logp = -inf and p = 0; their term is 0 (0 * -inf would be NaN).
    terms = np.exp(logp_all) * np.where(np.isfinite(logp_all), logp_all, 0.0)
    return float(-terms.sum(axis=-1).mean()) if logp_all.size else 0.0


class _Adam:
    """Adam (Kingma & Ba 2015) for a NumPy array that can grow rows; torch's defaults."""

    def __init__(self, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.m = np.zeros((0, 0))
        self.v = np.zeros((0, 0))
        self.t = 0

    def step(self, param: np.ndarray, grad: np.ndarray) -> None:
        if self.m.shape != param.shape:  # rows were added: their moments start at zero
            m, v = np.zeros_like(param), np.zeros_like(param)
            rows = min(self.m.shape[0], param.shape[0])
            if self.m.size:
                m[:rows], v[:rows] = self.m[:rows], self.v[:rows]
            self.m, self.v = m, v
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad**2
        m_hat = self.m / (1 - self.b1**self.t)
        v_hat = self.v / (1 - self.b2**self.t)
        param -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


class _SGD:
    """Plain gradient descent: keeps the objective's scale (Adam would renormalise every row's step)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.m = np.zeros((0, 0))
        self.v = np.zeros((0, 0))
        self.t = 0

    def step(self, param: np.ndarray, grad: np.ndarray) -> None:
        self.t += 1
        param -= self.lr * grad


#: Default step sizes of the tabular optimisers (see GRPOConfig.learning_rate).
TABULAR_DEFAULT_LR = {"sgd": 300.0, "adam": 0.1}
_TABULAR_OPTIMIZERS: dict[str, type[_Adam] | type[_SGD]] = {"adam": _Adam, "sgd": _SGD}


class TabularPolicy(Policy):
    """The lesson's policy: a softmax over a table of logits, one row per distinct (abstracted) state.

    Rows are keyed by the bytes of selected observation features: by default the whole observation;
    on an ``rlvr_env`` env, the segments named by the task's ``tabular_segments`` (target and answer
    prefix on Arithmetic). Rows start at zero logits (uniform), which is also the frozen reference
    policy, so the KL anchor pulls every row back toward uniform. An unseen state at ``predict`` time
    gets the uniform row (greedy: token 0). NumPy only: no torch at import or run time.
    """

    kind = "tabular"
    preset = "tabular"

    @classmethod
    def build(cls, model: Any, policy_kwargs: dict[str, Any]) -> TabularPolicy:
        """Refuses envs a table cannot learn (:func:`check_tabular_observations`); keys rows on the
        agent's ``feature_slices``; the step size is the config's, else its optimiser's default
        (:data:`TABULAR_DEFAULT_LR`)."""
        if policy_kwargs:
            raise ValueError(f"the tabular policy takes no policy_kwargs, got {sorted(policy_kwargs)}")
        check_tabular_observations(model.env)
        optimizer = model.config.tabular_optimizer
        lr = model.config.learning_rate
        if lr is None:
            lr = cls.resolved_learning_rate(model.config)
        return cls(model.observation_space, model.n_actions, lr, model.feature_slices, optimizer=optimizer)

    @classmethod
    def resolved_learning_rate(cls, config: Any) -> float:
        """The default step size of the config's ``tabular_optimizer`` (:data:`TABULAR_DEFAULT_LR`)."""
        return TABULAR_DEFAULT_LR[config.tabular_optimizer]

    def __init__(
        self,
        observation_space: gym.Space,
        n_actions: int,
        learning_rate: float,
        feature_slices: Sequence[slice] | None = None,
        optimizer: str = "sgd",
    ) -> None:
        if optimizer not in _TABULAR_OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r} is not one of {sorted(_TABULAR_OPTIMIZERS)}")
        self.n_actions = n_actions
        self.learning_rate = learning_rate
        self.feature_slices = tuple(feature_slices) if feature_slices else None
        self._discrete_obs = isinstance(observation_space, gym.spaces.Discrete)
        self.table = np.zeros((0, n_actions))  # (S, V) logits
        self._rows: dict[bytes, int] = {}
        self._key_dim: int | None = None
        self._adam = _TABULAR_OPTIMIZERS[optimizer](learning_rate)

    # -- state keys ------------------------------------------------------------------------------
    def _features(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs)
        if self._discrete_obs:
            return x.reshape(-1, 1).astype(np.int64)
        x = x.reshape(x.shape[0], -1)
        if self.feature_slices is not None:
            x = np.concatenate([x[:, s] for s in self.feature_slices], axis=1)
        return np.ascontiguousarray(x)

    def _row_ids(self, obs: np.ndarray, insert: bool) -> np.ndarray:
        """(N,) row of each observation; -1 for an unseen state when ``insert`` is False.

        The Python loop runs over the *distinct* states of the batch (``np.unique``), not over its rows.
        """
        x = self._features(obs)
        if self._key_dim is None:
            self._key_dim = x.shape[1] * x.itemsize
        keys = x.view(np.dtype((np.void, x.shape[1] * x.itemsize))).reshape(-1)
        uniq, inverse = np.unique(keys, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        new = 0
        for j, key in enumerate(uniq):
            kb = key.tobytes()
            row = self._rows.get(kb)
            if row is None and insert:
                row = self._rows[kb] = len(self._rows)
                new += 1
            ids[j] = -1 if row is None else row
        if new:
            self.table = np.vstack([self.table, np.zeros((new, self.n_actions))])
        return ids[inverse.reshape(-1)]

    # -- Policy API ------------------------------------------------------------------------------
    def observe(self, obs: np.ndarray) -> None:
        self._row_ids(obs, insert=True)

    def logits(self, obs: np.ndarray) -> np.ndarray:
        rows = self._row_ids(obs, insert=False)
        out = np.zeros((len(rows), self.n_actions))
        known = rows >= 0
        out[known] = self.table[rows[known]]
        return out

    def reference_logp(
        self, obs: np.ndarray, actions: np.ndarray, masks: np.ndarray | None = None
    ) -> np.ndarray:
        # The reference is the initial table: all-zero logits, i.e. uniform (over the allowed tokens).
        if masks is None:
            return np.full(len(actions), -np.log(self.n_actions))
        return -np.log(np.asarray(masks, dtype=bool).reshape(len(actions), -1).sum(axis=-1).astype(float))

    def update(self, obs: np.ndarray, actions: np.ndarray, loss_fn: LossFn,
               entropy_weights: np.ndarray | None = None,
               masks: np.ndarray | None = None) -> UpdateStats:
        rows = self._row_ids(obs, insert=True)  # (T,)
        logp_all = log_softmax(apply_mask(self.table[rows], masks))  # (T, V); -inf where masked
        logp = logp_all[np.arange(len(rows)), actions]  # (T,)
        terms = loss_fn(logp)
        g = terms.grad_logp.reshape(-1)  # (T,) d loss / d logp
        # d logp[a] / d logits = onehot(a) - softmax(logits); accumulate per table row.
        grad = np.zeros_like(self.table)
        np.add.at(grad, (rows, actions), g)
        np.add.at(grad, rows, -g[:, None] * np.exp(logp_all))
        if entropy_weights is not None:  # the loss subtracts the bonus: minus its logit gradient
            _, d_bonus = entropy_bonus(logp_all, entropy_weights)
            np.add.at(grad, rows, -d_bonus)
        self._adam.step(self.table, grad)
        return UpdateStats(terms, _entropy(logp_all))

    def num_parameters(self) -> int:
        return int(self.table.size)

    def state(self) -> dict[str, np.ndarray]:
        keys = list(self._rows)  # insertion order == row order
        width = self._key_dim or 0
        key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), width)
        return {
            "table": self.table.copy(),
            "keys": key_arr,
            "adam_m": self._adam.m.copy(),
            "adam_v": self._adam.v.copy(),
            "adam_t": np.array(self._adam.t),
        }

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        for name in ("table", "keys", "adam_m", "adam_v", "adam_t"):
            if name not in arrays:
                raise ValueError(f"tabular policy state lacks the array {name!r}")
        table, keys = arrays["table"], arrays["keys"]
        if table.ndim != 2 or table.shape[1] != self.n_actions or not np.all(np.isfinite(table)):
            raise ValueError(
                f"table of shape {table.shape} does not fit {self.n_actions} actions or is not finite"
            )
        if keys.ndim != 2 or keys.dtype != np.uint8 or keys.shape[0] != table.shape[0]:
            raise ValueError(f"keys of shape {keys.shape} do not match a table of {table.shape[0]} rows")
        self.table = table.astype(np.float64).copy()
        self._rows = {keys[i].tobytes(): i for i in range(keys.shape[0])}
        self._key_dim = keys.shape[1] if keys.shape[0] else None
        self._adam.m = np.asarray(arrays["adam_m"], dtype=np.float64).copy()
        self._adam.v = np.asarray(arrays["adam_v"], dtype=np.float64).copy()
        self._adam.t = int(arrays["adam_t"])


def check_tabular_observations(env: gym.Env) -> None:
    """Refuse (``ValueError``) or warn about envs a lookup table cannot learn.

    * An ``rlvr_env`` task without ``tabular_segments`` keys its rows on the whole observation, prompt
      included, so what a row learns on one prompt never carries over to another. When the task draws
      its prompts from an unbounded set (``task.prompts(split)`` is None, e.g. Countdown's held-out
      number sets; a finite task says it is one by listing them there) the table cannot even cover the
      train prompts: refused, naming both ways out (``prompts(split)``, ``tabular_segments``). A finite
      task is only warned about (held-out prompts meet unseen rows, which act uniformly).
    * Any other env: the observation space must be discrete (``Discrete``, ``MultiDiscrete``,
      ``MultiBinary`` or an integer ``Box``). Continuous observations (e.g. CartPole's float Box) almost
      never repeat exactly, so each state would get its own row: refused. Discretise them yourself
      (an ``ObservationWrapper`` to an integer Box) or use ``policy="mlp"``.
    """
    from rlvr_env.envs import TokenEnv  # local: keeps this module free of env imports at load time

    inner = env.unwrapped
    name = env.spec.id if getattr(env, "spec", None) is not None else type(inner).__name__
    if isinstance(inner, TokenEnv):
        task = inner.task
        if task.tabular_segments is not None:
            return
        why = (f"policy='tabular' on {name}: the task declares no tabular_segments, so the table is keyed "
               "on the whole observation, prompt included, and nothing learned on one prompt carries over "
               "to another")
        if task.prompts("train") is None:
            raise ValueError(why + "; the task does not list its prompts (its prompts(split) is None), so "
                             "the table counts them as unbounded: held-out prompts (and most train prompts) "
                             "would always meet unseen rows. A task with a finite set of prompts declares "
                             "it by returning them from prompts(split), and tabular_segments names the "
                             "observation segments (e.g. target and answer prefix) to key rows on so that "
                             "rows carry over between prompts; or use policy='mlp'")
        warnings.warn(why + "; held-out prompts will meet unseen (uniform) rows", stacklevel=3)
        return
    space = env.observation_space
    discrete = isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary))
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.integer):
        discrete = True
    if not discrete:
        raise ValueError(
            f"policy='tabular' needs discrete observations, and {name} has {space}: continuous values "
            "almost never repeat, so a table would give every state its own untrained row. Use "
            "policy='mlp', or discretise the observations (an ObservationWrapper to an integer Box)"
        )
