"""Language-model completions: the prompt text a model reads, and how its answer is cut out and scored.

Pure Python (no third-party import), shared by the text-mode envs (:mod:`rlvr_env.text_env`) and the
trainer bridges (:mod:`rlvr_env.llm`), so every bridge pays exactly what :func:`rlvr_env.verify` says.

**Extraction policy** (:class:`AnswerFormat`, :func:`extract_answer`):

1. A completion is text, or a conversation (a list of ``{"role", "content"}`` messages, as TRL passes
   conversational completions): then its last assistant message's content is the text. A content given
   as a list of parts (``{"type": "text", "text": ...}``) is their texts joined. Anything else is refused.
2. A text longer than ``max_chars`` (default 200,000 characters) is refused unread: whatever the
   completion, extraction costs at most a few linear scans of ``max_chars`` characters in C.
3. With tags (the default ``<answer>`` ... ``</answer>``): the tags must be balanced (as many opening as
   closing tags, counted over the whole text); the answer is what lies between the last closing tag and
   the opening tag before it. No tag, an unbalanced count or an empty answer is refused.
   With ``whole=True`` the whole text is the answer.
4. Surrounding whitespace is stripped; the rest goes to :func:`rlvr_env.verify` as it is, which refuses
   anything outside its grammar (letters, ``**``, decimals, unary minus, more than 256 characters, ...).

A refused completion earns 0 (no format reward either) and its :class:`~rlvr_env.Verdict` says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr_env.tasks.base import Task
from rlvr_env.rewards import RewardWeights, Verdict

__all__ = [
    "AnswerFormat",
    "DEFAULT_FORMAT",
    "MAX_COMPLETION_CHARS",
    "completion_text",
    "extract_answer",
    "score_task_completion",
    "prompt_text",
    "refused",
    "task_format",
]

#: Longest completion text read by default; longer ones are refused unread.
MAX_COMPLETION_CHARS = 200_000


@dataclass(frozen=True)
class AnswerFormat:
    """Where the answer sits in a completion.

    Attributes:
        open_tag, close_tag: the tags around the answer (default ``<answer>`` and ``</answer>``).
        whole: if True, the whole completion is the answer and the tags are not used.
        max_chars: completions longer than this many characters are refused unread.
    """

    open_tag: str = "<answer>"
    close_tag: str = "</answer>"
    whole: bool = False
    max_chars: int = MAX_COMPLETION_CHARS

    def __post_init__(self) -> None:
        for name in ("open_tag", "close_tag"):
            tag = getattr(self, name)
            if not isinstance(tag, str) or not tag or tag.strip() != tag:
                raise ValueError(f"AnswerFormat.{name}={tag!r} must be a non-empty string without "
                                 "surrounding whitespace")
        if self.open_tag == self.close_tag or self.open_tag in self.close_tag or \
                self.close_tag in self.open_tag:
            raise ValueError(f"AnswerFormat tags {self.open_tag!r} and {self.close_tag!r} must differ "
                             "and neither may contain the other")
        if not isinstance(self.whole, bool):
            raise ValueError(f"AnswerFormat.whole={self.whole!r} must be a bool")
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 1:
            raise ValueError(f"AnswerFormat.max_chars={self.max_chars!r} must be a positive integer")

    def instruction(self, answer_noun: str = "answer") -> str:
        """How the prompt asks for the answer; ``answer_noun`` names what the answer is (a task's
        :attr:`rlvr_env.Task.answer_noun`: "expression" for the arithmetic tasks, "number" for Digits)."""
        if self.whole:
            return f"Reply with the {answer_noun} only, nothing else."
        return (f"Think it through, then give the {answer_noun} alone between {self.open_tag} and "
                f"{self.close_tag}.")


DEFAULT_FORMAT = AnswerFormat()


class _Refused(Exception):
    """Extraction refused the completion; the message is the reason."""


def completion_text(completion: object, max_chars: int = MAX_COMPLETION_CHARS) -> str:
    """The text of a plain or conversational completion; raises ``ValueError`` naming what is wrong.

    A conversation's last assistant message is read (or its last message, when no role says
    ``assistant``); a content given as parts is the join of its text parts.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        messages: Sequence[Any] = [completion]
    elif isinstance(completion, Sequence) and not isinstance(completion, (bytes, bytearray)):
        messages = completion
    else:
        raise ValueError(f"completion of type {type(completion).__name__} is neither text nor a list of "
                         "messages")
    if not messages:
        raise ValueError("completion is an empty list of messages")
    chosen = None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            chosen = message
            break
    if chosen is None:
        chosen = messages[-1]
    if not isinstance(chosen, Mapping) or "content" not in chosen:
        raise ValueError(f"message of type {type(chosen).__name__} has no 'content'")
    content = chosen["content"]
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        texts: list[str] = []
        total = 0
        for part in content:
            text = part.get("text") if isinstance(part, Mapping) else part if isinstance(part, str) else None
            if isinstance(text, str):
                texts.append(text)
                total += len(text)
                if total > max_chars:  # stop early: the joined text will be refused anyway
                    break
        return "".join(texts)
    raise ValueError(f"message content of type {type(content).__name__} is not text")


