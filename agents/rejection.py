"""Rejection sampling and fine-tuning: DeepSeek-R1's stage 3 (Guo et al. 2025, section 2.3.3), STaR
(Zelikman et al. 2022), RAFT (Dong et al. 2023), expert iteration.

Sample k answers per prompt from the current policy, keep those the verifier pays, and fine-tune the
policy on them by the cold start's masked cross-entropy (:mod:`agents.sft`). Three calls, for any task
of the Task contract (:mod:`rlvr_env.tasks.base`) and any torch policy of :mod:`agents`:

* :func:`rejection_sample` -> :class:`Kept`: the kept (prompt, transcript) pairs and what it cost;
* :func:`rejection_finetune` -> a report: fit them (optionally re-mixed with other prompts' solutions,
  :class:`Remix`), from the current weights or from the KL reference (``start="base"``); the fitted
  weights become the new KL reference, as :func:`agents.sft.cold_start` leaves them;
* :func:`expert_iteration` -> one report per round: both, ``rounds`` times.

**Tokens the env writes** (a calculator's result, :meth:`rlvr_env.tasks.base.Task.reply`) are kept in
each transcript, so it replays exactly, and are never a fine-tuning target: the replay
(:func:`agents.sft.answer_demonstrations`) feeds the policy's tokens and lets the env write its own
again, as the cold start does with the task's solutions (docs/think.md, "The calculator").

Everything is seeded (``seed``; one torch thread for bit-for-bit weights). docs/rejection.md shows it
on a GRPO model.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.evaluation import as_token_env
from agents.grpo import COLD_START, VectorGroupRunner
from agents.policies.torch_base import TorchPolicy
from agents.sft import answer_demonstrations, supervised_fit, supervised_steps
from rlvr_env.tasks.base import Task, check_split

__all__ = ["START_KINDS", "Kept", "Remix", "expert_iteration", "rejection_finetune", "rejection_sample"]

#: Where :func:`rejection_finetune` starts: the current weights, or the KL reference's (the base).
START_KINDS = ("current", "base")
_ROWS = 4096  # episodes per rollout batch (prompts x k): bounds the rollout's memory


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return int(value)


def _task_of(model: Any) -> Task:
    """The model's task; ``ValueError`` unless its env is an rlvr env whose verifier pays ``accuracy``
    (the verdict's correctness is what rejection sampling keeps)."""
    env = getattr(model, "env", None)
    try:
        task = as_token_env(env).task
    except (TypeError, AttributeError):
        raise ValueError(f"the model's env {env!r:.80} is not an rlvr_env token env: rejection sampling "
                         "keeps what a task's verifier says is correct, and it has none") from None
    if "accuracy" not in task.reward_parts:
        raise ValueError(f"task {type(task).__name__} pays no 'accuracy' part (its reward_parts are "
                         f"{task.reward_parts}): no verifier correctness to keep answers by")
    return task


@dataclass(frozen=True)
class Remix:
    """Re-mixed demonstrations: ``round(ratio * kept)`` prompts taken in order from ``prompts`` (cycling
    when there are fewer), each answered by the task's own :meth:`~rlvr_env.tasks.base.Task.solution`;
    e.g. another task's prompts of the same env, so the fine-tune does not forget them (R1's stage 3
    mixes in non-reasoning data). ``ratio`` 0 adds none."""

    prompts: tuple[Any, ...]
    ratio: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompts", tuple(self.prompts))
        ratio = self.ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.integer, np.floating)) \
                or not math.isfinite(ratio) or ratio < 0:
            raise ValueError(f"Remix ratio={ratio!r} must be a finite number >= 0 (re-mixed per kept answer)")
        if ratio > 0 and not self.prompts:
            raise ValueError(f"Remix ratio={ratio!r} > 0 needs at least one prompt to re-mix")

    def count(self, kept: int) -> int:
        """How many demonstrations it adds to ``kept`` kept answers: ``round(ratio * kept)``."""
        return int(round(self.ratio * kept))

    def take(self, n: int) -> list[Any]:
        """The first ``n`` prompts, cycling through :attr:`prompts` in order."""
        return [self.prompts[i % len(self.prompts)] for i in range(n)]


