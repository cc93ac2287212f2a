"""Group hooks: see each iteration's groups without touching the agent's internals.

TEMPORARY minimal version written by the pipeline helper to the agreed interface (issue 15) so the lab
can run before the agents helper's ``agents/grpo/hooks.py`` lands; that one replaces this file.

``model.add_group_hook(fn)`` registers ``fn(event: GroupEvent) -> None``, called once per iteration,
after the advantages are computed and before the update, with every group the iteration sampled (all
rounds under dynamic sampling, concatenated in order). Hooks get copies and cannot change training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agents.objective import informative_groups

__all__ = ["GroupEvent", "GroupHook", "group_event"]


@dataclass(frozen=True)
class GroupEvent:
    """One iteration's sampled groups (B' groups of G answers)."""

    rewards: np.ndarray  #: (B', G) float: verifier reward + length term (what advantages come from)
    lengths: np.ndarray  #: (B', G) int: answer lengths in tokens
    correct: np.ndarray  #: (B', G) bool
    trained: np.ndarray  #: (B',) bool: False for groups dynamic sampling dropped
    advantages: np.ndarray  #: (B', G) float: the update's advantages; NaN rows where not trained
    iteration: int  #: 1-based: the iteration this is
    num_timesteps: int  #: env steps before this iteration's are added


GroupHook = Callable[[GroupEvent], None]


def group_event(rewards: np.ndarray, lengths: np.ndarray, correct: np.ndarray, adv: np.ndarray | None,
                n_trained: int, dynamic: bool, iteration: int, num_timesteps: int) -> GroupEvent:
    """The event of one iteration. Under dynamic sampling the trained groups are the first
    ``n_trained`` informative ones in sampling order (the agent keeps exactly those)."""
    shape = rewards.shape  # (B', G)
    if dynamic:
        informative = informative_groups(rewards)  # (B',)
        trained = informative & (np.cumsum(informative) <= n_trained)
    else:
        trained = np.ones(shape[0], dtype=bool)
    advantages = np.full(shape, np.nan)
    if adv is not None:
        advantages[trained] = np.asarray(adv).reshape(-1, shape[1])
    return GroupEvent(np.array(rewards, dtype=float), np.asarray(lengths).reshape(shape).astype(int),
                      np.asarray(correct).reshape(shape).astype(bool), trained, advantages, iteration,
                      num_timesteps)
