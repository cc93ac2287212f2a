"""The Task contract: everything an environment, a cold start or a language-model bridge needs from a task.

A *task* is a family of prompts plus its verifier. Every ability the envs use is declared here, on
:class:`Task`, with a default where one makes sense; nothing in the package probes a task with
``hasattr``. A new task implements the required part and overrides the optional abilities it has:

**Required** (abstract): ``name``, ``vocab`` (answer tokens, id = index), ``max_length``, ``eos_id``
(None: fixed-length answers); :meth:`sample_prompt`, :meth:`validate_prompt`, :meth:`split_of`;
:attr:`prompt_layout` and :meth:`encode_prompt` (the ``"features"`` observation); :meth:`score`.

**Optional, with defaults** (what a task gets for free):

* prompts: :meth:`prompts` (a finite list, default None = sampled), :meth:`sample_prompts` (k at once,
  default: k calls of :meth:`sample_prompt`), :meth:`render_prompt` (one line of text);
* answers: :meth:`decode` (default: the vocabulary strings joined up to EOS);
* scoring a batch: :meth:`score_batch` (default: :meth:`score` per answer, so an override of ``score`` is
  paid on every path: single env, native vector env, text env and GRPO alike);
* masks: :meth:`action_mask` and :meth:`action_masks_batch` (default all-ones), :attr:`grammar_masked`;
* the token observation (``observation="tokens"``): :meth:`context_tokens` and :meth:`encode_context`
  (default None: not offered);
* a cold start: :meth:`solution` (default None: no known solution), :attr:`has_solutions`;
* text (text env and LLM bridges): :meth:`prompt_text`, :meth:`parse_answer`, :meth:`score_text`,
  :meth:`prompt_record` / :meth:`prompt_from_record` (default: the prompt's own text and the vocabulary's
  strings; records are offered by tasks whose prompts are plain JSON values), :meth:`keywords` (the
  settings a row carries to rebuild the task; default ``{}`` for a task built without arguments);
* an array fast path for the native vector env: :meth:`batch_arrays` (default None: the vector env runs
  the generic path, prompts as Python values and answers scored through :meth:`score_batch`).

The prompt type is the task's own immutable, hashable value (a frozen dataclass, a tuple, ...): it is what
``reset`` puts in ``info["prompt"]`` and what ``reset(options={"prompt": p})`` replays. The arithmetic
tasks use :class:`Prompt` (numbers and a target) through :class:`rlvr_env.tasks.expression.ExpressionTask`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np

from rlvr_env.tasks.expression.verifier import Grammar
from rlvr_env.rewards import RewardWeights, Verdict, refused_verdict

if TYPE_CHECKING:
    from rlvr_env.tasks.countdown.masks import MaskAutomaton
    from rlvr_env.tasks.countdown.programs import ProgramTable

__all__ = ["BatchArrays", "ContextTokens", "Task", "SPLITS", "check_split"]

#: The split names every task understands.
SPLITS: tuple[str, ...] = ("train", "test")

P = TypeVar("P", bound=Hashable)


@dataclass(frozen=True)
class ContextTokens:
    """How a task writes its prompts for ``observation="tokens"`` (:mod:`rlvr_env.token_obs`).

    ``vocab``: the context's own tokens, which come before the task's answer tokens in the context
    vocabulary (``vocab[0]`` must be ``"<pad>"``: id 0 is padding); action ``a`` is context id
    ``len(vocab) + a``. ``width``: the prompt segment's length P (every prompt fits, left-padded).
    """

    vocab: tuple[str, ...]
    width: int

    def __post_init__(self) -> None:
        if not self.vocab or self.vocab[0] != "<pad>":
            raise ValueError(f"ContextTokens.vocab={self.vocab!r:.80} must start with '<pad>' (id 0 pads)")
        if isinstance(self.width, bool) or not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"ContextTokens.width={self.width!r} must be a positive integer")


class BatchArrays(Protocol):
    """The array fast path of the native vector env (:meth:`Task.batch_arrays` returns one, or None).

    Offered by a task whose prompts are numbers and a target (:class:`Prompt`) and whose :meth:`Task.score`
    is :func:`rlvr_env.verify` under ``grammar``: then the vector env holds prompts as arrays and verifies
    answers incrementally with array operations that agree exactly with ``verify``. A task that overrides
    ``score`` (or ``score_batch``, ``decode``) must not offer it: its verifier would be bypassed.
    """

    grammar: Grammar
    n_numbers: int
    #: the numbers' range when bounded (lets answers be scored by table lookup), else None
    number_range: tuple[int, int] | None

    def sample_arrays(self, rng: np.random.Generator, split: str,
                      k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """k prompts of ``split`` drawn with ``rng``: numbers (k, N), targets (k,) and a (k, ...) array of
        per-prompt facts (Countdown: each generating expression)."""

    def encode_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, prompt_dim) float32 features of prompts given as arrays (:meth:`Task.encode_prompt`)."""

    def context_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, P) int64 token-context prompt segments (:meth:`Task.encode_context`)."""

    def action_masks_arrays(self, tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """(B, V) bool masks of prefixes ``tokens[b, :lengths[b]]``."""

    def mask_automaton(self) -> MaskAutomaton | None:
        """The masks as a state table, or None (masks are computed from the prefixes)."""

    def program_table(self) -> ProgramTable | None:
        """The answer shapes as a trie of programs (scoring by lookup), or None."""


class Task(ABC, Generic[P]):
    """A family of prompts with a vocabulary and a verifier; see the module docstring for the contract.

    Subclasses set :attr:`name`, :attr:`vocab` (token strings, id = index), :attr:`max_length` and
    :attr:`eos_id` (None when answers have a fixed length and end after ``max_length`` tokens), and
    implement the abstract methods; the other methods are abilities with defaults.
    """

    name: str
    vocab: tuple[str, ...]
    max_length: int
    eos_id: int | None
    #: Observation segments a lookup-table policy should key on (those the answer depends on);
    #: None means the whole observation.
    tabular_segments: tuple[str, ...] | None = None
    #: What an answer is called in a language model's prompt ("give the <answer_noun> alone between
    #: <answer> and </answer>"); the arithmetic tasks say "expression", Digits "number".
    answer_noun: str = "answer"

    # -- prompts (required) ----------------------------------------------------------------------
    @abstractmethod
    def sample_prompt(self, rng: np.random.Generator, split: str) -> P:
        """Draw one prompt of ``split`` using only ``rng``."""

    @abstractmethod
    def validate_prompt(self, prompt: object) -> P:
        """Return ``prompt`` as a prompt of this task, or raise ``ValueError`` naming the value and the
        rule."""

    @abstractmethod
    def split_of(self, prompt: P) -> str:
        """Which split (``"train"`` or ``"test"``) a valid prompt belongs to."""

    # -- prompts (optional) ----------------------------------------------------------------------
    def prompts(self, split: str) -> tuple[P, ...] | None:
        """All prompts of ``split`` when the task is finite, else None (sample instead)."""
        return None

    def sample_prompts(self, rng: np.random.Generator, split: str, k: int) -> list[P]:
        """``k`` prompts of ``split`` using only ``rng`` (default: ``k`` calls of :meth:`sample_prompt`)."""
        return [self.sample_prompt(rng, split) for _ in range(k)]

    def render_prompt(self, prompt: P) -> str:
        """The prompt as one line of text (``render_mode="ansi"``, logs)."""
        return str(prompt)

    # -- the "features" observation (required) ---------------------------------------------------
    @property
    @abstractmethod
    def prompt_layout(self) -> dict[str, slice]:
        """Named slices of :meth:`encode_prompt`'s vector."""

    @property
    def prompt_dim(self) -> int:
        return max(s.stop for s in self.prompt_layout.values())

    @abstractmethod
    def encode_prompt(self, prompt: P) -> np.ndarray:
        """(prompt_dim,) float32 features in [0, 1] that describe the prompt to a policy."""

    # -- answers and scoring ---------------------------------------------------------------------
    def decode(self, token_ids: Sequence[int], prompt: P) -> str:
        """The answer as text: the vocabulary strings of ``token_ids`` joined, up to the first EOS."""
        out = []
        for i in token_ids:
            if i == self.eos_id:
                break
            out.append(self.vocab[i])
        return "".join(out)

    @abstractmethod
    def score(self, prompt: P, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        """Verify one finished answer. The verdict's ``parts`` (named, weighted) sum to its ``reward``.
        ``truncated``: the answer hit ``max_length`` without EOS (:func:`truncated_verdict` is the
        usual verdict: nothing is paid)."""

    def score_batch(self, prompts: Sequence[P], answers: Sequence[Sequence[int]], weights: RewardWeights,
                    truncated: Sequence[bool]) -> list[Verdict]:
        """One verdict per answer, equal to :meth:`score`'s (the default calls it per answer). Override it
        only to score faster, never differently: every env scores through it or through ``score``."""
        return [self.score(p, a, weights, truncated=bool(t)) for p, a, t in zip(prompts, answers, truncated)]

    # -- masks -----------------------------------------------------------------------------------
    def action_mask(self, prompt: P, prefix: Sequence[int]) -> np.ndarray:
        """(V,) bool: tokens that keep ``prefix`` a prefix of some well-formed answer.

        The default allows every token; tasks with a grammar mask override it.
        """
        return np.ones(len(self.vocab), dtype=bool)

    def action_masks_batch(self, prompts: Sequence[P], tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """(B, V) bool masks of the prefixes ``tokens[b, :lengths[b]]`` of ``prompts[b]`` (default:
        :meth:`action_mask` per row, or all-ones without a grammar mask)."""
        if not self.grammar_masked:
            return np.ones((len(prompts), len(self.vocab)), dtype=bool)
        rows = [self.action_mask(p, tokens[b, : int(lengths[b])].tolist()) for b, p in enumerate(prompts)]
        return np.stack(rows) if rows else np.ones((0, len(self.vocab)), dtype=bool)

    @property
    def grammar_masked(self) -> bool:
        """Whether :meth:`action_mask` can forbid a token (False: every token is always allowed, as the
        default does). Agents and labels read it to tell a real grammar mask from an all-ones one."""
        return type(self).action_mask is not Task.action_mask

    # -- the "tokens" observation ----------------------------------------------------------------
    def context_tokens(self) -> ContextTokens | None:
        """The prompt side of ``observation="tokens"`` (:class:`ContextTokens`), or None: not offered."""
        return None

    def encode_context(self, prompt: P) -> np.ndarray:
        """(P,) int64 context ids of ``prompt``, left-padded with 0; ids index
        ``context_tokens().vocab + vocab``. Called only when :meth:`context_tokens` is not None."""
        raise NotImplementedError(f"task {type(self).__name__} offers no token observation")

    # -- a cold start ----------------------------------------------------------------------------
    def solution(self, prompt: P) -> tuple[int, ...] | None:
        """A correct answer's token ids (EOS included when the task has one) for a prompt this task drew,
        or None when none is known. A supervised cold start reads it."""
        return None

    @property
    def has_solutions(self) -> bool:
        """Whether :meth:`solution` is implemented (a cold start needs it)."""
        return type(self).solution is not Task.solution

    # -- text: the text env and the language-model bridges ----------------------------------------
    def prompt_text(self, prompt: P, instruction: str) -> str:
        """What a language model reads: the task's question for ``prompt`` and then ``instruction`` (where
        to put the answer, from :class:`rlvr_env.completions.AnswerFormat`)."""
        return f"{self.render_prompt(prompt)}\n{instruction}"

    def parse_answer(self, prompt: P, text: str) -> list[int] | None:
        """Token ids for an extracted answer text, or None when the text cannot be written in the
        vocabulary. Default: longest vocabulary string first, whitespace between tokens ignored."""
        order = sorted((t for t in range(len(self.vocab)) if t != self.eos_id),
                       key=lambda t: -len(self.vocab[t]))
        ids: list[int] = []
        pos, text = 0, text.strip()
        while pos < len(text):
            if text[pos].isspace():
                pos += 1
                continue
            for t in order:
                tok = self.vocab[t]
                if tok and text.startswith(tok, pos):
                    ids.append(t)
                    pos += len(tok)
                    break
            else:
                return None
        return ids

    def score_text(self, prompt: P, text: str, weights: RewardWeights) -> Verdict:
        """Verify an extracted answer text: :meth:`parse_answer`, then :meth:`score` (EOS appended when the
        task has one; an answer longer than ``max_length`` tokens is scored as truncated)."""
        ids = self.parse_answer(prompt, text)
        if ids is None:
            return refused_verdict(f"answer {text!r:.60} cannot be written in this task's vocabulary", text)
        if self.eos_id is not None:
            ids.append(self.eos_id)
        truncated = len(ids) > self.max_length
        return self.score(prompt, ids[: self.max_length], weights, truncated=truncated)

    def keywords(self) -> dict[str, Any]:
        """The keyword arguments (plain JSON values) that rebuild this task from its registered name,
        ``TASKS[name](**keywords)``: what a language-model row carries beside the prompt's record, so a
        scorer that sees only the row (verl's ``compute_score``, a ``verifiers`` trace) pays as this task
        does. The default serves a task whose constructor takes no arguments (``{}``); it refuses for a
        task whose constructor takes some, which overrides it (a row scored under default settings would
        be paid wrongly without a word)."""
        taken = list(inspect.signature(type(self)).parameters)
        if taken:
            raise NotImplementedError(f"task {type(self).__name__} takes {taken}: override Task.keywords to "
                                      "return the values it was built with")
        return {}

    def prompt_record(self, prompt: P) -> dict[str, Any]:
        """The prompt as plain JSON values (a dataset row's columns); the inverse is
        :meth:`prompt_from_record`. The default refuses: a task with JSON prompts overrides both."""
        raise NotImplementedError(f"task {type(self).__name__} does not write its prompts as records")

    def prompt_from_record(self, record: dict[str, Any]) -> P:
        """The prompt of a record written by :meth:`prompt_record` (validated)."""
        raise NotImplementedError(f"task {type(self).__name__} does not read its prompts from records")

    # -- the native vector env's array fast path ---------------------------------------------------
    def batch_arrays(self) -> BatchArrays | None:
        """The array fast path (:class:`BatchArrays`), or None: the vector env then holds prompts as
        Python values and scores through :meth:`score_batch` (the default)."""
        return None


def check_split(split: str) -> None:
    """Raise ValueError unless ``split`` is a known split name."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not one of {SPLITS}")
