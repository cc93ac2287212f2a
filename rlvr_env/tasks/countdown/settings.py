"""Countdown's settings, declared once: the task, its token, vector and text envs and the language-model
bridges all take a :class:`CountdownSettings` (or its fields as keywords, as ``gym.make`` passes them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvr_env.tasks.expression.verifier import Grammar, NumberUse

__all__ = ["CountdownSettings", "settings_of"]

_OPS = "+-*/"


def _check_range(name: str, value: object, lowest: int, highest: int) -> tuple[int, int]:
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in value)
    ):
        raise ValueError(f"{name}={value!r} must be a (low, high) pair of integers")
    lo, hi = int(value[0]), int(value[1])
    if not lowest <= lo <= hi <= highest:
        raise ValueError(f"{name}={value!r} must satisfy {lowest} <= low <= high <= {highest}")
    return lo, hi


@dataclass(frozen=True)
class CountdownSettings:
    """One Countdown-N setting: what its prompts are and which answers its verifier accepts.

    The fields are the keywords of ``gym.make("rlvr/Countdown-v0", ...)`` that define the task (the
    parameter table of :class:`rlvr_env.CountdownEnv`); values are checked and normalised on construction
    (ranges become int pairs, ``operators`` takes the order ``+-*/``, ``max_length=None`` becomes
    ``4 N - 4``), so two settings that define the same task compare equal.
    """

    #: N, numbers per prompt (2 to 8)
    n_numbers: int = 4
    #: inclusive range of the numbers (>= 1: a negative number would read as a minus operator; at most
    #: six digits, the verifier's literal limit)
    number_range: tuple[int, int] = (1, 10)
    #: inclusive range of the targets (spanning fewer than 2**20 values)
    target_range: tuple[int, int] = (1, 100)
    #: the allowed operators, a subset of ``+-*/``
    operators: str = "+-*/"
    #: whether ``(`` and ``)`` are tokens
    parentheses: bool = True
    #: ``"at_most_once"`` (the game's rule) or ``"exactly_once"``
    number_use: NumberUse = "at_most_once"
    #: every ``/`` must divide exactly
    integer_division: bool = False
    #: answer tokens including EOS; None means ``4 N - 4`` (the longest minimal-parenthesis expression)
    max_length: int | None = None

    def __post_init__(self) -> None:
        n = self.n_numbers
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ValueError(f"n_numbers={n!r} must be an integer in [2, 8]")
        if not 2 <= n <= 8:
            raise ValueError(f"n_numbers={n!r} must be in [2, 8]")
        n = int(n)
        number_range = _check_range("number_range", self.number_range, 1, 999_999)
        target_range = _check_range("target_range", self.target_range, -(2**30), 2**30)
        if target_range[1] - target_range[0] >= 2**20:
            raise ValueError(f"target_range={self.target_range!r} must span fewer than 2**20 values")
        ops = self.operators
        if not isinstance(ops, str) or not ops or set(ops) - set(_OPS):
            raise ValueError(f"operators={ops!r} must be a non-empty string of characters from '+-*/'")
        for flag in ("parentheses", "integer_division"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag}={getattr(self, flag)!r} must be a bool")
        object.__setattr__(self, "operators", "".join(op for op in _OPS if op in ops))
        self.grammar  # noqa: B018 - checks number_use, naming the value
        max_length = 4 * n - 4 if self.max_length is None else self.max_length
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)):
            raise ValueError(f"max_length={max_length!r} must be an integer")
        if not 2 * n <= max_length <= 64:
            raise ValueError(
                f"max_length={max_length!r} must be in [2 * n_numbers, 64] = [{2 * n}, 64]: an answer "
                f"using all {n} numbers needs {2 * n - 1} tokens and EOS"
            )
        for name, value in (("n_numbers", n), ("number_range", number_range), ("target_range", target_range),
                            ("max_length", int(max_length))):
            object.__setattr__(self, name, value)

    @property
    def grammar(self) -> Grammar:
        """The verifier's :class:`~rlvr_env.Grammar` of this setting."""
        return Grammar(operators=frozenset(self.operators), parentheses=self.parentheses,
                       number_use=self.number_use, integer_division=self.integer_division)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


def settings_of(settings: CountdownSettings | None, keywords: Mapping[str, Any],
                where: str = "Countdown") -> CountdownSettings:
    """The setting given as an object or as keywords (not both): ``ValueError`` naming an unknown keyword
    and listing the known ones, as a constructor would."""
    names = CountdownSettings.field_names()
    unknown = sorted(set(keywords) - set(names))
    if unknown:
        raise ValueError(f"{where} got unknown keyword(s) {unknown}; its settings are {list(names)}")
    if settings is None:
        return CountdownSettings(**keywords)
    if not isinstance(settings, CountdownSettings):
        raise ValueError(f"settings={settings!r} must be a CountdownSettings or None")
    if keywords:
        raise ValueError(f"{where} got settings= and the keywords {sorted(keywords)}: give one or the other")
    return settings
