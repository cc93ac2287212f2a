"""``verifiers`` (0.4) tasksets: our tasks, scored by our verifier through verifiers' own reward path.

verifiers 0.4.0 ships its API as ``verifiers.v1`` (``import verifiers.v1 as vf``): a ``Taskset`` yields
``Task`` objects whose ``@vf.reward`` methods score a finished ``Trace``. An environment is loaded by
taskset id::

    import verifiers.v1 as vf
    env = vf.load_environment(vf.SingleAgentEnvConfig(taskset={"id": "rlvr_env_countdown", "split": "test"}))

verifiers resolves an id to an importable *top-level* module (a dotted module path does not resolve),
so this package installs two one-line modules, ``rlvr_env_countdown`` and ``rlvr_env_arithmetic``, that
export :class:`CountdownTaskset` and :class:`ArithmeticTaskset`.

Each task carries its prompt's numbers, target and grammar (:class:`RlvrTaskData`). Its rewards are our
reward parts: ``accuracy`` (1.0 for a correct answer, weight 1.0) and ``format`` (1.0 for a well-formed
answer, weight 0.1), so ``trace.reward`` is the env's reward; weights can be changed through verifiers'
``taskset.task.rewards`` config. The answer is the trace's last reply, cut out by
:mod:`rlvr_env.completions`' policy; the verdict (reason, expression, value) is written to
``trace.info["rlvr"]``. Scoring needs no model client and no runtime: ``await task.score(trace)``,
with ``trace = reply_trace(task, reply)`` for a reply written elsewhere (docs/llm.md has the example).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import pydantic
import verifiers.v1 as vf
from pydantic import Field

from rlvr_env.completions import AnswerFormat, prompt_text, score_task_completion
from rlvr_env.tasks.expression.completions import score_completion
from rlvr_env.llm.common import make_task, sample_prompts, task_spec
from rlvr_env.tasks.base import Task as RlvrTaskBase
from rlvr_env.tasks.countdown.settings import CountdownSettings
from rlvr_env.tasks.expression.task import ExpressionTask
from rlvr_env.tasks.expression.verifier import Grammar
from rlvr_env.rewards import RewardWeights, Verdict

__all__ = [
    "RlvrTaskData",
    "RlvrTaskConfig",
    "RlvrTask",
    "CountdownTasksetConfig",
    "CountdownTaskset",
    "ArithmeticTasksetConfig",
    "ArithmeticTaskset",
    "RlvrTaskset",
    "reply_trace",
]


class RlvrTaskData(vf.TaskData):
    """One prompt: numbers, target, split, and the grammar its answer is verified under; or, for a task
    that is not arithmetic, the task's registered name and keywords and the prompt's record
    (:meth:`rlvr_env.Task.prompt_record`)."""

    task: str = ""
    task_kwargs: dict[str, Any] = Field(default_factory=dict)
    record: dict[str, Any] = Field(default_factory=dict)
    numbers: list[int] = Field(default_factory=list)
    target: int = 0
    split: str = "train"
    operators: str = "+-*/"
    parentheses: bool = True
    number_use: str = "at_most_once"
    integer_division: bool = False

    def grammar(self) -> Grammar:
        return Grammar(operators=frozenset(self.operators), parentheses=self.parentheses,
                       number_use=self.number_use,  # type: ignore[arg-type]
                       integer_division=self.integer_division)


class RlvrTaskConfig(vf.TaskConfig):
    """Run-time knobs: where the answer sits in the reply (see :class:`rlvr_env.completions.AnswerFormat`)."""

    open_tag: str = "<answer>"
    close_tag: str = "</answer>"
    whole: bool = False

    def answer_format(self) -> AnswerFormat:
        return AnswerFormat(open_tag=self.open_tag, close_tag=self.close_tag, whole=self.whole)


class RlvrTask(vf.Task[RlvrTaskData, vf.State, RlvrTaskConfig]):
    """A prompt of an rlvr_env task; its rewards are the verifier's reward parts."""

    def verdict(self, trace: vf.Trace) -> Verdict:
        """The verifier's verdict on the trace's last reply (computed once per trace)."""
        reply = trace.last_reply
        last = getattr(self, "_rlvr_last", None)
        if last is not None and last[0] == trace.id and last[1] == reply:
            return last[2]
        data = self.data
        if data.record:  # a task of its own: rebuilt by name, scored by its score_text
            task = _registered_task(data.task, json.dumps(data.task_kwargs, sort_keys=True))
            verdict = score_task_completion(task, task.prompt_from_record(dict(data.record)), reply,
                                            RewardWeights(), self.config.answer_format())
        else:
            verdict = score_completion(reply, tuple(data.numbers), data.target, grammar=data.grammar(),
                                       fmt=self.config.answer_format())
        self._rlvr_last = (trace.id, reply, verdict)
        trace.info["rlvr"] = {
            "reason": verdict.reason or "",
            "expression": verdict.expression,
            "value": None if verdict.value is None else str(verdict.value),
            "correct": verdict.correct,
            "well_formed": verdict.well_formed,
        }
        return verdict

    @vf.reward(weight=1.0)
    async def accuracy(self, trace: vf.Trace) -> float:
        """1.0 when the answer is correct (weight 1.0: the ``accuracy`` reward part)."""
        return float(self.verdict(trace).correct)

    @vf.reward(weight=0.1)
    async def format(self, trace: vf.Trace) -> float:
        """1.0 when the answer is well-formed (weight 0.1: the ``format`` reward part)."""
        return float(self.verdict(trace).well_formed)


