"""Arithmetic-expression tasks: prompts are numbers and a target, answers are expressions that
:func:`rlvr_env.verify` scores under the task's :class:`~rlvr_env.Grammar`.

:class:`ExpressionTask` fills the optional abilities of the Task contract for this family once (token
context, text prompt and answer parsing, dataset records, the vector env's array fast path), so
:class:`~rlvr_env.ArithmeticTask` and :class:`~rlvr_env.CountdownTask`
only say how prompts are drawn, encoded and masked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlvr_env.scoring import BatchScorer, PromptBatch
from rlvr_env.tasks.base import ContextTokens, Task
from rlvr_env.tasks.expression.prompt import Prompt
from rlvr_env.tasks.expression.scorer import NUMBERS, TARGETS, ExpressionScorer
from rlvr_env.tasks.expression.tokens import TokenTable
from rlvr_env.rewards import truncated_verdict
from rlvr_env.tasks.expression.verifier import (
    Grammar, VerifierError, join_tokens, tokenize, verify, verify_prompt_text,
)
from rlvr_env.rewards import RewardWeights, Verdict

__all__ = ["ExpressionTask", "SPECIAL_TOKENS", "PAD", "BOS", "TARGET", "ANSWER", "COMMA", "MINUS",
           "NUMBER_TOKENS", "WHOLE_NUMBER_LIMIT", "check_number_tokens", "describe_grammar"]

_SLOT = re.compile(r"n(\d+)\Z")
#: The token context's fixed head: specials, then digits (ids 6-15).
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "=", "<ans>", ",", "-")
PAD, BOS, TARGET, ANSWER, COMMA, MINUS = range(len(SPECIAL_TOKENS))
_DIGIT0 = len(SPECIAL_TOKENS)
_CONTEXT_VOCAB: tuple[str, ...] = (*SPECIAL_TOKENS, *"0123456789")
#: How the token context writes a prompt's numbers and target: ``"digits"``, one token per decimal digit
#: (``7 0``), or ``"whole"``, one token per value (``[70]``), as the cl100k and Llama-3 tokenizers write
#: every number below 1000.
NUMBER_TOKENS = ("digits", "whole")
#: ``number_tokens="whole"`` gives every value from 0 to this one a token of its own (as those
#: tokenizers do); a setting with a larger number or target is a ``ValueError`` (it keeps the digits).
WHOLE_NUMBER_LIMIT = 999
#: Methods whose package versions the array verifier agrees with (tests check it in lockstep); an
#: override of any of them outside the package turns the array fast path off.
_VERIFIER_METHODS = ("score", "score_batch", "decode", "token_strings")


def check_number_tokens(number_tokens: object, observation: str = "tokens") -> str:
    """``number_tokens`` as one of :data:`NUMBER_TOKENS`, or ``ValueError`` naming the value; also when
    it asks for whole-number tokens and the env's ``observation`` is not ``"tokens"`` (nothing else
    reads them)."""
    if not isinstance(number_tokens, str) or number_tokens not in NUMBER_TOKENS:
        raise ValueError(f"number_tokens={number_tokens!r} is not one of {NUMBER_TOKENS}")
    if number_tokens != "digits" and observation != "tokens":
        raise ValueError(f"number_tokens={number_tokens!r} changes only the token context; it needs "
                         f"observation='tokens', not {observation!r}")
    return number_tokens


def _digits_needed(value: int) -> int:
    return len(str(abs(int(value))))


def describe_grammar(grammar: Grammar) -> str:
    """The grammar as one sentence of the text prompt."""
    ops = " ".join(o for o in "+-*/" if o in grammar.operators)
    parens = "parentheses" if grammar.parentheses else "no parentheses"
    use = "each number exactly once" if grammar.number_use == "exactly_once" else \
        "each number at most once"
    division = "; every division must come out even" if grammar.integer_division and \
        "/" in grammar.operators else ""
    return f"Use only the operators {ops} and {parens}, {use}{division}; no other numbers."


class ExpressionTask(Task[Prompt]):
    """A Task whose prompts are :class:`Prompt` (numbers and a target) and whose answers are infix
    expressions verified by :func:`rlvr_env.verify` under :attr:`grammar`.

    A subclass sets ``grammar`` besides the Task attributes. A vocabulary token ``"n<k>"`` stands for the
    prompt's k-th number (it decodes to the number's digits). Subclasses with ranged prompts override
    :meth:`prompt_extent`; a finite task gets it from its prompt list.
    """

    grammar: Grammar
    #: numbers per prompt (the array fast path's width) and their range, when bounded (None: unbounded)
    n_numbers: int
    number_range: tuple[int, int] | None = None
    #: how the token context writes numbers and targets, one of :data:`NUMBER_TOKENS` (the answer's own
    #: tokens do not change: it names numbers by slot)
    number_tokens: str = "digits"
    answer_noun = "expression"

    # -- answers -----------------------------------------------------------------------------------
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
        """The answer as text, as the verifier reads it: :func:`~.verifier.join_tokens` of
        :meth:`token_strings`, so two adjacent number tokens stay two numbers (``"1 2"``, which is not
        well-formed), never one literal (``"12"``)."""
        return join_tokens(self.token_strings(token_ids, prompt))

    def score(self, prompt: Prompt, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        """Verify a finished answer. A truncated answer (no EOS within ``max_length``) is never
        well-formed: the format reward is withheld and so is accuracy."""
        text = self.decode(token_ids, prompt)
        if truncated:
            return truncated_verdict(self.max_length, text)
        if not isinstance(weights, RewardWeights):
            raise TypeError(f"weights={weights!r:.80} must be a rlvr_env.RewardWeights")
        return verify_prompt_text(text, prompt.numbers, prompt.target, self.grammar, weights)

    def render_prompt(self, prompt: Prompt) -> str:
        nums = " ".join(str(n) for n in prompt.numbers)
        return f"numbers: {nums} | target: {prompt.target}"

    # -- the token context -------------------------------------------------------------------------
    def prompt_extent(self) -> tuple[int, int, int, bool]:
        """(numbers per prompt, digits of the widest number, digits of the widest target, whether a
        target can be negative): what sizes the token context. Default: from the finite prompt list."""
        prompts = self._finite_prompts()
        return (len(prompts[0].numbers), max(_digits_needed(x) for p in prompts for x in p.numbers),
                max(_digits_needed(p.target) for p in prompts), any(p.target < 0 for p in prompts))

    def largest_value(self) -> int:
        """The largest absolute value a prompt's number or target can take: what ``number_tokens="whole"``
        needs a token for. Default: from the finite prompt list."""
        return max(max(abs(x) for x in (*p.numbers, p.target)) for p in self._finite_prompts())

    def _finite_prompts(self) -> list[Prompt]:
        prompts = [*(self.prompts("train") or ()), *(self.prompts("test") or ())]
        if not prompts:
            raise ValueError(f"task {type(self).__name__} has no finite prompt list; override prompt_extent "
                             "and largest_value to size its token context")
        return prompts

    def _context_layout(self) -> tuple[int, int, int, bool, np.ndarray, int, tuple[str, ...]]:
        """(N, number digits, target digits, signed, slot labels (N,), width, context vocabulary),
        computed once. With whole-number tokens the digit widths are 1 (one token per value)."""
        cached = self.__dict__.get("_context_cache")
        if cached is None or cached[0] is not self.vocab or cached[1] != self.number_tokens:
            whole = check_number_tokens(self.number_tokens) == "whole"
            n, number_digits, target_digits, signed = self.prompt_extent()
            vocab = _CONTEXT_VOCAB
            if whole:
                largest = self.largest_value()
                if largest > WHOLE_NUMBER_LIMIT:
                    raise ValueError(
                        f"number_tokens='whole' gives a token to each value up to {WHOLE_NUMBER_LIMIT} (as "
                        f"the cl100k and Llama-3 tokenizers do); this task's numbers or targets reach "
                        f"{largest}: use number_tokens='digits'")
                vocab = (*_CONTEXT_VOCAB, *(f"[{v}]" for v in range(largest + 1)))
                number_digits = target_digits = 1
            answer_offset = len(vocab)
            # Slot k's label: the answer's own "n<k>" token when the vocabulary has one, else a comma.
            slot_ids = {int(m.group(1)): i for i, tok in enumerate(self.vocab) if (m := _SLOT.match(tok))}
            labels = np.array([answer_offset + slot_ids[k] if k in slot_ids else COMMA for k in range(n)],
                              dtype=np.int64)
            # <bos>, per number (label, digits), "=", [sign], target digits, <ans>.
            width = 1 + n * (1 + number_digits) + 1 + int(signed) + target_digits + 1
            cached = (self.vocab, self.number_tokens,
                      (n, number_digits, target_digits, signed, labels, width, vocab))
            self.__dict__["_context_cache"] = cached
        return cached[2]  # type: ignore[no-any-return]

    def context_tokens(self) -> ContextTokens:
        """``<pad> <bos> = <ans> , -`` and the digits (then, with ``number_tokens="whole"``, ``[0]``,
        ``[1]``, ... up to :meth:`largest_value`); a prompt reads ``<bos> n0 7 n1 9 = 1 6 <ans>``, or
        ``<bos> n0 [7] n1 [9] = [16] <ans>`` with whole-number tokens (numbers labelled by their slot token,
        or by ``,`` without slot tokens; then the target)."""
        layout = self._context_layout()
        return ContextTokens(layout[6], layout[5])

    def encode_context(self, prompt: Prompt) -> np.ndarray:
        return self.context_arrays(np.array([prompt.numbers]), np.array([prompt.target]))[0]

    def context_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, P) int64 prompt segments for prompts given as numbers (k, N) and targets (k,)."""
        n, number_digits, target_digits, signed, labels, _, vocab = self._context_layout()
        numbers = np.asarray(numbers, dtype=np.int64).reshape(-1, n)
        targets = np.asarray(targets, dtype=np.int64).reshape(-1)
        write = _whole if len(vocab) > len(_CONTEXT_VOCAB) else _digits
        k = numbers.shape[0]
        hole = -1  # a digit position a shorter number does not use; squeezed out below
        pieces = [np.full((k, 1), BOS)]
        for slot in range(n):
            pieces += [np.full((k, 1), labels[slot]), write(numbers[:, slot], number_digits)]
        pieces.append(np.full((k, 1), TARGET))
        if signed:
            pieces.append(np.where(targets < 0, MINUS, hole)[:, None])
        pieces += [write(targets, target_digits), np.full((k, 1), ANSWER)]
        row = np.concatenate(pieces, axis=1)  # (k, P) with holes
        # Left-pad: a stable sort on "is a real token" moves the holes to the front, keeping token order.
        order = np.argsort(row != hole, axis=1, kind="stable")
        row = np.take_along_axis(row, order, axis=1)
        row[row == hole] = PAD
        return row

    # -- text ----------------------------------------------------------------------------------------
    def prompt_text(self, prompt: Prompt, instruction: str) -> str:
        numbers = ", ".join(str(n) for n in prompt.numbers)
        return (f"Write an arithmetic expression that equals {prompt.target} using the numbers {numbers}.\n"
                f"{describe_grammar(self.grammar)}\n{instruction}")

    def parse_answer(self, prompt: Prompt, text: str) -> list[int] | None:
        """Token ids of an expression text: operators and parentheses by their token, a number by the
        first unused slot holding it (or its own token in a vocabulary of literals). None when the text
        does not lex or names a number or symbol the vocabulary cannot write."""
        try:
            parts = tokenize(text)
        except VerifierError:
            return None
        slots = self._slot_tokens()
        by_slot = {k: i for i, k in slots.items()}
        used: set[int] = set()
        ids: list[int] = []
        for part in parts:
            if part.isdigit() and slots:
                free = [k for k, x in enumerate(prompt.numbers) if str(x) == part and k not in used]
                if not free:
                    free = [k for k, x in enumerate(prompt.numbers) if str(x) == part]
                if not free or free[0] not in by_slot:
                    return None
                used.add(free[0])
                ids.append(by_slot[free[0]])
            elif part in self.vocab:
                ids.append(self.vocab.index(part))
            else:
                return None
        return ids

    def score_text(self, prompt: Prompt, text: str, weights: RewardWeights) -> Verdict:
        """:func:`rlvr_env.verify` on the text; a subclass that overrides :meth:`score` is paid through it
        instead (the text parsed into token ids), so the text env pays what the token envs pay."""
        if self.scores_by_verify:
            return verify(text, prompt.numbers, prompt.target, grammar=self.grammar, weights=weights)
        if self.parse_answer(prompt, text) is None:
            return verify(text, prompt.numbers, prompt.target, grammar=self.grammar, weights=weights)
        return super().score_text(prompt, text, weights)

    def prompt_record(self, prompt: Prompt) -> dict[str, Any]:
        """``{"numbers": [...], "target": t}``."""
        return {"numbers": [int(x) for x in prompt.numbers], "target": int(prompt.target)}

    def prompt_from_record(self, record: dict[str, Any]) -> Prompt:
        if not isinstance(record, dict) or "numbers" not in record or "target" not in record:
            raise ValueError(f"record {record!r:.80} must be a dict with 'numbers' and 'target'")
        return self.validate_prompt((tuple(record["numbers"]), record["target"]))

    # -- the array fast path -------------------------------------------------------------------------
    @property
    def scores_by_verify(self) -> bool:
        """Whether scoring is the package's own (verify on the decoded text), so the array verifier,
        which agrees with it exactly, may stand in for it."""
        for name in _VERIFIER_METHODS:
            owner = next(c for c in type(self).__mro__ if name in c.__dict__)
            if owner.__module__.partition(".")[0] != "rlvr_env":
                return False
        return True

    def array_path(self) -> bool:
        """Whether the vector env may hold this task's prompts as arrays and score them with the array
        verifier: while its scoring is the package's own (:attr:`scores_by_verify`) and its masks, if
        any, are computed on arrays (a grammar mask the arrays cannot compute masks prompt by prompt)."""
        if not self.scores_by_verify:
            return False
        return not (self.grammar_masked
                    and type(self).action_masks_arrays is ExpressionTask.action_masks_arrays)

    # -- batches (the Task contract), as arrays on the array path -------------------------------------
    def sample_batch(self, rng: np.random.Generator, split: str, k: int) -> PromptBatch:
        if not self.array_path():
            return super().sample_batch(rng, split, k)
        numbers, targets, _ = self.sample_arrays(rng, split, k)
        return {NUMBERS: numbers, TARGETS: targets}

    def prompt_batch(self, prompts: Sequence[Prompt]) -> PromptBatch:
        if not self.array_path():
            return super().prompt_batch(prompts)
        numbers = np.array([p.numbers for p in prompts], dtype=np.int64).reshape(len(prompts), -1)
        return {NUMBERS: numbers, TARGETS: np.array([p.target for p in prompts], dtype=np.int64)}

    def batch_prompt(self, batch: PromptBatch, row: int) -> Prompt:
        if NUMBERS not in batch:
            return super().batch_prompt(batch, row)
        return Prompt(tuple(int(x) for x in batch[NUMBERS][row]), int(batch[TARGETS][row]))

    def encode_batch(self, batch: PromptBatch) -> np.ndarray:
        if NUMBERS not in batch:
            return super().encode_batch(batch)
        return self.encode_arrays(batch[NUMBERS], batch[TARGETS])

    def context_batch(self, batch: PromptBatch) -> np.ndarray:
        if NUMBERS not in batch:
            return super().context_batch(batch)
        return self.context_arrays(batch[NUMBERS], batch[TARGETS])

    def batch_scorer(self, num_rows: int, weights: RewardWeights) -> BatchScorer:
        """The array verifier (:class:`~rlvr_env.tasks.expression.scorer.ExpressionScorer`) on the array
        path, else the default (``score_batch`` on finished rows)."""
        if not self.array_path():
            return super().batch_scorer(num_rows, weights)
        listed = self.prompts("train")
        width = len(listed[0].numbers) if listed else self.n_numbers
        return ExpressionScorer(self, num_rows, weights, width)

    def is_one_prompt(self, value: object) -> bool:
        """A :class:`Prompt` or one ``(numbers, target)`` pair is one prompt; any other sequence is one
        prompt per row."""
        if isinstance(value, Prompt):
            return True
        if isinstance(value, (tuple, list)) and len(value) == 2:
            first, second = value
            return isinstance(second, (int, np.integer)) and isinstance(first, (tuple, list))
        return False

    def check_vocab(self) -> None:
        """The array verifier's reading of the vocabulary: refuses tokens that would read differently
        token by token and as text (e.g. ``""``, ``" "``, ``"2+3"``), so that every env reads answers
        one way."""
        self.token_table()

    def token_table(self) -> TokenTable:
        """What the array verifier reads the vocabulary as (:meth:`TokenTable.from_vocab`), built once
        per vocabulary and task: the envs' vocabulary check and the batch scorer share it."""
        cached = self.__dict__.get("_token_table_cache")
        if cached is None or cached[0] is not self.vocab or cached[1] != self.eos_id:
            cached = (self.vocab, self.eos_id, TokenTable.from_vocab(self.vocab, self.eos_id))
            self.__dict__["_token_table_cache"] = cached
        return cached[2]

    def sample_arrays(self, rng: np.random.Generator, split: str,
                      k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """k prompts of ``split`` as arrays: numbers (k, N), targets (k,), and (k, 0) per-prompt facts."""
        prompts = self.sample_prompts(rng, split, k)
        numbers = np.array([p.numbers for p in prompts], dtype=np.int64).reshape(k, -1)
        return numbers, np.array([p.target for p in prompts], dtype=np.int64), np.zeros((k, 0), np.int64)

    def encode_arrays(self, numbers: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(k, prompt_dim) features of prompts given as arrays (:meth:`encode_prompt` per row)."""
        rows = [self.encode_prompt(Prompt(tuple(int(x) for x in nums), int(t)))
                for nums, t in zip(np.asarray(numbers).tolist(), np.asarray(targets).tolist())]
        return np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.prompt_dim), np.float32)

    def action_masks_arrays(self, tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """(B, V) masks of prefixes given as arrays: all-ones (a task with a grammar mask overrides it,
        or runs the vector env's generic path, which masks prompt by prompt)."""
        return np.ones((np.asarray(tokens).shape[0], len(self.vocab)), dtype=bool)

    def mask_automaton(self) -> Any:
        return None

    def program_table(self) -> Any:
        return None


def _whole(values: np.ndarray, width: int) -> np.ndarray:
    """(k, 1) context ids of |values| as whole-number tokens (``#v`` follows the digits)."""
    return (len(_CONTEXT_VOCAB) + np.abs(values))[:, None]


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """(k, width) context ids of |values| in decimal, most significant first, -1 for leading zeros."""
    v = np.abs(values)[:, None]
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)  # (width,)
    digits = _DIGIT0 + (v // powers) % 10
    leading = (v < powers) & (np.arange(width) < width - 1)  # "0" itself keeps its last digit
    return np.where(leading, -1, digits)
