"""The Countdown-N family: generation, verifier semantics, masks, splits, checkers, training smoke tests."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env
from rlvr_env import CountdownTask, Prompt, verify
from rlvr_env.tasks.countdown.task import HELD_OUT_BUCKETS, multiset_hash
from rlvr_env.tasks.countdown.draw import draw_picks, history_of, merge

ENV_ID = "rlvr/Countdown-v0"
SETTINGS: list[dict[str, Any]] = [
    {},
    {"n_numbers": 3, "number_use": "exactly_once"},
    {"n_numbers": 5, "integer_division": True},
    {"n_numbers": 6, "number_range": (1, 100), "target_range": (100, 999), "max_length": 24},
    {"operators": "+*", "parentheses": False},
    {"operators": "-/", "number_range": (1, 30), "target_range": (-50, 50)},
    {"n_numbers": 2, "max_length": 4},
]
IDS = [",".join(f"{k}={v}" for k, v in s.items()) or "defaults" for s in SETTINGS]


def play(env: gym.Env, tokens: list[int]) -> tuple[float, bool, bool, dict[str, Any]]:
    """Step ``tokens``; return the last step's reward, flags and info."""
    reward, terminated, truncated, info = 0.0, False, False, {}
    for t in tokens:
        _, reward, terminated, truncated, info = env.step(t)  # type: ignore[assignment]
    return float(reward), terminated, truncated, info


def ids(task: CountdownTask, text: str) -> list[int]:
    """Token ids for a space-separated answer written with slot names, e.g. ``"n0 + n1 <eos>"``."""
    return [task.vocab.index(t) for t in text.split()]


# -- generation ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", SETTINGS, ids=IDS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_every_generated_prompt_is_solved_by_its_stored_solution(kwargs: dict[str, Any], split: str) -> None:
    task = CountdownTask(**kwargs)
    rng = np.random.default_rng(0)
    for _ in range(150):
        prompt = task.sample_prompt(rng, split)
        meta = prompt.info()
        verdict = verify(meta["solution"], prompt.numbers, prompt.target, grammar=task.grammar)
        assert verdict.correct, (prompt, meta, verdict.reason)
        sol = meta["solution_tokens"]
        assert sol[-1] == task.eos_id and len(sol) == meta["solution_length"] <= task.max_length
        assert task.decode(sol, prompt) == meta["solution"]
        assert task.split_of(prompt) == split
        lo, hi = task.target_range
        assert lo <= prompt.target <= hi
        assert all(task.number_range[0] <= x <= task.number_range[1] for x in prompt.numbers)


@pytest.mark.parametrize("kwargs", [s for s in SETTINGS if s.get("n_numbers", 4) <= 4] + [
    {"n_numbers": 4, "number_use": "exactly_once", "operators": "+-"}], ids=lambda s: str(s) or "defaults")
def test_every_drawn_pair_replays_without_its_stored_solution(kwargs: dict[str, Any]) -> None:
    """The reachability check refuses nothing the sampler draws (it over-approximates what is paid)."""
    task = CountdownTask(**kwargs)
    for prompt in task.sample_prompts(np.random.default_rng(1), "train", 300):
        assert task.validate_prompt((prompt.numbers, prompt.target)) == Prompt(prompt.numbers, prompt.target)


@pytest.mark.parametrize(("kwargs", "numbers", "target", "rule"), [
    ({}, (1, 1, 1, 1), 97, "each at most once"),  # at most (1 + 1) * (1 + 1) = 4
    ({"number_use": "exactly_once", "operators": "+-"}, (1, 1, 1, 1), 3, "each exactly once"),  # even sums
])
def test_a_replayed_target_no_answer_reaches_is_refused(kwargs: dict[str, Any], numbers: tuple[int, ...],
                                                        target: int, rule: str) -> None:
    task = CountdownTask(**kwargs)
    with pytest.raises(ValueError, match=rf"prompt target {target} cannot be reached from the numbers "
                                         rf"{re.escape(str(numbers))} \({rule}\)"):
        task.validate_prompt((numbers, target))
    if rule == "each exactly once":  # three of the four ones make 3: at most once, it is reachable
        assert CountdownTask(operators="+-").validate_prompt((numbers, 3)) == Prompt(numbers, 3)


