"""Countdown's grammar masks: the state of a prefix, the tokens it allows, and the automaton over states.

A prefix's mask depends only on a small state: whether an operand is expected next, the parenthesis
depth, which slots are used, whether the prefix already broke a rule, and its length. :func:`advance`
moves a batch of states by one token and :func:`masks_of` gives their masks; ``action_masks_arrays``
runs them over a batch of prefixes, and :class:`MaskAutomaton` tabulates them once, for settings with
few states (small N), so a native vector env keeps one state id per row and gets every row's mask with
one table lookup (docs/speed.md). Both paths are this one set of rules, so they agree exactly (a test checks
the table against the prefix loop on random prefixes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr_env.tasks.expression.token_kinds import ADD, DIV, EOS, LPAREN, MUL, NUM, OTHER, RPAREN, SUB
from rlvr_env.tasks.expression.verifier import Grammar

_OP_KIND = {"+": ADD, "-": SUB, "*": MUL, "/": DIV}

__all__ = ["DEAD", "MaskRules", "PrefixStates", "MaskAutomaton", "advance", "masks_of", "prefix_states"]

#: Settings whose automaton would have more states than this keep the prefix loop (large N).
MAX_STATES = 200_000
#: The automaton's absorbing state of prefixes that broke a rule or ended (mask: EOS only).
DEAD = 1


@dataclass(frozen=True)
class MaskRules:
    """What the masks of one Countdown setting depend on."""

    n: int  # slots (N)
    max_length: int  # tokens per answer, EOS included
    kinds: np.ndarray  # (V,) token kinds (rlvr_env.tasks.expression.batch_verify)
    op_ids: np.ndarray  # ids of the allowed operators
    lp: int  # id of "(" (-1 without parentheses)
    rp: int  # id of ")" (-1 without parentheses)
    eos_id: int
    exactly_once: bool  # number_use == "exactly_once"

    @property
    def vocab_size(self) -> int:
        return len(self.kinds)

    @classmethod
    def of_vocab(
        cls, kinds: np.ndarray, slots: np.ndarray, grammar: Grammar, max_length: int
    ) -> MaskRules | None:
        """The rules of a slot vocabulary (token kinds (V,) and slots (V,), as in
        :class:`~rlvr_env.tasks.expression.tokens.TokenTable`): ``"n0" .. "n{N-1}"`` first, then operators,
        parentheses and one EOS. None for any other vocabulary (constants, other tokens, no EOS)."""
        n = int((kinds == NUM).sum())
        eos = np.flatnonzero(kinds == EOS)
        if n < 1 or len(eos) != 1 or not np.array_equal(slots[:n], np.arange(n)) or (kinds[:n] != NUM).any():
            return None
        if (kinds == OTHER).any() or (slots[n:] >= 0).any() or (kinds[n:] == NUM).any():
            return None
        allowed = {_OP_KIND[op] for op in grammar.operators}
        op_ids = np.array([t for t, k in enumerate(kinds.tolist()) if k in allowed], dtype=np.int64)
        lps, rps = np.flatnonzero(kinds == LPAREN), np.flatnonzero(kinds == RPAREN)
        if len(lps) > 1 or len(rps) > 1 or len(lps) != len(rps):
            return None
        lp, rp = (int(lps[0]), int(rps[0])) if grammar.parentheses and len(lps) else (-1, -1)
        return cls(n=n, max_length=max_length, kinds=kinds, op_ids=op_ids, lp=lp, rp=rp, eos_id=int(eos[0]),
                   exactly_once=grammar.number_use == "exactly_once")

    def key(self) -> tuple[object, ...]:
        """A hashable summary: equal keys, equal rules."""
        return (self.n, self.max_length, self.kinds.tobytes(), tuple(self.op_ids.tolist()), self.lp, self.rp,
                self.eos_id, self.exactly_once)


@dataclass
class PrefixStates:
    """Struct of arrays: the state of B prefixes."""

    expect: np.ndarray  # (B,) bool: an operand comes next
    depth: np.ndarray  # (B,) int64 open parentheses
    used: np.ndarray  # (B, N) bool slots used
    bad: np.ndarray  # (B,) bool: the prefix broke a rule already (only EOS is offered)

    @classmethod
    def empty(cls, b: int, n: int) -> PrefixStates:
        return cls(np.ones(b, dtype=bool), np.zeros(b, dtype=np.int64), np.zeros((b, n), dtype=bool),
                   np.zeros(b, dtype=bool))


def advance(rules: MaskRules, st: PrefixStates, tok: np.ndarray, act: np.ndarray) -> None:
    """Append token ``tok`` (B,) to the prefixes where ``act`` (B,) is True, in place."""
    n, rows = rules.n, np.arange(len(tok))
    kind = rules.kinds[tok]
    is_num = act & (kind == NUM)
    slot = np.minimum(tok, n - 1)
    st.bad |= is_num & (~st.expect | st.used[rows, slot])
    st.used[rows[is_num], slot[is_num]] = True
    is_op = act & (kind >= ADD) & (kind <= DIV)
    st.bad |= is_op & st.expect
    is_lp, is_rp = act & (kind == LPAREN), act & (kind == RPAREN)
    st.bad |= (is_lp & ~st.expect) | (is_rp & (st.expect | (st.depth == 0))) | (act & (kind > RPAREN))
    st.expect = np.where(is_num | is_rp, False, np.where(is_op, True, st.expect))
    st.depth = st.depth + is_lp - is_rp


def masks_of(rules: MaskRules, st: PrefixStates, lengths: np.ndarray) -> np.ndarray:
    """(B, V) bool masks of prefixes in states ``st`` with ``lengths`` (B,) tokens.

    A token is legal when the prefix stays a prefix of a grammatical answer that uses each slot at most
    once and can still be completed within ``max_length`` tokens (closing every open parenthesis, using
    every remaining slot under ``exactly_once``, then EOS). A prefix that broke these rules already is
    offered EOS only, so a legal token always exists."""
    n, expect, depth, used = rules.n, st.expect, st.depth, st.used
    free = n - used.sum(axis=1)  # (B,) unused slots
    must = free if rules.exactly_once else np.zeros_like(free)
    room = rules.max_length - lengths - 1  # (B,) tokens left after the next one
    more = 2 * np.maximum(must - 1, 0)
    need_now = np.where(expect, 2 + depth + more, depth + 2 * must + 1)
    bad = st.bad | (need_now > room + 1)
    mask = np.zeros((len(lengths), rules.vocab_size), dtype=bool)
    mask[:, :n] = (expect & ~bad & (depth + more + 1 <= room))[:, None] & ~used
    can_op = ~expect & ~bad & (free >= 1) & (2 + depth + more <= room)
    mask[:, rules.op_ids] = can_op[:, None]
    if rules.lp >= 0:
        mask[:, rules.lp] = expect & ~bad & (free >= 1) & (3 + depth + more <= room)
        mask[:, rules.rp] = ~expect & ~bad & (depth >= 1) & (depth + 2 * must <= room)
    mask[:, rules.eos_id] = bad | (~expect & (depth == 0) & (must == 0))
    return mask


def prefix_states(rules: MaskRules, tokens: np.ndarray, lengths: np.ndarray) -> PrefixStates:
    """The states of prefixes ``tokens[b, :lengths[b]]`` (tokens (B, L), lengths (B,))."""
    st = PrefixStates.empty(tokens.shape[0], rules.n)
    for col in range(int(lengths.max(initial=0))):
        advance(rules, st, tokens[:, col], col < lengths)
    return st


class MaskAutomaton:
    """The prefix states of one setting as a table: ``next[s, t]`` is the state after token t in state
    s, ``masks[s]`` its mask; state 0 is the empty prefix, state 1 the absorbing state of prefixes that
    broke a rule or ended (mask: EOS only). Transitions out of full-length prefixes lead to state 1 (an
    episode ends there, so they are never taken)."""

    def __init__(self, next_state: np.ndarray, masks: np.ndarray) -> None:
        self.next = next_state  # (S, V) int64
        self.masks = masks  # (S, V) bool
        self.start = 0

    @property
    def num_states(self) -> int:
        return len(self.masks)

    @classmethod
    def build(cls, rules: MaskRules, max_states: int = MAX_STATES) -> MaskAutomaton | None:
        """Enumerate the reachable states layer by layer (a layer is a prefix length); None when there
        are more than ``max_states``."""
        n, v, length = rules.n, rules.vocab_size, rules.max_length
        bits = 1 << np.arange(n)
        dead = DEAD
        layer = PrefixStates.empty(1, n)
        next_rows: list[np.ndarray] = [np.full((1, v), dead), np.full((1, v), dead)]  # start, dead
        mask_rows: list[np.ndarray] = [masks_of(rules, layer, np.zeros(1, dtype=np.int64)),
                                       np.eye(v, dtype=bool)[[rules.eos_id]]]
        layer_ids = np.array([0])
        total = 2
        for depth_len in range(length):
            k = len(layer_ids)
            tok = np.repeat(np.arange(v), k)  # (V * k,) every token after every state of the layer
            st = PrefixStates(np.tile(layer.expect, v), np.tile(layer.depth, v), np.tile(layer.used, (v, 1)),
                              np.tile(layer.bad, v))
            advance(rules, st, tok, np.ones(len(tok), dtype=bool))
            key = (st.expect * (length + 2) + st.depth) * (1 << n) + st.used @ bits  # (V * k,)
            alive = ~st.bad
            keys, first, inverse = np.unique(key[alive], return_index=True, return_inverse=True)
            ids = np.full(len(tok), dead)
            ids[alive] = total + inverse.ravel()
            for s, row in zip(layer_ids, ids.reshape(v, k).T):
                next_rows[s] = row
            picked = np.flatnonzero(alive)[first]
            layer = PrefixStates(st.expect[picked], st.depth[picked], st.used[picked], st.bad[picked])
            mask_rows.append(masks_of(rules, layer, np.full(len(keys), depth_len + 1)))
            layer_ids = np.arange(total, total + len(keys))
            next_rows.extend(np.full((1, v), dead) for _ in keys)
            total += len(keys)
            if total > max_states:
                return None
        next_state = np.concatenate([np.asarray(r).reshape(1, v) for r in next_rows]).astype(np.int64)
        return cls(next_state, np.concatenate(mask_rows))
