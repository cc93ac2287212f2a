"""rlvr/CountdownThinkText-v0: the thinking transcript as text pays what the token env pays; with the
calculator, the multi-turn text env writes what the token env writes and says which characters are whose;
the calculator as a tool function."""

from __future__ import annotations

import builtins
import re
import string
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

import rlvr_env
from rlvr_env import RewardWeights, TextEnv, ThinkTask
from rlvr_env.completions import AnswerFormat, prompt_text
from rlvr_env.tasks.think.solver import STYLES
from rlvr_env.text_tool_env import TextToolEnv

TEXT_ID, TOKEN_ID = "rlvr/CountdownThinkText-v0", "rlvr/CountdownThink-v0"
PROMPT = ((9, 1, 2), 8)
VERDICT_KEYS = ("reward_parts", "expression", "value", "reason", "correct", "well_formed", "prompt")


def words_ids(task: ThinkTask, text: str) -> list[int]:
    return [task.vocab.index(w) for w in text.split()]


def token_episode(prompt, actions, **kw):
    """The token env (token context) run on ``actions``: reward, final info, the transcript's ids and, per
    action, the tokens the env wrote right after it."""
    env = gym.make(TOKEN_ID, n_numbers=3, observation="tokens", **kw)
    env.reset(options={"prompt": prompt})
    ctx = env.unwrapped.token_context
    replies, before = [], 0
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        answer = [int(x) - ctx.answer_offset for x in obs[ctx.prompt_width:] if x]
        replies.append(tuple(answer[before + 1:]))
        before = len(answer)
        if term or trunc:
            break
    return reward, info, answer, replies, (term, trunc)


def text_verdict(env, prompt, text):
    env.reset(options={"prompt": prompt})
    _, reward, term, trunc, info = env.step(text)
    assert (term, trunc) == (True, False)
    return reward, info


# -- the one-step text env pays what the token env pays ---------------------------------------------------
@pytest.mark.parametrize("style", STYLES)
def test_solver_transcripts_as_text_are_paid_what_the_token_env_pays(style):
    text_env = gym.make(TEXT_ID, n_numbers=3, solution_style=style, reward_weights={"step": 0.2})
    task = text_env.unwrapped.task
    assert type(text_env.unwrapped) is TextEnv and task.whole_completion
    rng = np.random.default_rng(7)
    for seed in range(12):
        _, info = text_env.reset(seed=seed)
        prompt = info["prompt"]
        ids = task.solution(prompt)
        reward, tinfo, *_ = token_episode(prompt, ids, solution_style=style, reward_weights={"step": 0.2})
        assert reward >= 1.1 and tinfo["correct"]  # 1.3 when the trace has steps (each passes)
        # the token env's rendering, the compact one, and one with random ASCII whitespace between tokens
        spaced = "".join(task.vocab[t] + rng.choice([" ", "", "\n", "\t  "]) for t in ids)
        for text in (task.transcript(ids), task.tokens_text(ids), spaced):
            treward, xinfo = text_verdict(text_env, prompt, text)
            assert treward == reward
            for key in VERDICT_KEYS:
                assert xinfo[key] == tinfo[key], (key, text)


HOSTILE = [  # transcripts the token env can write: (text, accuracy, format)
    ("<think> </think> <answer> 9 - 1 </answer>", 1.0, 1.0),  # no trace
    ("<think> <think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>", 1.0, 0.0),  # a repeated tag
    ("9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>", 1.0, 0.0),  # no <think>
    ("<think> 9 - 1 = 8 ; </think> <answer> <answer> 9 - 1 </answer>", 0.0, 0.0),  # nested answer tags
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer> </answer>", 0.0, 0.0),  # a second close
    ("<think> 9 - 1 = 8 ; </think> </think> <answer> 9 - 1 </answer>", 0.0, 0.0),  # two </think>
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 + 1 </answer>", 0.0, 1.0),  # the trace reaches 8, the answer 10
    ("<think> 9 - 1 = 7 ; </think> <answer> 9 - 1 </answer>", 1.0, 1.0),  # a false step
    ("<think> back </think> <answer> 9 - 1 </answer>", 1.0, 0.0),  # back with nothing to abandon
    ("<think> 9 - 1 = </think> <answer> 9 - 1 </answer>", 1.0, 0.0),  # an unfinished step
    ("<think> 9 - 1 = 8 ; </think> <answer> </answer>", 0.0, 0.0),  # an empty answer
    ("<think> </think> 9 <answer> 9 - 1 </answer>", 0.0, 0.0),  # text between the sections
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer> 9", 0.0, 0.0),  # text after </answer>
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 1 - 1 </answer>", 0.0, 0.0),  # digits apart are one number: 91
]


