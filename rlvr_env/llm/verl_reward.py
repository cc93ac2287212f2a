"""verl's custom reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

Point verl at it with::

    custom_reward_function.path=<site-packages>/rlvr_env/llm/verl_reward.py
    custom_reward_function.name=compute_score

and build the parquet rows with :func:`verl_rows` (``data_source``, ``prompt`` as chat messages,
``ability``, ``reward_model: {"style": "rule", "ground_truth": ...}``, ``extra_info``).

**Ground truth encoding.** A dict (or the JSON text of one) with

- ``"numbers"``: the prompt's numbers, a list of integers (required);
- ``"target"``: the target, an integer (required);
- ``"operators"`` (a string, subset of ``"+-*/"``), ``"parentheses"`` (bool), ``"number_use"``
  (``"exactly_once"`` or ``"at_most_once"``), ``"integer_division"`` (bool): the grammar. Missing fields
  take the defaults of the task that ``data_source`` names (``"rlvr/Countdown"`` or
  ``"rlvr/Arithmetic"``, see :data:`DATA_SOURCES`); with another ``data_source`` every grammar field is
  required. ``data_source="countdown"`` with ground truth ``{"target", "numbers"}`` (the rows of
  TinyZero's and verl's Countdown examples) takes ``"rlvr/Countdown"``'s defaults: ``+-*/``,
  parentheses, each number at most once, exact division. TinyZero's own scorer also demands that
  every number is used (``"number_use": "exactly_once"`` in the ground truth gives that rule) and pays
  1.0 / 0.1 where ours pays ``accuracy_weight + format_weight`` / ``format_weight``;
- optional ``"open_tag"``, ``"close_tag"`` (strings) and ``"whole"`` (bool): the extraction format
  (default: the last ``<answer>...</answer>``).

**A task of its own** (registered with :func:`rlvr_env.tasks.register_task`, ``data_source``
``"rlvr/<name>"``): the ground truth is the prompt's record (:meth:`rlvr_env.Task.prompt_record`), plus
``"task_kwargs"``, the settings the task is rebuilt with (:meth:`rlvr_env.Task.keywords`; none: the
defaults), plus the optional extraction format above. A Digits row of ``reverse=True`` is scored reversed.

:func:`ground_truth` writes this for a prompt. A malformed ground truth is a broken dataset and raises
``ValueError`` naming the field; a completion never raises: a hostile one scores 0 with a reason.

**Return value.** A dict: ``"score"`` (the env's reward), every weighted part the task pays by its name
(``"accuracy"``, ``"format"`` and any other a task adds), ``"correct"`` and ``"well_formed"`` (0.0 / 1.0)
and ``"reason"`` (a string, ``""`` when correct; verl keeps non-score keys as ``reward_extra_info`` and
skips string columns when averaging). Weights can be set per row with ``extra_info={"accuracy_weight":
..., "format_weight": ..., "reward_weights": {"<part>": ...}}``.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from rlvr_env.completions import AnswerFormat, prompt_text, score_task_completion
from rlvr_env.tasks.expression.completions import score_completion
from rlvr_env.llm.common import grammar_spec, make_task, resolve_task, sample_prompts, task_spec
from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.countdown.settings import CountdownSettings
from rlvr_env.tasks.base import Task
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.registry import TASKS
from rlvr_env.tasks.expression.verifier import Grammar
from rlvr_env.rewards import RewardWeights

__all__ = ["compute_score", "ground_truth", "verl_rows", "DATA_SOURCES"]

#: data_source names and the grammar defaults each implies.
DATA_SOURCES: dict[str, dict[str, Any]] = {
    "rlvr/Countdown": grammar_spec(CountdownSettings().grammar),
    "rlvr/Arithmetic": grammar_spec(ArithmeticTask.grammar),
}
# TinyZero's and verl's Countdown datasets name their rows data_source="countdown" (module doc).
DATA_SOURCES["countdown"] = DATA_SOURCES["rlvr/Countdown"]
_GRAMMAR_FIELDS = ("operators", "parentheses", "number_use", "integer_division")
_DEFAULT_WEIGHTS = RewardWeights()


@lru_cache(maxsize=256)
def _grammar(operators: str, parentheses: bool, number_use: str, integer_division: bool) -> Grammar:
    return Grammar(operators=frozenset(operators), parentheses=parentheses,
                   number_use=number_use,  # type: ignore[arg-type]
                   integer_division=integer_division)


#: Ground-truth keys of a task's own row that are not the prompt's record.
_ROW_KEYS = ("task_kwargs", "open_tag", "close_tag", "whole")


def _record_class(data_source: object) -> type[Task] | None:
    """The registered task class a ``data_source`` ``"rlvr/<name>"`` names, when it is not an arithmetic
    task (those are read from the ground truth's grammar); None otherwise."""
    if not isinstance(data_source, str) or not data_source.startswith("rlvr/"):
        return None
    cls = TASKS.get(data_source[len("rlvr/"):].lower())
    if cls is None or issubclass(cls, ExpressionTask):
        return None
    return cls


def _plain(value: object) -> object:
    """A NumPy scalar (a parquet round trip makes them) as the Python value JSON writes."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{value!r} is not a JSON value")


def _task_keywords(gt: Mapping[str, Any]) -> str:
    """The ground truth's ``task_kwargs`` (the task's :meth:`~rlvr_env.Task.keywords`) as sorted JSON."""
    kwargs = gt.get("task_kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"ground truth task_kwargs={kwargs!r:.80} must be a dict of the task's keywords")
    try:
        return json.dumps(dict(kwargs), sort_keys=True, default=_plain)
    except TypeError as err:
        raise ValueError(f"ground truth task_kwargs={dict(kwargs)!r:.80} must hold JSON values: "
                         f"{err}") from None


@lru_cache(maxsize=64)
def _record_task(cls: type[Task], kwargs_json: str) -> Task:
    """``cls`` built with the keywords a row carries (cached: a batch of rows shares one task)."""
    try:
        return cls(**json.loads(kwargs_json))
    except TypeError as err:  # an unknown or missing keyword: a broken dataset
        raise ValueError(f"ground truth task_kwargs={kwargs_json} do not build {cls.__name__}: "
                         f"{err}") from None


@lru_cache(maxsize=64)
def _format(open_tag: str, close_tag: str, whole: bool) -> AnswerFormat:
    return AnswerFormat(open_tag=open_tag, close_tag=close_tag, whole=whole)


def _int(value: object, name: str) -> int:
    # numpy integers (from a parquet round trip) are integers through __index__; bools are not.
    if isinstance(value, bool):
        raise ValueError(f"ground truth {name}={value!r} must be an integer, not a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"ground truth {name}={value!r} must be an integer") from None


def _parse(data_source: object, gt: object) -> tuple[tuple[int, ...], int, Grammar, AnswerFormat]:
    if isinstance(gt, (str, bytes)):
        try:
            gt = json.loads(gt)
        except ValueError as err:
            raise ValueError(f"ground truth {gt!r:.80} is not JSON: {err}") from None
    if not isinstance(gt, Mapping):
        raise ValueError(f"ground truth {gt!r:.80} must be a dict (or its JSON) with 'numbers' and 'target'")
    if "numbers" not in gt or "target" not in gt:
        raise ValueError(f"ground truth {dict(gt)!r:.120} must have 'numbers' and 'target'")
    raw = gt["numbers"]
    if isinstance(raw, (str, bytes, Mapping)) or not hasattr(raw, "__iter__"):
        raise ValueError(f"ground truth numbers={raw!r} must be a list of integers")
    numbers = tuple(_int(x, "numbers[]") for x in raw)
    target = _int(gt["target"], "target")
    defaults = DATA_SOURCES.get(data_source) if isinstance(data_source, str) else None
    fields: dict[str, Any] = {}
    for name in _GRAMMAR_FIELDS:
        if name in gt:
            fields[name] = gt[name]
        elif defaults is not None:
            fields[name] = defaults[name]
        else:
            raise ValueError(f"ground truth has no {name!r}, and data_source={data_source!r} is not one of "
                             f"{sorted(DATA_SOURCES)} whose defaults could stand in")
    if not isinstance(fields["operators"], str):
        raise ValueError(f"ground truth operators={fields['operators']!r} must be a string like '+-*/'")
    for name in ("parentheses", "integer_division"):
        if not isinstance(fields[name], bool):
            raise ValueError(f"ground truth {name}={fields[name]!r} must be a bool")
    grammar = _grammar(fields["operators"], fields["parentheses"], fields["number_use"],
                       fields["integer_division"])
    tags = (gt.get("open_tag", "<answer>"), gt.get("close_tag", "</answer>"), gt.get("whole", False))
    if not (isinstance(tags[0], str) and isinstance(tags[1], str) and isinstance(tags[2], bool)):
        raise ValueError(f"ground truth open_tag/close_tag/whole={tags!r} must be two strings and a bool")
    fmt = _format(*tags)
    return numbers, target, grammar, fmt


#: extra_info keys that set the weights of a row
_WEIGHT_KEYS = ("accuracy_weight", "format_weight", "reward_weights")
#: keys of the returned dict that are not reward parts (a part of one of these names is not reported)
_OWN_KEYS = ("score", "correct", "well_formed", "reason")


def compute_score(data_source: Any, solution_str: Any, ground_truth: Any,
                  extra_info: Any = None) -> dict[str, Any]:
    """Score one decoded response as verl calls a custom reward function (see the module doc).

    >>> gt = {"numbers": [7, 9, 1], "target": 70}
    >>> compute_score("rlvr/Countdown", "so <answer>7*(9+1)</answer>", gt)["score"]
    1.1
    >>> r = compute_score("rlvr/Countdown", "<answer>7*9+1</answer>", json.dumps(gt))
    >>> r["score"], r["reason"]
    (0.1, 'value 64 is not the target 70')
    """
    weights = _DEFAULT_WEIGHTS
    if isinstance(extra_info, Mapping) and any(k in extra_info for k in _WEIGHT_KEYS):
        weights = RewardWeights.of(extra_info.get("accuracy_weight", _DEFAULT_WEIGHTS.accuracy),
                                   extra_info.get("format_weight", _DEFAULT_WEIGHTS.format),
                                   extra_info.get("reward_weights"))
    cls = _record_class(data_source)
    if cls is not None:  # a task of its own, built as the row says: the prompt from its record
        gt = json.loads(ground_truth) if isinstance(ground_truth, (str, bytes)) else ground_truth
        if not isinstance(gt, Mapping):
            raise ValueError(f"ground truth {gt!r:.80} must be a dict (or its JSON): the prompt's record")
        task = _record_task(cls, _task_keywords(gt))
        prompt = task.prompt_from_record({k: v for k, v in gt.items() if k not in _ROW_KEYS})
        verdict = score_task_completion(task, prompt, solution_str, weights, _format(
            gt.get("open_tag", "<answer>"), gt.get("close_tag", "</answer>"), gt.get("whole", False)))
    else:
        numbers, target, grammar, fmt = _parse(data_source, ground_truth)
        verdict = score_completion(solution_str, numbers, target, grammar=grammar, weights=weights, fmt=fmt)
    parts = {"accuracy": 0.0, "format": 0.0, **verdict.parts}  # every part the task pays, by name
    return {
        "score": verdict.reward,
        **{name: value for name, value in parts.items() if name not in _OWN_KEYS},
        "correct": float(verdict.correct),
        "well_formed": float(verdict.well_formed),
        "reason": verdict.reason or "",
    }


def ground_truth(task: str | Task, prompt: Any) -> dict[str, Any]:
    """The ground truth :func:`compute_score` reads for ``prompt`` of ``task``: for an arithmetic task
    numbers, target and grammar (so the row is self-contained whatever its ``data_source``); for any
    other registered task its :meth:`~rlvr_env.Task.prompt_record` and, under ``"task_kwargs"``, the
    settings it was built with (:meth:`~rlvr_env.Task.keywords`; left out when there are none), so the
    row is scored by the same task (``data_source`` ``"rlvr/<name>"`` names it). ``ValueError`` when the
    registered name and those settings do not rebuild the task."""
    task = resolve_task(task)
    prompt = task.validate_prompt(prompt)
    if not isinstance(task, ExpressionTask):
        kwargs = task.keywords()
        try:
            rebuilt = make_task(task.name, **kwargs)
        except TypeError as err:
            raise ValueError(f"task {task.name!r} cannot be rebuilt from its keywords {kwargs}: "
                             f"{err}") from None
        if type(rebuilt) is not type(task) or rebuilt.keywords() != kwargs:
            raise ValueError(f"task {task.name!r} rebuilt from its keywords {kwargs} is a "
                             f"{type(rebuilt).__name__} with {rebuilt.keywords()}, not this "
                             f"{type(task).__name__}")
        record = task.prompt_record(prompt)
        clash = sorted(set(record) & set(_ROW_KEYS))
        if clash:
            raise ValueError(f"task {task.name!r}'s prompt record uses {clash}, which a verl ground truth "
                             "keeps for itself")
        return {**record, "task_kwargs": kwargs} if kwargs else record
    spec = task_spec(task)
    return {"numbers": list(prompt.numbers), "target": int(prompt.target),
            **{k: spec[k] for k in _GRAMMAR_FIELDS}}


def verl_rows(task: str | Task = "countdown", split: str = "train", size: int | None = None,
              seed: int = 0) -> list[dict[str, Any]]:
    """verl dataset rows (write them with ``pandas.DataFrame(rows).to_parquet(path)``) for ``task``'s
    ``split``: the prompts of :func:`rlvr_env.llm.sample_prompts` ``(task, split, size, seed)``."""
    task = resolve_task(task)
    sources = {"countdown": "rlvr/Countdown", "arithmetic": "rlvr/Arithmetic"}
    source = sources.get(task.name, f"rlvr/{task.name}")
    rows = []
    for index, prompt in enumerate(sample_prompts(task, split, size, seed)):
        rows.append({
            "data_source": source,
            "prompt": [{"role": "user", "content": prompt_text(task, prompt)}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": ground_truth(task, prompt)},
            "extra_info": {"split": split, "index": index},
        })
    return rows
