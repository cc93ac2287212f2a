"""``python -m benchmarks.speed think``: the arithmetic of its ratios and lengths, pinned by hand; the arms'
clocks; TRL's completions as long as asked; and the command end to end at its smallest settings."""

from __future__ import annotations

import json
import subprocess
import time

import gymnasium as gym
import numpy as np
import pytest

import rlvr_env  # noqa: F401
from benchmarks.core.common import ROOT
from benchmarks.speed.side_by_side import LengthTap, Turns, transcript_text, turn_shares
from benchmarks.speed.think import completion_length, lengths, markdown, summary, trl_ratios


def test_turn_shares_split_a_budget_evenly_larger_first() -> None:
    assert turn_shares(10, 4) == [3, 3, 2, 2]
    assert turn_shares(1, 3) == [1, 0, 0] and sum(turn_shares(20_000, 3)) == 20_000


def test_each_arm_is_timed_over_its_own_turns_only() -> None:
    calls: list[tuple[int, int]] = []

    def arm(i: int, pause: float):
        def run(share: int) -> int:
            calls.append((i, share))
            time.sleep(pause)
            return share + 1  # an iteration overshoots its share
        return run

    turns = Turns([arm(0, 0.08), arm(1, 0.0)], [4, 2], rounds=2)
    turns.run()
    assert calls == [(0, 2), (1, 1), (0, 2), (1, 1)]  # alternating, round by round
    assert turns.done == [6, 4]
    assert turns.seconds[0] >= 0.16 and turns.seconds[1] < 0.05  # the slow arm's time is its own


def test_the_ratios_against_trl_are_grpo_over_trl_per_answer_and_per_token() -> None:
    mu1 = {"answers_per_second": 200.0, "steps_per_second": 5000.0, "transcript_tokens_mean": 35.0}
    trl = {"completions_per_second": 2.0, "completion_tokens_per_second": 200.0}
    q = trl_ratios(mu1, trl)
    assert q["per_answer"] == pytest.approx(100.0)  # 200 / 2
    assert q["per_transcript_token"] == pytest.approx(35.0)  # 200 * 35 / 200
    assert q["per_policy_token"] == pytest.approx(25.0)  # 5000 / 200


def test_the_trl_ratio_reads_the_thinking_env_at_mu_1() -> None:
    row = {"steps_per_second": 1.0, "transcript_tokens_mean": 10.0}
    rows = {"think_preset": {**row, "answers_per_second": 50.0},
            "think_mu1": {**row, "answers_per_second": 80.0},
            "expression_mu1": {**row, "answers_per_second": 400.0}}
    out = summary(rows, {"completions_per_second": 4.0, "completion_tokens_per_second": 40.0})
    assert out["ratios"]["per_answer"] == pytest.approx(20.0)
    assert out["think_over_expression_answers"] == pytest.approx(0.2)
    assert "ratios" not in summary(rows, None)


def test_lengths_and_trl_completion_length_by_hand() -> None:
    got = lengths([20, 30], [26, 40])
    assert got == {"policy_tokens_mean": 25.0, "transcript_tokens_mean": 33.0, "calculator_tokens_mean": 8.0}
    assert completion_length(["ab", "abcd", "abcdefg"]) == 4  # 13 / 3 = 4.33
    with pytest.raises(ValueError):
        lengths([1], [])


def test_transcript_text_writes_a_numbers_digits_together() -> None:
    words = ["<think>", "9", "*", "7", "=", "6", "3", ";", "</think>", "<answer>", "1", "0", "-", "3",
             "</answer>"]
    assert transcript_text(words) == "<think> 9 * 7 = 63 ; </think> <answer> 10 - 3 </answer>"


def test_the_length_tap_counts_the_calculators_tokens_in_the_transcript() -> None:
    kwargs = {"n_numbers": 3, "calculator": True, "observation": "tokens", "solution_style": "search"}
    venv = gym.make_vec("rlvr/CountdownThink-v0", num_envs=4, vectorization_mode="vector_entry_point",
                        autoreset_mode="Disabled", **kwargs)
    task = venv.unwrapped.task
    prompts = task.sample_prompts(np.random.default_rng(3), "train", 4)
    plans = [task.solution(p) for p in prompts]
    solved = [task.solve(p) for p in prompts]
    tap = LengthTap(venv, text=True)
    tap.reset(options={"prompt": prompts})
    for t in range(max(len(p) for p in plans)):
        tap.step(np.array([p[t] if t < len(p) else 0 for p in plans]))  # ended rows stay frozen
    # answers are recorded as they end: compare (policy tokens, transcript tokens) pairs as multisets
    assert sorted(zip(tap.policy_tokens, tap.transcript_tokens)) == sorted(
        (len(p), len(s.tokens)) for p, s in zip(plans, solved))  # the calculator's tokens included
    assert sum(s.written_by_calculator.count(True) for s in solved) > 0  # the case is not trivial
    assert sorted(map(len, tap.texts)) == sorted(len(transcript_text(s.tokens)) for s in solved)
    venv.close()


