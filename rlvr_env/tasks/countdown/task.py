"""Countdown-N: reach a target from N given numbers with ``+ - * /`` and parentheses.

Prompts are generated, not listed: N numbers are drawn from ``number_range`` and a random expression
tree over all of them is built with the seeded generator; its value is the target. So every prompt is
solvable by construction, under either number-use rule, and the generating expression is kept in the
prompt's ``meta`` as a known solution. Generation is vectorised (:meth:`CountdownTask.sample_arrays`
draws k prompts as arrays) so that the vector env can reset thousands of episodes per step.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from rlvr_env.tasks.expression.token_kinds import ADD, DIV, MUL, SUB
from rlvr_env.tasks.base import check_split
from rlvr_env.tasks.expression.prompt import Prompt, unpack_prompt
from rlvr_env.tasks.expression.task import ExpressionTask, _digits_needed, check_number_tokens
from rlvr_env.tasks.countdown.masks import MaskAutomaton, MaskRules, masks_of, prefix_states
from rlvr_env.tasks.countdown.programs import ProgramTable, cached_table
from rlvr_env.tasks.countdown.scorer import ProgramScorer
from rlvr_env.rewards import RewardWeights
from rlvr_env.scoring import BatchScorer
from rlvr_env.tasks.countdown.settings import CountdownSettings, settings_of
from rlvr_env.tasks.countdown.features import OBSERVATIONS, CountdownFeatures
from rlvr_env.tasks.countdown.draw import (
    ADDITIVE, ATOM, MAX_DRAW_TABLE, MULTIPLICATIVE, DrawRules, cached_draw_table, draw_picks, merge,
    raw_history, resolve_history,
)
from rlvr_env.tasks.countdown.split import (
    HELD_OUT_BUCKETS, held_out, held_out_one, multiset_hash, tuple_index,
)
from rlvr_env.tasks.expression.verifier import verify

__all__ = ["CountdownTask", "HELD_OUT_BUCKETS", "OBSERVATIONS", "multiset_hash"]

_OP_KIND = {"+": ADD, "-": SUB, "*": MUL, "/": DIV}
_ATOM, _ADDITIVE, _MULTIPLICATIVE = ATOM, ADDITIVE, MULTIPLICATIVE
_MIN_ROUND = 64  # candidates per rejection-sampling round, at least
_TABLE_ROUND = 1024  # rounds of at least this many candidates use the setting's draw table, if any
_MAX_DRAW_INDEX = MAX_DRAW_TABLE // 2  # number tuples a draw table can index (it has >= 2 picks each)
#: Candidates drawn in a row without one valid prompt before a setting is declared (nearly) infeasible.
#: The same for every request size, so drawing one prompt (the single env's reset) and drawing a
#: thousand (the vector env's prompt buffer) succeed and fail on the same settings.
_MAX_DRY_CANDIDATES = 200 * _MIN_ROUND
_EOS = "<eos>"
#: A replayed prompt of up to this many numbers is refused when no expression reaches its target (a
#: few milliseconds for 4 numbers; the count of values grows about 20-fold per number beyond).
MAX_CHECKED_NUMBERS = 4


@functools.lru_cache(maxsize=8192)
def _reachable(numbers: tuple[int, ...], target: int, operators: str, all_numbers: bool) -> bool:
    """Whether some expression over ``numbers`` (every one of them when ``all_numbers``, else a non-empty
    subset, each at most once) with ``operators`` has the value ``target``. It allows any parentheses,
    any answer length and inexact division, so it over-approximates what a grammar and ``max_length``
    pay: a False is certain (the target is unreachable), a True is not a proof of a paid answer."""
    n = len(numbers)
    values: dict[int, set[Fraction]] = {}  # subset mask -> values of the expressions over it
    for mask in range(1, 1 << n):
        if mask & (mask - 1) == 0:
            values[mask] = {Fraction(numbers[mask.bit_length() - 1])}
            continue
        out: set[Fraction] = set()
        sub = (mask - 1) & mask
        while sub:
            rest = mask ^ sub
            if sub < rest:  # each split once; - and / in both orders
                for a in values[sub]:
                    for b in values[rest]:
                        if "+" in operators:
                            out.add(a + b)
                        if "*" in operators:
                            out.add(a * b)
                        if "-" in operators:
                            out.update((a - b, b - a))
                        if "/" in operators:
                            out.update(x / y for x, y in ((a, b), (b, a)) if y)
            sub = (sub - 1) & mask
        values[mask] = out
    full = (1 << n) - 1
    return any(target in values[m] for m in ([full] if all_numbers else values))


class CountdownTask(ExpressionTask):
    """Countdown-N prompts, a slot-token vocabulary, masks, and a deterministic multiset split.

    Vocabulary (token id = index): ``"n0" .. "n{N-1}"`` (the prompt's numbers by slot), the allowed
    operators in ``+ - * /`` order, ``"("`` and ``")"`` when parentheses are allowed, and ``"<eos>"``
    last. A slot token decodes to its number's digits, so the verifier reads ordinary infix text and
    the vocabulary does not grow with the number range.

    See :class:`rlvr_env.tasks.countdown.envs.CountdownEnv` for the arguments.
    """

    name = "countdown"
    tabular_segments = None
    number_range: tuple[int, int]

    def __init__(
        self,
        settings: CountdownSettings | None = None,
        *,
        solution_stats: bool = False,
        observation: str = "bits",
        number_tokens: str = "digits",
        **keywords: Any,
    ) -> None:
        #: the setting (:class:`~rlvr_env.tasks.countdown.settings.CountdownSettings`): given as an
        #: object or as its fields' keywords (``CountdownTask(n_numbers=3)``)
        self.settings = s = settings_of(settings, keywords, "CountdownTask")
        self.n_numbers = n = s.n_numbers
        self.number_range = s.number_range
        self.target_range = s.target_range
        self.operators = s.operators
        parentheses, integer_division = s.parentheses, s.integer_division
        self.grammar = s.grammar
        self.max_length = s.max_length  # type: ignore[assignment]
        self.solution_stats = bool(solution_stats)
        self.number_tokens = check_number_tokens(number_tokens)
        if self.solution_stats and n > 4:
            raise ValueError(
                f"solution_stats=True enumerates every expression; n_numbers={n} > 4 is too slow"
            )

        slots = tuple(f"n{i}" for i in range(n))
        parens = ("(", ")") if parentheses else ()
        self.vocab = slots + tuple(self.operators) + parens + (_EOS,)
        self.eos_id = len(self.vocab) - 1
        self._eos: int = self.eos_id
        self.table = self.token_table()
        self._op_ids = np.array([self.vocab.index(op) for op in self.operators])
        self._op_kinds = np.array([_OP_KIND[op] for op in self.operators])
        self._lp = self.vocab.index("(") if parentheses else -1
        self._rp = self.vocab.index(")") if parentheses else -1
        rules = MaskRules.of_vocab(self.table.kinds, self.table.slots, self.grammar, self.max_length)
        assert rules is not None  # a Countdown vocabulary is a slot vocabulary
        self.mask_rules = rules
        self.draw_rules = DrawRules(n, self.number_range, self.target_range,
                                    tuple(int(k) for k in self._op_kinds), parentheses, integer_division,
                                    self.max_length)

        self.features = CountdownFeatures(n, self.number_range, self.target_range, observation)
        self.observation = observation
        # Validate early: a setting that (almost) never yields a prompt fails here, not at reset().
        rng = np.random.default_rng(0)
        for split in ("train", "test"):
            self.sample_arrays(rng, split, 1)

    # -- prompts -----------------------------------------------------------------------------------
    def split_arrays(self, numbers: np.ndarray) -> np.ndarray:
        """(k,) bool: True where the number multiset (k, N) is held out (``split="test"``)."""
        return held_out(numbers, self.number_range)

    def split_of(self, prompt: Prompt) -> str:
        return "test" if held_out_one(prompt.numbers, self.number_range) else "train"

    def sample_arrays(
        self, rng: np.random.Generator, split: str, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draw k prompts of ``split``: numbers (k, N) int64, targets (k,) int64, and the merge history
        (k, N-1, 3) of each generating expression (:meth:`solution_tokens` turns it into tokens).

        Rejection sampling: candidates whose value is not an integer in ``target_range``, that divide
        by zero (or inexactly under ``integer_division``), whose text would not fit ``max_length``, or
        whose number multiset is in the other split are redrawn. ``ValueError`` when 12,800 candidates
        in a row yield no valid prompt, whatever ``k`` (so a setting works for k = 1 and k = 1024 alike).
        """
        check_split(split)
        want_test = split == "test"
        n = self.n_numbers
        lo, hi = self.number_range
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        filled = dry = 0
        while filled < k:
            if dry >= _MAX_DRY_CANDIDATES:
                raise ValueError(
                    f"could not draw {split!r} prompts: {dry} candidates in a row gave no valid one, with "
                    f"number_range={self.number_range}, target_range={self.target_range}, "
                    f"operators={self.operators!r}, max_length={self.max_length}: too few generated "
                    "expressions are valid; widen the ranges"
                )
            need = k - filled
            cand_n = rng.integers(lo, hi + 1, size=(max(4 * need, _MIN_ROUND), n))  # (c, N)
            dry += len(cand_n)
            # Large refills (the vector env's) read the draw table; small ones (one reset) never build it.
            table = cached_draw_table(self.draw_rules) if len(cand_n) >= _TABLE_ROUND else None
            index = None if table is None else tuple_index(cand_n, self.number_range, _MAX_DRAW_INDEX,
                                                           in_range=True)
            if table is None or index is None:  # the arithmetic on the candidates of this split
                cand_n = cand_n.take(np.flatnonzero(self.split_arrays(cand_n) == want_test), axis=0)
                picks = draw_picks(rng, len(cand_n), self.draw_rules)
                cand_t, ok = merge(cand_n, picks, self.draw_rules)
                take = np.flatnonzero(ok)[:need]
                chosen = cand_n.take(take, axis=0)
            else:  # the same verdicts by lookup; rows of this split by position (no 2-D filter)
                rows = np.flatnonzero(held_out(cand_n, self.number_range, index) == want_test)
                picks = draw_picks(rng, len(rows), self.draw_rules)
                cand_t, ok = table.lookup(index[rows], picks)
                take = np.flatnonzero(ok)[:need]
                chosen = cand_n.take(rows[take], axis=0)
            parts.append((chosen, cand_t[take], raw_history(picks).take(take, axis=0)))
            filled += len(take)
            if len(take):
                dry = 0
        if len(parts) == 1:
            numbers, targets, raw = parts[0]
        elif not parts:  # k == 0
            numbers, targets, raw = (np.zeros((0, n), np.int64), np.zeros(0, np.int64),
                                     np.zeros((0, n - 1, 3), np.int64))
        else:
            numbers, targets, raw = (np.concatenate(arrays) for arrays in zip(*parts))
        return numbers, targets, resolve_history(raw, self.draw_rules)

    def solution_tokens(self, history: np.ndarray) -> tuple[int, ...]:
        """Token ids (ending with EOS) of the generating expression recorded in ``history`` (N-1, 3)."""
        kind_to_id = {int(kd): int(t) for kd, t in zip(self._op_kinds, self._op_ids)}
        items: list[tuple[list[int], int]] = [([s], _ATOM) for s in range(self.n_numbers)]
        for i, j, op in np.asarray(history).tolist():
            (a, ca), (b, cb) = items[i], items[j]
            additive = op in (ADD, SUB)
            if not additive and ca == _ADDITIVE:
                a = [self._lp, *a, self._rp]
            if (op in (MUL, SUB) and cb == _ADDITIVE) or (op == DIV and cb != _ATOM):
                b = [self._lp, *b, self._rp]
            merged = (a + [kind_to_id[op]] + b, _ADDITIVE if additive else _MULTIPLICATIVE)
            first, second = min(i, j), max(i, j)
            items[first] = merged
            items[second] = items[-1]
            items.pop()
        return (*items[0][0], self._eos)

    def _make_prompt(self, numbers: np.ndarray, target: int, history: np.ndarray | None) -> Prompt:
        nums = tuple(int(x) for x in numbers)
        meta: list[tuple[str, object]] = []
        if history is not None:
            sol = self.solution_tokens(history)
            meta += [
                ("solution", self.decode(sol, Prompt(nums, target))),
                ("solution_tokens", sol),
                ("solution_length", len(sol)),
            ]
        if self.solution_stats:
            count, shortest = self.count_solutions(nums, target)
            meta += [("num_solutions", count), ("shortest_length", shortest)]
        return Prompt(nums, int(target), tuple(meta))

    def sample_prompt(self, rng: np.random.Generator, split: str) -> Prompt:
        return self.sample_prompts(rng, split, 1)[0]

    def sample_prompts(self, rng: np.random.Generator, split: str, k: int) -> list[Prompt]:
        """k prompts drawn as :meth:`sample_arrays` draws them, each with its generating expression in
        ``meta`` (``solution``, ``solution_tokens``, ``solution_length``)."""
        numbers, targets, history = self.sample_arrays(rng, split, k)
        return [self._make_prompt(numbers[i], int(targets[i]), history[i]) for i in range(k)]

    def solution(self, prompt: Prompt) -> tuple[int, ...] | None:
        """The generating expression's token ids of a drawn prompt (None for a replayed pair)."""
        tokens = prompt.info().get("solution_tokens")
        return None if tokens is None else tuple(tokens)  # type: ignore[arg-type]

    def prompt_extent(self) -> tuple[int, int, int, bool]:
        (lo, hi), (tlo, thi) = self.number_range, self.target_range
        return (self.n_numbers, max(_digits_needed(lo), _digits_needed(hi)),
                max(_digits_needed(tlo), _digits_needed(thi)), tlo < 0)

    def largest_value(self) -> int:
        (lo, hi), (tlo, thi) = self.number_range, self.target_range
        return max(abs(lo), abs(hi), abs(tlo), abs(thi))

    def validate_prompt(self, prompt: object) -> Prompt:
        numbers, target = unpack_prompt(prompt)
        n, (lo, hi), (tlo, thi) = self.n_numbers, self.number_range, self.target_range
        if len(numbers) != n:
            raise ValueError(f"prompt numbers {numbers!r} must be {n} integers for this task")
        if any(not lo <= x <= hi for x in numbers):
            raise ValueError(f"prompt numbers {numbers!r} must lie in number_range=({lo}, {hi})")
        if not tlo <= target <= thi:
            raise ValueError(f"prompt target {target!r} must lie in target_range=({tlo}, {thi})")
        if isinstance(prompt, Prompt) and prompt.meta:  # a drawn prompt: its meta holds an answer
            return Prompt(numbers, target, prompt.meta)
        if n <= MAX_CHECKED_NUMBERS and not _reachable(tuple(sorted(numbers)), int(target), self.operators,
                                                       self.grammar.number_use == "exactly_once"):
            uses = "each exactly once" if self.grammar.number_use == "exactly_once" else "each at most once"
            raise ValueError(
                f"prompt target {target!r} cannot be reached from the numbers {numbers!r} ({uses}) with "
                f"{' '.join(self.operators)}: the task draws only targets that an answer reaches"
            )
        return self._make_prompt(np.array(numbers), target, None)

    # -- per-prompt facts --------------------------------------------------------------------------
    def count_solutions(self, numbers: Sequence[int], target: int) -> tuple[int, int | None]:
        """(number of distinct correct answer texts with minimal parentheses, tokens of the shortest
        including EOS, or None). Enumerates every expression tree: use for N <= 4."""
        n = len(numbers)
        exprs: dict[int, dict[tuple[int, ...], tuple[Fraction, int]]] = {}
        for mask in range(1, 1 << n):
            members = [s for s in range(n) if mask >> s & 1]
            if len(members) == 1:
                exprs[mask] = {(members[0],): (Fraction(numbers[members[0]]), _ATOM)}
                continue
            out: dict[tuple[int, ...], tuple[Fraction, int]] = {}
            sub = (mask - 1) & mask
            while sub:
                rest = mask ^ sub
                for ta, (va, ca) in exprs[sub].items():
                    for tb, (vb, cb) in exprs[rest].items():
                        for op, op_id in zip(self.operators, self._op_ids):
                            if op == "/" and vb == 0:
                                continue
                            additive = op in "+-"
                            a = (self._lp, *ta, self._rp) if not additive and ca == _ADDITIVE else ta
                            pb = (op == "*" and cb == _ADDITIVE) or (op == "/" and cb != _ATOM)
                            pb = pb or (op == "-" and cb == _ADDITIVE)
                            b = (self._lp, *tb, self._rp) if pb else tb
                            if not self.grammar.parentheses and (a is not ta or b is not tb):
                                continue
                            value = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va / vb if vb else va}[op]
                            key = (*a, int(op_id), *b)
                            out[key] = (value, _ADDITIVE if additive else _MULTIPLICATIVE)
                sub = (sub - 1) & mask
            exprs[mask] = out
        masks = [(1 << n) - 1] if self.grammar.number_use == "exactly_once" else list(exprs)
        prompt = Prompt(tuple(numbers), target)
        count, shortest = 0, None
        for mask in masks:
            for toks, (value, _) in exprs[mask].items():
                if value != target or len(toks) + 1 > self.max_length:
                    continue
                text = self.decode(toks, prompt)
                if verify(text, numbers, target, grammar=self.grammar).correct:
                    count += 1
                    shortest = len(toks) + 1 if shortest is None else min(shortest, len(toks) + 1)
        return count, shortest

    # -- observation -------------------------------------------------------------------------------
    @property
    def prompt_layout(self) -> dict[str, slice]:
        return dict(self.features.layout)

    def encode_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, prompt_dim) float32 encodings of prompts given as numbers (k, N) and targets (k,)."""
        return self.features.encode_arrays(numbers, targets)

    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        return self.encode_arrays(np.array([prompt.numbers]), np.array([prompt.target]))[0]

    # -- answers -----------------------------------------------------------------------------------
    def token_strings(self, token_ids: Sequence[int], prompt: Prompt) -> list[str]:
        n, eos = self.n_numbers, self.eos_id
        out: list[str] = []
        for t in token_ids:
            if t == eos:
                break  # the answer ends at its first EOS
            out.append(str(prompt.numbers[t]) if t < n else self.vocab[t])
        return out

    def action_masks_arrays(self, tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """(B, V) bool masks for prefixes ``tokens[b, :lengths[b]]`` (tokens (B, L), lengths (B,)).

        A token is legal when the prefix stays a prefix of a grammatical answer that uses each slot at
        most once and can still be completed within ``max_length`` tokens (closing every open
        parenthesis, using every remaining slot under ``exactly_once``, then EOS). Masks are grammar
        only: division by zero and target misses are not masked. A prefix that already breaks these
        rules (a policy that ignored the mask) is offered EOS only, so a legal token always exists.
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64).reshape(tokens.shape[0])
        return masks_of(self.mask_rules, prefix_states(self.mask_rules, tokens, lengths), lengths)

    def mask_automaton(self) -> MaskAutomaton | None:
        """The masks of this setting as a state table (:class:`~rlvr_env.tasks.countdown.masks.
        MaskAutomaton`), built on first use; None when it would have too many states (large N)."""
        if not hasattr(self, "_automaton"):
            self._automaton = MaskAutomaton.build(self.mask_rules)
        return self._automaton

    def program_table(self) -> ProgramTable | None:
        """The answer shapes of this setting as a trie of programs (:class:`~rlvr_env.tasks.
        countdown_programs.ProgramTable`), built once per setting and process; None when it would have
        too many states (large N or long answers): the vector env then runs the incremental evaluator."""
        return cached_table(self.mask_rules)

    def batch_scorer(self, num_rows: int, weights: RewardWeights) -> BatchScorer:
        """:class:`~rlvr_env.tasks.countdown.scorer.ProgramScorer` (one lookup per step) when the setting
        has a mask automaton and a program table (small N), else the expression family's scorer."""
        automaton = self.mask_automaton() if self.array_path() else None
        table = self.program_table() if automaton is not None else None
        if table is None:
            return super().batch_scorer(num_rows, weights)
        return ProgramScorer(table, self.table, self.grammar, num_rows, self.max_length, weights,
                             self.number_range, automaton)

    def action_mask(self, prompt: Prompt, prefix: Sequence[int]) -> np.ndarray:
        row = np.full((1, self.max_length), self.eos_id, dtype=np.int64)
        row[0, : len(prefix)] = prefix
        return self.action_masks_arrays(row, np.array([len(prefix)]))[0]
