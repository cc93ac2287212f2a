"""The GRPO agent: config validation, policies, gradients, determinism, checkpoints, generic envs."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401
from agents import GRPO, GRPOConfig
from agents.grpo.objective import LossSettings, LossTerms, SurrogateSettings, grpo_token_loss
from agents.policies import Loss, TabularPolicy, log_softmax
from agents.grpo.rollout import detect_group_mode
from agents.grpo.update import entropy_logits_grad

ENV = "rlvr/Arithmetic-v0"
PPO_CLIP = LossSettings(beta=0.04, surrogate=SurrogateSettings(clip_eps=0.2))  # the paper's loss


# ------------------------------------------------------------------------------------------------
# Config
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("group_size", 1, "group_size=1 must be at least 2"),
        ("group_size", 2.5, "must be an integer"),
        ("prompts_per_iter", 0, "at least 1"),
        ("epochs", 0, "at least 1"),
        ("clip_eps", 0.0, "clip_eps=0.0 must be > 0"),
        ("clip_eps", -0.1, "must be > 0"),
        ("clip_eps", 1.0, "must be < 1"),
        ("beta", -0.01, "beta=-0.01 must be >= 0"),
        ("beta", float("nan"), "finite"),
        ("learning_rate", 0.0, "must be > 0"),
        ("learning_rate", float("inf"), "finite"),
        ("adv_eps", 0.0, "> 0"),
        ("kl_estimator", "k4", "is not one of"),
        ("advantage", "vtrace", "is not one of"),
        ("loss_aggregation", "max", "is not one of"),
        ("length_weight", -1.0, ">= 0"),
        ("max_grad_norm", 0.0, "> 0"),
        ("unbiased_std", 1, "must be a bool"),
        ("tabular_optimizer", "rmsprop", "is not one of"),
        ("clip_eps_high", 0.0, "clip_eps_high=0.0 must be > 0"),
        ("dual_clip_c", 1.0, "dual_clip_c=1.0 must be > 1"),
        ("policy_loss", "ppo2", "policy_loss='ppo2' is not one of"),
        ("kl_cov_ratio", 0.0, "kl_cov_ratio=0.0 must be > 0"),
        ("kl_cov_ratio", 1.5, "must be <= 1"),
        ("kl_cov_coef", -1.0, ">= 0"),
        ("entropy_coef", -0.1, "entropy_coef=-0.1 must be >= 0"),
        ("mask_truncated", 1, "mask_truncated=1 must be a bool"),
        ("dynamic_sampling", "yes", "must be a bool"),
        ("dynamic_sampling_max_rounds", 0, "must be at least 1"),
        ("token_sum_norm", 0, "token_sum_norm=0 must be at least 1"),
        ("clip_cov_ratio", 0.0, "clip_cov_ratio=0.0 must be > 0"),
        ("clip_cov_ub", 0.5, "clip_cov_ub=0.5 must exceed clip_cov_lb=1.0"),
    ],
)
def test_config_rejects_impossible_settings(field: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GRPOConfig(**{field: value})


def test_dual_clip_must_exceed_the_upper_clip_bound() -> None:
    # at or below 1 + clip_eps_high the dual clip cuts into the clipped objective, where verl and TRL differ
    for kwargs, bound in (({"dual_clip_c": 1.1}, "1.2"), ({"dual_clip_c": 1.2}, "1.2"),
                          ({"dual_clip_c": 1.25, "clip_eps_high": 0.28}, "1.28")):
        with pytest.raises(ValueError, match=rf"dual_clip_c={kwargs['dual_clip_c']} must exceed 1 \+ "
                                             rf"clip_eps_high = {bound} "):
            GRPOConfig(**kwargs)
    # a preset's clip-higher counts too: the countdown preset's 0.28 makes 1.25 too small
    GRPOConfig(dual_clip_c=1.25)
    with pytest.raises(ValueError, match=r"dual_clip_c=1.25 must exceed 1 \+ clip_eps_high = 1.28"):
        GRPOConfig.preset("countdown", dual_clip_c=1.25)
    assert GRPOConfig(dual_clip_c=1.3, clip_eps_high=0.28).dual_clip_c == 1.3


def test_config_rejects_variant_combinations_that_would_do_nothing() -> None:
    with pytest.raises(ValueError, match="dual_clip_c=3.0 applies to policy_loss='vanilla' only"):
        GRPOConfig(dual_clip_c=3.0, policy_loss="gspo")
    with pytest.raises(ValueError, match="policy_loss='gspo' needs loss_aggregation='seq_mean_token_mean'"):
        GRPOConfig(policy_loss="gspo", loss_aggregation="token_mean")
    with pytest.raises(ValueError, match="'kl_cov': it does not clip"):
        GRPOConfig(policy_loss="kl_cov", clip_eps_high=0.28)


def test_config_minibatches_must_fit_groups() -> None:
    with pytest.raises(ValueError, match="minibatches=5 must not exceed prompts_per_iter=4"):
        GRPOConfig(prompts_per_iter=4, minibatches=5)


def test_config_round_trips_and_rejects_unknown_fields() -> None:
    cfg = GRPOConfig(group_size=4, beta=0.01)
    assert GRPOConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown GRPOConfig fields \\['discount'\\]"):
        GRPOConfig.from_dict({"discount": 0.99})
    docs = GRPOConfig.field_docs()
    assert set(docs) == {f.name for f in dataclasses.fields(GRPOConfig)}
    assert "G:" in docs["group_size"] and "epsilon" in docs["clip_eps"]


def test_agent_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="policy='cnn'"):
        GRPO(ENV, policy="cnn")
    with pytest.raises(ValueError, match="seed=-1"):
        GRPO(ENV, seed=-1)
    with pytest.raises(ValueError, match="Discrete action space"):
        GRPO("Pendulum-v1")
    model = GRPO(ENV)
    with pytest.raises(ValueError, match="total_timesteps=0"):
        model.learn(0)
    with pytest.raises(ValueError, match="fits neither"):
        model.predict(np.zeros(7, dtype=np.float32))


# ------------------------------------------------------------------------------------------------
# Policies and gradients
# ------------------------------------------------------------------------------------------------
def _random_batch(rng: np.random.Generator, n: int = 12, dim: int = 4):
    obs = (rng.random((n, dim)) < 0.5).astype(np.float32)
    actions = rng.integers(0, 5, size=n)
    return obs, actions


def test_tabular_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    obs, actions = _random_batch(rng)
    policy = TabularPolicy(gym.spaces.Box(0, 1, (4,)), 5, learning_rate=1.0, optimizer="sgd")
    policy.observe(obs)
    policy.table = rng.normal(size=policy.table.shape)
    adv = rng.normal(size=(len(actions), 1))
    rows = policy._row_ids(obs, insert=False)
    logp_old = log_softmax(policy.table[rows])[np.arange(len(rows)), actions][:, None] + 0.05
    logp_ref = np.full((len(rows), 1), -np.log(5))
    mask = np.ones((len(rows), 1))

    def loss_of(table: np.ndarray) -> float:
        logp = log_softmax(table[rows])[np.arange(len(rows)), actions][:, None]
        return grpo_token_loss(logp, logp_old, logp_ref, adv, mask, PPO_CLIP).loss

    def loss_fn(logp: np.ndarray) -> LossTerms:
        t = grpo_token_loss(logp[:, None], logp_old, logp_ref, adv, mask, PPO_CLIP)
        return LossTerms(t.loss, t.grad_logp.reshape(-1), t.policy_loss, t.kl, t.clip_frac)

    before = policy.table.copy()
    h = 1e-6
    numeric = np.zeros_like(before)
    for idx in np.ndindex(*before.shape):
        up, down = before.copy(), before.copy()
        up[idx] += h
        down[idx] -= h
        numeric[idx] = (loss_of(up) - loss_of(down)) / (2 * h)
    policy.update(obs, actions, Loss(loss_fn))  # SGD with lr 1: table moves by exactly -gradient
    np.testing.assert_allclose(before - policy.table, numeric, atol=1e-6)


def test_mlp_gradient_matches_autograd_of_the_same_loss() -> None:
    torch = pytest.importorskip("torch")
    from agents.policies.mlp import MLPPolicy

    rng = np.random.default_rng(1)
    obs, actions = _random_batch(rng, dim=6)
    policy = MLPPolicy(gym.spaces.Box(0, 1, (6,)), 5, learning_rate=1e-3, seed=0, max_grad_norm=None)
    adv = rng.normal(size=len(actions))
    logp_old = policy.reference_logp(obs, actions) + rng.normal(scale=0.1, size=len(actions))
    logp_ref = policy.reference_logp(obs, actions)
    eps, beta = 0.2, 0.04

    # Independent torch formula of the GRPO token loss (seq_mean_token_mean with L=1 is a plain mean).
    x = torch.as_tensor(obs).double()
    logp = torch.log_softmax(policy.net(x), -1)[torch.arange(len(actions)), torch.as_tensor(actions)]
    ratio = torch.exp(logp - torch.as_tensor(logp_old))
    a = torch.as_tensor(adv)
    surr = torch.min(ratio * a, torch.clamp(ratio, 1 - eps, 1 + eps) * a)
    log_r = torch.as_tensor(logp_ref) - logp
    k3 = torch.exp(log_r) - log_r - 1
    loss = -(surr - beta * k3).mean()
    expected = torch.autograd.grad(loss, list(policy.net.parameters()))

    captured: list = []

    def loss_fn(lp: np.ndarray) -> LossTerms:
        t = grpo_token_loss(lp[:, None], logp_old[:, None], logp_ref[:, None], adv[:, None],
                            np.ones((len(lp), 1)),
                            LossSettings(beta=beta, surrogate=SurrogateSettings(clip_eps=eps)))
        return LossTerms(t.loss, t.grad_logp.reshape(-1), t.policy_loss, t.kl, t.clip_frac)

    original_step = policy.optimizer.step
    policy.optimizer.step = lambda *a, **k: captured.extend(  # type: ignore[method-assign]
        p.grad.clone() for p in policy.net.parameters()
    )
    policy.update(obs, actions, Loss(loss_fn))
    policy.optimizer.step = original_step  # type: ignore[method-assign]
    for got, want in zip(captured, expected):
        torch.testing.assert_close(got, want)


def test_mlp_actor_has_sb3_ppo_actor_shape() -> None:
    pytest.importorskip("torch")
    from stable_baselines3 import PPO

    env = gym.make(ENV)
    ppo = PPO("MlpPolicy", env, seed=0)
    actor = [ppo.policy.mlp_extractor.policy_net, ppo.policy.action_net]
    ppo_actor_params = sum(p.numel() for m in actor for p in m.parameters())
    grpo = GRPO(ENV, policy="mlp", seed=0)
    assert grpo.num_parameters() == ppo_actor_params
    # Same layer shapes, layer by layer.
    ppo_shapes = [tuple(p.shape) for m in actor for p in m.parameters()]
    grpo_shapes = [tuple(p.shape) for p in grpo.policy.net.parameters()]  # type: ignore[attr-defined]
    assert ppo_shapes == grpo_shapes


@pytest.mark.parametrize("policy", ["tabular", "mlp"])
def test_parameters_change_after_one_update(policy: str) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=4), policy=policy, seed=0,
                 env_kwargs={"format_weight": 1.0})
    before = {k: v.copy() for k, v in model.policy.state().items()}
    for _ in range(20):  # until some group's rewards differ (the first malformed/well-formed split)
        model.learn(80, reset_num_timesteps=False)
        if model.last_metrics["rollout/zero_std_group_frac"] < 1.0:
            break
    after = model.policy.state()
    key = "table" if policy == "tabular" else "net.2.weight"
    assert after[key].shape != before[key].shape or not np.array_equal(after[key], before[key])


def test_tabular_needs_no_torch() -> None:
    code = (
        "import sys, rlvr_env; from agents import GRPO, GRPOConfig;"
        "m = GRPO('rlvr/Arithmetic-v0', GRPOConfig(group_size=4, prompts_per_iter=2), policy='tabular');"
        "m.learn(200); m.evaluate('test'); assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


# ------------------------------------------------------------------------------------------------
# Determinism, learning, checkpoints
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["tabular", "mlp"])
def test_seeded_runs_repeat_exactly(policy: str) -> None:
    curves = []
    for _ in range(2):
        model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=4), policy=policy, seed=3)
        curve: list[dict[str, float]] = []
        model.learn(640, callback=lambda m, met: curve.append(
            {k: v for k, v in met.items() if not k.startswith("time/fps")}))
        curves.append((curve, {k: v.copy() for k, v in model.policy.state().items()}))
    assert curves[0][0] == curves[1][0]
    for key in curves[0][1]:
        np.testing.assert_array_equal(curves[0][1][key], curves[1][1][key])


def test_seeded_training_raises_greedy_success_from_cold_start() -> None:
    # Margin: with the tabular preset, after 60k steps the last 10 iterations' mean solve rate was
    # 0.65-1.00 over seeds 0-9 (and <= 0.005 over the first 10), so 0.3 does not hang on one seed.
    # (At 30k it ranged 0.0-0.75: seed 2 had not started.) The bugs this test used to be the only
    # guard against have direct tests: k3 clamp, vector-path prompt replay, frozen reference.
    model = GRPO(ENV, policy="tabular", seed=0)  # the tabular preset
    cold = model.evaluate("train")
    solve_rates: list[float] = []
    model.learn(60_000, callback=lambda m, met: solve_rates.append(met["rollout/solve_rate"]))
    assert model.evaluate("train") > cold
    assert np.mean(solve_rates[-10:]) > 0.3
    assert np.mean(solve_rates[:10]) < 0.05


def test_default_has_one_meaning_a_partial_config_keeps_the_preset() -> None:
    # GRPO(env, GRPOConfig(beta=0.01)) once dropped the preset (G=8 instead of 32).
    for policy in ("tabular", "mlp"):
        model = GRPO(ENV, GRPOConfig(beta=0.01), policy=policy)
        assert model.config == GRPOConfig.preset(policy, beta=0.01)
        assert GRPO(ENV, GRPOConfig(), policy=policy).config == GRPO(ENV, policy=policy).config
    assert GRPO(ENV, GRPOConfig(beta=0.01), policy="tabular").config.group_size == 32
    paper = GRPOConfig.preset("paper")
    assert (paper.group_size, paper.prompts_per_iter, paper.advantage, paper.beta) == (8, 8, "grpo", 0.04)
    # a fully set config (e.g. the paper preset) means the same under either policy
    assert GRPO(ENV, paper, policy="tabular").config.group_size == 8
    assert GRPOConfig(group_size=4).resolve("tabular").group_size == 4
    with pytest.raises(ValueError, match="minibatches=4 must not exceed prompts_per_iter=2"):
        GRPOConfig(minibatches=4).resolve("tabular")


def test_presets_are_the_defaults_and_reject_unknown_policies() -> None:
    assert GRPO(ENV, policy="tabular").config == GRPOConfig.preset("tabular")
    assert GRPOConfig.preset("tabular").advantage == "dr_grpo"
    assert GRPOConfig.preset("mlp", beta=0.0).beta == 0.0
    with pytest.raises(ValueError, match="no preset for policy='cnn'"):
        GRPOConfig.preset("cnn")
    with pytest.raises(ValueError, match="unknown GRPOConfig fields"):
        GRPOConfig.preset("mlp", discount=0.9)


def test_callback_can_stop_training_and_metrics_are_named() -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2), seed=0)
    seen: list[dict[str, float]] = []
    model.learn(10_000, callback=lambda m, met: seen.append(met) or len(seen) < 3)
    assert len(seen) == 3 and model.iterations == 3
    for key in ("rollout/reward_mean", "rollout/solve_rate", "rollout/format_violations",
                "rollout/zero_std_group_frac", "train/policy_loss", "train/kl", "train/clip_frac",
                "train/entropy", "time/fps"):
        assert key in seen[-1]


@pytest.mark.parametrize("policy", ["tabular", "mlp"])
def test_save_load_round_trip_predicts_identically(policy: str, tmp_path: Path) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=4), policy=policy, seed=1)
    model.learn(640)
    path = tmp_path / "model.zip"
    model.save(path)
    loaded = GRPO.load(path)
    env = gym.make(ENV, split="test")
    obs = np.stack([env.reset(seed=i)[0] for i in range(20)])
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  loaded.predict(obs, deterministic=True)[0])
    np.testing.assert_array_equal(model.predict(obs)[0], loaded.predict(obs)[0])  # same rng state
    assert loaded.num_timesteps == model.num_timesteps and loaded.config == model.config
    # Training continues identically after a load.
    model.learn(320, reset_num_timesteps=False)
    loaded.learn(320, reset_num_timesteps=False)
    for key, value in model.policy.state().items():
        np.testing.assert_allclose(loaded.policy.state()[key], value)


def test_load_rejects_truncated_foreign_and_tampered_files(tmp_path: Path) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2), seed=0)
    model.learn(200)
    good = tmp_path / "good.zip"
    model.save(good)
    data = good.read_bytes()

    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated.zip"):
        GRPO.load(truncated)

    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(foreign, "w") as zf:
        zf.writestr("data", "{}")
    with pytest.raises(ValueError, match="no 'grpo.json'"):
        GRPO.load(foreign)

    text = tmp_path / "notes.zip"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a GRPO checkpoint"):
        GRPO.load(text)

    # A pickled object array inside policy.npz must be refused, not unpickled.
    pickled = tmp_path / "pickled.zip"
    import io

    buf = io.BytesIO()
    np.savez(buf, table=np.array([object()], dtype=object))
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(pickled, "w") as dst:
        dst.writestr("grpo.json", src.read("grpo.json"))
        dst.writestr("policy.npz", buf.getvalue())
    with pytest.raises(ValueError, match="pickled"):
        GRPO.load(pickled)

    wrong_shape = tmp_path / "shape.zip"
    buf = io.BytesIO()
    np.savez(buf, table=np.zeros((2, 3)), keys=np.zeros((2, 4), np.uint8), adam_m=np.zeros(0),
             adam_v=np.zeros(0), adam_t=np.array(0))
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(wrong_shape, "w") as dst:
        dst.writestr("grpo.json", src.read("grpo.json"))
        dst.writestr("policy.npz", buf.getvalue())
    with pytest.raises(ValueError, match="does not fit 5 actions"):
        GRPO.load(wrong_shape)


def test_flipped_bytes_inside_a_member_are_not_a_checkpoint(tmp_path: Path) -> None:
    # Damage inside a compressed member fails the CRC check or zlib's inflate; both must read as the
    # same clear error as any other corruption, never a raw zlib.error.
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2), seed=0)
    good = tmp_path / "good.zip"
    model.save(good)
    data = good.read_bytes()
    with zipfile.ZipFile(good) as zf:
        members = zf.infolist()
    assert {m.filename for m in members} == {"grpo.json", "policy.npz"}
    for member in members:
        start = member.header_offset + 30 + len(member.filename) + len(member.extra)  # local header
        middle = start + member.compress_size // 2
        damaged = bytearray(data)
        damaged[middle:middle + 8] = bytes(b ^ 0xFF for b in damaged[middle:middle + 8])
        bad = tmp_path / f"flipped_{member.filename}.zip"
        bad.write_bytes(bytes(damaged))
        with pytest.raises(ValueError, match=rf"flipped_{member.filename}.zip is not a GRPO checkpoint .*"
                                             rf"'{member.filename}' is corrupt"):
            GRPO.load(bad)


@pytest.mark.filterwarnings("ignore:Path .* does not exist. Will create it")
def test_save_and_load_add_zip_as_sb3_does(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2), seed=0)
    model.learn(200)
    ppo = PPO("MlpPolicy", ENV, n_steps=16, batch_size=16, device="cpu")
    for name, written in (("x", "x.zip"), ("x.zip", "x.zip"), ("x.ckpt", "x.ckpt"),
                          ("new/folder/x", "new/folder/x.zip")):
        grpo_dir, ppo_dir = tmp_path / "grpo", tmp_path / "ppo"
        model.save(grpo_dir / name)
        ppo.save(ppo_dir / name)
        assert (grpo_dir / written).is_file() and (ppo_dir / written).is_file()  # the same file as SB3's
        for asked in {name, written}:  # load as SB3 does: the name as given, else with ".zip"
            assert GRPO.load(grpo_dir / asked).num_timesteps == model.num_timesteps
            PPO.load(ppo_dir / asked, device="cpu")
        for folder in (grpo_dir, ppo_dir):
            for f in sorted(folder.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
    with pytest.raises(FileNotFoundError):
        GRPO.load(tmp_path / "missing")


# ------------------------------------------------------------------------------------------------
# Generic envs
# ------------------------------------------------------------------------------------------------
class _NoisyResetEnv(gym.Env):
    """reset(seed=s) ignores the seed: two resets with one seed differ."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self._count = 0

    def reset(self, *, seed=None, options=None):  # type: ignore[override]
        self._count += 1
        return np.full(2, self._count % 2, dtype=np.float32), {}

    def step(self, action):  # type: ignore[override]
        return np.zeros(2, np.float32), 0.0, True, False, {}