def test_trl_completions_are_exactly_as_long_as_asked_and_others_take_turns_between() -> None:
    pytest.importorskip("trl")
    from benchmarks.speed.side_by_side import measure_trl

    seen: list[int] = []
    t = measure_trl(1, seed=0, batch=4, group=2, completion_length=7, exact_length=True, between=seen.append)
    assert seen == [0, 1]  # after the warm-up step and after the timed one
    assert t["steps"] == 1.0 and t["completions"] == 4.0 and t["completion_tokens_mean"] == 7.0
    assert t["completion_tokens_per_second"] == pytest.approx(7 * t["completions_per_second"])


def _record() -> dict:
    def arm(label: str, sps: float, aps: float, epochs: int) -> dict:
        return {"label": label, "epochs": epochs, "minibatches": 4 if epochs == 2 else 1,
                "steps_per_second": sps, "answers_per_second": aps, "policy_tokens_mean": 25.0,
                "transcript_tokens_mean": 33.0, "parameters": 418328.0}

    return {"command": "python -m benchmarks.speed think --steps 10", "threads": 2, "steps": 10, "rounds": 1,
            "load_average": [1.0, 1.0, 1.0],
            "runs": {"think_preset": arm("preset", 2100.0, 80.0, 2), "think_mu1": arm("mu1", 3000.0, 90.0, 1),
                     "expression_mu1": arm("expr", 9000.0, 1500.0, 1)},
            "sample": {"answers": 256.0, "policy_tokens_mean": 25.0, "transcript_tokens_mean": 33.0,
                       "characters_mean": 80.4, "example": "<think> </think> <answer> 1 </answer>"},
            "trl_completion_length": 80,
            "trl": {"max_completion_length": 80.0, "completions_per_second": 1.0,
                    "completion_tokens_mean": 80.0, "completion_tokens_per_second": 80.0,
                    "parameters": 505728.0, "steps": 3.0},
            "ratios": {"per_answer": 90.0, "per_transcript_token": 37.1, "per_policy_token": 37.5},
            "think_over_expression_answers": 0.06, "sft": {"solutions": 4000, "epochs": 4, "seconds": 40.0}}


def test_the_table_renders_from_the_json(tmp_path) -> None:
    from benchmarks.speed.think import main

    (tmp_path / "speed.json").write_text(json.dumps(_record()))
    main(["--render", "--out", str(tmp_path)])
    table = (tmp_path / "speed.md").read_text()
    assert table == markdown(_record())
    assert "| GRPO, thinking env, the preset's update: env steps/s | 2,100 | >= 2,000 met |" in table
    assert "the same text length | 90.0x | >= 100x **missed** |" in table
    assert "max_completion_length is 80" in table and "2 torch thread(s)" in table
    assert "Command: `python -m benchmarks.speed think --steps 10`" in table


def _tracked_changes() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.slow
def test_the_command_runs_end_to_end_applies_its_threads_and_writes_no_tracked_file(tmp_path, monkeypatch,
                                                                                  capsys) -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.speed.__main__ import main

    before = _tracked_changes()
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert main(["think", "--steps", "1", "--sft", "8", "--sft-epochs", "1", "--rounds", "1",
                     "--trl-steps", "0", "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    out = tmp_path / "benchmark-runs" / "think_speed"
    record = json.loads((out / "speed.json").read_text())
    table = (out / "speed.md").read_text()
    assert record["threads"] == 1 and "1 torch thread(s)" in table
    assert record["command"] == ("python -m benchmarks.speed think --steps 1 --sft 8 --sft-epochs 1 "
                                 "--rounds 1 --trl-steps 0 --threads 1")
    rows = [line for line in table.splitlines() if line.startswith("| GRPO, ")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| GRPO, thinking env, the preset's update",
        "| GRPO, thinking env, mu = 1 (one full-batch step per batch)",
        "| GRPO, expression env (Countdown-v0), mu = 1, not cold started",
        "| GRPO, thinking env, the preset's update: env steps/s"]
    assert "| GRPO at mu = 1 answers/s, thinking env ÷ expression env |" in table
    assert "TRL was not run (--trl-steps 0)." in table
    runs = record["runs"]
    assert all(runs[a]["answers"] >= 256 for a in runs)  # whole batches of 16 x 16
    # the thinking env's transcripts hold the calculator's tokens; the expression env's are its actions
    assert runs["think_mu1"]["transcript_tokens_mean"] > runs["think_mu1"]["policy_tokens_mean"]
    assert runs["expression_mu1"]["transcript_tokens_mean"] == runs["expression_mu1"]["policy_tokens_mean"]
    assert record["sample"]["characters_mean"] > record["sample"]["transcript_tokens_mean"]
    assert _tracked_changes() == before  # nothing tracked written without --update-results
    assert "The thinking env's speed" in capsys.readouterr().out
