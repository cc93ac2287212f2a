"""PPO with a learned critic inside the agent (advantage="gae"): token-level GAE and the clipped value
loss pinned to hand-computed values and to plain per-token loops (verl's compute_gae_advantage_return
and compute_value_loss, written out independently), and the agent: both networks train, seeded runs
repeat, the critic warm-up leaves the policy alone, the critic starts from the cold-started policy,
checkpoints round-trip, bad settings are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401
from agents.grpo.agent import GRPO
from agents.grpo.config import GRPOConfig
from agents.grpo.objective import (
    LossSettings,
    clipped_value_loss,
    gae_advantages,
    loss_weights,
    masked_whiten,
    terminal_token_rewards,
)

torch.set_num_threads(1)
COUNTDOWN = "rlvr/Countdown-v0"
SMALL = {"d_model": 16, "n_layers": 1, "n_heads": 2}


# ------------------------------------------------------------------------------------------------
# The math, by hand
# ------------------------------------------------------------------------------------------------
def _whiten_by_hand(a: list[float]) -> np.ndarray:
    """verl's masked_whiten written out for the tokens ``a`` in the mask."""
    x = np.array(a)
    n = len(x)
    mean = x.sum() / (n + 1e-8)
    var = ((x - mean) ** 2).sum() / (n + 1e-8) * n / (n - 1)
    return (x - mean) / np.sqrt(var + 1e-8)


def test_gae_on_a_small_batch_worked_by_hand() -> None:
    # Row 0: three tokens, reward 1 at the last. Row 1: two tokens (then padding with a junk value 9),
    # reward 0. gamma = 0.9, lam = 0.8, so gamma * lam = 0.72.
    rewards = terminal_token_rewards(np.array([1.0, 0.0]), np.array([[1, 1, 1], [1, 1, 0]], float))
    assert rewards.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    values = np.array([[0.5, 0.6, 0.8], [0.2, 0.4, 9.0]])
    mask = np.array([[1, 1, 1], [1, 1, 0]], float)
    adv, ret = gae_advantages(rewards, values, mask, gamma=0.9, lam=0.8)
    # row 0: t=2: delta = 1 - 0.8 = 0.2, A = 0.2
    #        t=1: delta = 0.9 * 0.8 - 0.6 = 0.12, A = 0.12 + 0.72 * 0.2 = 0.264
    #        t=0: delta = 0.9 * 0.6 - 0.5 = 0.04, A = 0.04 + 0.72 * 0.264 = 0.23008
    # row 1: t=2 is padding: A = 0 (nothing after it), its value 9 is never used
    #        t=1: delta = 0 + 0.9 * 0 - 0.4 = -0.4, A = -0.4
    #        t=0: delta = 0.9 * 0.4 - 0.2 = 0.16, A = 0.16 + 0.72 * -0.4 = -0.128
    raw = [[0.23008, 0.264, 0.2], [-0.128, -0.4, 0.0]]
    assert np.allclose(ret, np.array(raw) + values, atol=1e-15, rtol=0)  # returns = A + V
    assert np.allclose(ret[1], [0.072, 0.0, 9.0], atol=1e-15, rtol=0)
    white = _whiten_by_hand([0.23008, 0.264, 0.2, -0.128, -0.4])
    assert np.allclose(adv[mask > 0], white, atol=1e-14, rtol=0)
    assert abs(adv[mask > 0].mean()) < 1e-8 and abs(adv[mask > 0].std(ddof=1) - 1) < 1e-6  # verl's 1e-8s


def test_gae_with_gamma_and_lambda_one_is_reward_minus_value() -> None:
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], float)
    values = np.array([[0.1, -0.3, 0.7, 0.2], [0.5, 0.25, 3.0, 3.0]])
    rewards = terminal_token_rewards(np.array([1.1, -0.5]), mask)
    _, ret = gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    assert np.allclose(ret[0], 1.1, atol=1e-15) and np.allclose(ret[1, :2], -0.5, atol=1e-15)


