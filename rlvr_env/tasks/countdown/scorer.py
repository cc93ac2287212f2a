"""Countdown's batch scorer when the setting has a program table and a mask automaton (small N).

:class:`ProgramScorer` is the :class:`rlvr_env.scoring.BatchScorer` of such a setting: one table lookup per
step, answers inside the masks' language scored by their programs (:mod:`rlvr_env.tasks.countdown.programs`),
every other answer by :func:`rlvr_env.tasks.expression.batch_verify.batch_verify`; both agree exactly with
:func:`rlvr_env.verify`. Masks come from the automaton, whose state it moves with the tokens.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from rlvr_env.tasks.expression.batch_verify import batch_verify
from rlvr_env.tasks.expression.tokens import TokenTable
from rlvr_env.tasks.expression.machine import assemble_verdict
from rlvr_env.rewards import BatchVerdict
from rlvr_env.scoring import BatchScorer, PromptBatch
from rlvr_env.tasks.countdown.masks import DEAD, MaskAutomaton
from rlvr_env.tasks.countdown.programs import START, ProgramTable, cached_values, evaluate
from rlvr_env.tasks.expression.prompt import Prompt
from rlvr_env.tasks.expression.scorer import NUMBERS, TARGETS, AutomatonMasks
from rlvr_env.tasks.expression.verifier import MAX_NUMBER_DIGITS, MAX_TEXT_CHARS, Grammar
from rlvr_env.rewards import RewardWeights

__all__ = ["ProgramScorer"]


class ProgramScorer(BatchScorer):
    """The incremental verifier of a native vector Countdown env when the setting has a
    :class:`ProgramTable`: the same role (and attributes ``tokens``, ``pos``, ``numbers``, ``targets``)
    as :class:`rlvr_env.tasks.expression.batch_verify.StackMachine`, at one table lookup per step.

    :meth:`feed` records each row's token and moves its shape state; :meth:`finish` scores the ending
    rows: answers inside the masks' language by their programs (:func:`evaluate`), every other row by
    :func:`~rlvr_env.tasks.expression.batch_verify.batch_verify` on its tokens. Truncated rows get no
    reward and no value
    (``Task.score``'s rule).
    """

    def __init__(
        self, programs: ProgramTable, table: TokenTable, grammar: Grammar, num_rows: int, max_length: int,
        weights: RewardWeights, number_range: tuple[int, int] | None = None,
        automaton: MaskAutomaton | None = None,
    ) -> None:
        n = programs.n
        if n * MAX_NUMBER_DIGITS + max_length > MAX_TEXT_CHARS:
            raise ValueError(f"answers of {max_length} tokens over {n} numbers could exceed the text limit")
        self.programs, self.table, self.grammar, self.weights = programs, table, grammar, weights
        self.num_rows = b = num_rows
        self.max_length = max_length
        self._bound = programs.bound()
        self._largest = 0  # largest prompt number seen; above the bound, rows are checked one by one
        # Small settings score by one gather from every program's value on every operand tuple, while
        # every prompt number seen lies in ``number_range`` (the task validates prompts against it).
        self._values = None
        if number_range is not None:
            self._values = cached_values(programs, number_range, grammar.integer_division)
        self._range = number_range
        self._vocab = len(table.kinds)
        self._next = programs.next.ravel()
        self._tok = np.zeros((b, max_length + 1), dtype=np.int64)  # last column: writes of idle rows
        self.tokens = self._tok[:, :max_length]  # (B, L) view
        self._tok_flat = self._tok.ravel()
        self._tok_base = np.arange(b) * (max_length + 1)
        self.pos = np.zeros(b, dtype=np.int64)  # (B,)
        self.state = np.zeros(b, dtype=np.int64)  # (B,) shape state
        self.numbers = np.zeros((b, n), dtype=np.int64)  # (B, N)
        self._num_flat = self.numbers.reshape(-1)  # a view
        self.targets = np.zeros(b, dtype=np.int64)  # (B,)
        self.prompts = {NUMBERS: self.numbers, TARGETS: self.targets}
        #: the grammar masks' automaton (its dead state marks an answer that used a slot twice)
        self.automaton = None if automaton is None else AutomatonMasks(automaton, b)

    def set_prompts(self, rows: np.ndarray, batch: PromptBatch) -> None:
        """Start fresh answers on ``rows`` (k,) for prompts ``numbers`` (k, N), ``targets`` (k,)."""
        numbers, targets = batch[NUMBERS], batch[TARGETS]
        if self.automaton is not None:
            self.automaton.state[rows] = 0
        self.numbers[rows] = numbers
        self.targets[rows] = targets
        self.pos[rows] = 0
        self.state[rows] = START
        if len(rows):
            self._largest = max(self._largest, int(np.max(numbers)))
            if self._values is not None and self._range is not None and (
                    int(np.min(numbers)) < self._range[0] or self._largest > self._range[1]):
                self._values = None  # a number outside the table: evaluate programs from now on

    def feed(self, tokens: np.ndarray, active: np.ndarray, all_active: bool = False) -> None:
        """Append ``tokens`` (B,) to the rows where ``active`` (B,) is True (``all_active``: all are)."""
        if self.automaton is not None:
            self.automaton.move(tokens, active, all_active)
        if all_active:
            self._tok_flat[self._tok_base + self.pos] = tokens
            self.pos += 1
            self.state = self._next[self.state * self._vocab + tokens]
            return
        self._tok_flat[self._tok_base + np.where(active, self.pos, self.max_length)] = tokens
        self.pos += active
        self.state = np.where(active, self._next[self.state * self._vocab + tokens], self.state)

    def _run(self, rows: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Value ``num / den`` (0 / 0 where none) and ``err`` (k,) of the programs of accepting ``states``
        (k,) on ``rows`` (k,), by the value table when there is one."""
        # flat gathers (take) of each operand's slot id (= token id), then of its number
        positions = self.programs.operands.take(states, axis=0)  # (k, N)
        slots = self._tok_flat.take(self._tok_base[rows][:, None] + positions)  # (k, N)
        operands = self._num_flat.take(rows[:, None] * self.programs.n + slots)  # (k, N)
        if self._values is not None:  # 0 / 0 where there is no value already
            return self._values.lookup(states, operands)
        num, den, err = evaluate(self.programs, states, operands, self.grammar.integer_division)
        return np.where(err, 0, num), np.where(err, 0, den), err

    def finish(self, rows: np.ndarray, truncated: np.ndarray) -> BatchVerdict:
        """Score the answers on ``rows`` (k,); ``truncated`` (k,) marks rows cut off at the maximum
        length. An answer is inside the masks' language when its shape state accepts (every token
        allowed, slots renamed) and its slots are distinct (the mask automaton was not in its dead state
        before the last token)."""
        k = len(rows)
        if self.automaton is None:
            raise ValueError("ProgramScorer.finish needs the mask automaton (pass automaton=...)")
        distinct = self.automaton.before[rows] != DEAD
        states = self.state[rows]
        legal = self.programs.accept[states] & distinct
        fast = legal & ~truncated
        if self._largest > self._bound:
            fast &= self.numbers.take(rows, axis=0).max(axis=1) <= self._bound
        if fast.all():  # the usual case under masks: every row by its program, nothing to scatter
            num, den, err = self._run(rows, states)
            correct = (den == 1) & (num == self.targets[rows])
            return assemble_verdict(self.weights, correct, ~err, ~err, num, den, np.zeros(k, dtype=bool))
        correct = np.zeros(k, dtype=bool)
        well_formed = np.zeros(k, dtype=bool)
        value_num = np.zeros(k, dtype=np.int64)
        value_den = np.zeros(k, dtype=np.int64)
        fallback = np.zeros(k, dtype=bool)
        big: dict[int, Fraction] = {}
        if fast.any():
            r = rows[fast]
            num, den, err = self._run(r, states[fast])
            # inside the masks' language the number-use rule holds by construction
            well_formed[fast] = ~err
            value_num[fast] = num
            value_den[fast] = den
            correct[fast] = (den == 1) & (num == self.targets[r])  # den 1: a value (0 where err)
        has_value = well_formed.copy()
        slow = ~fast & ~truncated
        if slow.any():
            idx = np.flatnonzero(slow)
            r = rows[idx]
            # these rows are outside the masks' language or above the bound: the general path only
            verdict = batch_verify(self.tokens[r], self.numbers[r], self.targets[r], table=self.table,
                                   grammar=self.grammar, weights=self.weights, lengths=self.pos[r])
            correct[idx] = verdict.correct
            well_formed[idx] = verdict.well_formed
            has_value[idx] = verdict.has_value
            value_num[idx] = verdict.value_num
            value_den[idx] = verdict.value_den
            fallback[idx] = verdict.fallback
            big = {int(idx[j]): value for j, value in verdict.big_values.items()}
        out = assemble_verdict(self.weights, correct, well_formed, has_value, value_num, value_den, fallback)
        out.big_values.update(big)
        return out

    def masks(self) -> np.ndarray:
        if self.automaton is None:
            raise ValueError("ProgramScorer.masks needs the mask automaton (pass automaton=...)")
        return self.automaton.masks()

    def prompt(self, row: int) -> Prompt:
        return Prompt(tuple(int(x) for x in self.numbers[row]), int(self.targets[row]))