def test_replaying_countdown_3_refuses_an_unreachable_target() -> None:
    env = gym.make("rlvr/Countdown-v0", n_numbers=3)
    with pytest.raises(ValueError, match=r"prompt target 97 cannot be reached from the numbers \(1, 2, 3\) "
                                         r"\(each at most once\) with \+ - \* /"):
        env.reset(options={"prompt": ((1, 2, 3), 97)})
    _, info = env.reset(options={"prompt": ((1, 2, 3), 9)})  # (1 + 2) * 3
    assert info["prompt"] == Prompt((1, 2, 3), 9)


#: settings whose max_length is shorter than the longest minimal-parenthesis answer (4N - 4 tokens with
#: EOS), so the length rule decides which generated expressions are prompts (without parentheses an
#: answer has at most 2N tokens, and max_length >= 2N never binds)
BINDING_LENGTH = [
    {"n_numbers": 3, "max_length": 7},
    {"n_numbers": 4, "max_length": 9},
    {"n_numbers": 3, "max_length": 6, "integer_division": True},
]


@pytest.mark.parametrize("kwargs", BINDING_LENGTH, ids=[str(k) for k in BINDING_LENGTH])
def test_a_binding_max_length_keeps_exactly_the_candidates_whose_solution_fits(kwargs: dict) -> None:
    task = CountdownTask(**kwargs)
    rules = task.draw_rules
    free = dataclasses.replace(rules, max_length=64)  # the same draws with the length rule off
    rng = np.random.default_rng(0)
    lo, hi = task.number_range
    numbers = rng.integers(lo, hi + 1, size=(20_000, task.n_numbers))
    picks = draw_picks(rng, len(numbers), rules)
    _, ok = merge(numbers, picks, rules)
    _, ok_free = merge(numbers, picks, free)
    history = history_of(picks, rules)
    # a solution's tokens end with EOS: it fits when text length + 1 <= max_length
    fits = np.array([ok_free[r] and len(task.solution_tokens(history[r])) <= task.max_length
                     for r in range(len(numbers))])
    assert 0 < ok.sum() < ok_free.sum()  # the rule binds
    np.testing.assert_array_equal(ok, fits)
    # every prompt drawn, by arithmetic (one at a time) and by the draw table (a large refill), fits
    for k in (1, 4096):
        for split in ("train", "test"):
            drawn_numbers, targets, drawn_history = task.sample_arrays(np.random.default_rng(1), split, k)
            for nums, target, h in zip(drawn_numbers, targets, drawn_history):
                sol = task.solution_tokens(h)
                assert len(sol) <= task.max_length, (nums, target, sol)
                assert verify(task.decode(sol, Prompt(tuple(int(x) for x in nums), int(target))),
                              tuple(int(x) for x in nums), int(target), grammar=task.grammar).correct


def test_array_sampler_is_deterministic_and_in_split() -> None:
    task = CountdownTask()
    a = task.sample_arrays(np.random.default_rng(5), "test", 500)
    b = task.sample_arrays(np.random.default_rng(5), "test", 500)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert task.split_arrays(a[0]).all()


def test_split_holds_out_one_multiset_in_five_whatever_the_order() -> None:
    task = CountdownTask(n_numbers=3)
    multisets = np.array(list(itertools.combinations_with_replacement(range(1, 11), 3)))
    held = task.split_arrays(multisets)
    assert 0.12 < held.mean() < 0.28  # 1 in HELD_OUT_BUCKETS, up to hashing noise over 220 multisets
    assert HELD_OUT_BUCKETS == 5
    shuffled = np.random.default_rng(0).permuted(multisets, axis=1)
    assert np.array_equal(multiset_hash(shuffled), multiset_hash(multisets))
    p = Prompt((3, 1, 2), 6)
    assert task.split_of(p) == task.split_of(Prompt((2, 3, 1), 9))


def test_solution_stats_hand_checked() -> None:
    # (1, 2) -> 3: "1+2" and "2+1" (no other expression over {1}, {2} or {1, 2} is 3).
    task = CountdownTask(n_numbers=2, solution_stats=True)
    assert task.count_solutions((1, 2), 3) == (2, 4)
    # (2, 2) -> 2: "n0" and "n1" (one number, 2 tokens with EOS), n0/n1*.. no: with two numbers the
    # texts are n0, n1 (both "2": counted as answers, they are different token sequences).
    assert task.count_solutions((2, 2), 2) == (2, 2)
    # (2, 2) -> 4: n0+n1, n1+n0, n0*n1, n1*n0.
    assert task.count_solutions((2, 2), 4) == (4, 4)
    exactly = CountdownTask(n_numbers=2, number_use="exactly_once", solution_stats=True)
    assert exactly.count_solutions((1, 2), 3) == (2, 4)
    prompt = task.sample_prompt(np.random.default_rng(0), "train")
    assert prompt.info()["num_solutions"] >= 1
    assert prompt.info()["shortest_length"] <= prompt.info()["solution_length"]