def test_value_loss_on_a_small_batch_worked_by_hand() -> None:
    # clip range 0.5; token 3 is padding (its numbers are junk and must not count)
    old = np.array([[0.0, 0.0, 1.0, 5.0]])
    vpred = np.array([[0.2, 1.0, 1.0, -7.0]])
    ret = np.array([[1.0, 1.0, -1.0, 20.0]])
    mask = np.array([[1, 1, 1, 0]], float)
    w = loss_weights(mask, LossSettings(beta=0.0, aggregation="token_mean"))  # 1/3 on the real tokens
    terms = clipped_value_loss(vpred, ret, old, mask, 0.5, w)
    # t0: clip(0.2) = 0.2, both errors (0.2 - 1)^2 = 0.64, gradient (0.2 - 1) / 3
    # t1: clip(1.0) = 0.5: unclipped 0, clipped (0.5 - 1)^2 = 0.25 is the larger: loss 0.25, gradient 0
    # t2: clip(1.0) = 1.0 (inside [0.5, 1.5]), both (1 + 1)^2 = 4, gradient 2 / 3
    assert terms.loss == pytest.approx(0.5 * (0.64 + 0.25 + 4.0) / 3, abs=1e-15)
    assert np.allclose(terms.grad_vpred, [[-0.8 / 3, 0.0, 2 / 3, 0.0]], atol=1e-15, rtol=0)
    assert terms.clip_frac == pytest.approx(1 / 3)
    # over the real tokens only: residuals R - v = (0.8, 0, -2), Var 4.16 / 3; Var(R) = 8 / 9
    assert terms.explained_variance == pytest.approx(1 - (4.16 / 3) / (8 / 9), abs=1e-12)