@dataclass(frozen=True)
class Kept:
    """What :func:`rejection_sample` kept, and what it took.

    ``prompts[i]``, ``answers[i]``: the i-th kept pair, in sampling order; ``answers[i]`` is the whole
    transcript (the tokens the env wrote included, so it replays exactly) and ``actions[i]`` the
    policy's own tokens of it (what a fine-tune targets). The counts are over the whole sample."""

    prompts: tuple[Any, ...]
    answers: tuple[tuple[int, ...], ...]
    actions: tuple[tuple[int, ...], ...]
    split: str
    k: int  #: answers sampled per prompt
    cap: int | None  #: most answers kept per prompt (None: no cap)
    dedupe: bool  #: identical transcripts of one prompt kept once
    prompts_drawn: int  #: prompts drawn (a prompt drawn twice counts twice)
    distinct_prompts: int  #: distinct prompts among them
    sampled: int  #: answers sampled (prompts_drawn x k)
    paid: int  #: answers the verifier paid (correct and well-formed)
    distinct_paid: int  #: distinct (prompt, transcript) pairs among them
    prompts_kept: int  #: distinct prompts with at least one kept answer
    tokens_sampled: int  #: tokens the policy wrote in all sampled answers (the env's not counted)
    cpu_seconds: float  #: process CPU time (every thread)
    wall_seconds: float

    def __len__(self) -> int:
        return len(self.answers)

    @property
    def kept(self) -> int:
        """Answers kept."""
        return len(self.answers)

    def as_dict(self, prefix: str = "") -> dict[str, Any]:
        """The settings and counts (not the answers), for logs and tables."""
        out = {"split": self.split, "k": self.k, "cap": self.cap, "dedupe": self.dedupe,
               "prompts": self.prompts_drawn, "distinct_prompts": self.distinct_prompts,
               "sampled": self.sampled, "paid": self.paid, "distinct_paid": self.distinct_paid,
               "kept": self.kept, "prompts_kept": self.prompts_kept, "tokens_sampled": self.tokens_sampled,
               "cpu_seconds": self.cpu_seconds, "wall_seconds": self.wall_seconds}
        return {f"{prefix}{key}": value for key, value in out.items()}


