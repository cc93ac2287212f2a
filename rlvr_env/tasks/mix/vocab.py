"""The shared vocabularies of a task mix and the id maps between each member and the mix.

**Answer tokens** (:func:`answer_vocabulary`): the union of the members' vocabularies by token string, in
member order (the first member's tokens first, each new string appended), then one end-of-answer token,
:data:`EOS`, last. Every member's own EOS (whatever its string: Countdown's ``<eos>``, CountdownThink's
``</answer>``) maps to the mix's EOS; a member with fixed-length answers (``eos_id is None``) has none, and
its answers end with the mix's EOS after its last token. A member's token ``t`` is mix token
``forward[name][t]``; mix token ``a`` is member token ``inverse[name][a]``, or -1 when the member has no
such token (a *foreign* token for that member; the mix's EOS is foreign to a fixed-length member).

**Token-context tokens** (:func:`context_vocabulary`): ``<pad>``, one tag per member (``<task:name>``),
then the union of the members' context vocabularies by string. A member's context id ``c`` (which indexes
its ``context_tokens().vocab + vocab``) becomes ``context_map[name][c]`` in the mix's context, whose answer
ids are the mix's answer ids; a member's context row is written with its tag right before its first
token, left-padded to ``1 +`` the widest member's row (:meth:`ContextMap.encode`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvr_env.tasks.base import ContextTokens

__all__ = ["EOS", "AnswerMap", "ContextMap", "answer_vocabulary", "context_vocabulary", "tag"]

#: The mix's one end-of-answer token.
EOS = "<eos>"


def tag(name: str) -> str:
    """The context token that names member ``name`` (``<task:countdown>``)."""
    return f"<task:{name}>"


@dataclass(frozen=True)
class AnswerMap:
    """The mix's answer vocabulary and each member's id maps (see the module docstring)."""

    vocab: tuple[str, ...]
    eos_id: int
    #: member name -> (V_m,) int64: the mix id of each member token
    forward: dict[str, np.ndarray]
    #: member name -> (V,) int64: the member id of each mix token, -1 where the member has none
    inverse: dict[str, np.ndarray]


def answer_vocabulary(members: Mapping[str, Any]) -> AnswerMap:
    """The union of the members' vocabularies (members: name -> Task), EOS last. ``ValueError`` when a
    member's ordinary token is spelled like the mix's EOS (it would read as the end of every answer)."""
    index: dict[str, int] = {}
    for name, task in members.items():
        for i, token in enumerate(task.vocab):
            if i == task.eos_id:
                continue
            if token == EOS:
                raise ValueError(f"member {name!r} has the token {EOS!r} (id {i}) that is not its end "
                                 "of answer; the mix's end-of-answer token is spelled the same, so the two "
                                 "would be one token")
            index.setdefault(token, len(index))
    eos_id = len(index)
    vocab = (*index, EOS)
    forward: dict[str, np.ndarray] = {}
    inverse: dict[str, np.ndarray] = {}
    for name, task in members.items():
        fwd = np.array([eos_id if i == task.eos_id else index[t] for i, t in enumerate(task.vocab)],
                       dtype=np.int64)
        inv = np.full(len(vocab), -1, dtype=np.int64)
        inv[fwd] = np.arange(len(fwd))
        forward[name], inverse[name] = fwd, inv
    return AnswerMap(vocab, eos_id, forward, inverse)


@dataclass(frozen=True)
class ContextMap:
    """The mix's token context (see the module docstring): its :class:`ContextTokens`, each member's id
    map and tag id."""

    tokens: ContextTokens
    #: member name -> (len(member context vocab) + V_m,) int64: the mix context id of each member id
    maps: dict[str, np.ndarray]
    #: member name -> its tag's context id
    tags: dict[str, int]

    def encode(self, name: str, rows: np.ndarray) -> np.ndarray:
        """(k, width) mix context rows of member ``name``'s context rows (k, w): remapped, the tag right
        before each row's first token, left-padded."""
        rows = np.asarray(rows, dtype=np.int64)
        k, w = rows.shape
        width = self.tokens.width
        out = np.zeros((k, width), dtype=np.int64)
        out[:, width - w:] = self.maps[name][rows]
        written = rows != 0
        first = np.where(written.any(axis=1), written.argmax(axis=1), w)  # (k,) the first token's place
        out[np.arange(k), width - w + first - 1] = self.tags[name]
        return out


def context_vocabulary(members: Mapping[str, Any], answers: AnswerMap) -> ContextMap | None:
    """The mix's token context, or None when a member offers none (then neither does the mix)."""
    specs = {name: task.context_tokens() for name, task in members.items()}
    if any(spec is None for spec in specs.values()):
        return None
    vocab = ["<pad>", *(tag(name) for name in members)]
    index = {t: i for i, t in enumerate(vocab)}
    for spec in specs.values():
        for token in spec.vocab[1:]:  # type: ignore[union-attr]
            if token not in index:
                index[token] = len(vocab)
                vocab.append(token)
    offset = len(vocab)  # the mix's answer ids follow its context tokens
    maps = {name: np.array([index[t] for t in spec.vocab]  # type: ignore[union-attr]
                           + [offset + int(a) for a in answers.forward[name]], dtype=np.int64)
            for name, spec in specs.items()}
    width = 1 + max(spec.width for spec in specs.values())  # type: ignore[union-attr]
    return ContextMap(ContextTokens(tuple(vocab), width), maps, {name: index[tag(name)] for name in members})
