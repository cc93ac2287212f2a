"""What the side-by-side speed measurements share (``r1`` and ``think``; not a measurement itself): arms
that take turns in one process (:class:`Turns`), the answer lengths an arm's env reports while it trains
(:class:`LengthTap`), and TRL ``GRPOTrainer``'s completions per second on the same-size network
(:func:`measure_trl`), whose steps can hand the turn to the other arms.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["LengthTap", "Turns", "measure_trl", "turn_shares"]


def turn_shares(budget: int, rounds: int) -> list[int]:
    """``budget`` split over ``rounds`` turns as evenly as whole numbers go, the larger shares first
    (``turn_shares(10, 4) == [3, 3, 2, 2]``)."""
    if rounds < 1 or budget < 0:
        raise ValueError(f"rounds={rounds} must be >= 1 and budget={budget} >= 0")
    return [budget // rounds + (1 if r < budget % rounds else 0) for r in range(rounds)]


class Turns:
    """Arms that take turns: in round ``r`` each arm in order runs its share of its budget
    (:func:`turn_shares`), timed alone, so a change of the machine's load falls on all of them alike.

    An arm is a callable ``turn(share) -> done`` (it trains ``share`` units, say env steps, and returns
    how many it did: a GRPO iteration can overshoot its share). ``seconds[i]`` and ``done[i]`` are arm
    ``i``'s wall seconds and units over the rounds run so far."""

    def __init__(self, turns: Sequence[Callable[[int], int]], budgets: Sequence[int], rounds: int) -> None:
        if len(turns) != len(budgets):
            raise ValueError(f"{len(turns)} arms but {len(budgets)} budgets")
        self.turns = list(turns)
        self.shares = [turn_shares(b, rounds) for b in budgets]
        self.rounds = rounds
        self.seconds = [0.0] * len(self.turns)
        self.done = [0] * len(self.turns)
        self.rounds_run = 0

    def round(self) -> None:
        """The next round: every arm's turn, in order."""
        r = self.rounds_run
        if r >= self.rounds:
            raise RuntimeError(f"all {self.rounds} rounds have run")
        for i, turn in enumerate(self.turns):
            start = time.perf_counter()
            n = turn(self.shares[i][r])
            self.seconds[i] += time.perf_counter() - start
            self.done[i] += int(n)
        self.rounds_run += 1

    def run(self) -> None:
        """The rounds not run yet."""
        while self.rounds_run < self.rounds:
            self.round()