def test_refuses_env_without_shared_start() -> None:
    with pytest.raises(ValueError, match="different observations"):
        GRPO(_NoisyResetEnv())


def test_group_modes() -> None:
    assert detect_group_mode(gym.make(ENV)) == "replay"
    assert detect_group_mode(gym.make("CartPole-v1")) == "seed"
    assert detect_group_mode(gym.make("FrozenLake-v1")) == "seed"


def test_runs_on_frozenlake_and_cartpole() -> None:
    lake = GRPO("FrozenLake-v1", GRPOConfig(group_size=4, prompts_per_iter=4), policy="tabular", seed=0,
                env_kwargs={"is_slippery": False})
    lake.learn(500)
    assert 0.0 <= lake.evaluate(n_episodes=2) <= 1.0
    pole = GRPO("CartPole-v1", GRPOConfig(group_size=4, prompts_per_iter=2), policy="mlp", seed=0)
    pole.learn(500)
    assert pole.evaluate(n_episodes=2) >= 1.0


def test_vector_and_list_rollouts_train_identically() -> None:
    results = []
    for vectorized in (False, True):
        model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=4), seed=5, vectorized=vectorized)
        assert model.vectorized is vectorized
        model.learn(3200)
        results.append((model.last_metrics["rollout/reward_mean"], model.policy.state()["table"]))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_vectorized_true_needs_a_vector_env() -> None:
    with pytest.raises(ValueError, match="native vector env"):
        GRPO("CartPole-v1", policy="mlp", vectorized=True)


