"""Multi-digit arithmetic: ``a op b`` with operands of 1..D digits, the answer written digit by digit.

The testbed of Lee et al. 2023, "Teaching Arithmetic to Small Transformers": a prompt is two non-negative
integers and an operator; the answer is the exact result written as a decimal number, one token per
digit (and ``"-"`` first for a negative result when subtraction is offered), then ``"<eos>"``. The
verifier reads the digits as an integer (no ``eval``) and compares it with ``a op b`` exactly.

The split is by operand length, so "held-out" asks the length-generalisation question the paper
discusses: ``split="train"`` draws operands of 1..``train_digits`` digits, ``split="test"`` the prompts
where at least one operand has more (up to ``max_digits``). Which split a prompt belongs to is a function
of the prompt alone (:meth:`DigitsTask.split_of`), so every env, agent and table agrees on it.

This module is the worked example of the docs page ``docs/add-a-task.md``.

Why one long module: a task family is one module plus one registration (docs/add-a-task.md); prompts,
split, grammar mask, verifier, solutions and text live together on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from rlvr_env.tasks.base import ContextTokens, Task, check_split
from rlvr_env.rewards import truncated_verdict
from rlvr_env.rewards import RewardWeights, Verdict

__all__ = ["DigitsPrompt", "DigitsTask", "OPERATORS", "read_number"]

#: The operators a prompt may use, in vocabulary order.
OPERATORS = "+-*"
_EOS = "<eos>"
_DIGITS = tuple("0123456789")
#: A canonical integer: an optional sign, then 0 or digits without a leading zero (ASCII only: ``int``
#: alone would also read "٣", "1_000" or " 7"), and never "-0".
_NUMBER = re.compile(r"(?:0|-?[1-9][0-9]*)\Z")
_MAX_DIGITS_LIMIT = 9  # operands up to 9 digits keep every result inside int64 (vector env arrays)


@dataclass(frozen=True)
class DigitsPrompt:
    """One prompt ``a op b``: non-negative integer operands and an operator from :data:`OPERATORS`.
    Immutable and hashable (it is ``info["prompt"]`` and what ``reset(options={"prompt": ...})`` takes)."""

    a: int
    op: str
    b: int

    @property
    def result(self) -> int:
        """The exact answer."""
        if self.op == "+":
            return self.a + self.b
        if self.op == "-":
            return self.a - self.b
        return self.a * self.b

    def __str__(self) -> str:
        return f"{self.a}{self.op}{self.b}"


def _character_fault(text: str) -> str | None:
    """The first character of ``text`` that no canonical number has there (a digit, or ``-`` first)."""
    for i, ch in enumerate(text):
        if ch not in _DIGITS and not (ch == "-" and i == 0):
            where = "a sign only leads the number" if ch == "-" else "only the digits 0-9 and a leading '-'"
            return f"character {ch!r} at position {i} is not allowed ({where})"
    return None


def read_number(text: str, max_digits: int) -> tuple[int | None, str | None]:
    """``text`` as an integer written the canonical way, and None; or None and the reason it is not one.

    Canonical: ASCII digits, an optional leading ``-``, no leading zero, no ``-0``, at most
    ``max_digits`` digits. The digits are checked by a pattern before ``int`` reads them, so nothing but
    a plain decimal integer is ever converted.
    """
    if not isinstance(text, str):
        return None, f"expected text, got {type(text).__name__}"
    if not text:
        return None, "empty answer"
    fault = _character_fault(text)
    if fault is not None:
        return None, fault
    if text in ("-", "-0"):
        return None, f"{text!r} is not a number (a sign needs a non-zero number after it)"
    if not _NUMBER.match(text):
        return None, f"number {text!r:.40} has a leading zero"
    digits = len(text) - text.startswith("-")
    if digits > max_digits:
        return None, f"the number has {digits} digits; at most {max_digits} are read"
    return int(text), None


class DigitsTask(Task[DigitsPrompt]):
    """
    ## Description

    The task of ``rlvr/Digits-v0`` (token env and native vector env) and ``rlvr/DigitsText-v0`` (text env):
    a prompt ``a op b`` with operands of 1..``max_digits`` digits; the policy writes the exact result one
    digit per token, most significant first (least significant first with ``reverse=True``, the paper's
    reversed output), then ``"<eos>"``.

    ## Action Space

    ``Discrete(V)``: ``0: "0"`` .. ``9: "9"``, then ``"-"`` when subtraction is offered (a negative
    result's sign), then ``"<eos>"``.

    ## Observation Space

    ``observation="features"`` (default): ``Box(0, 1, (prompt_dim + max_length * V,), float32)``:

    | Segment | Meaning                                                                                |
    |---------|----------------------------------------------------------------------------------------|
    | a       | per digit place, units first: one-hot over (no digit, 0..9); ``11 * max_digits`` values |
    | op      | one-hot over the task's operators                                                      |
    | b       | as ``a``                                                                               |
    | prefix  | per answer position, one-hot of the token emitted there (zeros if none)                |

    Digits are aligned by place value, so a place is the same feature whatever the operand's length.
    ``observation="tokens"``: the prompt as a language model reads it, ``1 2 + 7 =`` (``<pad>``, digits,
    operators, ``=``; left-padded to ``2 * max_digits + 2``), then the answer's tokens.

    ## Rewards

    At the last step, ``accuracy_weight * correct + format_weight * well_formed`` (1.1, 0.1 or 0.0 by
    default); the parts are in the final ``info["reward_parts"]``.

    ## Verifier

    :func:`read_number` reads the answer as a canonical integer (ASCII digits, a leading ``-`` only, no
    leading zero, no ``-0``, at most :attr:`answer_digits` digits; a pattern checks the text before
    ``int`` reads it, nothing is evaluated); it is correct when it equals ``a op b`` exactly.

    ## Starting State

    ``reset`` draws a prompt of the split with the env's ``np_random``, length first: each operand's digit
    count is uniform over the split's lengths (for ``"test"``, the pairs where at least one operand is
    longer than ``train_digits``), then the operand is uniform among the numbers of that length (1-digit
    numbers include 0), so short operands are as frequent as long ones (the paper balances digit counts
    too). ``reset(options={"prompt": (a, op, b)})`` replays a prompt (a :class:`DigitsPrompt` or a triple).

    ## Episode End

    Terminated at ``"<eos>"``; truncated after ``max_length`` tokens without it (the longest correct
    answer plus EOS), which pays nothing.

    ## Splits

    By operand length, the length-generalisation question of the paper: ``"train"`` has operands of at
    most ``train_digits`` digits, ``"test"`` the prompts with a longer one (:meth:`split_of`).

    ## Arguments

    >>> import gymnasium as gym
    >>> import rlvr_env
    >>> env = gym.make("rlvr/Digits-v0", operators="+-", render_mode="ansi")
    >>> obs, info = env.reset(seed=0)
    >>> info["prompt"], info["split"]
    (DigitsPrompt(a=56, op='-', b=34), 'train')
    >>> for token in (2, 2, env.unwrapped.task.eos_id):  # "22"
    ...     obs, reward, terminated, truncated, info = env.step(token)
    >>> reward, terminated, info["expression"], info["reward_parts"]
    (1.1, True, '22', {'accuracy': 1.0, 'format': 0.1})
    >>> env.render()
    '56 - 34 = | answer: 2 2 <eos> [done]'

    | Parameter         | Type  | Default | Description                                                     |
    |-------------------|-------|---------|-----------------------------------------------------------------|
    | ``max_digits``    | int   | ``3``   | D, the longest operand (2..9)                                   |
    | ``train_digits``  | int   | ``2``   | the longest operand of a training prompt (1..D-1)               |
    | ``operators``     | str   | ``"+"`` | from ``"+-*"``: ``"+"`` is the paper's main task; ``"-"`` adds a |
    |                   |       |         | sign token, ``"*"`` doubles the answer length                   |
    | ``reverse``       | bool  | ``False``| the answer's digits least significant first, the sign still     |
    |                   |       |         | first (the paper's "reversed output": ``-10`` is ``- 0 1``)      |
    | ``grammar_mask``  | bool  | ``True``| ``action_masks()`` offers only tokens that keep the answer a     |
    |                   |       |         | canonical number (digits, then EOS); False: every token         |

    plus the env's own: ``split``, ``accuracy_weight``, ``format_weight``, ``render_mode``,
    ``observation`` (token envs), ``autoreset_mode`` and ``copy`` (vector env), ``answer_format`` (text
    env). Masks never change what is paid: the verifier alone decides; a prefix that already broke the
    grammar (an agent that ignored the mask) is offered EOS only.

    ## Version History

    * v0: initial version.
    """

    name = "digits"
    tabular_segments = None
    answer_noun = "number"

    def __init__(
        self,
        max_digits: int = 3,
        train_digits: int = 2,
        operators: str = "+",
        reverse: bool = False,
        grammar_mask: bool = True,
    ) -> None:
        for key, value in (("max_digits", max_digits), ("train_digits", train_digits)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{key}={value!r} must be an integer")
        if not 2 <= max_digits <= _MAX_DIGITS_LIMIT:
            raise ValueError(f"max_digits={max_digits!r} must be in [2, {_MAX_DIGITS_LIMIT}] (the held-out "
                             "split needs operands longer than the training ones)")
        if not 1 <= train_digits < max_digits:
            raise ValueError(f"train_digits={train_digits!r} must be in [1, max_digits - 1] = "
                             f"[1, {max_digits - 1}], so the held-out split has longer operands")
        if not isinstance(operators, str) or not operators or set(operators) - set(OPERATORS):
            raise ValueError(f"operators={operators!r} must be a non-empty string of characters from "
                             f"{OPERATORS!r}")
        for key, flag in (("reverse", reverse), ("grammar_mask", grammar_mask)):
            if not isinstance(flag, bool):
                raise ValueError(f"{key}={flag!r} must be a bool")
        self.max_digits = d = int(max_digits)
        self.train_digits = int(train_digits)
        self.operators = "".join(op for op in OPERATORS if op in operators)
        self._grammar_mask = grammar_mask
        #: Whether answers are written least significant digit first (the sign still leads).
        self.reverse = reverse
        self.signed = "-" in self.operators
        self.vocab = (*_DIGITS, *(("-",) if self.signed else ()), _EOS)
        self.eos_id = len(self.vocab) - 1
        self.minus_id = 10 if self.signed else None
        self._context_vocab = ("<pad>", *_DIGITS, *self.operators, "=")
        self._context_ids = {tok: i for i, tok in enumerate(self._context_vocab)}
        biggest = 10**d - 1
        largest = {"+": 2 * biggest, "-": biggest, "*": biggest * biggest}
        #: The most digits a correct answer has (the mask allows no more).
        self.answer_digits = max(len(str(largest[op])) for op in self.operators)
        self.max_length = self.answer_digits + int(self.signed) + 1
        # Operand-length pairs of each split: (digits of a, digits of b).
        pairs = [(i, j) for i in range(1, d + 1) for j in range(1, d + 1)]
        self._length_pairs = {
            "train": [p for p in pairs if max(p) <= self.train_digits],
            "test": [p for p in pairs if max(p) > self.train_digits],
        }

    # -- prompts ---------------------------------------------------------------------------------
    def sample_prompt(self, rng: np.random.Generator, split: str) -> DigitsPrompt:
        check_split(split)
        pairs = self._length_pairs[split]
        la, lb = pairs[int(rng.integers(len(pairs)))]
        op = self.operators[int(rng.integers(len(self.operators)))]
        return DigitsPrompt(_draw_operand(rng, la), op, _draw_operand(rng, lb))

    def validate_prompt(self, prompt: object) -> DigitsPrompt:
        """A :class:`DigitsPrompt` or an ``(a, op, b)`` triple, checked against this task's settings."""
        if isinstance(prompt, DigitsPrompt):
            a, op, b = prompt.a, prompt.op, prompt.b
        elif isinstance(prompt, (tuple, list)) and len(prompt) == 3:
            a, op, b = prompt
        else:
            raise ValueError(f"prompt {prompt!r:.80} must be a DigitsPrompt or an (a, op, b) triple, "
                             "e.g. (12, '+', 7)")
        if not isinstance(op, str) or len(op) != 1 or op not in self.operators:
            raise ValueError(f"prompt operator {op!r} is not one of this task's operators "
                             f"{self.operators!r}")
        for name, value in (("a", a), ("b", b)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"prompt operand {name}={value!r} must be an integer")
            if not 0 <= value < 10**self.max_digits:
                raise ValueError(f"prompt operand {name}={value!r} must be a non-negative integer of at "
                                 f"most max_digits={self.max_digits} digits")
        return DigitsPrompt(int(a), op, int(b))

    def split_of(self, prompt: DigitsPrompt) -> str:
        """``"test"`` when an operand has more than ``train_digits`` digits, else ``"train"``."""
        longest = max(len(str(prompt.a)), len(str(prompt.b)))
        return "test" if longest > self.train_digits else "train"

    def render_prompt(self, prompt: DigitsPrompt) -> str:
        return f"{prompt.a} {prompt.op} {prompt.b} ="

    # -- observation ----------------------------------------------------------------------------
    @property
    def prompt_layout(self) -> dict[str, slice]:
        """``"a"`` and ``"b"``: per digit place (units first), a one-hot over (none, 0..9); ``"op"``:
        a one-hot over the task's operators."""
        w = 11 * self.max_digits
        return {"a": slice(0, w), "op": slice(w, w + len(self.operators)),
                "b": slice(w + len(self.operators), 2 * w + len(self.operators))}

    def encode_prompt(self, prompt: DigitsPrompt) -> np.ndarray:
        # Digits aligned by place value (units in the first block), so the same place is the same
        # feature whatever the operand's length: what a network needs to carry from one place to the next.
        layout = self.prompt_layout
        out = np.zeros(self.prompt_dim, dtype=np.float32)
        for key, value in (("a", prompt.a), ("b", prompt.b)):
            start = layout[key].start
            text = str(value)[::-1]
            for place in range(self.max_digits):
                cls = 1 + int(text[place]) if place < len(text) else 0
                out[start + 11 * place + cls] = 1.0
        out[layout["op"].start + self.operators.index(prompt.op)] = 1.0
        return out

    # -- the token observation -------------------------------------------------------------------
    def context_tokens(self) -> ContextTokens:
        """``<pad>``, the digits, the task's operators and ``=``; a prompt reads ``1 2 + 7 =`` (left-padded
        to ``2 * max_digits + 2`` positions), as a language model's tokenizer would split it."""
        return ContextTokens(self._context_vocab, 2 * self.max_digits + 2)

    def encode_context(self, prompt: DigitsPrompt) -> np.ndarray:
        row = [self._context_ids[ch] for ch in f"{prompt.a}{prompt.op}{prompt.b}="]
        out = np.zeros(2 * self.max_digits + 2, dtype=np.int64)
        out[len(out) - len(row):] = row
        return out

    # -- text: the text env and the language-model bridges ----------------------------------------
    def prompt_text(self, prompt: DigitsPrompt, instruction: str) -> str:
        question = f"What is {prompt.a} {prompt.op} {prompt.b}? Write the exact result as an integer."
        return f"{question}\n{instruction}"

    def parse_answer(self, prompt: DigitsPrompt, text: str) -> list[int] | None:
        """The token ids of a canonical number (surrounding whitespace stripped), else None."""
        value, _ = self.read(text.strip())
        return None if value is None else [self.vocab.index(ch) for ch in self.write(value)]

    def score_text(self, prompt: DigitsPrompt, text: str, weights: RewardWeights) -> Verdict:
        """The verdict :meth:`score` gives the same number written as tokens (whitespace around it is
        stripped; inside it, it is a character the verifier refuses), with the reason when it is none."""
        answer = text.strip()
        value, reason = self.read(answer)
        return self.verdict(prompt, answer, value, reason, weights)

    def keywords(self) -> dict[str, Any]:
        """The constructor's arguments this task was built with (a row for verl or ``verifiers`` carries
        them, so ``reverse=True`` is scored reversed there too)."""
        return {"max_digits": self.max_digits, "train_digits": self.train_digits, "operators": self.operators,
                "reverse": self.reverse, "grammar_mask": self._grammar_mask}

    def prompt_record(self, prompt: DigitsPrompt) -> dict[str, Any]:
        return {"a": prompt.a, "op": prompt.op, "b": prompt.b}

    def prompt_from_record(self, record: dict[str, Any]) -> DigitsPrompt:
        if not isinstance(record, dict) or not {"a", "op", "b"} <= set(record):
            raise ValueError(f"record {record!r:.80} must be a dict with keys 'a', 'op' and 'b'")
        return self.validate_prompt((record["a"], record["op"], record["b"]))

    # -- answers --------------------------------------------------------------------------------
    def score(
        self,
        prompt: DigitsPrompt,
        token_ids: Sequence[int],
        weights: RewardWeights,
        *,
        truncated: bool = False,
    ) -> Verdict:
        """Well-formed: a canonical number (:func:`read_number`) ended by EOS. Correct: well-formed and
        equal to ``a op b``. The reward is ``weights``' sum of the two parts."""
        text = self.decode(token_ids, prompt)
        if truncated:
            return truncated_verdict(self.max_length, text)
        value, reason = self.read(text)
        return self.verdict(prompt, text, value, reason, weights)

    def read(self, written: str) -> tuple[int | None, str | None]:
        """:func:`read_number` of an answer as written. With ``reverse`` its characters are checked as
        written first, so a misplaced sign (``"5-"``) is refused rather than read back to front as
        ``"-5"``, and a reason names a character where the answer has it."""
        if self.reverse:
            fault = _character_fault(written)
            if fault is not None:
                return None, fault
        return read_number(self.as_number(written), self.answer_digits)

    def as_number(self, written: str) -> str:
        """An answer as written, in the usual digit order: with ``reverse`` the digits after an optional
        leading sign are read back to front (``"-01"`` is ``"-10"``); otherwise ``written`` itself."""
        if not self.reverse:
            return written
        sign = "-" if written.startswith("-") else ""
        return sign + written[len(sign):][::-1]

    def write(self, number: int) -> str:
        """``number`` as this task writes an answer (the inverse of :meth:`as_number`)."""
        return self.as_number(str(number))

    def verdict(self, prompt: DigitsPrompt, text: str, value: int | None, reason: str | None,
                weights: RewardWeights) -> Verdict:
        """The verdict on an answer already read as ``value`` (None, with ``reason``, when it is not a
        number): shared by the token answer and the text completion, so both pay alike."""
        well_formed = value is not None
        correct = well_formed and value == prompt.result
        if well_formed and not correct:
            reason = f"{value} is not {prompt.a} {prompt.op} {prompt.b} = {prompt.result}"
        parts = weights.parts(correct, well_formed)
        return Verdict(
            reward=float(sum(parts.values())),
            correct=correct,
            well_formed=well_formed,
            value=None if value is None else Fraction(value),
            reason=reason,
            expression=text,
            parts=parts,
        )

    def solution(self, prompt: DigitsPrompt) -> tuple[int, ...]:
        """The correct answer's token ids, EOS included (a cold start imitates these)."""
        return (*(self.vocab.index(ch) for ch in self.write(prompt.result)), self.eos_id)

    # -- masks ----------------------------------------------------------------------------------
    @property
    def grammar_masked(self) -> bool:
        return self._grammar_mask

    def action_mask(self, prompt: object, prefix: Sequence[int]) -> np.ndarray:
        """(V,) bool: the tokens that keep ``prefix`` a prefix of a canonical number of at most
        :attr:`answer_digits` digits, as this task writes it (with ``reverse``, no trailing zero instead
        of no leading zero). A prefix that already broke the grammar (an agent that ignored the mask) is
        offered EOS only, as Countdown does: the answer is lost, so a legal token ends it. All True
        without ``grammar_mask``."""
        mask = np.ones(len(self.vocab), dtype=bool)
        if not self._grammar_mask:
            return mask
        state = self._prefix_state(prefix)
        mask[:] = False
        if state is None:
            mask[self.eos_id] = True
            return mask
        sign, digits, first, last = state
        if digits == 0 and not sign and self.minus_id is not None:
            mask[self.minus_id] = True
        if self.reverse:
            # The last digit written is the most significant: not 0, unless the number is "0" itself.
            mask[self.eos_id] = digits > 0 and (last != 0 or (digits == 1 and not sign))
            if digits < self.answer_digits:
                mask[0 if digits + 1 < self.answer_digits else 1:10] = True  # a 0 last could never end
            return mask
        mask[self.eos_id] = digits > 0
        if digits == 0:
            mask[0 if not sign else 1:10] = True  # "0" only alone and unsigned
        elif first != 0 and digits < self.answer_digits:
            mask[:10] = True
        return mask

    def _prefix_state(self, prefix: Sequence[int]) -> tuple[bool, int, int, int] | None:
        """(signed, digits so far, first digit, last digit; -1 when none) of a prefix that can still
        become a canonical answer under the mask's rules, else None."""
        sign, digits, first, last = False, 0, -1, -1
        for pos, t in enumerate(prefix):
            t = int(t)
            if t == self.minus_id and pos == 0:
                sign = True
                continue
            if not 0 <= t <= 9 or digits >= self.answer_digits:
                return None
            if self.reverse:
                if t == 0 and digits + 1 == self.answer_digits:
                    return None  # a trailing zero in the last place
            elif first == 0 or (t == 0 and digits == 0 and sign):
                return None  # a leading zero, or "-0"
            first = t if digits == 0 else first
            last = t
            digits += 1
        return sign, digits, first, last


def _draw_operand(rng: np.random.Generator, length: int) -> int:
    """A uniform number of exactly ``length`` digits (0 counts as a 1-digit number)."""
    low = 0 if length == 1 else 10 ** (length - 1)
    return int(rng.integers(low, 10**length))