def extract_answer(completion: object, fmt: AnswerFormat = DEFAULT_FORMAT) -> tuple[str | None, str | None]:
    """``(answer, None)``, or ``(None, reason)`` when the policy refuses the completion. Never raises.

    >>> extract_answer("2+3 is 5, so <answer> 2+3*5 </answer>")
    ('2+3*5', None)
    >>> extract_answer("<answer>2+3</answer> then <answer>5*3")
    (None, "unbalanced tags: 2 '<answer>' and 1 '</answer>'")
    """
    try:
        return _extract(completion, fmt), None
    except _Refused as err:
        return None, str(err)
    except Exception as err:  # hostile objects (a __getitem__ that raises, ...): refuse, never raise
        return None, f"unreadable completion: {type(err).__name__}: {str(err)[:80]}"


def _extract(completion: object, fmt: AnswerFormat) -> str:
    try:
        text = completion_text(completion, fmt.max_chars)
    except ValueError as err:
        raise _Refused(str(err)) from None
    answer, reason = _extract_text(text, fmt)
    if answer is None:
        raise _Refused(reason)
    return answer


def _extract_text(text: str, fmt: AnswerFormat) -> tuple[str, None] | tuple[None, str]:
    """Steps 2-4 of the policy on a completion's text: ``(answer, None)`` or ``(None, reason)``."""
    if len(text) > fmt.max_chars:
        return None, f"completion is {len(text)} characters; at most {fmt.max_chars} are read"
    if fmt.whole:
        answer = text.strip()
    else:
        open_tag, close_tag = fmt.open_tag, fmt.close_tag
        opens, closes = text.count(open_tag), text.count(close_tag)
        if closes == 0:
            return None, (f"no {close_tag!r} tag" if opens == 0 else
                          f"unbalanced tags: {opens} {open_tag!r} and 0 {close_tag!r}")
        if opens != closes:
            return None, f"unbalanced tags: {opens} {open_tag!r} and {closes} {close_tag!r}"
        end = text.rfind(close_tag)
        start = text.rfind(open_tag, 0, end)
        if start < 0:
            return None, f"the last {close_tag!r} has no {open_tag!r} before it"
        answer = text[start + len(open_tag) : end].strip()
    if not answer:
        return None, "empty answer"
    return answer, None


def refused(reason: str, expression: str = "") -> Verdict:
    """The verdict for a completion the extraction policy refused: no reward, with the reason."""
    return Verdict(reward=0.0, correct=False, well_formed=False, value=None, reason=reason,
                   expression=expression, parts={"accuracy": 0.0, "format": 0.0})


def task_format(task: Task, fmt: AnswerFormat = DEFAULT_FORMAT) -> AnswerFormat:
    """The format a completion of ``task`` is read with: ``fmt``, or the whole completion (with ``fmt``'s
    ``max_chars``) for a task that reads completions whole (:attr:`rlvr_env.Task.whole_completion`: its
    answer has tags of its own, which cutting out between ``<answer>`` tags would lose)."""
    if task.whole_completion and not fmt.whole:
        return AnswerFormat(whole=True, max_chars=fmt.max_chars)
    return fmt


def prompt_text(task: Task, prompt: Any, fmt: AnswerFormat = DEFAULT_FORMAT) -> str:
    """The prompt a language model reads for ``prompt`` of ``task``: the task's question
    (:meth:`rlvr_env.Task.prompt_text`; for the arithmetic tasks the numbers, the target and the grammar)
    and where to put the answer. ASCII only for the shipped tasks.

    >>> from rlvr_env import ArithmeticTask, Prompt
    >>> print(prompt_text(ArithmeticTask(), Prompt((2, 3, 5), 17)))
    Write an arithmetic expression that equals 17 using the numbers 2, 3, 5.
    Use only the operators + * and no parentheses, each number exactly once; no other numbers.
    Think it through, then give the expression alone between <answer> and </answer>.
    """
    return task.prompt_text(prompt, task_format(task, fmt).instruction(task.answer_noun))


def score_task_completion(task: Task, prompt: Any, completion: object, weights: RewardWeights,
                          fmt: AnswerFormat = DEFAULT_FORMAT) -> Verdict:
    """Extract the answer from ``completion`` and let ``task`` verify it (:meth:`rlvr_env.Task.score_text`:
    for an arithmetic task whose scoring is the package's own, :func:`rlvr_env.verify`, so this equals
    :func:`score_completion`). A refused completion earns 0 with the reason. Never evaluates code. A task
    that reads completions whole is handed the whole text (:func:`task_format`)."""
    answer, reason = extract_answer(completion, task_format(task, fmt))
    if answer is None:
        return refused(f"answer extraction: {reason}")
    return task.score_text(prompt, answer, weights)
