"""Countdown with room to think: a reasoning trace, then the answer, with a calculator the env can run.

The prompts are Countdown's (:class:`~rlvr_env.tasks.countdown.task.CountdownTask`: the same draws, the
same split, the same replay rules). The answer is a transcript (:mod:`rlvr_env.tasks.think.trace`)::

    <think> 9 * 7 = 63 ; 63 + 1 = 64 ; back 9 - 1 = 8 ; 8 * 7 = 56 ; </think> <answer> ( 9 - 1 ) * 7 </answer>

**What is paid** (the parts of the verdict, each times its weight):

* ``accuracy``: the answer expression reaches the target under Countdown's rules (the verifier of today's
  Countdown, exact over the rationals, each number at most once). It reads the answer section only, found
  when ``</think>`` appears once, right before the only ``<answer>``, and the transcript ends with its only
  ``</answer>``; where it is not found, nothing is paid. The trace is never read for accuracy.
* ``format``: R1's structure: the transcript starts with its only ``<think>``, every step reads
  ``a op b = r ;`` (or ``back`` with a step to abandon), the answer section is found and the verifier
  reads a well-formed expression in it.
* ``step`` (paid only when the weights name it, ``reward_weights={"step": w}``): the share of written
  steps that are arithmetically true and use numbers available at that point (0 without steps).

A transcript cut off at ``max_length`` is paid nothing. The k1.5 length term is the agent's, applied to a
group (``GRPOConfig.length_weight``).

**The calculator** (``calculator=True``): when the policy writes ``=`` after ``a op b`` in the think
section, the env writes the result (its digits, or ``?``) and ``;`` into the transcript
(:meth:`ThinkTask.reply`). Those tokens are the environment's: they appear in the next observation and
are never an action, so no policy gradient or KL term goes through them.

**Measured, not paid** (:meth:`ThinkTask.episode_stats`, in ``info["stats"]``): ``actions`` (tokens the
policy wrote), ``steps``, ``backs`` (failed branches), ``calculator_calls``, ``step_pass_rate`` and
``consistent``: 1 when the answer is paid and every operation of it is a step of one successful branch of
its own trace (the trace derives the answer; "guessing beats reasoning" shows as paid answers that are
not consistent).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlvr_env.rewards import RewardWeights, Verdict, best_reward
from rlvr_env.tasks.base import ContextTokens, Task
from rlvr_env.tasks.countdown.settings import CountdownSettings, settings_of
from rlvr_env.tasks.countdown.task import CountdownTask
from rlvr_env.tasks.expression.prompt import Prompt
from rlvr_env.tasks.expression.task import describe_grammar
from rlvr_env.tasks.expression.verifier import verify_prompt_text
from rlvr_env.tasks.think.solver import STYLES, Solved, solve
from rlvr_env.tasks.think.text import describe, render, tokenize
from rlvr_env.tasks.think.trace import (
    ANSWER, BACK, END_ANSWER, END_THINK, EQUALS, NO_NUMBER, THEN, THINK, TraceVocab, answer_equations,
    calculate, derives, read,
)

__all__ = ["DEFAULT_MAX_LENGTH", "ThinkTask"]

#: The default length cap per N (transcript tokens, the calculator's included): it holds the solver's
#: search trace uncut for most prompts (docs/think.md gives the shares) and its path style always.
DEFAULT_MAX_LENGTH = {2: 48, 3: 96, 4: 160}
_CONTEXT = ("<pad>", "<bos>", ",", "<target>")
_OPTIONAL_PARTS = ("step",)


class ThinkTask(Task[Prompt]):
    """Countdown-N answered with a reasoning trace (see the module docstring for the rules).

    ``calculator``: the env writes each step's result. ``pool_masks``: the grammar mask also keeps each
    step's operands in the pool the steps before it leave (off: the trace's numbers are free and only
    the step check measures them). ``max_length``: the transcript's cap (None: the
    default of :data:`DEFAULT_MAX_LENGTH` for N, else ``40 N``). ``solution_style``: the style
    :meth:`solution` gives a cold start (``"search"``, ``"path"`` or ``"expression"``). Countdown's
    settings as keywords (``n_numbers=3``) or ``settings=``; Countdown's own ``max_length`` (its
    expression cap) is not a keyword here: the answer expression may be as long as Countdown allows.
    """

    name = "countdown_think"
    reward_parts = ("accuracy", "format", "step")
    answer_noun = "reasoning and expression"
    whole_completion = True  # the text layer hands the transcript whole: format pays its sections

    def __init__(self, settings: CountdownSettings | None = None, *, calculator: bool = False,
                 pool_masks: bool = False, max_length: int | None = None,
                 solution_style: str = "search", **keywords: Any) -> None:
        s = settings_of(settings, keywords, "CountdownThink")
        if not isinstance(calculator, bool):
            raise ValueError(f"calculator={calculator!r} must be a bool")
        if not isinstance(pool_masks, bool):
            raise ValueError(f"pool_masks={pool_masks!r} must be a bool")
        if solution_style not in STYLES:
            raise ValueError(f"solution_style={solution_style!r} is not one of {STYLES}")
        self.settings = s
        self.countdown = CountdownTask(s)
        self.calculator = calculator
        self.pool_masks = pool_masks
        self.solution_style = solution_style
        n, hi = s.n_numbers, s.number_range[1]
        if s.target_range[0] < 0:
            raise ValueError(f"target_range={s.target_range!r} must not go below 0: a trace writes "
                             "non-negative numbers")
        if max_length is None:
            max_length = DEFAULT_MAX_LENGTH.get(n, 40 * n)
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) \
                or not 8 <= max_length <= 1024:
            raise ValueError(f"max_length={max_length!r} must be an integer in [8, 1024] (transcript tokens)")
        self.max_length = int(max_length)
        #: the most digits a number of the trace can have: the largest value a step can reach
        self.max_digits = len(str(max(hi ** n, abs(s.target_range[1]), abs(s.target_range[0]))))
        self.trace_vocab = TraceVocab(s.operators, s.parentheses)
        self.vocab = self.trace_vocab.tokens
        self.eos_id = len(self.vocab) - 1
        self._id = {t: i for i, t in enumerate(self.vocab)}
        self.reply_after = frozenset({self._id[EQUALS]}) if calculator else frozenset()
        self.grammar = s.grammar

    # -- prompts: Countdown's ------------------------------------------------------------------------
    def sample_prompt(self, rng: np.random.Generator, split: str) -> Prompt:
        return self.countdown.sample_prompt(rng, split)

    def sample_prompts(self, rng: np.random.Generator, split: str, k: int) -> list[Prompt]:
        return self.countdown.sample_prompts(rng, split, k)

    def validate_prompt(self, prompt: object) -> Prompt:
        return self.countdown.validate_prompt(prompt)

    def split_of(self, prompt: Prompt) -> str:
        return self.countdown.split_of(prompt)

    def render_prompt(self, prompt: Prompt) -> str:
        return self.countdown.render_prompt(prompt)

    @property
    def prompt_layout(self) -> dict[str, slice]:
        return self.countdown.prompt_layout

    def encode_prompt(self, prompt: Prompt) -> np.ndarray:
        return self.countdown.encode_prompt(prompt)

    def prompt_record(self, prompt: Prompt) -> dict[str, Any]:
        return self.countdown.prompt_record(prompt)

    def prompt_from_record(self, record: dict[str, Any]) -> Prompt:
        return self.countdown.prompt_from_record(record)

    def keywords(self) -> dict[str, Any]:
        fields = {name: getattr(self.settings, name) for name in CountdownSettings.field_names()}
        fields = {k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items()}
        return {**fields, "calculator": self.calculator, "pool_masks": self.pool_masks,
                "max_length": self.max_length,
                "solution_style": self.solution_style}

    # -- the token context: the prompt's digits are the trace's own digit tokens ----------------------
    def context_tokens(self) -> ContextTokens:
        n = self.settings.n_numbers
        digits = len(str(self.settings.number_range[1]))
        target_digits = len(str(self.settings.target_range[1]))
        return ContextTokens(_CONTEXT, 1 + n * (digits + 1) + target_digits)

    def encode_context(self, prompt: Prompt) -> np.ndarray:
        offset = len(_CONTEXT)
        ids = [1]
        for k, x in enumerate(prompt.numbers):
            if k:
                ids.append(2)
            ids += [offset + self._id[c] for c in str(x)]
        ids.append(3)
        ids += [offset + self._id[c] for c in str(prompt.target)]
        width = self.context_tokens().width
        return np.array([0] * (width - len(ids)) + ids, dtype=np.int64)

    # -- the calculator ---------------------------------------------------------------------------
    def reply(self, prompt: Prompt, tokens: Sequence[int]) -> tuple[int, ...]:
        """With the calculator on: after ``a op b =`` in the think section, the result's tokens and ``;``
        (``?`` when it is no Countdown number); otherwise nothing."""
        if not self.calculator or not tokens or tokens[-1] != self._id[EQUALS]:
            return ()
        vocab = self.vocab
        words = [vocab[t] for t in tokens]
        if END_THINK in words or not words or words[0] != THINK:
            return ()
        # read back: digits, an operator, digits, then the start of the step
        i = len(words) - 2
        j = i
        while j >= 0 and words[j].isdigit() and len(words[j]) == 1:
            j -= 1
        b_digits = "".join(words[j + 1: i + 1])
        if not b_digits or j < 0 or words[j] not in self.settings.operators:
            return ()
        op = words[j]
        k = j - 1
        while k >= 0 and words[k].isdigit() and len(words[k]) == 1:
            k -= 1
        a_digits = "".join(words[k + 1: j])
        if not a_digits or k < 0 or words[k] not in (THINK, THEN, BACK):
            return ()
        if any(len(d) > self.max_digits or (len(d) > 1 and d[0] == "0") for d in (a_digits, b_digits)):
            return ()
        result = calculate(int(a_digits), op, int(b_digits), self.max_digits)
        written = NO_NUMBER if result is None else str(result)
        return (*(self._id[c] for c in ([written] if result is None else written)), self._id[THEN])

    # -- text (:mod:`rlvr_env.tasks.think.text`): the transcript read with the task's own tokens -----------
    def prompt_text(self, prompt: Prompt, instruction: str) -> str:
        return describe(prompt.numbers, prompt.target, describe_grammar(self.grammar),
                        self.settings.operators, self.calculator, instruction)

    def parse_answer(self, prompt: Prompt, text: str) -> list[int] | None:
        """The transcript's token ids (whitespace between tokens ignored), None when the vocabulary cannot
        write it; reading stops one token past :attr:`max_length`."""
        return tokenize(self.vocab, text, self.max_length)

    def tokens_text(self, token_ids: Sequence[int]) -> str:
        return render(self.vocab, token_ids)

    def score_text(self, prompt: Prompt, text: str, weights: RewardWeights) -> Verdict:
        """A whole transcript's text, paid as :meth:`score` pays its tokens (nothing is appended: it
        writes its own ``</answer>``); past :attr:`max_length` tokens it is cut and paid nothing."""
        ids = self.parse_answer(prompt, text)
        if ids is None:
            parts = {"accuracy": 0.0, "format": 0.0, **{p: 0.0 for p in _OPTIONAL_PARTS if p in weights}}
            return Verdict(0.0, False, False, None, f"transcript {text!r:.60} cannot be written in this "
                           "task's vocabulary", text, parts)
        return self.score(prompt, ids[: self.max_length], weights, truncated=len(ids) > self.max_length)

    # -- scoring ---------------------------------------------------------------------------------------
    def _read(self, prompt: Prompt, token_ids: Sequence[int]) -> tuple[Any, list[str]]:
        words = [self.vocab[t] for t in token_ids]
        reading = read(words, prompt.numbers, prompt.target, max_digits=self.max_digits,
                       operators=self.settings.operators)
        return reading, words

    def decode(self, token_ids: Sequence[int], prompt: Prompt) -> str:
        """The answer expression's text (what accuracy reads), or the whole transcript when no answer
        section is found."""
        reading, words = self._read(prompt, token_ids)
        if reading.answer is None:
            return " ".join(words)
        return "".join(words[i] for i in reading.answer)

    def transcript(self, token_ids: Sequence[int]) -> str:
        """The whole transcript as text, tokens separated by spaces."""
        return " ".join(self.vocab[t] for t in token_ids)

    def score(self, prompt: Prompt, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        reading, words = self._read(prompt, token_ids)
        optional = [p for p in _OPTIONAL_PARTS if p in weights]
        if truncated:
            parts = {"accuracy": 0.0, "format": 0.0, **{p: 0.0 for p in optional}}
            return Verdict(0.0, False, False, None, f"no {END_ANSWER} within {self.max_length} tokens "
                           "(truncated)", " ".join(words), parts)
        if reading.answer is None:
            correct = well_formed = False
            value, reason, text = None, reading.reason, " ".join(words)
        else:
            text = "".join(words[i] for i in reading.answer)
            v = verify_prompt_text(text, prompt.numbers, prompt.target, self.grammar, weights)
            correct, value = v.correct, v.value
            well_formed = v.well_formed and reading.well_formed
            reason = reading.reason if not reading.well_formed else v.reason
        raw: dict[str, float] = {"accuracy": float(correct), "format": float(well_formed)}
        if "step" in optional:
            raw["step"] = reading.step_pass_rate
        parts = weights.weigh(raw)
        return Verdict(float(sum(parts.values())), bool(correct), bool(well_formed), value, reason, text,
                       parts)

    def best_reward(self, weights: RewardWeights) -> float:
        """The most a transcript earns: accuracy, format, and the step check when the weights name it."""
        return best_reward(weights, ("accuracy", "format", *(p for p in _OPTIONAL_PARTS if p in weights)))

    def episode_stats(self, prompt: Prompt, token_ids: Sequence[int]) -> dict[str, float]:
        """What the transcript shows, paid or not (the module docstring lists the keys)."""
        reading, words = self._read(prompt, token_ids)
        calls = 0
        written = 0
        if self.calculator:
            in_result = False
            for i, w in enumerate(words):
                if in_result:
                    written += 1
                    if w == THEN:
                        in_result = False
                elif w == EQUALS and END_THINK not in words[:i]:
                    in_result = True
                    calls += 1
        consistent = 0.0
        if reading.answer is not None:
            answer_words = [words[i] for i in reading.answer]
            text = "".join(answer_words)
            if verify_prompt_text(text, prompt.numbers, prompt.target, self.grammar, RewardWeights()).correct:
                eqs = answer_equations(answer_words)
                consistent = float(eqs is not None and any(derives(b, eqs) for b in reading.branches))
        return {"actions": float(len(words) - written), "steps": float(len(reading.steps)),
                "backs": float(reading.backs), "calculator_calls": float(calls),
                "step_pass_rate": reading.step_pass_rate, "consistent": consistent}

    # -- a cold start: the solver ----------------------------------------------------------------------
    def solve(self, prompt: Prompt, style: str | None = None) -> Any:
        """The solver's transcript of ``style`` (default :attr:`solution_style`) for ``prompt``
        (:class:`~rlvr_env.tasks.think.solver.Solved`), or None when it finds none that fits. A drawn
        prompt that no whole-number steps solve gets its generating expression after an empty trace."""
        solved = solve(prompt.numbers, prompt.target, style=style or self.solution_style,
                       max_length=self.max_length, max_digits=self.max_digits, operators=self.settings.operators)
        text = prompt.info().get("solution")
        if solved is None and isinstance(text, str):
            # No solution with whole-number steps (a fraction on the way, rare for N = 4): the drawn
            # prompt's generating expression, with an empty trace.
            tokens = (THINK, END_THINK, ANSWER, *text.replace(" ", ""), END_ANSWER)
            if len(tokens) <= self.max_length and all(t in self._id for t in tokens):
                return Solved(tokens, (False,) * len(tokens), True, 0)
        return solved

    def solution(self, prompt: Prompt) -> tuple[int, ...] | None:
        """The policy's tokens of the solver's transcript (with the calculator on, the tokens it writes are
        left out: the env writes them)."""
        solved = self.solve(prompt)
        if solved is None:
            return None
        return tuple(self._id[t] for t, env in zip(solved.tokens, solved.written_by_calculator)
                     if not (env and self.calculator))

    # -- masks: the transcript's grammar ----------------------------------------------------------------
    def action_mask(self, prompt: Prompt, prefix: Sequence[int]) -> np.ndarray:
        """Tokens that keep ``prefix`` a prefix of a well-formed transcript whose answer uses the prompt's
        numbers, each at most once. The trace's numbers are free (the step check measures them) unless
        ``pool_masks`` is on: then each step's two operands are numbers of the pool the steps before it
        leave (its result stays free without the calculator). A prefix that already breaks the grammar
        (written without masks) allows every token."""
        allowed = _allowed(self, prompt, [self.vocab[t] for t in prefix])
        if allowed is None:  # the prefix already breaks the grammar: nothing is refused
            return np.ones(len(self.vocab), dtype=bool)
        mask = np.zeros(len(self.vocab), dtype=bool)
        mask[[self._id[t] for t in allowed]] = True
        return mask


_ANY = None  # an answer already off the grammar: every token is allowed (nothing can mend it)


def _allowed(task: ThinkTask, prompt: Prompt, words: list[str]) -> set[str] | None:
    """The tokens that may follow ``words``, or None (every token) when ``words`` already break the
    grammar. One pass over the words: each must be allowed where it stands."""
    if not words:
        return {THINK}
    if words[0] != THINK:
        return _ANY
    digits = set("0123456789")
    ops = set(task.settings.operators)
    md = task.max_digits
    depth = 0
    state = "start"  # start | a | op | b | eq | r | q
    number = ""
    # the pool (pool_masks): the numbers the steps so far leave, and the pools a back returns to
    pool: Counter[int] = Counter(prompt.numbers)
    saved: list[Counter[int]] = []
    a_value = b_value = 0

    def more() -> set[str]:
        return set() if number == "0" or len(number) >= md else set(digits)

    def toward(free: Counter[int]) -> set[str]:
        return _continuations(number, [x for x, c in free.items() if c > 0])

    def without_a() -> Counter[int]:
        rest = pool.copy()
        rest[a_value] -= 1
        return rest

    def here() -> set[str]:
        if state == "start":
            start = set(digits) if not task.pool_masks else toward(pool) if pool.total() >= 2 else set()
            return start | {END_THINK} | ({BACK} if depth > 0 else set())
        if state == "a":
            if not task.pool_masks:
                return more() | ops
            return toward(pool) | (ops if pool[int(number)] > 0 else set())
        if state == "op":
            return set(digits) if not task.pool_masks else toward(without_a())
        if state == "b":
            if not task.pool_masks:
                return more() | {EQUALS}
            rest = without_a()
            return toward(rest) | ({EQUALS} if rest[int(number)] > 0 else set())
        if state == "eq":
            return set(digits) | {NO_NUMBER}
        if state == "r":
            return more() | {THEN}
        return {THEN}

    for k, w in enumerate(words[1:], start=1):
        if w not in here():
            return _ANY
        if w == END_THINK:
            rest = words[k + 1:]
            if not rest:
                return {ANSWER}
            if rest[0] != ANSWER:
                return _ANY
            return _answer_allowed(task, prompt, rest[1:])
        if state == "start":
            if w == BACK:
                depth -= 1
                if task.pool_masks:
                    pool = saved.pop()
            else:
                state, number = "a", w
        elif state == "a":
            if w in ops:
                state, number, a_value = "op", "", int(number)
            else:
                number += w
        elif state == "op":
            state, number = "b", w
        elif state == "b":
            if w == EQUALS:
                state, number, b_value = "eq", "", int(number)
            else:
                number += w
        elif state == "eq":
            state, number = ("q", "") if w == NO_NUMBER else ("r", w)
        elif state == "r":
            if w == THEN:
                if task.pool_masks:  # the masks kept both operands in the pool
                    saved.append(pool)
                    pool = pool - Counter((a_value, b_value))
                    pool[int(number)] += 1
                state, number, depth = "start", "", depth + 1
            else:
                number += w
        else:  # "q": the ';' after '?'
            state, number = "start", ""
    return here()


def _continuations(number: str, free: Sequence[int]) -> set[str]:
    """The digits that continue ``number`` (its digits so far) toward one of the numbers ``free``."""
    return {str(x)[len(number)] for x in free if len(str(x)) > len(number) and str(x).startswith(number)}


def _answer_allowed(task: ThinkTask, prompt: Prompt, words: list[str]) -> set[str] | None:
    """The answer section after ``<answer>``: an infix expression over unused prompt numbers."""
    ops = set(task.settings.operators)
    parens = task.settings.parentheses
    free = list(prompt.numbers)
    depth = 0
    number = ""
    expect_operand = True

    def here() -> set[str]:
        out: set[str] = set()
        if number:  # continue the number toward a free prompt number, or end it if it is one
            out |= _continuations(number, free)
            if int(number) in free:
                if len(free) > 1:
                    out |= ops
                if parens and depth > 0:
                    out.add(")")
                if depth == 0:
                    out.add(END_ANSWER)
            return out
        if expect_operand:
            out |= {str(x)[0] for x in free}
            if parens and free:
                out.add("(")
            return out
        if free:
            out |= ops
        if parens and depth > 0:
            out.add(")")
        if depth == 0:
            out.add(END_ANSWER)
        return out

    for w in words:
        if w not in here() or w == END_ANSWER:
            return _ANY
        if w.isdigit() and len(w) == 1:
            number += w
            continue
        if number:
            free.remove(int(number))
            number = ""
        if w == "(":
            depth += 1
        elif w == ")":
            depth -= 1
        expect_operand = w in ops or w == "("
    return here()
