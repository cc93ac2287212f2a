"""The prompt of the arithmetic-expression family: the numbers an answer may use and the target value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import total_ordering

import numpy as np

__all__ = ["Prompt", "unpack_prompt"]


@total_ordering
@dataclass(frozen=True)
class Prompt:
    """One prompt of the arithmetic tasks: the numbers an answer may use and the target value.
    Immutable and hashable; prompts order by numbers, then target (so a set of them sorts one way).

    ``meta`` holds optional, task-specific per-prompt facts (e.g. number of solutions) as a tuple of
    ``(name, value)`` pairs so the prompt stays hashable; it does not take part in equality.
    """

    numbers: tuple[int, ...]
    target: int
    meta: tuple[tuple[str, object], ...] = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Prompt):
            return NotImplemented
        return self.numbers == other.numbers and self.target == other.target

    def __hash__(self) -> int:
        return hash((self.numbers, self.target))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Prompt):
            return NotImplemented
        return (self.numbers, self.target) < (other.numbers, other.target)

    def __repr__(self) -> str:
        return f"Prompt(numbers={self.numbers}, target={self.target})"

    def info(self) -> dict[str, object]:
        """The task-specific metadata as a dict."""
        return dict(self.meta)


def unpack_prompt(prompt: object) -> tuple[tuple[int, ...], int]:
    """Accept a Prompt or a (numbers, target) pair of plain integers; raise ValueError otherwise."""
    if isinstance(prompt, Prompt):
        numbers, target = prompt.numbers, prompt.target
    elif isinstance(prompt, (tuple, list)) and len(prompt) == 2:
        numbers, target = prompt  # type: ignore[misc]
    else:
        raise ValueError(
            f"prompt {prompt!r} must be a Prompt or a (numbers, target) pair, e.g. ((2, 3, 5), 17)"
        )
    if not isinstance(numbers, Sequence) or isinstance(numbers, str):
        raise ValueError(f"prompt numbers {numbers!r} must be a sequence of integers")
    clean = []
    for n in numbers:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ValueError(f"prompt number {n!r} in {numbers!r} must be an integer")
        clean.append(int(n))
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
        raise ValueError(f"prompt target {target!r} must be an integer")
    return tuple(clean), int(target)