# -- verifier semantics through the env ----------------------------------------------------------------------
def make(prompt: tuple[tuple[int, ...], int], **kwargs: Any) -> gym.Env:
    env = gym.make(ENV_ID, n_numbers=len(prompt[0]), **kwargs)
    env.reset(options={"prompt": prompt})
    return env


@pytest.mark.parametrize(
    "prompt, answer, kwargs, correct, well_formed, value",
    [
        (((2, 3, 5), 17), "n0 + n1 * n2 <eos>", {}, True, True, 17),  # precedence
        (((2, 3, 5), 25), "n0 + n1 * n2 <eos>", {}, False, True, 17),
        (((2, 3, 5), 25), "( n0 + n1 ) * n2 <eos>", {}, True, True, 25),  # parentheses
        (((2, 3, 5), 1), "n2 - n1 - n0 <eos>", {}, False, True, 0),  # left associative
        (((7, 2, 2), 7), "n0 / n1 * n2 <eos>", {}, True, True, 7),  # exact rational division
        (((7, 2, 2), 7), "n0 / n1 * n2 <eos>", {"integer_division": True}, False, False, None),
        (((8, 2, 2), 8), "n0 / n1 * n2 <eos>", {"integer_division": True}, True, True, 8),
        (((8, 2, 2), 1), "n0 / ( n1 - n2 ) <eos>", {}, False, False, None),  # division by zero
        (((8, 3, 2), 16), "n0 + n0 <eos>", {}, False, False, 16),  # slot reuse = number reuse
        (((8, 8, 2), 16), "n0 + n0 <eos>", {}, True, True, 16),  # ... unless the number is there twice
        (((8, 3, 2), 8), "n0 <eos>", {}, True, True, 8),  # at most once: one number may do
        (((8, 3, 2), 8), "n0 <eos>", {"number_use": "exactly_once"}, False, False, 8),
        (((8, 3, 2), 8), "<eos>", {}, False, False, None),  # empty answer
        (((8, 3, 2), 8), "n0 + <eos>", {}, False, False, None),  # trailing operator
        (((8, 3, 2), 8), "( n0 <eos>", {}, False, False, None),  # missing ')'
        # A slot token is one number: "n0 n1" is two numbers side by side, never the literal 12.
        (((1, 2, 12), 12), "n0 n1 <eos>", {"number_range": (1, 20)}, False, False, None),
        (((1, 11), 12), "n0 n0 + n0 <eos>", {"number_range": (1, 20), "max_length": 6}, False, False, None),
        (((1, 2, 12), 3), "n0 n1 - n1 - n2 <eos>", {"number_range": (1, 20)}, False, False, None),
    ],
)
def test_verifier_semantics(
    prompt: tuple[tuple[int, ...], int],
    answer: str,
    kwargs: dict[str, Any],
    correct: bool,
    well_formed: bool,
    value: int | None,
) -> None:
    env = make(prompt, **kwargs)
    reward, terminated, truncated, info = play(env, ids(env.unwrapped.task, answer))
    assert (terminated, truncated) == (True, False)
    assert (info["correct"], info["well_formed"], info["value"]) == (correct, well_formed, value)
    assert reward == pytest.approx(1.0 * correct + 0.1 * well_formed)
    assert info["length"] == len(answer.split())


