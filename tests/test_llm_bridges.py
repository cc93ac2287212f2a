"""The bridges pay exactly what verify() pays: TRL reward functions and dataset, verl's compute_score,
and the `verifiers` tasksets scored through their own reward path. Offline, CPU, no model."""

from __future__ import annotations

import asyncio
import json
import pickle

import numpy as np
import pytest

from rlvr_env import length_reward, verify
from rlvr_env.llm import (
    AccuracyReward,
    FormatReward,
    LengthReward,
    compute_score,
    ground_truth,
    make_dataset,
    make_task,
    reward_functions,
    sample_prompts,
    verl_rows,
)
from rlvr_env.tasks.countdown.task import CountdownTask

TASK = make_task("countdown", n_numbers=3)

# (completion around an answer, numbers, target): correct, wrong value, malformed, hostile.
PLANTED = [
    ("<answer>7*(9+1)</answer>", [7, 9, 1], 70),
    ("<answer>7*9+1</answer>", [7, 9, 1], 70),
    ("<answer>7*(9+1</answer>", [7, 9, 1], 70),
    ("no tags at all 7*(9+1)", [7, 9, 1], 70),
    ("<answer>7**2</answer>", [7, 9, 1], 49),
    ("<answer>__import__('os')</answer>", [7, 9, 1], 70),
]


def _expected(completion: str, numbers: list[int], target: int) -> float:
    start, end = completion.rfind("<answer>"), completion.rfind("</answer>")
    if start < 0 or end < 0:
        return 0.0
    return verify(completion[start + 8 : end].strip(), numbers, target, grammar=TASK.grammar).reward


def test_trl_functions_sum_to_the_verifier_reward_and_keep_reasons() -> None:
    acc, fmt = reward_functions(TASK)
    completions = [c for c, _, _ in PLANTED]
    numbers = [n for _, n, _ in PLANTED]
    target = [t for _, _, t in PLANTED]
    logged: dict[str, list] = {}
    kwargs = dict(prompts=["p"] * len(PLANTED), completions=completions, completion_ids=[[1]] * len(PLANTED),
                  numbers=numbers, target=target, trainer_state=None,
                  log_extra=lambda col, vals: logged.setdefault(col, []).extend(vals),
                  log_metric=lambda *a: None)
    a, f = acc(**kwargs), fmt(**kwargs)
    assert [x + y for x, y in zip(a, f)] == pytest.approx([_expected(*p) for p in PLANTED])
    assert a[:2] == [1.0, 0.0] and f[:2] == pytest.approx([0.1, 0.1])
    assert acc.__name__ == "rlvr_accuracy" and fmt.__name__ == "rlvr_format"
    assert acc.last_reasons[0] is None and acc.last_reasons[1] == "value 64 is not the target 70"
    assert "power operator" in acc.last_reasons[4] and "character '_'" in acc.last_reasons[5]
    assert logged["rlvr_accuracy_reason"][1] == "value 64 is not the target 70"
    # conversational completions are scored from the assistant message
    chat = [[{"role": "assistant", "content": c}] for c in completions]
    assert acc(prompts=None, completions=chat, numbers=numbers, target=target) == a
    # picklable (TRL may send reward functions to worker processes)
    assert pickle.loads(pickle.dumps(acc))(completions=completions, numbers=numbers, target=target) == a


def test_trl_function_weights_and_missing_columns() -> None:
    acc = AccuracyReward("arithmetic", accuracy_weight=2.0)
    fmt = FormatReward("arithmetic", format_weight=0.5)
    kw = dict(completions=["<answer>2+3*5</answer>"], numbers=[[2, 3, 5]], target=[17])
    assert acc(**kw) == [2.0] and fmt(**kw) == [0.5]
    with pytest.raises(ValueError, match="dataset column 'numbers'"):
        acc(completions=["x"], target=[1])
    with pytest.raises(ValueError, match="has 2 values for 1 completions"):
        acc(completions=["x"], numbers=[[1], [2]], target=[1])


def test_length_reward_is_k15_per_group() -> None:
    lr = LengthReward(TASK, num_generations=3)
    completions = ["<answer>7*(9+1)</answer>", "<answer>(9+1)*7</answer> ok", "<answer>7</answer>",
                   "<answer>7*9+1</answer>", "<answer>1+9</answer>", "<answer>9+1</answer>!!"]
    ids = [[0] * 5, [0] * 9, [0] * 3, [0] * 4, [0] * 4, [0] * 8]
    numbers = [[7, 9, 1]] * 3 + [[7, 9, 1]] * 3
    target = [70] * 3 + [10] * 3
    out = lr(prompts=["a"] * 3 + ["b"] * 3, completions=completions, completion_ids=ids, numbers=numbers,
             target=target)
    first = length_reward([5, 9, 3], [True, True, False]).tolist()
    second = length_reward([4, 4, 8], [False, True, True]).tolist()
    assert out == pytest.approx(first + second)
    # grouping by prompt when num_generations is not given gives the same here
    assert LengthReward(TASK)(prompts=["a"] * 3 + ["b"] * 3, completions=completions, completion_ids=ids,
                              numbers=numbers, target=target) == pytest.approx(out)
    with pytest.raises(ValueError, match="groups of num_generations=4"):
        LengthReward(TASK, num_generations=4)(completions=completions, numbers=numbers, target=target)


