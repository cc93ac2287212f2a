"""The incremental array verifier (:class:`StackMachine`): one token column per call, exact rational
values as reduced int64 fractions, per-parenthesis-level accumulators instead of a value stack. The batch
verifier (:func:`rlvr_env.tasks.expression.batch_verify.batch_verify`) runs it over whole arrays and the
family's vector-env scorer (:class:`rlvr_env.tasks.expression.scorer.ExpressionScorer`) one env step at a
time; :mod:`rlvr_env.tasks.expression.batch_verify` says what it computes and why it is exact.

``StackMachine`` is one class of about 250 lines because every step keeps its whole state in arrays that
one ``feed`` updates together; splitting it would scatter that state across objects.
"""

from __future__ import annotations


import numpy as np

from rlvr_env.rewards import BatchVerdict, RewardWeights
from rlvr_env.tasks.expression.token_kinds import ADD, DIV, EOS, LPAREN, MUL, NUM, OTHER, RPAREN, SUB
from rlvr_env.tasks.expression.verifier import (
    MAX_NUMBER_DIGITS, MAX_TEXT_CHARS, Grammar, verify,
)
from rlvr_env.tasks.expression.tokens import _LIMIT, _POW10, TokenTable, _bad_table, _check_numbers

__all__ = ["StackMachine", "assemble_verdict"]


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
