"""The transformer on the thinking env: tokens the calculator writes are inputs, never predictions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agents.policies.transformer import TransformerPolicy  # noqa: E402


def _rollout(calculator: bool, n: int = 6):
    venv = gym.make_vec("rlvr/CountdownThink-v0", num_envs=n, vectorization_mode="vector_entry_point",
                        n_numbers=3, calculator=calculator, observation="tokens",
                        autoreset_mode="Disabled").unwrapped
    _, info = venv.reset(seed=1)
    task = venv.task
    solutions = [task.solution(p) for p in info["prompt"]]
    rows, actions, owner = [], [], []
    obs = venv._obs.copy()
    for step in range(max(len(s) for s in solutions)):
        acts = np.array([s[step] if step < len(s) else task.eos_id for s in solutions])
        for i, s in enumerate(solutions):  # episode-major order, as a rollout stores its groups
            if step < len(s):
                rows.append((i, step, obs[i].copy(), int(acts[i])))
        obs, *_ = venv.step(acts)
    rows.sort(key=lambda r: (r[0], r[1]))
    obs_rows = np.stack([r[2] for r in rows])
    actions = np.array([r[3] for r in rows])
    owner = np.array([r[0] for r in rows])
    return venv, obs_rows, actions, owner


@pytest.mark.parametrize("calculator", [False, True])
def test_one_teacher_forced_pass_equals_each_row_alone_and_predicts_only_actions(calculator):
    venv, obs, actions, owner = _rollout(calculator)
    policy = TransformerPolicy(venv.single_observation_space, len(venv.task.vocab), 1e-3, seed=0,
                               dtype="float64", d_model=32, n_layers=2, n_heads=2)
    alone = np.concatenate([policy.logits(o[None]) for o in obs])
    policy._drop_caches()
    chain, last = policy._chains(obs, actions, (obs[:, policy.prompt_width:] != 0).sum(axis=1))
    assert len(last) == len(set(owner.tolist()))  # one answer per episode, env tokens and all
    fed = []
    hook = policy.net.head.register_forward_hook(lambda module, args, out: fed.append(args[0].shape[0]))
    together = policy.network_logits(policy.net, obs, actions).detach().numpy()
    hook.remove()
    np.testing.assert_allclose(together, alone, atol=1e-9)
    # The head predicts exactly one token per action: the tokens the calculator wrote are never a
    # prediction, so no log-prob, policy gradient or KL term is taken on them.
    assert fed == [len(actions)]
    if calculator:
        written = int((obs[-1][policy.prompt_width:] != 0).sum()) + 1 - int((owner == owner[-1]).sum())
        assert written > 0  # the last episode's transcript holds tokens that are not its actions


def test_the_loss_gradient_flows_through_actions_only():
    venv, obs, actions, _ = _rollout(True)
    policy = TransformerPolicy(venv.single_observation_space, len(venv.task.vocab), 1e-3, seed=0,
                               dtype="float64", d_model=32, n_layers=2, n_heads=2)
    logits = policy.network_logits(policy.net, obs, actions)
    logp = torch.log_softmax(logits, dim=-1)[torch.arange(len(actions)), torch.as_tensor(actions)]
    grad_out = torch.autograd.grad(logp.sum(), logits)[0]
    # every row of the gradient belongs to an action the policy took; there is no row for the env's tokens
    assert grad_out.shape == (len(actions), len(venv.task.vocab))
    # ...while the transcripts hold more tokens than that: the calculator's, in the observations only
    venv2, obs2, actions2, owner2 = _rollout(True)
    t = (obs2[:, policy.prompt_width:] != 0).sum(axis=1)
    last_rows = [np.flatnonzero(owner2 == e)[-1] for e in set(owner2.tolist())]
    transcript_tokens = int(sum(t[r] + 1 for r in last_rows))
    assert transcript_tokens > len(actions2)


def test_a_rollout_records_the_env_stats_and_the_metrics_report_them():
    from agents.grpo.rollout import VectorGroupRunner, rollout_metrics

    runner = VectorGroupRunner("rlvr/CountdownThink-v0", {"n_numbers": 3, "calculator": True,
                                                          "observation": "tokens", "max_length": 40},
                               n_groups=2, group_size=4, use_masks=True)
    space = runner.venv.unwrapped.single_observation_space
    policy = TransformerPolicy(space, len(runner.task.vocab), 1e-3, seed=0, d_model=16, n_layers=1, n_heads=2)
    batch = runner.collect(policy, np.random.default_rng(0))
    assert set(batch.stats) == {"actions", "steps", "backs", "calculator_calls", "step_pass_rate", "consistent"}
    assert not np.isnan(batch.stats["steps"]).any()
    np.testing.assert_array_equal(batch.stats["actions"], batch.lengths)  # the policy's tokens are its steps
    batch.correct[:] = [1, 0, 1, 0, 0, 0, 0, 0]
    batch.stats["consistent"][:] = [1, 0, 0, 0, 0, 0, 0, 0]
    m = rollout_metrics(batch, batch.returns.reshape(2, 4))
    assert m["rollout/consistency"] == 0.5 and "rollout/calculator_calls_mean" in m
    assert m["rollout/ep_len_correct_mean"] == batch.lengths[[0, 2]].mean()
    assert m["rollout/ep_len_wrong_mean"] == batch.lengths[[1, 3, 4, 5, 6, 7]].mean()
    sub = batch.select_groups(np.array([1]))
    assert len(sub.stats["steps"]) == 4


@pytest.mark.parametrize("calculator", [False, True])
def test_the_kv_cache_serves_rows_that_grow_by_several_tokens_exactly(calculator):
    n = 24
    venv = gym.make_vec("rlvr/CountdownThink-v0", num_envs=n, vectorization_mode="vector_entry_point",
                        n_numbers=3, calculator=calculator, observation="tokens", autoreset_mode="Disabled").unwrapped
    obs, _ = venv.reset(seed=0)
    space = venv.single_observation_space
    cached = TransformerPolicy(space, 24, 1e-3, seed=0, dtype="float64", d_model=32, n_layers=2, n_heads=2)
    fresh = TransformerPolicy(space, 24, 1e-3, seed=0, dtype="float64", d_model=32, n_layers=2, n_heads=2)
    rng = np.random.default_rng(3)
    active = np.ones(n, dtype=bool)
    calls = 0
    while active.any():
        idx = np.flatnonzero(active)
        logits = cached.logits(obs[idx])
        fresh._drop_caches()
        np.testing.assert_allclose(logits, fresh.logits(obs[idx]), atol=1e-10)
        masks = venv.action_masks()[idx]
        acts = np.zeros(n, dtype=np.int64)
        acts[idx] = [rng.choice(np.flatnonzero(m)) for m in masks]
        obs, _, te, tr, _ = venv.step(acts)
        active &= ~(te | tr)
        calls += 1
    assert cached.cache_hits == calls - 1  # every call after the first is served by the cache
