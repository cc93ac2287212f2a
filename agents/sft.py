"""The supervised cold start (DeepSeek-R1's SFT stage before RL; Guo et al. 2025, section 2.3.1).

Solutions of **train-split** prompts come from the task's own generator: Countdown builds each prompt from
a random expression tree over its numbers and keeps that expression
(:meth:`rlvr_env.tasks.countdown.CountdownTask.sample_arrays` / ``solution_tokens``), and it rejects
candidates whose number multiset is held out, so no test-split prompt can enter the data (a test checks
it). :func:`demonstrations` replays them in the native vector env, recording (observation, grammar mask,
token) per step in answer order; :func:`supervised_fit` fits any torch policy of :mod:`agents` (the
transformer, the MLP) by minibatch cross-entropy on whole answers, under the masks decoding uses; and
:func:`cold_start` does both to a GRPO agent and makes the fitted network its frozen KL reference and
the start of RL. The same weights go into SB3 contenders with
:func:`agents.grpo.transformer.copy_to_sb3` (or :func:`agents.bc.copy_actor_to_sb3` for the MLP).

Everything is seeded: the prompts (``seed``), the minibatch order (``seed``) and the network's own init
(the policy's seed), so a repeated call gives the same weights bit for bit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.bc import Demonstrations
from agents.grpo.config import COLD_START
from agents.evaluation import as_token_env
from rlvr_env.tasks.base import Prompt, Task
from rlvr_env.vector import TokenVectorEnv

__all__ = ["AnswerDemonstrations", "cold_start", "demonstrations", "solutions", "supervised_fit"]

_CHUNK = 4096  # answers replayed per vector-env batch


@dataclass(frozen=True)
class AnswerDemonstrations(Demonstrations):
    """Token-level demonstrations (:class:`agents.bc.Demonstrations`) whose rows are whole answers in
    order, ``lengths`` (n,) tokens each, so answer i is rows ``sum(lengths[:i]) ..`` onwards."""

    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: (n, N) each answer's prompt numbers and (n,) its target
    numbers: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    targets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return int(value)


def solutions(task: Task, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    """``n`` train-split prompts and one correct answer each: numbers (n, N), targets (n,), token ids.

    Drawn with ``np.random.default_rng(seed)`` by the task's generator (``sample_prompts(rng, "train",
    n)``); the answer is the task's :meth:`~rlvr_env.tasks.base.Task.solution` (Countdown: the generating
    expression). ``ValueError`` for a task that declares no solutions.
    """
    n = _positive_int("n", n)
    if not task.has_solutions:
        raise ValueError(
            f"task {type(task).__name__} declares no solutions (Task.solution, as CountdownTask "
            "implements it); the cold start needs them"
        )
    rng = np.random.default_rng(seed)
    prompts = task.sample_prompts(rng, "train", n)
    answers = [task.solution(p) for p in prompts]
    missing = [p for p, a in zip(prompts, answers) if a is None]
    if missing:
        raise ValueError(f"task {type(task).__name__} knows no solution for the drawn prompt {missing[0]!r}")
    numbers = np.array([p.numbers for p in prompts], dtype=np.int64).reshape(n, -1)
    targets = np.array([p.target for p in prompts], dtype=np.int64)
    return numbers, targets, answers  # type: ignore[return-value]


def demonstrations(env: gym.Env, n: int, seed: int) -> AnswerDemonstrations:
    """Replay :func:`solutions` (``n`` train-split answers) in the native vector env of ``env``'s task
    and observation kind: one row per answer token, answers consecutive and in order, each row the
    observation before the token, the grammar mask there and the token. ``ValueError`` if a replayed
    answer is not paid as correct (the generator and the verifier disagree)."""
    base = as_token_env(env)
    numbers, targets, answers = solutions(base.task, n, seed)
    kind = "tokens" if base.token_context is not None else "features"
    obs_dtype = np.int16 if kind == "tokens" else np.float32  # token ids are small: 4x less memory
    obs_parts, mask_parts, act_parts = [], [], []
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        k, width = stop - start, max(len(a) for a in answers[start:stop])
        tokens = np.full((k, width), base.task.eos_id if base.task.eos_id is not None else 0, np.int64)
        lengths = np.array([len(a) for a in answers[start:stop]])
        for i, a in enumerate(answers[start:stop]):
            tokens[i, : len(a)] = a
        venv = TokenVectorEnv(base.task, k, split="train", autoreset_mode="Disabled", observation=kind)
        prompts = [Prompt(tuple(int(x) for x in nums), int(t))
                   for nums, t in zip(numbers[start:stop].tolist(), targets[start:stop].tolist())]
        obs, _ = venv.reset(options={"prompt": prompts})
        steps_obs, steps_mask = [], []
        correct = np.zeros(k, dtype=bool)
        for col in range(width):
            active = col < lengths
            steps_obs.append(obs.astype(obs_dtype))
            steps_mask.append(venv.action_masks())
            obs, _, terminated, truncated, info = venv.step(tokens[:, col])
            ended = active & (terminated | truncated)
            if ended.any():
                correct[ended] = info["correct"][ended]
        if not correct.all():
            bad = int(np.flatnonzero(~correct)[0])
            raise ValueError(f"the generated solution {answers[start + bad]} for {prompts[bad]} is not "
                             "paid as correct")
        valid = np.arange(width)[None, :] < lengths[:, None]  # (k, width): episode-major order below
        obs_parts.append(np.stack(steps_obs, axis=1)[valid])
        mask_parts.append(np.stack(steps_mask, axis=1)[valid])
        act_parts.append(tokens[valid])
    return AnswerDemonstrations(np.concatenate(obs_parts), np.concatenate(mask_parts),
                                np.concatenate(act_parts), prompts=(),
                                lengths=np.array([len(a) for a in answers], dtype=np.int64),
                                numbers=np.asarray(numbers), targets=np.asarray(targets))


def _log_prob(policy: Any, obs: np.ndarray, actions: np.ndarray, masks: np.ndarray | None) -> torch.Tensor:
    """(T,) log-probs with gradient of any torch policy: its own ``log_prob`` (the transformer: one pass
    per answer), else the MLP's network on its input encoding."""
    if hasattr(policy, "log_prob"):
        return policy.log_prob(obs, actions, masks)
    from agents.grpo.mlp import _masked_log_softmax

    logp_all = _masked_log_softmax(policy.net(policy._input(obs)), masks)
    return logp_all[torch.arange(len(actions)), torch.as_tensor(actions)]


