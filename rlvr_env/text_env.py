"""Text-mode environments: one-step episodes whose observation is a prompt and whose action is a
completion, for language-model agent code that speaks Gymnasium."""

from __future__ import annotations

import string
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from rlvr_env.completions import DEFAULT_FORMAT, AnswerFormat, prompt_text, score_task_completion
from rlvr_env.envs import check_render_mode
from rlvr_env.rewards import DEFAULT_WEIGHTS, RewardWeights, Verdict
from rlvr_env.tasks.base import Task, check_split

__all__ = ["TextEnv", "TextAsArrays", "CHARSET"]

#: The characters of the observation and action spaces: printable ASCII and whitespace.
CHARSET = string.printable
#: Longest prompt text (observations are far shorter; the bound is the Text space's).
MAX_PROMPT_CHARS = 1024


class TextEnv(gym.Env[str, str]):
    """A one-step text environment over a :class:`~rlvr_env.tasks.base.Task`.

    ``reset`` draws a prompt exactly as the token env of the same task does (same split, same
    ``np_random`` draw, so the same seed gives the same prompt) and returns its text
    (:func:`rlvr_env.completions.prompt_text`). ``step(completion)`` takes the model's completion,
    extracts the answer (:func:`rlvr_env.completions.extract_answer`), has the task verify it
    (:meth:`rlvr_env.Task.score_text`, so an override of ``score`` is paid here too) and ends the episode
    (``terminated=True``). Reward and final ``info`` are the token env's: ``reward_parts``,
    ``expression``, ``value``, ``reason``, ``correct``, ``well_formed``, ``length`` (here the completion's
    length in characters) and ``prompt``.

    Spaces: ``observation_space`` is ``Text(1024)`` and ``action_space`` is ``Text(max_chars, min_length=0)``,
    both over printable ASCII (:data:`CHARSET`). ``step`` accepts any ``str``: characters outside the
    charset, or a completion longer than ``max_chars``, are not an error but an answer the verifier
    refuses (reward 0 and the reason in ``info``), because that is what a language model can emit.
    A non-``str`` action raises ``TypeError``.
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
        answer_format: AnswerFormat = DEFAULT_FORMAT,
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(split, str):
            raise ValueError(f"split={split!r} must be a string, one of ('train', 'test')")
        check_split(split)
        if not isinstance(answer_format, AnswerFormat):
            raise ValueError(f"answer_format={answer_format!r} must be an rlvr_env.completions.AnswerFormat")
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.task = task
        self.split = split
        self.answer_format = answer_format
        self.reward_weights = RewardWeights.of(accuracy_weight, format_weight, reward_weights)
        self.render_mode = render_mode
        self.observation_space = spaces.Text(MAX_PROMPT_CHARS, min_length=1, charset=CHARSET)
        self.action_space = spaces.Text(answer_format.max_chars, min_length=0, charset=CHARSET)
        self._prompt: Any = None  # the task's prompt value (None before the first reset)
        self._text = ""
        self._done = False
        self._last: Verdict | None = None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options={options!r} must be a dict or None")
        options = options or {}
        unknown = set(options) - {"prompt"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; only 'prompt' is accepted")
        if "prompt" in options:
            prompt = self.task.validate_prompt(options["prompt"])
        else:
            prompt = self.task.sample_prompt(self.np_random, self.split)
        self._prompt = prompt
        self._text = prompt_text(self.task, prompt, self.answer_format)
        if len(self._text) > MAX_PROMPT_CHARS:  # pragma: no cover - prompts are a few hundred chars
            raise ValueError(f"prompt text of {len(self._text)} characters exceeds {MAX_PROMPT_CHARS}")
        self._done = False
        self._last = None
        return self._text, {"prompt": prompt, "split": self.task.split_of(prompt)}

    def step(self, action: object) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        self._check_step(action)
        assert isinstance(action, str)  # _check_step refused anything else
        verdict = score_task_completion(self.task, self._prompt, action, self.reward_weights,
                                        self.answer_format)
        self._done = True
        self._last = verdict
        return self._text, float(verdict.reward), True, False, self._verdict_info(verdict, len(action))

    def _check_step(self, action: object) -> None:
        """Raise what a step may not be given: before a reset or after the end ``ResetNeeded``, anything
        but a ``str`` ``TypeError``."""
        if self._prompt is None:
            raise ResetNeeded("step() was called before reset(); call reset() to draw a prompt first")
        if self._done:
            raise ResetNeeded("step() was called after the episode ended; call reset() to start a new one")
        if not isinstance(action, str):
            raise TypeError(f"action {action!r:.80} of type {type(action).__name__} is not a completion; "
                            "expected a str")

    def _verdict_info(self, verdict: Verdict, length: int) -> dict[str, Any]:
        return {
            "prompt": self._prompt,
            "reward_parts": dict(verdict.parts),
            "expression": verdict.expression,
            "value": verdict.value,
            "reason": verdict.reason,
            "correct": verdict.correct,
            "well_formed": verdict.well_formed,
            "length": length,
        }

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self._prompt is None:
            return "(no episode: call reset())"
        if self._last is None:
            return self._text
        return f"{self._text}\n-> {self._last.expression!r}: reward {self._last.reward} " \
               f"({self._last.reason or 'correct'})"

    @property
    def prompt(self) -> Any:
        """The current episode's prompt (None before the first reset)."""
        return self._prompt


