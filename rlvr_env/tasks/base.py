"""The task protocol: what a token-emission environment needs to know about a family of prompts.

A *task* bundles a prompt sampler with its deterministic train / held-out split, a vocabulary, a grammar
and the verifier call. :class:`rlvr_env.envs.TokenEnv` is generic over tasks, so a new family of prompts
is one :class:`Task` subclass plus one ``gymnasium.register`` call.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlvr_env.verifier import Grammar, RewardWeights, Verdict, join_tokens, verify

__all__ = ["Prompt", "Task", "SPLITS", "check_split", "unpack_prompt"]

_SLOT = re.compile(r"n(\d+)\Z")

#: The split names every task understands.
SPLITS: tuple[str, ...] = ("train", "test")


@dataclass(frozen=True)
class Prompt:
    """One prompt: the numbers an answer may use and the target value. Immutable and hashable.

    ``meta`` holds optional, task-specific per-prompt facts (e.g. number of solutions) as a tuple of
    ``(name, value)`` pairs so the prompt stays hashable; it does not take part in equality.
    """

    numbers: tuple[int, ...]
    target: int
    meta: tuple[tuple[str, object], ...] = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Prompt):
            return NotImplemented
        return self.numbers == other.numbers and self.target == other.target

    def __hash__(self) -> int:
        return hash((self.numbers, self.target))

    def __repr__(self) -> str:
        return f"Prompt(numbers={self.numbers}, target={self.target})"

    def info(self) -> dict[str, object]:
        """The task-specific metadata as a dict."""
        return dict(self.meta)


class Task(ABC):
    """A family of prompts with a vocabulary, a grammar and a verifier.

    Subclasses set :attr:`name`, :attr:`vocab` (token strings, id = index), :attr:`max_length`,
    :attr:`eos_id` (None when answers have a fixed length and end after ``max_length`` tokens) and
    :attr:`grammar`, and implement the abstract methods.
    """

    name: str
    vocab: tuple[str, ...]
    max_length: int
    eos_id: int | None
    grammar: Grammar
    #: Observation segments a lookup-table policy should key on (those the answer depends on);
    #: None means the whole observation.
    tabular_segments: tuple[str, ...] | None = None

    # -- prompts ---------------------------------------------------------------------------------
    @abstractmethod
    def sample_prompt(self, rng: np.random.Generator, split: str) -> Prompt:
        """Draw one prompt of ``split`` using only ``rng``."""

    @abstractmethod
    def validate_prompt(self, prompt: object) -> Prompt:
        """Return ``prompt`` as a :class:`Prompt` of this task, or raise ``ValueError`` saying why not.

        Accepts a :class:`Prompt` or a ``(numbers, target)`` pair.
        """

    @abstractmethod
    def split_of(self, prompt: Prompt) -> str:
        """Which split (``"train"`` or ``"test"``) a valid prompt belongs to."""

    def prompts(self, split: str) -> tuple[Prompt, ...] | None:
        """All prompts of ``split`` when the task is finite, else None (sample instead)."""
        return None

    # -- observation ----------------------------------------------------------------------------
    @property
    @abstractmethod
    def prompt_layout(self) -> dict[str, slice]:
        """Named slices of :meth:`encode_prompt`'s vector."""

    @property
    def prompt_dim(self) -> int:
        return max(s.stop for s in self.prompt_layout.values())

    @abstractmethod
    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        """(prompt_dim,) float32 features in [0, 1] that describe the prompt to a policy."""

    # -- answers --------------------------------------------------------------------------------
    def token_strings(self, token_ids: Sequence[int], prompt: Prompt) -> list[str]:
        """The verifier tokens for ``token_ids``: the answer ends at the first EOS (it and everything
        after it are dropped), and a slot token ``"n<k>"`` stands for the prompt's k-th number."""
        slots = self._slot_tokens()
        out: list[str] = []
        for i in token_ids:
            if i == self.eos_id:
                break
            k = slots.get(i)
            out.append(self.vocab[i] if k is None else str(prompt.numbers[k]))
        return out

    def _slot_tokens(self) -> dict[int, int]:
        """{token id: prompt slot} of the vocabulary's ``"n<k>"`` tokens (computed once per task)."""
        cached = self.__dict__.get("_slot_token_cache")
        if cached is None or cached[0] is not self.vocab:
            table = {i: int(tok[1:]) for i, tok in enumerate(self.vocab) if _SLOT.match(tok)}
            cached = (self.vocab, table)
            self.__dict__["_slot_token_cache"] = cached
        return cached[1]

    def decode(self, token_ids: Sequence[int], prompt: Prompt) -> str:
        """The answer as text, as the verifier reads it: :func:`rlvr_env.verifier.join_tokens` of
        :meth:`token_strings`, so two adjacent number tokens stay two numbers (``"1 2"``, which is not
        well-formed), never one literal (``"12"``)."""
        return join_tokens(self.token_strings(token_ids, prompt))

    def score(
        self,
        prompt: Prompt,
        token_ids: Sequence[int],
        weights: RewardWeights,
        *,
        truncated: bool = False,
    ) -> Verdict:
        """Verify a finished answer. A truncated answer (no EOS within ``max_length``) is never
        well-formed: the format reward is withheld and so is accuracy."""
        text = self.decode(token_ids, prompt)
        if truncated:
            return Verdict(
                reward=0.0,
                correct=False,
                well_formed=False,
                value=None,
                reason=f"no end-of-sequence token within {self.max_length} tokens (truncated)",
                expression=text,
                parts={"accuracy": 0.0, "format": 0.0},
            )
        return verify(text, prompt.numbers, prompt.target, grammar=self.grammar, weights=weights)

    def action_mask(self, prompt: Prompt, prefix: Sequence[int]) -> np.ndarray:
        """(V,) bool: tokens that keep ``prefix`` a prefix of some well-formed answer.

        The default allows every token; tasks with a grammar mask override it.
        """
        return np.ones(len(self.vocab), dtype=bool)

    @property
    def grammar_masked(self) -> bool:
        """Whether :meth:`action_mask` can forbid a token (False: every token is always allowed, as the
        default does). Agents and labels read it to tell a real grammar mask from an all-ones one."""
        return type(self).action_mask is not Task.action_mask

    def render_prompt(self, prompt: Prompt) -> str:
        nums = " ".join(str(n) for n in prompt.numbers)
        return f"numbers: {nums} | target: {prompt.target}"


def check_split(split: str) -> None:
    """Raise ValueError unless ``split`` is a known split name."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not one of {SPLITS}")


def unpack_prompt(prompt: object) -> tuple[tuple[int, ...], int]:
    """Accept a Prompt or a (numbers, target) pair of plain integers; raise ValueError otherwise."""
    if isinstance(prompt, Prompt):
        numbers, target = prompt.numbers, prompt.target
    elif isinstance(prompt, (tuple, list)) and len(prompt) == 2:
        numbers, target = prompt  # type: ignore[misc]
    else:
        raise ValueError(
            f"prompt {prompt!r} must be a Prompt or a (numbers, target) pair, e.g. ((2, 3, 5), 17)"
        )
    if not isinstance(numbers, Sequence) or isinstance(numbers, str):
        raise ValueError(f"prompt numbers {numbers!r} must be a sequence of integers")
    clean = []
    for n in numbers:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ValueError(f"prompt number {n!r} in {numbers!r} must be an integer")
        clean.append(int(n))
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
        raise ValueError(f"prompt target {target!r} must be an integer")
    return tuple(clean), int(target)
