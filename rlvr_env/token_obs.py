"""The token-context observation (``observation="tokens"``): the prompt and the answer so far as token ids.

What a language model reads: the prompt written out as tokens (numbers and target as decimal digits, as a
tokenizer would split them) followed by the answer emitted so far, in one fixed-length row of token ids::

    <pad> ... <pad> <bos> n0 7 n1 9 n2 1 = 7 0 <ans> | n0 * ( n1 ... <pad> <pad>
    `------------- prompt: P positions, left-padded ------------'   `-- answer: max_length --'

* **Context vocabulary** (:attr:`TokenContext.vocab`): ``<pad>`` (id 0), ``<bos>``, ``=`` (the target
  follows), ``<ans>`` (the answer follows), ``,`` (separates numbers when the task has no slot tokens),
  ``-`` (a negative target's sign), the digits ``0``-``9``, then the task's own answer tokens in action
  order: action ``a`` is context id ``answer_offset + a``. A task whose vocabulary names prompt slots
  (Countdown's ``n0``, ``n1``, ...) labels each prompt number with the same id the answer uses for it,
  so "``n1`` in the answer" and "``n1 9`` in the prompt" are one token.
* **Padding and length**: the prompt is left-padded to a fixed width P (the longest prompt of the task's
  ranges), so the answer always starts at position P, whatever the prompt; the answer segment holds
  ``<pad>`` (0) where no token was emitted yet. The answer length is the number of non-zero ids in
  ``obs[P:]``, the prompt length the number of non-zero ids in ``obs[:P]``.
* **Space**: :class:`TokenContextSpace`, a ``Box(0, len(vocab) - 1, (P + max_length,), int64)`` that
  also carries the layout (``prompt_width``, ``answer_offset``, ``vocab``), so a policy built from the
  observation space alone (a transformer, SB3's features extractor) can place and append tokens.

The single env (:class:`rlvr_env.envs.TokenEnv`) and the native vector env
(:class:`rlvr_env.vector.TokenVectorEnv`) build their rows with the one :class:`TokenContext`, so they agree
exactly (a lockstep test checks it). The default observations do not change: no new env version.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from gymnasium import spaces

from rlvr_env.tasks.base import Prompt, Task

__all__ = ["OBSERVATION_KINDS", "SPECIAL_TOKENS", "TokenContext", "TokenContextSpace", "check_observation",
           "split_observation"]

#: What a token env can observe: its task's feature vector plus a one-hot answer, or the token context.
OBSERVATION_KINDS = ("features", "tokens")
#: The context vocabulary's fixed head: specials, then digits (ids 6-15).
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "=", "<ans>", ",", "-")
PAD, BOS, TARGET, ANSWER, COMMA, MINUS = range(len(SPECIAL_TOKENS))
_DIGIT0 = len(SPECIAL_TOKENS)
_SLOT = re.compile(r"n(\d+)\Z")


def check_observation(observation: object) -> str:
    """``observation`` as one of :data:`OBSERVATION_KINDS`, or ``ValueError`` naming the value."""
    if observation not in OBSERVATION_KINDS:
        raise ValueError(f"observation={observation!r} is not one of {OBSERVATION_KINDS}")
    return str(observation)


def split_observation(observation: str, task_kinds: tuple[str, ...] = ()) -> tuple[str, str]:
    """A Countdown-style ``observation`` kwarg as (the task's prompt features, the env's observation
    kind): ``"tokens"`` reads no task features (the task keeps its plain ``"bits"``), any other value
    is the task's feature set with the ``"features"`` observation. With ``task_kinds`` (the task's
    feature sets), a value that is neither one of them nor ``"tokens"`` is a ``ValueError`` listing all."""
    valid = (*task_kinds, "tokens")
    if task_kinds and (not isinstance(observation, str) or observation not in valid):
        raise ValueError(f"observation={observation!r} is not one of {valid}")
    return ("bits", "tokens") if observation == "tokens" else (observation, "features")


class TokenContextSpace(spaces.Box):
    """``Box(0, len(vocab) - 1, (prompt_width + answer_width,), int64)`` with the context's layout.

    ``prompt_width`` P: the answer starts at position P; ``answer_offset``: action ``a`` is context id
    ``answer_offset + a``; ``vocab``: the context token strings (id = index)."""

    def __init__(self, vocab: tuple[str, ...], prompt_width: int, answer_width: int,
                 answer_offset: int, seed: Any = None) -> None:
        super().__init__(0, len(vocab) - 1, shape=(prompt_width + answer_width,), dtype=np.int64, seed=seed)
        self.vocab = tuple(vocab)
        self.prompt_width = int(prompt_width)
        self.answer_width = int(answer_width)
        self.answer_offset = int(answer_offset)

    def __repr__(self) -> str:
        return (f"TokenContextSpace(vocab={len(self.vocab)}, prompt_width={self.prompt_width}, "
                f"answer_width={self.answer_width})")


def _digits_needed(value: int) -> int:
    return len(str(abs(int(value))))


class TokenContext:
    """Builds token-context rows for one :class:`~rlvr_env.tasks.base.Task` (see the module docstring).

    Prompts are read as numbers and a target; their digit widths come from the task's
    ``number_range`` / ``target_range`` when it has them (Countdown), else from its finite prompt list
    (Arithmetic).
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        n_actions = len(task.vocab)
        self.answer_offset = _DIGIT0 + 10
        self.vocab: tuple[str, ...] = (*SPECIAL_TOKENS, *"0123456789", *task.vocab)
        if hasattr(task, "number_range") and hasattr(task, "target_range"):
            n_numbers = int(getattr(task, "n_numbers"))
            lo, hi = task.number_range  # type: ignore[attr-defined]
            tlo, thi = task.target_range  # type: ignore[attr-defined]
            number_digits = max(_digits_needed(lo), _digits_needed(hi))
            target_digits = max(_digits_needed(tlo), _digits_needed(thi))
            signed = tlo < 0
        else:
            prompts = [*(task.prompts("train") or ()), *(task.prompts("test") or ())]
            if not prompts:
                raise ValueError(
                    f"task {type(task).__name__} has neither number/target ranges nor a finite prompt "
                    "list, so the token context cannot size its prompt"
                )
            n_numbers = len(prompts[0].numbers)
            number_digits = max(_digits_needed(x) for p in prompts for x in p.numbers)
            target_digits = max(_digits_needed(p.target) for p in prompts)
            signed = any(p.target < 0 for p in prompts)
        self.n_numbers = n_numbers
        self.number_digits, self.target_digits, self.signed = number_digits, target_digits, signed
        # Slot k's label: the answer's own "n<k>" token when the vocabulary has one, else a comma.
        slot_ids = {int(m.group(1)): i for i, tok in enumerate(task.vocab) if (m := _SLOT.match(tok))}
        self.slot_labels = np.array(
            [self.answer_offset + slot_ids[k] if k in slot_ids else COMMA for k in range(n_numbers)],
            dtype=np.int64,
        )
        # <bos>, per number (label, digits), "=", [sign], target digits, <ans>.
        self.prompt_width = 1 + n_numbers * (1 + number_digits) + 1 + int(signed) + target_digits + 1
        self.answer_width = int(task.max_length)
        self.space = TokenContextSpace(self.vocab, self.prompt_width, self.answer_width, self.answer_offset)
        self.n_actions = n_actions

    @property
    def length(self) -> int:
        """Context positions: prompt width plus the longest answer."""
        return self.prompt_width + self.answer_width

    @property
    def layout(self) -> dict[str, slice]:
        """Named slices of a row: ``"prompt"`` (left-padded) and ``"answer"`` (right-padded)."""
        return {"prompt": slice(0, self.prompt_width), "answer": slice(self.prompt_width, self.length)}

    def encode_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, P) int64 prompt segments for prompts given as numbers (k, N) and targets (k,)."""
        numbers = np.asarray(numbers, dtype=np.int64).reshape(-1, self.n_numbers)
        targets = np.asarray(targets, dtype=np.int64).reshape(-1)
        k = numbers.shape[0]
        hole = -1  # a digit position a shorter number does not use; squeezed out below
        pieces = [np.full((k, 1), BOS)]
        for slot in range(self.n_numbers):
            label = np.full((k, 1), self.slot_labels[slot])
            pieces += [label, self._digits(numbers[:, slot], self.number_digits)]
        pieces.append(np.full((k, 1), TARGET))
        if self.signed:
            pieces.append(np.where(targets < 0, MINUS, hole)[:, None])
        pieces += [self._digits(targets, self.target_digits), np.full((k, 1), ANSWER)]
        row = np.concatenate(pieces, axis=1)  # (k, P) with holes
        # Left-pad: a stable sort on "is a real token" moves the holes to the front, keeping token order.
        order = np.argsort(row != hole, axis=1, kind="stable")
        row = np.take_along_axis(row, order, axis=1)
        row[row == hole] = PAD
        return row

    @staticmethod
    def _digits(values: np.ndarray, width: int) -> np.ndarray:
        """(k, width) context ids of |values| in decimal, most significant first, -1 for leading zeros."""
        v = np.abs(values)[:, None]
        powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)  # (width,)
        digits = _DIGIT0 + (v // powers) % 10
        leading = (v < powers) & (np.arange(width) < width - 1)  # "0" itself keeps its last digit
        return np.where(leading, -1, digits)

    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        """(P,) int64 prompt segment of one prompt."""
        return self.encode_arrays(np.array([prompt.numbers]), np.array([prompt.target]))[0]

    def decode(self, row: np.ndarray) -> str:
        """The row as text (padding dropped): for reading and debugging."""
        return " ".join(self.vocab[int(t)] for t in np.asarray(row).reshape(-1) if t != PAD)
