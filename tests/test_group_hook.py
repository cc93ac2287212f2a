"""``GRPO.add_group_hook``: one ``GroupEvent`` per iteration with every sampled group, the advantages the
update uses, and no effect on training."""

from __future__ import annotations

import numpy as np
import pytest

import rlvr_env  # noqa: F401  (registers the envs)
from agents import GRPO, GRPOConfig
from agents.grpo import GroupEvent
from agents.grpo.objective import ADVANTAGE_ESTIMATORS

ENV = "rlvr/Arithmetic-v0"
KW = {"format_weight": 1.0}


def _spy_rollouts(model: GRPO, monkeypatch) -> list:
    """Every GroupBatch the model's runner rolls out, in order."""
    batches: list = []
    original = model._runner.collect

    def collect(*args):
        batches.append(original(*args))
        return batches[-1]

    monkeypatch.setattr(model._runner, "collect", collect)
    return batches


def _spy_updates(model: GRPO, monkeypatch) -> list[tuple[np.ndarray, np.ndarray]]:
    """(returns (B, G), advantages (B*G,)) of every update the model runs."""
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    original = model._train_epochs

    def update(batch, adv):
        seen.append((batch.returns.reshape(batch.n_groups, -1).copy(), adv.copy()))
        return original(batch, adv)

    monkeypatch.setattr(model, "_train_epochs", update)
    return seen


def test_one_event_per_iteration_matching_a_hand_run(monkeypatch) -> None:
    cfg = GRPOConfig(group_size=4, prompts_per_iter=3, length_weight=0.5)
    model = GRPO(ENV, cfg, seed=5, env_kwargs=KW)
    events: list[GroupEvent] = []
    model.add_group_hook(events.append)
    updates = _spy_updates(model, monkeypatch)
    totals: list[float] = []
    model.learn(300, callback=lambda m, met: totals.append(met["time/total_timesteps"]))
    assert len(events) == model.iterations == len(totals) == len(updates) > 1
    assert [e.iteration for e in events] == list(range(1, model.iterations + 1))
    assert [e.num_timesteps for e in events] == [0] + [int(t) for t in totals[:-1]]
    for event, (_, adv) in zip(events, updates):
        assert event.rewards.shape == event.lengths.shape == event.correct.shape == (3, 4)
        assert event.advantages.shape == (3, 4) and event.trained.shape == (3,)
        assert event.rewards.dtype == np.float64 and event.lengths.dtype == np.int64
        assert event.correct.dtype == bool and event.trained.all()
        np.testing.assert_array_equal(event.advantages.reshape(-1), adv)  # what the update used

    # The first iteration by hand, on a same-seed twin: roll out, score, advantages.
    twin = GRPO(ENV, cfg, seed=5, env_kwargs=KW)
    batch = twin._runner.collect(twin.policy, twin.rng)
    rewards = twin._group_rewards(batch)
    first = events[0]
    np.testing.assert_array_equal(first.rewards, rewards)
    np.testing.assert_array_equal(first.lengths, batch.lengths.reshape(3, 4))
    np.testing.assert_array_equal(first.correct, batch.correct.reshape(3, 4) == 1.0)
    assert twin.config.advantage is not None  # resolved from the preset
    expected = ADVANTAGE_ESTIMATORS[twin.config.advantage](rewards, cfg.adv_eps, cfg.unbiased_std)
    np.testing.assert_array_equal(first.advantages, expected)