# ------------------------------------------------------------------------------------------------
# The math against plain loops (verl's recurrence and loss, written out per row and per token)
# ------------------------------------------------------------------------------------------------
def _gae_loop(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float, lam: float
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: walk the tokens in the mask from the last; a token outside the mask takes the
    advantage of the next token inside it (0 past the end); returns = raw advantage + value; then the
    advantages are whitened over the whole mask."""
    n, L = rewards.shape
    adv = np.zeros((n, L))
    for i in range(n):
        later_a, later_v = 0.0, 0.0
        for t in reversed(range(L)):
            if mask[i, t]:
                delta = rewards[i, t] + gamma * later_v - values[i, t]
                later_a = delta + gamma * lam * later_a
                later_v = values[i, t]
            adv[i, t] = later_a
    ret = adv + values
    on = [adv[i, t] for i in range(n) for t in range(L) if mask[i, t]]
    total = len(on)
    mean = sum(on) / (total + 1e-8)
    var = sum((a - mean) ** 2 for a in on) / (total + 1e-8) * total / (total - 1)
    return (adv - mean) / np.sqrt(var + 1e-8), ret


def _value_loss_loop(vpred: np.ndarray, ret: np.ndarray, old: np.ndarray, mask: np.ndarray, c: float
                     ) -> float:
    """0.5 x token mean over the mask of max((v - R)^2, (clip(v, V - c, V + c) - R)^2)."""
    total, count = 0.0, 0
    for v, r, o, m in zip(vpred.ravel(), ret.ravel(), old.ravel(), mask.ravel()):
        if m:
            clipped = min(max(v, o - c), o + c)
            total += max((v - r) ** 2, (clipped - r) ** 2)
            count += 1
    return 0.5 * total / count


@pytest.mark.parametrize("seed", range(6))
def test_gae_equals_the_plain_loop_on_random_inputs_with_masks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, L = 7, 9
    lengths = rng.integers(1, L + 1, size=n)
    mask = (np.arange(L) < lengths[:, None]).astype(float)
    if seed % 2:  # holes inside rows too (verl skips such tokens: "observation tokens")
        mask *= rng.random((n, L)) > 0.3
        mask[0, 0] = mask[1, 0] = 1.0
    rewards = rng.normal(size=(n, L))
    values = rng.normal(size=(n, L))
    gamma, lam = rng.uniform(0.5, 1.0), rng.uniform(0.0, 1.0)
    adv, ret = gae_advantages(rewards, values, mask, gamma, lam)
    want_adv, want_ret = _gae_loop(rewards, values, mask, gamma, lam)
    assert np.abs(adv - want_adv).max() < 1e-12 and np.abs(ret - want_ret).max() < 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_value_loss_equals_the_plain_loop_and_its_gradient_finite_differences(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n, L, c = 5, 6, 0.2
    mask = (np.arange(L) < rng.integers(1, L + 1, size=n)[:, None]).astype(float)
    old, ret = rng.normal(size=(n, L)), rng.normal(size=(n, L))
    vpred = old + rng.normal(scale=0.4, size=(n, L))  # some inside the clip range, some outside
    w = loss_weights(mask, LossSettings(beta=0.0, aggregation="token_mean"))
    terms = clipped_value_loss(vpred, ret, old, mask, c, w)
    assert abs(terms.loss - _value_loss_loop(vpred, ret, old, mask, c)) < 1e-12
    h = 1e-6
    for i, t in zip(*np.nonzero(mask)):
        up, down = vpred.copy(), vpred.copy()
        up[i, t] += h
        down[i, t] -= h
        fd = (clipped_value_loss(up, ret, old, mask, c, w).loss
              - clipped_value_loss(down, ret, old, mask, c, w).loss) / (2 * h)
        assert abs(fd - terms.grad_vpred[i, t]) < 1e-6
    assert np.all(terms.grad_vpred[mask == 0] == 0)


def test_whitening_needs_two_tokens_and_rows_need_one() -> None:
    with pytest.raises(ValueError, match="at least two tokens"):
        masked_whiten(np.ones((1, 3)), np.array([[1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="rows \\[1\\]"):
        terminal_token_rewards(np.ones(2), np.array([[1.0, 0.0], [0.0, 0.0]]))


# ------------------------------------------------------------------------------------------------
# The agent
# ------------------------------------------------------------------------------------------------
def gae_agent(seed: int = 0, **config: object) -> GRPO:
    fields = {"prompts_per_iter": 4, "group_size": 4, "advantage": "gae", "dynamic_sampling": False,
              "learning_rate": 3e-3, **config}
    cfg = GRPOConfig.preset("transformer", **fields)
    return GRPO(COUNTDOWN, cfg, policy="transformer", seed=seed, env_kwargs={"n_numbers": 3},
                policy_kwargs={**SMALL, "dtype": "float64"})


def test_gae_trains_policy_and_critic_and_seeded_runs_repeat() -> None:
    runs = []
    for _ in range(2):
        model = gae_agent(seed=3)
        before = model.policy.state()
        model.learn(200)
        after = model.policy.state()
        runs.append(after)
        for prefix in ("net.", "critic."):
            moved = [k for k in after if k.startswith(prefix) and not np.array_equal(before[k], after[k])]
            assert len(moved) > 3, prefix
        assert np.array_equal(before["ref.head.weight"], after["ref.head.weight"])  # the reference is frozen
        logged = set(model.last_metrics)
        assert {"train/value_loss", "train/explained_variance", "train/policy_loss"} <= logged
    assert runs[0].keys() == runs[1].keys() and all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])


def test_the_critic_starts_as_a_copy_of_the_policy_with_a_zero_value_head() -> None:
    model = gae_agent()
    state = model.policy.state()
    trunk = [k[4:] for k in state if k.startswith("net.") and not k.startswith("net.head.")]
    assert trunk and all(np.array_equal(state["net." + k], state["critic." + k]) for k in trunk)
    assert state["critic.head.weight"].shape == (1, SMALL["d_model"])
    assert not state["critic.head.weight"].any() and not state["critic.head.bias"].any()
    assert model.policy.critic is not model.policy.net


def test_cold_start_restarts_the_critic_from_the_fitted_policy() -> None:
    from agents.sft import cold_start

    model = gae_agent()
    model.learn(100)  # the critic has moved away from its start
    cold_start(model, 64, epochs=1, batch_size=32)
    state = model.policy.state()
    trunk = [k[4:] for k in state if k.startswith("net.") and not k.startswith("net.head.")]
    assert all(np.array_equal(state["net." + k], state["critic." + k]) for k in trunk)
    assert not state["critic.head.weight"].any()
    assert not model.policy.critic_optimizer.state_dict()["state"]  # a fresh optimiser


def test_the_critic_s_gradient_is_clipped_at_max_grad_norm() -> None:
    model = gae_agent()
    policy = model.policy
    policy.max_grad_norm = 1e-3
    batch = model._runner.collect(policy, model.rng)
    valid = batch.mask > 0
    obs, actions = batch.obs[valid], batch.actions[valid]
    n = len(actions)

    def far_returns(v: np.ndarray) -> object:  # returns 10 above every prediction: a large gradient
        return clipped_value_loss(v, v + 10.0, v, np.ones(n), 1e6, np.full(n, 1.0 / n))

    policy.update_critic(obs, actions, far_returns)
    norm = torch.nn.utils.get_total_norm([p.grad for p in policy.critic.parameters() if p.grad is not None])
    assert float(norm) <= 1e-3 * (1 + 1e-6)


def test_a_cold_start_keeps_the_critic_learning_rate() -> None:
    from agents.sft import cold_start

    model = gae_agent(critic_learning_rate=1e-2)  # the policy's step size is 3e-3
    assert model.policy.critic_optimizer.param_groups[0]["lr"] == 1e-2
    cold_start(model, 32, epochs=1, batch_size=32)
    assert model.policy.critic_optimizer.param_groups[0]["lr"] == 1e-2
    assert model.policy.optimizer.param_groups[0]["lr"] == 3e-3


def test_mlp_warm_start_restarts_the_critic_from_the_clone() -> None:
    from agents.bc import demonstrations, warm_start

    cfg = GRPOConfig.preset("mlp", advantage="gae", prompts_per_iter=4, group_size=4)
    model = GRPO(COUNTDOWN, cfg, policy="mlp", seed=0, env_kwargs={"n_numbers": 3})
    model.learn(200)
    warm_start(model, demonstrations(model.env, 50, seed=0), epochs=2)
    state = model.policy.state()
    hidden = [k[4:] for k in state if k.startswith("net.") and not k.startswith(("net.4.", "net.ref"))]
    assert hidden and all(np.array_equal(state["net." + k], state["critic." + k]) for k in hidden)
    assert state["critic.4.weight"].shape == (1, 64) and not state["critic.4.weight"].any()


def test_critic_warmup_updates_only_the_critic() -> None:
    model = gae_agent(critic_warmup=2)
    before = model.policy.state()
    model.learn(1)  # one iteration: inside the warm-up
    mid = model.policy.state()
    assert all(np.array_equal(before[k], mid[k]) for k in before if k.startswith("net."))
    assert any(not np.array_equal(before[k], mid[k]) for k in before if k.startswith("critic."))
    assert "train/policy_loss" not in model.last_metrics and "train/value_loss" in model.last_metrics
    model.learn(1, reset_num_timesteps=False)  # the second warm-up iteration
    assert all(np.array_equal(before[k], model.policy.state()[k]) for k in before if k.startswith("net."))
    model.learn(1, reset_num_timesteps=False)  # warm-up over: the policy moves
    assert any(not np.array_equal(before[k], model.policy.state()[k]) for k in before if k.startswith("net."))


def test_checkpoint_round_trip_keeps_the_critic_and_continues_identically(tmp_path) -> None:
    model = gae_agent(seed=1)
    model.learn(100)
    path = tmp_path / "gae.zip"
    model.save(path)
    loaded = GRPO.load(path)
    a, b = model.policy.state(), loaded.policy.state()
    assert any(k.startswith("critic.") for k in a)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert loaded.policy.critic_optimizer.state_dict()["state"]
    model.learn(100, reset_num_timesteps=False)
    loaded.learn(100, reset_num_timesteps=False)
    a, b = model.policy.state(), loaded.policy.state()
    assert all(np.array_equal(a[k], b[k]) for k in a)  # optimiser states and generator restored too


def test_mlp_gae_with_one_answer_per_prompt_trains() -> None:
    cfg = GRPOConfig.preset("mlp", advantage="gae", group_size=1, prompts_per_iter=16)
    model = GRPO("rlvr/Arithmetic-v0", cfg, policy="mlp", seed=0, env_kwargs={"grammar_mask": True})
    before = model.policy.state()
    model.learn(200)
    after = model.policy.state()
    for prefix in ("net.", "critic."):
        assert any(not np.array_equal(before[k], after[k]) for k in before if k.startswith(prefix))


@pytest.mark.parametrize("fields, message", [
    ({"group_size": 1}, "group_size=1 must be at least 2"),
    ({"advantage": "grpo", "critic_warmup": 1}, "need a learned critic"),
    ({"advantage": "dr_grpo", "critic_learning_rate": 1e-3}, "need a learned critic"),
    ({"advantage": "gae", "gamma": 1.5}, "gamma=1.5 must be <= 1.0"),
    ({"advantage": "gae", "lam": -0.1}, "lam=-0.1 must be >= 0.0"),
    ({"advantage": "gae", "cliprange_value": 0.0}, "cliprange_value=0.0 must be > 0.0"),
    ({"advantage": "gae", "critic_learning_rate": 0.0}, "critic_learning_rate=0.0 must be > 0.0"),
    ({"advantage": "gae", "critic_warmup": -1}, "critic_warmup=-1 must be at least 0"),
    ({"advantage": "gae", "group_size": 1, "dynamic_sampling": True}, "would drop every group"),
])
def test_bad_critic_settings_are_refused_naming_the_value(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GRPOConfig(**fields)


def test_gae_with_the_tabular_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="tabular policy has none"):
        GRPO("rlvr/Arithmetic-v0", GRPOConfig(advantage="gae"), policy="tabular")
    with pytest.raises(ValueError, match="need a learned critic"):
        GRPO("rlvr/Arithmetic-v0", GRPOConfig(critic_warmup=2), policy="mlp")  # the preset's "grpo"


@pytest.mark.parametrize("minibatches, expected", [(1, [2, 3]), (4, [9, 9])])
def test_reusing_the_value_pass_for_the_first_critic_step_changes_nothing(monkeypatch, minibatches: int,
                                                                           expected: list[int]) -> None:
    """One minibatch: epoch 1 reuses the values' pass (values + epoch 2, against values + 2 epochs). Four
    (the preset's): no step sees the whole batch, so nothing is reused (values + 2 epochs x 4)."""
    runs, passes = [], []
    for reuse in (True, False):
        model = gae_agent(seed=2, epochs=2, minibatches=minibatches)
        if not reuse:
            original = model.policy.values
            monkeypatch.setattr(model.policy, "values", lambda o, a, keep=False: original(o, a, keep=False))
        forward, count = model.policy._critic_forward, [0]
        monkeypatch.setattr(model.policy, "_critic_forward", lambda o, a: count.__setitem__(0, count[0] + 1)
                            or forward(o, a))
        model.learn(100)
        runs.append(model.policy.state())
        passes.append(count[0] / model.iterations)
    assert passes == expected
    assert all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])


