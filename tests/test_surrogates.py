"""The policy-loss plumbing of agents.grpo.surrogates: the settings object every loss reads, the loss
registry's validation and records, and the PPO clip's boundary conventions (the math of each loss is
pinned in test_objective.py and test_variants_parity.py)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from agents.grpo import surrogates
from agents.grpo.surrogates import (
    LOG_RATIO_CLAMP,
    POLICY_LOSSES,
    PolicyLoss,
    SurrogateSettings,
    clipped_surrogate,
    register_policy_loss,
)


def test_settings_default_to_the_symmetric_ppo_clip_and_name_what_they_lack() -> None:
    s = SurrogateSettings()
    assert (s.clip_eps, s.clip_eps_high, s.dual_clip_c, s.rng) == (0.2, None, None, None)
    assert SurrogateSettings(kl_cov_ratio=0.1).kl_cov_ratio == 0.1
    with pytest.raises(AttributeError) as err:
        _ = s.sapo_tau_pos
    assert str(err.value) == (
        "this policy loss reads the setting 'sapo_tau_pos', which its SurrogateSettings do not hold (they "
        "hold ['clip_eps', 'clip_eps_high', 'dual_clip_c']); register the loss with "
        "settings=(..., 'sapo_tau_pos')")
    with pytest.raises(AttributeError, match=r"immutable \(tried to set 'clip_eps'\)"):
        s.clip_eps = 0.3


def test_settings_are_equal_by_value_and_generator_identity_and_survive_pickling() -> None:
    rng = np.random.default_rng(0)
    a, b = SurrogateSettings(clip_eps=0.3, rng=rng), SurrogateSettings(clip_eps=0.3, rng=rng)
    assert a == b and hash(a) == hash(b)
    assert a != SurrogateSettings(clip_eps=0.3, rng=np.random.default_rng(0))   # another generator
    assert a != SurrogateSettings(clip_eps=0.4, rng=rng)                        # another constant
    assert a != SurrogateSettings(clip_eps=0.3) and SurrogateSettings() == SurrogateSettings()
    assert a.__eq__("clip_eps=0.3") is NotImplemented
    assert len({a, b, SurrogateSettings(clip_eps=0.4, rng=rng)}) == 2
    assert hash(SurrogateSettings(clip_eps=0.3)) != hash(SurrogateSettings(clip_eps=0.4))
    assert hash(SurrogateSettings()) == hash((tuple(sorted(SurrogateSettings()._values.items())), id(None)))
    back = pickle.loads(pickle.dumps(SurrogateSettings(clip_eps=0.3, kl_cov_ratio=0.1, rng=rng)))
    assert (back.clip_eps, back.kl_cov_ratio) == (0.3, 0.1)
    assert back.rng is not None and back.rng.random() == np.random.default_rng(0).random()
    deep = copy.deepcopy(a)
    assert deep.clip_eps == 0.3 and isinstance(deep.rng, np.random.Generator)
    assert copy.copy(a) == a   # the same generator object


def test_settings_repr_lists_every_constant_and_marks_a_generator() -> None:
    assert repr(SurrogateSettings(kl_cov_ratio=0.1)) == (
        "SurrogateSettings(clip_eps=0.2, clip_eps_high=None, dual_clip_c=None, kl_cov_ratio=0.1)")
    assert repr(SurrogateSettings(rng=np.random.default_rng(0))) == (
        "SurrogateSettings(clip_eps=0.2, clip_eps_high=None, dual_clip_c=None, rng=...)")


def _identity(logp, logp_old, adv, mask, s):  # type: ignore[no-untyped-def]
    return adv, adv, np.zeros_like(mask, dtype=bool)


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, PolicyLoss]:
    registry = dict(POLICY_LOSSES)
    monkeypatch.setattr(surrogates, "POLICY_LOSSES", registry)
    return registry


def test_a_registered_loss_records_everything_it_declares(scratch_registry: dict[str, PolicyLoss]) -> None:
    assert register_policy_loss("t_defaults")(_identity) is _identity
    expected = PolicyLoss("t_defaults", _identity, (), False, False, True, False)
    assert scratch_registry["t_defaults"] == expected
    register_policy_loss("t_declared", settings=iter(["clip_eps", "my_coef"]), per_answer=True,
                         all_rows=True, clip_high=False, uses_rng=True)(_identity)
    loss = scratch_registry["t_declared"]
    assert (loss.name, loss.fn, loss.settings) == ("t_declared", _identity, ("clip_eps", "my_coef"))
    assert (loss.per_answer, loss.all_rows, loss.clip_high, loss.uses_rng) == (True, True, False, True)
    mask = np.ones((1, 2))
    assert loss(mask, mask, np.array([[1.0, 2.0]]), mask, SurrogateSettings())[0].tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize("name", ["", 3, None])
def test_a_loss_name_must_be_a_non_empty_string(name: object, scratch_registry: dict) -> None:
    with pytest.raises(ValueError) as err:
        register_policy_loss(name)  # type: ignore[arg-type]
    assert str(err.value) == f"a policy loss name must be a non-empty string, got {name!r}"


def test_a_taken_name_and_settings_that_are_not_field_names_are_refused(scratch_registry: dict) -> None:
    with pytest.raises(ValueError) as err:
        register_policy_loss("vanilla")
    assert str(err.value) == "policy loss 'vanilla' is already registered; choose another name"
    for bad in (("clip_eps", ""), ("clip_eps", 3), ("",)):
        with pytest.raises(ValueError) as err:
            register_policy_loss("t_bad", settings=bad)
        assert str(err.value) == f"settings={bad!r} must name GRPOConfig fields"
    assert "t_bad" not in scratch_registry
    register_policy_loss("t_ok", settings=("clip_eps",))(_identity)   # a valid name and settings pass
    assert scratch_registry["t_ok"].settings == ("clip_eps",)


def test_at_exactly_the_log_ratio_clamp_the_ratio_has_no_gradient() -> None:
    logp = np.array([[LOG_RATIO_CLAMP, LOG_RATIO_CLAMP - 1.0]])
    adv = np.array([[-1.0, -1.0]])   # negative: the clip's lower side never applies to a ratio above 1
    _, grad, clipped = clipped_surrogate(logp, np.zeros_like(logp), adv, clip_eps=0.2)
    assert not clipped.any()
    assert grad[0, 0] == 0.0                                     # the clamp is active at its bound
    assert grad[0, 1] == pytest.approx(-np.exp(LOG_RATIO_CLAMP - 1.0))


def test_a_dual_clip_tie_keeps_the_gradient() -> None:
    """``max(c A, objective)`` with ``c A`` equal to the objective: the unclipped branch wins the tie, as
    PPO's own clip does, so the token keeps its gradient."""
    logp = np.log(np.array([[2.0, 3.0]]))            # ratios exactly 2 and 3
    adv = np.array([[-1.0, -1.0]])
    objective, grad, clipped = clipped_surrogate(logp, np.zeros_like(logp), adv, clip_eps=0.2,
                                                 dual_clip_c=2.0)
    assert objective.tolist() == [[-2.0, -2.0]]
    assert clipped.tolist() == [[False, True]]       # the tie is not clipped; ratio 3 is
    assert grad.tolist() == [[-2.0, 0.0]]
