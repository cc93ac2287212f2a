"""The batch-scoring protocol of the native vector env, and its default: score every row with the task's
own ``score``.

A native vector env (:class:`rlvr_env.vector.TokenVectorEnv`) holds ``num_envs`` answers at once. What it
needs from a task to do so is one object, a :class:`BatchScorer` (``task.batch_scorer(num_rows, weights)``):

* :meth:`~BatchScorer.set_prompts` starts fresh answers on some rows for a batch of prompts;
* :meth:`~BatchScorer.feed` appends one token to each active row;
* :meth:`~BatchScorer.finish` scores the rows whose episodes end, as a
  :class:`~rlvr_env.rewards.BatchVerdict`;
* :meth:`~BatchScorer.masks` gives every row's grammar mask;
* :attr:`~BatchScorer.tokens`, :attr:`~BatchScorer.pos` and :attr:`~BatchScorer.prompts` hold each row's
  answer so far, its length and its prompt (the columns of a :data:`PromptBatch`, which the env copies
  into ``info``), and :meth:`~BatchScorer.prompt` gives one row's prompt as the task's own value.

Prompts travel as a :data:`PromptBatch`, named arrays with one row per prompt, drawn and built by the task
(``Task.sample_batch``, ``Task.prompt_batch``), so a batch goes from the task to the env without one
object per prompt. :class:`TaskScorer`, the default, holds prompts as the task's own values in one object
column ``"prompt"`` and scores finished rows with one ``task.score_batch`` call, so the vector env pays
exactly what ``Task.score`` pays in the single env. A family with an array verifier offers a faster scorer
that agrees with ``score`` exactly (the arithmetic-expression and Countdown families do).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from fractions import Fraction
from numbers import Rational
from typing import Any, Protocol

import numpy as np

from rlvr_env.rewards import BatchVerdict, RewardWeights, Verdict

__all__ = ["BatchScorer", "PromptBatch", "TaskScorer", "batch_concat", "batch_length", "batch_take",
           "batch_verdict", "object_column"]

#: A batch of prompts: named columns (arrays) with one row per prompt, e.g. ``{"prompt": <object
#: array>}`` (the default) or ``{"prompt_numbers": (k, N), "prompt_target": (k,)}`` (the arithmetic
#: families). Its columns are what a vector env's ``info`` carries for the prompts of a step.
PromptBatch = dict[str, np.ndarray]

_INT64 = 2**63 - 1


def object_column(values: Sequence[Any]) -> np.ndarray:
    """A (k,) object array of ``values`` (never a 2-D array of their items, as ``np.array`` might build)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def batch_length(batch: PromptBatch) -> int:
    """How many prompts ``batch`` holds (the length of its columns)."""
    return len(next(iter(batch.values())))


def batch_take(batch: PromptBatch, rows: np.ndarray | slice) -> PromptBatch:
    """The prompts of ``batch`` at ``rows`` (an index array or a slice), column by column."""
    if isinstance(rows, slice):
        return {name: col[rows] for name, col in batch.items()}
    return {name: col.take(rows, axis=0) for name, col in batch.items()}


def batch_concat(first: PromptBatch, second: PromptBatch) -> PromptBatch:
    """``first``'s prompts, then ``second``'s."""
    return {name: np.concatenate([col, second[name]]) for name, col in first.items()}


class BatchScorer(ABC):
    """Answers of ``num_rows`` rows held as arrays, fed one token column at a time, scored as they end
    (the module docstring has the protocol).

    An implementation keeps :attr:`tokens` (B, max_length) int64, :attr:`pos` (B,) int64 (tokens so far;
    entries of ``tokens`` past ``pos`` are stale) and :attr:`prompts` (its prompt columns, B rows each)
    as arrays that it updates in place, so the env reads them without a call.
    """

    tokens: np.ndarray
    pos: np.ndarray
    prompts: PromptBatch

    @abstractmethod
    def set_prompts(self, rows: np.ndarray, batch: PromptBatch) -> None:
        """Start fresh answers on ``rows`` (k,) for the k prompts of ``batch``."""

    @abstractmethod
    def feed(self, tokens: np.ndarray, active: np.ndarray, all_active: bool) -> None:
        """Append ``tokens`` (B,) to the rows where ``active`` (B,) is True (``all_active``: it is True
        everywhere, which lets an implementation skip the masking)."""

    @abstractmethod
    def finish(self, rows: np.ndarray, truncated: np.ndarray) -> BatchVerdict:
        """Score the answers on ``rows`` (k,) as they stand; ``truncated`` (k,) marks rows cut off at
        ``max_length`` without EOS (they are paid nothing, as ``Task.score`` pays them)."""

    @abstractmethod
    def masks(self) -> np.ndarray:
        """(B, V) bool: each row's grammar mask for its answer so far."""

    @abstractmethod
    def prompt(self, row: int) -> Any:
        """Row ``row``'s prompt as the task's own value (what the single env's ``info["prompt"]`` holds)."""