def rejection_sample(model: Any, n_prompts: int, k: int, *, split: str = "train", cap: int | None = None,
                     dedupe: bool = True, seed: int = 0, deterministic: bool = False) -> Kept:
    """Sample ``k`` answers to each of ``n_prompts`` prompts of ``split`` from ``model``'s policy and keep
    the paid ones.

    The prompts come from the task's own generator, ``task.sample_prompts(np.random.default_rng(seed),
    split, n_prompts)``; the same generator then samples the answers (``deterministic``: greedy, so the
    k answers of a prompt are one), in the project's vector rollout
    (:class:`agents.grpo.VectorGroupRunner`) under the grammar masks the model decodes with
    (``model.use_masks``). The model's own generator is not drawn from.

    **Paid** means the verifier's verdict says correct (the raw ``accuracy`` part is 1) and well-formed;
    a truncated answer is neither. Of the paid answers of one prompt (a prompt drawn twice pools its
    answers), taken in sampling order: with ``dedupe``, an identical transcript is kept once; with
    ``cap``, only the first ``cap`` (of the distinct ones, with ``dedupe``) are kept. ``ValueError``
    for n_prompts, k or cap below 1, an unknown split, or a model whose env has no verifier."""
    n_prompts, k = _positive_int("n_prompts", n_prompts), _positive_int("k", k)
    if cap is not None:
        cap = _positive_int("cap", cap)
    if not isinstance(dedupe, bool) or not isinstance(deterministic, bool):
        raise ValueError(f"dedupe={dedupe!r} and deterministic={deterministic!r} must be bools")
    check_split(split)
    task = _task_of(model)
    kind = "features" if as_token_env(model.env).token_context is None else "tokens"
    wall, cpu = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    prompts = list(task.sample_prompts(rng, split, n_prompts))
    per_batch = max(1, _ROWS // k)
    runners: dict[int, VectorGroupRunner] = {}
    owners: list[Any] = []  # each paid answer's prompt, transcript and actions, in sampling order
    transcripts: list[tuple[int, ...]] = []
    actions: list[tuple[int, ...]] = []
    tokens = 0
    for first in range(0, n_prompts, per_batch):
        chunk = prompts[first : first + per_batch]
        runner = runners.get(len(chunk))
        if runner is None:
            runner = runners[len(chunk)] = VectorGroupRunner.of_task(
                task, len(chunk), k, split=split, observation=kind, use_masks=model.use_masks)
        batch = runner.collect(model.policy, rng, prompts=chunk, greedy=deterministic)
        tokens += int(batch.lengths.sum())
        venv = runner.venv.unwrapped  # its rows hold their finished transcripts until the next collect
        for row in np.flatnonzero((batch.correct == 1) & (batch.well_formed == 1)).tolist():
            owners.append(chunk[row // k])  # rows are group after group, k each
            transcripts.append(tuple(venv.tokens(row)))
            actions.append(tuple(int(a) for a in batch.actions[row, : batch.lengths[row]]))
    for runner in runners.values():
        runner.close()
    seen: dict[Any, set[tuple[int, ...]]] = {}
    taken: dict[Any, int] = {}
    keep: list[int] = []
    for i, (prompt, transcript) in enumerate(zip(owners, transcripts)):
        mine = seen.setdefault(prompt, set())
        repeat = transcript in mine
        mine.add(transcript)
        if (dedupe and repeat) or (cap is not None and taken.get(prompt, 0) >= cap):
            continue
        taken[prompt] = taken.get(prompt, 0) + 1
        keep.append(i)
    return Kept(prompts=tuple(owners[i] for i in keep), answers=tuple(transcripts[i] for i in keep),
                actions=tuple(actions[i] for i in keep), split=split, k=k, cap=cap, dedupe=dedupe,
                prompts_drawn=n_prompts, distinct_prompts=len(set(prompts)), sampled=n_prompts * k,
                paid=len(owners), distinct_paid=sum(len(s) for s in seen.values()), prompts_kept=len(taken),
                tokens_sampled=tokens, cpu_seconds=time.process_time() - cpu,
                wall_seconds=time.perf_counter() - wall)


def _check_fit_args(model: Any, start: str, epochs: int, batch_size: int, learning_rate: float,
                    remix: Remix | None, masked: bool | None) -> tuple[TorchPolicy, bool]:
    """The model's torch policy and the masks to fit under, or ``ValueError`` naming the bad value."""
    if start not in START_KINDS:
        raise ValueError(f"start={start!r} must be one of {START_KINDS}")
    _positive_int("epochs", epochs)
    _positive_int("batch_size", batch_size)
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)) \
            or not math.isfinite(learning_rate) or learning_rate <= 0:
        raise ValueError(f"learning_rate={learning_rate!r} must be a positive number")
    if remix is not None and not isinstance(remix, Remix):
        raise ValueError(f"remix={remix!r:.80} must be a Remix(prompts, ratio) or None")
    if masked is not None and not isinstance(masked, bool):
        raise ValueError(f"masked={masked!r} must be True, False or None (as the agent decodes)")
    _task_of(model)
    policy = model.policy
    if not isinstance(policy, TorchPolicy):
        raise ValueError(f"rejection fine-tuning trains a torch policy (mlp, transformer), not a "
                         f"{type(policy).__name__}")
    return policy, bool(model.use_masks) if masked is None else masked


def rejection_finetune(model: Any, kept: Kept, *, start: str = "current", epochs: int = COLD_START["epochs"],
                       batch_size: int = COLD_START["batch_size"],
                       learning_rate: float = COLD_START["learning_rate"], remix: Remix | None = None,
                       seed: int = 0, masked: bool | None = None) -> dict[str, Any]:
    """Fine-tune ``model``'s policy on the ``kept`` answers (and ``remix``'s), by the cold start's
    masked cross-entropy (:func:`agents.sft.supervised_fit`, its minibatching and schedule; ``masked``
    None: under the masks the model decodes with), then make the fitted weights the new KL reference
    and restart the RL optimiser (and a critic) from them, as :func:`agents.sft.cold_start` does: a
    following RL pass anchors to the fine-tuned policy.

    ``start="base"`` first puts the KL reference's weights (the start the current RL pass began from)
    back into the policy (:meth:`~agents.policies.torch_base.TorchPolicy.reset_to_reference`);
    ``"current"`` fine-tunes the current weights. The targets are the policy's own tokens only: each
    kept transcript is replayed and the env writes its own tokens again
    (:func:`agents.sft.answer_demonstrations`). Returns ``start``, ``kept`` and ``remixed``
    (demonstrations of each kind), ``demonstrations``, ``tokens`` (targets), ``env_tokens`` (the kept
    transcripts' tokens the env wrote: inputs, never targets), ``steps`` (optimizer steps), ``epochs``,
    ``losses`` (each epoch's mean, nats per target), ``cpu_seconds`` and ``seconds``.

    ``ValueError`` for an unknown ``start``, epochs or batch_size below 1, a learning rate that is not
    positive, an empty ``kept``, a re-mixed prompt the task knows no solution for, or a model whose env
    has no verifier."""
    policy, masked = _check_fit_args(model, start, epochs, batch_size, learning_rate, remix, masked)
    if not isinstance(kept, Kept):
        raise ValueError(f"kept={kept!r:.80} must be what rejection_sample returns (a Kept)")
    if not len(kept):
        raise ValueError(f"kept holds no answers ({kept.paid} of {kept.sampled} sampled were paid): "
                         "nothing to fine-tune on")
    task = _task_of(model)
    wall, cpu = time.perf_counter(), time.process_time()
    extra = [] if remix is None else remix.take(remix.count(len(kept)))
    solved = []
    for prompt in extra:
        answer = task.solution(task.validate_prompt(prompt))
        if answer is None:
            raise ValueError(f"task {type(task).__name__} knows no solution for the re-mixed prompt {prompt!r}")
        solved.append(answer)
    demos = answer_demonstrations(model.env, [*kept.prompts, *extra], [*kept.answers, *solved],
                                  transcripts=[True] * len(kept) + [False] * len(extra))
    if start == "base":
        policy.reset_to_reference()
    settings = {"epochs": epochs, "batch_size": batch_size, "minibatch": COLD_START["minibatch"]}
    losses = supervised_fit(policy, demos, learning_rate=learning_rate, seed=seed, masked=masked,
                            warmup=COLD_START["warmup"], **settings)
    policy.restart_from_current()  # the fit is the new KL reference and RL's start
    targets = int(demos.lengths[: len(kept)].sum())
    return {"start": start, "kept": len(kept), "remixed": len(extra), "demonstrations": len(kept) + len(extra),
            "tokens": int(len(demos.actions)), "env_tokens": sum(map(len, kept.answers)) - targets,
            "steps": supervised_steps(demos, **settings), "epochs": int(epochs), "losses": losses,
            "cpu_seconds": time.process_time() - cpu, "seconds": time.perf_counter() - wall}


def expert_iteration(model: Any, rounds: int, *, n_prompts: int, k: int, cap: int | None = None,
                     epochs: int = COLD_START["epochs"], batch_size: int = COLD_START["batch_size"],
                     learning_rate: float = COLD_START["learning_rate"], start: str = "current",
                     split: str = "train", dedupe: bool = True, remix: Remix | None = None,
                     seed: int = 0, masked: bool | None = None) -> list[dict[str, Any]]:
    """Expert iteration (STaR, RAFT): ``rounds`` times, :func:`rejection_sample` from the current policy
    and :func:`rejection_finetune` on what it kept. ``start="current"`` fine-tunes the latest weights;
    ``start="base"`` fine-tunes, every round, the KL reference the call began with (STaR restarts from
    the base model each iteration), on answers sampled from the latest policy. Each round's sampling and
    fitting seeds are drawn from ``np.random.default_rng(seed)``. A round that keeps nothing fits
    nothing (``fit_skipped`` True) and the next round samples again.

    Returns one dict per round: ``round``, ``sample_seed``, ``fit_seed``, the :class:`Kept` counts
    prefixed ``sample_`` and the fine-tune's report prefixed ``fit_``. ``ValueError`` as the two calls
    raise it, checked before the first round."""
    rounds = _positive_int("rounds", rounds)
    policy, _ = _check_fit_args(model, start, epochs, batch_size, learning_rate, remix, masked)
    _positive_int("n_prompts", n_prompts)
    _positive_int("k", k)
    if cap is not None:
        _positive_int("cap", cap)
    check_split(split)
    base = copy.deepcopy(policy.reference) if start == "base" else None
    rng = np.random.default_rng(seed)
    reports = []
    for r in range(rounds):
        sample_seed, fit_seed = (int(s) for s in rng.integers(0, 2**31 - 1, size=2))
        kept = rejection_sample(model, n_prompts, k, split=split, cap=cap, dedupe=dedupe, seed=sample_seed)
        row: dict[str, Any] = {"round": r + 1, "sample_seed": sample_seed, "fit_seed": fit_seed,
                               **kept.as_dict("sample_"), "fit_skipped": not len(kept)}
        if len(kept):
            if base is not None:  # the last round's fit became the reference: the base goes back first
                policy.reference.load_state_dict(base.state_dict())
            fit = rejection_finetune(model, kept, start=start, epochs=epochs, batch_size=batch_size,
                                     learning_rate=learning_rate, remix=remix, seed=fit_seed, masked=masked)
            row.update({f"fit_{key}": value for key, value in fit.items()})
        reports.append(row)
    return reports
