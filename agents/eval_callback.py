"""An ``EvalCallback`` for verifiable-reward envs: success rates instead of mean return.

SB3's own ``EvalCallback`` works with GRPO (see :mod:`agents.grpo.callbacks`), but it reports the mean
episode return, in which a wrong well-formed answer (0.1) and a right one (1.1) blur, and it evaluates
on random resets of one env. :class:`SuccessEvalCallback` reports what every comparison here reports:
greedy success, sampled success (mean@k), pass@k and the worst prompt's sampled success on a split's
prompts, from the shared evaluator (:func:`agents.evaluation.success_report`), and keeps the best model.

It is an SB3 ``BaseCallback``, so this module imports SB3 (the ``torch`` extra); nothing in ``agents``
imports it. It works for GRPO (``on_step`` once per iteration, so ``eval_freq`` counts iterations) and
for any SB3 model (``on_step`` once per vector-env step, so ``eval_freq`` counts those).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
from stable_baselines3.common.callbacks import BaseCallback

from agents.evaluation import SuccessReport, sb3_predictor, success_report

__all__ = ["SuccessEvalCallback"]


class SuccessEvalCallback(BaseCallback):
    """Every ``eval_freq`` calls, evaluate success on ``split`` and log it as ``eval/{split}_greedy``,
    ``eval/{split}_sampled``, ``eval/{split}_pass@k``, ``eval/{split}_min_prompt_sampled``.

    Args:
        eval_env: an ``rlvr_env`` env to score on. None: a GRPO model's own (``model.success``, masked
            as it trains, sampling from a generator seeded by ``seed``); required for other models.
        eval_freq: calls of ``on_step`` between evaluations (GRPO: iterations).
        split, k, n_prompts, seed: as :func:`agents.evaluation.success_report`.
        masked: decode under the env's grammar masks (None: as the model trains, see
            :class:`agents.evaluation.SB3Predictor`: a GRPO model's ``use_masks``, MaskablePPO masked).
        best_model_save_path: if set, ``model.save(<path>/best_model.zip)`` whenever greedy success
            (then sampled success) beats the best so far.
    Attributes:
        evaluations: ``(num_timesteps, SuccessReport)`` of every evaluation, in order.
        best: the best report so far (None before the first evaluation).
    """

    def __init__(self, eval_env: gym.Env | None = None, eval_freq: int = 10, split: str = "test",
                 k: int = 16, n_prompts: int | None = None, seed: int = 0, masked: bool | None = None,
                 best_model_save_path: str | Path | None = None, verbose: int = 0) -> None:
        super().__init__(verbose)
        if isinstance(eval_freq, bool) or not isinstance(eval_freq, int) or eval_freq < 1:
            raise ValueError(f"eval_freq={eval_freq!r} must be a positive integer")
        self.eval_env, self.eval_freq, self.split = eval_env, eval_freq, split
        self.k, self.n_prompts, self.seed, self.masked = k, n_prompts, seed, masked
        self.best_model_save_path = None if best_model_save_path is None else Path(best_model_save_path)
        self.evaluations: list[tuple[int, SuccessReport]] = []
        self.best: SuccessReport | None = None

    def _init_callback(self) -> None:
        if self.eval_env is None and not callable(getattr(self.model, "success", None)):
            raise ValueError(
                f"SuccessEvalCallback needs eval_env for a {type(self.model).__name__} (only a GRPO "
                "model scores itself)"
            )

    def report(self) -> SuccessReport:
        """Evaluate the model now."""
        model: Any = self.model
        if self.eval_env is None:
            return model.success(self.split, k=self.k, n_prompts=self.n_prompts, seed=self.seed)
        return success_report(sb3_predictor(model, self.masked), self.eval_env, self.split, k=self.k,
                              n_prompts=self.n_prompts, seed=self.seed)

    def _on_step(self) -> bool:
        if self.n_calls % self.eval_freq != 0:
            return True
        rep = self.report()
        self.evaluations.append((int(self.num_timesteps), rep))
        for key, value in rep.as_dict(f"eval/{self.split}_").items():
            self.logger.record(key, value)
        if self.verbose:
            print(f"eval at {self.num_timesteps} steps: {self.split} greedy {rep.greedy:.3f}, "
                  f"sampled {rep.sampled:.3f}, pass@{rep.k} {rep.pass_at_k:.3f}")
        if self.best is None or (rep.greedy, rep.sampled) > (self.best.greedy, self.best.sampled):
            self.best = rep
            if self.best_model_save_path is not None:
                self.best_model_save_path.mkdir(parents=True, exist_ok=True)
                self.model.save(self.best_model_save_path / "best_model.zip")
        return True
