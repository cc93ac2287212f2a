"""Where a native vector env's prompts come from: a finite task's pool, or the task's sampler, drawn in
chunks into a buffer, with their encodings (features or token-context ids).

:class:`PromptSource` serves :class:`rlvr_env.vector.TokenVectorEnv` on both of its paths: on the array
fast path (:meth:`rlvr_env.Task.batch_arrays`) a prompt's data is its numbers and target as arrays, on
the generic path the task's own prompt values in an object array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlvr_env.tasks.base import BatchArrays, Task
from rlvr_env.tasks.expression.prompt import Prompt
from rlvr_env.token_obs import TokenContext

__all__ = ["PromptSource"]

_MIN_CHUNK = 1024  # prompts drawn per refill of the prompt buffer (amortises the sampler's overhead)


class PromptSource:
    """Prompts of one split of ``task`` for ``num_envs`` rows, each with its encoding (``width`` columns)."""

    def __init__(self, task: Task, arrays: BatchArrays | None, token_context: TokenContext | None, width: int,
                 split: str, num_envs: int) -> None:
        self.task, self.arrays, self.token_context = task, arrays, token_context
        self.width, self.split, self.num_envs = width, split, num_envs
        #: a finite task's prompts of both splits: their data, encodings and each prompt's row (else None)
        self.pool = self._finite_pool()
        #: rows of the finite pool that belong to this split (empty for generated prompts)
        in_split = [i for p, i in self.pool[2].items() if task.split_of(p) == split] if self.pool else []
        self.split_rows = np.array(sorted(in_split), dtype=np.int64)
        #: drawn prompts not used yet: their data (numbers and targets, or the prompt values), then encodings
        self.buffer: tuple[np.ndarray, ...] | None = None
        self.buffer_pos = 0

    def clear(self) -> None:
        """Forget the drawn prompts (a reseeded generator draws afresh)."""
        self.buffer, self.buffer_pos = None, 0

    def _finite_pool(self) -> tuple[tuple[np.ndarray, ...], np.ndarray, dict[Any, int]] | None:
        """For a task with a finite prompt list: the prompts' data (numbers (P, N) and targets (P,) on the
        array path, else a (P,) object array of the prompts), their encodings (P, ...) and each prompt's
        row, over both splits; None for a task that samples its prompts."""
        task = self.task
        pools = [task.prompts(s) for s in ("train", "test")]
        if any(p is None for p in pools):
            return None
        prompts = [p for pool in pools for p in pool]  # type: ignore[union-attr]
        ctx = self.token_context
        if self.arrays is not None:
            numbers = np.array([p.numbers for p in prompts], dtype=np.int64)
            targets = np.array([p.target for p in prompts], dtype=np.int64)
            data: tuple[np.ndarray, ...] = (numbers, targets)
            encoded = (self.arrays.context_arrays(numbers, targets) if ctx is not None else
                       np.stack([task.encode_prompt(p) for p in prompts]).astype(np.float32))
        else:
            values = np.empty(len(prompts), dtype=object)
            values[:] = prompts
            data = (values,)
            encoded = self.encode_values(prompts)
        return data, encoded, {p: i for i, p in enumerate(prompts)}

    def encode_values(self, prompts: Sequence[Any]) -> np.ndarray:
        """(k, width) prompt segments of prompts given as the task's values (each distinct object once)."""
        ctx = self.token_context
        encode = self.task.encode_prompt if ctx is None else ctx.encode_prompt
        dtype = np.float32 if ctx is None else np.int64
        done: dict[int, np.ndarray] = {}
        for p in prompts:
            if id(p) not in done:
                done[id(p)] = encode(p)
        if not prompts:
            return np.zeros((0, self.width), dtype)
        return np.stack([done[id(p)] for p in prompts]).astype(dtype)

    def _fill(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, ...]:
        """Draw k prompts of the split with ``rng``: their data, then their encodings."""
        if self.pool is not None:
            data, encoded, _ = self.pool
            idx = self.split_rows[rng.integers(len(self.split_rows), size=k)]
            return (*(d.take(idx, axis=0) for d in data), encoded.take(idx, axis=0))
        if self.arrays is not None:
            numbers, targets, _ = self.arrays.sample_arrays(rng, self.split, k)
            return numbers, targets, self._encode_arrays(numbers, targets)
        prompts = self.task.sample_prompts(rng, self.split, k)
        values = np.empty(len(prompts), dtype=object)
        values[:] = prompts
        return values, self.encode_values(prompts)

    def _encode_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The prompt segment of the observation on the array path: features or token-context ids."""
        arrays: Any = self.arrays
        if self.token_context is None:
            return arrays.encode_arrays(numbers, targets)  # type: ignore[no-any-return]
        return arrays.context_arrays(numbers, targets)  # type: ignore[no-any-return]

    def draw(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, ...]:
        """The next k prompts from the buffer (refilled in chunks of at least ``_MIN_CHUNK``)."""
        buf, pos = self.buffer, self.buffer_pos
        if buf is None or pos + k > len(buf[-1]):
            fresh = self._fill(rng, max(k, _MIN_CHUNK, self.num_envs))
            if buf is not None and pos < len(buf[-1]):
                fresh = tuple(np.concatenate([old[pos:], new]) for old, new in zip(buf, fresh))
            buf, pos = fresh, 0
        self.buffer, self.buffer_pos = buf, pos + k
        return tuple(part[pos : pos + k] for part in buf)

    def encode_numbers(self, prompts: list[Prompt], numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Encodings of validated prompts on the array path: the finite pool's rows, or the arrays'."""
        if self.pool is not None:
            row_of: dict[int, int] = {}  # by identity: a group repeats one prompt object
            for p in prompts:
                if id(p) not in row_of:
                    row_of[id(p)] = self.pool[2][p]
            return self.pool[1][[row_of[id(p)] for p in prompts]].reshape(len(prompts), -1)
        return self._encode_arrays(numbers, targets)

    def encode_chosen(self, prompts: list[Any]) -> np.ndarray:
        """Encodings of validated prompts on the generic path: the finite pool's rows, or computed."""
        if self.pool is None:
            return self.encode_values(prompts)
        rows = self.pool[2]
        return self.pool[1][[rows[p] for p in prompts]].reshape(len(prompts), -1)
