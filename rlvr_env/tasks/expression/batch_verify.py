"""The batch verifier: :func:`rlvr_env.verify` for a whole batch of token sequences, as array operations.

:func:`batch_verify` scores a ``(B, L)`` array of token ids against per-row prompts and returns a
:class:`BatchVerdict` of arrays. It agrees exactly with :func:`rlvr_env.verify` applied to the text
``task.decode(row)`` (same ``correct``, ``well_formed``, value and reward parts; tests check this on
random and exhaustive inputs). It reads the *text* semantics, token by token:

* a number token is one number: two adjacent number tokens are two numbers side by side, which the
  grammar rejects (``task.decode`` writes them with a space between, ``"2 3"``, so the text verifier
  rejects them too; they never merge into the literal 23). A number of more than
  :data:`~rlvr_env.tasks.expression.verifier.MAX_NUMBER_DIGITS` digits, or more than
  :data:`~rlvr_env.tasks.expression.verifier.MAX_TEXT_CHARS` characters of text, is a lexing error;
* the grammar is checked by a two-state recogniser (expecting an operand or an operator) plus a
  parenthesis depth, which accepts exactly the language of the recursive-descent parser;
* values are exact rationals held as reduced int64 numerator / denominator arrays. Instead of a value
  stack, each parenthesis level keeps two accumulators, the finished sum ``S`` with the sign of the
  next term and the running product ``T`` with its pending ``*`` / ``/`` (precedence has two levels,
  so this is all a shunting-yard would keep). Every ``+ - * /`` is applied in the parser's order
  (left-associative), so division by zero and non-integer quotients (``integer_division``) are
  detected at the same operations;
* number use compares the multiset of literals with the prompt's numbers, as ``verify`` does.

Arithmetic is exact while every operand fits in 31 bits (products then fit in int64). A row whose
operands grow past that is flagged and re-scored by :func:`rlvr_env.verify` on its text (Python
integers are unbounded), so the result is exact for every input; with prompt numbers of at most a few
digits this fallback is rare.

The same :class:`StackMachine` runs incrementally inside :class:`rlvr_env.vector.TokenVectorEnv`: one
:meth:`StackMachine.feed` per environment step, one :meth:`StackMachine.finish` for the rows whose
episodes end, so verifying costs a fixed number of array operations per step, whatever the length.

Why one long module: it mirrors :mod:`rlvr_env.tasks.expression.verifier` stage by stage, as arrays, and must agree with
it exactly; keeping every stage in one file keeps the two orders side by side.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from rlvr_env.tasks.expression.token_kinds import ADD, DIV, EOS, LPAREN, MUL, NUM, OTHER, RPAREN, SUB
from rlvr_env.tasks.expression.verifier import MAX_NUMBER_DIGITS, MAX_TEXT_CHARS, Grammar, join_tokens, verify
from rlvr_env.rewards import BatchVerdict, RewardWeights

__all__ = ["TokenTable", "StackMachine", "batch_verify"]

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
    :data:`~rlvr_env.tasks.expression.verifier.MAX_NUMBER_DIGITS` digits (``"0"``, ``"17"``) is a number with that
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
        Adjacent number tokens are joined with a space (:func:`rlvr_env.tasks.expression.verifier.join_tokens`)."""
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