class _RlvrTasksetConfig(vf.TasksetConfig):
    task: RlvrTaskConfig = RlvrTaskConfig()
    split: str = "train"
    """``"train"`` or ``"test"`` (the env's held-out set)."""
    num_tasks: int | None = None
    """Prompts to draw; None: every prompt of a finite split, 1000 for Countdown."""
    seed: int = 0
    """Seed of the prompt draw (:func:`rlvr_env.llm.sample_prompts`)."""


class RlvrTaskset:
    """Shared ``load``: the prompts of :func:`rlvr_env.llm.sample_prompts` as :class:`RlvrTask`. A taskset
    of another task: ``class MyTaskset(RlvrTaskset, vf.Taskset[RlvrTask, MyConfig])`` with
    :meth:`rlvr_task` (and :meth:`rlvr_task_kwargs`), the task registered with
    :func:`rlvr_env.tasks.register_task`."""

    config: Any

    def rlvr_task(self) -> RlvrTaskBase:
        raise NotImplementedError

    def rlvr_task_kwargs(self) -> dict[str, Any]:
        """The keywords :meth:`rlvr_task` built the task with (a task that is not arithmetic is rebuilt
        from its registered name and these when a trace is scored); default: the task's own
        :meth:`~rlvr_env.Task.keywords`."""
        return self.rlvr_task().keywords()

    def load(self) -> Iterable[RlvrTask]:
        task = self.rlvr_task()
        cfg = self.config
        fmt = cfg.task.answer_format()
        if not isinstance(task, ExpressionTask):
            kwargs = self.rlvr_task_kwargs()
            for i, prompt in enumerate(sample_prompts(task, cfg.split, cfg.num_tasks, cfg.seed)):
                record = task.prompt_record(prompt)
                data = RlvrTaskData(id=f"{task.name}-{cfg.split}-{cfg.seed}-{i}",
                                    name=f"{task.name} {record}",
                                    prompt=prompt_text(task, prompt, fmt), split=cfg.split, task=task.name,
                                    task_kwargs=kwargs, record=record)
                yield RlvrTask(data, cfg.task)
            return
        spec = task_spec(task)
        for i, prompt in enumerate(sample_prompts(task, cfg.split, cfg.num_tasks, cfg.seed)):
            data = RlvrTaskData(
                id=f"{task.name}-{cfg.split}-{cfg.seed}-{i}",
                name=f"{task.name} {list(prompt.numbers)} -> {prompt.target}",
                prompt=prompt_text(task, prompt, fmt),
                numbers=list(prompt.numbers),
                target=int(prompt.target),
                split=cfg.split,
                operators=spec["operators"],
                parentheses=spec["parentheses"],
                number_use=spec["number_use"],
                integer_division=spec["integer_division"],
            )
            yield RlvrTask(data, cfg.task)


def _settings_fields() -> dict[str, Any]:
    """:class:`~rlvr_env.tasks.countdown.settings.CountdownSettings`' fields as pydantic field definitions
    (type, default): the taskset's config takes Countdown's keywords without declaring them again."""
    hints = typing.get_type_hints(CountdownSettings)
    return {f.name: (hints[f.name], f.default) for f in dataclasses.fields(CountdownSettings)}


#: Countdown's settings (:class:`~rlvr_env.tasks.countdown.settings.CountdownSettings`' fields, as
#: :class:`rlvr_env.CountdownEnv` takes them), plus split, size and seed.
CountdownTasksetConfig = pydantic.create_model(  # type: ignore[call-overload]
    "CountdownTasksetConfig", __base__=_RlvrTasksetConfig, __module__=__name__, **_settings_fields())


class CountdownTaskset(RlvrTaskset, vf.Taskset[RlvrTask, CountdownTasksetConfig]):
    """Countdown-N prompts of one split (id ``rlvr_env_countdown``)."""

    def rlvr_task(self) -> RlvrTaskBase:
        return make_task("countdown", **{name: getattr(self.config, name)
                                         for name in CountdownSettings.field_names()})


class ArithmeticTasksetConfig(_RlvrTasksetConfig):
    """The lesson's task: split, size and seed only."""


class ArithmeticTaskset(RlvrTaskset, vf.Taskset[RlvrTask, ArithmeticTasksetConfig]):
    """The lesson's 2-3-5 prompts of one split (id ``rlvr_env_arithmetic``): 20 train, 10 held out."""

    def rlvr_task(self) -> RlvrTaskBase:
        return make_task("arithmetic")


@lru_cache(maxsize=32)
def _registered_task(name: str, kwargs_json: str) -> RlvrTaskBase:
    return make_task(name, **json.loads(kwargs_json))


def reply_trace(task: vf.Task, reply: str) -> vf.Trace:
    """A finished one-turn trace of ``task``: its prompt as the user message and ``reply`` as the sampled
    assistant message, ready for ``await task.score(trace)`` (verifiers' own reward path)."""
    from verifiers.v1.graph import MessageNode

    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        nodes=[MessageNode(message=vf.UserMessage(content=task.data.prompt_text)),
               MessageNode(parent=0, message=vf.AssistantMessage(content=reply), sampled=True)],
    )