def test_dataset_is_seeded_and_matches_the_env_split() -> None:
    ds = make_dataset(TASK, "test", size=50, seed=3)
    again = make_dataset(TASK, "test", size=50, seed=3)
    assert ds.column_names == ["prompt", "numbers", "target", "split"]
    assert ds.to_dict() == again.to_dict()
    assert ds.to_dict() != make_dataset(TASK, "test", size=50, seed=4).to_dict()
    for row in ds:
        prompt = TASK.validate_prompt((tuple(row["numbers"]), row["target"]))
        assert TASK.split_of(prompt) == "test" == row["split"]
        assert f"equals {row['target']} using the numbers" in row["prompt"]
    train = {tuple(sorted(r["numbers"])) for r in make_dataset(TASK, "train", size=200, seed=0)}
    assert not train & {tuple(sorted(r["numbers"])) for r in ds}  # held-out multisets never train
    arith = make_dataset("arithmetic", "test", conversational=True, system_prompt="Be brief.")
    assert len(arith) == 10 and arith[0]["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert arith[0]["prompt"][1]["role"] == "user"
    with pytest.raises(ValueError, match="split='dev'"):
        make_dataset("arithmetic", "dev")
    with pytest.raises(ValueError, match="task 'sudoku'"):
        make_dataset("sudoku")


def test_verl_compute_score_as_verl_calls_it() -> None:
    rows = verl_rows(TASK, "train", size=20, seed=0)
    for row in rows:
        gt = row["reward_model"]["ground_truth"]
        prompt = (tuple(gt["numbers"]), gt["target"])
        sol = TASK.validate_prompt(prompt)
        answer = next(iter(_solutions(TASK, sol)))
        # verl: reward_fn(data_source=..., solution_str=..., ground_truth=..., extra_info=...)
        for truth in (gt, json.dumps(gt)):
            result = compute_score(data_source=row["data_source"], solution_str=f"<answer>{answer}</answer>",
                                   ground_truth=truth, extra_info=row["extra_info"])
            assert result["score"] == pytest.approx(1.1) and result["reason"] == ""
            bad = compute_score(row["data_source"], "<answer>2**3</answer>", truth, row["extra_info"])
            assert bad["score"] == 0.0 and "power operator" in bad["reason"]
    assert all(isinstance(v, (float, str)) for v in result.values())
    # grammar defaults come from data_source; numpy numbers (a parquet round trip) are integers
    numpy_truth = {"numbers": np.array([2, 3, 5]), "target": np.int64(17)}
    result = compute_score("rlvr/Arithmetic", "<answer>2+3*5</answer>", numpy_truth)
    assert result["score"] == pytest.approx(1.1)
    assert compute_score("rlvr/Arithmetic", "<answer>(2+3)*5</answer>",
                         {"numbers": [2, 3, 5], "target": 25})["score"] == 0.0
    assert compute_score("rlvr/Countdown", "<answer>7*9+1</answer>", {"numbers": [7, 9, 1], "target": 64},
                         {"accuracy_weight": 3.0})["score"] == pytest.approx(3.1)
    assert ground_truth("arithmetic", ((2, 3, 5), 17))["operators"] == "+*"


@pytest.mark.parametrize("truth, message", [
    ({"numbers": [1, 2]}, "must have 'numbers' and 'target'"),
    ("{not json", "is not JSON"),
    ({"numbers": "12", "target": 3}, "must be a list of integers"),
    ({"numbers": [1, True], "target": 3}, "not a bool"),
    ({"numbers": [1, 2], "target": 3.5}, "must be an integer"),
    (17, "must be a dict"),
])
def test_verl_bad_ground_truth_raises_naming_the_field(truth: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_score("rlvr/Countdown", "<answer>1+2</answer>", truth)
    with pytest.raises(ValueError, match="is not one of"):
        compute_score("my/data", "<answer>1+2</answer>", {"numbers": [1, 2], "target": 3})


def _solutions(task: CountdownTask, prompt) -> list[str]:  # type: ignore[no-untyped-def]
    """Correct answers found by brute force over pairs and triples (small n only)."""
    import itertools

    nums = [str(n) for n in prompt.numbers]
    found = []
    for k in range(1, len(nums) + 1):
        for perm in itertools.permutations(nums, k):
            for ops in itertools.product("+-*/", repeat=k - 1):
                for text in (_join(perm, ops), _join_paren(perm, ops)):
                    if text and verify(text, prompt.numbers, prompt.target, grammar=task.grammar).correct:
                        found.append(text)
    return found


def _join(nums, ops) -> str:  # type: ignore[no-untyped-def]
    return "".join(n + o for n, o in zip(nums, ops)) + nums[-1]


def _join_paren(nums, ops) -> str:  # type: ignore[no-untyped-def]
    if len(nums) != 3:
        return ""
    return f"{nums[0]}{ops[0]}({nums[1]}{ops[1]}{nums[2]})"


def test_sample_prompts_finite_and_generated() -> None:
    arith = make_task("arithmetic")
    assert sample_prompts(arith, "train") == list(arith.prompts("train"))
    assert len(sample_prompts(arith, "train", size=50, seed=1)) == 50
    assert sample_prompts(TASK, "test", 5, 2) == sample_prompts(TASK, "test", 5, 2)
    with pytest.raises(ValueError, match="size=0"):
        sample_prompts(TASK, "train", 0)


# -- verifiers (0.4.x: `verifiers.v1`) ---------------------------------------------------------------
def _trace(vf, task, reply: str):  # type: ignore[no-untyped-def]
    from rlvr_env.llm.vf_taskset import reply_trace

    return reply_trace(task, reply)


def test_verifiers_taskset_loads_by_id_and_scores_offline_through_its_rewards() -> None:
    import verifiers.v1 as vf

    env = vf.load_environment(vf.SingleAgentEnvConfig(
        taskset={"id": "rlvr_env_countdown", "split": "test", "num_tasks": 8, "seed": 1, "n_numbers": 3}))
    assert isinstance(env, vf.SingleAgentEnv)
    tasks = list(env.taskset)
    assert len(tasks) == 8
    expected = sample_prompts(TASK, "test", 8, 1)
    got = [(tuple(t.data.numbers), t.data.target) for t in tasks]
    assert got == [(p.numbers, p.target) for p in expected]
    task = tasks[0]
    prompt = TASK.validate_prompt((tuple(task.data.numbers), task.data.target))
    good = _solutions(TASK, prompt)[0]
    for reply, want in [(f"<answer>{good}</answer>", 1.1), (f"<answer>{good}+{good}</answer>", None),
                        ("<answer>2**3</answer>", 0.0), ("x" * 1_000_000, 0.0)]:
        trace = _trace(vf, task, reply)
        asyncio.run(task.score(trace))  # verifiers' own scoring path: the task's @vf.reward methods
        assert set(trace.rewards) == {"accuracy", "format"}
        assert trace.rewards["accuracy"].weight == 1.0 and trace.rewards["format"].weight == 0.1
        verdict = verify(reply[8:-9], prompt.numbers, prompt.target, grammar=TASK.grammar)
        assert trace.reward == pytest.approx(want if want is not None else verdict.reward)
        assert trace.info["rlvr"]["correct"] == (trace.reward > 1)
        assert isinstance(trace.info["rlvr"]["reason"], str)
    assert trace.info["rlvr"]["reason"].startswith("answer extraction: completion is 1000000 characters")


def test_verifiers_arithmetic_taskset_is_the_env_split() -> None:
    import verifiers.v1 as vf

    env = vf.load_environment(vf.SingleAgentEnvConfig(taskset=vf.TasksetConfig(id="rlvr_env_arithmetic")))
    tasks = list(env.taskset)
    arith = make_task("arithmetic")
    assert [(tuple(t.data.numbers), t.data.target) for t in tasks] == \
        [(p.numbers, p.target) for p in arith.prompts("train")]
    trace = _trace(vf, tasks[0], "<answer>2+3*5</answer>")
    asyncio.run(tasks[0].score(trace))
    want = verify("2+3*5", tasks[0].data.numbers, tasks[0].data.target, grammar=arith.grammar).reward
    assert trace.reward == pytest.approx(want)


def test_docs_verifiers_scoring_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/llm.md's verifiers block: runnable, and it pays what verify() pays."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "llm.md").read_text(encoding="utf-8")
    section = text.split("## verifiers 0.4", 1)
    assert len(section) == 2, "docs/llm.md has no verifiers section"
    block = re.search(r"```python\n(.*?)```", section[1].split("\n## ", 1)[0], re.S)
    assert block is not None, "the verifiers section has no python block"
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "docs/llm.md verifiers example", "exec"), namespace)  # noqa: S102
    task, trace = namespace["task"], namespace["trace"]
    data = task.data  # type: ignore[attr-defined]
    want = verify(str(namespace["solution"]), tuple(data.numbers), data.target, grammar=data.grammar())
    assert trace.reward == pytest.approx(want.reward)  # type: ignore[attr-defined]
    assert str(trace.reward) in capsys.readouterr().out  # type: ignore[attr-defined]
