"""Where a native vector env's prompts come from: a finite task's pool, or the task's sampler, drawn in
chunks into a buffer, with their encodings (features or token-context ids).

Prompts travel as a :data:`~rlvr_env.scoring.PromptBatch` (named columns, one row per prompt) in the form
the task's batch scorer reads (``Task.sample_batch``, ``Task.prompt_batch``); their encodings come from
``Task.encode_batch`` (features) or ``Task.context_batch`` (token context).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvr_env.scoring import PromptBatch, batch_concat, batch_length, batch_take
from rlvr_env.tasks.base import Task
from rlvr_env.token_obs import TokenContext

__all__ = ["PromptSource"]

_MIN_CHUNK = 1024  # prompts drawn per refill of the prompt buffer (amortises the sampler's overhead)


class PromptSource:
    """Prompts of one split of ``task`` for ``num_envs`` rows, each with its encoding (``width`` columns)."""

    def __init__(self, task: Task, token_context: TokenContext | None, width: int, split: str,
                 num_envs: int) -> None:
        self.task, self.token_context = task, token_context
        self.width, self.split, self.num_envs = width, split, num_envs
        #: a finite task's prompts of both splits: the batch, its encodings and each prompt's row (else None)
        self.pool = self._finite_pool()
        #: rows of the finite pool that belong to this split (empty for generated prompts)
        in_split = [i for p, i in self.pool[2].items() if task.split_of(p) == split] if self.pool else []
        self.split_rows = np.array(sorted(in_split), dtype=np.int64)
        #: drawn prompts not used yet, and their encodings
        self.buffer: tuple[PromptBatch, np.ndarray] | None = None
        self.buffer_pos = 0

    def clear(self) -> None:
        """Forget the drawn prompts (a reseeded generator draws afresh)."""
        self.buffer, self.buffer_pos = None, 0

    def _finite_pool(self) -> tuple[PromptBatch, np.ndarray, dict[Any, int]] | None:
        """For a task with a finite prompt list: its prompts over both splits as one batch, their
        encodings (P, width) and each prompt's row; None for a task that samples its prompts."""
        task = self.task
        pools = [task.prompts(s) for s in ("train", "test")]
        if any(p is None for p in pools):
            return None
        prompts = [p for pool in pools for p in pool]  # type: ignore[union-attr]
        batch = task.prompt_batch(prompts)
        return batch, self.encode(batch), {p: i for i, p in enumerate(prompts)}

    def encode(self, batch: PromptBatch) -> np.ndarray:
        """(k, width) prompt segments of the observation: features or token-context ids."""
        ctx = self.token_context
        if ctx is None:
            rows = np.asarray(self.task.encode_batch(batch), dtype=np.float32)
        else:
            rows = np.asarray(self.task.context_batch(batch), dtype=np.int64)
        k = batch_length(batch)
        if rows.shape != (k, self.width):
            kind = "encode_batch" if ctx is None else "context_batch"
            raise ValueError(f"task {type(self.task).__name__}.{kind} gave shape {rows.shape} for {k} "
                             f"prompts, expected ({k}, {self.width})")
        return rows

    def _fill(self, rng: np.random.Generator, k: int) -> tuple[PromptBatch, np.ndarray]:
        """Draw k prompts of the split with ``rng``, with their encodings."""
        if self.pool is not None:
            batch, encoded, _ = self.pool
            idx = self.split_rows[rng.integers(len(self.split_rows), size=k)]
            return batch_take(batch, idx), encoded.take(idx, axis=0)
        batch = self.task.sample_batch(rng, self.split, k)
        return batch, self.encode(batch)

    def draw(self, rng: np.random.Generator, k: int) -> tuple[PromptBatch, np.ndarray]:
        """The next k prompts from the buffer (refilled in chunks of at least ``_MIN_CHUNK``)."""
        buf, pos = self.buffer, self.buffer_pos
        if buf is None or pos + k > len(buf[1]):
            batch, encoded = self._fill(rng, max(k, _MIN_CHUNK, self.num_envs))
            if buf is not None and pos < len(buf[1]):
                batch = batch_concat(batch_take(buf[0], slice(pos, None)), batch)
                encoded = np.concatenate([buf[1][pos:], encoded])
            buf, pos = (batch, encoded), 0
        self.buffer, self.buffer_pos = buf, pos + k
        return batch_take(buf[0], slice(pos, pos + k)), buf[1][pos : pos + k]

    def chosen(self, prompts: list[Any]) -> tuple[PromptBatch, np.ndarray]:
        """Validated prompts as a batch with their encodings: the finite pool's rows, or computed."""
        if self.pool is None:
            batch = self.task.prompt_batch(prompts)
            return batch, self.encode(batch)
        row_of: dict[int, int] = {}  # by identity: a group repeats one prompt object
        for p in prompts:
            if id(p) not in row_of:
                row_of[id(p)] = self.pool[2][p]
        idx = np.array([row_of[id(p)] for p in prompts], dtype=np.int64)
        return batch_take(self.pool[0], idx), self.pool[1].take(idx, axis=0)
