"""What an outside observer of GRPO training gets: the per-iteration ``callback`` of ``learn`` (SB3's
habit; :mod:`agents.grpo.callbacks` runs it, SB3 ``BaseCallback`` objects included), its progress bar,
and the group hook (``GRPO.add_group_hook``), which sees every group an iteration sampled.

Both are read-only views: a hook receives copies (read-only arrays), so a run with hooks trains
bit-for-bit as the same run without them. Experiments observe training through these, never by
replacing the agent's methods.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.grpo.callbacks import Callback
from agents.grpo.rollout import GroupBatch

__all__ = ["Callback", "GroupEvent", "GroupHook", "GroupHooks", "TextProgressBar", "progress_bar"]


@dataclass(frozen=True)
class GroupEvent:
    """One iteration's groups, as the update sees them (B' groups of G answers; B' = B without dynamic
    sampling, every round's B groups concatenated in order with it).

    Attributes:
        rewards: (B', G) float, what the advantages are computed from: the verifier's reward (the
            episode return) plus the Kimi k1.5 length term.
        lengths: (B', G) int, answer lengths in env steps.
        correct: (B', G) bool, the env's final ``info["correct"]`` (False where the env does not say).
        trained: (B',) bool, False for the groups dynamic sampling dropped (tied, or beyond the B kept).
        advantages: (B', G) float, the advantages the update uses; NaN rows where ``trained`` is False.
        iteration: the iteration this is, 1-based (``model.iterations`` after it).
        num_timesteps: env steps before this iteration's steps are added.
    """

    rewards: np.ndarray
    lengths: np.ndarray
    correct: np.ndarray
    trained: np.ndarray
    advantages: np.ndarray
    iteration: int
    num_timesteps: int


GroupHook = Callable[[GroupEvent], None]


def _frozen(a: np.ndarray, dtype: Any) -> np.ndarray:
    out = np.array(a, dtype=dtype)  # always a copy
    out.setflags(write=False)
    return out


class GroupHooks:
    """The registered group hooks of one agent, called in registration order."""

    def __init__(self) -> None:
        self._hooks: list[GroupHook] = []

    def add(self, fn: GroupHook) -> None:
        if not callable(fn):
            raise TypeError(f"a group hook must be callable as fn(event), got {fn!r}")
        self._hooks.append(fn)

    def __len__(self) -> int:
        return len(self._hooks)

    def emit(self, sampled: GroupBatch, rewards: np.ndarray, trained_groups: np.ndarray,
             advantages: np.ndarray | None, iteration: int, num_timesteps: int) -> None:
        """Call every hook with the :class:`GroupEvent` of ``sampled`` (every group of the iteration)
        whose ``rewards`` are (B', G); ``advantages`` (len(trained_groups), G) belong to the groups at
        indices ``trained_groups`` (None when nothing is trained). Builds nothing without hooks."""
        if not self._hooks:
            return
        shape = rewards.shape  # (B', G)
        trained = np.zeros(shape[0], dtype=bool)
        trained[trained_groups] = True
        adv = np.full(shape, np.nan)
        if advantages is not None:
            adv[trained_groups] = advantages.reshape(len(trained_groups), shape[1])
        event = GroupEvent(
            rewards=_frozen(rewards, np.float64),
            lengths=_frozen(sampled.lengths.reshape(shape), np.int64),
            correct=_frozen(sampled.correct.reshape(shape) == 1.0, bool),
            trained=_frozen(trained, bool),
            advantages=_frozen(adv, np.float64),
            iteration=int(iteration),
            num_timesteps=int(num_timesteps),
        )
        for fn in self._hooks:
            fn(event)


def progress_bar(enabled: bool, total: int) -> Any:
    """A bar over ``total`` env steps for ``learn(progress_bar=True)`` (None when not enabled): tqdm's
    when tqdm is installed (the ``torch`` extra brings it), else :class:`TextProgressBar`, so the light
    install (gymnasium + NumPy) shows one too."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return TextProgressBar(total, desc="GRPO")
    return tqdm(total=total, unit="step", desc="GRPO", dynamic_ncols=True)


class TextProgressBar:
    """A one-line progress bar on stderr without tqdm: the calls the agent makes on tqdm's (``update``,
    ``n``, ``set_postfix_str``, ``close``), redrawn in place (carriage return) at most 5 times a second.
    The finished bar is drawn once, by ``close`` (or by a ``set_postfix_str`` just before it): a log
    file, where every redraw is a line, gets one 100% line."""

    WIDTH = 30

    def __init__(self, total: int, desc: str = "GRPO", stream: Any = None) -> None:
        self.total, self.desc, self.n = int(total), desc, 0
        self.stream = sys.stderr if stream is None else stream
        self._postfix = ""
        self._start = self._drawn = time.perf_counter()
        self._closed = False
        self._shown: tuple[int, str] | None = None  # (n, postfix) of the last line drawn
        self._draw()

    def update(self, n: int = 1) -> None:
        self.n += int(n)
        if self.n < self.total and time.perf_counter() - self._drawn >= 0.2:
            self._draw()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self._postfix = s
        if refresh:
            self._draw()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._shown != (self.n, self._postfix):
                self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        frac = min(self.n / self.total, 1.0) if self.total > 0 else 1.0
        filled = int(frac * self.WIDTH)
        elapsed = time.perf_counter() - self._start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        line = (f"{self.desc}: {frac:4.0%} |{bar}| {self.n}/{self.total} steps "
                f"[{elapsed:.0f} s, {rate:.0f} steps/s]")
        if self._postfix:
            line += f", {self._postfix}"
        self.stream.write("\r" + line)
        self.stream.flush()
        self._drawn = time.perf_counter()
        self._shown = (self.n, self._postfix)
