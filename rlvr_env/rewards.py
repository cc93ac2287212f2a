"""The reward, in one room: its named parts and their weights, the verdicts that carry them, and the
group-level Kimi k1.5 length term.

* :class:`RewardWeights`: a weight per named part. ``accuracy`` and ``format`` are every task's; a task
  may pay more parts (a step check, a near miss, ...), each with a weight a user can set, as TRL's
  ``reward_weights`` sets one per reward function. A part without a weight of its own weighs 1.0.
* :class:`Verdict` (one answer) and :class:`BatchVerdict` (a batch, as arrays): what a verifier says,
  with the weighted parts that sum to the reward; :func:`truncated_verdict` and :func:`refused_verdict`
  are the verdicts that pay nothing.
* :func:`best_reward`: the most a task's answer can earn under given weights (what a benchmark's early
  stop calls "solved"), from the task's declared parts, never from two hard-coded names.
* :func:`length_reward`: the k1.5 length term, a pure function of a finished group of answers to one
  prompt. It is not computed inside an episode because it depends on the whole group; an agent applies
  it after its G episodes finish, between the verifier and the group advantages (docs/agent.md, "The
  GRPO agent").

Every env, the agent, the verifiers and the language-model bridges read these; nothing else defines a
weight or a part's default.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["BASE_PARTS", "BatchVerdict", "DEFAULT_WEIGHTS", "RewardWeights", "Verdict", "best_reward",
           "length_reward", "refused_verdict", "truncated_verdict"]

#: The parts every task pays: ``accuracy`` (the answer is right) and ``format`` (it is well-formed).
BASE_PARTS: tuple[str, ...] = ("accuracy", "format")


def _weight(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"reward weight {name}={value!r} must be a real number")
    if not math.isfinite(float(value)):
        raise ValueError(f"reward weight {name}={value!r} must be finite")
    return float(value)


class RewardWeights(Mapping[str, float]):
    """Weights of the named reward parts; the episode reward is the weighted parts' sum.

    ``RewardWeights(accuracy=1.0, format=0.1, near=0.5)``: any number of parts by name, read as a mapping
    (``weights["near"]``, ``dict(weights)``) and, for the two every task has, as attributes
    (``weights.accuracy``, ``weights.format``). :meth:`weight` gives 1.0 for a part without a weight.

    Defaults: ``accuracy=1.0`` is the signal we train for. ``format=0.1`` pays a grammatical answer a
    tenth of a correct one: enough to pull a cold-start policy off malformed token soup (DeepSeek-R1's
    format reward plays this role), small enough that a well-formed wrong answer is never close to a
    right one, so "always answer something parseable" is not an attractive equilibrium.
    """

    __slots__ = ("_weights", "accuracy", "format")
    accuracy: float  # the two every task has, as attributes (a verifier reads them on every answer)
    format: float

    def __init__(self, accuracy: float = 1.0, format: float = 0.1, **others: float) -> None:
        weights = {"accuracy": _weight("accuracy", accuracy), "format": _weight("format", format)}
        for name, value in others.items():
            weights[name] = _weight(name, value)
        self._weights = weights
        self.accuracy, self.format = weights["accuracy"], weights["format"]

    @classmethod
    def of(cls, accuracy_weight: float = 1.0, format_weight: float = 0.1,
           reward_weights: Mapping[str, float] | None = None) -> RewardWeights:
        """The weights an env's keywords name: ``accuracy_weight``, ``format_weight`` and a mapping of
        any other part's weight (``reward_weights={"near": 0.5}``; it may also set the two)."""
        if reward_weights is None:
            reward_weights = {}
        named_ok = isinstance(reward_weights, Mapping) and all(isinstance(k, str) and k
                                                               for k in reward_weights)
        if not named_ok:
            raise ValueError(f"reward_weights={reward_weights!r:.120} must be a mapping of part names to "
                             "weights, e.g. {'near': 0.5}")
        named = {"accuracy": accuracy_weight, "format": format_weight, **reward_weights}
        return cls(**named)

    # -- the mapping -------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        return self._weights[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RewardWeights):
            return self._weights == other._weights
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._weights.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._weights.items())
        return f"RewardWeights({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (tuple(self._weights.items()),))

    # -- weighing parts ------------------------------------------------------------------------------
    def weight(self, name: str) -> float:
        """The weight of part ``name``: its own, or 1.0 (a part is then paid as the task writes it)."""
        return self._weights.get(name, 1.0)

    def parts(self, correct: Any, well_formed: Any) -> dict[str, Any]:
        """The two base parts weighed (their sum is the reward of a two-part task), for Python bools and
        for NumPy bool arrays alike: one rule for the text verifier and for the batch verifier."""
        return {"accuracy": self.accuracy * correct, "format": self.format * well_formed}

    def weigh(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Each raw part (a bool, a number or an array) times its :meth:`weight`, in ``raw``'s order."""
        return {name: self.weight(name) * value for name, value in raw.items()}


def _rebuild(items: tuple[tuple[str, float], ...]) -> RewardWeights:
    return RewardWeights(**dict(items))


#: The weights every env uses unless told otherwise.
DEFAULT_WEIGHTS = RewardWeights()


def best_reward(weights: Mapping[str, float], parts: Iterable[str] = BASE_PARTS) -> float:
    """The most one answer can earn: the sum of the positive weights of ``parts`` (a task's
    :attr:`~rlvr_env.Task.reward_parts`), each raw part being at most 1 (a correct answer is paid 1 of
    accuracy, a well-formed one 1 of format). A part ``weights`` does not name weighs 1.0.

    >>> best_reward(RewardWeights(), ("accuracy", "format"))
    1.1
    >>> best_reward(RewardWeights(near=0.5), ("accuracy", "format", "near"))
    1.6
    """
    total = 0.0
    for name in parts:
        w = float(weights.get(name, 1.0))
        if w > 0:
            total += w
    return total


@dataclass(frozen=True)
class Verdict:
    """What a verifier says about one response.

    ``parts`` are the weighted reward parts (``"accuracy"``, ``"format"`` and any the task adds);
    ``reward == sum(parts)``. ``value`` is the exact value when the answer has one (an expression that
    parses and evaluates), else None; ``reason`` is None for a correct answer and otherwise says why it
    is wrong or not well-formed.
    """

    reward: float
    correct: bool
    well_formed: bool
    value: Fraction | None
    reason: str | None
    expression: str
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class BatchVerdict:
    """Array form of :class:`Verdict` for a batch of B answers.

    ``value_num / value_den`` is the exact reduced value where ``has_value`` (den > 0), and 0 / 0
    where the answer has no value (the text verifier's ``value is None``) or where the value does not
    fit in int64; such values are exact in ``big_values`` (and in :meth:`values`).
    """

    reward: np.ndarray  # (B,) float64
    correct: np.ndarray  # (B,) bool
    well_formed: np.ndarray  # (B,) bool
    has_value: np.ndarray  # (B,) bool
    value_num: np.ndarray  # (B,) int64
    value_den: np.ndarray  # (B,) int64
    parts: dict[str, np.ndarray]  # name -> (B,) float64
    fallback: np.ndarray  # (B,) bool: rows re-scored by verify() because int64 could overflow
    #: exact values of fallback rows too large for int64 (their value_num / value_den are 0 / 0)
    big_values: dict[int, Fraction] = field(default_factory=dict)

    def values(self) -> list[Fraction | None]:
        """The values as Python objects, as :class:`Verdict` has them."""
        return [
            self.big_values.get(i) if d == 0 and h else Fraction(int(n), int(d)) if h else None
            for i, (n, d, h) in enumerate(zip(self.value_num, self.value_den, self.has_value))
        ]


def truncated_verdict(max_length: int, expression: str) -> Verdict:
    """The verdict of an answer cut off at ``max_length`` without EOS: nothing is paid."""
    return Verdict(
        reward=0.0,
        correct=False,
        well_formed=False,
        value=None,
        reason=f"no end-of-sequence token within {max_length} tokens (truncated)",
        expression=expression,
        parts={"accuracy": 0.0, "format": 0.0},
    )


def refused_verdict(reason: str, expression: str = "") -> Verdict:
    """The verdict of an answer refused before verification: no reward, with the reason."""
    return Verdict(reward=0.0, correct=False, well_formed=False, value=None, reason=reason,
                   expression=expression, parts={"accuracy": 0.0, "format": 0.0})


def length_reward(lengths: Sequence[int] | np.ndarray, correct: Sequence[bool] | np.ndarray) -> np.ndarray:
    """Kimi k1.5 length reward (Kimi Team 2025, "Kimi k1.5", section 2.3.3) for one group.

    ``lambda_i = 0.5 - (len_i - min_len) / (max_len - min_len)``; a correct answer earns ``lambda_i``, a
    wrong one ``min(0, lambda_i)``. So the shortest correct answer earns +0.5, the longest -0.5, and a
    wrong answer is only ever penalised, hardest when longest. When every length in the group is equal
    the term is zero for all (k1.5 leaves it undefined; zero keeps it a pure reshaping).

    Args:
        lengths: (G,) response lengths in tokens.
        correct: (G,) whether each answer is correct.

    Returns:
        (G,) float64 array of length rewards.

    >>> length_reward([3, 5, 7], [True, True, False]).tolist()
    [0.5, 0.0, -0.5]
    """
    lens = np.asarray(lengths, dtype=np.float64)  # (G,)
    ok = np.asarray(correct, dtype=bool)  # (G,)
    if lens.ndim != 1 or ok.shape != lens.shape:
        raise ValueError(
            f"lengths {lens.shape} and correct {ok.shape} must be 1-D arrays of the same length"
        )
    if lens.size == 0:
        return np.zeros(0)
    if not np.all(np.isfinite(lens)) or np.any(lens < 0):
        raise ValueError(f"lengths must be finite and non-negative, got {lens.tolist()}")
    lo, hi = lens.min(), lens.max()
    if hi == lo:
        return np.zeros_like(lens)
    lam = 0.5 - (lens - lo) / (hi - lo)  # (G,)
    return np.where(ok, lam, np.minimum(0.0, lam))
