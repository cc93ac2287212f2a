"""The causal-transformer policy (agents.policies.transformer): KV-cached rollouts agree with one-pass
teacher forcing, checkpoints round-trip, seeded runs repeat, and SB3 PPO / MaskablePPO get the same
network (same initial weights for a seed, a fresh critic) and train with it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401
from agents.grpo.config import GRPOConfig
from agents.grpo.agent import GRPO
from agents.grpo.update import entropy_logits_grad
from agents.policies import Loss
from agents.policies.transformer import TransformerPolicy, build_network, copy_to_sb3, sb3_policy_kwargs

torch.set_num_threads(1)
ENV = "rlvr/Countdown-v0"
SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 2}


def small_agent(seed: int = 0, dtype: str = "float32", **config: object) -> GRPO:
    cfg = GRPOConfig.preset("transformer", prompts_per_iter=4, group_size=4, **config)
    return GRPO(ENV, cfg, policy="transformer", seed=seed, env_kwargs={"n_numbers": 3},
                policy_kwargs={**SMALL, "dtype": dtype})


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 2e-6)])
def test_kv_cached_rollout_logp_equals_one_pass_teacher_forcing(dtype: str, tol: float) -> None:
    model = small_agent(dtype=dtype)
    batch = model._runner.collect(model.policy, model.rng)
    hits = model.policy.cache_hits
    assert hits >= batch.mask.shape[1] - 2  # every position after the prompt's came from the cache
    valid = batch.mask > 0
    masks = batch.action_masks[valid]
    with torch.no_grad():
        one_pass = model.policy.log_prob(batch.obs[valid], batch.actions[valid], masks).double().numpy()
    assert np.abs(one_pass - batch.logp_old[valid]).max() < tol
    # the reference (the initial network, before any update) gives the same numbers
    ref = model.policy.reference_logp(batch.obs[valid], batch.actions[valid], masks)
    assert np.abs(ref - batch.logp_old[valid]).max() < tol


def test_cached_logits_equal_full_recomputation() -> None:
    space = gym.make(ENV, n_numbers=4, observation="tokens").observation_space
    a = TransformerPolicy(space, 11, 1e-3, seed=3, **SMALL, dtype="float64")
    b = TransformerPolicy(space, 11, 1e-3, seed=3, **SMALL, dtype="float64")
    envs = gym.make_vec(ENV, num_envs=8, vectorization_mode="vector_entry_point", n_numbers=4,
                        observation="tokens", autoreset_mode="Disabled")
    obs, _ = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(4):
        la = a.logits(obs)  # cached after the first call
        b._cache = None
        lb = b.logits(obs)  # always recomputed in full
        assert np.allclose(la, lb, atol=1e-10)
        masks = envs.unwrapped.action_masks()
        obs, *_ = envs.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
    assert a.cache_hits >= 1 and b.cache_hits == 0  # a row that ended stops the cache (then: full)


def test_an_update_drops_the_kv_cache() -> None:
    from agents.grpo.objective import LossTerms

    space = gym.make(ENV, n_numbers=3, observation="tokens").observation_space
    policy = TransformerPolicy(space, 10, 1e-2, seed=3, **SMALL, dtype="float64")
    envs = gym.make_vec(ENV, num_envs=4, vectorization_mode="vector_entry_point", n_numbers=3,
                        observation="tokens", autoreset_mode="Disabled")
    obs, _ = envs.reset(seed=0)
    policy.logits(obs)  # cached
    masks = envs.unwrapped.action_masks()
    actions = np.array([np.flatnonzero(m)[0] for m in masks])

    def push_up(logp: np.ndarray) -> LossTerms:  # raise the taken tokens' log-probs
        return LossTerms(float(-logp.sum()), -np.ones_like(logp), 0.0, 0.0, 0.0)

    policy.update(obs, actions, Loss(push_up))
    obs, *_ = envs.step(actions)  # every row extends a cached row by one token
    after = policy.logits(obs)
    policy._cache = None
    assert np.allclose(after, policy.logits(obs), atol=1e-10)


def test_load_state_refuses_non_finite_arrays() -> None:
    space = gym.make(ENV, n_numbers=3, observation="tokens").observation_space
    policy = TransformerPolicy(space, 10, 1e-3, seed=0, **SMALL)
    state = policy.state()
    key = next(k for k in state if k.startswith("net."))
    state[key] = np.full_like(state[key], np.nan)
    with pytest.raises(ValueError, match=f"{key}.*finite values"):
        policy.load_state(state)


def test_seeded_training_repeats_changes_parameters_and_checkpoint_round_trips(tmp_path) -> None:
    runs = []
    for _ in range(2):
        model = small_agent(seed=5)
        before = model.policy.state()["net.head.weight"].copy()
        model.learn(300)
        runs.append(model.policy.state())
    assert not np.array_equal(before, runs[0]["net.head.weight"])
    assert all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])
    path = tmp_path / "t.zip"
    model.save(path)
    loaded = GRPO.load(path)
    assert loaded.policy_name == "transformer" and loaded.env_kwargs["observation"] == "tokens"
    obs, _ = loaded.env.reset(seed=1)
    assert np.array_equal(model.policy.logits(obs[None]), loaded.policy.logits(obs[None]))
    state = loaded.policy.optimizer.state_dict()["state"]
    assert state and len(state) == len(model.policy.optimizer.state_dict()["state"])


def test_refuses_a_feature_observation_naming_the_fix() -> None:
    env = gym.make(ENV, n_numbers=3)
    with pytest.raises(ValueError, match="observation='tokens'"):
        GRPO(env, policy="transformer")


@pytest.mark.parametrize(("algo", "shared"), [("PPO", True), ("MaskablePPO", True), ("MaskablePPO", False)])
def test_sb3_gets_the_same_network_and_trains(algo: str, shared: bool) -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    cls = {"PPO": PPO, "MaskablePPO": MaskablePPO}[algo]
    env = gym.make(ENV, n_numbers=3, observation="tokens")
    n = int(env.action_space.n)
    model = cls("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0,
                policy_kwargs=sb3_policy_kwargs(n, seed=7, share_features_extractor=shared, **SMALL))
    grpo_net = build_network(env.observation_space, n, 7, **SMALL)
    lm = model.policy.features_extractor.lm
    critic = model.policy.vf_features_extractor.lm
    assert (critic is lm) == shared
    assert all(torch.equal(a, b) for a, b in zip(grpo_net.state_dict().values(), lm.state_dict().values()))
    with torch.no_grad():  # a trained-looking start, unlike any seeded init
        for p in grpo_net.parameters():
            p.add_(0.01)
    copy_to_sb3(grpo_net, model)  # the head too: now the actor is GRPO's network exactly
    for trunk in (lm, critic):  # a separate critic trunk starts from the same weights
        weights = zip(grpo_net.state_dict().values(), trunk.state_dict().values())
        assert all(torch.equal(a, b) for a, b in weights)
    obs, _ = env.reset(seed=2)
    with torch.no_grad():
        sb3 = model.policy.get_distribution(torch.as_tensor(obs[None]).float()).distribution.logits
        width = env.unwrapped.token_context.prompt_width
        hidden = grpo_net.hidden(torch.as_tensor(obs[None, :width]))[0][:, -1]
        ours = torch.log_softmax(grpo_net.head(hidden), -1)
    assert torch.allclose(sb3, ours, atol=1e-5)
    value_before = model.policy.value_net.weight.detach().clone()
    model.learn(256)
    assert model.num_timesteps >= 256
    assert not torch.equal(value_before, model.policy.value_net.weight)  # the fresh critic trained
    assert not torch.equal(grpo_net.head.weight, model.policy.action_net.weight.detach())


def test_shared_prompt_teacher_forcing_equals_the_full_rows() -> None:
    space = gym.make(ENV, n_numbers=3, observation="tokens").observation_space
    net = build_network(space, 20, seed=1, dtype="float64", **SMALL)
    p = space.prompt_width
    rng = np.random.default_rng(0)
    prompts = rng.integers(1, 26, size=(3, p))
    prompts[0, :4] = 0  # left padding of different widths
    prompts[1, :2] = 0
    owner = np.array([0, 0, 1, 2, 2, 2])
    answers = rng.integers(1, 26, size=(6, 5))
    answers[1, 3:] = 0  # right padding: a shorter answer
    with torch.no_grad():
        last, ans = net.answer_hidden(torch.as_tensor(prompts), torch.as_tensor(owner),
                                      torch.as_tensor(answers))
        full, _, start = net.hidden(torch.as_tensor(np.concatenate([prompts[owner], answers], axis=1)))
    assert start == 0
    assert torch.allclose(last[owner], full[:, p - 1], atol=1e-10)
    real = torch.as_tensor(answers != 0)
    assert torch.allclose(ans[real], full[:, p:][real], atol=1e-10)
    with torch.no_grad():  # leading all-padding columns are dropped exactly
        trimmed, _, start = net.hidden(torch.as_tensor(prompts[:1]))
        untrimmed, _, start2 = net.hidden(torch.as_tensor(prompts[[0, 2]]))  # row 2 has no padding
    assert start == 4 and trimmed.shape[1] == p - 4 and start2 == 0
    assert torch.allclose(trimmed[0], untrimmed[0, 4:], atol=1e-10)


def test_entropy_bonus_gradient_matches_autograd() -> None:
    # The update subtracts sum_t w_t H_t from the loss: with a zero loss its gradient must equal
    # autograd's of -(w * H) through the same teacher-forced pass (a flipped sign fails here).
    from agents.grpo.objective import LossTerms

    model = small_agent(dtype="float64")
    batch = model._runner.collect(model.policy, model.rng)
    valid = batch.mask > 0
    obs, actions = batch.obs[valid], batch.actions[valid]
    pol = TransformerPolicy(model.observation_space, model.n_actions, 1e-3, seed=1, max_grad_norm=None,
                            **SMALL, dtype="float64")
    with torch.no_grad():  # away from a near-uniform head, where dH is ~0
        pol.net.head.weight.mul_(30.0)
    weights = np.random.default_rng(0).uniform(0.01, 0.1, size=len(actions))
    lp = torch.log_softmax(pol.network_logits(pol.net, obs, actions), -1)
    loss = -(torch.as_tensor(weights) * -(lp.exp() * lp).sum(-1)).sum()
    params = [p for p in pol.net.parameters() if p.requires_grad]
    expected = torch.autograd.grad(loss, params, allow_unused=True)
    captured: list = []
    pol.optimizer.step = lambda *a, **k: captured.extend(  # type: ignore[method-assign]
        None if p.grad is None else p.grad.clone() for p in params)

    def zero_loss(logp: np.ndarray) -> LossTerms:
        return LossTerms(0.0, np.zeros_like(logp), 0.0, 0.0, 0.0)

    pol.update(obs, actions, Loss(zero_loss, entropy_logits_grad(weights)))
    assert any(g is not None and float(g.abs().max()) > 1e-4 for g in expected)
    for got, want in zip(captured, expected):
        if want is None:
            assert got is None or float(got.abs().max()) == 0.0
        else:
            torch.testing.assert_close(got, want)


def test_torch_init_is_pytorchs_default_drawn_from_the_seeded_generator() -> None:
    from agents.policies.transformer import TinyLM

    ours = TinyLM(30, 20, 15, seed=5, **SMALL)  # init="torch", the default
    again = TinyLM(30, 20, 15, seed=5, **SMALL)
    torch.manual_seed(123)  # the global generator must not matter
    other = TinyLM(30, 20, 15, seed=6, **SMALL)
    # PyTorch's own reset_parameters, module by module, drawing from the global generator seeded alike
    theirs = TinyLM(30, 20, 15, seed=0, init="gpt2", **SMALL)
    torch.manual_seed(5)
    for module in theirs.modules():
        if module is not theirs and hasattr(module, "reset_parameters"):
            module.reset_parameters()
    a, b, c, d = (m.state_dict() for m in (ours, theirs, again, other))
    assert all(torch.equal(a[k], b[k]) and torch.equal(a[k], c[k]) for k in a)
    assert not torch.equal(a["tok.weight"], d["tok.weight"])
    assert abs(float(a["tok.weight"].std()) - 1.0) < 0.1  # embeddings N(0, 1)
    gpt2 = TinyLM(30, 20, 15, seed=5, init="gpt2", **SMALL).state_dict()
    assert float(gpt2["tok.weight"].std()) < 0.03 and not gpt2["head.bias"].any()
    with pytest.raises(ValueError, match="init='xavier' must be one of"):
        TinyLM(30, 20, 15, seed=5, init="xavier", **SMALL)


def test_whole_number_tokens_cold_start_train_and_round_trip(tmp_path) -> None:
    from agents.sft import cold_start

    kwargs = {"n_numbers": 3, "observation": "tokens", "number_tokens": "whole"}
    model = GRPO(ENV, GRPOConfig.preset("transformer"), policy="transformer", seed=3, env_kwargs=kwargs,
                 policy_kwargs=SMALL)
    digits = GRPO(ENV, GRPOConfig.preset("transformer"), policy="transformer", seed=3,
                  env_kwargs={**kwargs, "number_tokens": "digits"}, policy_kwargs=SMALL)
    # one embedding row per context token and per position: 101 whole-number tokens more, and a prompt
    # 5 positions shorter (10 against 15: each number and the target one token instead of two digits)
    assert model.num_parameters() - digits.num_parameters() == (101 - 5) * SMALL["d_model"]
    cold_start(model, n=300, epochs=1)
    model.learn(200)
    path = tmp_path / "whole.zip"
    model.save(path)
    loaded = GRPO.load(path)
    assert loaded.env_kwargs["number_tokens"] == "whole"
    obs, _ = loaded.env.reset(seed=1)
    assert loaded.env.unwrapped.token_context.decode(obs).split()[2].startswith("[")
    assert np.array_equal(model.policy.logits(obs[None]), loaded.policy.logits(obs[None]))
