"""Native vector environments: many token-emission episodes held as NumPy arrays, stepped together.

:class:`TokenVectorEnv` is the :class:`gymnasium.vector.VectorEnv` counterpart of
:class:`rlvr_env.envs.TokenEnv`: the same task, observation encoding, rewards and episode ends, for
``num_envs`` episodes at once, with no Python loop over environments in ``step``. The task's batch scorer
(:class:`rlvr_env.scoring.BatchScorer`, ``task.batch_scorer``) holds the answers: it is fed one token
column per step and scores the rows whose episodes end, paying exactly what the task's ``score`` pays in
the single env (a test checks it in lockstep). By default it calls ``task.score_batch`` on finished rows;
the arithmetic families verify incrementally with array operations instead.

Reach them through Gymnasium::

    envs = gym.make_vec("rlvr/Countdown-v0", num_envs=1024, vectorization_mode="vector_entry_point")

The module is over 400 lines and ``TokenVectorEnv.step`` over 60 on purpose: ``step`` is the hot path
of every rollout, and keeping its array bookkeeping in one function (no per-step helper calls) is part
of what keeps it fast; the prompts live in :mod:`rlvr_env.vector_prompts` and the scoring protocol in
:mod:`rlvr_env.scoring`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlvr_env.envs import check_render_mode, warn_no_render_mode
from rlvr_env.rewards import DEFAULT_WEIGHTS, BatchVerdict, RewardWeights
from rlvr_env.scoring import BatchScorer, PromptBatch
from rlvr_env.tasks.base import Task, check_split
from rlvr_env.token_obs import TokenContext, check_observation
from rlvr_env.vector_prompts import PromptSource

__all__ = ["TokenVectorEnv"]


def _mask_info(info: dict[str, Any], key: str, value: Any, mask: np.ndarray) -> None:
    """Add a batched info entry and its ``_key`` mask, as Gymnasium's vector envs lay them out."""
    info[key] = value
    info[f"_{key}"] = mask


