"""How a mix draws its members: the prompt type (:class:`MixPrompt`), the weights' rules
(:func:`parse_weights`) and the draw by weight (:class:`MemberDraw`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MemberDraw", "MixPrompt", "parse_weights"]


@dataclass(frozen=True)
class MixPrompt:
    """One prompt of a mix: the member's name and that member's own prompt value (immutable, hashable)."""

    task: str
    prompt: Hashable

    def __str__(self) -> str:
        return f"{self.task}: {self.prompt}"


def parse_weights(weights: object, names: tuple[str, ...]) -> dict[str, float]:
    """The members' weights (equal when ``weights`` is None), or ``ValueError`` naming the value and the
    rule: every member named and nothing else, each finite and >= 0, not all 0."""
    if weights is None:
        return {name: 1.0 for name in names}
    if not isinstance(weights, Mapping):
        raise ValueError(f"weights={weights!r:.120} must be a mapping of member names to weights")
    unknown = [k for k in weights if k not in names]
    if unknown:
        raise ValueError(f"weights name {unknown!r}, which are not members of the mix {list(names)}")
    missing = [n for n in names if n not in weights]
    if missing:
        raise ValueError(f"weights={dict(weights)!r} do not name the members {missing!r}; give every member "
                         "a weight (0 leaves one out of the draw)")
    out: dict[str, float] = {}
    for name in names:
        value = weights[name]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"weight {name}={value!r} must be a real number")
        if not math.isfinite(float(value)) or value < 0:
            raise ValueError(f"weight {name}={value!r} must be finite and >= 0")
        out[name] = float(value)
    if sum(out.values()) <= 0:
        raise ValueError(f"weights={out!r} are all zero; at least one member must have a positive weight")
    return out


class MemberDraw:
    """Draws member indices by weight: member i owns a share of [0, total) as wide as its weight, so a
    member of weight 0 owns none and is never drawn."""

    def __init__(self, weights: Sequence[float]) -> None:
        w = np.asarray(weights, dtype=np.float64)
        self.cumulative = np.cumsum(w)
        self.last_drawn = int(np.flatnonzero(w > 0)[-1])

    def pick(self, u: np.ndarray) -> np.ndarray:
        """Member indices for uniform draws ``u`` in [0, 1)."""
        idx = np.searchsorted(self.cumulative, u * self.cumulative[-1], side="right")
        return np.minimum(idx, self.last_drawn)  # u * total rounded up to total: the last drawn member