@pytest.mark.parametrize(("policy", "budget"), [("tabular", 200_000), ("mlp", 300_000)])
def test_preset_reaches_full_greedy_success_on_a_fresh_seed(policy: str, budget: int) -> None:
    # Seed 10 was not used to choose the presets (benchmarks.grpo_targets reports seeds 10-19).
    model = GRPO(ENV, policy=policy, seed=10)
    reached: list[int] = []

    def stop_at_full_success(m: GRPO, metrics: dict[str, float]) -> bool:
        if m.iterations % 4 == 0 and m.evaluate("train") == 1.0 and m.evaluate("test") == 1.0:
            reached.append(m.num_timesteps)
            return False
        return True

    model.learn(budget, callback=stop_at_full_success)
    assert reached, f"{policy} GRPO did not reach 100% train and held-out success in {budget} steps"


# ------------------------------------------------------------------------------------------------
# Refusals, the command line, the progress bar
# ------------------------------------------------------------------------------------------------
def test_tabular_refuses_continuous_observations_and_unbounded_prompt_sets() -> None:
    with pytest.raises(ValueError, match="policy='tabular' needs discrete observations, and CartPole-v1"):
        GRPO("CartPole-v1", policy="tabular")
    with pytest.raises(ValueError,
                       match=r"as unbounded.*prompts\(split\).*tabular_segments.*use policy='mlp'"):
        GRPO("rlvr/Countdown-v0", policy="tabular")
    GRPO("FrozenLake-v1", policy="tabular")  # Discrete observations: fine
    GRPO("CartPole-v1", policy="mlp")


