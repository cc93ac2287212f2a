"""rlvr_env.to_sb3_vec_env: SB3's VecEnv API over the native vector envs."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize

import rlvr_env
from rlvr_env import Prompt
from rlvr_env.envs import UnsupportedRenderMode
from rlvr_env.sb3 import SB3VecEnv
from rlvr_env.text_env import TextAsArrays

COUNTDOWN = "rlvr/Countdown-v0"
ARITHMETIC = "rlvr/Arithmetic-v0"
CASES: list[tuple[str, dict[str, Any]]] = [
    (COUNTDOWN, {"n_numbers": 3}),
    (COUNTDOWN, {"n_numbers": 4, "number_use": "exactly_once", "format_weight": 0.5}),
    (ARITHMETIC, {}),
]
INFO_KEYS = ("TimeLimit.truncated", "prompt", "reward_parts", "correct", "well_formed", "length")


def adapter(env_id: str, num_envs: int, **kwargs: Any) -> SB3VecEnv:
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
    out = rlvr_env.to_sb3_vec_env(venv)
    assert isinstance(out, SB3VecEnv)
    return out


class ReplayPrompts(gym.Wrapper):
    """Test harness: a single env whose k-th reset starts on the k-th prompt of a given list."""

    def __init__(self, env: gym.Env, prompts: list[Prompt]) -> None:
        super().__init__(env)
        self.queue = list(prompts)

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(options={"prompt": self.queue.pop(0)})


@pytest.mark.parametrize("env_id, kwargs", CASES, ids=[f"{e}-{k}" for e, k in CASES])
@pytest.mark.parametrize("masked", [True, False])
def test_same_transitions_as_dummy_vec_env(env_id: str, kwargs: dict[str, Any], masked: bool) -> None:
    """Same seeds and prompts, same actions: the adapter and DummyVecEnv over single envs give the same
    observations, rewards, dones, masks, terminal observations and final infos, row by row."""
    n, steps = 6, 60
    ours = adapter(env_id, n, **kwargs)
    ours.seed(3)
    first_obs = ours.reset()
    prompts = [[info["prompt"]] for info in ours.reset_infos]
    rng = np.random.default_rng(0)
    record = []
    for _ in range(steps):
        masks = get_action_masks(ours)
        if masked:
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        else:
            actions = rng.integers(ours.action_space.n, size=n)
        obs, rewards, dones, infos = ours.step(actions)
        for i in np.flatnonzero(dones):
            prompts[i].append(ours.reset_infos[i]["prompt"])  # the prompt the row restarted on
        record.append((masks, actions, obs, rewards, dones, infos))
    assert sum(int(r[4].sum()) for r in record) >= n  # episodes ended along the way

    dummy = DummyVecEnv([lambda i=i: ReplayPrompts(gym.make(env_id, **kwargs), prompts[i]) for i in range(n)])
    assert np.array_equal(dummy.reset(), first_obs)
    for masks, actions, obs, rewards, dones, infos in record:
        assert np.array_equal(get_action_masks(dummy), masks)
        d_obs, d_rewards, d_dones, d_infos = dummy.step(actions)
        assert np.array_equal(d_obs, obs) and obs.dtype == d_obs.dtype == np.float32
        assert np.array_equal(d_rewards, rewards) and rewards.dtype == d_rewards.dtype
        assert np.array_equal(d_dones, dones) and dones.dtype == d_dones.dtype
        for i in range(n):
            if not dones[i]:
                assert infos[i] == {} and d_infos[i]["TimeLimit.truncated"] is False
                continue
            assert np.array_equal(infos[i]["terminal_observation"], d_infos[i]["terminal_observation"])
            assert {k: infos[i][k] for k in INFO_KEYS} == {k: d_infos[i][k] for k in INFO_KEYS}
            assert type(infos[i]["correct"]) is bool and type(infos[i]["length"]) is int


def test_seeding_repeats_and_options_replay_prompts() -> None:
    a, b = adapter(COUNTDOWN, 4, n_numbers=3), adapter(COUNTDOWN, 4, n_numbers=3)
    a.seed(7)
    b.seed(7)
    assert np.array_equal(a.reset(), b.reset())
    b.seed(8)
    assert not np.array_equal(a.reset(), b.reset())
    prompts = [Prompt((1, 2, 3), 6), Prompt((4, 5, 6), 9), Prompt((7, 8, 9), 1), Prompt((1, 1, 2), 4)]
    a.set_options([{"prompt": p} for p in prompts])
    a.reset()
    assert [info["prompt"] for info in a.reset_infos] == prompts
    a.set_options({"unknown": 1})
    with pytest.raises(ValueError, match="not supported"):
        a.reset()


@pytest.mark.parametrize("given", [(0,), (1, 3), (0, 1, 2)])
def test_options_for_only_some_envs_are_refused(given: tuple[int, ...]) -> None:
    """The native env resets every row at once, so prompts set for some envs only cannot be honoured
    (SB3's DummyVecEnv resets each env with its own options): ``reset`` says so instead of ignoring them."""
    env = adapter(COUNTDOWN, 4, n_numbers=3)
    env.set_options([{"prompt": Prompt((1, 2, 3), 6)} if i in given else {} for i in range(4)])
    missing = [i for i in range(4) if i not in given]
    with pytest.raises(ValueError, match=rf"set_options\(.*envs {re.escape(str(missing))} have no single"):
        env.reset()
    env.set_options([{"prompt": Prompt((1, 2, 3), 6)}] * 2)  # a list shorter than num_envs
    with pytest.raises(ValueError, match=r"set_options got 2 options for num_envs=4"):
        env.reset()


def test_reset_infos_follow_the_env_state() -> None:
    """Empty before the first reset, each row's prompt after it; an assignment (SB3's VecEnv.__init__
    makes one) does not replace what is read."""
    env = adapter(COUNTDOWN, 3, n_numbers=3)
    assert env.reset_infos == [{}, {}, {}]
    env.set_options([{"prompt": Prompt((1, 2, 3), 6)}] * 3)
    env.reset()
    env.reset_infos = [{}, {}, {}]
    assert [info["prompt"] for info in env.reset_infos] == [Prompt((1, 2, 3), 6)] * 3
    assert all(info["split"] in ("train", "test") for info in env.reset_infos)


def test_one_seed_seeds_one_reset_only() -> None:
    # SB3's seed(s) applies at the next reset only; later resets continue the seeded stream, so two
    # resets after one seed(0) draw different prompts (re-seeding every reset would repeat them).
    env = adapter(COUNTDOWN, 4, n_numbers=3)
    env.seed(0)
    env.reset()
    first = [info["prompt"] for info in env.reset_infos]
    env.reset()
    second = [info["prompt"] for info in env.reset_infos]
    assert first != second
    env.seed(0)
    env.reset()
    assert [info["prompt"] for info in env.reset_infos] == first  # ... and seeding again repeats


@pytest.mark.filterwarnings("ignore:.*render_mode='rgb_array' that is not in the possible render_modes")
@pytest.mark.parametrize("env_id", sorted(k for k in gym.registry if k.startswith("rlvr/")))
def test_make_vec_env_idiom_builds_every_env_id(env_id: str) -> None:
    # make_vec_env asks gym.make for render_mode="rgb_array" and retries without it on TypeError; the
    # envs draw no frames, so they refuse the mode with an error that is a TypeError (and a ValueError).
    with pytest.raises(UnsupportedRenderMode, match="'rgb_array'") as err:
        gym.make(env_id, render_mode="rgb_array")
    assert isinstance(err.value, TypeError) and isinstance(err.value, ValueError)
    text = env_id.endswith("Text-v0")  # Text spaces: SB3 needs arrays, which TextAsArrays gives
    venv = make_vec_env(env_id, n_envs=8, seed=0, wrapper_class=TextAsArrays if text else None)
    assert venv.num_envs == 8 and venv.get_attr("render_mode") == [None] * 8
    obs = venv.reset()
    assert obs.shape == (8, *venv.observation_space.shape)
    _, rewards, _, _ = venv.step(np.array([venv.action_space.sample() for _ in range(8)]))
    assert rewards.shape == (8,)


def test_refuses_what_it_cannot_wrap() -> None:
    with pytest.raises(ValueError, match="not a native rlvr_env vector env"):
        rlvr_env.to_sb3_vec_env(gym.make(COUNTDOWN))
    venv = gym.make_vec(COUNTDOWN, num_envs=2, vectorization_mode="vector_entry_point", autoreset_mode="NextStep")
    with pytest.raises(ValueError, match="autoreset_mode='NextStep'"):
        rlvr_env.to_sb3_vec_env(venv)
    env = adapter(COUNTDOWN, 2)
    with pytest.raises(AttributeError, match="not available"):
        env.env_method("step", 0)
    with pytest.raises(ValueError, match="only all of them"):
        env.set_attr("copy", True, indices=[0])


def test_attributes_methods_and_masking_support() -> None:
    env = adapter(COUNTDOWN, 3, n_numbers=3)
    env.reset()
    assert is_masking_supported(env)
    assert env.get_attr("split") == ["train"] * 3 and env.env_is_wrapped(gym.Wrapper) == [False] * 3
    masks = env.env_method("action_masks", indices=[2])
    assert len(masks) == 1 and np.array_equal(masks[0], env.base.action_masks()[2])
    env.step(np.array([0, 1, 2]))
    assert env.env_method("tokens", indices=1) == [[1]]
    assert env.env_method("expression", indices=[0])[0] == str(env.reset_infos[0]["prompt"].numbers[0])


def test_vec_monitor_and_vec_normalize_wrap_it() -> None:
    env = VecNormalize(VecMonitor(adapter(COUNTDOWN, 8, n_numbers=3)), norm_obs=True, norm_reward=True)
    env.seed(0)
    obs = env.reset()
    assert obs.shape == (8, env.observation_space.shape[0])
    rng = np.random.default_rng(0)
    episodes = []
    for _ in range(30):
        masks = get_action_masks(env)
        obs, rewards, dones, infos = env.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        episodes += [info["episode"] for info in infos if "episode" in info]
    assert episodes and all(e["l"] >= 2 and e["r"] in (0.0, 0.1, 1.1) for e in episodes)


def test_ppo_a2c_and_maskable_ppo_learn_on_it() -> None:
    for algo, kwargs in ((PPO, {"batch_size": 64, "n_epochs": 1}), (A2C, {}), (MaskablePPO, {"batch_size": 64})):
        env = adapter(COUNTDOWN, 16, n_numbers=3)
        model = algo("MlpPolicy", env, n_steps=8, seed=0, device="cpu", **kwargs)
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(total_timesteps=384)
        assert model.num_timesteps >= 384
        assert any(not np.allclose(b.numpy(), p.detach().numpy()) for b, p in zip(before, model.policy.parameters()))


def test_import_rlvr_env_needs_neither_sb3_nor_torch() -> None:
    code = "import sys, rlvr_env; print(sorted({'torch', 'stable_baselines3'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