def test_event_rewards_are_the_returns_plus_the_length_term(monkeypatch) -> None:
    # Countdown's answers differ in length, so the Kimi k1.5 term is not zero
    w = 0.5
    model = GRPO("rlvr/Countdown-v0", GRPOConfig(group_size=4, prompts_per_iter=4, length_weight=w),
                 policy="mlp", seed=0)
    batches = _spy_rollouts(model, monkeypatch)
    events: list[GroupEvent] = []
    model.add_group_hook(events.append)
    model.learn(200)
    terms = 0
    for event, batch in zip(events, batches):
        returns = batch.returns.reshape(4, 4)
        lengths, correct = batch.lengths.reshape(4, 4), batch.correct.reshape(4, 4) == 1.0
        expected = returns + w * np.stack([rlvr_env.length_reward(lengths[b], correct[b]) for b in range(4)])
        np.testing.assert_allclose(event.rewards, expected, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(event.lengths, lengths)
        terms += int(np.any(event.rewards != returns))
    assert terms > 0  # the length term was exercised


def test_dynamic_sampling_events_hold_every_round_and_mark_the_trained_groups(monkeypatch) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=8, prompts_per_iter=4, dynamic_sampling=True), seed=0,
                 env_kwargs=KW)
    events: list[GroupEvent] = []
    model.add_group_hook(events.append)
    updates = _spy_updates(model, monkeypatch)
    metrics: list[dict[str, float]] = []
    model.learn(4000, callback=lambda m, met: metrics.append(dict(met)))
    assert len(events) == len(metrics)
    assert any(met["rollout/sampling_rounds"] > 1 for met in metrics)  # the case under test occurs
    updates_iter = iter(updates)
    for event, met in zip(events, metrics):
        assert event.rewards.shape == (4 * met["rollout/sampling_rounds"], 8)
        assert event.trained.sum() == met["rollout/trained_groups"] <= 4
        tied = np.all(event.rewards == event.rewards[:, :1], axis=1)
        assert not np.any(event.trained & tied)  # a tied group is never trained on
        assert np.all(np.isnan(event.advantages[~event.trained]))
        assert not np.any(np.isnan(event.advantages[event.trained]))
        # the first informative groups, in sampling order, are the ones trained on
        informative = np.flatnonzero(~tied)
        n_trained = int(event.trained.sum())
        np.testing.assert_array_equal(np.flatnonzero(event.trained), informative[:n_trained])
        if event.trained.any():
            returns, adv = next(updates_iter)
            np.testing.assert_array_equal(adv, event.advantages[event.trained].reshape(-1))
            assert returns.shape == (int(event.trained.sum()), 8)
        assert met["rollout/zero_std_group_frac"] == pytest.approx(tied.mean())
    assert next(updates_iter, None) is None


def test_an_iteration_that_trains_nothing_still_reports_its_groups(monkeypatch) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2, dynamic_sampling=True,
                                 dynamic_sampling_max_rounds=3, length_weight=0.0), seed=0,
                 env_kwargs={"format_weight": 0.0, "accuracy_weight": 0.0})
    events: list[GroupEvent] = []
    model.add_group_hook(events.append)
    model.learn(120)
    assert len(events) == 1
    assert events[0].rewards.shape == (6, 4) and not events[0].trained.any()
    assert np.all(np.isnan(events[0].advantages))


@pytest.mark.parametrize(("policy", "env", "cfg", "steps"), [
    ("tabular", ENV, dict(group_size=4, prompts_per_iter=4, dynamic_sampling=True, policy_loss="clip_cov",
                          clip_cov_lb=-5.0), 3000),
    ("mlp", "rlvr/Countdown-v0", dict(group_size=4, prompts_per_iter=2), 600),
])
def test_a_run_with_hooks_is_bit_for_bit_the_run_without(policy: str, env: str, cfg: dict,
                                                         steps: int) -> None:
    def run(with_hooks: bool):
        model = GRPO(env, GRPOConfig(**cfg), policy=policy, seed=1,
                     env_kwargs=KW if env == ENV else None)
        if with_hooks:
            def meddle(event: GroupEvent) -> None:  # reads everything; writing is refused
                float(np.nansum(event.advantages))
                with pytest.raises(ValueError, match="read-only"):
                    event.rewards[...] = 0.0
            model.add_group_hook(meddle)
            model.add_group_hook(lambda event: None)
        curve: list[dict[str, float]] = []
        model.learn(steps, callback=lambda m, met: curve.append(
            {k: v for k, v in met.items() if k != "time/fps"}))
        return curve, model.policy.state(), model.rng.bit_generator.state

    plain, hooked = run(False), run(True)
    assert plain[0] == hooked[0] and plain[2] == hooked[2]
    assert plain[1].keys() == hooked[1].keys()
    for key in plain[1]:
        np.testing.assert_array_equal(plain[1][key], hooked[1][key])


def test_event_arrays_are_read_only_copies(monkeypatch) -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2), seed=0, env_kwargs=KW)
    batches = _spy_rollouts(model, monkeypatch)
    events: list[GroupEvent] = []
    model.add_group_hook(events.append)
    model.learn(40)
    event, batch = events[0], batches[0]
    for name in ("rewards", "lengths", "correct", "trained", "advantages"):
        assert not getattr(event, name).flags.writeable, name
    assert not np.shares_memory(event.lengths, batch.lengths)
    assert not np.shares_memory(event.rewards, batch.returns)
    with pytest.raises(AttributeError):
        event.iteration = 2  # type: ignore[misc]  # frozen


def test_add_group_hook_refuses_a_non_callable() -> None:
    model = GRPO(ENV, GRPOConfig(group_size=4, prompts_per_iter=2), seed=0)
    with pytest.raises(TypeError, match="must be callable"):
        model.add_group_hook("print")  # type: ignore[arg-type]


def test_the_hook_is_documented_on_the_agent() -> None:
    doc = GRPO.__doc__ or ""
    assert "add_group_hook" in doc and "GroupEvent" in doc and "bit-for-bit" in doc
    assert GroupEvent.__module__ == "agents.grpo.hooks"