def test_truncation_withholds_format_and_accuracy() -> None:
    env = make(((2, 3, 5), 17), max_length=6)
    task = env.unwrapped.task
    reward, terminated, truncated, info = play(env, ids(task, "n0 + n1 * n2 )"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["reward_parts"] == {"accuracy": 0.0, "format": 0.0}
    assert info["value"] is None and "truncated" in info["reason"]
    # A correct expression that never emits EOS is cut off as well.
    env = make(((2, 3, 5), 17), max_length=6)
    reward, terminated, truncated, info = play(env, ids(task, "n0 + n1 * n2 +"))
    assert (reward, truncated, info["expression"]) == (0.0, True, "2+3*5+")


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('true')", "2**10", "1e3", "٣+2", "2+3;", "(2+3", "x", "2" * 300, "2 +\n3"],
)
def test_hostile_text_is_rejected(text: str) -> None:
    task = CountdownTask()
    verdict = verify(text, (2, 3, 5, 10), 5, grammar=task.grammar)
    assert not verdict.well_formed and verdict.reward == 0.0


@pytest.mark.parametrize(
    "prompt, text",
    [
        (((1, 2, 3),), "pair"),
        (((1, 2, 3), 5), "must be 4 integers"),
        (((1, 2, 3, 0), 5), "number_range"),
        (((1, 2, 3, 11), 5), "number_range"),
        (((1, 2, 3, 4), 0), "target_range"),
        (((1, 2, 3, 4), 1.5), "integer"),
        (((1, 2, True, 4), 5), "integer"),
        ("1+2", "pair"),
    ],
)
def test_malformed_prompts_raise(prompt: object, text: str) -> None:
    env = gym.make(ENV_ID)
    with pytest.raises(ValueError, match=text):
        env.reset(options={"prompt": prompt})


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"n_numbers": 1}, "n_numbers"),
        ({"n_numbers": 9}, "n_numbers"),
        ({"n_numbers": 3.0}, "n_numbers"),
        ({"number_range": (0, 10)}, "number_range"),
        ({"number_range": (5, 4)}, "number_range"),
        ({"number_range": (1, 10**6)}, "number_range"),
        ({"target_range": (1, 2**21)}, "target_range"),
        ({"operators": "+%"}, "operators"),
        ({"operators": ""}, "operators"),
        ({"number_use": "twice"}, "number_use"),
        ({"max_length": 7}, "max_length"),
        ({"max_length": 65}, "max_length"),
        ({"solution_stats": True, "n_numbers": 5}, "solution_stats"),
        ({"target_range": (10**6, 10**6 + 1)}, "could not draw"),
        ({"split": "valid"}, "split"),
    ],
)
def test_bad_kwargs_raise_naming_the_value(kwargs: dict[str, Any], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        gym.make(ENV_ID, **kwargs)


# -- masks ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", SETTINGS, ids=IDS)
def test_masks_keep_the_known_solution_and_masked_walks_stay_grammatical(kwargs: dict[str, Any]) -> None:
    env = gym.make(ENV_ID, **kwargs)
    base = env.unwrapped
    task = base.task
    rng = np.random.default_rng(1)
    for episode in range(60):
        _, info = env.reset(seed=episode)
        for t in info["prompt"].info()["solution_tokens"]:
            assert base.action_masks()[t]
            env.step(t)
        env.reset(options={"prompt": info["prompt"]})
        truncated = terminated = False
        while not (terminated or truncated):
            mask = base.action_masks()
            assert mask.dtype == bool and mask.shape == (len(task.vocab),) and mask.any()
            _, _, terminated, truncated, final = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert terminated and not truncated
        # Masks are grammar-only: what can still fail is the arithmetic (division by zero, inexact /).
        assert final["well_formed"] or "division" in final["reason"], final


def test_masks_after_ignoring_them_offer_eos_and_always_something() -> None:
    task = CountdownTask(n_numbers=3)
    prompt = Prompt((1, 2, 3), 6)
    for prefix in itertools.product(range(len(task.vocab) - 1), repeat=3):
        mask = task.action_mask(prompt, list(prefix))
        assert mask.any()
    assert task.action_mask(prompt, [0, 0]).tolist() == [False] * task.eos_id + [True]  # "n0 n0"
    assert task.action_mask(prompt, [0, 3, 0]).tolist() == [False] * task.eos_id + [True]  # slot reuse
    first = task.action_mask(prompt, [])
    assert [task.vocab[i] for i in np.flatnonzero(first)] == ["n0", "n1", "n2", "("]


def test_masks_respect_the_remaining_length() -> None:
    task = CountdownTask(n_numbers=3, number_use="exactly_once")  # max_length 8: "n n n" + 2 ops + ...
    prompt = Prompt((1, 2, 3), 6)
    names = lambda prefix: [task.vocab[i] for i in np.flatnonzero(task.action_mask(prompt, prefix))]  # noqa
    assert names(ids(task, "n0 +")) == ["n1", "n2", "("]
    # "( n0 +" leaves 5 tokens: a second "(" could not close and still use n1 and n2, a slot can.
    assert names(ids(task, "( n0 +")) == ["n1", "n2"]
    # 4 tokens left: ") op n2 <eos>" or "op n2 ) <eos>"; EOS is not yet possible.
    assert names(ids(task, "( n0 + n1")) == ["+", "-", "*", "/", ")"]
    assert names(ids(task, "n0 + n1 * n2")) == ["<eos>"]  # all slots used: nothing but EOS
    assert "<eos>" not in names(ids(task, "n0 + n1"))  # exactly once: n2 is still unused


# -- checkers, pickling, determinism -------------------------------------------------------------------------
CHECK_SETTINGS = [{}, {"n_numbers": 3, "number_use": "exactly_once", "render_mode": "ansi"},
                  {"operators": "+*", "parentheses": False, "split": "test"}]


@pytest.mark.parametrize("kwargs", CHECK_SETTINGS)
def test_gymnasium_check_env_without_warnings(kwargs: dict[str, Any]) -> None:
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(ENV_ID, **kwargs).unwrapped)


