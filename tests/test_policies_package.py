"""The policies as a package of their own (agents.policies): checkpoints from before the move and class
paths naming the old modules still load, the critic is declared on ``CriticPolicy`` and checked once, and
each update is given its loss (the entropy bonus's gradient included) by the trainer."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401  (registers the envs)
from agents import GRPO, GRPOConfig
from agents.grpo.objective import entropy_bonus
from agents.policies import (
    MOVED_POLICY_PATHS,
    CriticPolicy,
    Loss,
    Policy,
    TabularPolicy,
    import_path,
    policy_class,
)

ROOT = Path(__file__).resolve().parent.parent
#: Written by the code before agents.policies existed (GRPO("rlvr/Arithmetic-v0", policy="tabular",
#: seed=1).learn(2000), then save), with the digests of its table before and after learn(320) there.
BEFORE_THE_MOVE = Path(__file__).with_name("data") / "grpo_tabular_before_the_policies_package.zip"
TABLE_DIGEST, TABLE_DIGEST_AFTER_320 = "ce5a896d714a7954", "2b41eebe6b02ad67"
COUNTDOWN = {"n_numbers": 3}


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def _with_policy(src: Path, dst: Path, policy: str) -> Path:
    """A copy of the checkpoint ``src`` whose metadata names the policy ``policy``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "grpo.json":
                meta = json.loads(data)
                meta["policy"] = policy
                data = json.dumps(meta).encode()
            zout.writestr(item.filename, data)
    return dst


def _same_state(a: Policy, b: Policy) -> bool:
    sa, sb = a.state(), b.state()
    return sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)


# ------------------------------------------------------------------------------------------------
# Checkpoints and class paths from before the move
# ------------------------------------------------------------------------------------------------
def test_a_checkpoint_written_before_the_move_loads_and_trains_on_bit_for_bit() -> None:
    model = GRPO.load(BEFORE_THE_MOVE)
    assert type(model.policy) is TabularPolicy and model.policy_name == "tabular"
    assert (model.num_timesteps, model.iterations) == (2240, 7)
    assert _digest(model.policy.state()["table"]) == TABLE_DIGEST
    assert model.success("test", k=4).greedy == 0.2
    model.learn(320, reset_num_timesteps=False)  # the stored generator state continues the run
    assert _digest(model.policy.state()["table"]) == TABLE_DIGEST_AFTER_320


@pytest.mark.parametrize(("old", "name", "env", "kwargs"), [
    ("agents.grpo.policies:TabularPolicy", "tabular", "rlvr/Arithmetic-v0", {}),
    ("agents.grpo.mlp:MLPPolicy", "mlp", "rlvr/Countdown-v0", COUNTDOWN),
])
def test_a_checkpoint_naming_an_old_class_path_loads_the_class_where_it_lives_now(
        tmp_path: Path, old: str, name: str, env: str, kwargs: dict) -> None:
    if name == "mlp":
        pytest.importorskip("torch")
    model = GRPO(env, GRPOConfig(group_size=4, prompts_per_iter=2), policy=name, seed=2, env_kwargs=kwargs)
    model.learn(100)
    model.save(tmp_path / "new.zip")
    loaded = GRPO.load(_with_policy(tmp_path / "new.zip", tmp_path / "old.zip", old))
    assert type(loaded.policy) is type(model.policy) and _same_state(loaded.policy, model.policy)
    assert loaded.policy_name == name  # saved again, it stores the name
    by_path = GRPO(env, GRPOConfig(group_size=4, prompts_per_iter=2), policy=old, seed=2, env_kwargs=kwargs)
    assert type(by_path.policy) is type(model.policy) and by_path.policy_name == name


def test_every_moved_path_names_a_policy_class_where_it_lives_now() -> None:
    pytest.importorskip("torch")
    for old, new in MOVED_POLICY_PATHS.items():
        cls = import_path(new)
        assert isinstance(cls, type) and issubclass(cls, Policy), new
        assert old.partition(":")[2] == new.partition(":")[2] == cls.__qualname__
        assert policy_class(old) is cls
        assert not old.startswith("agents.policies") and new.startswith("agents.policies.")


