"""Native vector envs: single/vector equivalence in lockstep, autoreset modes, reset options, validation."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode

import rlvr_env
from rlvr_env import Prompt
from rlvr_env.vector import TokenVectorEnv
from rlvr_env.tasks.expression.envs import ArithmeticVectorEnv
from rlvr_env.tasks.countdown.envs import CountdownVectorEnv

COUNTDOWN = "rlvr/Countdown-v0"
ARITHMETIC = "rlvr/Arithmetic-v0"
LOCKSTEP: list[tuple[str, dict[str, Any]]] = [
    (ARITHMETIC, {}),
    (ARITHMETIC, {"split": "test", "format_weight": 0.5}),
    (COUNTDOWN, {}),
    (COUNTDOWN, {"n_numbers": 3, "number_use": "exactly_once", "accuracy_weight": 2.0}),
    (COUNTDOWN, {"n_numbers": 5, "integer_division": True, "operators": "+-/"}),
    (COUNTDOWN, {"operators": "+*", "parentheses": False, "max_length": 9, "split": "test"}),
    (COUNTDOWN, {"n_numbers": 6, "number_range": (1, 100), "target_range": (1, 999)}),
    # numbers beyond the answer programs' int64 bound: those rows are scored by the general path
    (COUNTDOWN, {"number_range": (30000, 40000), "target_range": (1, 100000)}),
    # the token-context observation (rlvr_env.token_obs)
    (ARITHMETIC, {"observation": "tokens"}),
    (COUNTDOWN, {"n_numbers": 3, "observation": "tokens"}),
    (COUNTDOWN, {"n_numbers": 5, "target_range": (-60, 600), "observation": "tokens", "split": "test"}),
]


def make_vec(env_id: str, num_envs: int, **kwargs: Any) -> TokenVectorEnv:
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
    assert isinstance(envs, TokenVectorEnv)
    return envs


def fraction(num: np.integer, den: np.integer) -> Fraction | None:
    return Fraction(int(num), int(den)) if den else None


def assert_final_info_matches(single: dict[str, Any], final: dict[str, Any], i: int) -> None:
    assert final["_reward_parts"][i] and final["reward_parts"]["_accuracy"][i]
    assert single["reward_parts"] == {k: float(final["reward_parts"][k][i]) for k in single["reward_parts"]}
    for key in ("correct", "well_formed", "length"):
        assert final[f"_{key}"][i] and single[key] == final[key][i], key
    assert single["value"] == fraction(final["value_num"][i], final["value_den"][i])
    numbers, target = tuple(final["prompt_numbers"][i].tolist()), int(final["prompt_target"][i])
    assert single["prompt"] == Prompt(numbers, target)


@pytest.mark.parametrize("env_id, kwargs", LOCKSTEP, ids=[f"{e}-{k}" for e, k in LOCKSTEP])
@pytest.mark.parametrize("masked", [False, True])
def test_single_and_vector_agree_in_lockstep(env_id: str, kwargs: dict[str, Any], masked: bool) -> None:
    """Same prompts, same actions: identical observations, rewards, flags, reward parts and values."""
    b = 16
    envs = make_vec(env_id, b, **kwargs)
    singles = [gym.make(env_id, **kwargs).unwrapped for _ in range(b)]
    obs, info = envs.reset(seed=0)
    for i, env in enumerate(singles):
        single_obs, single_info = env.reset(options={"prompt": info["prompt"][i]})
        assert np.array_equal(single_obs, obs[i]) and single_info["split"] == info["split"][i]
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(120):
        if masked:
            masks = envs.action_masks()
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        else:
            actions = rng.integers(envs.single_action_space.n, size=b)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        for i, env in enumerate(singles):
            if masked:
                assert np.array_equal(env.action_masks(), masks[i])
            o, r, te, tr, single_info = env.step(int(actions[i]))
            assert (r, te, tr) == (rewards[i], terminated[i], truncated[i])
            assert type(r) is float and rewards.dtype == np.float64
            if te or tr:
                episodes += 1
                assert info["_final_obs"][i] and np.array_equal(o, info["final_obs"][i])
                assert_final_info_matches(single_info, info["final_info"], i)
                new = (tuple(info["prompt_numbers"][i].tolist()), int(info["prompt_target"][i]))
                assert info["_prompt_numbers"][i]
                o, _ = env.reset(options={"prompt": new})
            else:
                assert not info.get("_final_info", np.zeros(b, bool))[i]
            assert np.array_equal(o, obs[i])
    assert episodes >= b  # every env finished at least one episode


@pytest.mark.parametrize("env_id", [ARITHMETIC, COUNTDOWN])
def test_make_vec_builds_the_native_env(env_id: str) -> None:
    envs = make_vec(env_id, 8)
    assert isinstance(envs, ArithmeticVectorEnv if env_id == ARITHMETIC else CountdownVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    single = gym.make(env_id)
    assert envs.single_observation_space == single.observation_space
    assert envs.single_action_space == single.action_space
    assert envs.observation_space.shape == (8, *single.observation_space.shape)
    assert envs.obs_layout == single.unwrapped.obs_layout
    obs, _ = envs.reset(seed=1)
    assert obs.dtype == np.float32 and envs.observation_space.contains(obs)
    actions = envs.action_space.sample()
    obs, rewards, terminated, truncated, _ = envs.step(actions)
    assert envs.observation_space.contains(obs)
    assert rewards.shape == terminated.shape == truncated.shape == (8,)
    assert terminated.dtype == truncated.dtype == np.bool_


def test_same_seed_same_rollout_and_different_seeds_differ() -> None:
    def rollout(seed: int) -> list[Any]:
        envs = make_vec(COUNTDOWN, 32)
        obs, _ = envs.reset(seed=seed)
        out: list[Any] = [obs]
        rng = np.random.default_rng(0)
        for _ in range(30):
            obs, r, te, tr, _ = envs.step(rng.integers(11, size=32))
            out += [obs, r, te, tr]
        return out

    a, b, c = rollout(3), rollout(3), rollout(4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


def test_one_prompt_for_a_whole_group_and_reset_mask() -> None:
    envs = make_vec(COUNTDOWN, 6, n_numbers=3)
    prompt = Prompt((7, 9, 1), 70)
    obs, info = envs.reset(seed=0, options={"prompt": prompt})
    assert all(p == prompt for p in info["prompt"]) and (obs == obs[0]).all()
    assert info["_prompt"].all() and (info["prompt_target"] == 70).all()
    # Restart envs 1 and 4 on their own prompts; the others keep theirs and their prefixes.
    envs.step(np.zeros(6, dtype=np.int64))
    mask = np.array([False, True, False, False, True, False])
    others = [Prompt((1, 2, 3), 6)] * 6
    others[4] = Prompt((2, 2, 2), 8)
    obs2, info2 = envs.reset(options={"prompt": others, "reset_mask": mask})
    assert info2["_prompt"].tolist() == mask.tolist()
    assert info2["prompt"][1] == Prompt((1, 2, 3), 6) and info2["prompt"][4] == Prompt((2, 2, 2), 8)
    assert envs.prompt(0) == prompt and envs.tokens(0) == [0] and envs.tokens(1) == []
    single = gym.make(COUNTDOWN, n_numbers=3)
    assert np.array_equal(obs2[4], single.reset(options={"prompt": others[4]})[0])
    # A (numbers, target) pair is one prompt too.
    _, info3 = envs.reset(options={"prompt": ((1, 2, 3), 6)})
    assert set(info3["prompt"]) == {Prompt((1, 2, 3), 6)}


def test_next_step_autoreset() -> None:
    envs = make_vec(COUNTDOWN, 2, n_numbers=3, autoreset_mode="NextStep")
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    envs.reset(options={"prompt": ((7, 9, 1), 16)})
    _, r, te, _, info = envs.step(np.array([0, 0]))
    _, r, te, _, info = envs.step(np.array([9, 3]))  # env 0: "7 <eos>", env 1 continues
    assert te.tolist() == [True, False] and r[0] == pytest.approx(0.1)
    assert info["_correct"].tolist() == [True, False] and "final_info" not in info
    obs, r, te, tr, info = envs.step(np.array([5, 1]))  # env 0 restarts, action ignored; env 1: 7+9
    assert r[0] == 0.0 and not te[0] and envs.tokens(0) == [] and envs.tokens(1) == [0, 3, 1]
    assert info["_prompt_numbers"].tolist() == [True, False]
    assert not obs[0, envs.obs_layout["prefix"]].any()
    _, r, te, _, info = envs.step(np.array([0, 9]))
    assert te.tolist() == [False, True] and r[1] == pytest.approx(1.1)


def test_disabled_autoreset_freezes_finished_rows_until_a_masked_reset() -> None:
    envs = make_vec(COUNTDOWN, 3, n_numbers=3, autoreset_mode="Disabled")
    envs.reset(options={"prompt": ((7, 9, 1), 7)})
    envs.step(np.array([0, 0, 0]))
    _, r, te, _, info = envs.step(np.array([9, 3, 3]))
    assert te.tolist() == [True, False, False] and info["correct"][0]
    assert envs.finished.tolist() == [True, False, False]
    frozen = envs.step(np.array([9, 0, 1]))  # row 0's action is ignored
    obs, r, te, tr, info = frozen
    assert (r[0], te[0], tr[0], envs.tokens(0)) == (0.0, False, False, [0, 9])
    assert te.tolist() == [False, False, False] and envs.tokens(1) == [0, 3, 0]
    _, r, te, _, _ = envs.step(np.array([0, 9, 9]))
    assert te.tolist() == [False, True, True] and envs.finished.all()
    with pytest.raises(ResetNeeded, match="Disabled"):
        envs.step(np.array([0, 0, 0]))
    envs.reset(options={"reset_mask": np.array([True, False, True]), "prompt": ((1, 2, 3), 6)})
    assert envs.tokens(0) == [] and envs.tokens(1) == [0, 3, 0, 9] and envs.prompt(0) == Prompt((1, 2, 3), 6)
    assert envs.finished.tolist() == [False, True, False]
    envs.step(np.array([0, 0, 0]))


def test_copy_false_returns_the_buffer_and_copy_true_fresh_arrays() -> None:
    fresh = make_vec(ARITHMETIC, 4)
    a, _ = fresh.reset(seed=0)
    b, *_ = fresh.step(np.zeros(4, dtype=np.int64))
    assert not np.shares_memory(a, b)
    shared = make_vec(ARITHMETIC, 4, copy=False)
    a, _ = shared.reset(seed=0)
    b, *_ = shared.step(np.zeros(4, dtype=np.int64))
    assert a is b


def test_masks_match_the_single_env_and_allow_the_solution() -> None:
    envs = make_vec(COUNTDOWN, 8)
    _, info = envs.reset(seed=0)
    task = envs.task
    prompts = [task.sample_prompt(np.random.default_rng(i), "train") for i in range(8)]
    envs.reset(options={"prompt": prompts})
    solutions = [p.info()["solution_tokens"] for p in prompts]
    for col in range(max(map(len, solutions))):
        masks = envs.action_masks()
        actions = np.array([s[col] if col < len(s) else 0 for s in solutions])
        live = np.array([col < len(s) for s in solutions])
        assert masks[np.flatnonzero(live), actions[live]].all()
        _, rewards, terminated, _, info = envs.step(actions)
        ended = live & terminated
        assert (rewards[ended] == pytest.approx(1.1))
    arithmetic = make_vec(ARITHMETIC, 3)
    arithmetic.reset(seed=0)
    assert arithmetic.action_masks().all() and arithmetic.action_masks().shape == (3, 5)


@pytest.mark.parametrize(
    "actions, text",
    [
        (np.zeros(3, dtype=np.int64), "shape"),
        (np.zeros(4, dtype=np.float32), "integer array"),
        (np.full(4, 5), "outside Discrete"),
        (np.full(4, -1), "outside Discrete"),
    ],
)
def test_bad_actions_raise_naming_the_value(actions: np.ndarray, text: str) -> None:
    envs = make_vec(ARITHMETIC, 4)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=text):
        envs.step(actions)


@pytest.mark.parametrize(
    "options, text",
    [
        ({"prompts": []}, "unknown reset options"),
        ({"prompt": [((2, 3, 5), 17)] * 3}, "sequence of num_envs=4"),
        ({"prompt": ((2, 3, 4), 17)}, "permutation"),
        ({"reset_mask": np.ones(3, dtype=bool)}, "shape"),
        ({"reset_mask": [True] * 4}, "bool numpy array"),
        ({"reset_mask": np.zeros(4, dtype=bool)}, "no env"),
        ("prompt", "must be a dict"),
    ],
)
def test_bad_reset_options_raise(options: Any, text: str) -> None:
    envs = make_vec(ARITHMETIC, 4)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=text):
        envs.reset(options=options)


def test_first_reset_must_cover_every_env_and_step_needs_reset() -> None:
    envs = make_vec(ARITHMETIC, 2)
    with pytest.raises(ResetNeeded):
        envs.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="first reset"):
        envs.reset(options={"reset_mask": np.array([True, False])})
    with pytest.raises(ValueError, match="seed"):
        envs.reset(seed=[1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"num_envs": 0}, "num_envs"),
        ({"autoreset_mode": "Sometimes"}, "autoreset_mode"),
        ({"render_mode": "human"}, "render_mode"),
        ({"split": "dev"}, "split"),
        ({"copy": "yes"}, "copy"),
    ],
)
def test_bad_kwargs_raise(kwargs: dict[str, Any], text: str) -> None:
    num_envs = kwargs.pop("num_envs", 2)
    with pytest.raises(ValueError, match=text):
        gym.make_vec(ARITHMETIC, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)


def test_render_ansi_and_expression() -> None:
    envs = make_vec(COUNTDOWN, 2, n_numbers=3, render_mode="ansi")
    envs.reset(options={"prompt": ((7, 9, 1), 70)})
    envs.step(np.array([0, 1]))
    envs.step(np.array([5, 3]))
    assert envs.render() == (
        "numbers: 7 9 1 | target: 70 | answer: n0 *",
        "numbers: 7 9 1 | target: 70 | answer: n1 +",
    )
    assert envs.expression(0) == "7*"
    quiet = make_vec(COUNTDOWN, 2, n_numbers=3)
    quiet.reset(seed=0)
    with pytest.warns(UserWarning, match="without a render mode"):
        assert quiet.render() is None


def test_exported() -> None:
    assert rlvr_env.CountdownVectorEnv is CountdownVectorEnv and rlvr_env.TokenVectorEnv is TokenVectorEnv


@pytest.mark.parametrize("env_id", [ARITHMETIC, COUNTDOWN])
@pytest.mark.parametrize("split", ["train", "test"])
def test_vector_env_draws_only_from_its_split(env_id: str, split: str) -> None:
    envs = make_vec(env_id, 64, split=split)
    _, info = envs.reset(seed=0)
    seen = set(info["prompt"])
    rng = np.random.default_rng(0)
    for _ in range(40):  # autoreset draws too
        _, _, _, _, info = envs.step(rng.integers(envs.single_action_space.n, size=64))
        if "_prompt_numbers" in info:
            for i in np.flatnonzero(info["_prompt_numbers"]):
                seen.add(Prompt(tuple(info["prompt_numbers"][i].tolist()), int(info["prompt_target"][i])))
    assert len(seen) > 5 and {envs.task.split_of(p) for p in seen} == {split}


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_gymnasium_vector_wrappers_count_episodes(mode: str) -> None:
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    envs = RecordEpisodeStatistics(make_vec(COUNTDOWN, 8, autoreset_mode=mode))
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(40):
        _, _, terminated, truncated, info = envs.step(rng.integers(11, size=8))
        finished += int((terminated | truncated).sum())
    assert len(envs.return_queue) == min(finished, envs.return_queue.maxlen or finished) > 0


def test_sync_vectorization_still_uses_the_single_env() -> None:
    envs = gym.make_vec(COUNTDOWN, num_envs=3, vectorization_mode="sync", n_numbers=3)
    obs, _ = envs.reset(seed=0)
    assert type(envs).__name__ == "SyncVectorEnv" and obs.shape == (3, 103)


@pytest.mark.slow
@pytest.mark.parametrize("env_id, kwargs", LOCKSTEP, ids=[f"{e}-{k}" for e, k in LOCKSTEP])
def test_long_lockstep(env_id: str, kwargs: dict[str, Any]) -> None:
    """The lockstep comparison with more envs and steps (``pytest -m slow``)."""
    b = 128
    envs = make_vec(env_id, b, **kwargs)
    singles = [gym.make(env_id, **kwargs).unwrapped for _ in range(b)]
    _, info = envs.reset(seed=1)
    for i, env in enumerate(singles):
        env.reset(options={"prompt": info["prompt"][i]})
    rng = np.random.default_rng(1)
    for _ in range(600):
        masks = envs.action_masks()
        scores = rng.random(masks.shape) * np.where(rng.random(b) < 0.5, 1.0, masks.T).T  # half masked
        actions = np.argmax(scores, axis=1)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        for i, env in enumerate(singles):
            o, r, te, tr, single_info = env.step(int(actions[i]))
            assert (r, te, tr) == (rewards[i], terminated[i], truncated[i])
            if te or tr:
                assert_final_info_matches(single_info, info["final_info"], i)
                new = (tuple(info["prompt_numbers"][i].tolist()), int(info["prompt_target"][i]))
                o, _ = env.reset(options={"prompt": new})
            assert np.array_equal(o, obs[i])


# -- adjacent number tokens never join into one number, through any path -----------------------------
HACKS = [
    # (env id, kwargs, prompt, answer tokens): each joined reading would pay 1.1
    (COUNTDOWN, {"n_numbers": 3, "number_range": (1, 20)}, ((1, 2, 12), 12), ["n0", "n1", "<eos>"]),
    (COUNTDOWN, {"n_numbers": 2, "number_range": (1, 20), "max_length": 6}, ((1, 11), 12),
     ["n0", "n0", "+", "n0", "<eos>"]),
    (COUNTDOWN, {"n_numbers": 3, "number_range": (1, 40), "operators": "+*", "parentheses": False},
     ((3, 4, 34), 38), ["n0", "n1", "+", "n1", "<eos>"]),  # "34+4"
]


@pytest.mark.parametrize("env_id, kwargs, prompt, answer", HACKS, ids=[" ".join(h[3]) for h in HACKS])
def test_adjacent_slot_tokens_pay_nothing_through_any_path(
    env_id: str, kwargs: dict[str, Any], prompt: tuple[tuple[int, ...], int], answer: list[str]
) -> None:
    from rlvr_env import verify
    from rlvr_env.tasks.expression.batch_verify import batch_verify
    from rlvr_env.tasks.expression.tokens import TokenTable

    single = gym.make(env_id, **kwargs)
    task = single.unwrapped.task  # type: ignore[attr-defined]
    ids = [task.vocab.index(t) for t in answer]
    p = task.validate_prompt(prompt)
    numbers, target = p.numbers, p.target
    # 1. verify() of the token strings, and of the decoded text.
    by_tokens = verify(task.token_strings(ids, p), numbers, target, grammar=task.grammar)
    by_text = verify(task.decode(ids, p), numbers, target, grammar=task.grammar)
    assert by_tokens == by_text
    assert not by_tokens.well_formed and by_tokens.reward == 0.0
    # 2. the single env (no mask in the way).
    single.reset(options={"prompt": prompt})
    for t in ids:
        _, reward, terminated, truncated, info = single.step(t)
    assert terminated and reward == 0.0 and not info["well_formed"] and not info["correct"]
    # 3. the native vector env.
    envs = make_vec(env_id, 2, **kwargs)
    envs.reset(options={"prompt": prompt})
    for t in ids:
        _, rewards, terminated_v, _, vinfo = envs.step(np.array([t, t]))
    assert terminated_v.all() and rewards.tolist() == [0.0, 0.0]
    assert not vinfo["final_info"]["well_formed"].any()
    # 4. the batch verifier.
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    got = batch_verify(np.array([ids]), np.array([numbers]), np.array([target]), table=table,
                       grammar=task.grammar)
    assert got.reward.tolist() == [0.0] and not got.well_formed[0]
    # The masks forbid these answers too; the rule above is what protects unmasked agents.
    assert not task.action_mask(p, ids[:1])[ids[1]]


@pytest.mark.parametrize("token", [" ", "", "2+3"])
def test_envs_refuse_a_vocabulary_read_two_ways(token: str) -> None:
    from rlvr_env import ArithmeticTask, TokenEnv

    class Odd(ArithmeticTask):
        vocab = ("2", "3", "5", "+", token)

    with pytest.raises(ValueError, match=re.escape(f"vocabulary token 4 {token!r}")):
        TokenEnv(Odd())
    with pytest.raises(ValueError, match=re.escape(f"vocabulary token 4 {token!r}")):
        TokenVectorEnv(Odd(), 2)


# -- make and make_vec accept the same kwargs; values beyond int64 ------------------------------------
LARGE = [
    {"n_numbers": 8, "number_range": (1, 999999), "target_range": (1, 999999)},
    {"n_numbers": 8, "number_range": (100000, 999999), "target_range": (1, 999999), "integer_division": True},
]


@pytest.mark.parametrize("kwargs", LARGE, ids=["1-999999", "100000-999999-intdiv"])
def test_make_vec_resets_where_make_resets(kwargs: dict[str, Any]) -> None:
    # Few random expressions over large numbers land in the target range (about 1 in 500 here): the
    # single env draws one prompt per reset, the vector env a buffer of 1024, and both must succeed.
    single = gym.make(COUNTDOWN, **kwargs)
    _, info = single.reset(seed=0)
    assert info["split"] == "train"
    envs = make_vec(COUNTDOWN, 2, **kwargs)
    _, vinfo = envs.reset(seed=0)
    for p in vinfo["prompt"]:
        lo, hi = kwargs["number_range"]
        assert len(p.numbers) == 8 and all(lo <= x <= hi for x in p.numbers)
        assert envs.task.split_of(p) == "train"


def test_values_beyond_int64_reach_the_final_info_exactly() -> None:
    kwargs = LARGE[0]
    prompt = ((999999, 999998, 999997, 999996, 2, 3, 5, 7), 999999)
    single = gym.make(COUNTDOWN, **kwargs)
    single.reset(options={"prompt": prompt})
    task = single.unwrapped.task  # type: ignore[attr-defined]
    star, plus, eos = task.vocab.index("*"), task.vocab.index("+"), task.eos_id
    answers = [
        [0, star, 1, star, 2, star, 3, eos],  # ~1e24: beyond int64
        [0, plus, 1, eos],  # an ordinary value in the same step
        [0, star, 1, star, 2, star, 3, star, 2, eos],  # beyond int64, but slot 2 used twice
        [0, eos],
    ]
    envs = make_vec(COUNTDOWN, len(answers), **kwargs)
    envs.reset(options={"prompt": prompt})
    singles = []
    for answer in answers:
        env = gym.make(COUNTDOWN, **kwargs)
        env.reset(options={"prompt": prompt})
        for t in answer:
            *_, info = env.step(t)
        singles.append(info)
    width = max(map(len, answers))
    cols = np.array([a + [eos] * (width - len(a)) for a in answers])
    finals: dict[int, tuple[Any, Any, dict[str, Any]]] = {}
    for col in cols.T:
        _, _, terminated, _, info = envs.step(col)
        for i in np.flatnonzero(terminated):
            finals.setdefault(int(i), (info["final_info"]["value_num"][i], info["final_info"]["value_den"][i],
                                       info["final_info"]))
    assert singles[0]["value"] == Fraction(999999 * 999998 * 999997 * 999996)
    for i, single_info in enumerate(singles):
        num, den, final = finals[i]
        assert single_info["value"] == fraction(num, den), i
        assert_final_info_matches(single_info, final, i)
    assert singles[2]["value"] is not None and not singles[2]["well_formed"]  # the value is kept


def test_batch_verdict_keeps_every_verdict_s_parts_and_reads_no_bool_as_a_value() -> None:
    from rlvr_env.scoring import batch_verdict
    from rlvr_env.rewards import Verdict

    plain = Verdict(reward=1.1, correct=True, well_formed=True, value=Fraction(7, 2), reason=None,
                    expression="a", parts={"accuracy": 1.0, "format": 0.1})
    near = Verdict(reward=0.6, correct=False, well_formed=True, value=True, reason="near", expression="b",
                   parts={"accuracy": 0.0, "format": 0.1, "near": 0.5})
    arrays = batch_verdict([plain, near])
    assert sorted(arrays.parts) == ["accuracy", "format", "near"]
    assert arrays.parts["near"].tolist() == [0.0, 0.5]
    assert arrays.has_value.tolist() == [True, False]  # True is not the number 1
    assert (arrays.value_num[0], arrays.value_den[0]) == (7, 2)


def test_a_finite_pool_draws_every_prompt_of_its_split() -> None:
    envs = gym.make_vec("rlvr/Arithmetic-v0", num_envs=512, vectorization_mode="vector_entry_point")
    _, info = envs.reset(seed=0)
    train = set(envs.unwrapped.task.prompts("train"))
    assert len(train) == 20 and set(info["prompt"].tolist()) == train


def test_refills_hand_out_the_sampler_s_prompts_in_order_none_skipped() -> None:
    from rlvr_env.vector_prompts import _MIN_CHUNK

    env = CountdownVectorEnv(num_envs=1, n_numbers=3)
    source, task = env.prompt_source, env.task
    rng = np.random.default_rng(5)
    k = _MIN_CHUNK * 2 // 3  # the second draw straddles a refill
    handed = [source.draw(rng, k) for _ in range(3)]
    numbers = np.concatenate([d[0]["prompt_numbers"] for d in handed])
    expected_rng = np.random.default_rng(5)
    expected = np.concatenate([task.sample_arrays(expected_rng, "train", _MIN_CHUNK)[0] for _ in range(2)])
    assert np.array_equal(numbers, expected[: 3 * k])