class _Scores(Protocol):
    """What :class:`TaskScorer` reads of a task (a :class:`rlvr_env.Task` has it all)."""

    vocab: tuple[str, ...]
    max_length: int

    def score_batch(self, prompts: Sequence[Any], answers: Sequence[Sequence[int]], weights: RewardWeights,
                    truncated: Sequence[bool]) -> list[Verdict]: ...

    def action_masks_batch(self, prompts: Sequence[Any], tokens: np.ndarray,
                           lengths: np.ndarray) -> np.ndarray: ...


class TaskScorer(BatchScorer):
    """The default :class:`BatchScorer`: tokens recorded per row, finished rows scored with one
    ``task.score_batch`` call, masks from ``task.action_masks_batch``; prompts are the task's own values
    in the object column ``"prompt"``."""

    def __init__(self, task: _Scores, num_rows: int, weights: RewardWeights) -> None:
        self.task = task
        self.weights = weights
        self.num_rows = num_rows
        self.max_length = max_length = int(task.max_length)
        # one spare column: a row that is not active writes its token there (one scatter, no branch)
        self._tok = np.zeros((num_rows, max_length + 1), dtype=np.int64)
        self._tok_base = np.arange(num_rows) * (max_length + 1)
        self.tokens = self._tok[:, :max_length]  # (B, max_length) view
        self.pos = np.zeros(num_rows, dtype=np.int64)
        self.prompts = {"prompt": np.full(num_rows, None, dtype=object)}
        #: the verdicts of the rows scored by the last :meth:`finish`, in its row order
        self.last_verdicts: list[Verdict] = []

    def set_prompts(self, rows: np.ndarray, batch: PromptBatch) -> None:
        self.prompts["prompt"][rows] = batch["prompt"]
        self.pos[rows] = 0

    def feed(self, tokens: np.ndarray, active: np.ndarray, all_active: bool = False) -> None:
        self._tok.ravel()[self._tok_base + np.where(active, self.pos, self.max_length)] = tokens
        self.pos += active

    def finish(self, rows: np.ndarray, truncated: np.ndarray) -> BatchVerdict:
        """Score the answers on ``rows`` (k,) with one ``task.score_batch`` call."""
        column = self.prompts["prompt"]
        prompts = [column[r] for r in rows.tolist()]
        answers = [self._tok[r, : self.pos[r]].tolist() for r in rows.tolist()]
        verdicts = self.task.score_batch(prompts, answers, self.weights, [bool(t) for t in truncated])
        if len(verdicts) != len(rows):
            raise ValueError(f"{type(self.task).__name__}.score_batch returned {len(verdicts)} verdicts for "
                             f"{len(rows)} answers")
        self.last_verdicts = list(verdicts)
        return batch_verdict(verdicts)

    def masks(self) -> np.ndarray:
        return self.task.action_masks_batch(list(self.prompts["prompt"]), self.tokens, self.pos)

    def prompt(self, row: int) -> Any:
        return self.prompts["prompt"][row]


def batch_verdict(verdicts: Sequence[Verdict]) -> BatchVerdict:
    """The array form of ``verdicts``: a part one verdict lacks is 0 there; a value that is not a rational
    number (or is None) has no value (0 / 0); one beyond int64 is exact in ``big_values``."""
    k = len(verdicts)
    names: dict[str, None] = {}
    for v in verdicts:
        names.update(dict.fromkeys(v.parts))
    parts = {name: np.array([v.parts.get(name, 0.0) for v in verdicts], dtype=np.float64) for name in names}
    num = np.zeros(k, dtype=np.int64)
    den = np.zeros(k, dtype=np.int64)
    has = np.zeros(k, dtype=bool)
    big: dict[int, Fraction] = {}
    for i, v in enumerate(verdicts):
        if isinstance(v.value, Rational) and not isinstance(v.value, bool):
            value = Fraction(v.value)
            has[i] = True
            if abs(value.numerator) <= _INT64 and value.denominator <= _INT64:
                num[i], den[i] = value.numerator, value.denominator
            else:
                big[i] = value
    return BatchVerdict(
        reward=np.array([v.reward for v in verdicts], dtype=np.float64),
        correct=np.array([v.correct for v in verdicts], dtype=bool),
        well_formed=np.array([v.well_formed for v in verdicts], dtype=bool),
        has_value=has, value_num=num, value_den=den, parts=parts,
        fallback=np.zeros(k, dtype=bool), big_values=big,
    )