def test_the_policies_package_imports_no_torch() -> None:
    # (that it imports nothing of agents.grpo is tests/test_import_graph.py's rule; at run time the parent
    # package agents, whose face is the GRPO agent, is imported first)
    code = ("import sys, agents.policies; agents.policies.policy_class('tabular'); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'torch'); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ------------------------------------------------------------------------------------------------
# The critic is declared on CriticPolicy
# ------------------------------------------------------------------------------------------------
def test_the_built_in_neural_policies_declare_the_critic_and_the_table_does_not() -> None:
    torch_policies = pytest.importorskip("agents.policies.mlp")
    from agents.policies.transformer import TransformerPolicy

    assert issubclass(torch_policies.MLPPolicy, CriticPolicy) and issubclass(TransformerPolicy, CriticPolicy)
    assert not issubclass(TabularPolicy, CriticPolicy)


def test_a_critic_estimator_refuses_a_policy_that_declares_no_critic() -> None:
    torch = pytest.importorskip("torch")
    from agents.policies.torch_base import TorchPolicy

    class NoCritic(TorchPolicy):  # a torch policy that never says it serves a critic
        kind = "no-critic"

        def __init__(self, observation_space: gym.Space, n_actions: int, learning_rate: float, *,
                     seed: int, max_grad_norm: float | None = None) -> None:
            self.n_actions, self.max_grad_norm = n_actions, max_grad_norm
            self.net = torch.nn.Linear(int(np.prod(observation_space.shape)), n_actions).double()
            self.reference = copy.deepcopy(self.net).requires_grad_(False)
            self.optimizer = torch.optim.Adam(self.net.parameters(), lr=learning_rate)

        def network_logits(self, net, obs, actions):  # type: ignore[no-untyped-def]
            return net(torch.as_tensor(np.asarray(obs, dtype=np.float64)).reshape(len(obs), -1))

    config = GRPOConfig(advantage="gae", group_size=2, prompts_per_iter=2)
    refused = (r"advantage='gae' needs a learned critic, and the policy .*NoCritic \(kind 'no-critic'\) "
               r"serves none: .*agents\.policies\.CriticPolicy")
    with pytest.raises(ValueError, match=refused):
        GRPO("rlvr/Countdown-v0", config, policy=NoCritic, env_kwargs=COUNTDOWN)
    GRPO("rlvr/Countdown-v0", GRPOConfig(group_size=2, prompts_per_iter=2), policy=NoCritic,
         env_kwargs=COUNTDOWN).learn(50)  # a group estimator needs none
    critic = GRPO("rlvr/Countdown-v0", config, policy="mlp", env_kwargs=COUNTDOWN)
    assert critic.policy.critic is not None  # the mlp declares it and gets one


# ------------------------------------------------------------------------------------------------
# The loss is given to the update
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entropy_coef", [0.0, 0.05])
def test_each_update_is_given_the_loss_with_the_entropy_term_only_when_asked(
        monkeypatch: pytest.MonkeyPatch, entropy_coef: float) -> None:
    config = GRPOConfig(group_size=4, prompts_per_iter=2, entropy_coef=entropy_coef)
    model = GRPO("rlvr/Arithmetic-v0", config, policy="tabular", seed=0)
    seen: list[tuple[Loss, np.ndarray, np.ndarray]] = []
    original = model.policy.update

    def update(obs, actions, loss, masks=None):  # type: ignore[no-untyped-def]
        seen.append((loss, obs, actions))
        return original(obs, actions, loss, masks)

    monkeypatch.setattr(model.policy, "update", update)
    model.learn(64)
    assert seen and all(isinstance(loss, Loss) for loss, _, _ in seen)
    loss, obs, actions = seen[0]
    if entropy_coef == 0:
        assert all(loss.logits_grad is None for loss, _, _ in seen)
        return
    assert loss.logits_grad is not None
    logp_all = np.log(np.random.default_rng(0).dirichlet(np.ones(model.n_actions), size=len(actions)))
    weights = np.full(len(actions), entropy_coef / len(actions))  # every token in the loss, no top-rho
    np.testing.assert_array_equal(loss.logits_grad(logp_all), -entropy_bonus(logp_all, weights)[1])
    terms = loss.fn(np.full(len(actions), -np.log(model.n_actions)))
    assert terms.grad_logp.shape == (len(actions),)  # one per token in the loss, in the update's order


def test_a_table_interrupted_between_its_rows_and_their_keys_still_saves_and_loads(tmp_path: Path) -> None:
    """A Ctrl-C inside a tabular insert lands after the rows were added and before their keys were: the
    checkpoint leaves the unkeyed zero rows out, so it loads (keys and table always match)."""
    model = GRPO("rlvr/Arithmetic-v0", GRPOConfig(group_size=4, prompts_per_iter=2), policy="tabular", seed=0)
    model.learn(total_timesteps=200)
    policy = model.policy
    rows = policy.table.shape[0]
    policy.table = np.vstack([policy.table, np.zeros((2, policy.n_actions))])  # rows, no keys yet
    state = policy.state()
    assert state["table"].shape[0] == state["keys"].shape[0] == rows
    model.save(tmp_path / "interrupted")
    loaded = GRPO.load(tmp_path / "interrupted.zip")
    assert np.array_equal(loaded.policy.table, policy.table[:rows])
