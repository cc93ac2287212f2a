"""A task mix (``rlvr_env.MixTask``, docs/mix.md): one vocabulary and one token context over several tasks,
prompts drawn by weight, each answer paid by its member's own verifier on every path (single env, native
vector env, text env), every member's metrics reported per task (info, GRPO's log)."""

from __future__ import annotations

import functools
import itertools
import math
import pickle
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401  (registers the ids)
from rlvr_env import DigitsTask, MixPrompt, MixTask, RewardWeights, Task, TokenEnv, Verdict
from rlvr_env.tasks.countdown import CountdownTask
from rlvr_env.tasks.expression import ArithmeticTask
from rlvr_env.tasks.think import ThinkTask
from rlvr_env.text_env import TextEnv
from rlvr_env.vector import TokenVectorEnv

MIX = "rlvr/CountdownMix-v0"
THINK_MIX = "rlvr/CountdownThinkMix-v0"
MEMBERS = ("countdown", "digits", "arithmetic")
ONLY = {name: {m: float(m == name) for m in MEMBERS} for name in MEMBERS}  # one member drawn


def mix(**weights: float) -> MixTask:
    return gym.make(MIX, weights=weights or None).unwrapped.task


def think_mix(calculator: bool = True) -> MixTask:
    return gym.make(THINK_MIX, calculator=calculator).unwrapped.task


# -- a fixed-length task of our own (its prompts are letters) -----------------------------------------
@dataclass(frozen=True)
class Pair:
    """The prompt of :class:`Twice`: one letter."""

    letter: str


