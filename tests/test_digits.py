"""Multi-digit arithmetic (rlvr_env.tasks.digits): the verifier, the split, masks, solutions, and the task
through every path that runs a task (single env, vector env, text env, agents)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr_env  # noqa: F401  (registers the envs)

from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask, read_number
from rlvr_env.rewards import RewardWeights

W = RewardWeights()
EOS = DigitsTask().eos_id


def ids(task: DigitsTask, text: str) -> list[int]:
    """Token ids of an answer text, EOS appended."""
    return [task.vocab.index(ch) for ch in text] + [task.eos_id]


# -- the verifier --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, value", [("0", 0), ("7", 7), ("120", 120), ("-7", -7), ("-105", -105)])
def test_read_number_reads_canonical_integers(text: str, value: int) -> None:
    assert read_number(text, 4) == (value, None)


@pytest.mark.parametrize("text, reason", [
    ("", "empty answer"),
    ("007", "leading zero"),
    ("-0", "a sign needs a non-zero number"),
    ("-", "a sign needs a non-zero number"),
    ("1-2", "character '-' at position 1"),
    ("--3", "character '-' at position 1"),
    ("1 2", "character ' ' at position 1"),
    ("\u0663", "character '\u0663' at position 0"),  # an Arabic-Indic three: int() would read it
    ("1_0", "character '_' at position 1"),
    ("12345", "5 digits; at most 4"),
    ("nineteen", "character 'n' at position 0"),  # named by its first bad character, not its length
    ("00000", "leading zero"),
])
def test_read_number_refuses_anything_else_with_a_reason(text: str, reason: str) -> None:
    value, why = read_number(text, 4)
    assert value is None and reason in str(why)


def test_score_pays_accuracy_and_format_by_hand() -> None:
    task = DigitsTask(max_digits=3, train_digits=2, operators="+-*")
    p = DigitsPrompt(12, "+", 7)
    right = task.score(p, ids(task, "19"), W)
    assert (right.reward, right.correct, right.well_formed, right.value) == (1.1, True, True, 19)
    assert right.parts == {"accuracy": 1.0, "format": 0.1} and right.expression == "19"
    wrong = task.score(p, ids(task, "18"), W)
    assert (wrong.reward, wrong.correct, wrong.well_formed) == (pytest.approx(0.1), False, True)
    assert "18 is not 12 + 7 = 19" in str(wrong.reason)
    assert task.score(p, ids(task, "019"), W).reward == 0.0  # leading zero: not a number
    assert task.score(DigitsPrompt(3, "-", 12), ids(task, "-9"), W).reward == pytest.approx(1.1)
    assert task.score(DigitsPrompt(999, "*", 999), ids(task, "998001"), W).correct
    truncated = task.score(p, [1, 9], W, truncated=True)
    assert truncated.reward == 0.0 and "truncated" in str(truncated.reason)
    weighted = task.score(p, ids(task, "19"), RewardWeights(accuracy=2.0, format=0.5))
    assert weighted.reward == 2.5


def test_tokens_after_eos_are_not_read() -> None:
    task = DigitsTask()
    assert task.decode([1, 9, EOS, 5, 5], DigitsPrompt(12, "+", 7)) == "19"


# -- settings and prompts ------------------------------------------------------------------------
def test_vocabulary_and_answer_length_follow_the_operators() -> None:
    plus = DigitsTask(max_digits=3, operators="+")
    assert plus.vocab == (*"0123456789", "<eos>") and plus.max_length == 5  # 999+999 = 1998, EOS
    signed = DigitsTask(max_digits=3, operators="-+")
    assert signed.operators == "+-" and signed.vocab[10] == "-" and signed.max_length == 6
    times = DigitsTask(max_digits=2, train_digits=1, operators="*")
    assert times.max_length == 5  # 99*99 = 9801, EOS


@pytest.mark.parametrize("kwargs, match", [
    ({"max_digits": 1}, "max_digits=1 must be in"),
    ({"max_digits": 10}, "max_digits=10 must be in"),
    ({"max_digits": 3, "train_digits": 3}, "train_digits=3 must be in"),
    ({"train_digits": 0}, "train_digits=0 must be in"),
    ({"max_digits": 2.5}, "max_digits=2.5 must be an integer"),
    ({"operators": "+/"}, "operators='\\+/' must be"),
    ({"operators": ""}, "operators='' must be"),
    ({"grammar_mask": 1}, "grammar_mask=1 must be a bool"),
])
def test_bad_settings_are_refused_by_name(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DigitsTask(**kwargs)


@pytest.mark.parametrize("prompt, match", [
    ((1, "*", 2), "operator '\\*' is not one of"),
    ((1, "+-", 2), "operator '\\+-' is not one of"),
    ((1, 1, 2), "operator 1 is not one of"),
    ((1000, "+", 2), "a=1000 must be a non-negative integer of at most max_digits=3"),
    ((1, "+", -2), "b=-2 must be"),
    ((1.0, "+", 2), "a=1.0 must be an integer"),
    ((True, "+", 2), "a=True must be an integer"),
    ((1, 2), "must be a DigitsPrompt or an \\(a, op, b\\) triple"),
])
def test_invalid_prompts_are_refused_by_name(prompt: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DigitsTask().validate_prompt(prompt)


def test_split_is_by_operand_length_by_hand() -> None:
    task = DigitsTask(max_digits=3, train_digits=2)
    assert task.split_of(DigitsPrompt(99, "+", 99)) == "train"
    assert task.split_of(DigitsPrompt(0, "+", 5)) == "train"
    assert task.split_of(DigitsPrompt(100, "+", 0)) == "test"
    assert task.split_of(DigitsPrompt(5, "+", 123)) == "test"
    assert DigitsTask(max_digits=4, train_digits=3).split_of(DigitsPrompt(5, "+", 123)) == "train"


def test_sampled_prompts_fall_in_their_split_cover_every_length_and_repeat_by_seed() -> None:
    task = DigitsTask(max_digits=3, train_digits=2, operators="+-*")
    for split in ("train", "test"):
        rng = np.random.default_rng(0)
        prompts = [task.sample_prompt(rng, split) for _ in range(600)]
        assert {task.split_of(p) for p in prompts} == {split}
        lengths = {(len(str(p.a)), len(str(p.b))) for p in prompts}
        expected = {(i, j) for i in (1, 2, 3) for j in (1, 2, 3) if (max(i, j) > 2) == (split == "test")}
        assert lengths == expected
        assert {p.op for p in prompts} == {"+", "-", "*"}
        again = np.random.default_rng(0)
        assert [task.sample_prompt(again, split) for _ in range(600)] == prompts
    with pytest.raises(ValueError, match="split='dev' is not one of"):
        task.sample_prompt(np.random.default_rng(0), "dev")


def test_zero_is_drawn_as_an_operand() -> None:
    task, rng = DigitsTask(), np.random.default_rng(0)
    prompts = [task.sample_prompt(rng, "train") for _ in range(1000)]
    assert any(0 in (p.a, p.b) for p in prompts)


def test_the_token_context_is_left_padded() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+")
    vocab = task.context_tokens().vocab
    assert [vocab[i] for i in task.encode_context(DigitsPrompt(1, "+", 2))] == [
        "<pad>", "<pad>", "1", "+", "2", "="]


def test_score_text_strips_the_whitespace_around_the_number() -> None:
    task, weights = DigitsTask(), RewardWeights()
    verdict = task.score_text(DigitsPrompt(12, "+", 10), " 22 ", weights)
    assert verdict.correct and verdict.reward == pytest.approx(1.1)


def test_prompt_features_are_digits_by_place_value() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+*")
    x = task.encode_prompt(DigitsPrompt(12, "*", 7))
    layout = task.prompt_layout
    a = x[layout["a"]].reshape(2, 11)  # (place, none/0..9), units first
    b = x[layout["b"]].reshape(2, 11)
    assert a.argmax(axis=1).tolist() == [1 + 2, 1 + 1]  # units 2, tens 1
    assert b.argmax(axis=1).tolist() == [1 + 7, 0]  # units 7, no tens
    assert x[layout["op"]].tolist() == [0.0, 1.0]
    assert x.sum() == 5 and x.dtype == np.float32


# -- masks and solutions -------------------------------------------------------------------------
def _prompts(task: DigitsTask, n: int) -> list[DigitsPrompt]:
    rng = np.random.default_rng(1)
    extremes = [DigitsPrompt(a, op, b) for op in task.operators for a in (0, 10**task.max_digits - 1)
                for b in (0, 10**task.max_digits - 1)]
    return extremes + [task.sample_prompt(rng, s) for s in ("train", "test") for _ in range(n)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("operators", ["+", "-", "*", "+-*"])
def test_solutions_score_accuracy_plus_format_and_masks_never_hide_them(
        operators: str, reverse: bool) -> None:
    task = DigitsTask(max_digits=3, train_digits=2, operators=operators, reverse=reverse)
    for p in _prompts(task, 100):
        sol = task.solution(p)
        assert len(sol) <= task.max_length and sol[-1] == task.eos_id
        verdict = task.score(p, sol, W)
        assert verdict.reward == pytest.approx(1.1) and verdict.value == p.result
        for k, token in enumerate(sol):
            assert task.action_mask(p, sol[:k])[token], (p, sol[:k])


def test_grammar_mask_by_hand() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+-")  # answers of at most 3 digits
    p, minus = DigitsPrompt(1, "+", 2), task.minus_id

    def allowed(prefix: list[int]) -> list[str]:
        return [task.vocab[i] for i in np.flatnonzero(task.action_mask(p, prefix))]

    assert allowed([]) == [*"0123456789", "-"]  # no empty answer
    assert allowed([minus]) == [*"123456789"]  # no "-0", no "--"
    assert allowed([0]) == ["<eos>"]  # "0" only alone
    assert allowed([3]) == [*"0123456789", "<eos>"]
    assert allowed([3, 0, 0]) == ["<eos>"]  # the longest answer has 3 digits
    assert allowed([0, 5]) == ["<eos>"]  # a prefix that broke the grammar (mask ignored) can only end
    assert DigitsTask(grammar_mask=False).action_mask(p, []).all()
    assert task.grammar_masked and not DigitsTask(grammar_mask=False).grammar_masked


@pytest.mark.parametrize("reverse", [False, True])
def test_every_answer_the_mask_allows_is_well_formed(reverse: bool) -> None:
    # Walk every masked path of the small setting: each one that ends with EOS is a canonical number,
    # and every path can end (no prefix the mask allows is a dead end).
    task = DigitsTask(max_digits=2, train_digits=1, operators="-", reverse=reverse)
    p = DigitsPrompt(3, "-", 5)
    stack: list[list[int]] = [[]]
    ended = 0
    while stack:
        prefix = stack.pop()
        for token in np.flatnonzero(task.action_mask(p, prefix)):
            answer = [*prefix, int(token)]
            if token == task.eos_id:
                assert task.score(p, answer, W).well_formed, answer
                ended += 1
            else:
                assert len(answer) < task.max_length
                stack.append(answer)
    assert ended == 1 + 2 * 99  # 0, and +-1..99, each written once


def test_reversed_answers_by_hand() -> None:
    task = DigitsTask(max_digits=2, train_digits=1, operators="+-", reverse=True)
    minus = task.minus_id
    assert task.solution(DigitsPrompt(3, "-", 13)) == (minus, 0, 1, task.eos_id)  # -10 written "-01"
    assert task.score(DigitsPrompt(3, "-", 13), ids(task, "-01"), W).reward == pytest.approx(1.1)
    right = task.score(DigitsPrompt(95, "+", 7), ids(task, "201"), W)  # 102
    assert right.correct and right.value == 102 and right.expression == "201"
    assert not task.score(DigitsPrompt(5, "+", 5), ids(task, "010"), W).well_formed  # "010" is 010
    assert task.score(DigitsPrompt(5, "+", 5), ids(task, "01"), W).correct

    def allowed(prefix: list[int]) -> list[str]:
        return [task.vocab[i] for i in np.flatnonzero(task.action_mask(DigitsPrompt(1, "+", 2), prefix))]

    assert allowed([]) == [*"0123456789", "-"]
    assert allowed([0]) == [*"0123456789", "<eos>"]  # "0", or the units of a longer number
    assert allowed([0, 0]) == [*"123456789"]  # the last place (3 digits at most) cannot be 0
    assert allowed([minus, 0]) == [*"0123456789"]  # "-0" cannot end
    assert allowed([5, 0, 1]) == ["<eos>"]
    assert allowed([5, 0, 0]) == ["<eos>"]  # broken (an unmasked agent): it can only end


# -- the single env ------------------------------------------------------------------------------
def _play(env: gym.Env, answer: Sequence[int]) -> tuple[float, bool, bool, dict]:
    for token in answer:
        _, reward, terminated, truncated, info = env.step(token)
    return float(reward), terminated, truncated, info


@pytest.mark.parametrize("observation", ["features", "tokens"])
def test_the_env_passes_gymnasium_and_sb3_checkers(observation: str) -> None:
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make("rlvr/Digits-v0", operators="+-*", observation=observation)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    sb3_check_env(gym.make("rlvr/Digits-v0", operators="+-*", observation=observation).unwrapped)


def test_the_env_replays_a_prompt_and_pays_the_verifier() -> None:
    env = gym.make("rlvr/Digits-v0", operators="+-", render_mode="ansi")
    task = env.unwrapped.task
    obs, info = env.reset(options={"prompt": (3, "-", 12)})
    assert info == {"prompt": DigitsPrompt(3, "-", 12), "split": "train"}
    obs2, _ = env.reset(options={"prompt": DigitsPrompt(3, "-", 12)})
    assert np.array_equal(obs, obs2)
    reward, terminated, truncated, info = _play(env, ids(task, "-9"))
    assert (reward, terminated, truncated) == (pytest.approx(1.1), True, False)
    assert info["correct"] and info["expression"] == "-9" and info["value"] == -9
    assert info["reward_parts"] == {"accuracy": 1.0, "format": 0.1} and info["length"] == 3
    assert env.render() == "3 - 12 = | answer: - 9 <eos> [done]"
    env.reset(options={"prompt": (3, "-", 12)})
    reward, terminated, truncated, info = _play(env, [1] * task.max_length)  # never ends: truncated
    assert (reward, terminated, truncated, info["well_formed"]) == (0.0, False, True, False)
    with pytest.raises(ValueError, match="operator '\\*' is not one of"):
        env.reset(options={"prompt": (3, "*", 12)})
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_digit'"):
        gym.make("rlvr/Digits-v0", max_digit=4)


def test_the_split_kwarg_draws_from_its_split_and_a_seed_repeats_it() -> None:
    env = gym.make("rlvr/Digits-v0", split="test")
    env.reset(seed=3)
    drawn = [env.reset()[1] for _ in range(50)]
    assert {i["split"] for i in drawn} == {"test"}
    env.reset(seed=3)
    assert [env.reset()[1]["prompt"] for _ in range(50)] == [i["prompt"] for i in drawn]


def test_the_token_observation_reads_the_prompt_as_text_then_the_answer() -> None:
    env = gym.make("rlvr/Digits-v0", max_digits=2, train_digits=1, operators="+*", observation="tokens")
    space = env.observation_space
    obs, _ = env.reset(options={"prompt": (12, "*", 7)})
    prompt = [space.vocab[i] for i in obs[: space.prompt_width] if i]
    assert prompt == ["1", "2", "*", "7", "="] and space.prompt_width == 6
    obs, *_ = env.step(8)
    assert space.vocab[obs[space.prompt_width]] == "8"  # the answer's first digit, as the context reads it
    assert obs[space.prompt_width] == space.answer_offset + 8


def test_masks_on_the_env_follow_the_answer() -> None:
    env = gym.make("rlvr/Digits-v0")
    env.reset(options={"prompt": (0, "+", 0)})
    assert env.unwrapped.action_masks().tolist() == [True] * 10 + [False]
    env.step(0)
    assert env.unwrapped.action_masks().tolist() == [False] * 10 + [True]


# -- the native vector env -----------------------------------------------------------------------
@pytest.mark.parametrize("observation", ["features", "tokens"])
def test_the_vector_env_matches_single_envs_in_lockstep(observation: str) -> None:
    kwargs = {"max_digits": 3, "train_digits": 2, "operators": "+-*", "observation": observation,
              "reverse": observation == "tokens"}
    n = 24
    vec = gym.make_vec("rlvr/Digits-v0", num_envs=n, vectorization_mode="vector_entry_point",
                       autoreset_mode="Disabled", **kwargs)
    singles = [gym.make("rlvr/Digits-v0", **kwargs) for _ in range(n)]
    task = singles[0].unwrapped.task
    prompts = _prompts(task, 8)[:n]
    obs, info = vec.reset(seed=0, options={"prompt": prompts})
    assert list(info["prompt"]) == prompts
    assert list(info["split"]) == [task.split_of(p) for p in prompts]
    for i, env in enumerate(singles):
        single_obs, single_info = env.reset(options={"prompt": prompts[i]})
        assert np.array_equal(obs[i], single_obs) and single_info["split"] == info["split"][i]
    rng = np.random.default_rng(0)
    done = np.zeros(n, dtype=bool)
    step = 0
    correct = 0
    while not done.all():
        masks = vec.unwrapped.action_masks()
        # every third row writes the solution, the others sample under the mask or anywhere (malformed
        # and truncated answers too)
        acts = np.array([task.solution(prompts[i])[step] if i % 3 == 0 and not done[i]
                         else rng.choice(np.flatnonzero(masks[i])) if i % 3 == 1
                         else rng.integers(len(task.vocab)) for i in range(n)])
        step += 1
        obs, rewards, terminated, truncated, info = vec.step(acts)
        for i, env in enumerate(singles):
            if done[i]:
                continue
            assert np.array_equal(masks[i], env.unwrapped.action_masks())
            single_obs, reward, term, trunc, single_info = env.step(int(acts[i]))
            assert np.array_equal(obs[i], single_obs)
            assert (rewards[i], terminated[i], truncated[i]) == (reward, term, trunc)
            if term or trunc:
                final = info["final_info"] if "final_info" in info else info
                assert final["correct"][i] == single_info["correct"]
                assert final["well_formed"][i] == single_info["well_formed"]
                assert final["length"][i] == single_info["length"]
                for part, value in single_info["reward_parts"].items():
                    assert final["reward_parts"][part][i] == value
                done[i] = True
                correct += single_info["correct"]
    assert correct >= n // 3 and truncated.dtype == bool


def test_the_vector_env_draws_its_split_and_repeats_by_seed() -> None:
    vec = gym.make_vec("rlvr/Digits-v0", num_envs=64, vectorization_mode="vector_entry_point", split="test")
    _, info = vec.reset(seed=5)
    assert set(info["split"]) == {"test"}
    assert {DigitsTask().split_of(p) for p in info["prompt"]} == {"test"}
    again = gym.make_vec("rlvr/Digits-v0", num_envs=64, vectorization_mode="vector_entry_point", split="test")
    assert list(again.reset(seed=5)[1]["prompt"]) == list(info["prompt"])


# -- agents: GRPO and SB3 train on it end to end --------------------------------------------------
SMALL = {"max_digits": 2, "train_digits": 1}


def _snapshot(module: object) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in module.parameters()]  # type: ignore[attr-defined]


def _moved(before: list[np.ndarray], module: object) -> bool:
    return any(not np.array_equal(b, a) for b, a in zip(before, _snapshot(module)))


@pytest.mark.parametrize("policy, observation", [("mlp", "features"), ("transformer", "tokens")])
def test_grpo_trains_on_it_through_the_vector_env_and_evaluates_both_splits(policy: str,
                                                                            observation: str) -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from agents import GRPO

    model = GRPO("rlvr/Digits-v0", policy=policy, seed=0, env_kwargs={**SMALL, "observation": observation})
    assert model.use_masks  # the task's grammar mask is used by default
    before = _snapshot(model.policy.net)  # type: ignore[attr-defined]
    model.learn(total_timesteps=640)
    assert model.num_timesteps >= 640 and _moved(before, model.policy.net)  # type: ignore[attr-defined]
    for split in ("train", "test"):
        report = model.success(split, k=2, n_prompts=16)
        assert 0.0 <= report.greedy <= 1.0 and 0.0 <= report.sampled <= 1.0


def test_sb3_ppo_and_maskable_ppo_train_on_it_and_are_scored_like_grpo() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    from agents.evaluation import greedy_success, sb3_predictor

    env = gym.make("rlvr/Digits-v0", **SMALL)
    ppo = PPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = _snapshot(ppo.policy)
    ppo.learn(total_timesteps=256)
    assert ppo.num_timesteps >= 256 and _moved(before, ppo.policy)
    assert 0.0 <= greedy_success(sb3_predictor(ppo), env, "test", n_prompts=16) <= 1.0

    venv = rlvr_env.to_sb3_vec_env(gym.make_vec("rlvr/Digits-v0", num_envs=16,
                                                vectorization_mode="vector_entry_point", **SMALL))
    masked = MaskablePPO("MlpPolicy", venv, n_steps=16, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = _snapshot(masked.policy)
    masked.learn(total_timesteps=256)
    assert masked.num_timesteps >= 256 and _moved(before, masked.policy)


@pytest.mark.slow
def test_grpo_learns_one_digit_addition() -> None:
    # Measured (docs/envs.md, the CLI): seed 0, the MLP preset, 150k env steps: greedy train success 0.41
    # on 256 prompts (from 0.0); held-out (a 2-digit operand) stays 0, the length-generalisation gap.
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from agents import GRPO

    model = GRPO("rlvr/Digits-v0", policy="mlp", seed=0, env_kwargs=SMALL)
    model.learn(total_timesteps=150_000)
    assert model.success("train", k=4, n_prompts=100).greedy >= 0.3


# -- the text env --------------------------------------------------------------------------------
def _token_answer(env: gym.Env, prompt: DigitsPrompt, answer: str) -> tuple[float, dict]:
    """Play ``answer`` and EOS in the token env (cut off at max_length): the reward and final info."""
    env.reset(options={"prompt": prompt})
    task = env.unwrapped.task
    for token in [task.vocab.index(ch) for ch in answer] + [task.eos_id]:
        _, reward, terminated, truncated, info = env.step(token)
        if terminated or truncated:
            return float(reward), info
    raise AssertionError("the episode did not end")


@pytest.mark.parametrize("reverse", [False, True])
def test_the_text_env_pays_what_the_token_env_pays(reverse: bool) -> None:
    kwargs = {"max_digits": 3, "train_digits": 2, "operators": "+-*", "reverse": reverse}
    text_env = gym.make("rlvr/DigitsText-v0", **kwargs)
    token_env = gym.make("rlvr/Digits-v0", **kwargs)
    task = token_env.unwrapped.task
    for p in _prompts(task, 20):
        r = p.result
        for answer in (task.write(r), task.write(r + 1), task.write(-r), f"0{r}", f"{r}0", "-0", "0", "-",
                       "9" * 7, "12-3"):
            text, info = text_env.reset(options={"prompt": p})
            assert f"What is {p.a} {p.op} {p.b}?" in text and info["split"] == task.split_of(p)
            _, reward, terminated, truncated, info = text_env.step(f"so... <answer> {answer} </answer>")
            assert (terminated, truncated) == (True, False)
            token_reward, token_info = _token_answer(token_env, p, answer)
            assert reward == token_reward, (p, answer)
            for key in ("reward_parts", "correct", "well_formed"):
                assert info[key] == token_info[key], (p, answer, key)
            if info["well_formed"]:
                assert (info["expression"], info["value"]) == (token_info["expression"], token_info["value"])
    # what a language model can write and the token env cannot: refused with a reason, never paid
    for completion in ("<answer>1 9</answer>", "<answer>19.0</answer>", "<answer>nineteen</answer>", "19"):
        text_env.reset(options={"prompt": (12, "+", 7)})
        _, reward, _, _, info = text_env.step(completion)
        assert reward == 0.0 and info["reason"]


# -- the language-model bridges ------------------------------------------------------------------
def test_trl_reward_functions_and_verl_pay_what_the_text_env_pays() -> None:
    pytest.importorskip("datasets")
    from rlvr_env.llm import make_dataset, reward_functions
    from rlvr_env.llm.verl_reward import compute_score, verl_rows

    data = make_dataset("digits", split="test", size=12, seed=0)
    assert data.column_names == ["prompt", "a", "op", "b", "split"]
    text_env = gym.make("rlvr/DigitsText-v0", split="test")
    prompts = [DigitsPrompt(a, op, b) for a, op, b in zip(data["a"], data["op"], data["b"])]
    answers = [str(p.result) if i % 3 == 0 else str(p.result + 1) if i % 3 == 1 else f"0{p.result}"
               for i, p in enumerate(prompts)]
    completions = [f"I think <answer>{a}</answer>" for a in answers]
    parts = [f(prompts=data["prompt"], completions=completions, a=data["a"], op=data["op"], b=data["b"])
             for f in reward_functions("digits")]
    rows = verl_rows("digits", split="test", size=12, seed=0)
    for i, p in enumerate(prompts):
        text, _ = text_env.reset(options={"prompt": p})
        assert data["prompt"][i] == text == rows[i]["prompt"][0]["content"]
        _, reward, *_, info = text_env.step(completions[i])
        assert parts[0][i] + parts[1][i] == reward
        assert [parts[0][i], parts[1][i]] == [info["reward_parts"][k] for k in ("accuracy", "format")]
        verl = compute_score(rows[i]["data_source"], completions[i], rows[i]["reward_model"]["ground_truth"])
        assert verl["score"] == reward and verl["reason"] == (info["reason"] or "")
    assert sorted(set(sum(parts, []))) == [0.0, 0.1, 1.0]  # correct, wrong and malformed all occur


def test_verl_rows_carry_the_task_s_settings(tmp_path) -> None:
    pd = pytest.importorskip("pandas")
    from rlvr_env.llm.verl_reward import compute_score, ground_truth, verl_rows

    settings = {"operators": "+-", "reverse": True}  # not the defaults: the rows must carry them
    task = DigitsTask(**settings)  # type: ignore[arg-type]
    path = tmp_path / "rows.parquet"
    pd.DataFrame(verl_rows(task, split="train", size=12, seed=0)).to_parquet(path)
    rows = pd.read_parquet(path).to_dict("records")  # as verl reads them
    text_env = gym.make("rlvr/DigitsText-v0", **settings)
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        prompt = task.prompt_from_record({k: truth[k] for k in ("a", "op", "b")})
        for answer, want in ((task.write(prompt.result), 1.1), ("x", 0.0)):
            completion = f"so <answer>{answer}</answer>"
            paid = compute_score(row["data_source"], completion, truth)["score"]
            text_env.reset(options={"prompt": prompt})
            assert paid == text_env.step(completion)[1] == pytest.approx(want), (prompt, answer)
    truth = ground_truth(task, (12, "-", 34))  # 12 - 34 = -22, written "-22" either way
    assert truth["task_kwargs"] == task.keywords() and DigitsTask(**truth["task_kwargs"]).reverse
    minus = ground_truth(task, (10, "-", 23))  # -13, written "-31" reversed
    assert compute_score("rlvr/digits", "<answer>-31</answer>", minus)["score"] == pytest.approx(1.1)
    wrong = compute_score("rlvr/digits", "<answer>-13</answer>", json.dumps(minus))  # JSON text too
    assert wrong["score"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"task_kwargs=.*do not build DigitsTask"):
        compute_score("rlvr/digits", "<answer>1</answer>", {**truth, "task_kwargs": {"digits": 3}})
    with pytest.raises(ValueError, match="task_kwargs=.* must be a dict"):
        compute_score("rlvr/digits", "<answer>1</answer>", {**truth, "task_kwargs": "reverse"})


def test_a_verifiers_taskset_of_digits_pays_what_the_text_env_pays() -> None:
    import asyncio

    vf = pytest.importorskip("verifiers.v1")
    from rlvr_env.llm.vf_taskset import ArithmeticTasksetConfig, RlvrTask, RlvrTaskset, reply_trace

    settings = {"operators": "+-*", "reverse": True}  # not the defaults: the traces must carry them

    class DigitsTaskset(RlvrTaskset, vf.Taskset[RlvrTask, ArithmeticTasksetConfig]):
        def rlvr_task(self) -> DigitsTask:  # its settings travel by DigitsTask.keywords
            return DigitsTask(**settings)  # type: ignore[arg-type]

    text_env = gym.make("rlvr/DigitsText-v0", **settings)
    task = text_env.unwrapped.task
    paid = set()
    for item in DigitsTaskset(ArithmeticTasksetConfig(num_tasks=6, split="test")):
        prompt = task.prompt_from_record(item.data.record)
        for answer in (task.write(prompt.result), task.write(prompt.result + 1), "0" + str(prompt.result)):
            reply = f"Sure. <answer>{answer}</answer>"
            trace = reply_trace(item, reply)
            asyncio.run(item.score(trace))
            text_env.reset(options={"prompt": prompt})
            assert trace.reward == pytest.approx(text_env.step(reply)[1]), (prompt, answer)
            paid.add(round(float(trace.reward), 6))
    assert paid == {0.0, 0.1, 1.1}


# -- registration --------------------------------------------------------------------------------
def test_register_envs_builds_every_env_from_a_task_factory_and_splits_the_kwargs() -> None:
    from rlvr_env import register_envs
    from rlvr_env.tasks.registry import TASKS

    class Signed(DigitsTask):
        name = "test_signed_digits"

        def __init__(self, **kwargs: object) -> None:
            super().__init__(operators="+-", **kwargs)  # type: ignore[arg-type]

    register_envs("test/SignedDigits-v0", Signed, text_id="test/SignedDigitsText-v0")
    assert TASKS["test_signed_digits"] is Signed
    env = gym.make("test/SignedDigits-v0", max_digits=4, split="test", format_weight=0.5)
    assert env.unwrapped.task.max_digits == 4 and env.unwrapped.split == "test"
    assert env.unwrapped.reward_weights.format == 0.5 and "-" in env.unwrapped.task.vocab
    vec = gym.make_vec("test/SignedDigits-v0", num_envs=2, vectorization_mode="vector_entry_point",
                       max_digits=4, copy=False)
    assert vec.unwrapped.task.max_digits == 4 and vec.unwrapped.copy is False
    text = gym.make("test/SignedDigitsText-v0", train_digits=1)
    assert text.unwrapped.task.train_digits == 1
    with pytest.raises(ValueError, match="task=3 must be a Task class"):
        register_envs("test/Bad-v0", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="env_id='' must be a non-empty Gymnasium id"):
        register_envs("", Signed)

    def with_split(split: str = "train", **kwargs: object) -> DigitsTask:
        return DigitsTask(**kwargs)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="takes \\['split'\\], which are env keywords"):
        register_envs("test/Clash-v0", with_split)
    assert "test/Clash-v0" not in gym.registry
