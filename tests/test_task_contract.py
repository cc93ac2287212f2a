"""The Task contract: a verifier of one's own is paid on every path, and a task defined outside the package
(its own prompt type, its own ``score``) runs through every env, the checkers and GRPO."""

from __future__ import annotations

import copy
import dataclasses
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from agents import GRPO, GRPOConfig
from agents.grpo.rollout import VectorGroupRunner, draw_prompts
from rlvr_env import CountdownTask, RewardWeights, Task, TokenEnv, Verdict
from rlvr_env.vector import TokenVectorEnv

ROOT = Path(__file__).resolve().parents[1]


# -- the README's NearMiss recipe: one verifier, paid the same by every path ---------------------------
def _readme_near_miss() -> type:
    """The ``NearMiss`` class of the README's plug-in example, as written there."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^class NearMiss\(CountdownTask\):.*?(?=^\S)", text, flags=re.S | re.M)
    assert match, "the README's plug-in example defines NearMiss"
    namespace: dict[str, object] = {"CountdownTask": CountdownTask, "dataclasses": dataclasses}
    exec(compile(match.group(0), "README.md NearMiss", "exec"), namespace)  # noqa: S102 - our own doc
    return namespace["NearMiss"]  # type: ignore[return-value]


NEAR_ID = "test/NearMiss-v0"
NEAR = _readme_near_miss()


#: the weight the README's example gives its third part (through the env, as any part's weight)
NEAR_WEIGHTS = {"near": 0.5}


def _near_env(**kwargs: object) -> TokenEnv:
    return TokenEnv(NEAR(n_numbers=3), **{"reward_weights": NEAR_WEIGHTS, **kwargs})  # type: ignore[arg-type]


def _near_vector_env(num_envs: int = 1, **kwargs: object) -> TokenVectorEnv:
    return TokenVectorEnv(NEAR(n_numbers=3), num_envs,  # type: ignore[arg-type]
                          **{"reward_weights": NEAR_WEIGHTS, **kwargs})


if NEAR_ID not in gym.registry:
    gym.register(NEAR_ID, entry_point=_near_env, vector_entry_point=_near_vector_env)


def _single_env_reward(env: TokenEnv, prompt: object, tokens: Sequence[int]) -> float:
    env.reset(options={"prompt": prompt})
    reward = 0.0
    for t in tokens:
        _, r, terminated, truncated, _ = env.step(int(t))
        reward += float(r)
    assert terminated or truncated
    return reward


def test_near_miss_pays_the_same_in_the_single_and_the_vector_env() -> None:
    prompt = ((9, 4, 5), 13)
    answers = np.array([[0, 3, 2, 9], [0, 3, 1, 9], [0, 3, 0, 9]])  # 9+5 (misses by 1), 9+4 (right), 9+9
    single = [_single_env_reward(_near_env(), prompt, a) for a in answers]
    assert single == pytest.approx([0.6, 1.1, 0.0])
    envs = _near_vector_env(3)
    envs.reset(options={"prompt": prompt})
    for col in answers.T:
        _, rewards, _, _, info = envs.step(col)
    assert rewards.tolist() == pytest.approx(single)
    assert info["final_info"]["reward_parts"]["near"].tolist() == [0.5, 0.0, 0.0]


def test_near_miss_pays_the_same_in_a_grpo_rollout() -> None:
    model = GRPO(NEAR_ID, GRPOConfig.preset("countdown"), policy="mlp", seed=0)
    groups, size = 32, 8
    runner = VectorGroupRunner(NEAR_ID, {}, groups, size, use_masks=True)
    rng = np.random.default_rng(3)
    prompts = draw_prompts(runner.task, "train", groups, copy.deepcopy(rng))
    batch = runner.collect(model.policy, rng)
    env = _near_env()
    paid = [_single_env_reward(env, prompts[i // size], batch.actions[i, : batch.lengths[i]])
            for i in range(groups * size)]
    assert batch.returns.tolist() == pytest.approx(paid)
    assert any(abs(r - 0.6) < 1e-9 for r in paid), "the rollout met a near miss"


def test_near_miss_pays_the_same_in_the_text_env() -> None:
    from rlvr_env.text_env import TextEnv

    env = TextEnv(NEAR(n_numbers=3), reward_weights=NEAR_WEIGHTS)
    env.reset(options={"prompt": ((9, 4, 5), 13)})
    _, reward, *_, info = env.step("<answer>9+5</answer>")
    assert reward == pytest.approx(0.6) and info["reward_parts"]["near"] == 0.5


def test_an_overridden_score_turns_the_array_fast_path_off() -> None:
    assert CountdownTask(n_numbers=3).array_path()
    assert not NEAR(n_numbers=3).array_path()


# -- a task of its own, defined here, outside the package ------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Letters:
    """The prompt type of :class:`Reverse`: three letters."""

    text: str


class Reverse(Task[Letters]):
    """Write the prompt's three letters backwards, then EOS. Held out: words with two or more ``a``."""

    name = "reverse"
    vocab = ("a", "b", "c", "<eos>")
    max_length = 4
    eos_id = 3

    def sample_prompt(self, rng: np.random.Generator, split: str) -> Letters:
        while True:
            word = Letters("".join("abc"[i] for i in rng.integers(3, size=3)))
            if self.split_of(word) == split:
                return word

    def validate_prompt(self, prompt: object) -> Letters:
        text = prompt.text if isinstance(prompt, Letters) else prompt
        if not isinstance(text, str) or len(text) != 3 or set(text) - set("abc"):
            raise ValueError(f"prompt {prompt!r} must be three letters from 'abc'")
        return Letters(text)

    def split_of(self, prompt: Letters) -> str:
        return "test" if prompt.text.count("a") >= 2 else "train"

    @property
    def prompt_layout(self) -> dict[str, slice]:
        return {"letters": slice(0, 9)}

    def encode_prompt(self, prompt: Letters) -> np.ndarray:
        out = np.zeros(9, dtype=np.float32)
        for i, ch in enumerate(prompt.text):
            out[3 * i + "abc".index(ch)] = 1.0
        return out

    def score(self, prompt: Letters, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        text = self.decode(token_ids, prompt)
        well_formed = not truncated and len(text) == 3
        correct = well_formed and text == prompt.text[::-1]
        parts = {"accuracy": weights.accuracy * correct, "format": weights.format * well_formed}
        return Verdict(reward=sum(parts.values()), correct=correct, well_formed=well_formed, value=None,
                       reason=None if correct else "not the reverse", expression=text, parts=parts)

    def action_mask(self, prompt: Letters, prefix: Sequence[int]) -> np.ndarray:
        mask = np.zeros(4, dtype=bool)
        mask[:3] = len(prefix) < 3
        mask[3] = len(prefix) >= 3
        return mask

    def solution(self, prompt: Letters) -> tuple[int, ...]:
        return (*("abc".index(ch) for ch in prompt.text[::-1]), self.eos_id)

    def prompt_record(self, prompt: Letters) -> dict[str, object]:
        return {"letters": prompt.text}

    def prompt_from_record(self, record: dict[str, object]) -> Letters:
        return self.validate_prompt(record["letters"])


REVERSE_ID = "test/Reverse-v0"
if REVERSE_ID not in gym.registry:
    gym.register(REVERSE_ID, entry_point=lambda **kw: TokenEnv(Reverse(), **kw),  # type: ignore[arg-type]
                 vector_entry_point=lambda num_envs=1, **kw: TokenVectorEnv(Reverse(), num_envs, **kw))


def test_a_task_of_its_own_runs_in_the_single_env_and_passes_both_checkers() -> None:
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(REVERSE_ID)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    sb3_check_env(env.unwrapped)
    _, info = env.reset(options={"prompt": Letters("abc")})
    assert info["prompt"] == Letters("abc") and info["split"] == "train"
    for t in (2, 1, 0, 3):
        _, reward, terminated, _, info = env.step(t)
    assert terminated and info["correct"] and reward == pytest.approx(1.1)
    assert env.unwrapped.action_masks().tolist() == [False, False, False, True]
    with pytest.raises(ValueError, match="three letters"):
        env.reset(options={"prompt": Letters("abd")})


def test_a_task_of_its_own_runs_in_the_vector_env_in_lockstep_with_the_single_env() -> None:
    n = 6
    envs = gym.make_vec(REVERSE_ID, num_envs=n, vectorization_mode="vector_entry_point")
    prompts = [Letters(w) for w in ("abc", "cba", "bbb", "acb", "cab", "bca")]
    obs, info = envs.reset(options={"prompt": prompts})
    assert info["prompt"].tolist() == prompts
    singles = [TokenEnv(Reverse()) for _ in range(n)]
    single_obs = [e.reset(options={"prompt": p})[0] for e, p in zip(singles, prompts)]
    assert np.array_equal(obs, np.stack(single_obs))
    rng = np.random.default_rng(0)
    for _ in range(4):
        masks = envs.unwrapped.action_masks()
        assert np.array_equal(masks, np.stack([e.action_masks() for e in singles]))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, rewards, terminated, truncated, info = envs.step(actions)
        for i, e in enumerate(singles):
            o, r, te, tr, _ = e.step(int(actions[i]))
            assert rewards[i] == pytest.approx(r) and terminated[i] == te and truncated[i] == tr
            if te or tr:
                assert info["final_info"]["prompt"][i] == prompts[i]
                e.reset(options={"prompt": info["prompt"][i] if "prompt" in info else prompts[i]})


def test_a_task_of_its_own_has_a_token_observation_only_when_it_offers_one() -> None:
    with pytest.raises(ValueError, match="offers no token observation"):
        TokenEnv(Reverse(), observation="tokens")


def test_a_task_of_its_own_in_the_text_env_and_the_sb3_vec_env() -> None:
    from rlvr_env import to_sb3_vec_env
    from rlvr_env.text_env import TextEnv

    env = TextEnv(Reverse())
    env.reset(options={"prompt": Letters("abc")})
    _, reward, *_ = env.step("so: <answer>c b a</answer>")
    assert reward == pytest.approx(1.1)
    env.reset(options={"prompt": Letters("abc")})
    assert env.step("<answer>cbd</answer>")[1] == 0.0  # "d" is not in the vocabulary: refused
    venv = to_sb3_vec_env(gym.make_vec(REVERSE_ID, num_envs=2, vectorization_mode="vector_entry_point"))
    venv.reset()
    for t in (0, 0, 0, 3):
        _, _, dones, infos = venv.step(np.array([t, t]))
    assert dones.all() and all(isinstance(i["prompt"], Letters) for i in infos)


class Recorded(Reverse):
    """Reverse, remembering what :meth:`Task.score_text` hands to :meth:`score`."""

    seen: list[tuple[list[int], bool]] = []

    def score(self, prompt: Letters, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        self.seen.append((list(token_ids), truncated))
        return super().score(prompt, token_ids, weights, truncated=truncated)


def test_score_text_appends_eos_so_an_answer_of_max_length_tokens_is_truncated() -> None:
    task, weights = Recorded(), RewardWeights()
    task.seen = []
    fits = task.score_text(Letters("abc"), "cba", weights)  # 3 tokens + EOS = max_length
    assert fits.correct and fits.reward == pytest.approx(1.1)
    task.score_text(Letters("abc"), "cbaa", weights)  # 4 tokens: no room left for EOS
    assert task.seen == [([2, 1, 0, 3], False), ([2, 1, 0, 0], True)]


class OneTen(Reverse):
    """A vocabulary where one token is a prefix of another: the longer one must be tried first."""

    vocab = ("1", "10", "<eos>")
    max_length = 3
    eos_id = 2


def test_parse_answer_reads_the_longest_vocabulary_string_first() -> None:
    assert OneTen().parse_answer(Letters("abc"), "110") == [0, 1]
    assert OneTen().parse_answer(Letters("abc"), "10 1") == [1, 0]


def test_the_text_prompt_asks_for_the_task_s_own_kind_of_answer() -> None:
    """The instruction names what the task's answer is: "answer" by default, the arithmetic tasks'
    "expression", Digits' "number" (it said "expression" for every task before)."""
    from rlvr_env.completions import AnswerFormat, prompt_text
    from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
    from rlvr_env.tasks.digits import DigitsTask
    from rlvr_env.text_env import TextEnv

    env = TextEnv(Reverse())
    text, _ = env.reset(options={"prompt": Letters("abc")})
    assert text.endswith("give the answer alone between <answer> and </answer>.")
    assert "expression" not in text
    digits = DigitsTask()
    prompt = digits.sample_prompt(np.random.default_rng(0), "train")
    assert prompt_text(digits, prompt).endswith("give the number alone between <answer> and </answer>.")
    assert prompt_text(digits, prompt, AnswerFormat(whole=True)).endswith("Reply with the number only, "
                                                                          "nothing else.")
    arithmetic = ArithmeticTask()
    assert "give the expression alone" in prompt_text(arithmetic, arithmetic.prompts("train")[0])


def test_grpo_learns_on_a_task_of_its_own() -> None:
    model = GRPO(REVERSE_ID, GRPOConfig.preset("countdown"), policy="mlp", seed=0)
    assert model.vectorized
    model.learn(total_timesteps=600)
    assert model.num_timesteps >= 600
    assert 0.0 <= model.last_metrics["rollout/solve_rate"] <= 1.0
    assert 0.0 <= model.evaluate("test") <= 1.0


def test_a_cold_start_reads_a_task_s_solutions() -> None:
    from agents.sft import solutions

    class Unsolved(Reverse):
        solution = Task.solution  # declares none

    assert not Unsolved().has_solutions
    with pytest.raises(ValueError, match="declares no solutions"):
        solutions(Unsolved(), 2, seed=0)
    _, answers = solutions(gym.make("rlvr/Arithmetic-v0").unwrapped.task, 4, seed=0)
    assert all(len(a) == 5 for a in answers)  # a fixed-length task's answers carry no EOS
    _, answers = solutions(CountdownTask(n_numbers=3), 4, seed=0)
    assert all(a[-1] == CountdownTask(n_numbers=3).eos_id for a in answers)
    assert Reverse().has_solutions and Reverse().solution(Letters("abc")) == (2, 1, 0, 3)


def test_a_task_of_its_own_takes_a_cold_start() -> None:
    from agents.sft import cold_start, demonstrations

    model = GRPO(REVERSE_ID, GRPOConfig.preset("countdown"), policy="mlp", seed=0)
    demos = demonstrations(model.env, 60, seed=0)
    assert all(isinstance(p, Letters) for p in demos.prompts) and len(demos.prompt_index) == 60
    assert len(set(demos.prompts)) == len(demos.prompts) == int(demos.prompt_index.max()) + 1
    assert {Reverse().split_of(p) for p in demos.prompts} == {"train"}
    before = model.evaluate("train")
    info = cold_start(model, 200, epochs=20, batch_size=32, learning_rate=3e-3)
    assert info["sft_solutions"] == 200 and info["sft_losses"][-1] < info["sft_losses"][0]
    assert before < 0.5 < model.evaluate("train")


def test_a_task_of_its_own_through_the_language_model_bridges() -> None:
    import asyncio

    import verifiers.v1 as vf

    from rlvr_env.llm import compute_score, ground_truth, make_dataset, reward_functions
    from rlvr_env.llm.vf_taskset import ArithmeticTasksetConfig, RlvrTask, RlvrTaskset, reply_trace
    from rlvr_env.tasks import register_task

    register_task("reverse", Reverse)
    rows = make_dataset(Reverse(), size=4, seed=0)
    assert set(rows.column_names) == {"prompt", "letters", "split"}
    words = rows["letters"]
    completions = [f"<answer>{w[::-1]}</answer>" for w in words[:2]] + ["<answer>aaa</answer>", "no tags"]
    accuracy, form = reward_functions(Reverse())
    assert accuracy(completions=completions, letters=words) == [1.0, 1.0, float(words[2] == "aaa"), 0.0]
    assert form(completions=completions, letters=words) == [0.1, 0.1, 0.1, 0.0]
    truth = ground_truth(Reverse(), Letters("abc"))
    assert truth == {"letters": "abc"}  # a task built without arguments carries no settings
    assert compute_score("rlvr/reverse", "so <answer>cba</answer>", truth)["score"] == pytest.approx(1.1)

    class ReverseTaskset(RlvrTaskset, vf.Taskset[RlvrTask, ArithmeticTasksetConfig]):
        def rlvr_task(self) -> Task:
            return Reverse()

    task = next(iter(ReverseTaskset(ArithmeticTasksetConfig(num_tasks=2))))
    trace = reply_trace(task, f"<answer>{task.data.record['letters'][::-1]}</answer>")
    asyncio.run(task.score(trace))
    assert trace.reward == pytest.approx(1.1)


def test_a_task_with_settings_must_say_which_built_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlvr_env.llm import ground_truth
    from rlvr_env.tasks.registry import TASKS

    class Sized(Reverse):
        name = "sized_reverse"

        def __init__(self, width: int = 3) -> None:
            self.width = width

    monkeypatch.setitem(TASKS, "sized_reverse", Sized)  # registered for this test only
    assert Reverse().keywords() == {}
    with pytest.raises(NotImplementedError, match=r"Sized takes \['width'\]: override Task.keywords"):
        ground_truth(Sized(), Letters("abc"))
    Sized.keywords = lambda self: {"width": self.width}  # type: ignore[method-assign]
    assert ground_truth(Sized(4), Letters("abc")) == {"letters": "abc", "task_kwargs": {"width": 4}}
    Sized.keywords = lambda self: {"size": 4}  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="cannot be rebuilt from its keywords"):
        ground_truth(Sized(4), Letters("abc"))


# -- Countdown's settings, declared once -----------------------------------------------------------------
def test_countdown_settings_are_one_object_every_countdown_env_takes() -> None:
    from rlvr_env import CountdownSettings

    settings = CountdownSettings(n_numbers=3, operators="*+", number_range=[1, 9])
    assert settings == CountdownSettings(n_numbers=3, operators="+*", number_range=(1, 9), max_length=8)
    same = CountdownTask(n_numbers=3, operators="+*", number_range=(1, 9))
    assert CountdownTask(settings).vocab == same.vocab and same.settings == settings
    single = gym.make("rlvr/Countdown-v0", settings=settings).unwrapped
    vector = gym.make_vec("rlvr/Countdown-v0", num_envs=2, vectorization_mode="vector_entry_point",
                          settings=settings).unwrapped
    text = gym.make("rlvr/CountdownText-v0", settings=settings).unwrapped
    assert single.task.settings == vector.task.settings == text.task.settings == settings
    by_keywords = gym.make("rlvr/Countdown-v0", n_numbers=3).unwrapped.task
    assert by_keywords.settings == CountdownSettings(n_numbers=3)
    with pytest.raises(ValueError, match=r"unknown keyword\(s\) \['n_number'\]; its settings are"):
        gym.make("rlvr/Countdown-v0", n_number=3)
    with pytest.raises(ValueError, match="give one or the other"):
        CountdownTask(settings, n_numbers=4)
    with pytest.raises(ValueError, match=r"max_length=5 must be in \[2 \* n_numbers, 64\]"):
        CountdownSettings(n_numbers=3, max_length=5)


# -- no task is probed ----------------------------------------------------------------------------------
def test_no_code_probes_a_task_for_an_ability() -> None:
    probe = re.compile(r"\b(hasattr|getattr)\([^()\n]*\btask\b")
    found = []
    for folder in ("rlvr_env", "agents"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for no, line in enumerate(path.read_text().splitlines(), 1):
                if probe.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not found, "\n".join(found)