class TextAsArrays(gym.Wrapper):  # type: ignore[type-arg]  # Wrapper.__init__ mistypes the inner env
    """A text env seen through arrays: observation = the prompt's ASCII codes, action = the codes of a
    completion. For code that only handles array spaces (Stable-Baselines3's ``check_env`` asserts that
    every observation is a NumPy array and runs ``np.isnan`` on every action, so a ``Text`` space cannot
    pass it; through this wrapper the same env does).

    ``observation_space`` is ``Box(0, 127, (1024,), uint8)``: the prompt's character codes, zero-padded.
    ``action_space`` is ``MultiDiscrete([128] * max_chars)``: character codes; the completion is the
    characters before the first 0. Reward and info are the wrapped env's.

    >>> import gymnasium as gym
    >>> import rlvr_env
    >>> env = TextAsArrays(gym.make("rlvr/ArithmeticText-v0"), max_chars=32)
    >>> obs, info = env.reset(seed=0)
    >>> bytes(obs[obs > 0]).decode()[:40]
    'Write an arithmetic expression that equa'
    >>> action = np.zeros(32, dtype=np.int64)
    >>> action[:22] = list(b"<answer>5*2*3</answer>")
    >>> env.step(action)[1]
    1.1
    """

    def __init__(self, env: gym.Env[str, str], max_chars: int = 64) -> None:
        super().__init__(env)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or not 1 <= max_chars <= 4096:
            raise ValueError(f"max_chars={max_chars!r} must be an integer in [1, 4096]")
        self.max_chars = max_chars
        self.observation_space = spaces.Box(0, 127, shape=(MAX_PROMPT_CHARS,), dtype=np.uint8)
        self.action_space = spaces.MultiDiscrete(np.full(max_chars, 128, dtype=np.int64))

    def _codes(self, text: str) -> np.ndarray:
        out = np.zeros(MAX_PROMPT_CHARS, dtype=np.uint8)
        raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        out[: len(raw)] = raw
        return out

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        text, info = self.env.reset(seed=seed, options=options)
        return self._codes(text), info

    def step(self, action: object) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        codes = np.asarray(action)
        if codes.shape != (self.max_chars,) or not np.issubdtype(codes.dtype, np.integer):
            raise ValueError(f"action of shape {codes.shape} and dtype {codes.dtype} must be "
                             f"{self.max_chars} integer character codes")
        if codes.min(initial=0) < 0 or codes.max(initial=0) > 127:
            raise ValueError(f"action codes must lie in [0, 127], got {codes.min()}..{codes.max()}")
        zeros = np.flatnonzero(codes == 0)
        end = int(zeros[0]) if len(zeros) else self.max_chars
        text = bytes(codes[:end].astype(np.uint8)).decode("ascii")
        obs, reward, terminated, truncated, info = self.env.step(text)
        return self._codes(obs), reward, terminated, truncated, info