class LengthTap:
    """Records each answer's length as the env counts it, put between a GRPO agent's vector runner and
    its native vector env (``runner.venv``): the policy's tokens (env steps) and the transcript's
    (``info["length"]``: on ``rlvr/CountdownThink-v0`` with the calculator, the tokens the calculator
    wrote too). With ``text``, also each transcript as text (:func:`transcript_text`), for the
    characters a character tokenizer would read (decoding costs time: leave it off in timed turns).

    The runner resets the env for every batch and keeps ended rows frozen until the next reset, so a
    row's answer is recorded once, when it first ends."""

    def __init__(self, venv: Any, text: bool = False) -> None:
        self.venv = venv
        self.text = text
        self.policy_tokens: list[int] = []
        self.transcript_tokens: list[int] = []
        self.texts: list[str] = []
        self._open = np.zeros(0, dtype=bool)
        self._steps = np.zeros(0, dtype=np.int64)

    def __getattr__(self, name: str) -> Any:  # everything else is the env's (unwrapped, action masks...)
        return getattr(self.venv, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        out = self.venv.reset(*args, **kwargs)
        self._open = np.ones(self.venv.num_envs, dtype=bool)
        self._steps = np.zeros(self.venv.num_envs, dtype=np.int64)
        return out

    def step(self, actions: np.ndarray) -> Any:
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        self._steps[self._open] += 1
        ended = self._open & (np.asarray(terminated) | np.asarray(truncated))
        if ended.any():
            self.policy_tokens += self._steps[ended].tolist()
            self.transcript_tokens += np.asarray(info["length"])[ended].tolist()
            if self.text:
                inner = self.venv.unwrapped
                vocab = inner.task.vocab
                self.texts += [transcript_text([vocab[t] for t in inner.tokens(r)])
                               for r in np.flatnonzero(ended).tolist()]
            self._open &= ~ended
        return obs, rewards, terminated, truncated, info

    def clear(self) -> None:
        self.policy_tokens, self.transcript_tokens, self.texts = [], [], []


def transcript_text(words: Sequence[str]) -> str:
    """A transcript as a language model writes it: one space between tokens, except that the digits of
    one number are written together (``["<think>", "6", "3", "+", "1"]`` -> ``"<think> 63 + 1"``), as the
    task's module docstring prints a trace."""
    out: list[str] = []
    for w in words:
        if out and w.isdigit() and out[-1][-1:].isdigit():
            out[-1] += w
        else:
            out.append(w)
    return " ".join(out)


def measure_trl(steps: int, seed: int, batch: int = 256, group: int = 16, completion_length: int = 16,
                exact_length: bool = False, between: Callable[[int], None] | None = None
                ) -> dict[str, float]:
    """TRL ``GRPOTrainer``'s completions per second on Countdown-3 text prompts (our dataset and reward
    functions, :mod:`rlvr_env.llm`) with a tiny Llama of the transformer policy's default size
    (:data:`agents.policies.transformer.DEFAULT_ARCH`, character tokenizer: one token per character, built
    offline) at the same batch (``batch`` completions, ``group`` per prompt), CPU, ``steps`` timed steps
    after one warm-up step; completions and their tokens counted where the reward function sees them.

    ``completion_length`` is ``max_completion_length``; with ``exact_length`` every completion is that
    long (``min_new_tokens``: an untrained model would otherwise stop at a sampled end-of-sequence token
    about once in a hundred characters). ``between(k)``, when given, runs after TRL's step ``k`` (0: the
    warm-up) and is not timed: other arms take their turns there."""
    from transformers import TrainerCallback
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer

    from agents.policies.transformer import DEFAULT_ARCH
    from rlvr_env.llm import make_dataset, make_task, reward_functions
    from rlvr_env.llm.tiny import char_tokenizer, tiny_model

    task = make_task("countdown", n_numbers=3)
    tokenizer = char_tokenizer()
    model = tiny_model(len(tokenizer), layers=DEFAULT_ARCH["n_layers"], width=DEFAULT_ARCH["d_model"],
                       seed=seed)
    funcs = reward_functions(task)
    seen = {"completions": 0, "tokens": 0}
    timed = [False]  # counts start after the warm-up step

    def counted(**kwargs: Any) -> list[float]:
        if timed[0]:
            seen["completions"] += len(kwargs["completions"])
            seen["tokens"] += sum(len(ids) for ids in kwargs["completion_ids"])
        return funcs[0](**kwargs)

    counted.__name__ = funcs[0].__name__
    dataset = make_dataset(task, "train", size=batch * (steps + 1), seed=seed)
    step_seconds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        args = TRLConfig(output_dir=tmp, use_cpu=True, report_to=[], max_steps=steps + 1,
                         per_device_train_batch_size=batch, num_generations=group,
                         max_completion_length=completion_length,
                         generation_kwargs={"min_new_tokens": completion_length} if exact_length else None,
                         logging_steps=1, save_strategy="no", seed=seed, learning_rate=1e-4)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[counted, *funcs[1:]],
                              train_dataset=dataset, args=args)
        clock = {"resumed": 0.0, "step": 0}

        class _Clock(TrainerCallback):  # type: ignore[misc]
            # a step is timed from the end of the one before (after the other arms' turns) to its end,
            # logging and data loading included, as a run of the trainer alone would spend it
            def on_step_end(self, *a: object, **k: object) -> None:
                if clock["step"] > 0:  # the warm-up step is not timed
                    step_seconds.append(time.perf_counter() - clock["resumed"])
                if between is not None:
                    between(clock["step"])
                clock["step"] += 1
                timed[0] = True
                clock["resumed"] = time.perf_counter()

        trainer.add_callback(_Clock())
        trainer.train()
    seconds = sum(step_seconds)
    return {"steps": float(len(step_seconds)), "completions": float(seen["completions"]), "seconds": seconds,
            "completions_per_second": seen["completions"] / seconds,
            "completion_tokens_mean": seen["tokens"] / max(seen["completions"], 1),
            "completion_tokens_per_second": seen["tokens"] / seconds,
            "max_completion_length": float(completion_length), "exact_length": exact_length,
            "parameters": float(sum(p.numel() for p in model.parameters()))}
