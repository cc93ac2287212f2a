"""Gymnasium environments in which a policy emits an answer token by token and a verifier pays for it."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import logger, spaces
from gymnasium.error import ResetNeeded

from rlvr_env.tasks.base import Task, check_split
from rlvr_env.token_obs import TokenContext, check_observation
from rlvr_env.rewards import DEFAULT_WEIGHTS, RewardWeights, Verdict

__all__ = ["TokenEnv", "UnsupportedRenderMode", "check_action", "check_render_mode",
           "warn_no_render_mode"]


class UnsupportedRenderMode(ValueError, TypeError):
    """A ``render_mode`` the env cannot draw. A ``ValueError`` (a bad value of a kwarg) and a ``TypeError``
    (what an env constructor without a ``render_mode`` parameter raises), so tools that ask for a mode
    and retry without it on ``TypeError``, as SB3's ``make_vec_env`` does with ``"rgb_array"``, build
    the env without a render mode (docs/envs.md, "Rendering")."""


def check_render_mode(render_mode: object, modes: list[str]) -> None:
    """Raise :class:`UnsupportedRenderMode` naming ``render_mode`` unless it is None or one of ``modes``."""
    if render_mode is not None and render_mode not in modes:
        raise UnsupportedRenderMode(
            f"render_mode={render_mode!r} is not supported; choose one of {modes} or None (the envs are "
            "text and draw no frames)"
        )


def check_action(action: object, n: int) -> int:
    """Return ``action`` as a Python int in ``[0, n)`` or raise naming the value and the rule.

    Accepts what ``gymnasium.spaces.Discrete(n).contains`` accepts: a Python or NumPy integer, or a
    0-d integer array. Booleans, floats and arrays of any other shape are refused.
    """
    if type(action) is int:  # the common case first: this runs on every step
        a = action
    elif isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
        a = int(action)
    elif isinstance(action, np.ndarray) and np.issubdtype(action.dtype, np.integer):
        if action.shape != ():
            raise ValueError(
                f"action {action!r} has shape {action.shape}; a single token id (shape ()) is expected"
            )
        a = int(action)
    else:
        raise TypeError(
            f"action {action!r} of type {type(action).__name__} is not a token id; "
            f"expected an integer in [0, {n})"
        )
    if not 0 <= a < n:
        raise ValueError(f"action {a} is outside the action space Discrete({n}): valid ids are 0..{n - 1}")
    return a


def warn_no_render_mode(env: object) -> None:
    """Warn that ``render()`` was called on an env built without a render mode (nothing is drawn)."""
    spec = getattr(env, "spec", None)
    name = spec.id if spec is not None else type(env).__name__
    logger.warn(
        f"render() was called on {name} without a render mode, so nothing is rendered; build the env "
        f"with render_mode='ansi' (e.g. gym.make({name!r}, render_mode='ansi')) to get text"
    )


class TokenEnv(gym.Env[np.ndarray, np.int64]):
    """A token-emission environment over a :class:`~rlvr_env.tasks.base.Task`.

    Generic core of every ``rlvr/*`` environment: the task supplies prompts, vocabulary, grammar and
    verifier; this class supplies the Gymnasium protocol (spaces, seeding, prompt replay, termination
    vs truncation, rendering, input validation). See :class:`~rlvr_env.ArithmeticEnv` for the full
    documentation of the behaviour, which every task shares.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task: Task,
        *,
        split: str = "train",
        accuracy_weight: float = DEFAULT_WEIGHTS.accuracy,
        format_weight: float = DEFAULT_WEIGHTS.format,
        reward_weights: dict[str, float] | None = None,
        render_mode: str | None = None,
        observation: str = "features",
    ) -> None:
        if not isinstance(split, str):
            raise ValueError(f"split={split!r} must be a string, one of ('train', 'test')")
        check_split(split)
        check_observation(observation)
        check_render_mode(render_mode, self.metadata["render_modes"])
        task.check_vocab()  # the task's own reading of its vocabulary (every env reads answers one way)
        self.task = task
        self.split = split
        self.reward_weights = RewardWeights.of(accuracy_weight, format_weight, reward_weights)
        self.render_mode = render_mode

        vocab_size = len(task.vocab)
        self._vocab_size = vocab_size
        self._eos, self._max_length = task.eos_id, task.max_length  # read on every step
        self._reply_after = task.reply_after
        self._prefix_offset = task.prompt_dim
        obs_dim = task.prompt_dim + task.max_length * vocab_size
        self.observation_space = spaces.Box(0.0, 1.0, shape=(obs_dim,), dtype=np.float32)
        self.action_space = spaces.Discrete(vocab_size)
        #: Named slices of the observation vector (prompt segments, then ``"prefix"``: one one-hot row
        #: of ``len(vocab)`` per answer position, all zeros where no token was emitted yet).
        self.obs_layout: dict[str, slice] = {
            **task.prompt_layout,
            "prefix": slice(self._prefix_offset, obs_dim),
        }
        self._obs = np.zeros(obs_dim, dtype=np.float32)
        #: With ``observation="tokens"``: the builder of the token-context rows (``rlvr_env.token_obs``),
        #: which then replace the features above (space, layout and buffer).
        self.token_context: TokenContext | None = None
        if observation == "tokens":
            self.token_context = ctx = TokenContext(task)
            self.observation_space = ctx.space
            self.obs_layout = ctx.layout
            self._prefix_offset = ctx.prompt_width
            self._obs = np.zeros(ctx.length, dtype=np.int64)

        self._prompt: Any = None  # the task's prompt value (None before the first reset)
        self._tokens: list[int] = []
        self._done = False

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options={options!r} must be a dict or None")
        if options and "prompt" in options:
            unknown = set(options) - {"prompt"}
            if unknown:
                raise ValueError(f"unknown reset options {sorted(unknown)}; only 'prompt' is accepted")
            prompt = self.task.validate_prompt(options["prompt"])
        else:
            if options:
                raise ValueError(f"unknown reset options {sorted(options)}; only 'prompt' is accepted")
            prompt = self.task.sample_prompt(self.np_random, self.split)
        self._prompt = prompt
        self._tokens = []
        self._done = False
        self._obs[:] = 0
        ctx = self.token_context
        self._obs[: self._prefix_offset] = (self.task if ctx is None else ctx).encode_prompt(prompt)
        return self._obs.copy(), {"prompt": prompt, "split": self.task.split_of(prompt)}

    def step(
        self, action: object
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._prompt is None:
            raise ResetNeeded("step() was called before reset(); call reset() to draw a prompt first")
        if self._done:
            raise ResetNeeded("step() was called after the episode ended; call reset() to start a new one")
        if type(action) is int and 0 <= action < self._vocab_size:  # the common case, without a call
            token = action
        else:
            token = check_action(action, self._vocab_size)
        self._write(token)
        if token in self._reply_after and token != self._eos:  # the env's own tokens (a tool's output)
            for t in self.task.reply(self._prompt, tuple(self._tokens))[: self._max_length - len(self._tokens)]:
                self._write(t)
        position = len(self._tokens) - 1

        terminated = truncated = False
        if token == self._eos:
            terminated = True
        elif position + 1 >= self._max_length:
            # Fixed-length tasks end after max_length tokens; EOS tasks that never emitted EOS are cut off.
            terminated = self._eos is None
            truncated = not terminated
        if not (terminated or truncated):
            return self._obs.copy(), 0.0, False, False, {}

        self._done = True
        verdict = self.task.score(self._prompt, self._tokens, self.reward_weights, truncated=truncated)
        return self._obs.copy(), float(verdict.reward), terminated, truncated, self._final_info(verdict)

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: the prompt and the answer so far. Without a render mode it warns
        (through ``gymnasium.logger``, as Gymnasium's own environments do) and returns None."""
        if self.render_mode != "ansi":
            warn_no_render_mode(self)
            return None
        if self._prompt is None:
            return "(no episode: call reset())"
        answer = " ".join(self.task.vocab[t] for t in self._tokens)
        status = " [done]" if self._done else ""
        return f"{self.task.render_prompt(self._prompt)} | answer: {answer}{status}"

    # -- helpers ----------------------------------------------------------------------------------
    def _write(self, token: int) -> None:
        """Append ``token`` to the answer and to the observation."""
        position = len(self._tokens)
        if self.token_context is None:
            self._obs[self._prefix_offset + position * self._vocab_size + token] = 1.0
        else:  # the token context: the answer's next position holds the token's context id
            self._obs[self._prefix_offset + position] = self.token_context.answer_offset + token
        self._tokens.append(token)

    def action_masks(self) -> np.ndarray:
        """(V,) bool mask of tokens that keep the answer well-formed (sb3-contrib MaskablePPO reads it)."""
        if self._prompt is None:
            raise ResetNeeded("action_masks() was called before reset()")
        return self.task.action_mask(self._prompt, self._tokens)

    @property
    def prompt(self) -> Any:
        """The current episode's prompt, a value of the task's prompt type (None before the first
        reset)."""
        return self._prompt

    def _final_info(self, verdict: Verdict) -> dict[str, Any]:
        info = self._verdict_info(verdict)
        if self.task.has_episode_stats:
            info["stats"] = self.task.episode_stats(self._prompt, tuple(self._tokens))
        return info

    def _verdict_info(self, verdict: Verdict) -> dict[str, Any]:
        return {
            "prompt": self._prompt,
            "reward_parts": dict(verdict.parts),
            "expression": verdict.expression,
            "value": verdict.value,
            "reason": verdict.reason,
            "correct": verdict.correct,
            "well_formed": verdict.well_formed,
            "length": len(self._tokens),
        }