def _pair_rows(demos: Any, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each solution's prompt as an int row (numbers, target) and its (prompt, answer) pair as one row
    (prompt, then the answer's tokens padded with -1): what "the same solution" compares."""
    n = len(lengths)
    prompt_key = np.concatenate([np.asarray(demos.numbers, dtype=np.int64).reshape(n, -1),
                                 np.asarray(demos.targets, dtype=np.int64)[:, None]], axis=1)
    tokens = np.full((n, int(lengths.max())), -1, dtype=np.int64)
    tokens[np.arange(tokens.shape[1])[None, :] < lengths[:, None]] = demos.actions
    return prompt_key, np.concatenate([prompt_key, tokens], axis=1)


def _distinct_answers(demos: Demonstrations, lengths: np.ndarray, bounds: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct answers of ``demos`` (first occurrence of each), how many times each occurs, and
    the prompt (an index) each one answers. A repeated (prompt, answer) pair is trained on once, with
    its count as weight: the same loss as training on every copy, for a fraction of the work (100k
    Countdown-3 solutions hold ~48k distinct pairs over ~11k prompts). Without prompt arrays (plain
    token-level demonstrations) every answer is its own prompt and none is merged."""
    n = len(lengths)
    if not isinstance(demos, AnswerDemonstrations) or len(demos.numbers) != n:
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
    it. Returns each epoch's mean loss (nats per demonstrated token).

    Minibatches hold whole prompts with all their demonstrated answers (about ``batch_size``
    solutions per step, in a seeded prompt order), each distinct answer once with its count as
    weight (:func:`_distinct_answers`), so the transformer computes each prompt once for all its
    answers. ``minibatch="answers"`` instead shuffles the solutions themselves (every copy, as plain
    SGD over the data would) into minibatches of ``batch_size`` solutions, repeated ones merged with
    their count as weight. ``warmup`` (a fraction of all steps) ramps the step size linearly from zero
    before the cosine. The policy's RL optimiser and reference are left alone (see :func:`cold_start`)."""
    epochs = _positive_int("epochs", epochs)
    if minibatch not in MINIBATCH_KINDS:
        raise ValueError(f"minibatch={minibatch!r} must be one of {MINIBATCH_KINDS}")
    if not 0.0 <= warmup < 1.0:
        raise ValueError(f"warmup={warmup!r} must be a fraction of the steps in [0, 1)")
    batch_size = _positive_int("batch_size", batch_size)
    if not learning_rate > 0:
        raise ValueError(f"learning_rate={learning_rate!r} must be positive")
    net = policy.net
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=learning_rate, eps=1e-5)
    # Plain token-level demonstrations (agents.bc) count each token as its own "answer".
    lengths = getattr(demos, "lengths", None)
    if lengths is None:
        lengths = np.ones(len(demos.actions), dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    answers, counts, prompt_of = _distinct_answers(demos, lengths, bounds)
    n_prompts = int(prompt_of.max()) + 1 if len(prompt_of) else 0
    by_prompt = np.argsort(prompt_of, kind="stable")  # distinct answers, prompt after prompt
    prompt_start = np.searchsorted(prompt_of[by_prompt], np.arange(n_prompts + 1))
    per_step = max(1, round(batch_size * n_prompts / len(lengths)))  # prompts per step
    copy_of = _copy_index(demos, lengths, answers)  # (n,) each solution's distinct answer
    if minibatch == "prompts":
        steps_per_epoch = math.ceil(n_prompts / per_step)
    else:
        steps_per_epoch = math.ceil(len(copy_of) / batch_size)
    steps_total = epochs * steps_per_epoch
    rng = np.random.default_rng(seed)
    losses, step = [], 0
    for _ in range(epochs):
        total, count = 0.0, 0.0
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
        for which, weight in batches:
            rows = _answer_rows(bounds, answers[which])
            weights = torch.as_tensor(np.repeat(weight, lengths[answers[which]]),
                                      dtype=next(net.parameters()).dtype)  # (rows,) copies of each answer
            for group in opt.param_groups:
                group["lr"] = _step_size(learning_rate, step, steps_total, warmup)
            logp = _log_prob(policy, demos.obs[rows], demos.actions[rows],
                             demos.masks[rows] if masked else None)
            loss = -(weights * logp).sum() / weights.sum()
            opt.zero_grad()
            loss.backward()
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            opt.step()
            total += float(loss.detach()) * float(weights.sum())
            count += float(weights.sum())
            step += 1
        losses.append(total / count)
    return losses


def cold_start(model: Any, n: int, *, epochs: int = COLD_START["epochs"],
               batch_size: int = COLD_START["batch_size"], learning_rate: float = COLD_START["learning_rate"],
               seed: int | None = None, minibatch: str = COLD_START["minibatch"],
               warmup: float = COLD_START["warmup"]) -> dict[str, Any]:
    """Supervised cold start of a GRPO agent on ``n`` train-split solutions, then RL's start: the fitted
    network becomes the frozen KL reference, the RL optimiser restarts, and a critic (``advantage="gae"``)
    starts again from the fitted network. Returns what it did
    (``sft_solutions``, ``sft_tokens``, ``sft_epochs``, ``sft_losses``, ``sft_seconds``). ``seed``
    defaults to the agent's; the other defaults are the recipe's (:data:`COLD_START`)."""
    seed = model.seed if seed is None else seed
    start = time.perf_counter()
    demos = demonstrations(model.env, n, seed)
    losses = supervised_fit(model.policy, demos, epochs=epochs, batch_size=batch_size,
                            learning_rate=learning_rate, seed=seed, masked=model.use_masks,
                            minibatch=minibatch, warmup=warmup)
    model.policy.restart_from_current()  # reference, RL optimiser and a critic start from the fit
    return {"sft_solutions": int(n), "sft_tokens": int(len(demos.actions)), "sft_epochs": int(epochs),
            "sft_losses": losses, "sft_seconds": time.perf_counter() - start}
