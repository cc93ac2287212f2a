"""Where a GRPO iteration spends its time: an opt-in wall-clock timer at the agent's phase boundaries.

Off by default, and then free: the agent holds :data:`NO_TIMER`; the steps it times itself (``advantage``,
``update``) are bound once per ``learn`` with :func:`timed`, which gives back the step itself when the
timer is off, so nothing of the timer is on their path; the rollout's phases ask ``phase(name)``, which
for :data:`NO_TIMER` returns one shared do-nothing context manager (no clock read, no allocation). Switch
it on with
``model.timer = PhaseTimer()`` before ``learn``; each phase below then accumulates its seconds and its
number of entries. Timing never touches a random generator or an array of the run, so a timed run trains
bit for bit as the same run untimed (``tests/test_profiling.py``). ``python -m benchmarks.speed profile_grpo``
reports the shares.

The phases do not overlap; together with ``other`` (the rest of ``learn``'s loop: metrics, logging,
callbacks) they add up to the loop's wall time:

* ``prompts``: drawing the B prompts and resetting the B x G episodes on them.
* ``masks``: the env's grammar masks (``action_masks()``) before each step.
* ``forward``: the policy's logits for the active rows (rollout).
* ``sampling``: masking the logits, the categorical draw, the sampled tokens' log-probs, recording.
* ``env_step``: ``step`` of the env(s) and the per-episode bookkeeping (the verifier runs in here,
  at each episode's last token; the benchmark attributes it with a profiler).
* ``scoring``: the group rewards (verifier reward + length term), dynamic sampling's group selection.
* ``advantage``: the group advantages.
* ``update``: the mu clipped epochs (reference log-probs, forward, loss, backward, optimiser step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, cast

__all__ = ["NO_TIMER", "PHASES", "NoTimer", "PhaseTimer", "timed"]

F = TypeVar("F", bound=Callable[..., Any])

#: The timed phases, in the order an iteration runs them.
PHASES = ("prompts", "masks", "forward", "sampling", "env_step", "scoring", "advantage", "update")


class _Off:
    """The shared do-nothing context manager of :class:`NoTimer`."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


class NoTimer:
    """The default: ``phase`` returns a shared do-nothing context manager."""

    enabled = False

    def phase(self, name: str) -> _Off:
        return _OFF


NO_TIMER = NoTimer()


class _Span:
    __slots__ = ("timer", "name", "start")

    def __init__(self, timer: PhaseTimer, name: str) -> None:
        self.timer, self.name, self.start = timer, name, 0.0

    def __enter__(self) -> None:
        self.start = self.timer.clock()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        t = self.timer
        t.seconds[self.name] = t.seconds.get(self.name, 0.0) + t.clock() - self.start
        t.calls[self.name] = t.calls.get(self.name, 0) + 1


class PhaseTimer:
    """Accumulated seconds (``seconds``) and entries (``calls``) per phase (:data:`PHASES`), read from
    ``clock`` (wall time by default; ``time.process_time`` counts this process's CPU time only, steadier
    on a machine other jobs share)."""

    enabled = True

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._spans: dict[str, _Span] = {}

    def phase(self, name: str) -> _Span:
        if name not in PHASES:
            raise ValueError(f"phase {name!r} is not one of {PHASES}")
        span = self._spans.get(name)
        if span is None:
            span = self._spans[name] = _Span(self, name)
        return span

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def total(self) -> float:
        return sum(self.seconds.values())


def timed(timer: NoTimer | PhaseTimer, name: str, fn: F) -> F:
    """``fn`` timed as the phase ``name`` of ``timer``: ``fn`` itself when the timer is off (binding it
    once, a caller has nothing of the timer on the path of every call), else ``fn`` run inside
    ``timer.phase(name)`` (an unknown ``name`` is a ``ValueError`` here, before any call)."""
    if not timer.enabled:
        return fn
    span = timer.phase(name)

    def run(*args: Any, **kwargs: Any) -> Any:
        with span:
            return fn(*args, **kwargs)

    return cast(F, run)