# ------------------------------------------------------------------------------------------------
# Where the critic differs from verl 0.9.1, as docs/variants.md ("The critic against verl") says
# ------------------------------------------------------------------------------------------------
def _variants_page() -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "variants.md").read_text(encoding="utf-8")
    return " ".join(text.split())  # the page's line breaks do not matter to what it says


def test_value_loss_rows_and_token_counts_against_verl_by_hand() -> None:
    def loss(vpred: list[list[float]], mask: list[list[float]], aggregation: str, rows: str = "all") -> float:
        v, m = np.array(vpred), np.array(mask, float)
        settings = LossSettings(beta=0.0, aggregation=aggregation, seq_mean_rows=rows)
        # returns 0 and old values = the predictions: no clipping, each token's squared error is v^2
        return clipped_value_loss(v, np.zeros_like(v), v, m, 0.5, loss_weights(m, settings)).loss

    # An answer with no token in the loss (what mask_truncated makes): verl's agg_loss divides the
    # seq-mean by the 1 non-empty answer, "all" by both answers. Each token's squared error is 1.
    ones, mask = [[1.0, 1.0], [1.0, 1.0]], [[1, 1], [0, 0]]
    assert loss(ones, mask, "seq_mean_token_mean", "all") == 0.5 * (1.0 / 2)  # 0.25
    assert loss(ones, mask, "seq_mean_token_mean", "non_empty") == 0.5 * (1.0 / 1)  # 0.5, verl's
    assert loss(ones, mask, "token_mean") == 0.5 * (2.0 / 2)  # 0.5, verl's token-mean too
    # One answer of 3 tokens, squared errors 1, 4, 1: the token mean is 6 / 3 here; verl divides by
    # 3 + 1e-8, a relative difference of 1e-8 / 3.
    ours = loss([[1.0, 2.0, 1.0]], [[1, 1, 1]], "seq_mean_token_mean")
    verl = 0.5 * 6.0 / (3 + 1e-8)
    assert ours == pytest.approx(1.0, abs=1e-15)  # the count itself, to round-off
    assert (ours - verl) / verl == pytest.approx(1e-8 / 3, rel=1e-6)
    page = _variants_page()
    for claim in ('on mask `[[1, 1], [0, 0]]` with every token\'s squared error 1, `seq_mean_rows="all"` '
                  'gives 0.25, `"non_empty"` and verl 0.5',
                  "one answer of 3 tokens with squared errors 1, 4, 1 gives 1.0 here, 3 / (3 + 1e-8) in verl",
                  "`token_mean` (verl's default `token-mean`): equal to `compute_value_loss`"):
        assert claim in page, claim
    assert "give our numbers to float64 round-off" not in page  # the old, unqualified claim


