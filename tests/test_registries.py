"""Extending the agent from outside the package: a policy class (by class and by registered name, saved
and loaded), a loss variant with its own config field, an advantage estimator, and a subclass that
overrides one of ``GRPO.learn``'s template steps (docs/agent.md, "Add a policy architecture" and "Add a
loss variant")."""

from __future__ import annotations

import copy
import json
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401  (registers the envs)
from agents import GRPO, GRPOConfig
from agents.grpo import Advantages, register_advantage, register_policy, register_policy_loss
from agents.policies import Policy, TabularPolicy
from agents.policies.torch_base import TorchPolicy

ENV = "rlvr/Arithmetic-v0"  # the tabular policy's task
KW = {"format_weight": 1.0}
COUNTDOWN = "rlvr/Countdown-v0"  # the linear policy's: grammar masks, so every answer is well-formed
TINY = {"n_numbers": 2, "number_range": (1, 4), "target_range": (1, 16), "operators": "+*"}


@register_policy("test-linear")
class LinearPolicy(TorchPolicy):
    """A softmax over one linear layer of the flattened observation: the smallest torch policy."""

    kind = "test-linear"

    def __init__(self, observation_space: gym.Space, n_actions: int, learning_rate: float, *, seed: int,
                 max_grad_norm: float | None = None) -> None:
        self.n_actions = n_actions
        self.max_grad_norm = max_grad_norm
        self.net = torch.nn.Linear(int(np.prod(observation_space.shape)), n_actions).double()
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.net.weight.normal_(0.0, 0.01, generator=gen)
            self.net.bias.zero_()
        self.reference = copy.deepcopy(self.net).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=learning_rate, eps=1e-5)

    def network_logits(self, net: torch.nn.Module, obs: np.ndarray, actions: np.ndarray | None
                       ) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(obs, dtype=np.float64))
        return net(x.reshape(x.shape[0], -1))


def _config(**kw) -> GRPOConfig:
    return GRPOConfig(group_size=4, prompts_per_iter=2, beta=0.0, **kw)


def _weights(model: GRPO) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in model.policy.state().items()}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------------------------
# A policy architecture
# ------------------------------------------------------------------------------------------------
def test_a_custom_torch_policy_trains_by_class_and_by_name_saves_and_loads(tmp_path: Path) -> None:
    by_class = GRPO(COUNTDOWN, _config(learning_rate=0.05), policy=LinearPolicy, seed=3, env_kwargs=TINY)
    assert isinstance(by_class.policy, LinearPolicy) and by_class.policy_name == "test-linear"
    start = _weights(by_class)
    by_class.learn(300)
    assert not _same(start, _weights(by_class))  # the shared TorchPolicy.update trained it
    by_name = GRPO(COUNTDOWN, _config(learning_rate=0.05), policy="test-linear", seed=3, env_kwargs=TINY)
    by_name.learn(300)
    assert _same(_weights(by_class), _weights(by_name))  # the name builds the same policy

    by_name.save(tmp_path / "linear")
    loaded = GRPO.load(tmp_path / "linear")
    assert isinstance(loaded.policy, LinearPolicy) and loaded.policy_name == "test-linear"
    assert _same(_weights(by_name), _weights(loaded))
    obs, _ = loaded.env.reset(seed=0)
    masks = loaded.env.unwrapped.action_masks()
    assert loaded.predict(obs, deterministic=True, action_masks=masks)[0] == by_name.predict(
        obs, deterministic=True, action_masks=masks)[0]
    by_name.learn(200, reset_num_timesteps=False)  # the optimiser's state and the generator came back too
    loaded.learn(200, reset_num_timesteps=False)
    assert _same(_weights(by_name), _weights(loaded))


def test_an_unregistered_class_trains_but_cannot_be_saved(tmp_path: Path) -> None:
    class Unregistered(LinearPolicy):
        kind = "unregistered"

    model = GRPO(COUNTDOWN, _config(), policy=Unregistered, seed=0, env_kwargs=TINY)
    model.learn(100)
    assert model.policy_name is None
    with pytest.raises(ValueError, match="Unregistered is not registered"):
        model.save(tmp_path / "m")


