"""A task with a third reward part is paid and reported by every consumer: the single env, the vector env,
GRPO's logs, the verl and TRL bridges, and a compare study's early stop (its best reward comes from the
task's parts and weights). The weights of every part live in one place, :class:`rlvr_env.RewardWeights`.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env
from rlvr_env import DigitsTask, RewardWeights, Verdict, best_reward, register_envs
from rlvr_env.tasks.digits import DigitsPrompt

ENV_ID = "test/NearDigits-v0"


class NearDigits(DigitsTask):
    """Digits with a third part: ``near`` pays 1 (times its weight) for a number off by one."""

    name = "near_digits"
    reward_parts = ("accuracy", "format", "near")

    def verdict(self, prompt: DigitsPrompt, text: str, value: int | None, reason: str | None,
                weights: RewardWeights) -> Verdict:
        v = super().verdict(prompt, text, value, reason, weights)
        near = value is not None and abs(value - prompt.result) == 1
        parts = {**v.parts, **weights.weigh({"near": float(near)})}
        return Verdict(reward=float(sum(parts.values())), correct=v.correct, well_formed=v.well_formed,
                       value=v.value, reason=v.reason, expression=v.expression, parts=parts)


register_envs(ENV_ID, NearDigits, text_id="test/NearDigitsText-v0")


def _answer(task: DigitsTask, prompt: DigitsPrompt, offset: int) -> list[int]:
    """Token ids writing ``prompt.result + offset`` (then EOS)."""
    ids = task.parse_answer(prompt, str(prompt.result + offset))
    assert ids is not None
    return [*ids, task.eos_id] if task.eos_id is not None else ids


def _play(env: gym.Env, prompt: DigitsPrompt, tokens: list[int]) -> tuple[float, dict[str, Any]]:
    env.reset(options={"prompt": prompt})
    for t in tokens:
        _, reward, terminated, truncated, info = env.step(t)
        if terminated or truncated:
            return float(reward), info
    raise AssertionError("the episode did not end")


def test_reward_weights_hold_any_part_and_weigh_an_unnamed_one_at_one() -> None:
    w = RewardWeights(near=0.5)
    assert dict(w) == {"accuracy": 1.0, "format": 0.1, "near": 0.5}
    assert w.weight("near") == 0.5 and w.weight("other") == 1.0
    assert w.weigh({"accuracy": True, "near": 1.0}) == {"accuracy": 1.0, "near": 0.5}
    assert RewardWeights.of(2.0, 0.0, {"near": 3.0}) == RewardWeights(accuracy=2.0, format=0.0, near=3.0)
    with pytest.raises(ValueError, match="near=inf"):
        RewardWeights(near=float("inf"))
    with pytest.raises(ValueError, match="reward_weights"):
        RewardWeights.of(1.0, 0.1, [("near", 1.0)])  # type: ignore[arg-type]
    assert best_reward(RewardWeights(format=-1.0, near=0.5), ("accuracy", "format", "near")) == 1.5


def test_the_single_and_the_vector_env_pay_the_third_part_alike() -> None:
    env = gym.make(ENV_ID, reward_weights={"near": 0.5})
    task = env.unwrapped.task
    prompt = task.sample_prompt(np.random.default_rng(0), "train")
    rewards = {}
    for offset in (0, 1, 5):
        reward, info = _play(env, prompt, _answer(task, prompt, offset))
        assert set(info["reward_parts"]) == {"accuracy", "format", "near"}
        assert reward == pytest.approx(sum(info["reward_parts"].values()))
        rewards[offset] = (reward, info["reward_parts"])
    assert rewards[1][1]["near"] == 0.5 and rewards[0][1]["near"] == 0.0 and rewards[5][1]["near"] == 0.0
    assert rewards[1][0] == pytest.approx(0.1 + 0.5)
    venv = gym.make_vec(ENV_ID, num_envs=3, vectorization_mode="vector_entry_point",
                        reward_weights={"near": 0.5})
    answers = [_answer(task, prompt, o) for o in (0, 1, 5)]
    width = max(map(len, answers))
    venv.reset(options={"prompt": prompt})
    got = np.zeros(3)
    parts = {}
    done = np.zeros(3, dtype=bool)
    for col in range(width):
        acts = np.array([a[col] if col < len(a) else task.eos_id for a in answers])
        _, r, term, trunc, info = venv.step(acts)
        ended = (term | trunc) & ~done
        got[ended] = r[ended]
        for name, values in info.get("final_info", {}).get("reward_parts", {}).items():
            if not name.startswith("_"):
                parts.setdefault(name, np.zeros(3))[ended] = values[ended]
        done |= ended
    assert done.all()
    assert got.tolist() == pytest.approx([rewards[o][0] for o in (0, 1, 5)])
    assert parts["near"].tolist() == [0.0, 0.5, 0.0]


def test_grpo_logs_every_part_by_name() -> None:
    from agents import GRPO, GRPOConfig

    class Recorded:
        def __init__(self) -> None:
            self.values: dict[str, float] = {}

        def record(self, key: str, value: float, *args: Any, **kwargs: Any) -> None:
            self.values[key] = value

        def dump(self, step: int = 0) -> None:
            pass

    for vectorized in (False, True):  # the list runner and the native vector env runner
        logger = Recorded()
        model = GRPO(ENV_ID, GRPOConfig(group_size=4, prompts_per_iter=2), policy="mlp", seed=0,
                     vectorized=vectorized)
        model.set_logger(logger)
        model.learn(total_timesteps=60)
        keys = set(logger.values)
        assert {"rollout/reward_accuracy_mean", "rollout/reward_format_mean",
                "rollout/reward_near_mean"} <= keys, keys


def test_the_verl_and_trl_bridges_report_the_third_part() -> None:
    pytest.importorskip("datasets")
    from rlvr_env.llm.trl_rewards import PartReward, reward_functions
    from rlvr_env.llm.verl_reward import compute_score, ground_truth

    task = NearDigits()
    prompt = task.sample_prompt(np.random.default_rng(1), "train")
    near = f"<answer>{prompt.result + 1}</answer>"
    gt = ground_truth(task, prompt)
    row = compute_score("rlvr/near_digits", near, json.dumps(gt),
                        extra_info={"reward_weights": {"near": 0.5}})
    assert row["near"] == 0.5 and row["score"] == pytest.approx(0.1 + 0.5) and row["accuracy"] == 0.0
    funcs = reward_functions(task, reward_weights={"near": 0.5})
    assert [f.__name__ for f in funcs] == ["rlvr_accuracy", "rlvr_format", "rlvr_near"]
    assert isinstance(funcs[2], PartReward)
    columns = task.prompt_record(prompt)
    both = [near, f"<answer>{prompt.result}</answer>"]
    values = [f(completions=both, **{k: [v, v] for k, v in columns.items()}) for f in funcs]
    assert values == [[0.0, 1.0], [0.1, 0.1], [0.5, 0.0]]
    with pytest.raises(ValueError, match="part='nope'"):
        PartReward(task, part="nope")


def test_a_compare_run_takes_its_best_reward_from_the_task() -> None:
    env = gym.make(ENV_ID, reward_weights={"near": 0.5})
    inner = env.unwrapped
    assert inner.task.best_reward(inner.reward_weights) == pytest.approx(1.6)
    plain = gym.make("rlvr/Arithmetic-v0").unwrapped
    assert plain.task.best_reward(plain.reward_weights) == 1.1  # the two-part tasks: exactly as before
    assert rlvr_env.TokenVectorEnv is type(gym.make_vec(ENV_ID, num_envs=2,
                                                        vectorization_mode="vector_entry_point").unwrapped)


def test_best_reward_weighs_a_part_the_weights_do_not_name_at_one():
    assert best_reward(RewardWeights(), ("accuracy", "format", "near")) == pytest.approx(2.1)
    assert best_reward({"accuracy": 1.0}, ("accuracy", "format")) == pytest.approx(2.0)
    assert best_reward(RewardWeights(near=-0.5), ("accuracy", "format", "near")) == pytest.approx(1.1)


def test_reward_weights_pickle_with_every_part():
    import pickle

    w = RewardWeights(accuracy=0.5, format=0.2, near=0.3, step=0.25)
    again = pickle.loads(pickle.dumps(w))
    assert again == w and dict(again) == {"accuracy": 0.5, "format": 0.2, "near": 0.3, "step": 0.25}
