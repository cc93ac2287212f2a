"""``GRPO.learn(callback=...)`` takes SB3's callback face (``BaseCallback``,
``CallbackList``, a list, ``CheckpointCallback``, ``EvalCallback``) besides the ``(model, metrics)``
callable; see :mod:`agents.grpo.callbacks` for when each SB3 method runs."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401
from agents import GRPO

callbacks = pytest.importorskip("stable_baselines3.common.callbacks")

STEPS_PER_ITER = 2 * 32 * 5  # the tabular preset: B = 2 prompts x G = 32 answers x 5 tokens


class Recorder(callbacks.BaseCallback):
    def __init__(self, stop_after: int | None = None) -> None:
        super().__init__()
        self.events: list[str] = []
        self.stop_after = stop_after
        self.seen: list[tuple[int, int, float]] = []

    def _init_callback(self) -> None:
        self.events.append("init")

    def _on_training_start(self) -> None:
        self.events.append("training_start")
        assert self.locals["total_timesteps"] > 0 and "self" in self.locals

    def _on_rollout_start(self) -> None:
        self.events.append("rollout_start")

    def _on_rollout_end(self) -> None:
        self.events.append("rollout_end")

    def _on_step(self) -> bool:
        self.events.append("step")
        metrics = self.locals["metrics"]
        self.seen.append((self.n_calls, self.num_timesteps, metrics["rollout/solve_rate"]))
        return self.stop_after is None or self.n_calls < self.stop_after

    def _on_training_end(self) -> None:
        self.events.append("training_end")


def test_base_callback_sees_sb3_order_and_can_stop() -> None:
    model = GRPO("rlvr/Arithmetic-v0", seed=0)
    rec = Recorder(stop_after=3)
    model.learn(20 * STEPS_PER_ITER, callback=rec)
    assert model.iterations == 3 and rec.n_calls == 3
    assert rec.events == (["init", "training_start"]
                          + ["rollout_start", "rollout_end", "step"] * 3 + ["training_end"])
    assert [s[:2] for s in rec.seen] == [(i, i * STEPS_PER_ITER) for i in (1, 2, 3)]
    assert rec.model is model and rec.training_env is model.env
    assert rec.locals["metrics"] is model.last_metrics


def test_callback_list_plain_list_and_old_callable_together() -> None:
    model = GRPO("rlvr/Arithmetic-v0", seed=0)
    a, b, calls = Recorder(), Recorder(stop_after=2), []
    model.learn(10 * STEPS_PER_ITER,
                callback=[callbacks.CallbackList([a]), b, lambda m, met: calls.append(m.iterations)])
    assert model.iterations == 2 and calls == [1, 2] and a.n_calls == b.n_calls == 2
    assert a.events[-1] == b.events[-1] == "training_end"
    # The old callable alone keeps its meaning: False stops.
    model.learn(10 * STEPS_PER_ITER, callback=lambda m, met: m.iterations < 4)
    assert model.iterations == 4
    with pytest.raises(TypeError, match="neither a callable"):
        model.learn(STEPS_PER_ITER, callback=42)


def test_a_run_with_sb3_callbacks_trains_as_without() -> None:
    plain, watched = GRPO("rlvr/Arithmetic-v0", seed=3), GRPO("rlvr/Arithmetic-v0", seed=3)
    plain.learn(6 * STEPS_PER_ITER)
    watched.learn(6 * STEPS_PER_ITER, callback=Recorder())
    np.testing.assert_array_equal(plain.policy.table, watched.policy.table)


def test_checkpoint_callback_writes_real_grpo_checkpoints(tmp_path: Path) -> None:
    model = GRPO("rlvr/Arithmetic-v0", seed=0)
    ckpt = callbacks.CheckpointCallback(save_freq=2, save_path=str(tmp_path), name_prefix="grpo")
    model.learn(6 * STEPS_PER_ITER, callback=ckpt)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"grpo_{i * STEPS_PER_ITER}_steps.zip" for i in (2, 4, 6))
    last = GRPO.load(tmp_path / f"grpo_{6 * STEPS_PER_ITER}_steps.zip")
    obs = np.stack([gym.make("rlvr/Arithmetic-v0").reset(seed=s)[0] for s in range(8)])
    np.testing.assert_array_equal(last.predict(obs, deterministic=True)[0],
                                  model.predict(obs, deterministic=True)[0])


def test_sb3_eval_callback_runs_on_grpo(tmp_path: Path) -> None:
    model = GRPO("rlvr/Arithmetic-v0", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SB3 warns: not a Monitor-wrapped VecEnv like its own
        ev = callbacks.EvalCallback(gym.make("rlvr/Arithmetic-v0", split="test"), eval_freq=2,
                                    n_eval_episodes=5, log_path=str(tmp_path), verbose=0)
        model.learn(4 * STEPS_PER_ITER, callback=ev)
    assert ev.evaluations_timesteps == [2 * STEPS_PER_ITER, 4 * STEPS_PER_ITER]
    assert all(0.0 <= r <= 1.1 for r in np.ravel(ev.evaluations_results))


def test_success_eval_callback_logs_success_and_keeps_the_best(tmp_path: Path) -> None:
    from agents.eval_callback import SuccessEvalCallback

    model = GRPO("rlvr/Arithmetic-v0", seed=0)
    ev = SuccessEvalCallback(eval_freq=5, k=4, best_model_save_path=tmp_path)
    model.learn(20 * STEPS_PER_ITER, callback=ev)
    assert [t for t, _ in ev.evaluations] == [i * STEPS_PER_ITER for i in (5, 10, 15, 20)]
    assert ev.best is not None and ev.best.greedy == max(r.greedy for _, r in ev.evaluations)
    assert ev.evaluations[-1][1].greedy == model.evaluate("test")
    assert (tmp_path / "best_model.zip").exists()
    # An SB3 model needs the env to score on.
    from stable_baselines3 import PPO

    ppo = PPO("MlpPolicy", gym.make("rlvr/Arithmetic-v0"), n_steps=32, batch_size=32, seed=0)
    env = gym.make("rlvr/Arithmetic-v0")
    ppo_ev = SuccessEvalCallback(env, eval_freq=32, k=2)
    ppo.learn(64, callback=ppo_ev)
    assert len(ppo_ev.evaluations) == 2
    with pytest.raises(ValueError, match="needs eval_env"):
        PPO("MlpPolicy", env, n_steps=32, batch_size=32).learn(32, callback=SuccessEvalCallback())


def test_tensorboard_without_tensorboard_names_the_extra(tmp_path: Path, monkeypatch) -> None:
    """tensorboard=True needs the ``tensorboard`` package (the ``[tensorboard]`` extra)."""
    from stable_baselines3.common import logger as sb3_logger

    with pytest.raises(ValueError, match="tensorboard=True needs log_dir"):
        GRPO("rlvr/Arithmetic-v0", tensorboard=True)
    monkeypatch.setattr(sb3_logger, "SummaryWriter", None)  # as SB3 sets it when tensorboard is missing
    model = GRPO("rlvr/Arithmetic-v0", log_dir=str(tmp_path), tensorboard=True)
    with pytest.raises(ImportError, match=r'pip install "\.\[tensorboard\]" in a clone'):
        model.learn(STEPS_PER_ITER)