@pytest.mark.parametrize("text, accuracy, fmt", HOSTILE)
def test_hostile_transcripts_are_paid_what_the_token_rules_say(text, accuracy, fmt):
    env = gym.make(TEXT_ID, n_numbers=3)
    task = env.unwrapped.task
    reward, info = text_verdict(env, PROMPT, text)
    assert info["reward_parts"] == {"accuracy": accuracy, "format": pytest.approx(0.1 * fmt)}
    # the same tokens scored as the token env scores a finished transcript
    verdict = task.score(task.validate_prompt(PROMPT), words_ids(task, text), RewardWeights())
    assert reward == pytest.approx(verdict.reward) == pytest.approx(accuracy + 0.1 * fmt)
    assert info["reason"] == verdict.reason


@pytest.mark.parametrize("text, why", [
    ("<think> 9 minus 1 is 8 </think> <answer> 9 - 1 </answer>", "vocabulary"),  # free text: no tokens
    ("<think> 9 - 1 = 8 ; </think> <answer> ٩ - 1 </answer>", "vocabulary"),  # a non-ASCII digit
    ("<think> 9 - 1 = 8 ;\u00a0</think> <answer> 9 - 1 </answer>", "vocabulary"),  # Unicode whitespace inside
    ("<think> 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer> <|im_end|>", "vocabulary"),
    ("<think> " + "9 - 1 = 8 ; back " * 14 + "</think> <answer> 9 - 1 </answer>", "truncated"),  # padded
    ("<think> " + "9 - 1 = 8 ; back " * 4000 + "hm", "truncated"),  # past the cap, unreadable after it
    ("<answer> 9 - 1 </answer>" * 2, "<think>"),
    ("", "empty"),
    ("<think>" + " " * 300_000 + "</think> <answer> 9 - 1 </answer>", "characters"),  # past max_chars
])
def test_text_the_token_env_cannot_write_or_past_the_caps_is_paid_nothing(text, why):
    env = gym.make(TEXT_ID, n_numbers=3)
    reward, info = text_verdict(env, PROMPT, text)
    assert reward == 0.0 and not any(info["reward_parts"].values())
    assert re.search(why, info["reason"]), info["reason"]


def test_a_transcript_of_exactly_the_cap_is_paid_and_one_token_longer_is_cut():
    text = "<think> 9 - 1 = 8 ; back 9 - 1 = 8 ; </think> <answer> 9 - 1 </answer>"
    n = len(text.split())
    for cap, paid in ((n, 1.1), (n - 1, 0.0)):
        env = TextEnv(ThinkTask(n_numbers=3, max_length=cap))
        env.reset(options={"prompt": PROMPT})
        _, reward, term, trunc, info = env.step(text)
        assert reward == pytest.approx(paid) and (term, trunc) == (True, False)
        assert (info["reason"] is None) == bool(paid)
        assert ("truncated" in (info["reason"] or "")) != bool(paid)