def test_help_shows_what_will_run() -> None:
    from agents.grpo.__main__ import build_parser

    text = " ".join(build_parser().format_help().split())
    tab, mlp, tr = GRPOConfig.preset("tabular"), GRPOConfig.preset("mlp"), GRPOConfig.preset("transformer")
    assert f"(runs with: tabular {tab.group_size}, mlp {mlp.group_size}, transformer {tr.group_size})" in text
    assert f"(runs with: tabular {tab.advantage}, mlp {mlp.advantage}, transformer {tr.advantage})" in text
    assert "(default: 8)" not in text


def test_cli_steps_per_second_counts_only_training(monkeypatch, capsys) -> None:
    import time

    from agents.grpo import __main__ as cli
    from agents.grpo import agent as agent_module

    # Make the logger's set-up (SB3 + torch import, done at the start of learn) slow: 1.5 s.
    original = agent_module.GRPO.logger.fget

    def slow_logger(self):
        if self._logger is None:
            time.sleep(1.5)
        return original(self)

    monkeypatch.setattr(agent_module.GRPO, "logger", property(slow_logger))
    cli.main(["--total-timesteps", "300", "--group-size", "4", "--prompts-per-iter", "2"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("trained"))
    seconds = float(line.split(" in ")[1].split(" s ")[0])
    assert seconds < 1.0, line


def test_progress_bar_ends_exactly_at_the_total(monkeypatch) -> None:
    from agents.grpo import hooks

    class FakeBar:
        def __init__(self, total: int) -> None:
            self.total, self.n, self.postfix = total, 0, ""

        def update(self, k: int) -> None:
            self.n += k

        def set_postfix_str(self, text: str, refresh: bool = True) -> None:
            self.postfix = text

        def close(self) -> None:
            pass

    bars: list[FakeBar] = []
    monkeypatch.setattr(hooks, "progress_bar",
                        lambda enabled, total: bars.append(FakeBar(total)) or bars[-1])
    model = GRPO(ENV, seed=0)  # tabular preset: 64 episodes x 5 tokens = 320 steps per iteration
    model.learn(1000, progress_bar=True)
    assert model.num_timesteps == 1280
    assert bars[0].n == bars[0].total == 1000
    assert "+280 steps" in bars[0].postfix


@pytest.mark.parametrize("overshoot", [True, False])
def test_the_text_progress_bar_draws_its_finished_line_once(monkeypatch, capsys, overshoot: bool) -> None:
    """Without tqdm (hidden here) the bar is GRPO's own; its 100% line is written once (a log file keeps
    every redraw as a line)."""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    model = GRPO(ENV, seed=0)  # tabular preset: 320 steps per iteration
    model.learn(1000 if overshoot else 960, progress_bar=True)
    err = capsys.readouterr().err
    lines = [line for line in re.split(r"[\r\n]", err) if line.startswith("GRPO:")]
    finished = [line for line in lines if line.startswith("GRPO: 100%")]
    assert len(finished) == 1, lines
    assert finished[0] == lines[-1]
    assert ("+280 steps to finish the last iteration" in finished[0]) == overshoot


# ------------------------------------------------------------------------------------------------
# Direct tests of what only a seeded training run used to catch
# ------------------------------------------------------------------------------------------------
def test_vector_rollout_groups_replay_their_own_prompt() -> None:
    from agents.grpo.rollout import VectorGroupRunner, draw_prompts

    env = gym.make(ENV)
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=6), seed=0, vectorized=True)
    runner = model._runner
    assert isinstance(runner, VectorGroupRunner)
    batch = runner.collect(model.policy, np.random.default_rng(7))
    prompts = draw_prompts(runner.task, runner.split, 6, np.random.default_rng(7))
    assert len(set(prompts)) > 1  # the groups' prompts differ, so a swap would show
    first_obs = batch.obs[:, 0]  # (N, D): each episode's start
    for b, prompt in enumerate(prompts):
        expected = env.reset(options={"prompt": prompt})[0]
        for member in range(4):
            np.testing.assert_array_equal(first_obs[b * 4 + member], expected)


