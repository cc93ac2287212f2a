"""TRL's GRPOTrainer trains a tiny model built offline (config + character tokenizer) with our reward
functions and dataset, on CPU; rewards are our verifier's. No download."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from rlvr_env import verify
from rlvr_env.completions import extract_answer
from rlvr_env.llm import make_dataset, make_task, reward_functions
from rlvr_env.llm.tiny import char_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parent.parent


class Recorder:
    """Wraps a reward function and records what TRL passed and what it returned."""

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn = fn
        self.__name__ = fn.__name__
        self.calls: list[tuple[dict, list[float]]] = []

    def __call__(self, **kwargs):  # type: ignore[no-untyped-def]
        out = self.fn(**kwargs)
        self.calls.append((kwargs, out))
        return out


def _trainer(tmp_path: Path, funcs, *, conversational: bool = False,  # type: ignore[no-untyped-def]
             steps: int = 2, task=None):
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    task = task or make_task("countdown", n_numbers=3)
    tokenizer = char_tokenizer()
    model = tiny_model(len(tokenizer), layers=1, width=32)
    dataset = make_dataset(task, "train", size=16, seed=0, conversational=conversational)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=steps,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=12,
                      logging_steps=1, save_strategy="no", seed=0, learning_rate=1e-3)
    return GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=funcs, train_dataset=dataset,
                       args=args)


def _check_scored_by_verifier(recorder: Recorder, task) -> int:  # type: ignore[no-untyped-def]
    seen = 0
    for kwargs, out in recorder.calls:
        passed = {"prompts", "completions", "completion_ids", "numbers", "target", "trainer_state"}
        assert passed <= set(kwargs)
        rows = zip(kwargs["completions"], kwargs["numbers"], kwargs["target"], out)
        for completion, numbers, target, value in rows:
            answer, _ = extract_answer(completion)
            want = 0.0 if answer is None else \
                verify(answer, numbers, target, grammar=task.grammar).parts["accuracy"]
            assert value == want
            seen += 1
    return seen


def test_grpo_trainer_runs_with_our_rewards_and_dataset(tmp_path: Path) -> None:
    task = make_task("countdown", n_numbers=3)
    acc, fmt = reward_functions(task)
    rec = Recorder(acc)
    trainer = _trainer(tmp_path, [rec, fmt], task=task)
    trainer.train()
    assert trainer.state.global_step == 2
    logs = [h for h in trainer.state.log_history if "rewards/rlvr_accuracy/mean" in h]
    assert len(logs) == 2 and all("rewards/rlvr_format/mean" in h for h in logs)
    # a generation batch per step: 1 prompt x 4 generations
    assert _check_scored_by_verifier(rec, task) == 2 * 4

    # A planted completion goes through TRL's own reward path (the trainer's reward step), with the
    # dataset's columns, and is paid what the verifier says.
    rows = [trainer.train_dataset[i] for i in range(2)]
    p0, _ = (task.validate_prompt((tuple(r["numbers"]), r["target"])) for r in rows)
    good = _any_solution(task, p0)
    completions = [f"I think <answer>{good}</answer>", "<answer>2**3</answer>"]
    rewards = trainer._calculate_rewards(rows, [r["prompt"] for r in rows], completions, [[5] * 9, [5] * 4])
    assert rewards.flatten().tolist() == pytest.approx([1.0, 0.1, 0.0, 0.0])
    assert rec.calls[-1][0]["completions"] == completions
    assert acc.last_reasons[1] == "power operator '**' at position 1 is not allowed"


def _any_solution(task, prompt) -> str:  # type: ignore[no-untyped-def]
    import itertools

    nums = [str(n) for n in prompt.numbers]
    for k in (1, 2, 3):
        for perm in itertools.permutations(nums, k):
            for ops in itertools.product("+-*/", repeat=k - 1):
                cands = ["".join(n + o for n, o in zip(perm, ops)) + perm[-1]]
                if k == 3:
                    cands += [f"{perm[0]}{ops[0]}({perm[1]}{ops[1]}{perm[2]})",
                              f"({perm[0]}{ops[0]}{perm[1]}){ops[1]}{perm[2]}"]
                for text in cands:
                    if verify(text, prompt.numbers, prompt.target, grammar=task.grammar).correct:
                        return text
    raise AssertionError(f"no solution found for {prompt}")


@pytest.mark.slow
def test_grpo_trainer_conversational_with_length_reward(tmp_path: Path) -> None:
    task = make_task("countdown", n_numbers=3)
    funcs = reward_functions(task, length=True, num_generations=4)
    rec = Recorder(funcs[0])
    trainer = _trainer(tmp_path, [rec, *funcs[1:]], conversational=True, steps=4, task=task)
    trainer.train()
    assert trainer.state.global_step == 4
    assert any("rewards/rlvr_length/mean" in h for h in trainer.state.log_history)
    completions = rec.calls[0][0]["completions"]
    assert isinstance(completions[0], list) and completions[0][-1]["role"] == "assistant"
    assert _check_scored_by_verifier(rec, task) == 4 * 4


def _readme_example() -> str:
    text = (ROOT / "docs" / "llm.md").read_text(encoding="utf-8")
    section = text.split("# Training a language model on these tasks", 1)
    assert len(section) == 2, "docs/llm.md has no 'Training a language model on these tasks' section"
    block = re.search(r"```python\n(.*?)```", section[1], re.S)
    assert block is not None
    return block.group(1)


def test_readme_trl_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(_readme_example(), "docs/llm.md LLM example", "exec"), namespace)  # noqa: S102 - our doc
    trainer = namespace["trainer"]
    assert trainer.state.global_step >= 1  # type: ignore[attr-defined]
    history = trainer.state.log_history  # type: ignore[attr-defined]
    assert any("rewards/rlvr_accuracy/mean" in h for h in history)
