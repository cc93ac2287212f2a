"""A multi-turn text environment: the model writes, the environment writes its tool's output where the task
says, and the whole transcript is paid at the end (docs/think.md, "The calculator for language-model
trainers")."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from rlvr_env.completions import DEFAULT_FORMAT, AnswerFormat, score_task_completion
from rlvr_env.rewards import DEFAULT_WEIGHTS
from rlvr_env.tasks.base import Task
from rlvr_env.text_env import CHARSET, MAX_PROMPT_CHARS, TextEnv

__all__ = ["TextToolEnv"]


class TextToolEnv(TextEnv):
    """
    ## Description

    The text form of a token env whose task writes tokens of its own (:attr:`rlvr_env.Task.reply_after`
    and :meth:`rlvr_env.Task.reply`: a calculator's result after ``a op b =``). ``reset`` returns the
    prompt text, as :class:`TextEnv` does. Each ``step(text)`` takes the model's next piece of the
    transcript, up to and including a stop string (:attr:`stop_strings`, the vocabulary strings of the
    tokens the task replies after); the environment reads the transcript so far with the task's own
    tokens (:meth:`rlvr_env.Task.parse_answer`), asks the task for its reply, and returns the reply's
    text (:meth:`rlvr_env.Task.tokens_text`, e.g. ``" 63 ;"``) as the observation. The model goes on after
    it. The step whose text holds :attr:`end_string` (the task's end-of-sequence token, ``</answer>``)
    ends the episode, and so does a step that does not end in a stop string (the model's turn ended
    without asking for the tool): the whole transcript, the model's text and the environment's, is then
    paid as the one-step text env pays a completion (:meth:`rlvr_env.Task.score_text`), so a transcript
    is paid what the token env pays for the same tokens.

    Write the stop strings into the text (vLLM: ``include_stop_str_in_output=True``; a stop string the
    rollout cuts off is a step that ends without one, which ends the episode). A step that ends in a stop
    string the task does not answer there (an ``=`` in the answer section) gets an empty observation and
    the episode goes on, as the token env goes on. A stop string in the middle of a step's text is the
    model's own text: the environment only ever writes after a step.

    ## Action Space

    ``Text(max_chars, min_length=0)`` over printable ASCII, as :class:`TextEnv`. Any ``str`` is accepted.

    ## Observation Space

    ``Text(1024, min_length=0)``: the prompt after ``reset``, then what the environment wrote this step
    (empty when it wrote nothing, and on the last step).

    ## Rewards

    Zero until the last step, which pays the whole transcript: reward and ``info`` are :class:`TextEnv`'s
    (``reward_parts``, ``expression``, ``value``, ``reason``, ``correct``, ``well_formed``, ``length``
    in characters of the transcript), plus ``transcript`` (the model's and the environment's text),
    ``model_mask`` (``(len(transcript),)`` bool, True where the model wrote the character), ``env_spans``
    (the ``(start, end)`` character spans the environment wrote), ``turns`` and, when the task measures
    them, ``stats``. The mask is the convention language-model trainers use to keep tool output out of
    the loss (verl's multi-turn response mask, TRL's tool mask): map it onto the model's tokens with the
    tokenizer's character offsets.

    ## Episode End

    Terminated by the end string, or by a step without a stop string. Truncated, and paid nothing (as
    the token env pays a transcript cut at its cap): when the transcript reaches the task's
    ``max_length`` tokens without the end string (the environment's tokens count; its reply is cut to
    the room left, as the token env cuts it), passes ``max_chars`` characters, or takes ``max_turns``
    turns. After the end, or before a reset, ``step`` raises ``ResetNeeded``; a non-``str`` action
    raises ``TypeError`` (:class:`TextEnv`'s errors).

    ## Arguments

    :class:`TextEnv`'s, and ``max_turns`` (default None: the task's ``max_length``, since every turn but
    the last writes at least its stop token). The task must reply after some tokens, have an
    end-of-sequence token and read completions whole (:attr:`rlvr_env.Task.whole_completion`);
    ``gym.make`` builds this env for a text id whose task replies (``rlvr/CountdownThinkText-v0`` with
    ``calculator=True``).
    """

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
        max_turns: int | None = None,
    ) -> None:
        name = type(task).__name__
        if not task.reply_after:
            raise ValueError(f"task {name} writes no tokens of its own (its reply_after is empty); "
                             "a one-step TextEnv serves it")
        if task.eos_id is None:
            raise ValueError(f"task {name} has no end-of-sequence token to end a transcript with")
        if not task.whole_completion:
            raise ValueError(f"task {name} does not read completions whole (whole_completion is False), "
                             "so the environment's text could not be paid as part of the transcript")
        super().__init__(task, split=split, accuracy_weight=accuracy_weight, format_weight=format_weight,
                         reward_weights=reward_weights, answer_format=answer_format, render_mode=render_mode)
        if max_turns is None:
            max_turns = task.max_length
        if isinstance(max_turns, bool) or not isinstance(max_turns, (int, np.integer)) or max_turns < 1:
            raise ValueError(f"max_turns={max_turns!r} must be a positive integer or None")
        self.max_turns = int(max_turns)
        self.max_chars = self.answer_format.max_chars
        #: The strings after which the environment may write (the model's rollout stops at them).
        self.stop_strings: tuple[str, ...] = tuple(sorted({task.vocab[t] for t in task.reply_after}))
        #: The string that ends the transcript (the task's end-of-sequence token).
        self.end_string: str = task.vocab[task.eos_id]
        self.observation_space = spaces.Text(MAX_PROMPT_CHARS, min_length=0, charset=CHARSET)
        self._transcript = ""
        self._env_spans: list[tuple[int, int]] = []
        self._turns = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        text, info = super().reset(seed=seed, options=options)
        self._transcript = ""
        self._env_spans = []
        self._turns = 0
        return text, {**info, "stop_strings": self.stop_strings, "end_string": self.end_string}

    def step(self, action: object) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        self._check_step(action)
        assert isinstance(action, str)  # _check_step refused anything else
        task, prompt = self.task, self._prompt
        self._turns += 1
        self._transcript += action
        if len(self._transcript) > self.max_chars:
            return self._finish(f"the transcript passed {self.max_chars} characters")
        if self.end_string in action or not action.rstrip().endswith(self.stop_strings):
            return self._finish(None)
        ids = task.parse_answer(prompt, self._transcript)
        if ids is None:  # unreadable: nothing written after it can mend it
            return self._finish(None)
        room = task.max_length - len(ids)
        reply: tuple[int, ...] = ()
        if room > 0 and ids and ids[-1] in task.reply_after:
            reply = tuple(task.reply(prompt, ids))[:room]
        written = ""
        if reply:
            written = ("" if self._transcript[-1:].isspace() else " ") + task.tokens_text(reply)
            start = len(self._transcript)
            self._transcript += written
            self._env_spans.append((start, len(self._transcript)))
        if len(ids) + len(reply) >= task.max_length:
            return self._finish(f"no {self.end_string!r} within {task.max_length} tokens", written)
        if len(self._transcript) > self.max_chars:
            return self._finish(f"the transcript passed {self.max_chars} characters", written)
        if self._turns >= self.max_turns:
            return self._finish(f"no {self.end_string!r} within {self.max_turns} turns", written)
        return written, 0.0, False, False, {"turn": self._turns}

    def _finish(self, cut: str | None, written: str = "") -> tuple[str, float, bool, bool, dict[str, Any]]:
        """End the episode: pay the transcript, or nothing when ``cut`` says why it was cut."""
        task, prompt = self.task, self._prompt
        self._done = True
        ids = task.parse_answer(prompt, self._transcript)
        kept = tuple(ids[: task.max_length]) if ids is not None else ()
        if cut is None:
            verdict = score_task_completion(task, prompt, self._transcript, self.reward_weights,
                                            self.answer_format)
        else:
            verdict = replace(task.score(prompt, kept, self.reward_weights, truncated=True),
                              reason=f"{cut} (truncated)")
        self._last = verdict
        info = self._verdict_info(verdict, len(self._transcript))
        info.update(transcript=self._transcript, model_mask=self.model_mask, env_spans=list(self._env_spans),
                    turns=self._turns)
        if task.has_episode_stats and ids is not None:
            info["stats"] = task.episode_stats(prompt, kept)
        return written, float(verdict.reward), cut is None, cut is not None, info

    @property
    def transcript(self) -> str:
        """The transcript so far: the model's text and the environment's."""
        return self._transcript

    @property
    def model_mask(self) -> np.ndarray:
        """``(len(transcript),)`` bool: True where the model wrote the character, False where the
        environment did."""
        mask = np.ones(len(self._transcript), dtype=bool)
        for start, end in self._env_spans:
            mask[start:end] = False
        return mask

    @property
    def env_spans(self) -> list[tuple[int, int]]:
        """The ``(start, end)`` character spans of the transcript that the environment wrote."""
        return list(self._env_spans)

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._prompt is None:
            return super().render()
        out = f"{self._text}\n{self._transcript}"
        if self._last is not None:
            out += f"\n-> reward {self._last.reward} ({self._last.reason or 'correct'})"
        return out
