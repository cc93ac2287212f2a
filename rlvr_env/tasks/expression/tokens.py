"""What the tokens of an arithmetic vocabulary mean to the array verifier (:class:`TokenTable`), and the
grammar recogniser that runs on them (:func:`grammar_passes`): the first stage of
:mod:`rlvr_env.tasks.expression.batch_verify`, which reads answers as :func:`rlvr_env.verify` reads their
text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rlvr_env.tasks.expression.token_kinds import ADD, DIV, EOS, LPAREN, MUL, NUM, OTHER, RPAREN, SUB
from rlvr_env.tasks.expression.verifier import (
    MAX_NUMBER_DIGITS, Grammar, join_tokens,
)

__all__ = ["TokenTable", "grammar_passes"]

_OP_KIND = {"+": ADD, "-": SUB, "*": MUL, "/": DIV, "(": LPAREN, ")": RPAREN}
_OP_CHAR = {v: k for k, v in _OP_KIND.items()}
_SLOT = re.compile(r"n([0-9]+)\Z")
_CANONICAL_NUMBER = re.compile(r"(0|[1-9][0-9]*)\Z")
#: Characters the text verifier reads (anything else makes text not well-formed wherever it appears).
_VERIFIER_CHARS = frozenset("0123456789+-*/() ")
#: Operands below this bound multiply without int64 overflow (2**31 * 2**31 = 2**62, sums < 2**63).
_LIMIT = 1 << 31
_POW10 = 10 ** np.arange(19, dtype=np.int64)  # (19,)
#: Rows per StackMachine in :func:`batch_verify` (its working set then stays in cache).
_CHUNK = 4096


@dataclass(frozen=True)
class TokenTable:
    """What each token id means to the batch verifier.

    Built from a task's vocabulary by :meth:`from_vocab`: a canonical decimal literal of at most
    :data:`~.verifier.MAX_NUMBER_DIGITS` digits (``"0"``, ``"17"``) is a number with that
    constant value; ``"n<k>"`` is the prompt's number in slot ``k``; ``+ - * / ( )`` are operators and
    parentheses; the EOS id ends the answer (it and every token after it are not read). A string with a
    character the text verifier rejects (a letter, ``"<pad>"``) is kind ``OTHER`` and makes an answer not
    well-formed, as the text verifier's lexer does. Every other string, made only of characters the
    verifier reads but not exactly one unit (``""``, ``" "``, ``"2+3"``, ``" 2"``, ``"05"``, ``"**"``),
    is refused with a ``ValueError``: read token by token and read as text it would mean different
    things, and the batch verifier must agree with ``verify(task.decode(row))``.

    Attributes:
        kinds: (V,) int8 token kinds.
        constants: (V,) int64 value of constant number tokens (0 elsewhere).
        slots: (V,) int64 prompt slot of slot tokens, -1 elsewhere.
        chars: (V,) int64 characters of non-slot tokens in the decoded text (0 for EOS).
    """

    kinds: np.ndarray
    constants: np.ndarray
    slots: np.ndarray
    chars: np.ndarray

    @classmethod
    def from_vocab(cls, vocab: Sequence[str], eos_id: int | None) -> TokenTable:
        """The table of ``vocab`` (token strings, id = index); raises ``ValueError`` for a token that
        the token-by-token reading and the text reading would read differently (see the class)."""
        if isinstance(vocab, str) or not isinstance(vocab, Sequence) or not vocab:
            raise ValueError(f"vocab={vocab!r:.80} must be a non-empty sequence of token strings")
        if eos_id is not None and (
            isinstance(eos_id, bool)
            or not isinstance(eos_id, (int, np.integer))
            or not 0 <= eos_id < len(vocab)
        ):
            raise ValueError(f"eos_id={eos_id!r} must be None or a token id in [0, {len(vocab)})")
        kinds, constants, slots, chars = [], [], [], []
        for i, tok in enumerate(vocab):
            if not isinstance(tok, str):
                raise ValueError(f"vocabulary token {i} {tok!r} of type {type(tok).__name__} is not a str")
            kind, const, slot = OTHER, 0, -1
            if i == eos_id:
                kind = EOS
            elif tok in _OP_KIND:
                kind = _OP_KIND[tok]
            elif (m := _SLOT.match(tok)) is not None:
                kind, slot = NUM, int(m.group(1))
            elif _CANONICAL_NUMBER.match(tok) and len(tok) <= MAX_NUMBER_DIGITS:
                kind, const = NUM, int(tok)
            elif set(tok) <= _VERIFIER_CHARS:
                raise ValueError(
                    f"vocabulary token {i} {tok!r} is not one number (a canonical literal of at most "
                    f"{MAX_NUMBER_DIGITS} digits), operator, parenthesis or slot token 'n<k>', yet it is "
                    "made of characters the verifier reads, so token by token and as text it would mean "
                    "different things; give every token exactly one unit"
                )
            kinds.append(kind)
            constants.append(const)
            slots.append(slot)
            chars.append(0 if kind == EOS or slot >= 0 else len(tok))
        return cls(
            kinds=np.array(kinds, dtype=np.int8),
            constants=np.array(constants, dtype=np.int64),
            slots=np.array(slots, dtype=np.int64),
            chars=np.array(chars, dtype=np.int64),
        )

    @property
    def num_slots(self) -> int:
        return int(self.slots.max(initial=-1)) + 1

    def values(self, numbers: np.ndarray) -> np.ndarray:
        """(B, V) int64 value of every number token for each row's prompt ``numbers`` (B, N)."""
        b = numbers.shape[0]
        out = np.broadcast_to(self.constants, (b, len(self.kinds))).copy()  # (B, V)
        slot_ids = np.flatnonzero(self.slots >= 0)
        if slot_ids.size:
            if numbers.shape[1] < self.num_slots:
                raise ValueError(
                    f"prompts have {numbers.shape[1]} numbers; the vocabulary refers to "
                    f"{self.num_slots} slots"
                )
            out[:, slot_ids] = numbers[:, self.slots[slot_ids]]
        return out

    def text(self, token_ids: Sequence[int], values: np.ndarray) -> str:
        """The decoded text of one row (EOS and everything after it dropped); ``values`` is (V,).
        Adjacent number tokens are joined with a space (:func:`~.verifier.join_tokens`)."""
        parts = []
        for t in token_ids:
            kind = int(self.kinds[t])
            if kind == EOS:
                break
            parts.append(str(int(values[t])) if kind == NUM else _OP_CHAR.get(kind, "?"))
        return join_tokens(parts)


