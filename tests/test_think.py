"""rlvr/CountdownThink-v0: the transcript's rules, the calculator, the solver, masks, and the envs' agreement."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr_env
from rlvr_env import RewardWeights, ThinkTask
from rlvr_env.tasks.think.solver import STYLES
from rlvr_env.tasks.think.trace import answer_equations, calculate, derives, read

ENV = "rlvr/CountdownThink-v0"
PROMPT = ((9, 1, 2), 8)


def ids(task: ThinkTask, text: str) -> list[int]:
    return [task.vocab.index(w) for w in text.split()]


def score(task: ThinkTask, text: str, weights: RewardWeights | None = None, **kw):
    prompt = task.validate_prompt(PROMPT)
    tokens = ids(task, text)
    return task.score(prompt, tokens, weights or RewardWeights(), **kw), task.episode_stats(prompt, tokens)


@pytest.fixture(scope="module")
def task() -> ThinkTask:
    return ThinkTask(n_numbers=3)


# -- the rules -------------------------------------------------------------------------------------
def test_a_solved_trace_is_paid_and_consistent(task):
    v, st = score(task, "<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>")
    assert (v.correct, v.well_formed, v.reward) == (True, True, pytest.approx(1.1))
    assert v.parts == {"accuracy": 1.0, "format": pytest.approx(0.1)}
    assert st == {"actions": 13.0, "steps": 1.0, "backs": 0.0, "calculator_calls": 0.0, "step_pass_rate": 1.0,
                  "consistent": 1.0}
    assert task.decode(ids(task, "<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>"),
                       task.validate_prompt(PROMPT)) == "9-1"


HOSTILE = [
    # (transcript, accuracy, format, consistent)
    ("<think> </think> <answer> 9 - 1 </answer>", 1.0, 1.0, 0.0),  # an answer with no trace: paid, not derived
    ("<think> <think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>", 1.0, 0.0, 0.0),  # a repeated tag
    ("9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>", 1.0, 0.0, 1.0),  # no <think>: the answer still located
    ("<think> 9 - 1 = 8 ; </think> <answer> <answer> 9 - 1 </answer>", 0.0, 0.0, 0.0),  # nested answer tags
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer> </answer>", 0.0, 0.0, 0.0),  # a second close
    ("<think> 9 - 1 = 8 ; </think> </think> <answer> 9 - 1 </answer>", 0.0, 0.0, 0.0),  # two </think>
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 + 1 </answer>", 0.0, 1.0, 0.0),  # the trace reaches it, the answer not
    ("<think> 9 - 1 = 7 ; </think> <answer> 9 - 1 </answer>", 1.0, 1.0, 0.0),  # a false step derives nothing
    ("<think> back </think> <answer> 9 - 1 </answer>", 1.0, 0.0, 0.0),  # back with nothing to abandon
    ("<think> 9 - 1 = </think> <answer> 9 - 1 </answer>", 1.0, 0.0, 0.0),  # an unfinished step
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 - 9 </answer>", 0.0, 0.0, 0.0),  # 9 used twice: not well formed
    ("<think> 9 * 1 = 9 ; 9 - 1 = 8 ; </think> <answer> 9 * 1 - 1 </answer>", 0.0, 0.0, 0.0),  # 1 twice
    ("<think> 9 - 1 = 8 ; </think> <answer> </answer>", 0.0, 0.0, 0.0),  # an empty answer
    ("<think> </think> 9 <answer> 9 - 1 </answer>", 0.0, 0.0, 0.0),  # text between the sections
]


@pytest.mark.parametrize("text, accuracy, fmt, consistent", HOSTILE)
def test_hostile_transcripts_are_paid_exactly_what_the_rules_say(task, text, accuracy, fmt, consistent):
    v, st = score(task, text)
    assert v.parts["accuracy"] == accuracy
    assert v.parts["format"] == pytest.approx(0.1 * fmt)
    assert v.reward == pytest.approx(accuracy + 0.1 * fmt)
    assert st["consistent"] == consistent


def test_a_transcript_cut_at_the_cap_is_paid_nothing(task):
    prompt = task.validate_prompt(PROMPT)
    padded = ids(task, "<think>") + ids(task, "9 - 1 = 8 ; back") * 20
    padded = padded[: task.max_length]
    v = task.score(prompt, padded, RewardWeights(step=0.5), truncated=True)
    assert v.reward == 0.0 and set(v.parts) == {"accuracy", "format", "step"} and not any(v.parts.values())


def test_the_step_check_is_paid_only_when_named_and_counts_false_and_unavailable_steps(task):
    text = "<think> 9 - 1 = 7 ; back 2 * 2 = 4 ; 9 + 2 = 1 1 ; </think> <answer> 9 - 1 </answer>"
    v, st = score(task, text)
    assert "step" not in v.parts and st["step_pass_rate"] == pytest.approx(1 / 3)
    v, _ = score(task, text, RewardWeights(step=0.3))
    assert v.parts["step"] == pytest.approx(0.3 / 3) and v.reward == pytest.approx(1.1 + 0.1)
    assert task.best_reward(RewardWeights()) == pytest.approx(1.1)
    assert task.best_reward(RewardWeights(step=0.3)) == pytest.approx(1.4)


def test_back_returns_the_operands_to_the_pool():
    r = read("<think> 9 + 1 = 1 0 ; back 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>".split(), (9, 1, 2), 8,
             max_digits=4)
    assert r.well_formed and r.backs == 1 and all(s.passes for s in r.steps)
    assert r.branches == [((9, "-", 1, 8),)]
    r = read("<think> 9 + 1 = 1 0 ; 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>".split(), (9, 1, 2), 8,
             max_digits=4)
    assert [s.available for s in r.steps] == [True, False] and r.branches == []


def test_a_number_the_pool_holds_once_cannot_be_used_twice():
    r = read("<think> 9 + 9 = 1 8 ; </think> <answer> 9 - 1 </answer>".split(), (9, 1, 2), 8, max_digits=4)
    assert [(s.true, s.available) for s in r.steps] == [(True, False)]
    r = read("<think> 9 + 9 = 1 8 ; </think> <answer> 9 - 1 </answer>".split(), (9, 9, 2), 8, max_digits=4)
    assert [(s.true, s.available) for s in r.steps] == [(True, True)]


def test_the_calculator_rules():
    assert calculate(7, "/", 2, 4) is None and calculate(2, "-", 7, 4) is None and calculate(7, "/", 0, 4) is None
    assert calculate(99, "*", 99, 4) == 9801 and calculate(999, "*", 99, 4) is None and calculate(8, "/", 2, 4) == 4
    eqs = answer_equations(list("4*(6/3)"))
    assert eqs is not None and derives(((6, "/", 3, 2), (2, "*", 4, 8)), eqs)
    assert not derives(((6, "/", 3, 2), (2, "*", 4, 8)), answer_equations(list("4*6/3")) or [])
    assert answer_equations(list("4*(6")) is None


# -- the calculator in the envs ---------------------------------------------------------------------
@pytest.mark.parametrize("observation", ["tokens", "features"])
def test_the_calculator_writes_the_result_into_the_observation_and_takes_no_action(observation):
    env = gym.make(ENV, n_numbers=3, calculator=True, observation=observation).unwrapped
    task = env.task
    env.reset(options={"prompt": PROMPT})
    for w in "<think> 9 - 1".split():
        env.step(task.vocab.index(w))
    obs, *_ = env.step(task.vocab.index("="))
    assert [task.vocab[t] for t in env._tokens] == "<think> 9 - 1 = 8 ;".split()
    if observation == "tokens":
        assert env.token_context.decode(obs).endswith("<think> 9 - 1 = 8 ;")
    else:
        rows = obs[env.obs_layout["prefix"]].reshape(task.max_length, len(task.vocab))
        assert [task.vocab[int(t)] for t in rows[:7].argmax(1)] == "<think> 9 - 1 = 8 ;".split()
    for w in "9 / 2 =".split():
        env.step(task.vocab.index(w))
    assert [task.vocab[t] for t in env._tokens][-2:] == ["?", ";"]
    for w in "</think> <answer> 9 - 1".split():
        env.step(task.vocab.index(w))
    _, r, term, trunc, info = env.step(task.eos_id)
    assert term and r == pytest.approx(1.1)
    assert info["stats"]["calculator_calls"] == 2 and info["stats"]["actions"] == info["length"] - 4


def test_no_reply_outside_a_well_formed_step_or_without_the_calculator():
    on, off = ThinkTask(n_numbers=3, calculator=True), ThinkTask(n_numbers=3)
    p = on.validate_prompt(PROMPT)
    assert on.reply(p, ids(on, "<think> 9 - 1 =")) == tuple(ids(on, "8 ;"))
    assert off.reply(p, ids(off, "<think> 9 - 1 =")) == () and off.reply_after == frozenset()
    for text in ("<think> 9 - =", "<think> - 1 =", "<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 =",
                 "9 - 1 =", "<think> 0 9 - 1 =", "<think> 9 - 1 ;", "<think> 9 - 1 = 8 9 * 2 ="):
        assert on.reply(p, ids(on, text)) == ()


def test_a_reply_is_cut_at_the_cap_and_the_episode_truncates():
    env = gym.make(ENV, n_numbers=3, calculator=True, max_length=13).unwrapped
    task = env.task
    env.reset(options={"prompt": ((9, 9, 9), 9)})
    steps = "<think> 9 * 9 = ; 9 * 9 =".split()  # the second result does not fit
    out = None
    for w in "<think> 9 * 9 =".split() + "8 1 * 9 =".split():
        out = env.step(task.vocab.index(w))
        if out[2] or out[3]:
            break
    assert out is not None and out[3] and not out[2] and len(env._tokens) == 13 and steps


@pytest.mark.parametrize("calculator, pool_masks", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("observation", ["tokens", "features"])
def test_the_checkers_pass(calculator, pool_masks, observation):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(ENV, n_numbers=3, calculator=calculator, pool_masks=pool_masks, observation=observation)
    check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped)


@pytest.mark.parametrize("calculator, pool_masks",
                         [(False, False), (True, False), (False, True), (True, True)])
def test_the_vector_env_pays_what_the_single_env_pays_on_random_and_solver_traces(calculator, pool_masks):
    n = 16
    kw = {"n_numbers": 3, "calculator": calculator, "pool_masks": pool_masks, "observation": "tokens"}
    venv = gym.make_vec(ENV, num_envs=n, vectorization_mode="vector_entry_point", autoreset_mode="Disabled",
                        **kw).unwrapped
    _, info = venv.reset(seed=4)
    prompts = list(info["prompt"])
    task = venv.task
    singles = [gym.make(ENV, **kw).unwrapped for _ in range(n)]
    for s, p in zip(singles, prompts):
        s.reset(options={"prompt": p})
    solutions = [task.solution(p) for p in prompts]
    rng = np.random.default_rng(0)
    done = np.zeros(n, dtype=bool)
    ended = 0
    for step in range(task.max_length):
        if done.all():
            break
        masks = venv.action_masks()
        acts = np.array([solutions[i][step] if i % 2 == 0 and step < len(solutions[i])
                         else rng.choice(np.flatnonzero(masks[i]) if i % 4 == 1 else len(task.vocab))
                         for i in range(n)])
        obs, r, te, tr, vinfo = venv.step(acts)
        for i in np.flatnonzero(~done):
            assert np.array_equal(masks[i], singles[i].action_masks())
            o, rs, tes, trs, sinfo = singles[i].step(int(acts[i]))
            assert np.array_equal(o, obs[i]) and rs == r[i] and (tes, trs) == (te[i], tr[i])
            if tes or trs:
                done[i] = True
                ended += 1
                assert vinfo["reward_parts"]["accuracy"][i] == sinfo["reward_parts"]["accuracy"]
                for k, v in sinfo["stats"].items():
                    assert vinfo["stats"][k][i] == v
                if i % 2 == 0:
                    assert rs == pytest.approx(1.1)
    assert ended == n


# -- the solver and the masks -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("calculator, pool_masks", [(False, False), (True, False), (True, True)])
def test_every_solver_style_is_paid_consistent_and_allowed_by_the_masks(n, calculator, pool_masks):
    task = ThinkTask(n_numbers=n, calculator=calculator, pool_masks=pool_masks)
    prompts = task.sample_prompts(np.random.default_rng(7), "train", 40)
    for style in STYLES:
        for p in prompts:
            solved = task.solve(p, style)
            tokens = [task.vocab.index(w) for w in solved.tokens]
            v = task.score(p, tokens, RewardWeights(step=1.0))
            assert v.correct and v.well_formed, (style, solved.tokens)
            st = task.episode_stats(p, tokens)
            if style != "expression":
                assert st["consistent"] == 1.0 and v.parts["step"] == (1.0 if st["steps"] else 0.0)
            else:
                assert st["steps"] == 0 and st["consistent"] == float(p.target in p.numbers)
            for i, t in enumerate(tokens):
                assert task.action_mask(p, tokens[:i])[t], (style, solved.tokens, i)
            assert not task.action_mask(p, tokens).any() or len(tokens) < task.max_length


def test_the_search_style_writes_failed_branches_and_the_path_style_none():
    task = ThinkTask(n_numbers=3)
    prompts = task.sample_prompts(np.random.default_rng(2), "train", 60)
    backs = [task.episode_stats(p, task.solution(p))["backs"] for p in prompts]
    assert max(backs) > 0
    path = ThinkTask(n_numbers=3, solution_style="path")
    assert all(path.episode_stats(p, path.solution(p))["backs"] == 0 for p in prompts)


def test_a_search_too_long_for_the_cap_loses_its_earliest_failed_branches():
    task = ThinkTask(n_numbers=3)
    cut = 0
    for p in task.sample_prompts(np.random.default_rng(5), "train", 200):
        solved = task.solve(p, "search")
        if not solved.cut or not solved.search_length:
            continue
        full = ThinkTask(n_numbers=3, max_length=1024).solve(p, "search")
        assert not full.cut and len(full.tokens) == solved.search_length
        first_step = full.tokens[1: full.tokens.index(";") + 1]
        assert solved.tokens[1: 1 + len(first_step)] != first_step  # the first branch tried went first
        assert len(solved.tokens) <= task.max_length
        cut += 1
    assert cut > 0


def test_a_solution_with_the_calculator_leaves_out_what_the_calculator_writes():
    on, off = ThinkTask(n_numbers=3, calculator=True), ThinkTask(n_numbers=3)
    p = on.validate_prompt(PROMPT)
    assert [on.vocab[t] for t in off.solution(p)] == "<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>".split()
    assert [on.vocab[t] for t in on.solution(p)] == "<think> 9 - 1 = </think> <answer> 9 - 1 </answer>".split()


def test_masks_refuse_what_breaks_the_grammar(task):
    p = task.validate_prompt(PROMPT)

    def allowed(text: str) -> set[str]:
        m = task.action_mask(p, ids(task, text) if text else [])
        return {task.vocab[i] for i in np.flatnonzero(m)}

    assert allowed("") == {"<think>"}
    assert "back" not in allowed("<think>") and "back" in allowed("<think> 9 - 1 = 8 ;")
    assert allowed("<think> 9 - 1 =") == set("0123456789") | {"?"}
    assert allowed("<think> 0") == set("+-*/")
    assert allowed("<think> </think>") == {"<answer>"}
    assert allowed("<think> </think> <answer>") == {"9", "1", "2", "("}
    assert allowed("<think> </think> <answer> 9 - 1 - 2") == {"</answer>"}
    assert allowed("<think> </think> <answer> 9 9") == set(task.vocab)  # off the grammar: nothing refused
    assert allowed("<think> ; 9") == set(task.vocab)


def test_pool_masks_keep_each_operand_in_the_pool_the_steps_before_it_leave():
    task = ThinkTask(n_numbers=3, number_range=(1, 20), pool_masks=True)
    p = task.validate_prompt(((12, 1, 2), 10))

    def allowed(text: str) -> set[str]:
        m = task.action_mask(p, ids(task, text))
        return {task.vocab[i] for i in np.flatnonzero(m)}

    assert allowed("<think>") == {"1", "2", "</think>"}  # 12, 1 and 2 begin with 1 or 2
    assert allowed("<think> 1") == {"2"} | set("+-*/")  # 12 goes on, 1 is a number of the pool
    assert allowed("<think> 1 2") == set("+-*/")
    assert allowed("<think> 1 2 *") == {"1", "2"}
    assert allowed("<think> 1 *") == {"1", "2"}  # 1 is used: the second 1 can only begin 12
    assert allowed("<think> 1 * 1") == {"2"}
    assert allowed("<think> 2 * 1 2") == {"="}
    # the result is free without the calculator
    assert allowed("<think> 2 * 1 2 =") == set("0123456789") | {"?"}
    # 12 * 2 = 24 leaves {1, 24}; a false result (25) enters the pool as written, as the reader keeps it
    assert allowed("<think> 1 2 * 2 = 2 4 ;") == {"1", "2", "back", "</think>"}
    assert allowed("<think> 1 2 * 2 = 2 4 ; 2") == {"4"}
    assert allowed("<think> 1 2 * 2 = 2 5 ; 2") == {"5"}
    # one number left: no step can be written; back returns the operands
    assert allowed("<think> 1 2 * 2 = 2 4 ; 2 4 - 1 = 2 3 ;") == {"back", "</think>"}
    assert allowed("<think> 1 2 * 2 = 2 4 ; 2 4 - 1 = 2 3 ; back") == {"1", "2", "back", "</think>"}
    assert allowed("<think> 1 2 * 2 = 2 4 ; 2 4 - 1 = 2 3 ; back back 1 2") == set("+-*/")
    assert allowed("<think> 1 2 * 2 = ? ; 1") == {"2"} | set("+-*/")  # a '?' step leaves the pool as it was
    # the same transcript without pool masks: any operand
    free = ThinkTask(n_numbers=3, number_range=(1, 20)).action_mask(p, ids(task, "<think>"))
    assert {task.vocab[i] for i in np.flatnonzero(free)} == set("0123456789") | {"</think>"}


def test_with_pool_masks_and_the_calculator_every_masked_step_passes_the_step_check():
    env = gym.make(ENV, n_numbers=3, calculator=True, pool_masks=True, observation="tokens").unwrapped
    rng = np.random.default_rng(3)
    steps = 0
    for episode in range(40):
        env.reset(seed=episode)
        done = False
        while not done:
            a = int(rng.choice(np.flatnonzero(env.action_masks())))
            _, _, te, tr, info = env.step(a)
            done = te or tr
        steps += info["stats"]["steps"]
        if info["stats"]["steps"]:
            assert info["stats"]["step_pass_rate"] == 1.0
    assert steps > 20


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    ({"calculator": 1}, "calculator=1 must be a bool"),
    ({"pool_masks": "yes"}, "pool_masks='yes' must be a bool"),
    ({"solution_style": "dfs"}, "solution_style='dfs'"),
    ({"max_length": 4}, r"max_length=4 must be an integer in \[8, 1024\]"),
    ({"target_range": (-5, 10)}, "must not go below 0"),
    ({"nonsense": 1}, "unknown keyword"),
])
def test_bad_settings_name_the_value_and_the_rule(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ThinkTask(n_numbers=3, **kwargs)


def test_the_task_rebuilds_from_its_keywords_and_registers_for_the_bridges():
    task = ThinkTask(n_numbers=4, calculator=True, pool_masks=True, max_length=120)
    again = rlvr_env.tasks.registry.TASKS[task.name](**task.keywords())
    assert again.keywords() == task.keywords() and again.vocab == task.vocab and again.calculator
    assert again.pool_masks
