"""A language model's completion scored against an arithmetic prompt given as numbers and a target (no task
object): what the TRL and ``verifiers`` bridges call on dataset rows. The extraction policy is
:mod:`rlvr_env.completions`'; the answer then goes to :func:`rlvr_env.verify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from rlvr_env.tasks.expression.prompt import Prompt  # noqa: F401 - Prompt: the doctests
from rlvr_env.tasks.expression.verifier import (
    _DEFAULT_GRAMMAR,
    _DEFAULT_WEIGHTS,
    Grammar,
    _check_numbers,
    _check_target,
    _verify_text,
    verify,
)
from rlvr_env.rewards import RewardWeights, Verdict

from rlvr_env.completions import DEFAULT_FORMAT, AnswerFormat, _extract_text, extract_answer, refused

__all__ = ["score_completion", "score_parts"]


def score_completion(
    completion: object,
    numbers: Sequence[int],
    target: int | Fraction,
    *,
    grammar: Grammar | None = None,
    weights: RewardWeights | None = None,
    fmt: AnswerFormat = DEFAULT_FORMAT,
) -> Verdict:
    """Extract the answer from ``completion`` and verify it. Never raises; never evaluates code.

    The verdict is :func:`rlvr_env.verify`'s on the extracted answer, or :func:`refused`'s when
    extraction refuses the completion (its reason names the rule).

    >>> v = score_completion("<answer>2+3*5</answer>", (2, 3, 5), 17)
    >>> v.reward, v.reason
    (1.1, None)
    >>> score_completion("<answer>2**3</answer>", (2, 3), 8).reason
    "power operator '**' at position 1 is not allowed"
    """
    answer, reason = extract_answer(completion, fmt)
    if answer is None:
        return refused(f"answer extraction: {reason}")
    return verify(answer, numbers, target, grammar=grammar, weights=weights)


def score_parts(
    completions: Sequence[object],
    numbers: Sequence[Sequence[int]],
    targets: Sequence[int | Fraction],
    *,
    grammar: Grammar | None = None,
    weights: RewardWeights | None = None,
    fmt: AnswerFormat = DEFAULT_FORMAT,
) -> tuple[list[float], list[float], list[str | None], list[bool]]:
    """:func:`score_completion` over a batch, without building :class:`~rlvr_env.Verdict` objects:
    ``(accuracy parts, format parts, reasons, correct)``, one entry per completion, each equal to the
    matching field of ``score_completion(completions[i], numbers[i], targets[i], ...)``
    (tests/test_verifier_fast.py checks this on random and hostile batches). The reward functions of
    :mod:`rlvr_env.llm` score through it.

    A plain-text completion takes the fast path: the extraction policy's own text steps called directly
    (a refusal is a returned reason, not an exception) and the answer verified by the verifier's fast path
    for text. A conversation or a ``str`` subclass goes through :func:`extract_answer` and, for a
    subclass answer, :func:`rlvr_env.verify`. Wrongly typed ``numbers`` or ``target`` rows raise
    ``TypeError``, as :func:`rlvr_env.verify` does, for rows whose answer was extracted.
    """
    if not len(completions) == len(numbers) == len(targets):
        raise ValueError(f"{len(completions)} completions, {len(numbers)} rows of numbers and {len(targets)} "
                         "targets: one of each per completion")
    if grammar is None:
        grammar = _DEFAULT_GRAMMAR
    if weights is None:
        weights = _DEFAULT_WEIGHTS
    if not isinstance(grammar, Grammar) or not isinstance(weights, RewardWeights):
        return _score_parts_reference(completions, numbers, targets, grammar, weights, fmt)
    acc_w, fmt_w = weights.accuracy, weights.format
    accuracy: list[float] = []
    form: list[float] = []
    reasons: list[str | None] = []
    correct: list[bool] = []
    for completion, nums, target in zip(completions, numbers, targets):
        # plain text: the policy's text steps directly; anything else: the whole reference extraction
        if type(completion) is str:
            answer, why = _extract_text(completion, fmt)
        else:
            answer, why = extract_answer(completion, fmt)
        if answer is None or type(answer) is not str:
            if answer is None:
                accuracy.append(0.0)  # refused(): no part is paid
                form.append(0.0)
                reasons.append(f"answer extraction: {why}")
                correct.append(False)
            else:  # a str subclass from a conversation: the reference verifier
                verdict = verify(answer, nums, target, grammar=grammar, weights=weights)
                accuracy.append(verdict.parts["accuracy"])
                form.append(verdict.parts["format"])
                reasons.append(verdict.reason)
                correct.append(verdict.correct)
            continue
        if type(nums) is not tuple:
            nums = tuple(nums) if type(nums) is list else _check_numbers(nums)
        for x in nums:  # ints, as verify() requires (a loop here costs less than a call)
            if type(x) is not int:
                nums = _check_numbers(nums)  # raises TypeError, or converts integer types to int
                break
        if type(target) is not int:
            _check_target(target)
        ok, well_formed, _, reason = _verify_text(answer, nums, target, grammar)
        accuracy.append(acc_w * ok)
        form.append(fmt_w * well_formed)
        reasons.append(reason)
        correct.append(ok)
    return accuracy, form, reasons, correct


def _score_parts_reference(
    completions: Sequence[object], numbers: Sequence[Sequence[int]], targets: Sequence[int | Fraction],
    grammar: Any, weights: Any, fmt: AnswerFormat,
) -> tuple[list[float], list[float], list[str | None], list[bool]]:
    """:func:`score_parts` through :func:`score_completion`, row by row (the reference)."""
    verdicts = [score_completion(c, n, t, grammar=grammar, weights=weights, fmt=fmt)
                for c, n, t in zip(completions, numbers, targets)]
    return ([v.parts["accuracy"] for v in verdicts], [v.parts["format"] for v in verdicts],
            [v.reason for v in verdicts], [v.correct for v in verdicts])
