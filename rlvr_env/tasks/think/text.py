"""The thinking transcript as text: what a language model reads, and how its text becomes tokens.

A transcript's text is read token by token with the task's own vocabulary (:func:`tokenize`): the longest
vocabulary string at each place, ASCII whitespace between tokens ignored, so ``9 * 7 = 63 ;`` and the
token env's rendering ``9 * 7 = 6 3 ;`` are the same tokens (digits are tokens: a number is its run of
digits, as in the token env, where nothing can stand between two digits but a token). Anything the
vocabulary cannot write (a word, a non-ASCII character, Unicode whitespace) makes the text unreadable, and
an unreadable transcript is refused (paid nothing), as :meth:`rlvr_env.Task.score_text` refuses for every
task: the token env cannot write it either. Reading stops one token past the length cap: the transcript is
then cut, and a cut transcript is paid nothing whatever follows. Nothing is ever evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from rlvr_env.tasks.think.trace import BACK, END_ANSWER, END_THINK, EQUALS, NO_NUMBER, THEN, THINK

__all__ = ["describe", "render", "tokenize"]


@lru_cache(maxsize=16)
def _pattern(vocab: tuple[str, ...]) -> re.Pattern[str]:
    # longest string first, so "</think>" is never read as "<", ...; re.ASCII: \s is ASCII whitespace only
    words = sorted(vocab, key=len, reverse=True)
    return re.compile(r"\s*(" + "|".join(re.escape(w) for w in words) + ")", re.ASCII)


_TRAILING = re.compile(r"\s*\Z", re.ASCII)


def tokenize(vocab: tuple[str, ...], text: str, limit: int) -> list[int] | None:
    """The token ids of ``text`` (ids index ``vocab``), or None when a part of it is no token. At most
    ``limit + 1`` ids are read: a longer transcript is past the cap ``limit`` whatever the rest holds."""
    index = {w: i for i, w in enumerate(vocab)}
    pattern = _pattern(vocab)
    ids: list[int] = []
    pos = 0
    while len(ids) <= limit:
        match = pattern.match(text, pos)
        if match is None:
            break
        ids.append(index[match.group(1)])
        pos = match.end()
    else:
        return ids  # past the cap: cut here
    if _TRAILING.match(text, pos) is None:
        return None
    return ids


def render(vocab: tuple[str, ...], token_ids: Sequence[int]) -> str:
    """Token ids as text :func:`tokenize` reads back: tokens separated by spaces, a number's digits
    together (``63``, not ``6 3``), as a language model writes them."""
    words: list[str] = []
    digit_before = False
    for t in token_ids:
        w = vocab[t]
        digit = len(w) == 1 and w.isdigit()
        if digit and digit_before:
            words[-1] += w
        else:
            words.append(w)
        digit_before = digit
    return " ".join(words)


def describe(numbers: Sequence[int], target: int, grammar_line: str, operators: str, calculator: bool,
             instruction: str) -> str:
    """The prompt text: the question, the transcript's format, a worked example, and ``instruction``."""
    listed = ", ".join(str(n) for n in numbers)
    ops = " ".join(operators)
    if calculator:
        step = (f"write each step as 'a op b {EQUALS}' (op one of {ops}) and stop: a calculator writes the "
                f"result and '{THEN}' ('{NO_NUMBER}' when it is no whole number >= 0)")
    else:
        step = (f"write each step as 'a op b {EQUALS} r {THEN}' (op one of {ops}; r the exact result, or "
                f"'{NO_NUMBER}' when it is no whole number >= 0)")
    return (f"Reach {target} with the numbers {listed}: think in steps, then answer with one expression.\n"
            f"Between {THINK} and {END_THINK}, {step}; '{BACK}' abandons the last step.\n"
            f"Then give the expression between <answer> and {END_ANSWER}, and nothing after it. "
            f"{grammar_line}\n"
            f"For example: {THINK} 9 * 7 {EQUALS} 63 {THEN} 63 + 1 {EQUALS} 64 {THEN} {END_THINK} "
            f"<answer> 9 * 7 + 1 {END_ANSWER}\n{instruction}")