def test_the_prompt_text_describes_the_transcript_and_the_calculator():
    for calculator in (False, True):
        task = ThinkTask(n_numbers=4, calculator=calculator)
        prompt = task.validate_prompt(((9, 1, 2, 10), 80))
        text = prompt_text(task, prompt)
        assert set(text) <= set(string.printable) and len(text) <= 1024
        assert "80" in text and "9, 1, 2, 10" in text and "<think>" in text and "</answer>" in text
        assert ("a calculator writes the result" in text) == calculator
        assert "between <answer> and </answer>" in text  # where the answer goes, once: the task says it


def test_trl_reward_functions_pay_the_think_task_as_the_text_env_does():
    from rlvr_env.llm import make_dataset, reward_functions

    task = ThinkTask(n_numbers=3)
    rows = make_dataset(task, split="train", size=4, seed=0)
    env = TextEnv(task)
    completions, expected = [], []
    for row in rows:
        prompt = task.prompt_from_record({"numbers": row["numbers"], "target": row["target"]})
        assert row["prompt"] == prompt_text(task, prompt)
        for text in (task.transcript(task.solution(prompt)), "<think> </think> <answer> 1 </answer>"):
            env.reset(options={"prompt": prompt})
            expected.append(env.step(text)[1])
            completions.append(text)
    numbers = [r["numbers"] for r in rows for _ in range(2)]
    target = [r["target"] for r in rows for _ in range(2)]
    paid = np.sum([f(prompts=None, completions=completions, numbers=numbers, target=target)
                   for f in reward_functions(task)], axis=0)
    assert paid.tolist() == pytest.approx(expected) and max(expected) == pytest.approx(1.1)


def test_verl_compute_score_pays_the_think_task_whole():
    from rlvr_env.llm import compute_score, verl_rows

    task = ThinkTask(n_numbers=3)
    for row in verl_rows(task, "train", 3, 0):
        gt = row["reward_model"]["ground_truth"]
        prompt = task.validate_prompt((tuple(gt["numbers"]), gt["target"]))
        text = task.transcript(task.solution(prompt))
        env = TextEnv(task)
        for completion in (text, text.replace("<think>", ""), text + " 1"):
            paid = compute_score(row["data_source"], completion, gt)["score"]
            assert paid == pytest.approx(text_verdict(env, prompt, completion)[0]), completion
        assert compute_score(row["data_source"], text, gt)["score"] == pytest.approx(1.1)


# -- the multi-turn text env: the calculator ---------------------------------------------------------------
def model_turns(task: ThinkTask, solved) -> list[str]:
    """The model's texts of a solver transcript: each run of its own tokens, cut where the calculator
    writes (after each ``=``), in the token env's rendering."""
    turns, current = [], []
    for word, env_wrote in zip(solved.tokens, solved.written_by_calculator):
        if env_wrote:
            if current:
                turns.append(" " + " ".join(current) if turns else " ".join(current))
                current = []
            continue
        current.append(word)
    turns.append(" " + " ".join(current))
    return turns


@pytest.mark.parametrize("style", STYLES)
def test_the_calculator_replies_equal_the_token_envs_and_the_mask_is_exact(style):
    env = gym.make(TEXT_ID, n_numbers=3, calculator=True, solution_style=style)
    tool = env.unwrapped
    task = tool.task
    assert type(tool) is TextToolEnv and tool.stop_strings == ("=",) and tool.end_string == "</answer>"
    calls = 0
    for seed in range(10):
        _, info = env.reset(seed=seed)
        prompt = info["prompt"]
        actions = task.solution(prompt)
        reward, tinfo, token_ids, replies, _ = token_episode(prompt, actions, calculator=True,
                                                             solution_style=style)
        token_replies = [r for r in replies if r]
        turns = model_turns(task, task.solve(prompt))
        written = []
        for k, text in enumerate(turns):
            obs, treward, term, trunc, xinfo = env.step(text)
            if k < len(turns) - 1:
                assert (treward, term, trunc) == (0.0, False, False) and xinfo == {"turn": k + 1}
                assert obs == " " + task.tokens_text(token_replies[k])  # the token env's reply, as text
                written.append(obs)
        assert (term, trunc, obs) == (True, False, "") and len(written) == len(token_replies)
        calls += len(written)
        assert treward == reward == pytest.approx(1.1)
        for key in VERDICT_KEYS:
            assert xinfo[key] == tinfo[key], key
        assert xinfo["stats"] == tinfo["stats"] and xinfo["turns"] == len(turns)
        transcript, mask = xinfo["transcript"], xinfo["model_mask"]
        assert task.parse_answer(prompt, transcript) == token_ids  # the same transcript, token by token
        assert mask.dtype == bool and mask.shape == (len(transcript),)
        assert "".join(c for c, m in zip(transcript, mask) if m) == "".join(turns)
        assert [transcript[s:e] for s, e in xinfo["env_spans"]] == written
        assert "".join(c for c, m in zip(transcript, mask) if not m) == "".join(written)
        assert xinfo["length"] == len(transcript)
    assert calls > 0 or style == "expression"


