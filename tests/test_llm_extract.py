"""The completion extraction policy, and hostile completions: 0 with a reason, never an exception or a hang.

Pure Python (rlvr_env.completions needs no extra)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from rlvr_env import verify
from rlvr_env.completions import AnswerFormat, completion_text, extract_answer, prompt_text
from rlvr_env.tasks.expression.completions import score_completion
from rlvr_env.tasks.countdown.task import CountdownTask
from rlvr_env.tasks.expression.verifier import Grammar

COUNTDOWN = Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once")


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("<answer>2+3*5</answer>", "2+3*5"),
        ("think...\n<answer>\n 2+3*5 \n</answer>\n", "2+3*5"),
        ("<answer>1+1</answer> no, better: <answer>2+3*5</answer>", "2+3*5"),  # the last block counts
        ("I'd say <answer>2 + 3 * 5</answer>.", "2 + 3 * 5"),
    ],
)
def test_the_last_balanced_answer_block_is_the_answer(completion: str, answer: str) -> None:
    assert extract_answer(completion) == (answer, None)


@pytest.mark.parametrize(
    "completion, reason",
    [
        ("2+3*5", "no '</answer>' tag"),
        ("<answer>2+3*5", "unbalanced tags: 1 '<answer>' and 0 '</answer>'"),
        ("2+3*5</answer>", "unbalanced tags: 0 '<answer>' and 1 '</answer>'"),
        ("<answer><answer>2+3*5</answer>", "unbalanced tags: 2 '<answer>' and 1 '</answer>'"),
        ("<answer>2+3*5</answer><answer>", "unbalanced tags: 2 '<answer>' and 1 '</answer>'"),
        ("</answer>2+3*5<answer>", "the last '</answer>' has no '<answer>' before it"),
        ("<answer>  </answer>", "empty answer"),
        ("", "no '</answer>' tag"),
    ],
)
def test_refused_completions_say_why(completion: str, reason: str) -> None:
    assert extract_answer(completion) == (None, reason)
    verdict = score_completion(completion, (2, 3, 5), 17)
    assert (verdict.reward, verdict.correct, verdict.well_formed) == (0.0, False, False)
    assert verdict.reason == f"answer extraction: {reason}"


def test_configurable_tags_and_whole_completion() -> None:
    boxed = AnswerFormat(open_tag="\\boxed{", close_tag="}")
    assert extract_answer("so \\boxed{2+3*5}", boxed) == ("2+3*5", None)
    whole = AnswerFormat(whole=True)
    assert extract_answer("  2+3*5\n", whole) == ("2+3*5", None)
    assert score_completion("2+3*5", (2, 3, 5), 17, fmt=whole).correct
    assert not score_completion("<answer>2+3*5</answer>", (2, 3, 5), 17, fmt=whole).well_formed
    for bad in (dict(open_tag=""), dict(open_tag="<a>", close_tag="<a>"),
                dict(open_tag="<a>", close_tag="<a>x"), dict(max_chars=0), dict(whole=1)):
        with pytest.raises(ValueError, match="AnswerFormat"):
            AnswerFormat(**bad)  # type: ignore[arg-type]


def test_conversational_completions() -> None:
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<answer>2+3*5</answer>"}]
    assert completion_text(msgs) == "<answer>2+3*5</answer>"
    tool_last = [{"role": "assistant", "content": "<answer>1</answer>"}, {"role": "tool", "content": "x"}]
    assert completion_text(tool_last) == "<answer>1</answer>"
    texts = [{"type": "text", "text": "<answer>2+3"}, {"type": "text", "text": "*5</answer>"}]
    parts = [{"role": "assistant", "content": texts}]
    assert score_completion(parts, (2, 3, 5), 17).correct
    assert score_completion({"role": "assistant", "content": "<answer>2+3*5</answer>"}, (2, 3, 5), 17).correct


# Each hostile completion, and the verifier rule (or extraction rule) that must refuse it.
HOSTILE = [
    ("<answer>__import__('os').getpid()*0+7</answer>", "character '_'"),
    ("<answer>eval('2+3*5')</answer>", "character 'e'"),
    ("<answer>2**3</answer>", "power operator '**'"),
    ("<answer>2^3</answer>", "character '^'"),
    ("<answer>-2+3+1</answer>", "unary '-'"),
    ("<answer>3!</answer>", "character '!'"),
    ("<answer>1.0+2</answer>", "decimal number"),
    ("<answer>9*10+1</answer>", "value 91 is not the target 90"),  # near miss
    ("<answer>9*10+1/9</answer>", "number 9 is used 2 times"),  # 90.11 and a reused number
    ("<answer>9*10+1-1</answer>", "number 1 is used 2 times"),
    ("<answer>9999999*9</answer>", "digits; at most 6"),
    ("<answer>" + "(" * 300 + "1" + ")" * 300 + "</answer>", "at most 256 are read"),
    ("<answer>٩*10</answer>", "character '٩'"),
    ("<answer>9*10\x00</answer>", "character '\\x00'"),
    ("x" * 1_000_000 + "<answer>9*10</answer>", "at most 200000 are read"),
    ("<answer>" * 20_000 + "9*10" + "</answer>", "unbalanced tags"),
    ("<answer>9*10</answer>" * 20_000, "at most 200000 are read"),
    ([{"role": "assistant", "content": 5}], "not text"),
    (None, "neither text nor a list of messages"),
    (b"<answer>9*10</answer>", "neither text nor a list of messages"),
    ([], "empty list of messages"),
]


@pytest.mark.parametrize("completion, rule", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
def test_hostile_completions_earn_nothing_with_a_reason(completion: object, rule: str) -> None:
    start = time.perf_counter()
    verdict = score_completion(completion, (9, 10, 1), 90, grammar=COUNTDOWN)
    elapsed = time.perf_counter() - start
    assert verdict.reward == 0.0 or (verdict.well_formed and not verdict.correct)
    assert not verdict.correct
    assert verdict.reason is not None and rule in verdict.reason, verdict.reason
    assert elapsed < 0.5, f"{elapsed:.3f} s for a hostile completion"


def test_hostile_objects_never_raise() -> None:
    class Evil(list):
        def __getitem__(self, i):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

        def __reversed__(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

    verdict = score_completion(Evil([1]), (2, 3, 5), 17)
    assert verdict.reward == 0.0 and "unreadable completion: RuntimeError: boom" in (verdict.reason or "")


def test_the_bridge_pays_what_verify_pays_on_planted_answers() -> None:
    task = CountdownTask(n_numbers=3)
    for expr, numbers, target in [("7*(9+1)", (7, 9, 1), 70), ("7*9+1", (7, 9, 1), 70),
                                  ("7/9", (7, 9, 1), 70), ("7/(9-9)", (7, 9, 1), 70), ("7+9", (7, 9, 1), 16)]:
        expected = verify(expr, numbers, target, grammar=task.grammar)
        got = score_completion(f"reasoning... <answer>{expr}</answer>", numbers, target, grammar=task.grammar)
        assert got == expected


def test_prompt_text_states_the_grammar() -> None:
    task = CountdownTask(n_numbers=3, operators="+*", parentheses=False, number_use="exactly_once")
    text = prompt_text(task, task.sample_prompt(__import__("numpy").random.default_rng(0), "train"))
    assert "operators + * and no parentheses, each number exactly once" in text
    assert "<answer> and </answer>" in text and text.isascii()


def test_core_package_imports_only_gymnasium_and_numpy() -> None:
    """`import rlvr_env` (text envs included) and `import rlvr_env.llm` pull in no heavy dependency."""
    heavy = ["torch", "trl", "transformers", "datasets", "verifiers", "tokenizers", "pandas", "scipy",
             "stable_baselines3", "pyarrow"]
    code = (
        "import sys, gymnasium as gym, rlvr_env\n"
        "env = gym.make('rlvr/CountdownText-v0'); env.reset(seed=0); env.step('<answer>1</answer>')\n"
        "core = {m.split('.')[0] for m in sys.modules}\n"
        "import rlvr_env.llm\n"
        "llm = {m.split('.')[0] for m in sys.modules}\n"
        f"heavy = {heavy!r}\n"
        "print(sorted(h for h in heavy if h in core), sorted(h for h in heavy if h in llm))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []", out
