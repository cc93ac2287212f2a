"""The lesson's toy domain: three numbers (a permutation of 2, 3, 5), a target, a 5-token answer."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from rlvr_env.tasks.base import SPLITS, check_split
from rlvr_env.tasks.expression.prompt import Prompt, unpack_prompt
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.expression.verifier import Grammar, verify

__all__ = ["ArithmeticTask", "NUMBERS", "TARGETS", "PERMUTATIONS"]

#: The multiset every prompt uses.
NUMBERS: tuple[int, ...] = (2, 3, 5)
#: Orders in which a prompt can list its numbers, in lexicographic order.
PERMUTATIONS: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(NUMBERS))
_GRAMMAR = Grammar(operators=frozenset("+*"), parentheses=False, number_use="exactly_once")
_VOCAB: tuple[str, ...] = ("2", "3", "5", "+", "*")


def _all_expressions() -> list[tuple[str, ...]]:
    """The 24 well-formed answers: 6 number orders x 4 operator pairs."""
    return [
        (str(a), o1, str(b), o2, str(c))
        for a, b, c in PERMUTATIONS
        for o1, o2 in itertools.product("+*", repeat=2)
    ]


#: Every value a well-formed answer can take; these are the prompts' targets.
TARGETS: tuple[int, ...] = tuple(
    sorted({int(verify(e, NUMBERS, 0).value or 0) for e in _all_expressions()})
)


def _held_out(perm_index: int, target_index: int) -> bool:
    # A Latin-square design: each target keeps 4 of its 6 number orders for training and holds out
    # 2 (perm k and k+3 for target k), and every number order is seen in training with other targets.
    return perm_index in (target_index % 6, (target_index + 3) % 6)


class ArithmeticTask(ExpressionTask):
    """Prompts: a permutation of (2, 3, 5) and a reachable target (10, 11, 13, 17 or 30): 30 prompts.

    The answer is 5 tokens from ``2 3 5 + *``; it is well-formed when it alternates number, operator,
    number, operator, number and uses each of 2, 3, 5 once (24 such answers). ``*`` binds tighter than
    ``+``. The split holds out 10 (number order, target) pairs: each target with 2 of its 6 orders.

    ``grammar_mask``: False (``rlvr/Arithmetic-v0``'s default): :meth:`action_mask` allows every token.
    True (``gym.make("rlvr/Arithmetic-v0", grammar_mask=True)``): it allows the tokens that keep the
    answer a prefix of a well-formed one, an unused number at positions 1, 3, 5 and an operator at 2, 4 (a prefix that is already malformed,
    from an agent that ignored the mask, is offered every token).
    """

    name = "arithmetic"
    vocab = _VOCAB
    max_length = 5
    eos_id = None
    grammar = _GRAMMAR
    n_numbers = len(NUMBERS)
    tabular_segments = ("target", "prefix")

    def __init__(self, grammar_mask: bool = False) -> None:
        if not isinstance(grammar_mask, bool):
            raise ValueError(f"grammar_mask={grammar_mask!r} must be a bool")
        self._grammar_mask = grammar_mask
        split: dict[str, list[Prompt]] = {s: [] for s in SPLITS}
        for ti, target in enumerate(TARGETS):
            for pi, perm in enumerate(PERMUTATIONS):
                split["test" if _held_out(pi, ti) else "train"].append(Prompt(perm, target))
        self._prompts = {s: tuple(p) for s, p in split.items()}
        self._split_of = {p: s for s, ps in self._prompts.items() for p in ps}
        self._target_index = {t: i for i, t in enumerate(TARGETS)}
        self._number_index = {n: i for i, n in enumerate(NUMBERS)}
        # Every prompt's features, computed once: reset() reads them on every episode.
        self._encoded = {p: self._encode(p) for p in self._split_of}

    def prompts(self, split: str) -> tuple[Prompt, ...]:
        check_split(split)
        return self._prompts[split]

    def sample_prompt(self, rng: np.random.Generator, split: str) -> Prompt:
        # A direct lookup on the hot path (every reset); an unknown split goes through prompts(),
        # which raises the usual error.
        pool = self._prompts.get(split) if type(split) is str else None
        if pool is None:
            pool = self.prompts(split)
        return pool[int(rng.integers(len(pool)))]

    def validate_prompt(self, prompt: object) -> Prompt:
        numbers, target = unpack_prompt(prompt)
        if tuple(sorted(numbers)) != NUMBERS:
            raise ValueError(
                f"prompt numbers {numbers!r} must be a permutation of {NUMBERS} for this task"
            )
        if target not in self._target_index:
            raise ValueError(
                f"prompt target {target!r} is not reachable; reachable targets are {TARGETS}"
            )
        return Prompt(numbers, target)

    def split_of(self, prompt: Prompt) -> str:
        # Prompt equality and hash ignore `meta`, so any Prompt with these numbers and target is a key.
        return self._split_of[prompt]

    @property
    def prompt_layout(self) -> dict[str, slice]:
        nt, nn = len(TARGETS), len(NUMBERS)
        return {"target": slice(0, nt), "numbers": slice(nt, nt + nn * nn)}

    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        # A copy, so a caller that writes into the result cannot change the table.
        cached = self._encoded.get(prompt)
        return cached.copy() if cached is not None else self._encode(prompt)

    def _encode(self, prompt: Prompt) -> np.ndarray:
        # target: one-hot over TARGETS; numbers: one-hot of the value in each of the 3 slots.
        nt, nn = len(TARGETS), len(NUMBERS)
        out = np.zeros(nt + nn * nn, dtype=np.float32)
        out[self._target_index[prompt.target]] = 1.0
        for slot, number in enumerate(prompt.numbers):
            out[nt + slot * nn + self._number_index[number]] = 1.0
        return out

    def solution(self, prompt: Prompt) -> tuple[int, ...]:
        """A correct answer for a cold start: the first well-formed answer whose value is the target,
        trying the numbers in the order the prompt lists them first (then the other orders), ``+ +``
        before ``+ *``, ``* +`` and ``* *``. Every target is reachable, so there is always one."""
        prompt = self.validate_prompt(prompt)
        for a, b, c in itertools.permutations(prompt.numbers):
            for o1, o2 in itertools.product("+*", repeat=2):
                answer = (str(a), o1, str(b), o2, str(c))
                if verify(answer, NUMBERS, prompt.target, grammar=_GRAMMAR).correct:
                    return tuple(_VOCAB.index(t) for t in answer)
        raise AssertionError(f"no answer reaches {prompt!r}; TARGETS holds only reachable targets")

    @property
    def grammar_masked(self) -> bool:
        return self._grammar_mask

    def action_mask(self, prompt: Prompt, prefix: Sequence[int]) -> np.ndarray:
        row = np.zeros((1, self.max_length), dtype=np.int64)
        row[0, : len(prefix)] = prefix
        return self.action_masks_arrays(row, np.array([len(prefix)]))[0]

    def action_masks_arrays(self, tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """(B, V) bool masks for prefixes ``tokens[b, :lengths[b]]`` (tokens (B, L), lengths (B,)); all
        True without ``grammar_mask``. Token ids below ``len(NUMBERS)`` are numbers, the rest operators."""
        tokens = np.asarray(tokens, dtype=np.int64)
        b, n = tokens.shape[0], len(NUMBERS)
        lengths = np.asarray(lengths, dtype=np.int64).reshape(b)
        mask = np.ones((b, len(self.vocab)), dtype=bool)
        if not self._grammar_mask:
            return mask
        cols = np.arange(tokens.shape[1])
        seen = cols[None, :] < lengths[:, None]  # (B, L) the prefix's positions
        is_num = tokens < n  # (B, L)
        want_num = cols % 2 == 0  # (L,) numbers at even positions (0-based), operators at odd ones
        broken = (seen & (is_num != want_num[None, :])).any(axis=1)  # (B,)
        used = np.stack([(seen & (tokens == j)).sum(axis=1) for j in range(n)], axis=1)  # (B, n)
        broken |= (used > 1).any(axis=1)
        number_next = lengths % 2 == 0  # (B,)
        mask[:, :n] = number_next[:, None] & (used == 0)
        mask[:, n:] = ~number_next[:, None]
        mask[broken] = True
        return mask