class TokenVectorEnv(VectorEnv):
    """``num_envs`` episodes of a :class:`~rlvr_env.tasks.base.Task` as arrays; see the module docstring.

    Everything a single :class:`~rlvr_env.envs.TokenEnv` documents holds per row: observation layout
    (``obs_layout``), reward, termination (EOS or fixed length) and truncation (``max_length`` without
    EOS, format reward withheld). Differences, all for speed:

    * **Autoreset** (``metadata["autoreset_mode"]``, kwarg ``autoreset_mode``): ``"SameStep"`` by
      default. A finished row is reset inside the same ``step``: the returned observation starts the next
      episode, and ``info["final_obs"]`` / ``info["final_info"]`` (masked by ``info["_final_obs"]`` /
      ``info["_final_info"]``) hold the end of the finished one. Episodes last a handful of tokens, so
      ``"NextStep"`` (Gymnasium's default, also supported) would spend one step in every few on a reset
      with the action ignored; same-step also matches SB3's VecEnv convention. ``"Disabled"`` freezes
      finished rows (their actions are ignored; reward 0, both flags False, observation unchanged) until
      ``reset(options={"reset_mask": ...})``, so a GRPO rollout can step a batch of groups until
      :attr:`finished` is all True, then restart them on prompts of its choosing. (Gymnasium leaves
      stepping a finished row undefined in this mode; stepping when every row has finished raises
      ``ResetNeeded``.)
    * **Final info** is arrays over all rows with ``_key`` masks: ``reward_parts`` (a dict of
      arrays), ``correct``, ``well_formed``, ``length``, ``value_num`` / ``value_den`` (the exact value
      as a reduced fraction, ``Fraction(value_num[i], value_den[i])`` is the single env's ``value``;
      ``0 / 0`` exactly where that ``value`` is None), ``stats`` (the task's ``episode_stats``, a dict
      of arrays; NaN where a row's episode did not report a stat) and the episode's prompt columns
      (below).
      ``value_num`` / ``value_den`` are int64 arrays, except in a step where some
      value does not fit in int64 (large numbers multiplied): then both are object arrays of exact
      Python ints, so no value is ever lost or wrapped. Text (``expression``, ``reason``) is not built in
      ``step``; :meth:`expression` decodes a row on demand.
    * **Prompts** a ``step`` draws for new episodes appear (masked) as the columns of the task's
      :data:`~rlvr_env.scoring.PromptBatch`, in the final info too: ``info["prompt"]`` (the task's own
      values) by default, ``info["prompt_numbers"]`` and ``info["prompt_target"]`` for the arithmetic
      families, which hold prompts as arrays; ``reset`` also returns ``info["prompt"]``, an object array
      of the task's prompts (a drawn :class:`rlvr_env.Prompt` carries no ``meta``: no stored solution)
      and ``info["split"]``. Prompts come from one generator, ``self.np_random``, in
      chunks; ``reset(seed=s)`` makes the sequence repeat, but env i is not the same stream as a single
      env seeded ``s + i``. For lockstep comparisons pass prompts explicitly.
    * ``reset(options={"prompt": p})`` takes one prompt for every env (a GRPO group is G envs on one
      prompt) or a sequence of ``num_envs`` prompts (a ``list``; :meth:`Task.is_one_prompt` tells); with
      ``options["reset_mask"]`` (a bool array of shape ``(num_envs,)``) only the masked rows restart,
      and only their entries of the sequence are read.
    * ``copy=True`` (as in :class:`gymnasium.vector.SyncVectorEnv`) returns a fresh observation array
      every call; ``copy=False`` returns the env's own buffer, which the next call overwrites.
    """

    metadata = {"render_modes": ["ansi"], "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        task: Task,
        num_envs: int = 1,
        *,
        split: str = "train",
        accuracy_weight: float = DEFAULT_WEIGHTS.accuracy,
        format_weight: float = DEFAULT_WEIGHTS.format,
        reward_weights: dict[str, float] | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.SAME_STEP,
        copy: bool = True,
        render_mode: str | None = None,
        observation: str = "features",
    ) -> None:
        check_observation(observation)
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} must be a positive integer")
        if not isinstance(split, str):
            raise ValueError(f"split={split!r} must be a string, one of ('train', 'test')")
        check_split(split)
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ValueError(
                f"autoreset_mode={autoreset_mode!r} must be one of {[m.value for m in AutoresetMode]}"
            ) from None
        check_render_mode(render_mode, self.metadata["render_modes"])
        if not isinstance(copy, bool):
            raise ValueError(f"copy={copy!r} must be a bool")
        self.task = task
        self.split = split
        self.num_envs = b = int(num_envs)
        self.autoreset_mode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.copy = copy
        self.render_mode = render_mode
        task.check_vocab()
        self.reward_weights = RewardWeights.of(accuracy_weight, format_weight, reward_weights)

        vocab_size = len(task.vocab)
        self._vocab_size = vocab_size
        self._prefix_offset = task.prompt_dim
        self._length = task.max_length
        self._eos = task.eos_id
        self._reply_after = task.reply_after
        obs_dim = task.prompt_dim + task.max_length * vocab_size
        self.single_observation_space = spaces.Box(0.0, 1.0, shape=(obs_dim,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(vocab_size)
        self.observation_space = batch_space(self.single_observation_space, b)
        self.action_space = batch_space(self.single_action_space, b)
        #: Named slices of one row of the observation (as :attr:`TokenEnv.obs_layout`).
        self.obs_layout: dict[str, slice] = {
            **task.prompt_layout,
            "prefix": slice(self._prefix_offset, obs_dim),
        }

        #: With ``observation="tokens"``: the token-context builder shared with the single env; its
        #: rows replace the features (space, layout, buffer, prompt encodings).
        self.token_context: TokenContext | None = None
        if observation == "tokens":
            self.token_context = ctx = TokenContext(task)
            self._prefix_offset = ctx.prompt_width
            obs_dim = ctx.length
            self.single_observation_space = ctx.space
            self.observation_space = batch_space(ctx.space, b)
            self.obs_layout = ctx.layout

        #: the answers so far, their prompts and their scoring: the task's batch scorer
        self.scorer: BatchScorer = task.batch_scorer(b, self.reward_weights)
        if not isinstance(self.scorer, BatchScorer):
            raise ValueError(f"{type(task).__name__}.batch_scorer returned {self.scorer!r:.80}, which is "
                             "not an rlvr_env.scoring.BatchScorer")
        #: the prompts: a finite task's pool or the task's sampler, buffered, with their encodings
        self.prompt_source = PromptSource(task, self.token_context, self._prefix_offset, split, b)
        self._rows = np.arange(b)
        self._obs = np.zeros((b, obs_dim), dtype=self.single_observation_space.dtype)  # (B, D)
        #: (B,) flat index in ``_obs`` of each row's first one-hot slot, minus one slot (pos counts from 1)
        self._obs_base = self._rows * obs_dim + self._prefix_offset - self._vocab_size
        self._done = np.zeros(b, dtype=bool)  # rows whose episode ended and that were not reset yet
        self._every_row = np.ones(b, dtype=bool)  # (B,) the active rows of a step without waiting rows
        self._every_row.flags.writeable = False
        self._started = False

    # -- prompts ------------------------------------------------------------------------------------
    def _start(self, rows: np.ndarray, batch: PromptBatch, encoded: np.ndarray) -> None:
        """Begin fresh episodes on ``rows`` (k,) with the prompts of ``batch`` and their encodings."""
        self._obs[rows] = 0
        self._obs[rows, : self._prefix_offset] = encoded
        self.scorer.set_prompts(rows, batch)
        self._done[rows] = False

    def _start_sampled(self, rows: np.ndarray, info: dict[str, Any], mask: np.ndarray) -> None:
        self._start(rows, *self.prompt_source.draw(self.np_random, len(rows)))
        self._prompt_info(info, mask)

    def _prompt_info(self, info: dict[str, Any], mask: np.ndarray) -> None:
        for name, column in self.scorer.prompts.items():
            _mask_info(info, name, column.copy(), mask)

    # -- Gymnasium API ------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(
                f"seed={seed!r} must be an int or None: one generator draws every env's prompts"
            )
        super().reset(seed=seed)
        if seed is not None:
            self.prompt_source.clear()
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options={options!r} must be a dict or None")
        options = dict(options or {})
        unknown = set(options) - {"prompt", "reset_mask"}
        if unknown:
            raise ValueError(
                f"unknown reset options {sorted(unknown)}; 'prompt' and 'reset_mask' are accepted"
            )
        mask = self._reset_mask(options.get("reset_mask"))
        rows = np.flatnonzero(mask)
        info: dict[str, Any] = {}
        prompts = np.full(self.num_envs, None, dtype=object)
        splits = np.full(self.num_envs, None, dtype=object)
        if "prompt" in options:
            chosen = self._prompts_option(options["prompt"], rows)
            self._start(rows, *self.prompt_source.chosen(chosen))
            split_of: dict[int, str] = {}  # a group's rows share one prompt object: its split once
            for r, p in zip(rows, chosen):
                key = id(p)  # `chosen` holds the objects, alive here (cheaper than hashing a Prompt)
                if key not in split_of:
                    split_of[key] = self.task.split_of(p)
                prompts[r], splits[r] = p, split_of[key]
        else:
            batch, encoded = self.prompt_source.draw(self.np_random, len(rows))
            self._start(rows, batch, encoded)
            for i, r in enumerate(rows.tolist()):
                prompts[r], splits[r] = self.task.batch_prompt(batch, i), self.split
        self._started = True
        _mask_info(info, "prompt", prompts, mask)
        _mask_info(info, "split", splits, mask)
        self._prompt_info(info, mask)
        return self._out(), info

    def _reset_mask(self, value: object) -> np.ndarray:
        if value is None:
            return np.ones(self.num_envs, dtype=bool)
        if not isinstance(value, np.ndarray) or value.dtype != np.bool_ or value.shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must be a bool numpy array of shape ({self.num_envs},), got {value!r}"
            )
        if not value.any():
            raise ValueError("options['reset_mask'] selects no env; at least one entry must be True")
        if not self._started and not value.all():
            raise ValueError("the first reset must reset every env; options['reset_mask'] must be all True")
        return value.copy()

    def _prompts_option(self, value: object, rows: np.ndarray) -> list[Any]:
        """One validated prompt per reset row from ``options["prompt"]``: one prompt for every row, or a
        sequence of ``num_envs`` prompts (which of the two, the task says: :meth:`Task.is_one_prompt`)."""
        single = self.task.is_one_prompt(value)
        if single:
            prompt = self.task.validate_prompt(value)
            return [prompt] * len(rows)
        if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != self.num_envs:
            raise ValueError(
                f"options['prompt'] must be one prompt or a sequence of num_envs={self.num_envs} prompts, "
                f"got {value!r:.200}"
            )
        checked: dict[int, Any] = {}  # by identity: a caller repeating one object gets it checked once
        for r in rows:
            item = value[int(r)]
            if id(item) not in checked:
                checked[id(item)] = self.task.validate_prompt(item)
        return [checked[id(value[int(r)])] for r in rows]

    def step(
        self, actions: object
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise ResetNeeded("step() was called before reset(); call reset() to draw prompts first")
        acts = self._check_actions(actions)  # (B,)
        info: dict[str, Any] = {}
        mode = self.autoreset_mode
        if mode == AutoresetMode.NEXT_STEP and self._done.any():
            restart = self._done.copy()
            active = ~restart
            self._start_sampled(np.flatnonzero(restart), info, restart)
        elif mode == AutoresetMode.DISABLED:
            if self._done.all():
                raise ResetNeeded(
                    "every env's episode has ended; with autoreset_mode='Disabled' call "
                    "reset(options={'reset_mask': ...}) before stepping"
                )
            active = ~self._done  # finished rows wait, frozen, for a masked reset
        else:
            active = self._every_row  # read only
        rows_all = active is self._every_row or bool(active.all())
        scorer = self.scorer
        scorer.feed(acts, active, rows_all)
        pos = scorer.pos  # (B,) tokens so far, after this step
        if rows_all and self.token_context is None:  # one flat scatter: row r's one-hot at pos - 1
            self._obs.reshape(-1)[self._obs_base + pos * self._vocab_size + acts] = 1.0
        elif self.token_context is None:
            rows = self._rows[active]
            self._obs[rows, self._prefix_offset + (pos[rows] - 1) * self._vocab_size + acts[rows]] = 1.0
        else:  # the token context: the answer's position holds the token's context id
            rows = self._rows if rows_all else self._rows[active]
            ids = self.token_context.answer_offset + acts[rows]
            self._obs[rows, self._prefix_offset + pos[rows] - 1] = ids
        if self._reply_after:  # the env's own tokens after some actions (a tool's output)
            self._write_replies(acts, active)
        full = pos >= self._length if rows_all else active & (pos >= self._length)
        if self._eos is None:
            terminated, truncated = full, np.zeros(self.num_envs, dtype=bool)
        else:
            terminated = acts == self._eos if rows_all else active & (acts == self._eos)
            truncated = full > terminated  # full & ~terminated, in one operation
        done = terminated | truncated
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        if done.any():
            ended = np.flatnonzero(done)
            verdict = scorer.finish(ended, truncated[ended])
            rewards[ended] = verdict.reward
            final = self._final_info(ended, done, verdict)
            if mode == AutoresetMode.SAME_STEP:
                final_obs = np.zeros(self._obs.shape, dtype=self._obs.dtype)  # not zeros_like: no memset
                final_obs[ended] = self._obs.take(ended, axis=0)
                _mask_info(info, "final_obs", final_obs, done)
                _mask_info(info, "final_info", final, done)
                self._start_sampled(ended, info, done)
            else:
                self._done |= done
                if info:  # NextStep: rows restarted this step share the prompt keys with ended rows
                    for name in scorer.prompts:
                        both = done | info[f"_{name}"]
                        ended_rows = done.reshape(-1, *([1] * (final[name].ndim - 1)))
                        final[name] = np.where(ended_rows, final[name], info[name])
                        final[f"_{name}"] = both
                info.update(final)
        return self._out(), rewards, terminated, truncated, info

    def _write_replies(self, acts: np.ndarray, active: np.ndarray) -> None:
        """Append the task's reply (:meth:`Task.reply`) to each active row whose action asks for one, one
        column at a time through the scorer, and write it into the observation."""
        scorer = self.scorer
        asked = active & np.isin(acts, list(self._reply_after)) & (scorer.pos < self._length)
        if self._eos is not None:
            asked &= acts != self._eos
        rows = np.flatnonzero(asked)
        if not len(rows):
            return
        replies = {}
        for r in rows.tolist():
            room = self._length - int(scorer.pos[r])
            reply = tuple(self.task.reply(scorer.prompt(r), self.tokens(r)))[:room]
            if reply:
                replies[r] = reply
        width = max((len(v) for v in replies.values()), default=0)
        for k in range(width):
            column = np.zeros(self.num_envs, dtype=np.int64)
            step_rows = np.array([r for r, v in replies.items() if len(v) > k], dtype=np.int64)
            column[step_rows] = [replies[r][k] for r in step_rows.tolist()]
            mask = np.zeros(self.num_envs, dtype=bool)
            mask[step_rows] = True
            scorer.feed(column, mask, False)
            at = scorer.pos[step_rows] - 1
            if self.token_context is None:
                self._obs[step_rows, self._prefix_offset + at * self._vocab_size + column[step_rows]] = 1.0
            else:
                self._obs[step_rows, self._prefix_offset + at] = self.token_context.answer_offset + column[step_rows]

    def _check_actions(self, actions: object) -> np.ndarray:
        # int64 ids of the right shape (the usual case): one reduction over the ids as uint64, where
        # negatives are huge, and no dtype hierarchy lookup
        if type(actions) is np.ndarray and actions.dtype == np.int64 and actions.shape == (self.num_envs,) \
                and int(actions.view(np.uint64).max()) < self._vocab_size:
            return actions
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,) or not np.issubdtype(acts.dtype, np.integer):
            raise ValueError(
                f"actions {actions!r:.100} must be an integer array of shape ({self.num_envs},), "
                f"got shape {acts.shape} and dtype {acts.dtype}"
            )
        lo, hi = int(acts.min()), int(acts.max())
        if lo < 0 or hi >= self._vocab_size:
            raise ValueError(
                f"actions contain {lo if lo < 0 else hi}, outside Discrete({self._vocab_size}): "
                f"valid ids are 0..{self._vocab_size - 1}"
            )
        return acts.astype(np.int64, copy=False)

    def _final_info(self, ended: np.ndarray, done: np.ndarray, verdict: BatchVerdict) -> dict[str, Any]:
        b = self.num_envs
        info: dict[str, Any] = {}

        def full(values: np.ndarray, dtype: Any) -> np.ndarray:
            out = np.zeros(b, dtype=dtype)
            out[ended] = values
            return out

        parts: dict[str, Any] = {}
        for name, arr in verdict.parts.items():
            _mask_info(parts, name, full(arr, np.float64), done)
        _mask_info(info, "reward_parts", parts, done)
        _mask_info(info, "correct", full(verdict.correct, bool), done)
        _mask_info(info, "well_formed", full(verdict.well_formed, bool), done)
        _mask_info(info, "length", full(self.scorer.pos[ended], np.int64), done)
        if self.task.has_episode_stats:
            rows = [self.task.episode_stats(self.scorer.prompt(r), self.tokens(r)) for r in ended.tolist()]
            stats: dict[str, Any] = {}
            for name in dict.fromkeys(k for row in rows for k in row):
                # a stat a row did not measure is NaN there (as in a list of single envs' infos, which lack it)
                column = np.array([row.get(name, np.nan) for row in rows])
                _mask_info(stats, name, full(column, np.float64), done)
            _mask_info(info, "stats", stats, done)
        value_num, value_den = full(verdict.value_num, np.int64), full(verdict.value_den, np.int64)
        if verdict.big_values:  # values beyond int64 (rare): exact Python ints in object arrays
            value_num, value_den = value_num.astype(object), value_den.astype(object)
            for j, value in verdict.big_values.items():
                value_num[ended[j]], value_den[ended[j]] = value.numerator, value.denominator
        _mask_info(info, "value_num", value_num, done)
        _mask_info(info, "value_den", value_den, done)
        self._prompt_info(info, done)
        return info

    def _out(self) -> np.ndarray:
        return self._obs.copy() if self.copy else self._obs

    # -- helpers ------------------------------------------------------------------------------------
    @property
    def finished(self) -> np.ndarray:
        """(B,) bool: rows whose episode ended and that have not restarted yet (always all False with
        ``"SameStep"`` autoreset, which restarts them inside ``step``)."""
        return self._done.copy()

    def action_masks(self) -> np.ndarray:
        """(B, V) bool: each row's grammar mask, as :meth:`TokenEnv.action_masks` gives for one env."""
        if not self._started:
            raise ResetNeeded("action_masks() was called before reset()")
        return self.scorer.masks()

    def prompt(self, index: int) -> Any:
        """The prompt of env ``index``'s current (or just finished) episode."""
        return self.scorer.prompt(index)

    def tokens(self, index: int) -> list[int]:
        """The token ids env ``index`` has emitted in its current episode."""
        return self.scorer.tokens[index, : int(self.scorer.pos[index])].tolist()

    def expression(self, index: int) -> str:
        """The text the verifier reads for env ``index``'s current answer."""
        return self.task.decode(self.tokens(index), self.prompt(index))

    def render(self) -> tuple[str, ...] | None:  # type: ignore[override]
        """With ``render_mode="ansi"``, one line per env: its prompt and its answer so far. Without a
        render mode it warns (as :meth:`TokenEnv.render` does) and returns None."""
        if self.render_mode != "ansi":
            warn_no_render_mode(self)
            return None
        if not self._started:
            return tuple("(no episode: call reset())" for _ in range(self.num_envs))
        lines = []
        for i in range(self.num_envs):
            answer = " ".join(self.task.vocab[t] for t in self.tokens(i))
            lines.append(f"{self.task.render_prompt(self.prompt(i))} | answer: {answer}")
        return tuple(lines)
