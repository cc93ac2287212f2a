"""The baselines a trained agent is compared with: SB3 PPO ``MlpPolicy`` (SB3 defaults or tuned) and A2C,
and the prompt-ignoring floor (:func:`single_number_floor`).

The factories build the models exactly as a user of SB3 would (``PPO("MlpPolicy", env, ...)``); the only
additions are (1) ``n_envs``, an optional number of synchronous environment copies (a tunable, so a tuned
PPO may batch its rollouts the way GRPO batches its groups), and (2) the tuned hyperparameters, which
``benchmarks/compare/tune.py`` writes to ``benchmarks/hparams/<contender>.json``.

The network is never tuned (``net_arch`` stays SB3's default ``[64, 64]`` Tanh for actor and critic), so the
trainable-parameter counts of every PPO contender are identical and comparable with GRPO's MLP policy,
which is exactly SB3's actor.

>>> import rlvr_env
>>> model = make_ppo("rlvr/Arithmetic-v0", seed=0)
>>> count_parameters(model)
{'actor': 7045, 'critic': 6785, 'shared': 0, 'total': 13830}
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "HPARAMS_DIR",
    "VEC_ENVS",
    "count_parameters",
    "load_hparams",
    "make_a2c",
    "make_ppo",
    "make_sb3",
    "make_sb3_transformer",
    "make_training_env",
    "single_number_floor",
]

#: Where ``benchmarks/compare/tune.py`` saves tuned hyperparameters (a data directory read by path, not
#: imported, so the ``benchmarks -> agents`` arrow still points one way).
HPARAMS_DIR = Path(__file__).resolve().parent.parent / "hparams"

#: Keys a hyperparameter dict may hold besides the SB3 constructor's own keyword arguments.
_EXTRA_KEYS = frozenset({"n_envs", "vec_env"})
#: How the ``n_envs`` copies are stepped: SB3's ``DummyVecEnv`` over single envs (one Python env at a
#: time), or the env id's native vector env through ``rlvr_env.to_sb3_vec_env`` (one array call per step).
VEC_ENVS = ("dummy", "native")


def load_hparams(contender: str, path: str | Path | None = None) -> dict[str, Any]:
    """The ``"hyperparams"`` dict of ``benchmarks/hparams/<contender>.json`` (or of ``path``).

    Raises ``FileNotFoundError`` naming the command that creates the file when it is missing.
    """
    file = Path(path) if path is not None else HPARAMS_DIR / f"{contender}.json"
    if not file.is_file():
        raise FileNotFoundError(
            f"no tuned hyperparameters at {file}; create them with `python -m benchmarks.compare.tune "
            f"--contenders {contender}`"
        )
    data = json.loads(file.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("hyperparams"), dict):
        raise ValueError(f"{file} must hold a JSON object with a 'hyperparams' object")
    return dict(data["hyperparams"])


def make_training_env(
    env: str | gym.Env,
    seed: int,
    n_envs: int = 1,
    env_kwargs: Mapping[str, Any] | None = None,
    vec_env: str = "dummy",
) -> Any:
    """The training env an SB3 model gets: ``env`` itself for one copy, else a seeded ``DummyVecEnv``;
    with ``vec_env="native"`` the id's native vector env of ``n_envs`` rows in a ``VecMonitor``
    (``rlvr_env.to_sb3_vec_env``; SB3 seeds its prompt generator with ``seed``).

    ``env_kwargs`` (default ``{"split": "train"}`` for an id string, so training never sees held-out
    prompts) are passed to ``gym.make`` when ``env`` is an id.
    """
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
        raise ValueError(f"n_envs={n_envs!r} must be a positive integer")
    if vec_env not in VEC_ENVS:
        raise ValueError(f"vec_env={vec_env!r} is not one of {VEC_ENVS}")
    if vec_env == "native":
        return _native_vec_env(env, seed, n_envs, env_kwargs)
    if isinstance(env, str):
        kwargs = {"split": "train"} if env_kwargs is None else dict(env_kwargs)
        if n_envs == 1:
            return gym.make(env, **kwargs)
        env_id = env
        return _dummy_vec_env(lambda: gym.make(env_id, **kwargs), n_envs, seed)
    if env_kwargs:
        raise ValueError("env_kwargs can only be used with an env id string, not with an env object")
    if n_envs == 1:
        return env
    if env.spec is None:
        raise ValueError(f"n_envs={n_envs} needs copies of the env, but {env!r} has no spec to re-make it")
    spec = env.spec
    return _dummy_vec_env(lambda: gym.make(spec), n_envs, seed)


def _native_vec_env(env: str | gym.Env, seed: int, n_envs: int, env_kwargs: Mapping[str, Any] | None) -> Any:
    """``n_envs`` rows of ``env``'s native vector env as an SB3 ``VecEnv`` (``VecMonitor`` records the
    episodes, as ``Monitor`` does for ``DummyVecEnv``'s copies), seeded ``seed``."""
    from stable_baselines3.common.vec_env import VecMonitor

    import rlvr_env

    if not isinstance(env, str):
        raise ValueError("vec_env='native' needs an env id string (its native vector env is made from it)")
    if gym.spec(env).vector_entry_point is None:
        raise ValueError(f"vec_env='native': {env!r} has no native vector env (vector_entry_point)")
    kwargs = {"split": "train"} if env_kwargs is None else dict(env_kwargs)
    venv = gym.make_vec(env, num_envs=n_envs, vectorization_mode="vector_entry_point", **kwargs)
    vec = VecMonitor(rlvr_env.to_sb3_vec_env(venv))  # type: ignore[arg-type]
    vec.seed(seed)
    return vec