def test_the_mask_by_hand_and_a_stop_string_the_calculator_does_not_answer():
    env = TextToolEnv(ThinkTask(n_numbers=3, calculator=True))
    env.reset(options={"prompt": PROMPT})
    assert env.step("<think> 9 - 1 =") == (" 8 ;", 0.0, False, False, {"turn": 1})
    assert env.step(" 8 * 2 = 16 ; 9 * 2 =")[0] == " 18 ;"  # a stop inside the text is the model's own
    assert env.step(" </think> <answer> 9 - 1 =")[:3] == ("", 0.0, False)  # no reply in the answer: go on
    _, reward, term, trunc, info = env.step(" </answer>")
    assert (reward, term, trunc) == (0.0, True, False)  # '=' in the answer: not an expression
    t = info["transcript"]
    assert t == "<think> 9 - 1 = 8 ; 8 * 2 = 16 ; 9 * 2 = 18 ; </think> <answer> 9 - 1 = </answer>"
    assert info["env_spans"] == [(15, 19), (40, 45)] and t[15:19] == " 8 ;" and t[40:45] == " 18 ;"
    expected = np.ones(len(t), dtype=bool)
    expected[15:19] = expected[40:45] = False
    assert np.array_equal(info["model_mask"], expected) and info["turns"] == 4
    # a reply after whitespace adds no space of its own
    env.reset(options={"prompt": PROMPT})
    assert env.step("<think> 9 - 1 = ")[0] == "8 ;" and env.env_spans == [(16, 19)]


def test_a_turn_without_a_stop_string_ends_the_episode_and_is_paid():
    env = TextToolEnv(ThinkTask(n_numbers=3, calculator=True))
    env.reset(options={"prompt": PROMPT})
    _, reward, term, trunc, info = env.step("<think> </think> <answer> 9 - 1 </answer>")
    assert (reward, term, trunc, info["turns"]) == (pytest.approx(1.1), True, False, 1)
    env.reset(options={"prompt": PROMPT})
    env.step("<think> 9 - 1 =")
    _, reward, term, trunc, info = env.step(" 9 - 1")  # the model stopped without asking or answering
    assert (reward, term, trunc) == (0.0, True, False) and "no answer section" in info["reason"]
    env.reset(options={"prompt": PROMPT})
    _, reward, term, _, info = env.step("<think> nine - 1 =")  # unreadable: it ends here, refused
    assert (reward, term) == (0.0, True) and "vocabulary" in info["reason"]


