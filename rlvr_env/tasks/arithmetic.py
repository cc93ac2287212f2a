"""The lesson's toy domain: three numbers (a permutation of 2, 3, 5), a target, a 5-token answer."""

from __future__ import annotations

import itertools

import numpy as np

from rlvr_env.tasks.base import SPLITS, Prompt, Task, check_split, unpack_prompt
from rlvr_env.verifier import Grammar, verify

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


class ArithmeticTask(Task):
    """Prompts: a permutation of (2, 3, 5) and a reachable target (10, 11, 13, 17 or 30): 30 prompts.

    The answer is 5 tokens from ``2 3 5 + *``; it is well-formed when it alternates number, operator,
    number, operator, number and uses each of 2, 3, 5 once (24 such answers). ``*`` binds tighter than
    ``+``. The split holds out 10 (number order, target) pairs: each target with 2 of its 6 orders.
    """

    name = "arithmetic"
    vocab = _VOCAB
    max_length = 5
    eos_id = None
    grammar = _GRAMMAR
    tabular_segments = ("target", "prefix")

    def __init__(self) -> None:
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