def _dummy_vec_env(make: Any, n_envs: int, seed: int) -> Any:
    """``n_envs`` Monitor-wrapped copies in a ``DummyVecEnv``, seeded ``seed, seed+1, ...``.

    Not ``make_vec_env``: it asks for ``render_mode="rgb_array"``, which text envs refuse.
    """
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    vec = DummyVecEnv([lambda: Monitor(make()) for _ in range(n_envs)])
    vec.seed(seed)
    return vec


def make_sb3(
    algo: str,
    env: str | gym.Env,
    seed: int,
    hyperparams: Mapping[str, Any] | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    device: str = "cpu",
    verbose: int = 0,
) -> Any:
    """An SB3 ``algo`` ("PPO" or "A2C") with ``MlpPolicy`` on ``env``; ``hyperparams`` override the defaults.

    ``hyperparams`` holds SB3 constructor keywords plus ``n_envs`` (environment copies, default 1) and
    ``vec_env`` (:data:`VEC_ENVS`: how they are stepped, default ``"dummy"``). CPU by
    default: these networks are tiny and the GPU transfer would dominate.
    """
    from stable_baselines3 import A2C, PPO

    classes = {"PPO": PPO, "A2C": A2C}
    if algo not in classes:
        raise ValueError(f"algo={algo!r} is not one of {sorted(classes)}")
    params = dict(hyperparams or {})
    if "policy_kwargs" in params:
        # The network is part of what is compared (parameter counts), so it is fixed, not a hyperparameter.
        raise ValueError("hyperparams must not change policy_kwargs: the network is fixed to SB3's default")
    n_envs = params.pop("n_envs", 1)
    vec_env = params.pop("vec_env", "dummy")
    cls: type = classes[algo]
    fixed = {"self", "policy", "env", "seed", "device", "verbose"}
    valid = set(inspect.signature(cls).parameters) - fixed
    unknown = sorted(set(params) - valid - _EXTRA_KEYS)
    if unknown:
        raise ValueError(f"unknown {algo} hyperparameters {unknown}")
    train_env = make_training_env(env, seed, n_envs=n_envs, env_kwargs=env_kwargs, vec_env=vec_env)
    return cls("MlpPolicy", train_env, seed=seed, device=device, verbose=verbose, **params)