@pytest.mark.parametrize("policy", ["tabular", "mlp"])
def test_reference_logprobs_come_from_the_frozen_reference(policy: str, monkeypatch) -> None:
    from agents.grpo import update as update_module

    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=4, beta=0.04), policy=policy, seed=0,
                 env_kwargs={"format_weight": 1.0})
    reference = {k: v.copy() for k, v in model.policy.state().items() if k.startswith("ref.")}
    model.learn(2000)  # the policy has moved away from its initial (reference) state
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    original = update_module.grpo_token_loss

    def spy(logp, logp_old, logp_ref, adv, mask, settings, **kw):
        seen.append((logp_old.copy(), logp_ref.copy(), mask.copy()))
        return original(logp, logp_old, logp_ref, adv, mask, settings, **kw)

    monkeypatch.setattr(update_module, "grpo_token_loss", spy)
    batch = model._runner.collect(model.policy, model.rng)
    model._train_epochs(batch, np.ones(batch.returns.shape[0]))
    logp_old, logp_ref, mask = seen[0]
    valid = mask > 0
    obs, actions = batch.obs[valid], batch.actions[valid]
    if policy == "tabular":
        expected = np.full(len(actions), -np.log(model.n_actions))  # the initial, all-zero table
    else:
        import torch

        ref_net = model.policy.reference  # type: ignore[attr-defined]
        for k, v in ref_net.state_dict().items():  # the reference never moved
            np.testing.assert_array_equal(v.numpy(), reference["ref." + k])
        with torch.no_grad():
            lp = torch.log_softmax(ref_net(torch.as_tensor(obs).double()), -1).numpy()
        expected = lp[np.arange(len(actions)), actions]
    np.testing.assert_allclose(logp_ref[valid], expected)
    assert np.abs(logp_old[valid] - expected).max() > 0.1  # the sampling policy differs


