"""A user-defined task is one Task subclass plus one register call (the README's plug-in recipe)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agents import GRPO, GRPOConfig
from rlvr_env import Grammar, Prompt, TokenEnv
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.base import check_split
from rlvr_env.tasks.expression.prompt import unpack_prompt


class SumTask(ExpressionTask):
    """Two numbers from 1..4 and their sum or product as target; answers are 3 tokens ("a+b")."""

    name = "sum"
    vocab = ("1", "2", "3", "4", "+", "*")
    max_length = 3
    eos_id = None
    grammar = Grammar(operators=frozenset("+*"))

    def __init__(self) -> None:
        prompts = [Prompt((a, b), t) for a in range(1, 5) for b in range(1, 5) if a < b
                   for t in sorted({a + b, a * b})]
        self._split = {p: ("test" if (p.numbers[0] + p.target) % 4 == 0 else "train") for p in prompts}

    def prompts(self, split: str) -> tuple[Prompt, ...]:
        check_split(split)
        return tuple(p for p, s in self._split.items() if s == split)

    def sample_prompt(self, rng: np.random.Generator, split: str) -> Prompt:
        pool = self.prompts(split)
        return pool[int(rng.integers(len(pool)))]

    def validate_prompt(self, prompt: object) -> Prompt:
        numbers, target = unpack_prompt(prompt)
        candidate = Prompt(numbers, target)
        if candidate not in self._split:
            raise ValueError(f"prompt {prompt!r} is not one of this task's prompts")
        return candidate

    def split_of(self, prompt: Prompt) -> str:
        return self._split[Prompt(prompt.numbers, prompt.target)]

    @property
    def prompt_layout(self) -> dict[str, slice]:
        return {"numbers": slice(0, 8), "target": slice(8, 25)}

    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        out = np.zeros(25, dtype=np.float32)
        for slot, n in enumerate(prompt.numbers):
            out[slot * 4 + n - 1] = 1.0
        out[8 + prompt.target] = 1.0
        return out


def make_sum_env(**kwargs: object) -> TokenEnv:
    return TokenEnv(SumTask(), **kwargs)  # type: ignore[arg-type]


ENV_ID = "test/Sum-v0"
if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=make_sum_env)


def test_custom_task_env_passes_the_checkers_and_pays_the_verifier() -> None:
    env = gym.make(ENV_ID)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    env.reset(options={"prompt": ((1, 3), 4)})
    for token in (0, 4, 2):  # "1+3"
        _, reward, terminated, _, info = env.step(token)
    assert terminated and info["correct"] and reward == pytest.approx(1.1)
    with pytest.raises(ValueError, match="not one of this task's prompts"):
        env.reset(options={"prompt": ((1, 3), 99)})


def test_grpo_learns_a_custom_task() -> None:
    model = GRPO(ENV_ID, GRPOConfig.preset("tabular"), policy="tabular", seed=0)
    before = model.evaluate("train")
    model.learn(20_000)
    assert model.evaluate("train") > before
    assert model.last_metrics["rollout/solve_rate"] > 0.5


class SignedSum(SumTask):
    """SumTask with one positive and one negative target: the token context must carry a sign slot."""

    def __init__(self) -> None:
        self._split = {Prompt((1, 4), 5): "train", Prompt((1, 4), -3): "test"}


def test_the_token_context_is_signed_when_any_target_is_negative() -> None:
    task = SignedSum()
    vocab = (*task.context_tokens().vocab, *task.vocab)

    def read(prompt: Prompt) -> list[str]:
        return [vocab[i] for i in task.encode_context(prompt).tolist()]

    assert read(Prompt((1, 4), -3))[-4:] == ["=", "-", "3", "<ans>"]
    positive = read(Prompt((1, 4), 5))
    assert positive[0] == "<pad>" and positive[-3:] == ["=", "5", "<ans>"]