def test_critic_warmup_k_gives_k_critic_only_iterations_verl_k_minus_one() -> None:
    for k in (1, 2):
        model = gae_agent(critic_warmup=k)
        critic_only = 0
        for i in range(k + 1):
            model.learn(1, reset_num_timesteps=i == 0)
            critic_only += "train/policy_loss" not in model.last_metrics
            assert "train/value_loss" in model.last_metrics
        assert critic_only == k and "train/policy_loss" in model.last_metrics, k
    # verl 0.9.1 (ray_trainer.py): global_steps starts at 1 and the actor is updated unless
    # critic_warmup > global_steps, so trainer.critic_warmup=k gives k - 1 critic-only steps
    verl = {k: sum(k > step for step in range(1, k + 2)) for k in (1, 2)}
    assert verl == {1: 0, 2: 1}
    page = _variants_page()
    assert "`critic_warmup=k` gives k critic-only iterations here" in page
    assert "k − 1 in verl" in page and "`critic_warmup=k − 1` here gives verl's count" in page


# ------------------------------------------------------------------------------------------------
# The math's input contract: float64 arithmetic whatever the inputs' dtype, named shape errors
# ------------------------------------------------------------------------------------------------
def test_value_loss_computes_in_float64_from_float32_inputs() -> None:
    # A policy hands float32 arrays over; the loss must be the float64 loss of those same numbers (old
    # + c and Var(R) rounded to float32 would move the clipping bound and the explained variance).
    rng = np.random.default_rng(7)
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
    old = rng.normal(size=(2, 4)).astype(np.float32)
    ret = rng.normal(size=(2, 4)).astype(np.float32)
    vpred = (old + rng.normal(scale=0.5, size=(2, 4))).astype(np.float32)
    w = loss_weights(mask.astype(float), LossSettings(beta=0.0, aggregation="token_mean")).astype(np.float32)
    low = clipped_value_loss(vpred, ret, old, mask, 0.1, w)
    high = clipped_value_loss(*(a.astype(np.float64) for a in (vpred, ret, old, mask)), 0.1, w.astype(float))
    assert low.loss == high.loss and low.explained_variance == high.explained_variance
    assert low.clip_frac == high.clip_frac > 0
    assert low.grad_vpred.dtype == np.float64 and np.array_equal(low.grad_vpred, high.grad_vpred)