def test_seq_mean_token_sum_uses_the_tasks_fixed_length(monkeypatch) -> None:
    from agents.grpo import update as update_module

    seen: list = []
    original = update_module.grpo_token_loss
    monkeypatch.setattr(update_module, "grpo_token_loss",
                        lambda *a, **kw: seen.append(a[5].max_length) or original(*a, **kw))
    model = GRPO("rlvr/Countdown-v0", GRPOConfig(group_size=4, prompts_per_iter=2,
                                                 loss_aggregation="seq_mean_token_sum"), policy="mlp")
    model.learn(50)
    assert seen and set(seen) == {12}  # Countdown's max_length, whatever the batch's padded length
    with pytest.raises(ValueError, match="token_sum_norm=5 is shorter than the env's maximum"):
        GRPO("rlvr/Countdown-v0", GRPOConfig(loss_aggregation="seq_mean_token_sum", token_sum_norm=5),
             policy="mlp")


def test_the_config_becomes_the_loss_settings_once_at_construction(monkeypatch) -> None:
    cfg = GRPOConfig(group_size=4, prompts_per_iter=2, policy_loss="clip_cov", clip_eps=0.15,
                     clip_eps_high=0.3, clip_cov_ratio=0.05, clip_cov_lb=0.5, clip_cov_ub=4.0,
                     kl_estimator="k2", loss_aggregation="seq_mean_token_sum", beta=0.02)
    built: list = []
    original = GRPOConfig.loss_settings
    monkeypatch.setattr(GRPOConfig, "loss_settings", lambda self, *a: built.append(1) or original(self, *a))
    model = GRPO(ENV, cfg, seed=0, env_kwargs={"format_weight": 1.0})
    model.learn(200)
    assert built == [1]  # once, at construction; training only reads it
    s = model._loss_settings
    assert (s.beta, s.kl_estimator, s.aggregation, s.policy_loss, s.max_length) == (
        0.02, "k2", "seq_mean_token_sum", "clip_cov", 5)  # Arithmetic's max_length
    assert s.surrogate == SurrogateSettings(0.15, 0.3, clip_cov_ratio=0.05, clip_cov_lb=0.5, clip_cov_ub=4.0,
                                            rng=model.rng)
    assert s.surrogate.rng is model.rng  # Clip-Cov draws with the agent's seeded generator
    assert GRPO(ENV, GRPOConfig(), seed=0)._loss_settings.surrogate.rng is None  # only clip_cov keeps it
    with pytest.raises(ValueError, match="resolve the config first"):
        GRPOConfig().loss_settings()


