"""The lesson's tabular softmax policy (NumPy only: no torch at import or run time), with its optimisers
(plain SGD, the lesson's, and Adam over a table that grows rows) and the check that refuses envs a table
cannot learn."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from agents.policies.protocol import Loss, Policy, TermsT, UpdateStats
from agents.policies.sampling import apply_mask, log_softmax

__all__ = ["TABULAR_DEFAULT_LR", "TabularPolicy", "check_tabular_observations"]


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
        added: dict[bytes, int] = {}
        for j, key in enumerate(uniq):
            kb = key.tobytes()
            row = self._rows.get(kb)
            if row is None and insert:
                row = added[kb] = len(self._rows) + len(added)
            ids[j] = -1 if row is None else row
        if added:
            # The rows first, then their keys in one call: an interrupt (Ctrl-C) between the two leaves
            # unkeyed zero rows, which state() leaves out, never keys without rows.
            self.table = np.vstack([self.table, np.zeros((len(added), self.n_actions))])
            self._rows.update(added)
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

    def update(self, obs: np.ndarray, actions: np.ndarray, loss: Loss[TermsT],
               masks: np.ndarray | None = None) -> UpdateStats[TermsT]:
        rows = self._row_ids(obs, insert=True)  # (T,)
        logp_all = log_softmax(apply_mask(self.table[rows], masks))  # (T, V); -inf where masked
        logp = logp_all[np.arange(len(rows)), actions]  # (T,)
        terms = loss.fn(logp)
        g = terms.grad_logp.reshape(-1)  # (T,) d loss / d logp
        # d logp[a] / d logits = onehot(a) - softmax(logits); accumulate per table row.
        grad = np.zeros_like(self.table)
        np.add.at(grad, (rows, actions), g)
        np.add.at(grad, rows, -g[:, None] * np.exp(logp_all))
        if loss.logits_grad is not None:  # a term of the whole distribution (an entropy bonus)
            np.add.at(grad, rows, loss.logits_grad(logp_all))
        self._adam.step(self.table, grad)
        return UpdateStats(terms, _entropy(logp_all))

    def num_parameters(self) -> int:
        return int(self.table.size)

    def state(self) -> dict[str, np.ndarray]:
        keys = list(self._rows)  # insertion order == row order
        width = self._key_dim or 0
        key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), width)
        return {
            "table": self.table[: len(keys)].copy(),  # rows past the keys: an interrupted insert's
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
