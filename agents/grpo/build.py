"""What :class:`agents.grpo.GRPO`'s constructor builds before it trains: its arguments checked, the
config resolved for the policy, the env made (or taken) with what a checkpoint needs to make it again,
what the env's task tells the agent (its maximum length, the tabular segments), and the critic an
advantage estimator with a value network needs.

SB3's habit: a wrong argument fails at construction, with the value and the reason in the message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from agents.grpo.checkpoint import registering_module, split_env_id
from agents.grpo.config import GRPOConfig
from agents.policies import CriticPolicy, Policy
from rlvr_env.envs import TokenEnv
from rlvr_env.tasks.base import Task

__all__ = ["EnvSetup", "check_agent_args", "critic_of", "make_env", "max_episode_length", "resolve_config",
           "tabular_slices", "task_of"]


def resolve_config(config: GRPOConfig | None, policy_cls: type[Policy]) -> GRPOConfig:
    """``config`` (None: ``GRPOConfig()``) with its unset fields taken from ``policy_cls``'s preset, and
    a ``learning_rate`` that neither sets taken from the policy (its own step size)."""
    if config is None:
        config = GRPOConfig()
    if not isinstance(config, GRPOConfig):
        raise ValueError(f"config must be a GRPOConfig, got {type(config).__name__}")
    config = config.resolve(policy_cls.preset)  # unset fields take the policy's preset
    if config.learning_rate is None:  # neither set nor in the preset: the policy's own step size
        config = dataclasses.replace(config, learning_rate=policy_cls.resolved_learning_rate(config))
    return config


def check_agent_args(seed: Any, verbose: Any, log_interval: Any, tensorboard: bool, log_dir: str | None,
                     eval_freq: Any) -> None:
    """``ValueError`` for an argument of :class:`agents.grpo.GRPO` outside its range."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer")
    if verbose not in (0, 1, 2):
        raise ValueError(f"verbose={verbose!r} must be 0, 1 or 2")
    if isinstance(log_interval, bool) or not isinstance(log_interval, int) or log_interval < 1:
        raise ValueError(f"log_interval={log_interval!r} must be a positive integer")
    if tensorboard and log_dir is None:
        raise ValueError("tensorboard=True needs log_dir: the TensorBoard files are written there")
    if isinstance(eval_freq, bool) or not isinstance(eval_freq, int) or eval_freq < 0:
        raise ValueError(f"eval_freq={eval_freq!r} must be a non-negative integer")


@dataclasses.dataclass
class EnvSetup:
    """The agent's env, its id and kwargs (None and the given kwargs for an env without a spec), the
    module that registers the id (from ``env="module:id"`` or the env spec's entry point; None when
    unknown): a checkpoint stores them, and ``load`` imports the module before making the env; and the
    size of its ``Discrete`` action space."""

    env: gym.Env
    env_id: str | None
    env_module: str | None
    env_kwargs: dict[str, Any]
    n_actions: int = 0


def make_env(env: str | gym.Env, env_kwargs: dict[str, Any] | None, token_observation: bool) -> EnvSetup:
    """The env ``env`` names (an id, made with ``gym.make(id, **env_kwargs)``; with
    ``observation="tokens"`` unless given when the policy reads the token context) or is. ``ValueError``
    for anything else, and for an action space that is not ``Discrete`` from 0."""
    kwargs = dict(env_kwargs or {})
    if isinstance(env, str) and token_observation:  # it reads the token context
        kwargs.setdefault("observation", "tokens")
    if isinstance(env, str):
        module, env_id = split_env_id(env)
        made = gym.make(env_id, **kwargs)
        setup = EnvSetup(made, env_id, module or registering_module(made.spec), kwargs)
    elif isinstance(env, gym.Env):
        if env_kwargs:
            raise ValueError("env_kwargs are only used when env is an id string")
        setup = EnvSetup(env, None, None, kwargs)
        spec = getattr(env, "spec", None)
        if spec is not None:
            setup = EnvSetup(env, spec.id, registering_module(spec), dict(spec.kwargs))
    else:
        raise ValueError(f"env must be an env id or a gymnasium.Env, got {type(env).__name__}")
    space = setup.env.action_space
    if not isinstance(space, gym.spaces.Discrete):
        raise ValueError(f"GRPO needs a Discrete action space (one token per step), got {space}")
    if space.start != 0:
        raise ValueError(f"Discrete action space must start at 0, got {space}")
    setup.n_actions = int(space.n)
    return setup


def task_of(env: gym.Env) -> Task | None:
    """The env's task when it is a token env of this package (None: any other Gymnasium env)."""
    inner = env.unwrapped
    return inner.task if isinstance(inner, TokenEnv) else None


def max_episode_length(env: gym.Env) -> int | None:
    """The task's ``max_length``, else the env spec's ``max_episode_steps`` (None: neither)."""
    task = task_of(env)
    if task is not None:
        return int(task.max_length)
    spec = getattr(env, "spec", None)
    steps = getattr(spec, "max_episode_steps", None)
    return int(steps) if steps else None


def tabular_slices(env: gym.Env) -> list[slice] | None:
    """The task's ``tabular_segments`` as slices of the observation, or None (key on the whole
    observation) when the task names none or the observation does not have them: the token context
    (``observation="tokens"``) lays out ``prompt`` and ``answer``, not the feature segments, and it
    holds only the prompt and the answer so far, so the whole row is the key there."""
    inner = env.unwrapped
    task = task_of(env)
    segments = task.tabular_segments if task is not None else None
    layout = inner.obs_layout if isinstance(inner, TokenEnv) else None
    if not segments or not layout or not all(name in layout for name in segments):
        return None
    return [layout[name] for name in segments]


def critic_of(policy: Policy, advantage: str) -> CriticPolicy:
    """``policy`` as the critic the estimator ``advantage`` needs; ``ValueError`` naming the policy and
    the rule when its class does not declare :class:`agents.policies.CriticPolicy`."""
    if not isinstance(policy, CriticPolicy):
        raise ValueError(
            f"advantage={advantage!r} needs a learned critic, and the policy {type(policy).__qualname__} "
            f"(kind {getattr(policy, 'kind', '?')!r}) serves none: a policy with a critic lists "
            "agents.policies.CriticPolicy among its bases (the mlp and transformer policies do; "
            "docs/agent.md, 'Add a policy architecture'); use a group estimator such as advantage='grpo'")
    return policy
