"""Reward functions for TRL's ``GRPOTrainer``, and the prompt dataset they score.

    from trl import GRPOConfig, GRPOTrainer
    from rlvr_env.llm import make_dataset, reward_functions

    trainer = GRPOTrainer(model=..., reward_funcs=reward_functions("countdown"),
                          train_dataset=make_dataset("countdown", split="train", size=1000, seed=0), ...)

Each function has ``GRPOTrainer``'s signature: it is called with ``prompts``, ``completions`` (text, or
conversational lists of messages), ``completion_ids`` and the dataset's columns (``numbers``,
``target``) as keyword arguments, and returns one float per completion. The values are the weighted
reward parts of :func:`rlvr_env.verify` (:class:`AccuracyReward` pays ``accuracy_weight`` for a correct
answer, :class:`FormatReward` ``format_weight`` for a well-formed one), so with TRL's default
``reward_weights`` their sum is exactly the env's reward, and TRL logs each part under its own name.
The answer is cut out of a completion by :mod:`rlvr_env.completions`' policy. Each call keeps the
verdicts' reasons in ``last_reasons`` and, inside TRL, logs them as a completions-table column
(``log_extra``). :class:`LengthReward` is the Kimi k1.5 length term over each prompt's group.

No import of trl here: the functions are plain callables (picklable, for TRL's worker processes);
:func:`make_dataset` imports ``datasets`` when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr_env.completions import DEFAULT_FORMAT, AnswerFormat, prompt_text, score_task_completion
from rlvr_env.tasks.expression.completions import score_completion, score_parts
from rlvr_env.llm.common import resolve_task, sample_prompts
from rlvr_env.rewards import length_reward
from rlvr_env.tasks.base import Task
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.expression.verifier import Grammar
from rlvr_env.rewards import BASE_PARTS, DEFAULT_WEIGHTS, RewardWeights, Verdict

__all__ = ["AccuracyReward", "FormatReward", "LengthReward", "PartReward", "reward_functions", "make_dataset",
           "score_batch"]


def _rows(name: str, values: Any, n: int) -> Sequence[Any]:
    if values is None:
        raise ValueError(f"reward function needs the dataset column {name!r} (one value per completion); "
                         "build the dataset with rlvr_env.llm.make_dataset")
    sequence = hasattr(values, "__len__") and hasattr(values, "__getitem__")
    if isinstance(values, (str, bytes)) or not sequence:
        raise TypeError(f"column {name!r} must be a sequence with one value per completion, got "
                        f"{type(values).__name__} {values!r:.80}")
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return values


def score_batch(
    completions: Sequence[object],
    numbers: Sequence[Sequence[int]],
    target: Sequence[int],
    *,
    grammar: Grammar,
    weights: RewardWeights,
    fmt: AnswerFormat = DEFAULT_FORMAT,
) -> list[Verdict]:
    """One verdict per completion (row i scored against ``numbers[i]`` and ``target[i]``)."""
    n = len(completions)
    numbers = _rows("numbers", numbers, n)
    target = _rows("target", target, n)
    # Rows as tuples: verify() reads a tuple of ints without re-checking each element's type.
    verdicts = []
    for row, (c, nums, t) in enumerate(zip(completions, numbers, target)):
        try:
            verdicts.append(score_completion(c, nums if type(nums) is tuple else tuple(nums), t,
                                             grammar=grammar, weights=weights, fmt=fmt))
        except TypeError as err:  # a wrongly typed dataset value: say which row
            raise TypeError(f"row {row} of the batch (numbers={nums!r:.60}, target={t!r:.30}): "
                            f"{err}") from None
    return verdicts


def _freeze(value: Any) -> Any:
    """A value snapshot of a batch's inputs for the cache key: equal to another snapshot exactly when the
    inputs are equal by value. Strings and ints stay as they are, other scalars are tagged with their
    type (so ``1.0`` and ``True`` do not stand for ``1``), lists, tuples and numpy arrays become tuples,
    mappings sorted item tuples. Anything else gets a fresh object, so a batch holding it never hits."""
    kind = type(value)
    if kind is str or kind is int:
        return value
    if isinstance(value, (str, bytes, int, float)) or value is None:  # bool, float, subclasses
        return (kind.__name__, value)
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((repr(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars: plain Python values
    if callable(tolist) and hasattr(value, "dtype"):
        return _freeze(tolist())
    return object()


class _VerifierReward:
    """Shared machinery: the task's grammar, the weights, the extraction format, and a one-batch cache so
    that the accuracy and format functions of one trainer step verify each completion once."""

    part = ""

    def __init__(
        self,
        task: str | Task = "countdown",
        *,
        accuracy_weight: float = DEFAULT_WEIGHTS.accuracy,
        format_weight: float = DEFAULT_WEIGHTS.format,
        reward_weights: dict[str, float] | None = None,
        answer_format: AnswerFormat = DEFAULT_FORMAT,
        cache: dict[str, Any] | None = None,
        part: str | None = None,
    ) -> None:
        if not isinstance(answer_format, AnswerFormat):
            raise ValueError(f"answer_format={answer_format!r} must be an rlvr_env.completions.AnswerFormat")
        self.task = resolve_task(task)
        #: an arithmetic task scored by the package's verifier: rows are scored by the fast text path
        #: from the ``numbers`` / ``target`` columns; any other task through its own score_text
        self._fast = isinstance(self.task, ExpressionTask) and self.task.scores_by_verify
        self.grammar = self.task.grammar if isinstance(self.task, ExpressionTask) else None
        #: the dataset columns that hold a prompt (:meth:`rlvr_env.Task.prompt_record`'s keys)
        self.columns = prompt_columns(self.task)
        self.weights = RewardWeights.of(accuracy_weight, format_weight, reward_weights)
        if part is not None:
            if not isinstance(part, str) or part not in self.task.reward_parts:
                raise ValueError(f"part={part!r} is not one of the parts task {self.task.name!r} pays "
                                 f"{self.task.reward_parts}")
            self.part = part
        self.answer_format = answer_format
        self.__name__ = f"rlvr_{self.part}" if self.part else f"rlvr_{type(self).__name__}"
        self._cache = cache if cache is not None else {}
        #: The reasons of the last call's verdicts (None for a correct answer), one per completion.
        self.last_reasons: list[str | None] = []

    def scored(self, completions: Sequence[object], numbers: Any = None, target: Any = None,
               **columns: Any) -> tuple[dict[str, list[float]], list[str | None], list[bool]]:
        """``(weighted parts by name, reasons, correct)`` for the batch (for an arithmetic task
        :func:`rlvr_env.tasks.expression.completions.score_parts`: each entry equals :func:`score_batch`'s
        verdicts'); every part of the task's :attr:`~rlvr_env.Task.reward_parts` is there (0 where a
        verdict lacks it)."""
        # The cache hits only for inputs equal *by value* to the last batch's: the key is a frozen copy
        # (tuples of ints and strings), so numpy rows compare without "ambiguous truth value" errors,
        # a column changed in place between two calls is a miss, and the entry is written only after
        # scoring succeeded (a failing batch leaves the previous entry, never a half-made one).
        columns.update(numbers=numbers, target=target)
        columns = {name: columns.get(name) for name in self.columns}
        key = _freeze((completions, columns))
        cached = self._cache.get("batch")
        if cached is not None and cached[0] == key:
            return cached[1]  # type: ignore[no-any-return]
        n = len(completions)
        if not self._fast:
            verdicts = self.verdicts(completions, **columns)
            parts = {name: [v.parts.get(name, 0.0) for v in verdicts] for name in self.task.reward_parts}
            result = (parts, [v.reason for v in verdicts], [v.correct for v in verdicts])
            self._cache["batch"] = (key, result)
            return result
        numbers, target = _rows("numbers", numbers, n), _rows("target", target, n)
        assert self.grammar is not None  # an arithmetic task
        try:
            accuracy, fmt, reasons, correct = score_parts(completions, numbers, target, grammar=self.grammar,
                                                          weights=self.weights, fmt=self.answer_format)
            result = ({"accuracy": accuracy, "format": fmt}, reasons, correct)
        except TypeError:  # a wrongly typed dataset value: score_batch names its row
            score_batch(completions, numbers, target, grammar=self.grammar, weights=self.weights,
                        fmt=self.answer_format)
            raise
        self._cache["batch"] = (key, result)
        return result

    def verdicts(self, completions: Sequence[object], numbers: Any = None, target: Any = None,
                 **columns: Any) -> list[Verdict]:
        """The batch's :class:`~rlvr_env.Verdict` objects (not cached): :func:`score_batch` for an
        arithmetic task, else each row's prompt rebuilt from its columns
        (:meth:`rlvr_env.Task.prompt_from_record`) and scored by :meth:`rlvr_env.Task.score_text`."""
        if self._fast:
            assert self.grammar is not None  # an arithmetic task
            return score_batch(completions, numbers, target, grammar=self.grammar, weights=self.weights,
                               fmt=self.answer_format)
        columns.update(numbers=numbers, target=target)
        n = len(completions)
        rows = {name: _rows(name, columns.get(name), n) for name in self.columns}
        prompts = [self.task.prompt_from_record({name: rows[name][i] for name in self.columns})
                   for i in range(n)]
        return [score_task_completion(self.task, p, c, self.weights, self.answer_format)
                for p, c in zip(prompts, completions)]

    def _log(self, reasons: list[str | None], log_extra: Callable[[str, list], None] | None) -> None:
        self.last_reasons = list(reasons)
        if callable(log_extra):
            log_extra(f"{self.__name__}_reason", [r or "" for r in reasons])

    def __call__(self, prompts: Any = None, completions: Sequence[object] = (), log_extra: Any = None,
                 **kwargs: Any) -> list[float]:
        parts, reasons, _ = self.scored(completions, **{name: kwargs.get(name) for name in self.columns})
        self._log(reasons, log_extra)
        return list(parts[self.part])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(task={self.task.name!r}, weights={self.weights}, "
                f"answer_format={self.answer_format})")


class PartReward(_VerifierReward):
    """One named reward part of the task (``part=``, one of its :attr:`~rlvr_env.Task.reward_parts`) as a
    TRL reward function, weighed as the env weighs it."""


class AccuracyReward(_VerifierReward):
    """``accuracy_weight`` for a correct answer, else 0 (the ``accuracy`` reward part)."""

    part = "accuracy"


class FormatReward(_VerifierReward):
    """``format_weight`` for a well-formed answer (extracted, in the grammar, numbers used by the rule),
    else 0 (the ``format`` reward part)."""

    part = "format"


class LengthReward(_VerifierReward):
    """The Kimi k1.5 length term (:func:`rlvr_env.length_reward`) as a group-level TRL reward.

    TRL scores a whole generation batch in one call; the completions of one prompt form a group. With
    ``num_generations`` set (as in ``GRPOConfig``), groups are consecutive blocks of that size, which is
    how ``GRPOTrainer`` lays a batch out; without it, completions with the same prompt, numbers and target
    form a group. Length is the number of completion tokens (``completion_ids``) when TRL passes them,
    else characters. ``weight`` scales the term (k1.5's is 1; it ranges over [-0.5, 0.5]).
    """

    part = "length"

    def __init__(self, task: str | Task = "countdown", *, num_generations: int | None = None,
                 weight: float = 1.0, **kwargs: Any) -> None:
        super().__init__(task, **kwargs)
        if num_generations is not None and (isinstance(num_generations, bool)
                                            or not isinstance(num_generations, int) or num_generations < 1):
            raise ValueError(f"num_generations={num_generations!r} must be a positive integer or None")
        self.num_generations = num_generations
        self.weight = RewardWeights(accuracy=weight).accuracy  # validated as a finite real

    def __call__(self, prompts: Any = None, completions: Sequence[object] = (), completion_ids: Any = None,
                 log_extra: Any = None, **kwargs: Any) -> list[float]:
        n = len(completions)
        columns = {name: kwargs.get(name) for name in self.columns}
        _, reasons, correct = self.scored(completions, **columns)
        self.last_reasons = list(reasons)
        if completion_ids is not None and len(completion_ids) == n:
            lengths = [len(ids) for ids in completion_ids]
        else:
            lengths = [len(c) if isinstance(c, str) else len(repr(c)) for c in completions]
        groups: dict[Any, list[int]] = {}
        if self.num_generations is not None:
            if n % self.num_generations:
                raise ValueError(f"{n} completions do not split into groups of num_generations="
                                 f"{self.num_generations}")
            for i in range(n):
                groups.setdefault(i // self.num_generations, []).append(i)
        else:
            prompt_rows = prompts if prompts is not None and len(prompts) == n else [None] * n
            rows = {name: _rows(name, columns[name], n) for name in self.columns}
            for i in range(n):
                key = (repr(prompt_rows[i]), *(repr(_item(rows[name][i])) for name in self.columns))
                groups.setdefault(key, []).append(i)
        out = [0.0] * n
        for members in groups.values():
            values = length_reward([lengths[i] for i in members], [correct[i] for i in members])
            for i, value in zip(members, values.tolist()):
                out[i] = self.weight * value
        return out


def reward_functions(
    task: str | Task = "countdown",
    *,
    accuracy_weight: float = DEFAULT_WEIGHTS.accuracy,
    format_weight: float = DEFAULT_WEIGHTS.format,
    reward_weights: dict[str, float] | None = None,
    answer_format: AnswerFormat = DEFAULT_FORMAT,
    length: bool = False,
    num_generations: int | None = None,
) -> list[Callable[..., list[float]]]:
    """One reward function per part the task pays (``[AccuracyReward, FormatReward]``, then a
    :class:`PartReward` for each further part of its :attr:`~rlvr_env.Task.reward_parts`), and
    :class:`LengthReward` if ``length``, for ``task``, sharing one verification per completion. Pass the
    same ``task`` to :func:`make_dataset`."""
    task = resolve_task(task)
    cache: dict[str, Any] = {}
    common: dict[str, Any] = dict(accuracy_weight=accuracy_weight, format_weight=format_weight,
                                  reward_weights=reward_weights, answer_format=answer_format, cache=cache)
    funcs: list[Callable[..., list[float]]] = [AccuracyReward(task, **common), FormatReward(task, **common)]
    funcs += [PartReward(task, part=name, **common) for name in task.reward_parts if name not in BASE_PARTS]
    if length:
        funcs.append(LengthReward(task, num_generations=num_generations, **common))
    return funcs


def make_dataset(
    task: str | Task = "countdown",
    split: str = "train",
    size: int | None = None,
    seed: int = 0,
    *,
    conversational: bool = False,
    system_prompt: str | None = None,
    answer_format: AnswerFormat = DEFAULT_FORMAT,
) -> Any:
    """A ``datasets.Dataset`` of prompts of ``task``'s ``split`` (the env's train or held-out set).

    Columns: ``prompt`` (text, or ``[{"role": "user", "content": text}]`` with ``conversational=True``,
    after a system message if ``system_prompt`` is given), ``numbers`` (list of ints), ``target`` (int)
    and ``split``. Prompts are :func:`rlvr_env.llm.sample_prompts` ``(task, split, size, seed)``: the
    same arguments give the same rows. The text says which operators and rules the task's verifier
    applies and where the answer goes (:func:`rlvr_env.completions.prompt_text`).
    """
    from datasets import Dataset  # the [llm] extra

    task = resolve_task(task)
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ValueError(f"system_prompt={system_prompt!r} must be a string or None")
    prompts = sample_prompts(task, split, size, seed)
    texts = [prompt_text(task, p, answer_format) for p in prompts]
    if conversational:
        head = [{"role": "system", "content": system_prompt}] if system_prompt else []
        column: list[Any] = [head + [{"role": "user", "content": t}] for t in texts]
    else:
        column = [f"{system_prompt}\n\n{t}" if system_prompt else t for t in texts]
    records = [task.prompt_record(p) for p in prompts]
    return Dataset.from_dict({
        "prompt": column,
        **{name: [r[name] for r in records] for name in prompt_columns(task)},
        "split": [split] * len(prompts),
    })


def prompt_columns(task: Task) -> tuple[str, ...]:
    """The dataset columns of ``task``'s prompts: the keys of :meth:`rlvr_env.Task.prompt_record`
    (``numbers`` and ``target`` for the arithmetic tasks). ``ValueError`` for a task without records."""
    try:
        record = task.prompt_record(task.sample_prompts(np.random.default_rng(0), "train", 1)[0])
    except NotImplementedError as err:
        raise ValueError(f"{err}; the language-model bridges need Task.prompt_record / prompt_from_record") \
            from None
    return tuple(record)


def _item(value: Any) -> Any:
    """A column value as a plain Python value (numpy rows become lists)."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else list(value) if isinstance(value, tuple) else value