class Twice(Task[Pair]):
    """Write the prompt's letter twice: exactly 2 tokens, no EOS (a fixed-length task)."""

    name = "twice"
    vocab = ("a", "b", "n0")
    max_length = 2
    eos_id = None

    def sample_prompt(self, rng: np.random.Generator, split: str) -> Pair:
        return Pair("ab"[int(rng.integers(2))] if split == "train" else "b")

    def validate_prompt(self, prompt: object) -> Pair:
        if not isinstance(prompt, Pair) or prompt.letter not in "ab":
            raise ValueError(f"prompt {prompt!r} must be Pair('a') or Pair('b')")
        return prompt

    def split_of(self, prompt: Pair) -> str:
        return "train"

    @property
    def prompt_layout(self) -> dict[str, slice]:
        return {"letter": slice(0, 2)}

    def encode_prompt(self, prompt: Pair) -> np.ndarray:
        return np.array([prompt.letter == "a", prompt.letter == "b"], dtype=np.float32)

    def score(self, prompt: Pair, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        text = "".join(self.vocab[t] for t in token_ids)
        ok = text == prompt.letter * 2
        parts = weights.parts(ok, len(token_ids) == 2)
        return Verdict(sum(parts.values()), ok, len(token_ids) == 2, None, None if ok else "no", text, parts)

    def solution(self, prompt: Pair) -> tuple[int, ...]:
        return (self.vocab.index(prompt.letter),) * 2


# -- helpers -------------------------------------------------------------------------------------------
def member_prompts(task: MixTask, name: str, k: int, seed: int = 0) -> list[MixPrompt]:
    drawn = task.members[name].sample_prompts(np.random.default_rng(seed), "train", k)
    return [MixPrompt(name, p) for p in drawn]


@functools.lru_cache(maxsize=None)
def _arithmetic_answers() -> dict[int, tuple[int, ...]]:
    """A correct 5-token answer per target (Arithmetic has no ``solution``): found by trying every one."""
    task = ArithmeticTask()
    out: dict[int, tuple[int, ...]] = {}
    for prompt in task.prompts("train") + task.prompts("test"):
        if prompt.target not in out:
            out[prompt.target] = next(a for a in itertools.product(range(5), repeat=5)
                                      if task.score(prompt, a, RewardWeights()).correct)
    return out


def known_answer(task: MixTask, prompt: MixPrompt) -> tuple[int, ...]:
    """A correct answer in mix ids: the task's solution, or a found one for Arithmetic (plus EOS)."""
    found = task.solution(prompt)
    if found is not None:
        return found
    assert prompt.task == "arithmetic"
    return (*task.mix_tokens("arithmetic", _arithmetic_answers()[prompt.prompt.target]), task.eos_id)


def run_single(env: TokenEnv, prompt: object, actions: Sequence[int]) -> tuple[float, bool, bool, dict]:
    env.reset(options={"prompt": prompt})
    for a in actions:
        _, reward, terminated, truncated, info = env.step(int(a))
        if terminated or truncated:
            return float(reward), terminated, truncated, info
    raise AssertionError("the episode did not end")


def run_vector(task: MixTask, prompts: list[MixPrompt], actions: np.ndarray,
               observation: str = "features") -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """Rewards, terminated, truncated and each row's final info (as a dict of that row's values)."""
    n = len(prompts)
    venv = TokenVectorEnv(task, n, autoreset_mode="Disabled", observation=observation)
    venv.reset(options={"prompt": prompts})
    rewards, term, trunc = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
    infos: list[dict] = [{} for _ in range(n)]
    for col in range(actions.shape[1]):
        if venv.finished.all():
            break
        active = ~venv.finished
        _, r, te, tr, info = venv.step(actions[:, col])
        for i in np.flatnonzero(active & (te | tr)):
            rewards[i], term[i], trunc[i] = r[i], te[i], tr[i]
            infos[i] = {"prompt": info["prompt"][i], "correct": bool(info["correct"][i]),
                        "stats": {k: v[i] for k, v in info["stats"].items() if not k.startswith("_")}}
    assert venv.finished.all()
    return rewards, term, trunc, infos


def pad(answers: list[Sequence[int]], width: int, fill: int) -> np.ndarray:
    out = np.full((len(answers), width), fill, dtype=np.int64)
    for i, a in enumerate(answers):
        out[i, : len(a)] = a
    return out


# -- the checkers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("observation", ["features", "tokens"])
@pytest.mark.parametrize(("env_id", "kwargs"), [(MIX, {}), (THINK_MIX, {"calculator": False}),
                                                (THINK_MIX, {"calculator": True})])
def test_both_checkers_pass(env_id: str, kwargs: dict, observation: str) -> None:
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, observation=observation, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    sb3_check_env(env.unwrapped)
    inner = env.unwrapped
    assert inner.task.max_length == (96 if env_id == THINK_MIX else 8)
    if observation == "tokens":
        assert inner.observation_space.vocab[1: 4] == tuple(f"<task:{m}>" for m in inner.task.names)


def test_the_vocabulary_is_the_members_union_with_one_eos() -> None:
    task = mix()
    assert task.vocab == ("n0", "n1", "n2", "+", "-", "*", "/", "(", ")", *"0123456789", "<eos>")
    assert task.eos_id == len(task.vocab) - 1 and task.max_length == 8  # Countdown-3's 8; Arithmetic 5 + 1
    think = think_mix()
    assert "</answer>" not in think.vocab and think.vocab[-1] == "<eos>"
    member = think.members["countdown_think"]
    assert think.answers.forward["countdown_think"][member.eos_id] == think.eos_id
    for name, m in think.members.items():  # every member token keeps its string (EOS excepted)
        fwd = think.answers.forward[name]
        assert all(think.vocab[fwd[i]] == t for i, t in enumerate(m.vocab) if i != m.eos_id)
    assert think.reply_after == frozenset({think.vocab.index("=")})
    assert think_mix(calculator=False).reply_after == frozenset()


# -- every path pays alike -------------------------------------------------------------------------------
@pytest.mark.parametrize("observation", ["features", "tokens"])
@pytest.mark.parametrize("name", MEMBERS)
def test_the_vector_env_pays_what_the_single_env_pays(name: str, observation: str) -> None:
    task = mix()
    k = 24
    prompts = member_prompts(task, name, k, seed=1)
    rng = np.random.default_rng(2)
    width = task.max_length
    answers = [known_answer(task, p) for p in prompts[: k // 2]]
    actions = np.concatenate([pad(answers, width, task.eos_id),
                              rng.integers(len(task.vocab), size=(k - k // 2, width))])
    rewards, term, trunc, infos = run_vector(task, prompts, actions, observation)
    env = TokenEnv(task, observation=observation)
    for i, p in enumerate(prompts):
        reward, terminated, truncated, info = run_single(env, p, actions[i])
        assert (reward, terminated, truncated) == (rewards[i], term[i], trunc[i]), (p, actions[i])
        assert info["prompt"].task == infos[i]["prompt"].task == name
        assert info["stats"] == infos[i]["stats"] and info["stats"][f"task/{name}"] == 1.0
        assert info["correct"] == infos[i]["correct"]
    assert rewards[: k // 2].tolist() == [1.1] * (k // 2)  # the known answers are paid in full


@pytest.mark.parametrize("calculator", [False, True])
def test_the_think_mix_pays_alike_in_both_envs_and_its_stats_are_per_task(calculator: bool) -> None:
    task = think_mix(calculator)
    prompts = [*member_prompts(task, "countdown_think", 6), *member_prompts(task, "digits", 3)]
    answers = [known_answer(task, p) for p in prompts]
    actions = pad(answers, task.max_length, task.eos_id)
    rewards, term, _, infos = run_vector(task, prompts, actions, "tokens")
    assert rewards.tolist() == [1.1] * len(prompts) and term.all()
    env = TokenEnv(task, observation="tokens")
    for i, p in enumerate(prompts):
        _, _, _, info = run_single(env, p, actions[i])
        assert info["stats"].keys() == {k for k, v in infos[i]["stats"].items() if not np.isnan(v)}
        assert all(infos[i]["stats"][k] == v for k, v in info["stats"].items())
    think_stats = infos[0]["stats"]
    assert think_stats["countdown_think/steps"] >= 1 and think_stats["task/countdown_think"] == 1.0
    assert (think_stats["countdown_think/calculator_calls"] > 0) == calculator
    # two rows that end in one step: the digits row did not measure the trace's steps (NaN, not 0)
    _, _, _, infos = run_vector(task, [prompts[0], prompts[-1]], np.full((2, 1), task.eos_id), "tokens")
    assert infos[0]["stats"]["countdown_think/steps"] == 0.0
    assert np.isnan(infos[1]["stats"]["countdown_think/steps"]) and infos[1]["stats"]["task/digits"] == 1.0


def test_the_text_env_pays_a_member_s_correct_completion_and_refuses_a_wrong_one() -> None:
    task = mix()
    env = TextEnv(task)
    for name in MEMBERS:
        prompt = member_prompts(task, name, 1, seed=3)[0]
        answer = task.members[name].decode(task.member_tokens(name, known_answer(task, prompt)),
                                           prompt.prompt)
        env.reset(options={"prompt": prompt})
        _, reward, terminated, _, info = env.step(f"so <answer>{answer}</answer>")
        assert reward == pytest.approx(1.1) and terminated and info["correct"], (name, answer)
        env.reset(options={"prompt": prompt})
        _, reward, _, _, info = env.step("<answer>9999999</answer>")
        assert reward < 1.0 and not info["correct"]


# -- the mapping is exact ---------------------------------------------------------------------------
def test_every_member_s_solution_mapped_is_paid_correct() -> None:
    weights = RewardWeights()
    # (with the calculator on, a solution leaves out the tokens the env writes: the env test pays those)
    for task in (mix(), think_mix(False), MixTask({"twice": Twice(), "digits": DigitsTask()})):
        for name in task.names:
            for p in member_prompts(task, name, 20, seed=4):
                verdict = task.score(p, known_answer(task, p), weights)
                assert verdict.correct and verdict.reward == pytest.approx(1.1), (p, verdict)


def test_a_foreign_token_is_never_allowed_and_an_answer_with_one_is_paid_nothing() -> None:
    task = mix()
    rng = np.random.default_rng(5)
    weights = RewardWeights()
    for name in MEMBERS:
        foreign = np.flatnonzero(task.answers.inverse[name] < 0)
        foreign = foreign[foreign != task.eos_id]
        assert len(foreign) > 0
        for p in member_prompts(task, name, 15, seed=6):
            prefix: list[int] = []
            while True:  # a masked walk: the mask never offers a foreign token
                mask = task.action_mask(p, prefix)
                assert not mask[foreign].any(), (p, prefix)
                t = int(rng.choice(np.flatnonzero(mask)))
                prefix.append(t)
                if t == task.eos_id or len(prefix) == task.max_length:
                    break
            good = known_answer(task, p)
            spoilt = [int(rng.choice(foreign)), *good[1:]]
            verdict = task.score(p, spoilt, weights)
            assert verdict.reward == 0.0 and not verdict.well_formed and "vocabulary" in verdict.reason
            only_eos = [t == task.eos_id for t in range(len(task.vocab))]
            assert task.action_mask(p, spoilt[:1]).tolist() == only_eos


def test_a_fixed_length_member_needs_eos_exactly_after_its_length() -> None:
    task = mix()
    weights = RewardWeights()
    p = member_prompts(task, "arithmetic", 1)[0]
    good = known_answer(task, p)
    body, eos = good[:-1], task.eos_id
    assert len(body) == 5 and good[-1] == eos
    assert task.score(p, good, weights).reward == pytest.approx(1.1)
    assert task.score(p, body, weights).reward == 0.0  # no EOS
    assert task.score(p, (*body[:4], eos), weights).reward == 0.0  # EOS early
    assert task.score(p, (*body, body[0], eos), weights).reward == 0.0  # a sixth token
    assert task.score(p, good, weights, truncated=True).reward == 0.0
    assert task.action_mask(p, body).tolist() == [t == eos for t in range(len(task.vocab))]
    assert not any(task.action_mask(p, body[:n])[eos] for n in range(5))
    env = TokenEnv(task)  # in the env: 5 tokens do not end the episode, the EOS after them does
    env.reset(options={"prompt": p})
    assert not any(env.step(t)[2] for t in body)
    _, reward, terminated, truncated, _ = env.step(eos)
    assert reward == pytest.approx(1.1) and terminated and not truncated
    assert run_single(env, p, (*body, body[0], *[body[0]] * 8))[:3] == (0.0, False, True)


def test_an_eos_member_s_answer_beyond_its_own_cap_is_paid_as_truncated() -> None:
    task = mix()
    p = member_prompts(task, "digits", 1)[0]  # Digits' cap is 5 tokens (the mix's is 8)
    digits = task.members["digits"]
    assert digits.max_length == 5
    one = task.vocab.index("1")
    long = (one,) * 6 + (task.eos_id,)
    verdict = task.score(p, long, RewardWeights())
    assert verdict.reward == 0.0 and "truncated" in verdict.reason
    assert task.action_mask(p, [one] * 5).tolist() == [t == task.eos_id for t in range(len(task.vocab))]


def test_the_tag_token_leads_each_member_s_context() -> None:
    task = mix()
    spec = task.context_tokens()
    for i, name in enumerate(MEMBERS):
        member = task.members[name]
        for p in member_prompts(task, name, 5):
            row = task.encode_context(p)
            own = member.encode_context(p.prompt)
            body = row[row != 0]
            assert body[0] == 1 + i and spec.vocab[body[0]] == f"<task:{name}>"
            member_vocab = (*member.context_tokens().vocab, *member.vocab)
            mix_vocab = (*spec.vocab, *task.vocab)
            # the rest reads as the member's own context, token by token (EOS renamed)
            assert [mix_vocab[t] for t in body[1:]] == [member_vocab[t] for t in own[own != 0]]
            assert len(row) == spec.width == 1 + max(m.context_tokens().width for m in task.members.values())
            features = task.encode_prompt(p)
            assert features[: len(MEMBERS)].tolist() == [float(j == i) for j in range(len(MEMBERS))]
            segment = slice(task._offsets[name], task._offsets[name] + member.prompt_dim)
            assert np.array_equal(features[segment], member.encode_prompt(p.prompt))
            assert features.sum() == 1 + member.encode_prompt(p.prompt).sum()


# -- the draw --------------------------------------------------------------------------------------
def _binomial_ok(count: int, n: int, p: float) -> bool:
    """Within 5 standard deviations of the binomial mean (a false alarm about 1 in 1.7 million)."""
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p))


def test_weights_are_respected_and_a_weight_of_zero_is_never_drawn() -> None:
    n = 4000
    task = mix(countdown=0.5, digits=0.0, arithmetic=1.5)
    for drawn in (task.sample_prompts(np.random.default_rng(7), "train", n),
                  [task.sample_prompt(rng, "train") for rng in [np.random.default_rng(8)] for _ in range(n)]):
        counts = {m: sum(p.task == m for p in drawn) for m in MEMBERS}
        assert counts["digits"] == 0
        assert _binomial_ok(counts["countdown"], n, 0.25), counts
    venv = gym.make_vec(MIX, num_envs=n, vectorization_mode="vector_entry_point",
                        weights={"countdown": 0.0, "digits": 0.25, "arithmetic": 0.75})
    _, info = venv.reset(seed=9)
    tasks = [p.task for p in info["prompt"]]
    assert "countdown" not in tasks and _binomial_ok(tasks.count("digits"), n, 0.25)


def test_one_member_alone_has_the_mix_s_spaces() -> None:
    full = gym.make(MIX, observation="tokens")
    for name in MEMBERS:
        alone = gym.make(MIX, observation="tokens", weights=ONLY[name])
        assert alone.observation_space == full.observation_space and alone.action_space == full.action_space
        assert {alone.reset(seed=s)[1]["prompt"].task for s in range(20)} == {name}
        inner = alone.unwrapped.task
        test_prompts = {inner.sample_prompt(np.random.default_rng(s), "test") for s in range(5)}
        assert {inner.split_of(p) for p in test_prompts} == {"test"}


def test_the_split_is_the_member_s() -> None:
    task = mix()
    for name in MEMBERS:
        member = task.members[name]
        for split in ("train", "test"):
            drawn = member.sample_prompts(np.random.default_rng(10), split, 30)
            for p in (MixPrompt(name, q) for q in drawn):
                assert task.split_of(p) == member.split_of(p.prompt) == split
    env = gym.make(MIX, split="test")
    assert all(env.reset(seed=s)[1]["split"] == "test" for s in range(20))


def test_the_same_seed_gives_the_same_prompts_and_the_env_pickles() -> None:
    env = gym.make(MIX, observation="tokens")
    first = [env.reset(seed=s)[1]["prompt"] for s in range(10)]
    assert [env.reset(seed=s)[1]["prompt"] for s in range(10)] == first
    assert len({p.task for p in first}) == 3
    a = gym.make_vec(MIX, num_envs=16, vectorization_mode="vector_entry_point")
    b = gym.make_vec(MIX, num_envs=16, vectorization_mode="vector_entry_point")
    assert a.reset(seed=3)[1]["prompt"].tolist() == b.reset(seed=3)[1]["prompt"].tolist()
    inner = env.unwrapped
    obs, info = inner.reset(seed=4)
    clone = pickle.loads(pickle.dumps(inner))
    assert np.array_equal(clone.reset(seed=4)[0], obs) and clone.task.vocab == inner.task.vocab
    answer = known_answer(inner.task, info["prompt"])
    assert run_single(clone, info["prompt"], answer)[0] == run_single(inner, info["prompt"], answer)[0] == 1.1


def test_prompts_replay_and_records_round_trip() -> None:
    task = mix()
    env = gym.make(MIX)
    for name in MEMBERS:
        p = member_prompts(task, name, 1, seed=12)[0]
        assert env.reset(options={"prompt": (name, p.prompt)})[1]["prompt"] == p
        assert task.prompt_from_record(task.prompt_record(p)) == p
    assert task.prompts("train") is None


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "match"), [
    ({"weights": {"countdown": -1.0, "digits": 1.0, "arithmetic": 1.0}},
     r"weight countdown=-1.0 must be finite and >= 0"),
    ({"weights": {"countdown": float("nan"), "digits": 1.0, "arithmetic": 1.0}},
     r"weight countdown=nan must be finite"),
    ({"weights": {"countdown": 0, "digits": 0, "arithmetic": 0.0}}, r"are all zero"),
    ({"weights": {"countdown": 1, "digits": 1, "arithmetic": 1, "chess": 1}},
     r"\['chess'\], which are not members"),
    ({"weights": {"countdown": 1}}, r"do not name the members \['digits', 'arithmetic'\]"),
    ({"weights": {"countdown": "1", "digits": 1, "arithmetic": 1}},
     r"weight countdown='1' must be a real number"),
])
def test_bad_weights_are_refused_with_the_value_and_the_rule(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gym.make(MIX, **kwargs)


def test_bad_members_are_refused_with_the_value_and_the_rule() -> None:
    with pytest.raises(ValueError, match=r"\['digits'\] has 1 member\(s\); a mix needs at least 2"):
        MixTask({"digits": DigitsTask()})
    with pytest.raises(ValueError, match=r"member 'chess' is not a registered task name"):
        gym.make("rlvr/Mix-v0", tasks={"chess": {}, "digits": {}})
    with pytest.raises(ValueError, match=r"member 'inner' is itself a mix"):
        MixTask({"inner": mix(), "digits": DigitsTask()})
    with pytest.raises(ValueError, match=r"member 'mix' is itself a mix"):
        gym.make("rlvr/Mix-v0", tasks={"mix": {}, "digits": {}})
    with pytest.raises(ValueError, match=r"member name 'a b' must be"):
        MixTask({"a b": DigitsTask(), "digits": DigitsTask()})
    with pytest.raises(ValueError, match=r"member 'x'=3 must be an rlvr_env.Task"):
        MixTask({"x": 3, "digits": DigitsTask()})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"prompt task 'chess' is not a member of the mix"):
        gym.make(MIX).reset(options={"prompt": ("chess", 1)})
    with pytest.raises(ValueError, match=r"must be a MixPrompt or a \(task, prompt\) pair"):
        gym.make(MIX).reset(options={"prompt": ((9, 4, 5), 13)})


# -- the agents -------------------------------------------------------------------------------------
def test_a_tiny_grpo_run_logs_every_member_s_metrics() -> None:
    from agents import GRPO, GRPOConfig

    model = GRPO(MIX, GRPOConfig(group_size=4, prompts_per_iter=16), policy="transformer", seed=0,
                 policy_kwargs={"d_model": 16, "n_layers": 1, "n_heads": 2})
    assert model.env.unwrapped.token_context is not None
    logs: list[dict[str, float]] = []
    model.learn(400, callback=lambda m, metrics: logs.append(dict(metrics)) is None)
    seen = set().union(*logs)
    for name in MEMBERS:
        wanted = {f"rollout/{name}/solve_rate", f"rollout/{name}/reward_mean", f"rollout/task/{name}_mean"}
        assert wanted <= seen, name
    for metrics in logs:
        assert all(np.isfinite(v) for k, v in metrics.items() if k.startswith("rollout/")), metrics
        shares = [metrics.get(f"rollout/task/{m}_mean", 0.0) for m in MEMBERS]
        assert sum(shares) == pytest.approx(1.0)


def test_the_grpo_log_leaves_out_a_task_absent_from_a_batch() -> None:
    from agents.grpo.batch import GroupBatch
    from agents.grpo.rollout import rollout_metrics

    n = 4
    batch = GroupBatch(obs=np.zeros((n, 1, 1)), actions=np.zeros((n, 1), np.int64), logp_old=np.zeros((n, 1)),
                       mask=np.ones((n, 1)), returns=np.array([1.1, 0.0, 0.1, 1.1]),
                       lengths=np.array([3, 4, 5, 6]), correct=np.array([1.0, 0.0, 0.0, 1.0]),
                       well_formed=np.ones(n), group_size=2,
                       stats={"task/a": np.array([1.0, 1.0, 0.0, 0.0]),
                              "task/b": np.array([0.0, 0.0, 1.0, 1.0]), "task/c": np.zeros(n),
                              "a/steps": np.array([2.0, 4.0, np.nan, np.nan])})
    out = rollout_metrics(batch, batch.returns.reshape(2, 2))
    assert out["rollout/a/solve_rate"] == 0.5 and out["rollout/b/reward_mean"] == pytest.approx(0.6)
    assert out["rollout/a/steps_mean"] == 3.0 and out["rollout/task/a_mean"] == 0.5
    assert not any(k.startswith("rollout/c/") for k in out)


def test_the_cold_start_runs_on_a_mix() -> None:
    from agents import GRPO, GRPOConfig
    from agents.sft import cold_start, solutions

    class Unsolved(Twice):
        solution = Task.solution  # declares none

    with pytest.raises(ValueError, match="declares no solutions"):
        solutions(MixTask({"twice": Unsolved(), "digits": DigitsTask()}), 4, seed=0)
    # a member never drawn needs none
    assert MixTask({"twice": Unsolved(), "digits": DigitsTask()}, weights={"twice": 0, "digits": 1}).has_solutions
    for weights in ({"countdown": 0.5, "digits": 0.5, "arithmetic": 0.0}, None):  # every member has some
        model = GRPO(MIX, GRPOConfig(group_size=4, prompts_per_iter=2), policy="transformer", seed=0,
                     env_kwargs={"weights": weights} if weights else {},
                     policy_kwargs={"d_model": 16, "n_layers": 1, "n_heads": 2})
        info = cold_start(model, 64, epochs=2, batch_size=32)
        assert info["sft_solutions"] == 64 and np.isfinite(info["sft_losses"][-1])
    prompts, answers = solutions(mix(), 64, seed=0)
    task = mix()
    assert {p.task for p in prompts} == set(task.names)
    assert all(task.score(p, a, RewardWeights()).correct for p, a in zip(prompts, answers))


# -- what the planted bugs showed untested ---------------------------------------------------------
class FirstLetter(Twice):
    """A lenient fixed-length verifier: it reads the first token only (its own env always gives two)."""

    name = "first_letter"

    def score(self, prompt: Pair, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        ok = bool(token_ids) and self.vocab[token_ids[0]] == prompt.letter
        parts = weights.parts(ok, ok)
        return Verdict(sum(parts.values()), ok, ok, None, None, "", parts)


def test_the_mix_enforces_a_fixed_length_even_where_the_member_s_verifier_would_not() -> None:
    task = MixTask({"first": FirstLetter(), "digits": DigitsTask()})
    p = MixPrompt("first", Pair("a"))
    a, eos = task.vocab.index("a"), task.eos_id
    assert task.score(p, (a, a, eos), RewardWeights()).reward == pytest.approx(1.1)
    short = task.score(p, (a, eos), RewardWeights())
    assert short.reward == 0.0 and "exactly 2 tokens" in short.reason
    assert task.score(p, (a, a, a, eos), RewardWeights()).reward == 0.0


def test_a_fixed_length_member_longest_of_all_still_gets_its_eos() -> None:
    task = MixTask({"arithmetic": ArithmeticTask(), "digits": DigitsTask(max_digits=2, train_digits=1)})
    assert task.members["digits"].max_length == 4 and task.max_length == 6
    p = member_prompts(task, "arithmetic", 1)[0]
    assert run_single(TokenEnv(task), p, known_answer(task, p))[:2] == (pytest.approx(1.1), True)


def _member_walk(member: Task, prompt: Any, rng: np.random.Generator) -> tuple[list[int], float, list[int]]:
    """A masked random episode of ``member`` in its own env: (its actions, its reward, its tokens)."""
    env = TokenEnv(member)
    env.reset(options={"prompt": prompt})
    actions: list[int] = []
    while True:
        a = int(rng.choice(np.flatnonzero(env.action_masks())))
        actions.append(a)
        _, reward, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            return actions, float(reward), list(env._tokens)


def test_an_episode_in_the_mix_is_the_member_s_own_episode() -> None:
    """The same actions (mapped) in the member's own env and in the mix: the same tokens (the calculator's
    included, cut at the member's own cap), the same reward. The thinking member is neither first (its ids
    move) nor the longest (its replies must stop at its own cap)."""
    members = {"arithmetic": ArithmeticTask(grammar_mask=True),
               "countdown": CountdownTask(n_numbers=3, max_length=24),
               "countdown_think": ThinkTask(n_numbers=3, calculator=True, max_length=16),
               "digits": DigitsTask()}
    task = MixTask(members)
    equals = task.vocab.index("=")
    assert equals != members["countdown_think"].vocab.index("=")  # the ids really move
    assert task.max_length == 24 and task.reply_after == frozenset({equals})
    env = TokenEnv(task)
    rng = np.random.default_rng(13)
    for name, member in members.items():
        for p in member_prompts(task, name, 40, seed=14):
            actions, reward, tokens = _member_walk(member, p.prompt, rng)
            env.reset(options={"prompt": p})
            done, mixed = False, list(task.mix_tokens(name, actions))
            while not done:  # the member's actions, then EOS until the mix's episode ends too
                _, mix_reward, terminated, truncated, _ = env.step(mixed.pop(0) if mixed else task.eos_id)
                done = terminated or truncated
            assert mix_reward == reward, (p, actions)
            assert list(env._tokens[: len(tokens)]) == list(task.mix_tokens(name, tokens)), (p, actions)
            # nothing beyond the member's own tokens but the EOS written here (no reply past its cap)
            assert set(env._tokens[len(tokens):]) <= {task.eos_id}, (p, actions)


def test_prompts_replay_in_the_member_s_own_forms_and_are_checked_by_it() -> None:
    from rlvr_env import DigitsPrompt

    env = gym.make(MIX)
    assert env.reset(options={"prompt": ("digits", (12, "+", 7))})[1]["prompt"] == \
        MixPrompt("digits", DigitsPrompt(12, "+", 7))
    with pytest.raises(ValueError, match=r"prompt operator '/' is not one of this task's operators"):
        env.reset(options={"prompt": ("digits", (12, "/", 7))})


def test_best_reward_is_the_best_member_that_can_be_drawn_and_the_mask_is_real() -> None:
    weights = RewardWeights(step=0.5)
    assert think_mix().best_reward(weights) == pytest.approx(1.6)  # the trace's step check pays too
    alone = gym.make(THINK_MIX, weights={"countdown_think": 0, "digits": 1, "arithmetic": 0}).unwrapped.task
    assert alone.best_reward(weights) == pytest.approx(1.1)
    assert mix().grammar_masked and think_mix().grammar_masked
    plain = MixTask({"a": DigitsTask(grammar_mask=False), "b": DigitsTask(grammar_mask=False, reverse=True)})
    assert not plain.grammar_masked  # one vocabulary, one length, no grammar: every token always allowed
    assert MixTask({"a": DigitsTask(grammar_mask=False),
                    "b": DigitsTask(grammar_mask=False, max_digits=4)}).grammar_masked  # caps differ


def test_an_answer_reads_as_its_member_writes_it() -> None:
    task = mix()
    for name in MEMBERS:
        for p in member_prompts(task, name, 5, seed=15):
            answer = known_answer(task, p)
            own = task.member_tokens(name, answer)
            assert task.decode(answer, p) == task.members[name].decode(own, p.prompt)
    p = member_prompts(task, "countdown", 1)[0]
    assert any(ch.isdigit() for ch in task.decode(known_answer(task, p), p))  # slots read as numbers