def test_gae_and_token_rewards_return_float64_arrays_of_the_mask_s_shape() -> None:
    mask = np.array([[1, 1, 0], [1, 0, 0]], np.int64)
    rewards = terminal_token_rewards(np.array([[2], [3]], np.int64), mask)  # a column of rewards, ints
    assert rewards.dtype == np.float64 and rewards.tolist() == [[0.0, 2.0, 0.0], [3.0, 0.0, 0.0]]
    adv, ret = gae_advantages(rewards.astype(np.float32), np.zeros((2, 3), np.float32), mask, 1.0, 1.0)
    assert adv.dtype == ret.dtype == np.float64 and adv.shape == ret.shape == (2, 3)
    assert ret.tolist() == [[2.0, 2.0, 0.0], [3.0, 0.0, 0.0]]


def test_whitening_of_exactly_two_tokens() -> None:
    got = masked_whiten(np.array([[1.0, 3.0, 50.0]]), np.array([[1.0, 1.0, 0.0]]))
    assert np.allclose(got[0, :2], _whiten_by_hand([1.0, 3.0]), atol=1e-15, rtol=0)
    assert np.allclose(got[0, :2], [-1 / np.sqrt(2), 1 / np.sqrt(2)], atol=1e-7)


def test_token_rewards_of_one_token_rows_and_their_shape_errors() -> None:
    got = terminal_token_rewards(np.array([2.0, 3.0]), np.array([[1.0, 0.0], [1.0, 1.0]]))
    assert got.tolist() == [[2.0, 0.0], [0.0, 3.0]]
    with pytest.raises(ValueError, match=r"^mask has shape \(3, 2\); expected \(2, L\) for 2 rewards$"):
        terminal_token_rewards(np.ones(2), np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"^mask has shape \(2,\); expected \(2, L\) for 2 rewards$"):
        terminal_token_rewards(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"^every episode needs at least one token; rows \[0 2\] have none$"):
        terminal_token_rewards(np.ones(3), np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))