def make_ppo(
    env: str | gym.Env,
    seed: int,
    hyperparams: Mapping[str, Any] | None = None,
    tuned: bool = False,
    *,
    hparams_path: str | Path | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    device: str = "cpu",
    verbose: int = 0,
) -> Any:
    """SB3 ``PPO("MlpPolicy")``: SB3 defaults, or (``tuned=True``) the saved ``ppo_tuned`` hyperparameters.

    Explicit ``hyperparams`` are applied on top of the tuned ones (or of the defaults).
    """
    params: dict[str, Any] = load_hparams("ppo_tuned", hparams_path) if tuned else {}
    params.update(hyperparams or {})
    return make_sb3("PPO", env, seed, params, env_kwargs=env_kwargs, device=device, verbose=verbose)


def make_a2c(
    env: str | gym.Env,
    seed: int,
    hyperparams: Mapping[str, Any] | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    device: str = "cpu",
    verbose: int = 0,
) -> Any:
    """SB3 ``A2C("MlpPolicy")`` with SB3 defaults (or ``hyperparams`` on top of them)."""
    return make_sb3("A2C", env, seed, hyperparams, env_kwargs=env_kwargs, device=device, verbose=verbose)


def make_sb3_transformer(algo: str, env_id: str, env_kwargs: Mapping[str, Any], seed: int,
                         policy_kwargs: Mapping[str, Any], settings: Mapping[str, Any],
                         start: Any = None) -> Any:
    """SB3 ``PPO`` (``algo="ppo"``) or sb3-contrib ``MaskablePPO`` (``"maskable_ppo"``) with the
    transformer policy (:func:`agents.policies.transformer.sb3_policy_kwargs`) on the native vector env of
    ``env_id`` with ``observation="tokens"`` and the train split. ``settings``: ``n_envs`` and
    ``n_steps``, optionally ``share_features_extractor`` (default True, SB3's), and any other PPO
    keyword. ``start``: a transformer policy whose weights the actor starts from (both trunks, when
    they are separate), else the seeded network."""
    from agents.policies.transformer import copy_to_sb3, sb3_policy_kwargs

    if algo not in ("ppo", "maskable_ppo"):
        raise ValueError(f"algo={algo!r} is not 'ppo' or 'maskable_ppo'")
    rest = dict(settings)
    n_envs, n_steps = rest.pop("n_envs"), rest.pop("n_steps")
    shared = rest.pop("share_features_extractor", True)
    env = make_training_env(env_id, seed, n_envs=n_envs, vec_env="native",
                            env_kwargs={**env_kwargs, "observation": "tokens", "split": "train"})
    kwargs = sb3_policy_kwargs(int(env.action_space.n), seed, share_features_extractor=shared,
                               **policy_kwargs)
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO as cls
    else:
        from stable_baselines3 import PPO as cls
    model = cls("MlpPolicy", env, n_steps=n_steps, seed=seed, device="cpu", policy_kwargs=kwargs, **rest)
    if start is not None:
        copy_to_sb3(start, model)
    return model


def count_parameters(model: Any) -> dict[str, int]:
    """Trainable parameters of an SB3 actor-critic policy, split into actor, critic and shared parts.

    Actor = ``mlp_extractor.policy_net`` + ``action_net``; critic = ``mlp_extractor.value_net`` +
    ``value_net``; shared = everything else that trains (the default ``FlattenExtractor`` has none;
    ``log_std`` of a Gaussian policy would land here). ``total`` is the sum.
    """
    policy = model.policy

    def n(module: Any) -> int:
        return sum(p.numel() for p in module.parameters() if p.requires_grad)

    actor = n(policy.mlp_extractor.policy_net) + n(policy.action_net)
    critic = n(policy.mlp_extractor.value_net) + n(policy.value_net)
    total = n(policy)
    return {"actor": actor, "critic": critic, "shared": total - actor - critic, "total": total}


def single_number_floor(env: Any, prompts: list[Any]) -> float:
    """The success of the best Countdown answer that ignores the arithmetic, the floor a learned policy must
    beat: answer the one number equal to the target; the share of ``prompts`` that have one."""
    return float(np.mean([p.target in p.numbers for p in prompts]))
