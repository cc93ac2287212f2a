"""The native vector env's generic scorer: answers kept as token arrays, scored by the task's own verifier.

:class:`TaskScorer` is what :class:`rlvr_env.vector.TokenVectorEnv` runs for a task that offers no array
fast path (:meth:`rlvr_env.tasks.base.Task.batch_arrays` is None: a task of its own, or a subclass that
overrides ``score``). It records each row's tokens and, when rows finish, calls
:meth:`~rlvr_env.tasks.base.Task.score_batch` once for them, so the vector env pays exactly what
``Task.score`` pays in the single env.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from numbers import Rational
from typing import Any

import numpy as np

from rlvr_env.rewards import BatchVerdict
from rlvr_env.tasks.base import Task
from rlvr_env.rewards import RewardWeights, Verdict

__all__ = ["TaskScorer", "batch_verdict"]

_INT64 = 2**63 - 1


class TaskScorer:
    """Tokens and prompts of ``num_rows`` answers; :meth:`finish` scores rows through the task.

    The same face as :class:`rlvr_env.tasks.expression.batch_verify.StackMachine` where the vector env reads it
    (``tokens``, ``pos``, ``feed``, ``finish``), with prompts held as the task's own values.
    """

    def __init__(self, task: Task, num_rows: int, max_length: int, weights: RewardWeights) -> None:
        self.task = task
        self.weights = weights
        self.num_rows = num_rows
        self.max_length = max_length
        # one spare column: a row that is not active writes its token there (one scatter, no branch)
        self._tok = np.zeros((num_rows, max_length + 1), dtype=np.int64)
        self._tok_base = np.arange(num_rows) * (max_length + 1)
        self.pos = np.zeros(num_rows, dtype=np.int64)
        self.prompts = np.full(num_rows, None, dtype=object)
        #: the verdicts of the rows scored by the last :meth:`finish`, in its row order
        self.last_verdicts: list[Verdict] = []

    @property
    def tokens(self) -> np.ndarray:
        """(B, max_length) each row's tokens so far (entries past ``pos`` are stale)."""
        return self._tok[:, : self.max_length]

    def set_prompts(self, rows: np.ndarray, prompts: Sequence[Any]) -> None:
        """Start fresh answers on ``rows`` for ``prompts`` (one per row)."""
        for r, p in zip(rows.tolist(), prompts):
            self.prompts[r] = p
        self.pos[rows] = 0

    def feed(self, tokens: np.ndarray, active: np.ndarray) -> None:
        """Append ``tokens`` (B,) to the rows where ``active`` (B,) is True."""
        self._tok.ravel()[self._tok_base + np.where(active, self.pos, self.max_length)] = tokens
        self.pos += active

    def finish(self, rows: np.ndarray, truncated: np.ndarray) -> BatchVerdict:
        """Score the answers on ``rows`` (k,) as they stand with one ``task.score_batch`` call."""
        prompts = [self.prompts[r] for r in rows.tolist()]
        answers = [self._tok[r, : self.pos[r]].tolist() for r in rows.tolist()]
        verdicts = self.task.score_batch(prompts, answers, self.weights, [bool(t) for t in truncated])
        if len(verdicts) != len(rows):
            raise ValueError(f"{type(self.task).__name__}.score_batch returned {len(verdicts)} verdicts for "
                             f"{len(rows)} answers")
        self.last_verdicts = list(verdicts)
        return batch_verdict(verdicts)


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