def test_the_token_cap_truncates_where_the_token_env_does_and_cuts_the_reply():
    for cap in (16, 17, 18, 19, 20, 21, 22):  # the cap falls on every token of a step and its reply
        task = ThinkTask(n_numbers=3, calculator=True, max_length=max(cap, 8))
        step = [task.vocab.index(w) for w in "9 - 1 =".split()]
        actions = [task.vocab.index("<think>")] + step * 10
        *_, token_ids, replies, (term, trunc) = token_episode(PROMPT, actions, calculator=True,
                                                              max_length=cap)
        assert (term, trunc) == (False, True) and len(token_ids) == cap
        env = TextToolEnv(task)
        env.reset(options={"prompt": PROMPT})
        texts = ["<think> 9 - 1 ="] + [" 9 - 1 ="] * 10
        for text in texts:
            obs, reward, term, trunc, info = env.step(text)
            if term or trunc:
                break
        assert (term, trunc, reward) == (False, True, 0.0) and "truncated" in info["reason"]
        # the same turn ends it; the model's last text may run past the cap (it is kept whole, unpaid)
        # turn k ends with 6 k + 1 tokens (its reply included): the first turn that reaches the cap
        assert info["turns"] == -(-(cap - 1) // 6)
        ids = task.parse_answer(task.validate_prompt(PROMPT), info["transcript"])
        assert ids[:cap] == token_ids and len(ids) - cap < 4
        # the env's reply is cut to the room left, as the token env cuts it
        env_ids = [task.parse_answer(None, info["transcript"][s:e]) for s, e in info["env_spans"]]
        assert [r for r in replies if r] == [tuple(r) for r in env_ids]


def test_the_turn_and_character_caps_truncate_and_pay_nothing():
    env = gym.make(TEXT_ID, n_numbers=3, calculator=True, max_turns=2)
    env.reset(options={"prompt": PROMPT})
    assert env.step("<think> 9 - 1 =")[2:4] == (False, False)
    _, reward, term, trunc, info = env.step(" 8 * 1 =")
    assert (reward, term, trunc) == (0.0, False, True) and "2 turns" in info["reason"]
    env = gym.make(TEXT_ID, n_numbers=3, calculator=True, answer_format=AnswerFormat(max_chars=30))
    env.reset(options={"prompt": PROMPT})
    assert env.step("<think> 9 - 1 =")[0] == " 8 ;"  # 19 characters
    _, reward, term, trunc, info = env.step(" </think> <answer> 9 - 1 </answer>")
    assert (reward, term, trunc) == (0.0, False, True) and "30 characters" in info["reason"]
    env.reset(options={"prompt": PROMPT})
    _, reward, term, trunc, info = env.step("<think> 9 - 1 = 8 ; 9 - 1 = 8 ;    9 - 1 =")
    assert (reward, trunc) == (0.0, True)


def test_the_character_cap_is_exact_and_a_step_holding_the_end_string_ends_the_episode():
    final = " </think> <answer> 9 - 1 </answer>"
    n = len("<think> 9 - 1 = 8 ;" + final)
    for cap, paid, cut in ((n, 1.1, False), (n - 1, 0.0, True)):
        env = gym.make(TEXT_ID, n_numbers=3, calculator=True, answer_format=AnswerFormat(max_chars=cap))
        env.reset(options={"prompt": PROMPT})
        assert env.step("<think> 9 - 1 =")[0] == " 8 ;"
        _, reward, term, trunc, info = env.step(final)
        assert (reward, term, trunc) == (pytest.approx(paid), not cut, cut) and info["length"] == n
    # the end string ends the episode even when the step also ends in a stop string
    env = gym.make(TEXT_ID, n_numbers=3, calculator=True)
    env.reset(options={"prompt": PROMPT})
    _, reward, term, trunc, info = env.step("<think> </think> <answer> 9 - 1 </answer> 9 - 1 =")
    assert (reward, term, trunc) == (0.0, True, False) and "no answer section" in info["reason"]


def test_protocol_errors_are_the_one_step_text_envs():
    for kw in ({}, {"calculator": True}):
        env = gym.make(TEXT_ID, n_numbers=3, **kw).unwrapped
        with pytest.raises(ResetNeeded):
            env.step("<think>")
        env.reset(seed=0)
        with pytest.raises(TypeError, match="not a completion"):
            env.step(17)
        with pytest.raises(TypeError, match="not a completion"):
            env.step(b"<think> 9 - 1 =")
        env.step("<think> </think> <answer> 9 </answer>")
        with pytest.raises(ResetNeeded, match="after the episode ended"):
            env.step("<think>")
    with pytest.raises(ValueError, match="max_turns"):
        gym.make(TEXT_ID, calculator=True, max_turns=0)
    with pytest.raises(ValueError, match=r"\['max_turns'\] apply only"):
        gym.make(TEXT_ID, max_turns=3)
    with pytest.raises(ValueError, match="writes no tokens of its own"):
        TextToolEnv(ThinkTask(n_numbers=3))
    with pytest.raises(ValueError, match="writes no tokens of its own"):
        TextToolEnv(rlvr_env.CountdownTask())


@pytest.mark.parametrize("kw", [{}, {"calculator": True}, {"calculator": True, "split": "test"}])
def test_the_gymnasium_checker_passes(kw):
    check_env(gym.make(TEXT_ID, n_numbers=3, **kw).unwrapped)


def test_reset_replays_and_the_same_seed_gives_the_same_prompt_as_the_token_env():
    text_env = gym.make(TEXT_ID, n_numbers=3, calculator=True)
    token_env = gym.make(TOKEN_ID, n_numbers=3, calculator=True)
    for seed in range(5):
        text, info = text_env.reset(seed=seed)
        assert info["prompt"] == token_env.reset(seed=seed)[1]["prompt"]
        assert info["stop_strings"] == ("=",) and text_env.observation_space.contains(text)


# -- the calculator as a tool function --------------------------------------------------------------------
def test_the_tool_function_computes_what_the_token_envs_calculator_writes():
    from rlvr_env.llm import calculator, make_calculator

    task = ThinkTask(n_numbers=3, calculator=True)
    tool = make_calculator(task)
    prompt = task.validate_prompt(PROMPT)
    for a in range(0, 40, 3):
        for b in range(0, 40, 7):
            for op in "+-*/":
                reply = task.reply(prompt, words_ids(task, f"<think> {' '.join(str(a))} {op} "
                                                           f"{' '.join(str(b))} ="))
                assert tool(f"{a} {op} {b}") == task.tokens_text(reply[:-1]).replace(" ", ""), (a, op, b)
    assert tool("99 * 999") == "?" and calculator("99 * 999") == "98901"  # N = 3: 4 digits; N = 4: 5
    assert tool("9999 - 1") == "9998" and tool("9999 + 1") == "?"  # operands of the most digits are read
    assert tool("10000 - 1").startswith("error:") and calculator("10000 - 1") == "9999"
    for bad in ("2**3", "9", "1 2 + 3", "-3 + 1", "3.5 + 1", "__import__('os')", "9 % 2", "x" * 100, "007+1"):
        assert tool(bad).startswith("error:"), bad
    assert tool(7).startswith("error:")  # type: ignore[arg-type]


def test_the_tool_function_has_the_schema_trl_reads():
    pytest.importorskip("transformers")
    from transformers.utils import get_json_schema

    from rlvr_env.llm import calculator

    schema = get_json_schema(calculator)["function"]
    assert schema["name"] == "calculator"
    assert schema["parameters"]["required"] == ["expression"]
    assert schema["parameters"]["properties"]["expression"]["type"] == "string"
    assert "9 * 7" in schema["parameters"]["properties"]["expression"]["description"]


def test_nothing_is_evaluated(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("eval/exec called")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    from rlvr_env.llm import calculator

    assert calculator("__import__('os').getpid()").startswith("error:") and calculator("6 * 7") == "42"
    env = gym.make(TEXT_ID, n_numbers=3, calculator=True)
    env.reset(options={"prompt": PROMPT})
    assert env.step("<think> 9 - 1 =")[0] == " 8 ;"
    assert env.step(" </think> <answer> __import__('os').getpid() </answer>")[1] == 0.0
    root = Path(rlvr_env.__file__).parent
    for path in (root / "text_tool_env.py", root / "tasks/think/text.py", root / "llm/tools.py"):
        source = path.read_text()
        assert "eval(" not in source and "exec(" not in source, path