# ------------------------------------------------------------------------------------------------
# Every variant can be turned on from GRPOConfig and trains
# ------------------------------------------------------------------------------------------------
VARIANTS = {
    "clip_higher": {"clip_eps_high": 0.28},
    "dual_clip": {"dual_clip_c": 3.0},
    "gspo": {"policy_loss": "gspo", "clip_eps": 3e-3, "clip_eps_high": 4e-3},
    "cispo": {"policy_loss": "cispo", "clip_eps_high": 4.0},
    "kl_cov": {"policy_loss": "kl_cov", "kl_cov_ratio": 0.01},
    "clip_cov": {"policy_loss": "clip_cov", "clip_cov_ratio": 0.01, "clip_cov_lb": 0.0},
    "rf_pp_baseline": {"advantage": "reinforce_pp_baseline"},
    "batch_std": {"advantage": "grpo_batch_std"},
    "entropy": {"entropy_coef": 0.01},
    "mask_truncated": {"mask_truncated": True},
    "dynamic_sampling": {"dynamic_sampling": True},
    "token_sum": {"loss_aggregation": "seq_mean_token_sum"},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_variant_runs_from_the_config(name: str) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=4, **VARIANTS[name]), seed=0,
                 env_kwargs={"format_weight": 1.0})
    model.learn(2000)
    assert all(np.isfinite(v) for v in model.last_metrics.values())
    assert np.all(np.isfinite(model.policy.state()["table"]))
    assert np.abs(model.policy.state()["table"]).max() > 0  # it learned something


def test_dynamic_sampling_counts_every_rolled_out_step_and_trains_on_untied_groups(monkeypatch) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=8, prompts_per_iter=4, dynamic_sampling=True), seed=0,
                 env_kwargs={"format_weight": 1.0})
    rolled: list[int] = []
    original_collect = model._runner.collect
    monkeypatch.setattr(model._runner, "collect",
                        lambda *a: rolled.append((b := original_collect(*a)).n_steps) or b)
    trained: list = []
    original_update = model._train_epochs
    monkeypatch.setattr(model, "_train_epochs", lambda batch, adv: trained.append(
        (batch.returns.reshape(batch.n_groups, -1).copy(), batch.n_groups)) or original_update(batch, adv))
    rounds: list[float] = []
    model.learn(4000, callback=lambda m, met: rounds.append(met["rollout/sampling_rounds"]))
    assert model.num_timesteps == sum(rolled)  # every rolled-out step is counted
    assert len(rolled) == sum(rounds) > model.iterations  # some iterations needed extra rounds
    for returns, n_groups in trained:
        assert n_groups <= 4
        assert not np.any(np.all(returns == returns[:, :1], axis=1))  # no tied group is trained on
    assert any(n == 4 for _, n in trained)


