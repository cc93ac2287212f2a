"""The GRPO phase timer (agents.grpo.profiling) and ``python -m benchmarks.speed profile_grpo``: timing is
opt-in, free when off, changes nothing about training, and the benchmark writes what it measured."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import rlvr_env  # noqa: F401
from agents.grpo import GRPO
from agents.grpo.config import GRPOConfig
from agents.grpo.profiling import NO_TIMER, PHASES, NoTimer, PhaseTimer, timed


def _run(policy: str, timer: PhaseTimer | None) -> tuple[list[dict[str, float]], dict[str, np.ndarray]]:
    if policy == "tabular":
        model = GRPO("rlvr/Arithmetic-v0", policy="tabular", seed=5)
    else:
        model = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("countdown"), policy="mlp", seed=5,
                     env_kwargs={"n_numbers": 3})
    if timer is not None:
        model.timer = timer
    log: list[dict[str, float]] = []
    model.learn(3000, callback=lambda m, metrics: log.append(
        {k: v for k, v in metrics.items() if k != "time/fps"}))
    return log, model.policy.state()


@pytest.mark.parametrize("policy", ["tabular", "mlp"])
def test_a_timed_run_trains_bit_for_bit_as_the_untimed_one(policy: str) -> None:
    timer = PhaseTimer()
    timed, timed_state = _run(policy, timer)
    plain, plain_state = _run(policy, None)
    assert timed == plain
    assert timed_state.keys() == plain_state.keys()
    assert all(np.array_equal(timed_state[k], plain_state[k]) for k in plain_state)
    # every phase of a masked vector rollout ran and was timed, and only the known phases
    assert set(timer.seconds) == set(PHASES)
    assert all(s > 0 for s in timer.seconds.values())
    assert timer.calls["update"] == len(timed)  # one update per iteration
    assert timer.calls["forward"] == timer.calls["sampling"] == timer.calls["env_step"]


def test_the_timer_is_free_when_off_and_strict_when_on() -> None:
    assert NO_TIMER.phase("update") is NO_TIMER.phase("forward")  # one shared do-nothing object
    with NO_TIMER.phase("anything"):  # off: no name check, no clock
        pass
    timer = PhaseTimer(clock=time.process_time)
    with pytest.raises(ValueError, match="'updat' is not one of"):
        timer.phase("updat")
    with timer.phase("update"):
        sum(range(10_000))
    assert timer.calls == {"update": 1} and timer.seconds["update"] > 0
    timer.reset()
    assert timer.total() == 0.0 and not timer.calls


class _CountingOff(NoTimer):
    """An off timer that records which phases are asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def phase(self, name: str):  # type: ignore[no-untyped-def]
        self.asked.append(name)
        return super().phase(name)


def test_the_agents_own_steps_do_not_touch_the_timer_when_it_is_off() -> None:
    def step() -> int:
        return 1

    assert timed(NO_TIMER, "update", step) is step  # off: the step itself, bound once
    with pytest.raises(ValueError, match="'updat' is not one of"):
        timed(PhaseTimer(), "updat", step)  # on: a wrong name fails when bound, before any call
    model = GRPO("rlvr/Arithmetic-v0", policy="tabular", seed=5)
    model.timer = off = _CountingOff()
    model.learn(640)
    assert model.iterations >= 2 and off.asked  # the rollout still asks the shared no-op for its phases
    assert not {"advantage", "update"} & set(off.asked), sorted(set(off.asked))
    on = PhaseTimer()
    model.timer = on
    model.learn(640)
    assert on.calls["advantage"] == on.calls["update"] == model.iterations


def test_the_mlp_forward_is_the_modules_forward_bit_for_bit() -> None:
    import gymnasium as gym
    import torch

    from agents.policies.mlp import MLPPolicy

    x = torch.as_tensor(np.random.default_rng(0).random((37, 12)))
    for activation, arch in (("tanh", (64, 64)), ("relu", (16,)), ("tanh", (8, 8, 8))):
        policy = MLPPolicy(gym.spaces.Box(0, 1, (12,)), 7, 1e-3, seed=1, net_arch=arch, activation=activation)
        with torch.no_grad():
            for p in policy.net.parameters():  # away from the near-zero head so the test can fail
                p.add_(torch.randn(p.shape, dtype=p.dtype, generator=torch.Generator().manual_seed(2)))
            assert torch.equal(policy._forward(policy.net, x), policy.net(x))


def test_profile_grpo_writes_its_shares(tmp_path: Path) -> None:
    from benchmarks.speed.profile_grpo import main

    result = main(["--steps", "600", "--warmup", "0", "--repeats", "1", "--cases", "tab_arith",
                   "--out", str(tmp_path)])
    stored = json.loads((tmp_path / "profile_grpo.json").read_text())
    case = stored["cases"]["tab_arith"]
    assert case["env_steps"] >= 600 and case["env_steps_per_s"] > 0
    assert set(case["shares"]) == {*PHASES, "other"}
    assert sum(case["shares"].values()) == pytest.approx(1.0, abs=1e-6)
    assert 0 < case["verifier_share_of_env_step"] < 1
    assert "tabular, Arithmetic" in (tmp_path / "profile_grpo.md").read_text()
    assert result["cases"]["tab_arith"]["env_steps"] == case["env_steps"]


def test_profile_grpo_rejects_an_unknown_case(tmp_path: Path) -> None:
    from benchmarks.speed.profile_grpo import main

    with pytest.raises(SystemExit):
        main(["--cases", "mlp_cartpole", "--out", str(tmp_path)])
