"""The arithmetic-expression family's batch scorer (:class:`ExpressionScorer`): the vector env's answers
verified incrementally by the array verifier, one token column per step.

It implements :class:`rlvr_env.scoring.BatchScorer` for an
:class:`~rlvr_env.tasks.expression.task.ExpressionTask`
whose scoring is the package's own: a :class:`~rlvr_env.tasks.expression.machine.StackMachine` consumes
each step's tokens and scores the rows that end with array operations that agree exactly with
:func:`rlvr_env.verify` (so the vector env pays what the single env pays; a test checks it in lockstep).
Prompts are the columns ``prompt_numbers`` (B, N) and ``prompt_target`` (B,). Masks come from the task's
mask automaton when it has one (one state per row, moved by a table lookup per step), else from its
``action_masks_arrays``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvr_env.rewards import BatchVerdict, RewardWeights
from rlvr_env.scoring import BatchScorer, PromptBatch
from rlvr_env.tasks.expression.machine import StackMachine
from rlvr_env.tasks.expression.prompt import Prompt

__all__ = ["AutomatonMasks", "ExpressionScorer", "NUMBERS", "TARGETS"]

#: The prompt columns of the arithmetic families' batches.
NUMBERS, TARGETS = "prompt_numbers", "prompt_target"


class AutomatonMasks:
    """Grammar masks as a state table (an automaton with ``masks`` (S, V) and ``next`` (S, V)): one state
    per row, moved by one lookup per step. ``before`` is each row's state before its last token."""

    def __init__(self, automaton: Any, num_rows: int) -> None:
        self.automaton = automaton
        self.vocab = automaton.masks.shape[1]
        self._next = automaton.next.ravel()
        self.state = np.zeros(num_rows, dtype=np.int64)  # (B,)
        self.before = self.state

    def move(self, tokens: np.ndarray, active: np.ndarray, all_active: bool) -> None:
        before = self.before = self.state
        moved = self._next[before * self.vocab + tokens]
        self.state = moved if all_active else np.where(active, moved, before)

    def masks(self) -> np.ndarray:
        # take(axis=0): a row gather ~10x faster than fancy indexing (NumPy 2.x, 2-D tables)
        return self.automaton.masks.take(self.state, axis=0)  # type: ignore[no-any-return]


class ExpressionScorer(BatchScorer):
    """:class:`~rlvr_env.scoring.BatchScorer` of an expression task by the incremental array verifier."""

    def __init__(self, task: Any, num_rows: int, weights: RewardWeights, num_numbers: int) -> None:
        self.task = task
        self.machine = machine = StackMachine(task.token_table(), task.grammar,
                                              num_rows, task.max_length, weights, num_numbers=num_numbers)
        self.tokens, self.pos = machine.tokens, machine.pos
        self.prompts = {NUMBERS: machine.numbers, TARGETS: machine.targets}
        automaton = task.mask_automaton()
        self.automaton = None if automaton is None else AutomatonMasks(automaton, num_rows)

    def set_prompts(self, rows: np.ndarray, batch: PromptBatch) -> None:
        self.machine.set_prompts(rows, batch[NUMBERS], batch[TARGETS])
        if self.automaton is not None:
            self.automaton.state[rows] = 0

    def feed(self, tokens: np.ndarray, active: np.ndarray, all_active: bool = False) -> None:
        self.machine.feed(tokens, active)
        if self.automaton is not None:
            self.automaton.move(tokens, active, all_active)

    def finish(self, rows: np.ndarray, truncated: np.ndarray) -> BatchVerdict:
        return self.machine.finish(rows, truncated)

    def masks(self) -> np.ndarray:
        if self.automaton is not None:
            return self.automaton.masks()
        return self.task.action_masks_arrays(self.tokens, self.pos)

    def prompt(self, row: int) -> Prompt:
        return Prompt(tuple(int(x) for x in self.machine.numbers[row]), int(self.machine.targets[row]))
