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
  :attr:`whole_completion` (the task reads a whole completion, its own tags included, rather than an answer
  cut out between tags), :meth:`tokens_text` (tokens as text :meth:`parse_answer` reads back),
  :meth:`prompt_record` / :meth:`prompt_from_record` (default: the prompt's own text and the vocabulary's
  strings; records are offered by tasks whose prompts are plain JSON values), :meth:`keywords` (the
  settings a row carries to rebuild the task; default ``{}`` for a task built without arguments);
* the reward's parts: :attr:`reward_parts` (default ``("accuracy", "format")``; a task that pays more
  names them, so every consumer reports them and knows the best reward, :meth:`best_reward`);
* batches for the native vector env: :meth:`sample_batch`, :meth:`prompt_batch`, :meth:`batch_prompt`,
  :meth:`encode_batch`, :meth:`context_batch` and :meth:`batch_scorer` (default: prompts as the task's own
  values in one object column, answers scored through :meth:`score_batch`; a family with an array
  verifier offers a faster :class:`~rlvr_env.scoring.BatchScorer`), :meth:`is_one_prompt`;
* the vocabulary's own check: :meth:`check_vocab` (every env calls it).

The prompt type is the task's own immutable, hashable value (a frozen dataclass, a tuple, ...): it is what
``reset`` puts in ``info["prompt"]`` and what ``reset(options={"prompt": p})`` replays. The arithmetic
tasks use :class:`rlvr_env.Prompt` (numbers and a target) through
:class:`rlvr_env.tasks.expression.ExpressionTask`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from rlvr_env.rewards import BASE_PARTS, RewardWeights, Verdict, best_reward, refused_verdict
from rlvr_env.scoring import BatchScorer, PromptBatch, TaskScorer, batch_length, object_column

