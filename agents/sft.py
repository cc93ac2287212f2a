"""The supervised cold start (DeepSeek-R1's SFT stage before RL; Guo et al. 2025, section 2.3.1).

Solutions of **train-split** prompts come from the task's contract: its own generator draws the prompts
(:meth:`~rlvr_env.tasks.base.Task.sample_prompts`) and :meth:`~rlvr_env.tasks.base.Task.solution` gives a
correct answer to each (Countdown: the random expression tree each prompt was built from, with candidates
whose number multiset is held out rejected, so no test-split prompt can enter the data; Digits: the
exact result written digit by digit). :func:`demonstrations` replays them in the native vector env,
recording (observation, grammar mask, token) per step in answer order, and keeps the task's own prompts
with a per-prompt index; :func:`supervised_fit` fits any torch policy of :mod:`agents` (the transformer,
the MLP) by minibatch cross-entropy on whole answers, under the masks decoding uses; and
:func:`cold_start` does both to a GRPO agent and makes the fitted network its frozen KL reference and
the start of RL. The same weights go into SB3 contenders with
:func:`agents.policies.transformer.copy_to_sb3` (or :func:`agents.bc.copy_actor_to_sb3` for the MLP).

Everything is seeded: the prompts (``seed``), the minibatch order (``seed``) and the network's own init
(the policy's seed), so a repeated call gives the same weights bit for bit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from agents.evaluation import as_token_env
from agents.grpo import COLD_START
from agents.supervised import Batch, Demonstrations, fit
from rlvr_env.tasks.base import Task
from rlvr_env.vector import TokenVectorEnv

__all__ = ["AnswerDemonstrations", "answer_demonstrations", "cold_start", "demonstrations", "number_prompts",
           "solutions", "supervised_fit", "supervised_steps"]

_CHUNK = 4096  # answers replayed per vector-env batch


@dataclass(frozen=True)
class AnswerDemonstrations(Demonstrations):
    """Token-level demonstrations (:class:`agents.supervised.Demonstrations`) whose rows are whole answers in
    order, ``lengths`` (n,) tokens each, so answer i is rows ``sum(lengths[:i]) ..`` onwards."""

    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: (n,) each answer's prompt: an index into ``prompts`` (the task's own prompt values, each once)
    prompt_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return int(value)


def solutions(task: Task, n: int, seed: int) -> tuple[list[Any], list[tuple[int, ...]]]:
    """``n`` train-split prompts of ``task`` (its own prompt values) and one correct answer's token ids
    each.

    Drawn with ``np.random.default_rng(seed)`` by the task's generator (``sample_prompts(rng, "train",
    n)``); the answer is the task's :meth:`~rlvr_env.tasks.base.Task.solution` (Countdown: the generating
    expression). ``ValueError`` for a task that declares no solutions or knows none for a drawn prompt.
    """
    n = _positive_int("n", n)
    if not task.has_solutions:
        raise ValueError(
            f"task {type(task).__name__} declares no solutions (Task.solution, as CountdownTask "
            "implements it); the cold start needs them"
        )
    rng = np.random.default_rng(seed)
    prompts = list(task.sample_prompts(rng, "train", n))
    answers = [task.solution(p) for p in prompts]
    missing = [p for p, a in zip(prompts, answers) if a is None]
    if missing:
        raise ValueError(f"task {type(task).__name__} knows no solution for the drawn prompt {missing[0]!r}")
    return prompts, [tuple(int(t) for t in a) for a in answers]  # type: ignore[union-attr]


def number_prompts(prompts: Sequence[Hashable]) -> tuple[tuple[Any, ...], np.ndarray]:
    """The distinct values of ``prompts`` and (n,) each one's index among them.

    Prompts that have an order (tuples, ordered dataclasses, the arithmetic :class:`rlvr_env.Prompt`:
    numbers, then target) are numbered in sorted order, others in the order they first occur; either way
    the same draw gets the same numbering, and the numbering decides which prompts share a minibatch of
    :func:`supervised_fit`."""
    distinct = list(dict.fromkeys(prompts))
    try:
        distinct = sorted(distinct)  # type: ignore[type-var]
    except TypeError:
        pass  # a prompt type without an order: first occurrence is the order
    slot = {p: i for i, p in enumerate(distinct)}
    return tuple(distinct), np.array([slot[p] for p in prompts], dtype=np.int64)


def demonstrations(env: gym.Env, n: int, seed: int) -> AnswerDemonstrations:
    """Replay :func:`solutions` (``n`` train-split answers) in the native vector env of ``env``'s task
    and observation kind (:func:`answer_demonstrations`): one row per answer token, answers consecutive
    and in order, each row the observation before the token, the grammar mask there and the token;
    ``prompts`` holds the task's prompts (each once, :func:`number_prompts`) and ``prompt_index`` each
    answer's. ``ValueError`` if a replayed answer is not paid as correct (the generator and the verifier
    disagree)."""
    return answer_demonstrations(env, *solutions(as_token_env(env).task, n, seed))


def answer_demonstrations(env: gym.Env, prompts: Sequence[Any], answers: Sequence[Sequence[int]], *,
                          transcripts: bool | Sequence[bool] = False) -> AnswerDemonstrations:
    """Replay given (prompt, answer) pairs in the native vector env of ``env``'s task and observation
    kind, recording (observation, grammar mask, token) for each token **the policy writes**, answers
    consecutive and in order (what :func:`supervised_fit` trains on).

    An answer is either the policy's tokens only (``transcripts`` False, what
    :meth:`~rlvr_env.tasks.base.Task.solution` gives) or a whole transcript (True), the tokens the env
    wrote itself (:meth:`~rlvr_env.tasks.base.Task.reply`, a calculator's result) included, as a rollout
    leaves it; one bool for all answers or one per answer. Either way the env writes its own tokens
    again on replay, so they appear in the following observations and are never a demonstrated token
    (docs/think.md, "The calculator": tokens the env writes are never actions). A transcript is fed
    from the env's own position in it, so the tokens the env writes there are skipped, and the env's
    transcript must then equal the given one. ``ValueError`` if it does not, or if an answer is not paid as correct."""
    base = as_token_env(env)
    n = len(answers)
    if n == 0 or len(prompts) != n:
        raise ValueError(f"{len(prompts)} prompts and {n} answers: give one prompt per answer, at least "
                         "one")
    whole = np.broadcast_to(np.asarray(transcripts, dtype=bool), (n,))
    kind = "tokens" if base.token_context is not None else "features"
    obs_dtype = np.int16 if kind == "tokens" else np.float32  # token ids are small: 4x less memory
    pad = base.task.eos_id if base.task.eos_id is not None else 0
    obs_parts, mask_parts, act_parts, length_parts = [], [], [], []
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        chunk = [tuple(int(t) for t in a) for a in answers[start:stop]]
        k, width = stop - start, max(1, max(len(a) for a in chunk))
        tokens = np.full((k, width), pad, np.int64)
        for i, a in enumerate(chunk):
            tokens[i, : len(a)] = a
        venv = TokenVectorEnv(base.task, k, split="train", autoreset_mode="Disabled", observation=kind)
        obs, _ = venv.reset(options={"prompt": list(prompts[start:stop])})
        rows, col = np.arange(k), 0
        active, correct = np.ones(k, dtype=bool), np.zeros(k, dtype=bool)
        steps_obs, steps_mask, steps_act, steps_on = [], [], [], []
        while active.any() and col < base.task.max_length:
            # a transcript's next policy token sits at the env's own position (past what it wrote)
            where = np.minimum(np.where(whole[start:stop], venv.scorer.pos, col), width - 1)
            acts = tokens[rows, where]
            steps_obs.append(obs.astype(obs_dtype))
            steps_mask.append(venv.action_masks())
            steps_act.append(acts)
            steps_on.append(active.copy())
            obs, _, terminated, truncated, info = venv.step(acts)
            ended = active & (terminated | truncated)
            if ended.any():
                correct[ended] = info["correct"][ended]
                active &= ~ended
            col += 1
        for i in np.flatnonzero(whole[start:stop]):
            if venv.tokens(int(i)) != list(chunk[i]):
                raise ValueError(f"replaying the transcript {chunk[i]} for {prompts[start + i]!r}, the env "
                                 f"wrote {tuple(venv.tokens(int(i)))}: not the transcript")
        bad = np.flatnonzero(~correct | active)
        if len(bad):
            raise ValueError(f"the answer {chunk[bad[0]]} for {prompts[start + bad[0]]!r} is not paid as "
                         "correct")
        valid = np.stack(steps_on, axis=1)  # (k, steps): episode-major order below
        obs_parts.append(np.stack(steps_obs, axis=1)[valid])
        mask_parts.append(np.stack(steps_mask, axis=1)[valid])
        act_parts.append(np.stack(steps_act, axis=1)[valid])
        length_parts.append(valid.sum(axis=1))
    distinct, index = number_prompts(list(prompts))
    return AnswerDemonstrations(np.concatenate(obs_parts), np.concatenate(mask_parts),
                                np.concatenate(act_parts), prompts=distinct,
                                lengths=np.concatenate(length_parts).astype(np.int64), prompt_index=index)


def _pair_rows(demos: Any, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each solution's prompt as an int row (its prompt index) and its (prompt, answer) pair as one row
    (prompt index, then the answer's tokens padded with -1): what "the same solution" compares."""
    n = len(lengths)
    prompt_key = np.asarray(demos.prompt_index, dtype=np.int64).reshape(n, 1)
    tokens = np.full((n, int(lengths.max())), -1, dtype=np.int64)
    tokens[np.arange(tokens.shape[1])[None, :] < lengths[:, None]] = demos.actions
    return prompt_key, np.concatenate([prompt_key, tokens], axis=1)


def _distinct_answers(demos: Demonstrations, lengths: np.ndarray, bounds: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct answers of ``demos`` (first occurrence of each), how many times each occurs, and
    the prompt (an index) each one answers. A repeated (prompt, answer) pair is trained on once, with
    its count as weight: the same loss as training on every copy, for a fraction of the work (100k
    Countdown-3 solutions hold ~48k distinct pairs over ~11k prompts). Without a prompt index (plain
    token-level demonstrations) every answer is its own prompt and none is merged."""
    n = len(lengths)
    if not isinstance(demos, AnswerDemonstrations) or len(demos.prompt_index) != n:
        return np.arange(n), np.ones(n, dtype=np.int64), np.arange(n)
    prompt_key, pairs = _pair_rows(demos, lengths)
    _, first, counts = np.unique(pairs, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)  # keep the data's own order among distinct answers
    first, counts = first[order], counts[order]
    _, prompt_of = np.unique(prompt_key[first], axis=0, return_inverse=True)
    return first, counts, prompt_of.reshape(-1)


def _answer_rows(bounds: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """The rows ``bounds[a] .. bounds[a + 1]`` of each of ``answers`` (indices), one after another,
    without a Python loop."""
    lengths = bounds[answers + 1] - bounds[answers]
    offsets = np.repeat(bounds[answers] - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(int(lengths.sum()))


#: How :func:`supervised_fit` groups solutions into minibatches.
MINIBATCH_KINDS = ("prompts", "answers")


def _step_size(learning_rate: float, step: int, steps_total: int, warmup: float) -> float:
    """A linear warm-up over the first ``warmup`` of the steps, then a cosine from ``learning_rate``
    to a tenth of it."""
    ramp = int(warmup * steps_total)
    if step < ramp:
        return learning_rate * (step + 1) / ramp
    return learning_rate * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - ramp) / max(1, steps_total - ramp))))


def _copy_index(demos: Demonstrations, lengths: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """(n,) for each solution of ``demos``, the index into ``answers`` (its distinct answers) of its
    own (prompt, answer) pair."""
    n = len(lengths)
    if len(answers) == n:
        return np.arange(n)
    _, inverse = np.unique(_pair_rows(demos, lengths)[1], axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    slot = np.empty(len(answers), dtype=np.int64)
    slot[inverse[answers]] = np.arange(len(answers))  # unique row -> position in ``answers``
    return slot[inverse]


@dataclass(frozen=True)
class _Plan:
    """How :func:`supervised_fit` cuts ``demos`` into minibatches (the same every epoch but for the
    order): the distinct answers and their counts, the prompts they answer, and the steps per epoch."""

    lengths: np.ndarray  # (n,) rows of each solution
    bounds: np.ndarray  # (n + 1,) each solution's first row
    answers: np.ndarray  # the distinct solutions (first occurrence of each)
    counts: np.ndarray  # how many times each occurs
    n_prompts: int
    by_prompt: np.ndarray  # the distinct answers, prompt after prompt
    prompt_start: np.ndarray  # (n_prompts + 1,) each prompt's first entry of ``by_prompt``
    per_step: int  # prompts per step (minibatch="prompts")
    copy_of: np.ndarray  # (n,) each solution's distinct answer
    batch_size: int
    steps_per_epoch: int

    @classmethod
    def of(cls, demos: Demonstrations, batch_size: int, minibatch: str) -> _Plan:
        if minibatch not in MINIBATCH_KINDS:
            raise ValueError(f"minibatch={minibatch!r} must be one of {MINIBATCH_KINDS}")
        batch_size = _positive_int("batch_size", batch_size)
        # Plain token-level demonstrations (agents.bc) count each token as its own "answer".
        lengths = getattr(demos, "lengths", None)
        if lengths is None:
            lengths = np.ones(len(demos.actions), dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        answers, counts, prompt_of = _distinct_answers(demos, lengths, bounds)
        n_prompts = int(prompt_of.max()) + 1 if len(prompt_of) else 0
        by_prompt = np.argsort(prompt_of, kind="stable")
        prompt_start = np.searchsorted(prompt_of[by_prompt], np.arange(n_prompts + 1))
        per_step = max(1, round(batch_size * n_prompts / len(lengths)))
        copy_of = _copy_index(demos, lengths, answers)
        steps = (math.ceil(n_prompts / per_step) if minibatch == "prompts"
                 else math.ceil(len(copy_of) / batch_size))
        return cls(lengths, bounds, answers, counts, n_prompts, by_prompt, prompt_start, per_step, copy_of,
                   batch_size, steps)


def supervised_steps(demos: Demonstrations, *, epochs: int, batch_size: int,
                     minibatch: str = "prompts") -> int:
    """The optimizer steps :func:`supervised_fit` takes on ``demos`` with these settings."""
    return _positive_int("epochs", epochs) * _Plan.of(demos, batch_size, minibatch).steps_per_epoch


def supervised_fit(
    policy: Any,
    demos: Demonstrations,
    *,
    epochs: int = 4,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
    masked: bool = True,
    max_grad_norm: float | None = 1.0,
    minibatch: str = "prompts",
    warmup: float = 0.0,
) -> list[float]:
    """Fit a torch policy to ``demos`` by cross-entropy on each demonstrated token (under the grammar
    masks when ``masked``): Adam, the step size decayed by a cosine from ``learning_rate`` to a tenth of
    it (the loop is :func:`agents.supervised.fit`, shared with behaviour cloning). Returns each epoch's
    mean loss (nats per demonstrated token).

    Minibatches hold whole prompts with all their demonstrated answers (about ``batch_size``
    solutions per step, in a seeded prompt order), each distinct answer once with its count as
    weight (:func:`_distinct_answers`), so the transformer computes each prompt once for all its
    answers. ``minibatch="answers"`` instead shuffles the solutions themselves (every copy, as plain
    SGD over the data would) into minibatches of ``batch_size`` solutions, repeated ones merged with
    their count as weight. ``warmup`` (a fraction of all steps) ramps the step size linearly from zero
    before the cosine. The policy's RL optimiser and reference are left alone (see :func:`cold_start`)."""
    epochs = _positive_int("epochs", epochs)
    if not 0.0 <= warmup < 1.0:
        raise ValueError(f"warmup={warmup!r} must be a fraction of the steps in [0, 1)")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate={learning_rate!r} must be positive")
    plan = _Plan.of(demos, batch_size, minibatch)
    lengths, bounds, answers, counts = plan.lengths, plan.bounds, plan.answers, plan.counts
    n_prompts, by_prompt, prompt_start = plan.n_prompts, plan.by_prompt, plan.prompt_start
    per_step = plan.per_step
    copy_of, batch_size = plan.copy_of, plan.batch_size
    steps_total = epochs * plan.steps_per_epoch
    rng = np.random.default_rng(seed)

    def minibatches() -> Iterator[list[Batch]]:
        """Each epoch's minibatches: the rows of its distinct answers, each row weighted by its
        answer's count."""
        for _ in range(epochs):
            if minibatch == "prompts":
                order = rng.permutation(n_prompts)
                batches = []
                for first in range(0, n_prompts, per_step):
                    which = by_prompt[_answer_rows(prompt_start, np.sort(order[first : first + per_step]))]
                    batches.append((which, counts[which]))
            else:
                order = rng.permutation(len(copy_of))
                batches = [np.unique(copy_of[order[first : first + batch_size]], return_counts=True)
                           for first in range(0, len(copy_of), batch_size)]
            yield [(_answer_rows(bounds, answers[which]), np.repeat(weight, lengths[answers[which]]))
                   for which, weight in batches]

    return fit(policy, demos, minibatches(), learning_rate=learning_rate, masked=masked,
               max_grad_norm=max_grad_norm,
               step_size=lambda step: _step_size(learning_rate, step, steps_total, warmup))


def cold_start(model: Any, n: int, *, epochs: int = COLD_START["epochs"],
               batch_size: int = COLD_START["batch_size"], learning_rate: float = COLD_START["learning_rate"],
               seed: int | None = None, minibatch: str = COLD_START["minibatch"],
               warmup: float = COLD_START["warmup"], masked: bool | None = None) -> dict[str, Any]:
    """Supervised cold start of a GRPO agent on ``n`` train-split solutions, then RL's start: the fitted
    network becomes the frozen KL reference, the RL optimiser restarts, and a critic (``advantage="gae"``)
    starts again from the fitted network. Returns what it did
    (``sft_solutions``, ``sft_tokens``, ``sft_epochs``, ``sft_losses``, ``sft_seconds``). ``seed``
    defaults to the agent's; the other defaults are the recipe's (:data:`COLD_START`). ``masked``: fit
    the cross-entropy under the grammar masks (the default when the agent uses them) or over every
    token (``False``: the network also learns which tokens the grammar allows; the agent still decodes
    with its own masks)."""
    seed = model.seed if seed is None else seed
    if masked is None:
        masked = model.use_masks
    elif not isinstance(masked, bool):
        raise ValueError(f"masked={masked!r} must be True, False or None (as the agent decodes)")
    start = time.perf_counter()
    demos = demonstrations(model.env, n, seed)
    losses = supervised_fit(model.policy, demos, epochs=epochs, batch_size=batch_size,
                            learning_rate=learning_rate, seed=seed, masked=masked,
                            minibatch=minibatch, warmup=warmup)
    model.policy.restart_from_current()  # reference, RL optimiser and a critic start from the fit
    return {"sft_solutions": int(n), "sft_tokens": int(len(demos.actions)), "sft_epochs": int(epochs),
            "sft_losses": losses, "sft_seconds": time.perf_counter() - start}