def test_gae_refuses_shapes_that_differ_or_are_not_two_dimensional() -> None:
    two, three = np.ones((1, 2)), np.ones((1, 3))
    with pytest.raises(ValueError, match=r"^token_rewards \(1, 2\), values \(1, 3\) and mask \(1, 2\) "
                                         r"must be one \(N, L\) shape$"):
        gae_advantages(two, three, two, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^token_rewards \(2,\), values \(2,\) and mask \(2,\) must be one"):
        gae_advantages(np.ones(2), np.ones(2), np.ones(2), 1.0, 1.0)


def test_value_loss_refuses_mismatched_shapes_and_a_clip_range_not_positive_and_finite() -> None:
    a, b = np.ones((1, 2)), np.ones((1, 3))
    with pytest.raises(ValueError, match=r"^vpreds \(1, 2\), returns \(1, 3\), values \(1, 2\), "
                                         r"mask \(1, 2\) and weights \(1, 2\) must have one shape$"):
        clipped_value_loss(a, b, a, a, 0.2, a)
    for bad in (0.0, -0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=rf"^cliprange_value={bad!r} must be a positive finite number$"):
            clipped_value_loss(a, a, a, a, bad, a)


def test_value_loss_of_a_batch_without_tokens_is_zero_without_warnings() -> None:
    import warnings

    z = np.zeros((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no mean of an empty slice, no 0 / 0
        terms = clipped_value_loss(np.ones((2, 3)), z, z, z, 0.2, z)
    assert terms.loss == 0.0 and terms.clip_frac == 0.0 and np.isnan(terms.explained_variance)
    assert not terms.grad_vpred.any()
    # returns that do not vary over the mask: the explained variance is undefined (nan), not an error
    flat = clipped_value_loss(np.zeros((1, 2)), np.ones((1, 2)), np.zeros((1, 2)), np.ones((1, 2)), 0.2,
                              np.full((1, 2), 0.5))
    assert np.isnan(flat.explained_variance) and flat.clip_frac == 0.0