__all__ = ["ContextTokens", "Task", "SPLITS", "check_split"]

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
    #: The named parts :meth:`score` pays (the keys of a verdict's ``parts``), each weighed by the env's
    #: :class:`~rlvr_env.RewardWeights`; a part not named here is still paid, but not reported as the
    #: task's (a benchmark's best reward, a bridge's columns).
    reward_parts: tuple[str, ...] = BASE_PARTS

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

    def best_reward(self, weights: RewardWeights) -> float:
        """The most one answer can earn under ``weights``: :func:`rlvr_env.rewards.best_reward` over
        :attr:`reward_parts` (each raw part at most 1)."""
        return best_reward(weights, self.reward_parts)

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

    # -- what the environment writes: a tool's output ----------------------------------------------
    #: Action ids after which the env may write tokens of its own (:meth:`reply`); empty (the default):
    #: it never does, and the envs never ask.
    reply_after: frozenset[int] = frozenset()

    def reply(self, prompt: P, tokens: Sequence[int]) -> tuple[int, ...]:
        """Tokens the environment writes right after the policy's last token (``tokens[-1]``, one of
        :attr:`reply_after`): a tool's output, such as a calculator's result. They join the answer (the
        observation shows them, :meth:`score` reads them) but are never actions, so a policy takes no
        gradient through them. Default: nothing."""
        return ()

    def episode_stats(self, prompt: P, tokens: Sequence[int]) -> dict[str, float]:
        """Measurements of a finished answer that are not paid (a trace's steps, its failed branches, ...):
        the envs put them in the final ``info["stats"]`` and GRPO logs their means. Default: none."""
        return {}

    @property
    def has_episode_stats(self) -> bool:
        """Whether :meth:`episode_stats` is implemented (the envs skip the call otherwise)."""
        return type(self).episode_stats is not Task.episode_stats

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
    #: Whether the task reads a completion whole (False, the default: the text layer cuts the answer out
    #: from between the answer tags first, :mod:`rlvr_env.completions`). A task whose answer has sections
    #: and tags of its own (a think section, then the answer) sets it: its :meth:`score_text` is then
    #: handed the completion's text as it is, so it can pay the sections' structure.
    whole_completion: bool = False

    def tokens_text(self, token_ids: Sequence[int]) -> str:
        """Token ids as text that :meth:`parse_answer` reads back to the same ids: what the text envs
        write for the environment's own tokens (:meth:`reply`). Default: the vocabulary strings, separated
        by single spaces."""
        return " ".join(self.vocab[t] for t in token_ids)

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

    # -- batches: the native vector env ---------------------------------------------------------
    def sample_batch(self, rng: np.random.Generator, split: str, k: int) -> PromptBatch:
        """``k`` prompts of ``split`` drawn with ``rng`` as a :data:`~rlvr_env.scoring.PromptBatch` (default:
        :meth:`sample_prompts` in the object column ``"prompt"``). The draws are :meth:`sample_prompts`'s."""
        return self.prompt_batch(self.sample_prompts(rng, split, k))

    def prompt_batch(self, prompts: Sequence[P]) -> PromptBatch:
        """Valid prompts of this task as a :data:`~rlvr_env.scoring.PromptBatch` in the form this task's
        :meth:`batch_scorer` reads (default: the object column ``"prompt"``)."""
        return {"prompt": object_column(prompts)}

    def batch_prompt(self, batch: PromptBatch, row: int) -> P:
        """Prompt ``row`` of ``batch`` as this task's own value."""
        return batch["prompt"][row]  # type: ignore[no-any-return]

    def encode_batch(self, batch: PromptBatch) -> np.ndarray:
        """(k, prompt_dim) float32 features of a batch (default: :meth:`encode_prompt` once per distinct
        prompt object)."""
        return _stack_once(self.encode_prompt, batch, self, (self.prompt_dim,), np.float32)

    def context_batch(self, batch: PromptBatch) -> np.ndarray:
        """(k, P) int64 token-context prompt segments of a batch (default: :meth:`encode_context` once per
        distinct prompt object). Called only when :meth:`context_tokens` is not None."""
        spec = self.context_tokens()
        width = spec.width if spec is not None else 0
        return _stack_once(self.encode_context, batch, self, (width,), np.int64)

    def batch_scorer(self, num_rows: int, weights: RewardWeights) -> BatchScorer:
        """The :class:`~rlvr_env.scoring.BatchScorer` a native vector env of ``num_rows`` rows scores with
        (default: :class:`~rlvr_env.scoring.TaskScorer`, this task's :meth:`score_batch` on finished rows).
        A family with an array verifier returns a faster one that pays exactly what :meth:`score` pays;
        a subclass that overrides ``score`` must then fall back to the default."""
        return TaskScorer(self, num_rows, weights)

    def is_one_prompt(self, value: object) -> bool:
        """Whether a vector env's ``reset(options={"prompt": value})`` names one prompt for every row
        (True) or a sequence of prompts, one per row (False). Default: anything but a ``list`` is one
        prompt (prompts are hashable values, never lists)."""
        return not isinstance(value, list)

    def check_vocab(self) -> None:
        """Raise ``ValueError`` naming the token unless the vocabulary reads one way (every env calls it):
        the default asks for distinct non-empty strings without whitespace, since :meth:`decode` joins
        them and :meth:`parse_answer` splits text back into them. A family whose verifier reads tokens
        more strictly checks more (the arithmetic families: every token is one number, operator or
        parenthesis)."""
        if not isinstance(self.vocab, tuple) or not self.vocab:
            raise ValueError(f"task {type(self).__name__}.vocab={self.vocab!r:.80} must be a non-empty "
                             "tuple of token strings")
        seen: set[str] = set()
        for i, tok in enumerate(self.vocab):
            if not isinstance(tok, str) or not tok or tok != tok.strip() or any(c.isspace() for c in tok):
                raise ValueError(f"vocabulary token {i} {tok!r} must be a non-empty string without "
                                 "whitespace")
            if tok in seen:
                raise ValueError(f"vocabulary token {i} {tok!r} appears twice; token strings must be "
                                 "distinct")
            seen.add(tok)


def _stack_once(encode: Any, batch: PromptBatch, task: Task[Any], shape: tuple[int, ...],
                dtype: Any) -> np.ndarray:
    """``encode(prompt)`` of each prompt of ``batch``, once per distinct object (a group repeats one)."""
    k = batch_length(batch)
    if k == 0:
        return np.zeros((0, *shape), dtype=dtype)
    done: dict[int, np.ndarray] = {}
    rows = []
    for i in range(k):
        p = task.batch_prompt(batch, i)
        row = done.get(id(p))
        if row is None:
            row = done[id(p)] = np.asarray(encode(p))
        rows.append(row)
    return np.stack(rows).astype(dtype)


def check_split(split: str) -> None:
    """Raise ValueError unless ``split`` is a known split name."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not one of {SPLITS}")