@pytest.mark.parametrize("kwargs", CHECK_SETTINGS)
def test_sb3_check_env_without_warnings(kwargs: dict[str, Any]) -> None:
    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(ENV_ID, **kwargs).unwrapped, warn=True)


def test_same_seed_same_episodes_and_pickle() -> None:
    def trace(env: gym.Env) -> list[object]:
        out: list[object] = []
        for s in range(5):
            obs, info = env.reset(seed=s)
            out.append((obs.tolist(), info["prompt"], info["prompt"].info()))
            out.append(play(env, [0, 4, 1, env.unwrapped.task.eos_id])[:3])
        return out

    assert trace(gym.make(ENV_ID)) == trace(gym.make(ENV_ID))
    env = gym.make(ENV_ID)
    env.reset(seed=3)
    env.step(0)
    clone = pickle.loads(pickle.dumps(env))
    assert play(clone, [4, 1, 10]) == play(env, [4, 1, 10])


def test_observation_layout_and_encoding() -> None:
    env = gym.make(ENV_ID)
    base = env.unwrapped
    obs, info = env.reset(options={"prompt": ((1, 10, 4, 7), 100)})
    layout = base.obs_layout
    assert list(layout) == ["numbers", "number_bits", "target", "target_bits", "prefix"]
    assert obs.shape == (160,) and obs.dtype == np.float32 and base.observation_space.contains(obs)
    np.testing.assert_allclose(obs[layout["numbers"]], [0, 1, 3 / 9, 6 / 9], rtol=1e-6)
    assert obs[layout["number_bits"]].reshape(4, 4).tolist()[2] == [1, 1, 0, 0]  # 4 - 1 = 3 = 0b0011
    assert obs[layout["target"]].tolist() == [1.0]
    assert obs[layout["target_bits"]].tolist() == [1, 1, 0, 0, 0, 1, 1]  # 99 = 0b1100011
    assert not obs[layout["prefix"]].any()
    obs, *_ = env.step(6)
    assert obs[layout["prefix"]].reshape(12, 11)[0].tolist() == [0] * 6 + [1] + [0] * 4


def test_registered_and_exported() -> None:
    assert ENV_ID in gym.registry and gym.registry[ENV_ID].vector_entry_point is not None
    assert rlvr_env.CountdownEnv is type(gym.make(ENV_ID).unwrapped)


# -- SB3 training smoke tests --------------------------------------------------------------------------------
def test_sb3_ppo_trains_a_few_hundred_steps() -> None:
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", gym.make(ENV_ID, n_numbers=3), n_steps=128, batch_size=64, n_epochs=2, seed=0,
                device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=256)
    after = list(model.policy.parameters())
    assert any(not np.allclose(a.numpy(), b.detach().numpy()) for a, b in zip(before, after))


def test_maskable_ppo_trains_a_few_hundred_steps_with_masks() -> None:
    from sb3_contrib import MaskablePPO

    env = gym.make(ENV_ID, n_numbers=3)
    model = MaskablePPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    # Every action the masked policy takes is legal, so no episode is truncated or ungrammatical.
    obs, _ = env.reset(seed=1)
    for _ in range(40):
        action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks())
        assert env.unwrapped.action_masks()[int(action)]
        obs, _, terminated, truncated, _ = env.step(int(action))
        assert not truncated
        if terminated:
            obs, _ = env.reset()


@pytest.mark.parametrize("observation", ["pixels", ["bits"], None])
def test_an_unknown_observation_lists_every_valid_value(observation: object) -> None:
    valid = "('bits', 'relations', 'lookahead', 'tokens')"
    with pytest.raises(ValueError, match=re.escape(f"observation={observation!r} is not one of {valid}")):
        gym.make("rlvr/Countdown-v0", observation=observation)
    with pytest.raises(ValueError, match=re.escape(valid)):
        gym.make_vec("rlvr/Countdown-v0", num_envs=2, vectorization_mode="vector_entry_point",
                     observation=observation)
