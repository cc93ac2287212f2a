"""One iteration's B x G episodes as arrays (:class:`GroupBatch`): what the rollout records and the update
trains on, with the groups' selection and concatenation (dynamic sampling keeps the informative groups of
several rounds)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["GroupBatch", "concat_groups"]


@dataclass
class GroupBatch:
    """One iteration's B x G episodes, padded to the longest (N = B*G rows, group-major)."""

    obs: np.ndarray  # (N, L, *obs_shape)
    actions: np.ndarray  # (N, L) int64
    logp_old: np.ndarray  # (N, L) log pi_old of the sampled tokens (0 on padding)
    mask: np.ndarray  # (N, L) 1.0 on real steps
    returns: np.ndarray  # (N,) undiscounted episode return (the verifier's reward for rlvr envs)
    lengths: np.ndarray  # (N,) steps per episode
    correct: np.ndarray  # (N,) 1/0, NaN when the env does not say
    well_formed: np.ndarray  # (N,) 1/0, NaN when the env does not say
    group_size: int
    truncated: np.ndarray | None = None  # (N,) bool: the episode ended by truncation (length limit)
    #: (N, L, V) bool grammar masks the tokens were sampled under (all True on padding), or None when
    #: the rollout was unmasked. Every log-prob of the update (current, old, reference) uses them.
    action_masks: np.ndarray | None = None
    #: the weighted reward parts of each episode by name (N,) each (NaN where the env did not say), as
    #: the env's final ``info["reward_parts"]`` holds them; empty when the env reports none
    parts: dict[str, np.ndarray] = field(default_factory=dict)
    #: the env's unpaid measurements of each episode by name (its final ``info["stats"]``), as ``parts``
    stats: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return int(self.lengths.sum())

    @property
    def n_groups(self) -> int:
        return self.returns.shape[0] // self.group_size

    def select_groups(self, groups: np.ndarray) -> GroupBatch:
        """The batch of only ``groups`` (indices into the B groups), trimmed to its longest episode."""
        g = self.group_size
        rows = (np.asarray(groups, dtype=np.int64)[:, None] * g + np.arange(g)).reshape(-1)
        width = max(int(self.lengths[rows].max()), 1) if len(rows) else 1
        return GroupBatch(
            obs=self.obs[rows, :width], actions=self.actions[rows, :width],
            logp_old=self.logp_old[rows, :width], mask=self.mask[rows, :width],
            returns=self.returns[rows], lengths=self.lengths[rows], correct=self.correct[rows],
            well_formed=self.well_formed[rows], group_size=g,
            truncated=None if self.truncated is None else self.truncated[rows],
            action_masks=None if self.action_masks is None else self.action_masks[rows, :width],
            parts={name: values[rows] for name, values in self.parts.items()},
            stats={name: values[rows] for name, values in self.stats.items()},
        )


def concat_groups(batches: list[GroupBatch]) -> GroupBatch:
    """One batch holding the groups of ``batches`` in order, padded to the longest episode (padding is
    zero, with mask 0, exactly as a single rollout pads)."""
    if not batches:
        raise ValueError("concat_groups needs at least one batch")
    g = batches[0].group_size
    if any(b.group_size != g for b in batches):
        raise ValueError("all batches must have the same group size")
    width = max(b.mask.shape[1] for b in batches)

    def pad(a: np.ndarray) -> np.ndarray:
        extra = width - a.shape[1]
        return np.pad(a, [(0, 0), (0, extra)] + [(0, 0)] * (a.ndim - 2)) if extra else a

    truncs = [b.truncated for b in batches]
    masks = [b.action_masks for b in batches]

    def pad_masks(a: np.ndarray) -> np.ndarray:  # padding allows every token, as a rollout pads
        extra = width - a.shape[1]
        return np.pad(a, [(0, 0), (0, extra), (0, 0)], constant_values=True) if extra else a

    return GroupBatch(
        obs=np.concatenate([pad(b.obs) for b in batches]),
        actions=np.concatenate([pad(b.actions) for b in batches]),
        logp_old=np.concatenate([pad(b.logp_old) for b in batches]),
        mask=np.concatenate([pad(b.mask) for b in batches]),
        returns=np.concatenate([b.returns for b in batches]),
        lengths=np.concatenate([b.lengths for b in batches]),
        correct=np.concatenate([b.correct for b in batches]),
        well_formed=np.concatenate([b.well_formed for b in batches]),
        group_size=g,
        truncated=None if any(t is None for t in truncs)
        else np.concatenate(truncs),  # type: ignore[arg-type]
        action_masks=None if any(m is None for m in masks)
        else np.concatenate([pad_masks(m) for m in masks]),  # type: ignore[arg-type]
        parts=_concat_parts(batches),
        stats=_concat_parts(batches, "stats"),
    )


def _concat_parts(batches: list[GroupBatch], kind: str = "parts") -> dict[str, np.ndarray]:
    """The reward parts (or, ``kind="stats"``, the measurements) of ``batches`` in order; a name one
    batch lacks is NaN there."""
    columns = [getattr(b, kind) for b in batches]
    names = list(dict.fromkeys(name for c in columns for name in c))
    return {name: np.concatenate([c.get(name, np.full(len(b.returns), np.nan)) for b, c in zip(batches, columns)])
            for name in names}
