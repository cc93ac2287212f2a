"""A Stable-Baselines3 ``VecEnv`` over the native vector envs.

SB3 and sb3-contrib step their environments through their own ``VecEnv`` API (``step_async`` /
``step_wait``, auto-reset with ``info["terminal_observation"]``, a list of per-env info dicts). SB3's
usual ``DummyVecEnv`` steps one Python env at a time; :class:`SB3VecEnv` instead steps a whole
:class:`rlvr_env.vector.TokenVectorEnv` (``ArithmeticVectorEnv``, ``CountdownVectorEnv``) with one
array call per step, so PPO, A2C and MaskablePPO train on the native vector env unmodified::

    import gymnasium as gym, rlvr_env
    from sb3_contrib import MaskablePPO

    venv = gym.make_vec("rlvr/Countdown-v0", num_envs=1024, vectorization_mode="vector_entry_point",
                        n_numbers=3)
    model = MaskablePPO("MlpPolicy", rlvr_env.to_sb3_vec_env(venv), n_steps=2, seed=0)

This module imports SB3, so ``rlvr_env`` imports it lazily, inside :func:`rlvr_env.to_sb3_vec_env`
(``import rlvr_env`` needs only gymnasium and numpy).

What it gives, row by row, is what ``DummyVecEnv`` gives over single envs on the same prompts (a test
checks it transition by transition): observations, ``float32`` rewards, dones, and for rows whose
episode ended ``info["terminal_observation"]``, ``info["TimeLimit.truncated"]``, ``"prompt"``,
``"reward_parts"``, ``"correct"``, ``"well_formed"`` and ``"length"``. Differences, for speed:

* rows whose episode did not end get an empty info dict (``DummyVecEnv`` writes
  ``"TimeLimit.truncated": False`` there; SB3 reads it with ``.get(..., False)``);
* the text entries of the single env's final info (``"expression"``, ``"value"``, ``"reason"``) are
  not built; ``env_method("expression", indices=i)`` decodes a row's current answer on demand;
* one generator draws every row's prompts: ``seed(s)`` seeds it with ``s`` at the next ``reset`` (row
  i is not the stream of a single env seeded ``s + i``; pass prompts through ``set_options`` for
  lockstep comparisons);
* ``reset_infos[i]`` (``{"prompt", "split"}`` of row i's current episode) is built when read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from rlvr_env.vector import TokenVectorEnv

__all__ = ["SB3VecEnv"]

#: Methods ``env_method`` calls once on the vector env and hands out per row (batched results).
_BATCHED_METHODS = frozenset({"action_masks"})
#: Per-row helpers of the vector env that take the row index (``venv.tokens(i)``, ...).
_ROW_METHODS = frozenset({"tokens", "expression", "prompt"})


class SB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over a native :class:`~rlvr_env.vector.TokenVectorEnv`; see the module docstring.

    ``vec_env`` must use ``autoreset_mode="SameStep"`` (the default), which is SB3's convention: the
    observation returned for a finished row already starts its next episode and the finished one's last
    observation is in ``info["terminal_observation"]``. ``env_method("action_masks")`` returns each
    row's grammar mask (what sb3-contrib's ``get_action_masks`` stacks for MaskablePPO); the vector
    env computes them all in one call.
    """

    def __init__(self, vec_env: Any) -> None:
        base = getattr(vec_env, "unwrapped", vec_env)
        if not isinstance(base, TokenVectorEnv):
            raise ValueError(
                f"vec_env={vec_env!r:.100} is not a native rlvr_env vector env (TokenVectorEnv); build one "
                "with gym.make_vec(env_id, num_envs=n, vectorization_mode='vector_entry_point')"
            )
        if base.autoreset_mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"vec_env has autoreset_mode={base.autoreset_mode.value!r}; SB3 expects finished envs to "
                "be reset inside the same step, so build it with autoreset_mode='SameStep' (the default)"
            )
        self.venv = vec_env
        self.base = base
        self._actions: np.ndarray | None = None
        super().__init__(base.num_envs, base.single_observation_space, base.single_action_space)

    # -- reset infos, built on demand ----------------------------------------------------------------
    @property  # type: ignore[override]
    def reset_infos(self) -> list[dict[str, Any]]:
        """``{"prompt", "split"}`` of each row's current episode (as ``DummyVecEnv`` keeps them)."""
        if not self.base._started:
            return [{} for _ in range(self.num_envs)]
        task = self.base.task
        prompts = [self.base.prompt(i) for i in range(self.num_envs)]
        return [{"prompt": p, "split": task.split_of(p)} for p in prompts]

    @reset_infos.setter
    def reset_infos(self, value: list[dict[str, Any]]) -> None:
        # VecEnv.__init__ assigns empty dicts; the value is derived from the env's state, so an
        # assignment is ignored (as SB3's own VecEnvs only ever assign what reset returned).
        del value

    # -- the VecEnv API ------------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        seed = self._seeds[0]
        options = self._reset_option()
        obs, _ = self.venv.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        return obs

    def _reset_option(self) -> dict[str, Any] | None:
        """The vector env's reset options from SB3's per-env ``set_options`` list."""
        opts = self._options
        if not any(opts):
            return None
        if len(opts) != self.num_envs:
            raise ValueError(
                f"set_options got {len(opts)} options for num_envs={self.num_envs} envs: pass one "
                "{'prompt': p} per env (a list of num_envs dicts)"
            )
        missing = [i for i, o in enumerate(opts) if set(o) != {"prompt"}]
        if not missing:
            return {"prompt": [o["prompt"] for o in opts]}
        # A subset cannot be honoured: the native vector env resets all rows together, so the rows
        # without an option would draw a prompt while the caller expects the ones it set.
        raise ValueError(
            f"set_options({opts!r:.200}) is not supported (envs {missing[:10]} have no single "
            "'prompt' option): the native vector env takes one {'prompt': p} option per env (every env "
            "must get one) and no other option"
        )

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() was called without step_async(actions)")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, info = self.venv.step(np.asarray(actions))
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            self._final_infos(self.venv.task, self.venv.scorer.prompts, infos, np.flatnonzero(dones),
                              terminated, truncated, info)
        return obs, rewards.astype(np.float32), dones, infos

    @staticmethod
    def _final_infos(
        task: Any,
        columns: Any,
        infos: list[dict[str, Any]],
        ended: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        info: dict[str, Any],
    ) -> None:
        """Fill the info dicts of the ``ended`` rows as ``DummyVecEnv`` over single envs would."""
        final = info["final_info"]
        final_obs = info["final_obs"]
        cols: dict[str, list[Any]] = {
            key: final[key][ended].tolist() for key in ("correct", "well_formed", "length")
        }
        batch = {name: final[name][ended] for name in columns}  # the prompt columns of the ended rows
        prompts = [task.batch_prompt(batch, j) for j in range(len(ended))]
        parts = {name: final["reward_parts"][name][ended].tolist() for name in final["reward_parts"]
                 if not name.startswith("_")}
        time_limit = (truncated & ~terminated)[ended].tolist()
        for j, i in enumerate(ended.tolist()):
            infos[i] = {
                "TimeLimit.truncated": time_limit[j],
                "terminal_observation": final_obs[i],
                "prompt": prompts[j],
                "reward_parts": {name: values[j] for name, values in parts.items()},
                "correct": cols["correct"][j],
                "well_formed": cols["well_formed"][j],
                "length": cols["length"][j],
            }

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The vector env's attribute ``attr_name``, once per requested row (it is shared by all)."""
        value = getattr(self.base, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` on the vector env; every row shares it, so only all rows can be set."""
        rows = list(self._get_indices(indices))
        if sorted(rows) != list(range(self.num_envs)):
            raise ValueError(
                f"set_attr({attr_name!r}, indices={indices!r}): the rows of a native vector env share their "
                "attributes, so only all of them can be set at once (indices=None)"
            )
        setattr(self.base, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """``action_masks`` (one call for all rows, one mask per row) and the per-row helpers
        ``tokens``, ``expression`` and ``prompt`` of :class:`~rlvr_env.vector.TokenVectorEnv`."""
        rows = self._get_indices(indices)
        if method_name in _BATCHED_METHODS:
            batch = getattr(self.base, method_name)(*method_args, **method_kwargs)
            return list(batch) if indices is None else [batch[i] for i in rows]
        if method_name in _ROW_METHODS:
            method = getattr(self.base, method_name)
            return [method(i, *method_args, **method_kwargs) for i in rows]
        raise AttributeError(
            f"env_method({method_name!r}) is not available on the native vector env; supported: "
            f"{sorted(_BATCHED_METHODS | _ROW_METHODS)}"
        )

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """Always False: the rows of a native vector env are not single envs and carry no wrappers."""
        return [False for _ in self._get_indices(indices)]

    def _get_indices(self, indices: VecEnvIndices) -> Iterable[int]:
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, (int, np.integer)):
            return [int(indices)]
        return [int(i) for i in indices]

    def get_images(self) -> Sequence[np.ndarray | None]:
        raise NotImplementedError("the native vector envs render text (render_mode='ansi'), not images")