def test_a_checkpoint_names_a_policy_that_is_not_registered(tmp_path: Path) -> None:
    model = GRPO(COUNTDOWN, _config(), policy="test-linear", seed=0, env_kwargs=TINY)
    path = tmp_path / "m.zip"
    model.save(path)
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    meta = json.loads(members["grpo.json"])
    meta["policy"] = "test-nowhere"
    members["grpo.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    with pytest.raises(ValueError, match="its policy 'test-nowhere' is not registered"):
        GRPO.load(path)


def test_policy_names_and_classes_are_checked() -> None:
    with pytest.raises(ValueError, match="policy='test-missing' is not one of the registered policies"):
        GRPO(ENV, policy="test-missing")
    with pytest.raises(ValueError, match="must be a registered name"):
        GRPO(ENV, policy=dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered to LinearPolicy"):
        register_policy("test-linear", TabularPolicy)
    with pytest.raises(ValueError, match="needs a subclass of agents.policies.Policy"):
        register_policy("test-dict", dict)  # type: ignore[type-var]
    assert register_policy("test-linear", LinearPolicy) is LinearPolicy  # the same class again: no-op
    assert issubclass(LinearPolicy, Policy)


def test_the_shared_supervised_fit_warm_starts_a_custom_policy() -> None:
    from agents.bc import demonstrations, warm_start

    model = GRPO(COUNTDOWN, GRPOConfig.preset("countdown"), policy=LinearPolicy, seed=0,
                 env_kwargs=TINY)
    losses = warm_start(model, demonstrations(model.env, 40, seed=0), epochs=20, learning_rate=0.05)
    assert losses[-1] < 0.8 * losses[0]
    net, ref = model.policy.net.state_dict(), model.policy.reference.state_dict()
    assert all(torch.equal(net[k], ref[k]) for k in net)  # the clone is the new KL reference


# ------------------------------------------------------------------------------------------------
# A loss variant with its own config field, and an advantage estimator
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaledConfig(GRPOConfig):
    pg_scale: float = 1.0
    """The weight of the scaled policy gradient (``policy_loss="test_scaled_pg"``)."""


@register_policy_loss("test_scaled_pg", settings=("pg_scale",))
def scaled_policy_gradient(logp, logp_old, adv, mask, s):
    """``pg_scale * rho * A`` per token, unclipped."""
    ratio = np.exp(np.clip(logp - logp_old, -20.0, 20.0))
    return s.pg_scale * ratio * adv, s.pg_scale * ratio * adv, np.zeros(logp.shape, dtype=bool)


def _tabular(config: GRPOConfig, cls: type[GRPO] = GRPO) -> GRPO:
    model = cls(ENV, config, policy="tabular", seed=1, env_kwargs=KW)
    model.learn(400)
    return model


def test_a_registered_loss_reads_its_own_config_field_and_changes_the_update() -> None:
    zero = _tabular(ScaledConfig(group_size=4, prompts_per_iter=2, beta=0.0, policy_loss="test_scaled_pg",
                                 pg_scale=0.0))
    assert zero._loss_settings.surrogate.pg_scale == 0.0
    assert zero.policy.table.size and np.all(zero.policy.table == 0.0)  # no gradient at all
    one = _tabular(ScaledConfig(group_size=4, prompts_per_iter=2, beta=0.0, policy_loss="test_scaled_pg"))
    two = _tabular(ScaledConfig(group_size=4, prompts_per_iter=2, beta=0.0, policy_loss="test_scaled_pg",
                                pg_scale=2.0))
    vanilla = _tabular(_config())
    assert np.abs(one.policy.table).max() > 0 and not np.array_equal(one.policy.table, two.policy.table)
    # with mu = 1 (the tabular preset) every step is on-policy, rho = 1 and PPO's clip never acts: at
    # pg_scale = 1 the loss is the vanilla one, and so is the training, to the bit
    assert one.config.epochs == 1 and np.array_equal(one.policy.table, vanilla.policy.table)
    with pytest.raises(ValueError, match=r"reads the settings \['pg_scale'\], which are not fields"):
        GRPO(ENV, _config(policy_loss="test_scaled_pg"), seed=0, env_kwargs=KW)
    with pytest.raises(ValueError, match="'test_scaled_pg' is already registered"):
        register_policy_loss("test_scaled_pg")(scaled_policy_gradient)
    settings = two._loss_settings  # what a Ray worker receives: it pickles and copies as it is
    assert pickle.loads(pickle.dumps(settings)) == settings == copy.deepcopy(settings)
    assert pickle.loads(pickle.dumps(settings)).surrogate.pg_scale == 2.0


@register_advantage("test_sign")
def sign_advantages(rewards, eps=1e-4, unbiased_std=True, lengths=None):
    r = np.asarray(rewards, dtype=np.float64)
    return np.sign(r - r.mean(axis=1, keepdims=True))


def test_a_registered_advantage_estimator_is_what_the_update_uses() -> None:
    model = GRPO(ENV, _config(advantage="test_sign"), seed=2, env_kwargs=KW)
    events = []
    model.add_group_hook(events.append)
    model.learn(300)
    assert events and any(np.abs(e.advantages).sum() > 0 for e in events)
    for event in events:
        np.testing.assert_array_equal(event.advantages, sign_advantages(event.rewards))
    with pytest.raises(ValueError, match="advantage estimator 'grpo' is already registered"):
        register_advantage("grpo")(sign_advantages)  # a built-in cannot be replaced by accident


# ------------------------------------------------------------------------------------------------
# A template step overridden by a subclass
# ------------------------------------------------------------------------------------------------
class NoSignal(GRPO):
    """GRPO whose advantages are all zero: with beta = 0 the policy never moves."""

    def compute_advantages(self, got):
        adv = super().compute_advantages(got)
        return Advantages(None if adv.per_answer is None else np.zeros_like(adv.per_answer))


def test_a_subclass_overriding_compute_advantages_is_used() -> None:
    seen, called = [], []
    model = NoSignal(ENV, _config(), policy="tabular", seed=1, env_kwargs=KW)
    model.add_group_hook(lambda e: seen.append(e.advantages))
    model.learn(400, callback=lambda m, metrics: called.append(metrics) or True)
    assert seen and all(np.all(a == 0.0) for a in seen)  # the hooks see the subclass's advantages
    assert len(called) == model.iterations  # callbacks still run once per iteration
    assert model.policy.table.size and np.all(model.policy.table == 0.0)  # ... and so did the update
    assert np.abs(_tabular(_config()).policy.table).max() > 0  # the base class's advantages move it
