"""The token-context observation (``observation="tokens"``): the prompt and the answer so far as token ids.

What a language model reads: the prompt written out as tokens (numbers and target as decimal digits, as a
tokenizer would split them) followed by the answer emitted so far, in one fixed-length row of token ids::

    <pad> ... <pad> <bos> n0 7 n1 9 n2 1 = 7 0 <ans> | n0 * ( n1 ... <pad> <pad>
    `------------- prompt: P positions, left-padded ------------'   `-- answer: max_length --'

The prompt side is the task's (:meth:`rlvr_env.Task.context_tokens`, :meth:`rlvr_env.Task.encode_context`);
for the arithmetic tasks (:class:`rlvr_env.tasks.expression.ExpressionTask`) it reads:

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

from typing import Any

import numpy as np
from gymnasium import spaces

from rlvr_env.tasks.base import Task

__all__ = ["OBSERVATION_KINDS", "PAD", "TokenContext", "TokenContextSpace", "check_observation"]

#: Context id 0 pads (every task's :class:`~rlvr_env.tasks.base.ContextTokens` vocabulary starts with
#: ``"<pad>"``): the prompt is left-padded with it and the answer holds it where no token was emitted.
PAD = 0

#: What a token env can observe: its task's feature vector plus a one-hot answer, or the token context.
OBSERVATION_KINDS = ("features", "tokens")


def check_observation(observation: object) -> str:
    """``observation`` as one of :data:`OBSERVATION_KINDS`, or ``ValueError`` naming the value."""
    if observation not in OBSERVATION_KINDS:
        raise ValueError(f"observation={observation!r} is not one of {OBSERVATION_KINDS}")
    return str(observation)


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


class TokenContext:
    """Builds token-context rows for one :class:`~rlvr_env.tasks.base.Task` (see the module docstring).

    The prompt side comes from the task's token-observation ability (:meth:`Task.context_tokens` and
    :meth:`Task.encode_context`); ``ValueError`` for a task that does not offer it.
    """

    def __init__(self, task: Task) -> None:
        spec = task.context_tokens()
        if spec is None:
            raise ValueError(f"task {type(task).__name__} offers no token observation (its context_tokens() "
                             "is None), which observation='tokens' and the policies that read the token "
                             "context (policy='transformer') need: implement context_tokens() and "
                             "encode_context() on the task (docs/add-a-task.md), or train a policy that "
                             "reads the features (policy='mlp', with the default observation='features')")
        self.task = task
        self.answer_offset = len(spec.vocab)
        self.vocab: tuple[str, ...] = (*spec.vocab, *task.vocab)
        self.prompt_width = spec.width
        self.answer_width = int(task.max_length)
        self.space = TokenContextSpace(self.vocab, self.prompt_width, self.answer_width, self.answer_offset)
        self.n_actions = len(task.vocab)

    @property
    def length(self) -> int:
        """Context positions: prompt width plus the longest answer."""
        return self.prompt_width + self.answer_width

    @property
    def layout(self) -> dict[str, slice]:
        """Named slices of a row: ``"prompt"`` (left-padded) and ``"answer"`` (right-padded)."""
        return {"prompt": slice(0, self.prompt_width), "answer": slice(self.prompt_width, self.length)}

    def encode_prompt(self, prompt: Any) -> np.ndarray:
        """(P,) int64 prompt segment of one prompt (the task's :meth:`~Task.encode_context`)."""
        row = np.asarray(self.task.encode_context(prompt), dtype=np.int64)
        if row.shape != (self.prompt_width,):
            raise ValueError(f"task {type(self.task).__name__}.encode_context gave shape {row.shape}, "
                             f"expected ({self.prompt_width},)")
        return row

    def decode(self, row: np.ndarray) -> str:
        """The row as text (padding dropped): for reading and debugging."""
        return " ".join(self.vocab[int(t)] for t in np.asarray(row).reshape(-1) if t != PAD)