def test_dynamic_sampling_stops_at_the_round_budget(monkeypatch) -> None:
    # A task every answer of which earns the same reward ties every group: nothing is trained on, and
    # each iteration stops after dynamic_sampling_max_rounds rounds.
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2, dynamic_sampling=True,
                                 dynamic_sampling_max_rounds=3, length_weight=0.0), seed=0,
                 env_kwargs={"format_weight": 0.0, "accuracy_weight": 0.0})
    updates: list = []
    monkeypatch.setattr(model, "_train_epochs", lambda *a: updates.append(1) or {})
    model.learn(120)
    assert model.last_metrics["rollout/sampling_rounds"] == 3.0
    assert model.last_metrics["rollout/trained_groups"] == 0.0 and not updates
    assert model.num_timesteps == 3 * 2 * 4 * 5


def test_mask_truncated_removes_truncated_answers_from_the_loss(monkeypatch) -> None:
    from agents.grpo import update as update_module

    seen: list = []
    original = update_module.grpo_token_loss
    monkeypatch.setattr(update_module, "grpo_token_loss",
                        lambda *a, **kw: seen.append(a[4].copy()) or original(*a, **kw))
    # unmasked: grammar-masked decoding (the default) never runs past max_length
    model = GRPO("rlvr/Countdown-v0", GRPOConfig(group_size=4, prompts_per_iter=4, mask_truncated=True,
                                                 epochs=1, action_masks=False), policy="mlp", seed=0)
    batch = model._runner.collect(model.policy, model.rng)
    assert batch.truncated is not None and batch.truncated.any() and not batch.truncated.all()
    assert np.all(batch.lengths[batch.truncated] == 12)  # cut off at Countdown's max_length
    model._train_epochs(batch, np.ones(batch.returns.shape[0]))
    mask = seen[0]
    assert np.all(mask[batch.truncated] == 0)
    np.testing.assert_array_equal(mask[~batch.truncated], batch.mask[~batch.truncated])


def test_entropy_bonus_gradient_reaches_the_tabular_parameters() -> None:
    # With a zero loss and SGD (lr 1), one update is exactly gradient ascent on the bonus
    # sum_t w_t H_t, checked against finite differences of the table.
    rng = np.random.default_rng(0)
    obs, actions = _random_batch(rng)
    obs = obs.astype(np.int8)
    pol = TabularPolicy(gym.spaces.Box(0, 1, (4,), dtype=np.int8), 5, learning_rate=1.0, optimizer="sgd")
    pol.observe(obs)
    pol.table = rng.normal(size=pol.table.shape)
    weights = np.full(len(actions), 0.5 / len(actions))
    before = pol.table.copy()
    rows = pol._row_ids(obs, insert=False)

    def bonus_of(table: np.ndarray) -> float:
        lp = log_softmax(table[rows])
        return float((weights * -(np.exp(lp) * lp).sum(-1)).sum())

    numeric = np.zeros_like(before)
    for idx in np.ndindex(*before.shape):
        up, down = before.copy(), before.copy()
        up[idx] += 1e-6
        down[idx] -= 1e-6
        numeric[idx] = (bonus_of(up) - bonus_of(down)) / 2e-6
    pol.update(obs, actions, Loss(_zero_loss, entropy_logits_grad(weights)))
    np.testing.assert_allclose(pol.table - before, numeric, atol=1e-7)


def _zero_loss(lp: np.ndarray) -> LossTerms:
    return LossTerms(0.0, np.zeros_like(lp), 0.0, 0.0, 0.0)


def test_entropy_bonus_gradient_matches_autograd_for_the_mlp() -> None:
    torch = pytest.importorskip("torch")
    from agents.policies.mlp import MLPPolicy

    rng = np.random.default_rng(2)
    obs, actions = _random_batch(rng, dim=6)
    pol = MLPPolicy(gym.spaces.Box(0, 1, (6,)), 5, learning_rate=1e-3, seed=0, max_grad_norm=None)
    with torch.no_grad():  # move away from the near-uniform initial head, where dH is ~0
        pol.net[-1].weight.mul_(300.0)
    weights = rng.uniform(0.01, 0.1, size=len(actions))
    lp = torch.log_softmax(pol.net(torch.as_tensor(obs).double()), -1)
    loss = -(torch.as_tensor(weights) * -(lp.exp() * lp).sum(-1)).sum()
    expected = torch.autograd.grad(loss, list(pol.net.parameters()))
    captured: list = []
    pol.optimizer.step = lambda *a, **k: captured.extend(  # type: ignore[method-assign]
        p.grad.clone() for p in pol.net.parameters())
    pol.update(obs, actions, Loss(_zero_loss, entropy_logits_grad(weights)))
    assert any(float(g.abs().max()) > 1e-4 for g in expected)
    for got, want in zip(captured, expected):
        torch.testing.assert_close(got, want)