class StackMachine:
    """Incremental batch verifier over B rows: feed one token per row per call, then finish rows.

    State per row: position, the pending operand, the recogniser state
    (expecting an operand? parenthesis depth), per-level accumulators ``S`` (sum, with the sign of
    the next term) and ``T`` (product, with its pending operator), and the literals used so far.

    Every step works on all B rows at once with full-width array operations (rows that a step does
    not concern keep their values through ``np.where``), and per-level state is read and written
    through one flat index per row, so a step costs a fixed, small number of NumPy calls.
    """

    def __init__(
        self,
        table: TokenTable,
        grammar: Grammar,
        num_rows: int,
        max_length: int,
        weights: RewardWeights | None = None,
        num_numbers: int | None = None,
    ) -> None:
        if num_rows < 1 or max_length < 1:
            raise ValueError(f"num_rows={num_rows} and max_length={max_length} must both be >= 1")
        self.table = table
        self.grammar = grammar
        self.weights = weights if weights is not None else RewardWeights()
        self.num_rows = b = num_rows
        self.max_length = max_length
        n = table.num_slots if num_numbers is None else num_numbers
        if n < max(table.num_slots, 1):
            raise ValueError(f"num_numbers={n} must be >= 1 and cover the {table.num_slots} slot tokens")
        levels = max_length + 1  # "((((" reaches depth L before it is found unbalanced
        vocab = len(table.kinds)
        self._levels = levels
        self._vocab = vocab
        self._int_div = grammar.integer_division
        kinds = np.arange(OTHER + 1)
        self._is_op = (kinds >= ADD) & (kinds <= DIV)
        self._is_pm = (kinds == ADD) | (kinds == SUB)
        self._is_md = (kinds == MUL) | (kinds == DIV)
        self._closes = self._is_op | (kinds == RPAREN)  # tokens that end the pending operand
        self._adds = self._is_pm | (kinds == RPAREN)  # tokens that end a sum
        self._bad = _bad_table(grammar).ravel()
        self._rows = np.arange(b)
        self._tok = np.zeros((b, max_length + 1), dtype=np.int64)  # last column: writes of idle rows
        self.tokens = self._tok[:, :max_length]  # (B, L) view
        self._tok_base = self._rows * (max_length + 1)
        self.pos = np.zeros(b, dtype=np.int64)  # (B,)
        self.numbers = np.zeros((b, n), dtype=np.int64)  # (B, N)
        self.targets = np.zeros(b, dtype=np.int64)  # (B,)
        self.values = table.values(self.numbers)  # (B, V) value of each number token per row
        self.digits = np.ones_like(self.values)  # (B, V) its decimal digits
        self._val_base = self._rows * vocab
        self._token_chars = table.chars
        # Literals longer than MAX_NUMBER_DIGITS are errors anyway, so when even L tokens of that many
        # characters fit in MAX_TEXT_CHARS the text-length rule can never fire and is not tracked.
        widest = max(MAX_NUMBER_DIGITS, int(table.chars.max(initial=0)))
        self._count_chars = max_length * widest > MAX_TEXT_CHARS
        self.err = np.zeros(b, dtype=bool)
        self.over = np.zeros(b, dtype=bool)
        self.expect = np.ones(b, dtype=bool)
        self.p_num = np.zeros(b, dtype=np.int64)
        self.p_den = np.ones(b, dtype=np.int64)
        self.chars = np.zeros(b, dtype=np.int64)
        self.depth = np.zeros(b, dtype=np.int64)
        self._lvl_base = self._rows * levels
        # Per-level accumulators, flat (B * D,); a level is reset to (S=0, sign=+1, no factor) when it
        # is closed, so opening one needs no writes.
        self.s_num = np.zeros(b * levels, dtype=np.int64)
        self.s_den = np.ones(b * levels, dtype=np.int64)
        self.sign = np.ones(b * levels, dtype=np.int64)
        self.t_num = np.zeros(b * levels, dtype=np.int64)
        self.t_den = np.ones(b * levels, dtype=np.int64)
        self.mulop = np.zeros(b * levels, dtype=np.int64)  # 0: no factor yet, else MUL or DIV pending
        width = max(max_length, n)
        self._used = np.zeros((b, width + 1), dtype=np.int64)  # literals in order; last column: idle
        self.used = self._used[:, :width]
        self._used_base = self._rows * (width + 1)
        self._used_idle = width
        self.n_used = np.zeros(b, dtype=np.int64)

    # -- rows -----------------------------------------------------------------------------------
    def set_prompts(self, rows: np.ndarray, numbers: np.ndarray, targets: np.ndarray) -> None:
        """Start fresh answers on ``rows`` (index array (k,)) for prompts ``numbers`` (k, N), ``targets``
        (k,). Prompt numbers must be non-negative (a minus sign is an operator in the text)."""
        numbers = np.asarray(numbers, dtype=np.int64).reshape(len(rows), -1)
        if numbers.shape[1] != self.numbers.shape[1]:
            raise ValueError(
                f"prompts have {numbers.shape[1]} numbers; this machine was built for {self.numbers.shape[1]}"
            )
        _check_numbers(numbers)
        self.numbers[rows] = numbers
        self.targets[rows] = targets
        vals = self.table.values(numbers)  # (k, V)
        self.values[rows] = vals
        self.digits[rows] = np.maximum(np.searchsorted(_POW10, vals, side="right"), 1)
        for arr, value in ((self.pos, 0), (self.chars, 0), (self.depth, 0), (self.n_used, 0)):
            arr[rows] = value
        for flag, on in ((self.err, False), (self.over, False), (self.expect, True)):
            flag[rows] = on
        levels = (self._lvl_base[rows, None] + np.arange(self._levels)).ravel()  # (k * D,)
        for arr, value in ((self.s_num, 0), (self.s_den, 1), (self.sign, 1), (self.mulop, 0)):
            arr[levels] = value

    # -- one token per row ----------------------------------------------------------------------
    def feed(self, tokens: np.ndarray, active: np.ndarray) -> None:
        """Append ``tokens`` (B,) to the rows where ``active`` (B,) is True. EOS is recorded but only
        :meth:`finish` ends an answer."""
        self._tok.ravel()[self._tok_base + np.where(active, self.pos, self.max_length)] = tokens
        self.pos += active
        kind = self.table.kinds[tokens]  # (B,)
        live = active & ~(self.err | self.over) & (kind != EOS)
        if not live.any():
            return
        expect, depth = self.expect, self.depth
        state = (kind.astype(np.int64) * 2 + expect) * 2 + (depth > 0)
        bad = self._bad[state]
        is_num = kind == NUM
        flat = self._val_base + tokens
        val = self.values.ravel()[flat]  # (B,)
        dig = self.digits.ravel()[flat]
        bad |= is_num & (dig > MAX_NUMBER_DIGITS)  # a prompt number too long to be a literal
        if self._count_chars:
            self.chars += np.where(live, np.where(is_num, dig, self._token_chars[tokens]), 0)
            bad |= self.chars > MAX_TEXT_CHARS

        new = live & is_num & ~bad  # a number where an operand is expected (else it is bad)
        if new.any():
            self.p_num = np.where(new, val, self.p_num)
            self.p_den = np.where(new, 1, self.p_den)
            self.expect = expect = expect & ~new
            slot = np.where(new, self.n_used, self._used_idle)
            self._used.ravel()[self._used_base + slot] = val
            self.n_used += new

        self.err |= live & bad
        ok = live & ~bad
        closing = ok & self._closes[kind]
        if closing.any():
            li = self._lvl_base + depth  # (B,) flat index of each row's current level
            num, den = self._flush(closing, li)
            ok2 = closing & ~(self.err | self.over)
            op = self.mulop[li]
            adding = ok2 & self._adds[kind]
            is_rp = kind == RPAREN
            if adding.any():
                v_num, v_den, s_num, s_den, sign = self._sum(adding, li, num, den)
                adding &= ~self.over
                pm = adding & self._is_pm[kind]
                rp = adding & is_rp
                self.s_num[li] = np.where(pm, v_num, np.where(rp, 0, s_num))
                self.s_den[li] = np.where(pm, v_den, np.where(rp, 1, s_den))
                self.sign[li] = np.where(pm, np.where(kind == SUB, -1, 1), np.where(rp, 1, sign))
                self.p_num = np.where(rp, v_num, self.p_num)
                self.p_den = np.where(rp, v_den, self.p_den)
                self.depth = depth - rp
            md = ok2 & self._is_md[kind]
            self.mulop[li] = np.where(md, kind, np.where(ok2 & self._adds[kind], 0, op))
            self.expect = expect | (closing & self._is_op[kind])
        opening = ok & (kind == LPAREN)
        if opening.any():
            self.depth = self.depth + opening

    def _flush(self, mask: np.ndarray, li: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Apply each masked row's pending operand to its product ``T`` at level ``li`` (flat (B,));
        return the new ``T`` (all rows; unmasked rows keep theirs)."""
        op = self.mulop[li]  # (B,)
        old_num, old_den = self.t_num[li], self.t_den[li]
        start = op == 0
        is_div = op == DIV
        b_num, b_den = self.p_num, self.p_den
        a_num = np.where(start, 1, old_num)
        a_den = np.where(start, 1, old_den)
        f_num = np.where(is_div, b_den, b_num)
        f_den = np.where(is_div, b_num, b_den)
        big = mask & ((np.abs(a_num) | a_den | np.abs(f_num) | np.abs(f_den)) >= _LIMIT)
        num, den = _normalize(a_num * f_num, a_den * f_den)
        bad = mask & ~big & is_div & ((b_num == 0) | (self._int_div & (den != 1)))
        self.err |= bad
        self.over |= big
        keep = ~mask | bad | big
        num, den = np.where(keep, old_num, num), np.where(keep, old_den, den)
        self.t_num[li] = num
        self.t_den[li] = den
        return num, den

    def _sum(
        self, mask: np.ndarray, li: np.ndarray, t_num: np.ndarray, t_den: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """(B,) ``S + sign * T`` at level ``li`` for masked rows (other rows: garbage), and the old
        ``S`` numerator, denominator and sign."""
        s_num, s_den, sign = self.s_num[li], self.s_den[li], self.sign[li]
        t_num = t_num * sign
        big = mask & ((np.abs(s_num) | s_den | np.abs(t_num) | t_den) >= _LIMIT)
        self.over |= big
        v_num, v_den = _normalize(s_num * t_den + t_num * s_den, s_den * t_den)
        return v_num, v_den, s_num, s_den, sign

    # -- end of answers -------------------------------------------------------------------------
    def finish(self, rows: np.ndarray, truncated: np.ndarray | None = None) -> BatchVerdict:
        """Score the answers on ``rows`` (index array (k,)) as they stand; ``truncated`` (k,) marks rows
        cut off at the maximum length, which get no reward and no value (``Task.score``'s rule)."""
        k = len(rows)
        trunc = np.zeros(k, dtype=bool) if truncated is None else np.asarray(truncated, dtype=bool)
        err = self.err[rows] | self.expect[rows] | (self.depth[rows] != 0)
        live = ~err & ~self.over[rows]
        value_num = np.zeros(k, dtype=np.int64)
        value_den = np.zeros(k, dtype=np.int64)
        if live.any():
            mask = np.zeros(self.num_rows, dtype=bool)
            mask[rows[live]] = True
            li = self._lvl_base + self.depth
            num, den = self._flush(mask, li)
            v_num, v_den, *_ = self._sum(mask, li, num, den)
            live &= ~(self.err[rows] | self.over[rows])
            value_num = np.where(live, v_num[rows], 0)
            value_den = np.where(live, v_den[rows], 0)
        has_value = live & ~trunc
        value_num = np.where(has_value, value_num, 0)
        value_den = np.where(has_value, value_den, 0)
        well_formed = has_value.copy()
        if has_value.any():  # number use matters only for answers that parsed and evaluated
            well_formed[has_value] = self._number_use(rows[has_value])
        correct = well_formed & (value_den == 1) & (value_num == self.targets[rows])
        fallback = self.over[rows] & ~trunc
        verdict = assemble_verdict(
            self.weights, correct, well_formed, has_value, value_num, value_den, fallback
        )
        for j in np.flatnonzero(fallback):  # exact re-scoring by the text verifier (rare)
            _fill_from_text(verdict, int(j), self, int(rows[j]))
        return verdict

    def _number_use(self, rows: np.ndarray) -> np.ndarray:
        """(k,) whether the literals of each row respect the grammar's number-use rule."""
        numbers = self.numbers[rows]  # (k, N)
        n = numbers.shape[1]
        n_used = self.n_used[rows]
        used = self.used[rows, :n]  # (k, N): more than N literals always repeat one too often
        valid = np.arange(n) < n_used[:, None]  # (k, N)
        same = ((used[:, :, None] == used[:, None, :]) & valid[:, None, :]).sum(axis=2)  # (k, N)
        in_prompt = (used[:, :, None] == numbers[:, None, :]).sum(axis=2)  # (k, N)
        ok = (n_used <= n) & ~np.any(valid & (same > in_prompt), axis=1)
        if self.grammar.number_use == "exactly_once":
            ok &= n_used == n
        return ok


def _normalize(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fractions in lowest terms with a positive denominator. A zero denominator (division by zero or
    wrapped overflow, rows that are flagged anyway) becomes 1, so no row ever divides by zero."""
    neg = den < 0
    if neg.any():
        num, den = np.where(neg, -num, num), np.where(neg, -den, den)
    den = np.where(den == 0, 1, den)
    if (den != 1).any():  # integers (the common case) are already in lowest terms
        g = np.gcd(num, den)
        num, den = num // g, den // g
    return num, den


def assemble_verdict(
    weights: RewardWeights,
    correct: np.ndarray,
    well_formed: np.ndarray,
    has_value: np.ndarray,
    value_num: np.ndarray,
    value_den: np.ndarray,
    fallback: np.ndarray,
) -> BatchVerdict:
    parts = weights.parts(correct, well_formed)
    return BatchVerdict(
        reward=parts["accuracy"] + parts["format"],
        correct=correct,
        well_formed=well_formed,
        has_value=has_value,
        value_num=value_num,
        value_den=value_den,
        parts=parts,
        fallback=fallback,
    )


def _fill_from_text(verdict: BatchVerdict, j: int, machine: StackMachine, row: int) -> None:
    """Overwrite entry ``j`` of ``verdict`` with :func:`verify` on the text of ``machine`` row ``row``."""
    n = int(machine.pos[row])
    text = machine.table.text(machine.tokens[row, :n].tolist(), machine.values[row])
    numbers = machine.numbers[row, : machine.numbers.shape[1]].tolist()
    v = verify(text, numbers, int(machine.targets[row]), grammar=machine.grammar, weights=machine.weights)
    verdict.correct[j] = v.correct
    verdict.well_formed[j] = v.well_formed
    value = v.value
    fits = value is not None and abs(value.numerator) < 2**63 and value.denominator < 2**63
    verdict.has_value[j] = value is not None
    verdict.value_num[j] = value.numerator if fits and value is not None else 0
    verdict.value_den[j] = value.denominator if fits and value is not None else 0
    if value is not None and not fits:
        verdict.big_values[j] = value
    for name, arr in verdict.parts.items():
        arr[j] = v.parts[name]
    verdict.reward[j] = v.reward


def batch_verify(
    tokens: np.ndarray,
    numbers: np.ndarray,
    targets: np.ndarray,
    *,
    table: TokenTable,
    grammar: Grammar,
    weights: RewardWeights | None = None,
    lengths: np.ndarray | None = None,
    programs: bool = True,
) -> BatchVerdict:
    """Score B answers at once; row ``i`` gets what ``verify(text_i, numbers[i], targets[i])`` gives.

    Args:
        tokens: (B, L) int token ids; a row ends at its first EOS token, at ``lengths[i]`` or at L.
        numbers: (B, N) int prompt numbers per row (the values of slot tokens ``"n0"``, ``"n1"``, ...).
        targets: (B,) int targets.
        table: what the token ids mean (:meth:`TokenTable.from_vocab`).
        grammar: the rules, as for :func:`rlvr_env.verify`.
        weights: reward weights (default :class:`RewardWeights()`).
        lengths: optional (B,) number of tokens to read per row.
        programs: score the rows inside a Countdown vocabulary's masks' language by their answer
            programs (exact; False: every row takes the general path, for a caller that knows no row
            is inside, as :class:`rlvr_env.tasks.countdown.scorer.ProgramScorer` does for the rows it hands over).

    >>> from rlvr_env.tasks.expression.verifier import Grammar
    >>> table = TokenTable.from_vocab(("n0", "n1", "n2", "+", "*", "(", ")", "<eos>"), eos_id=7)
    >>> toks = np.array([[0, 3, 1, 4, 2, 7], [5, 0, 3, 1, 6, 4]])  # n0+n1*n2 ; (n0+n1)*
    >>> v = batch_verify(toks, np.array([[2, 3, 5], [2, 3, 5]]), np.array([17, 25]), table=table,
    ...                  grammar=Grammar(frozenset("+*"), parentheses=True))
    >>> v.correct.tolist(), v.well_formed.tolist(), v.values()
    ([True, False], [True, False], [Fraction(17, 1), None])
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(
            f"tokens has shape {tokens.shape} and dtype {tokens.dtype}; a (B, L) int array is expected"
        )
    b, length = tokens.shape
    vocab_size = len(table.kinds)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"token ids must lie in [0, {vocab_size}); got {tokens.min()}..{tokens.max()}")
    numbers = np.asarray(numbers, dtype=np.int64).reshape(b, -1)
    targets = np.asarray(targets, dtype=np.int64).reshape(b)
    if b == 0:
        empty = np.zeros(0, dtype=bool)
        z = np.zeros(0, dtype=np.int64)
        return assemble_verdict(weights or RewardWeights(), empty, empty, empty, z, z, empty)
    ends = np.full(b, length) if lengths is None else np.minimum(np.asarray(lengths).reshape(b), length)
    eos_ids = np.flatnonzero(table.kinds == EOS)
    is_eos = tokens == eos_ids[0] if len(eos_ids) == 1 else table.kinds[tokens] == EOS  # (B, L)
    first = is_eos.argmax(axis=1)  # 0 also where a row has no EOS: told apart by one gather, which is
    first_eos = np.where(is_eos[np.arange(b), first], first, length)  # cheaper than any(axis=1)
    ends = np.minimum(ends, first_eos)  # (B,) tokens to read per row
    _check_numbers(numbers)
    table.values(numbers[:1])  # refuses prompts with fewer numbers than the vocabulary's slots
    weights = weights if weights is not None else RewardWeights()
    fast = _by_programs(tokens, ends, numbers, targets, table, grammar, lengths is None) if programs else None
    if fast is None:
        return _verify_rows(tokens, ends, numbers, targets, table, grammar, weights)
    rows, correct, well_formed, value_num, value_den = fast
    rest = np.ones(b, dtype=bool)
    rest[rows] = False
    out = assemble_verdict(weights, np.zeros(b, bool), np.zeros(b, bool), np.zeros(b, bool),
                           np.zeros(b, np.int64), np.zeros(b, np.int64), np.zeros(b, bool))
    out.correct[rows], out.well_formed[rows], out.has_value[rows] = correct, well_formed, well_formed
    out.value_num[rows], out.value_den[rows] = value_num, value_den
    if rest.any():
        idx = np.flatnonzero(rest)
        slow = _verify_rows(tokens[idx], ends[idx], numbers[idx], targets[idx], table, grammar, weights)
        for name in ("correct", "well_formed", "has_value", "value_num", "value_den", "fallback"):
            getattr(out, name)[idx] = getattr(slow, name)
        out.big_values.update({int(idx[j]): value for j, value in slow.big_values.items()})
    out.parts = weights.parts(out.correct, out.well_formed)
    out.reward = out.parts["accuracy"] + out.parts["format"]
    return out


def _by_programs(
    tokens: np.ndarray, ends: np.ndarray, numbers: np.ndarray, targets: np.ndarray, table: TokenTable,
    grammar: Grammar, read_all: bool,
) -> tuple[np.ndarray, ...] | None:
    """Score the rows of a slot vocabulary (Countdown's) that are answers inside its masks' language (a
    grammatical, complete answer using each slot at most once) by the programs of their shapes
    (:mod:`rlvr_env.tasks.countdown.programs`): one table lookup per column, then a few operations per
    operator (``read_all``: no ``lengths`` were given, rows end at EOS or L). Returns those rows and
    their correct, well-formed, value numerator and denominator; None
    when the vocabulary or setting has no program table (every row then takes the general path)."""
    # Lazy: the tasks package imports this module (the import graph has no circle either way).
    from rlvr_env.tasks.countdown.masks import MaskRules
    from rlvr_env.tasks.countdown.programs import cached_table, evaluate

    b, length = tokens.shape
    rules = MaskRules.of_vocab(table.kinds, table.slots, grammar, length + 1)  # + 1: room for EOS
    if rules is None or (rules.exactly_once and numbers.shape[1] != rules.n):
        return None
    if rules.n * MAX_NUMBER_DIGITS + length > MAX_TEXT_CHARS:
        return None  # the text-length rule could fire; it is not tracked here
    programs = cached_table(rules)
    if programs is None:
        return None
    width = len(table.kinds) + 1  # token id V: past the row's end, the state stays
    if read_all:  # every row ends at its first EOS or at L; accepting states absorb what follows EOS
        cols = np.ascontiguousarray(tokens.T, dtype=np.int64)  # (L, B)
    else:
        cols = np.where(np.arange(length) < ends[:, None], tokens, width - 1).T.astype(np.int64, order="C")
    walk = programs.walk
    state = np.zeros(b, dtype=np.int64)  # premultiplied by width
    for col in cols[: int(ends.max(initial=0))]:
        state = walk[state + col]
    state = walk[state + rules.eos_id] // width  # the answer ends here (a no-op after its EOS)
    rows = np.flatnonzero(programs.accept[state])
    states = state[rows]
    flat = rows[:, None] * length + programs.operands[states]  # (k, N) flat index of each operand
    slots = tokens.ravel()[flat].astype(np.int64)  # (k, N) slot of each operand
    operands = numbers.ravel()[slots + rows[:, None] * numbers.shape[1]]
    # Each slot at most once, and operands within the exact bound: a loop over the N columns (a
    # reduction along a short row axis is several times slower in NumPy).
    counts = programs.counts[states]
    seen = np.zeros(len(rows), dtype=np.int64)  # bit set of the slots read so far
    keep = np.ones(len(rows), dtype=bool)
    largest = operands[:, 0]
    for j in range(rules.n):
        bit = np.where(j < counts, 1 << slots[:, j], 0)
        keep &= (seen & bit) == 0
        seen |= bit
        largest = np.maximum(largest, operands[:, j])  # unused registers repeat the first operand
    keep &= largest <= min(programs.bound(), 10**MAX_NUMBER_DIGITS - 1)
    rows, states, operands = rows[keep], states[keep], operands[keep]
    num, den, err = evaluate(programs, states, operands, grammar.integer_division)
    ok = ~err  # inside the masks' language the number-use rule holds by construction
    value_num, value_den = np.where(ok, num, 0), np.where(ok, den, 0)
    return rows, ok & (den == 1) & (num == targets[rows]), ok, value_num, value_den


def _verify_rows(
    tokens: np.ndarray, ends: np.ndarray, numbers: np.ndarray, targets: np.ndarray, table: TokenTable,
    grammar: Grammar, weights: RewardWeights,
) -> BatchVerdict:
    """:func:`batch_verify`'s general path on validated rows with their read lengths ``ends``."""
    b, length = tokens.shape
    # Only rows the recogniser accepts can have a value; the others are scored as not well-formed
    # without running the machine (what it would conclude for them). The accepted rows are sorted by
    # length and cut into cache-sized chunks: a chunk stops at its longest row, so short answers do
    # not ride along through the long ones' columns.
    passes = grammar_passes(table, grammar, tokens, ends)
    accepted = np.flatnonzero(passes)
    order = np.concatenate([accepted[np.argsort(ends[accepted], kind="stable")], np.flatnonzero(~passes)])
    parts = []
    for start in range(0, len(accepted), _CHUNK):
        idx = order[start : min(start + _CHUNK, len(accepted))]
        k = len(idx)
        machine = StackMachine(table, grammar, k, max(length, 1), weights, num_numbers=numbers.shape[1])
        rows = np.arange(k)
        machine.set_prompts(rows, numbers[idx], targets[idx])
        chunk_tokens, chunk_ends = tokens[idx], ends[idx]
        for col in range(int(chunk_ends.max(initial=0))):
            machine.feed(chunk_tokens[:, col], col < chunk_ends)
        parts.append(machine.finish(rows))
    rejected = b - len(accepted)
    if rejected:
        no = np.zeros(rejected, dtype=bool)
        zero = np.zeros(rejected, dtype=np.int64)
        parts.append(assemble_verdict(weights, no, no, no, zero, zero, no))
    return _scatter(parts, order, b)


def _scatter(parts: list[BatchVerdict], order: np.ndarray, b: int) -> BatchVerdict:
    """Concatenate chunk verdicts (rows in ``order``) back into the caller's row order."""
    if len(parts) == 1 and np.array_equal(order, np.arange(b)):
        return parts[0]
    inverse = np.empty(b, dtype=np.int64)
    inverse[order] = np.arange(b)

    def cat(get: Callable[[BatchVerdict], np.ndarray]) -> np.ndarray:
        return np.concatenate([get(p) for p in parts])[inverse]

    big: dict[int, Fraction] = {}
    offset = 0
    for p in parts:
        big.update({int(order[offset + j]): v for j, v in p.big_values.items()})
        offset += len(p.reward)
    return BatchVerdict(
        reward=cat(lambda p: p.reward),
        correct=cat(lambda p: p.correct),
        well_formed=cat(lambda p: p.well_formed),
        has_value=cat(lambda p: p.has_value),
        value_num=cat(lambda p: p.value_num),
        value_den=cat(lambda p: p.value_den),
        parts={name: cat(lambda p, name=name: p.parts[name]) for name in parts[0].parts},  # type: ignore
        fallback=cat(lambda p: p.fallback),
        big_values=big,
    )