def _check_numbers(numbers: np.ndarray) -> None:
    if numbers.size and numbers.min() < 0:
        raise ValueError(f"prompt numbers {numbers.min()} < 0 cannot be written as tokens")


@lru_cache(maxsize=64)
def _bad_table(grammar: Grammar) -> np.ndarray:
    """(kinds, 2, 2) bool ``bad[kind, expect, depth > 0]``: the token is a lexing or grammar error in
    that recogniser state (expecting an operand or not; inside parentheses or not)."""
    allowed = np.zeros(OTHER + 1, dtype=bool)
    allowed[[NUM, EOS]] = True
    for op in grammar.operators:
        allowed[_OP_KIND[op]] = True
    if grammar.parentheses:
        allowed[[LPAREN, RPAREN]] = True
    bad = np.zeros((OTHER + 1, 2, 2), dtype=bool)
    for k in range(OTHER + 1):
        is_op = ADD <= k <= DIV
        for e, deep in np.ndindex(2, 2):
            bad[k, e, deep] = (
                not allowed[k]
                or (k == NUM and not e)  # a number right after a number or ")"
                or (is_op and e)  # operator where an operand is expected (unary, "**")
                or (k == LPAREN and not e)
                or (k == RPAREN and (e or not deep))
            )
    bad.flags.writeable = False  # cached: shared by every machine of this grammar
    return bad


@lru_cache(maxsize=64)
def _pass_table(kinds: tuple[int, ...], grammar: Grammar, length: int) -> np.ndarray:
    """The recogniser of :func:`grammar_passes` for token ``kinds`` and rows of ``length`` tokens, as a
    flat transition table ``((2 * (length + 1) + 1) * (V + 1),)`` (built once per setting: the Python
    loops cost more than a batch's walk)."""
    depths = length + 1
    bad = _bad_table(grammar)  # (K, 2, 2)
    v = len(kinds)
    dead = 2 * depths  # states: depth * 2 + expect, then the dead state
    nxt = np.full((dead + 1, v + 1), dead, dtype=np.int64)  # last column: past the row's end, stay
    nxt[:, v] = np.arange(dead + 1)
    for depth in range(depths):
        for expect in (0, 1):
            for t, kind in enumerate(kinds):
                if kind == EOS or bad[kind, expect, int(depth > 0)]:
                    continue  # EOS ends the row before it is read; errors go to the dead state
                d = depth + (kind == LPAREN) - (kind == RPAREN)
                e = 1 if ADD <= kind <= DIV or kind == LPAREN else 0
                if d < depths:
                    nxt[depth * 2 + expect, t] = d * 2 + e
    flat = nxt.ravel()
    flat.flags.writeable = False  # shared by every call with this setting
    return flat


def grammar_passes(table: TokenTable, grammar: Grammar, tokens: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """(B,) bool: the rows ``tokens[b, :ends[b]]`` (tokens (B, L)) that the recogniser accepts as a
    complete answer (no grammar error, an operand last, every parenthesis closed). A necessary
    condition for a value, checked with one table lookup per column: the states (expecting an operand,
    depth) form a small automaton, so :func:`batch_verify` evaluates only the rows that pass."""
    length = tokens.shape[1]
    v = len(table.kinds)
    flat = _pass_table(tuple(table.kinds.tolist()), grammar, length)
    cols = np.where(np.arange(length) < ends[:, None], tokens, v)  # (B, L)
    state = np.ones(tokens.shape[0], dtype=np.int64)  # depth 0, expecting an operand
    for col in range(int(ends.max(initial=0))):
        state = flat[state * (v + 1) + cols[:, col]]
    return state == 0  # depth 0, an operand last (the dead state is 2 * depths)
