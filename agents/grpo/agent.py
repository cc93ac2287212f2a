"""The GRPO agent: Stable-Baselines3's public face, DeepSeekMath's algorithm, any Discrete-action env."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.config import GRPOConfig
from agents.evaluation import SuccessReport, greedy_success, success_report
from agents.objective import (
    ADVANTAGE_ESTIMATORS,
    LossTerms,
    grpo_token_loss,
    informative_groups,
    mask_truncated,
)
from agents.policies import POLICY_NAMES, Policy, check_tabular_observations, make_policy
from agents.rollout import (
    GroupBatch,
    GroupMode,
    concat_groups,
    detect_group_mode,
    env_has_masks,
    env_masks,
    make_runner,
)
from rlvr_env.envs import TokenEnv
from rlvr_env.rewards import length_reward

__all__ = ["GRPO", "Callback", "CHECKPOINT_FORMAT"]

#: ``callback(model, metrics)`` after each iteration; returning False stops ``learn``.
Callback = Callable[["GRPO", dict[str, float]], "bool | None"]
CHECKPOINT_FORMAT = "rlvr-env/grpo-checkpoint/v1"
_MAX_CHECKPOINT_MEMBER = 512 * 1024 * 1024


class GRPO:
    """Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath section 4) on a Gymnasium env.

    Each iteration draws B prompts, runs G episodes on each (all B x G in lockstep), scores them,
    turns each group's rewards into advantages with the group as the baseline (no critic), and takes
    mu epochs of PPO-clipped steps with a KL penalty to a frozen reference policy.

    Args:
        env: an env id (made with ``gym.make(env, **env_kwargs)``) or an env instance. Its action space
            must be ``Discrete``. Groups share a start by prompt replay, or by a deterministic seeded
            reset (checked; see :mod:`agents.rollout`).
        config: the hyperparameters (:class:`GRPOConfig`). Fields it leaves unset (None), and all of
            them when ``config`` is None, take ``policy``'s preset (``GRPOConfig.preset(policy)``);
            ``GRPOConfig.preset("paper")`` is the papers' values. The resolved config is ``self.config``.
        policy: ``"tabular"`` (NumPy softmax table), ``"mlp"`` (SB3 PPO's actor network, torch) or
            ``"transformer"`` (a causal transformer over ``observation="tokens"``,
            :mod:`agents.grpo.transformer`).
        seed: seeds every random draw of the agent (prompts, sampling, network init).
        env_kwargs: keyword arguments for ``gym.make`` when ``env`` is an id.
        policy_kwargs: for ``"mlp"``: ``net_arch`` (default ``[64, 64]``) and ``activation``.
        verbose: 0 silent, 1 one line per logged iteration, 2 SB3's full tables.
        log_interval: iterations between logger dumps.
        log_dir: if set, also write SB3 logger CSV (and TensorBoard when ``tensorboard=True``) there.
        vectorized: roll out in the env id's native vector env (``gym.make_vec(...,
            vectorization_mode="vector_entry_point")``); None uses it whenever the id has one. Both paths
            draw the same prompts and samples, so on fixed-length tasks they train identically.
        eval_freq: every ``eval_freq`` iterations (0: never), add :meth:`success` on both splits to the
            iteration's metrics (``eval/train_greedy``, ``eval/test_sampled``, ``eval/test_pass@k``,
            ...), so the per-iteration log shows greedy and sampled success side by side. Evaluation
            uses its own seeded generator, so it does not change training.
        eval_k: sampled answers per prompt for those evaluations.
        eval_prompts: prompts per split for those evaluations (None: all of a finite task, else 256).
    """

    def __init__(
        self,
        env: str | gym.Env,
        config: GRPOConfig | None = None,
        policy: str = "tabular",
        seed: int = 0,
        *,
        env_kwargs: dict[str, Any] | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        log_interval: int = 1,
        log_dir: str | None = None,
        tensorboard: bool = False,
        vectorized: bool | None = None,
        eval_freq: int = 0,
        eval_k: int = 16,
        eval_prompts: int | None = None,
    ) -> None:
        if policy not in POLICY_NAMES:
            raise ValueError(f"policy={policy!r} is not one of {POLICY_NAMES}")
        if config is None:
            config = GRPOConfig()
        if not isinstance(config, GRPOConfig):
            raise ValueError(f"config must be a GRPOConfig, got {type(config).__name__}")
        config = config.resolve(policy)  # unset fields take the policy's preset
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed={seed!r} must be a non-negative integer")
        if verbose not in (0, 1, 2):
            raise ValueError(f"verbose={verbose!r} must be 0, 1 or 2")
        if isinstance(log_interval, bool) or not isinstance(log_interval, int) or log_interval < 1:
            raise ValueError(f"log_interval={log_interval!r} must be a positive integer")
        if isinstance(eval_freq, bool) or not isinstance(eval_freq, int) or eval_freq < 0:
            raise ValueError(f"eval_freq={eval_freq!r} must be a non-negative integer")
        self.eval_freq, self.eval_k, self.eval_prompts = eval_freq, eval_k, eval_prompts

        self.env_id: str | None = None
        self.env_kwargs = dict(env_kwargs or {})
        if isinstance(env, str) and policy == "transformer":  # it reads the token context (issue 16)
            self.env_kwargs.setdefault("observation", "tokens")
        if isinstance(env, str):
            self.env_id = env
            self.env = gym.make(env, **self.env_kwargs)
        elif isinstance(env, gym.Env):
            if env_kwargs:
                raise ValueError("env_kwargs are only used when env is an id string")
            self.env = env
            spec = getattr(env, "spec", None)
            if spec is not None:
                self.env_id, self.env_kwargs = spec.id, dict(spec.kwargs)
        else:
            raise ValueError(f"env must be an env id or a gymnasium.Env, got {type(env).__name__}")
        if not isinstance(self.env.action_space, gym.spaces.Discrete):
            raise ValueError(
                f"GRPO needs a Discrete action space (one token per step), got {self.env.action_space}"
            )
        if self.env.action_space.start != 0:
            raise ValueError(f"Discrete action space must start at 0, got {self.env.action_space}")

        self.config = config
        self.policy_name = policy
        self.seed = int(seed)
        self.policy_kwargs = dict(policy_kwargs or {})
        self.verbose, self.log_interval = verbose, log_interval
        self.log_dir, self.tensorboard = log_dir, tensorboard
        self.observation_space = self.env.observation_space
        self.n_actions = int(self.env.action_space.n)
        self.group_mode: GroupMode = detect_group_mode(self.env)
        self.rng = np.random.default_rng(self.seed)
        if policy == "tabular":
            check_tabular_observations(self.env)
        self.max_episode_length = self._max_episode_length()
        if config.loss_aggregation == "seq_mean_token_sum" and config.token_sum_norm is None \
                and self.max_episode_length is None:
            raise ValueError(
                "loss_aggregation='seq_mean_token_sum' divides by a fixed maximum length, and this env "
                "declares none (no task max_length, no spec max_episode_steps); set token_sum_norm"
            )
        if (config.token_sum_norm is not None and self.max_episode_length is not None
                and config.token_sum_norm < self.max_episode_length):
            raise ValueError(
                f"token_sum_norm={config.token_sum_norm} is shorter than the env's maximum episode length "
                f"{self.max_episode_length}: the normaliser must bound every answer's length"
            )
        self.feature_slices = self._tabular_slices() if policy == "tabular" else None
        self.policy: Policy = make_policy(
            policy,
            self.observation_space,
            self.n_actions,
            config.learning_rate,
            self.seed,
            feature_slices=self.feature_slices,
            max_grad_norm=config.max_grad_norm,
            tabular_optimizer=config.tabular_optimizer,
            policy_kwargs=self.policy_kwargs,
        )
        #: whether rollouts, updates, ``predict`` (when given masks) and evaluation are grammar-masked
        self.use_masks = bool(config.action_masks and env_has_masks(self.env))
        self._runner = make_runner(self.env, self.env_id, self.env_kwargs, config.prompts_per_iter,
                                   config.group_size, self.group_mode, vectorized, self.use_masks)
        self.vectorized = not hasattr(self._runner, "envs")
        self.num_timesteps = 0
        self.iterations = 0
        self.last_metrics: dict[str, float] = {}
        self.train_seconds = 0.0  # wall time of the last learn() loop (rollouts + updates + logging)
        self._logger: Any = None

    def _max_episode_length(self) -> int | None:
        task = getattr(self.env.unwrapped, "task", None)
        if isinstance(self.env.unwrapped, TokenEnv) and task is not None:
            return int(task.max_length)
        spec = getattr(self.env, "spec", None)
        steps = getattr(spec, "max_episode_steps", None)
        return int(steps) if steps else None

    # ---------------------------------------------------------------------------------------------
    # Training
    # ---------------------------------------------------------------------------------------------
    def learn(
        self,
        total_timesteps: int,
        callback: Callback | None = None,
        progress_bar: bool = False,
        reset_num_timesteps: bool = True,
    ) -> GRPO:
        """Train for ``total_timesteps`` environment steps (rounded up to whole iterations).

        As in SB3, ``reset_num_timesteps=False`` continues counting, and ``total_timesteps`` is then
        the number of *additional* steps.
        """
        if isinstance(total_timesteps, bool) or not isinstance(total_timesteps, (int, np.integer)):
            raise ValueError(f"total_timesteps={total_timesteps!r} must be an integer")
        if total_timesteps < 1:
            raise ValueError(f"total_timesteps={total_timesteps} must be positive")
        if reset_num_timesteps:
            self.num_timesteps, self.iterations = 0, 0
        goal = self.num_timesteps + int(total_timesteps)
        if self.verbose or self.log_dir is not None:
            _ = self.logger  # set up (and import torch for) SB3's logger before the clock starts
        bar = _progress(progress_bar, int(total_timesteps))
        start_steps, start_time = self.num_timesteps, time.perf_counter()
        try:
            while self.num_timesteps < goal:
                # Draw prompts, run G episodes each (several rounds under dynamic sampling), score them.
                sampled, sampled_rewards, batch, rewards, rounds = self._collect(goal)
                train_stats: dict[str, float] = {}
                if batch is not None:
                    adv = ADVANTAGE_ESTIMATORS[self.config.advantage](  # type: ignore[index]
                        rewards, self.config.adv_eps, self.config.unbiased_std
                    )  # (B, G)
                    train_stats = self._update(batch, adv.reshape(-1))  # mu clipped epochs
                self.num_timesteps += sampled.n_steps  # every rolled-out step, kept or dropped
                self.iterations += 1
                elapsed = time.perf_counter() - start_time
                metrics = {
                    **_rollout_metrics(sampled, sampled_rewards),
                    **train_stats,
                    "time/fps": (self.num_timesteps - start_steps) / max(elapsed, 1e-9),
                    "time/iterations": float(self.iterations),
                    "time/total_timesteps": float(self.num_timesteps),
                }
                if self.config.dynamic_sampling:
                    metrics["rollout/sampling_rounds"] = float(rounds)
                    metrics["rollout/trained_groups"] = float(0 if batch is None else batch.n_groups)
                if self.eval_freq and self.iterations % self.eval_freq == 0:
                    eval_start = time.perf_counter()
                    for split in ("train", "test"):
                        rep = self.success(split, k=self.eval_k, n_prompts=self.eval_prompts)
                        metrics.update(rep.as_dict(f"eval/{split}_"))
                    start_time += time.perf_counter() - eval_start  # fps counts training only
                self.last_metrics = metrics
                self._log(metrics)
                if bar is not None:  # the bar's total is the budget; the last iteration may run past it
                    bar.update(min(sampled.n_steps, int(total_timesteps) - bar.n))
                if callback is not None and callback(self, metrics) is False:
                    break
        finally:
            self.train_seconds = time.perf_counter() - start_time
            if bar is not None:
                over = self.num_timesteps - goal
                if over > 0:
                    bar.set_postfix_str(f"+{over} steps to finish the last iteration", refresh=True)
                bar.close()
        return self

    def _collect(
        self, goal: int
    ) -> tuple[GroupBatch, np.ndarray, GroupBatch | None, np.ndarray, int]:
        """One iteration's rollouts: (everything sampled, its (B', G) rewards, the groups to train on or
        None, their rewards, rollout rounds). Without dynamic sampling both are the one rollout of B
        groups. With it (DAPO), rounds of B groups are rolled out until B groups with untied rewards
        are kept, the round budget is spent, or the step budget ``goal`` is reached."""
        cfg = self.config
        first = self._runner.collect(self.policy, self.rng)
        first_rewards = self._group_rewards(first)  # (B, G) verifier reward + k1.5 length term
        if not cfg.dynamic_sampling:
            return first, first_rewards, first, first_rewards, 1
        target = first.n_groups
        sampled, sampled_rewards = [first], [first_rewards]
        kept: list[GroupBatch] = []
        kept_rewards: list[np.ndarray] = []
        steps = 0
        while True:
            batch, rewards = sampled[-1], sampled_rewards[-1]
            steps += batch.n_steps
            keep = np.flatnonzero(informative_groups(rewards))
            if keep.size:
                kept.append(batch.select_groups(keep))
                kept_rewards.append(rewards[keep])
            n_kept = sum(len(r) for r in kept_rewards)
            if (n_kept >= target or len(sampled) >= cfg.dynamic_sampling_max_rounds
                    or self.num_timesteps + steps >= goal):
                break
            sampled.append(self._runner.collect(self.policy, self.rng))
            sampled_rewards.append(self._group_rewards(sampled[-1]))
        all_batch = concat_groups(sampled) if len(sampled) > 1 else first
        all_rewards = np.concatenate(sampled_rewards)
        if not kept:
            return all_batch, all_rewards, None, np.zeros((0, first.group_size)), len(sampled)
        train = concat_groups(kept)
        train_rewards = np.concatenate(kept_rewards)
        if train.n_groups > target:  # the last round overshot: keep the first B informative groups
            train, train_rewards = train.select_groups(np.arange(target)), train_rewards[:target]
        return all_batch, all_rewards, train, train_rewards, len(sampled)

    def _group_rewards(self, batch: GroupBatch) -> np.ndarray:
        rewards = batch.returns.reshape(batch.n_groups, batch.group_size).copy()  # (B, G)
        w = self.config.length_weight
        if w > 0 and not np.isnan(batch.correct).any():
            lengths = batch.lengths.reshape(rewards.shape)
            correct = batch.correct.reshape(rewards.shape).astype(bool)
            for b in range(rewards.shape[0]):  # B small groups; the term is defined per group
                rewards[b] += w * length_reward(lengths[b], correct[b])
        return rewards

    def _update(self, batch: GroupBatch, adv: np.ndarray) -> dict[str, float]:
        """mu epochs of clipped steps over the batch; minibatches hold whole groups."""
        cfg = self.config
        loss_mask = batch.mask
        if cfg.mask_truncated and batch.truncated is not None:
            loss_mask = mask_truncated(batch.mask, batch.truncated)  # (N, L)
        valid = loss_mask > 0  # (N, L): the tokens in the loss
        adv_tok = np.broadcast_to(adv[:, None], batch.mask.shape)  # (N, L)
        # The reference is frozen, so its log-probs are computed once per iteration.
        masks = batch.action_masks  # (N, L, V) or None
        logp_ref = np.zeros_like(batch.logp_old)
        logp_ref[valid] = self.policy.reference_logp(batch.obs[valid], batch.actions[valid],
                                                     None if masks is None else masks[valid])
        groups = np.arange(batch.n_groups)
        chunks = np.array_split(groups, cfg.minibatches)
        stats: list[tuple[LossTerms, float]] = []
        for _ in range(cfg.epochs):
            for chunk in chunks:
                rows = (chunk[:, None] * batch.group_size + np.arange(batch.group_size)).reshape(-1)
                sub_valid = valid[rows]  # (n, L)
                n_tokens = int(sub_valid.sum())
                if n_tokens == 0:  # e.g. every answer of the minibatch was truncated and masked out
                    continue
                entropy_weights = None
                if cfg.entropy_coef > 0:  # mean entropy of the tokens in the loss (TRL's definition)
                    entropy_weights = np.full(n_tokens, cfg.entropy_coef / n_tokens)
                loss_fn = functools.partial(self._token_loss, batch, rows, logp_ref, adv_tok, loss_mask)
                result = self.policy.update(batch.obs[rows][sub_valid], batch.actions[rows][sub_valid],
                                            loss_fn, entropy_weights=entropy_weights,
                                            masks=None if masks is None else masks[rows][sub_valid])
                stats.append((result.terms, result.entropy))
        if not stats:
            return {}
        return {
            "train/policy_loss": float(np.mean([s.policy_loss for s, _ in stats])),
            "train/loss": float(np.mean([s.loss - cfg.entropy_coef * e for s, e in stats])),
            "train/kl": float(np.mean([s.kl for s, _ in stats])),
            "train/clip_frac": float(np.mean([s.clip_frac for s, _ in stats])),
            "train/entropy": float(np.mean([e for _, e in stats])),
        }

    def _token_loss(self, batch: GroupBatch, rows: np.ndarray, logp_ref: np.ndarray, adv_tok: np.ndarray,
                    loss_mask: np.ndarray, logp_tokens: np.ndarray) -> LossTerms:
        """The GRPO loss of episodes ``rows`` given the (T,) log-probs of their tokens in the loss; the
        gradient comes back per such token, in the same order."""
        cfg = self.config
        mask = loss_mask[rows]  # (n, L)
        valid = mask > 0
        logp = np.zeros(mask.shape)
        logp[valid] = logp_tokens
        terms = grpo_token_loss(
            logp, batch.logp_old[rows], logp_ref[rows], adv_tok[rows], mask,
            clip_eps=cfg.clip_eps, beta=cfg.beta, kl_estimator=cfg.kl_estimator,  # type: ignore[arg-type]
            aggregation=cfg.loss_aggregation, clip_eps_high=cfg.clip_eps_high,
            dual_clip_c=cfg.dual_clip_c, policy_loss=cfg.policy_loss, kl_cov_ratio=cfg.kl_cov_ratio,
            kl_cov_coef=cfg.kl_cov_coef, clip_cov_ratio=cfg.clip_cov_ratio,
            clip_cov_bounds=(cfg.clip_cov_lb, cfg.clip_cov_ub),
            rng=self.rng if cfg.policy_loss == "clip_cov" else None,  # Clip-Cov's draw; seeded
            max_length=self._token_sum_norm(mask.shape[1]),
        )
        return dataclasses.replace(terms, grad_logp=terms.grad_logp[valid])

    def _token_sum_norm(self, padded: int) -> int | None:
        """The fixed length of "seq_mean_token_sum" (never shorter than this batch's padding)."""
        if self.config.loss_aggregation != "seq_mean_token_sum":
            return None
        norm = self.config.token_sum_norm or self.max_episode_length
        return int(norm) if norm is not None else padded

    # ---------------------------------------------------------------------------------------------
    # Inference and evaluation
    # ---------------------------------------------------------------------------------------------
    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, None]:
        """SB3-style: actions for one observation (returns shape ()) or a batch (returns (N,)).

        Stochastic predictions draw from the agent's seeded generator. ``state`` and
        ``episode_start`` exist for SB3 compatibility and are ignored (the policies are memoryless).
        ``action_masks`` ((V,) or (N, V) bool, as sb3-contrib's MaskablePPO takes them) restricts the
        choice to the allowed tokens; pass the env's ``action_masks()`` to decode as in training.
        """
        obs = np.asarray(observation)
        single = obs.shape == tuple(self.observation_space.shape or ())
        batch = obs[None] if single else obs
        if not single and batch.shape[1:] != tuple(self.observation_space.shape or ()):
            raise ValueError(
                f"observation of shape {obs.shape} fits neither {self.observation_space.shape} nor a "
                f"batch (N, *{self.observation_space.shape})"
            )
        masks = None
        if action_masks is not None:
            masks = np.asarray(action_masks, dtype=bool).reshape(batch.shape[0], self.n_actions)
        actions = self.policy.predict(batch, deterministic, self.rng, masks)
        return (actions[0] if single else actions), None

    def success(
        self, split: str = "test", k: int = 16, n_prompts: int | None = None, seed: int = 0
    ) -> SuccessReport:
        """Greedy success, sampled success (mean over ``k`` sampled answers per prompt), pass@k and
        per-prompt sampled success on ``split`` (an ``rlvr_env`` env only), decoded under the grammar
        masks when the agent trains with them. Sampling uses a generator seeded by ``seed`` (not the
        agent's), so evaluating does not change training and repeats exactly."""
        rng = np.random.default_rng(seed)

        def predict(obs: np.ndarray, masks: np.ndarray | None, deterministic: bool) -> np.ndarray:
            return self.policy.predict(obs, deterministic, rng, masks)

        return success_report(predict, self.env, split, k=k, masked=self.use_masks,
                              n_prompts=n_prompts, seed=seed)

    def evaluate(
        self, split: str = "test", n_prompts: int | None = None, n_episodes: int = 10
    ) -> float:
        """Greedy performance (see :meth:`success` for sampled success and pass@k as well).

        On an ``rlvr_env`` env: the fraction of ``split``'s prompts answered correctly (all prompts of a
        finite task, else ``n_prompts`` seeded draws), a float in [0, 1]. On any other env: the mean
        undiscounted return of ``n_episodes`` greedy episodes from seeded resets (``split`` unused).
        """
        if isinstance(self.env.unwrapped, TokenEnv):
            if self.use_masks:
                return self.success(split, k=1, n_prompts=n_prompts).greedy
            return greedy_success(
                lambda o: self.predict(o, deterministic=True)[0], self.env, split, n_prompts=n_prompts
            )
        total = 0.0
        probe = gym.make(self.env_id, **self.env_kwargs) if self.env_id else self.env
        for i in range(n_episodes):
            obs, _ = probe.reset(seed=1_000_000 + i)
            done = False
            while not done:
                masks = env_masks(probe) if self.use_masks else None
                action, _ = self.predict(obs, deterministic=True, action_masks=masks)
                obs, r, terminated, truncated, _ = probe.step(int(action))
                total += float(r)
                done = terminated or truncated
        return total / n_episodes

    def num_parameters(self) -> int:
        """Trainable parameters of the policy (GRPO has no critic)."""
        return self.policy.num_parameters()

    # ---------------------------------------------------------------------------------------------
    # Logging (SB3's logger; imported lazily because it imports torch)
    # ---------------------------------------------------------------------------------------------
    @property
    def logger(self) -> Any:
        """The SB3 ``Logger`` (created on first use)."""
        if self._logger is None:
            from agents.sb3_logging import make_logger

            self._logger = make_logger(self.verbose, self.log_dir, self.tensorboard)
        return self._logger

    def set_logger(self, logger: Any) -> None:
        """Use an SB3 ``Logger`` made elsewhere (e.g. ``stable_baselines3.common.logger.configure``)."""
        self._logger = logger

    def _log(self, metrics: dict[str, float]) -> None:
        if self._logger is None and self.verbose == 0 and self.log_dir is None:
            return  # nothing would be written; do not import torch for nothing
        for key, value in metrics.items():
            self.logger.record(key, value)
        if self.iterations % self.log_interval == 0:
            self.logger.dump(self.num_timesteps)

    # ---------------------------------------------------------------------------------------------
    # Checkpoints: a zip of JSON + NumPy arrays; nothing in it is ever unpickled
    # ---------------------------------------------------------------------------------------------
    def _tabular_slices(self) -> list[slice] | None:
        inner = self.env.unwrapped
        segments = getattr(getattr(inner, "task", None), "tabular_segments", None)
        layout = getattr(inner, "obs_layout", None)
        if not segments or not layout:
            return None
        return [layout[name] for name in segments]

    def save(self, path: str | Path) -> None:
        """Write a checkpoint (zip: ``grpo.json`` metadata + ``policy.npz`` arrays)."""
        meta = {
            "format": CHECKPOINT_FORMAT,
            "policy": self.policy_name,
            "config": self.config.to_dict(),
            "seed": self.seed,
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "policy_kwargs": self.policy_kwargs,
            "num_timesteps": self.num_timesteps,
            "iterations": self.iterations,
            "observation_shape": list(self.observation_space.shape or ()),
            "n_actions": self.n_actions,
            "rng_state": self.rng.bit_generator.state,
        }
        try:
            meta_text = json.dumps(meta)
        except TypeError as err:
            raise ValueError(f"env_kwargs or policy_kwargs are not JSON-serialisable: {err}") from err
        arrays = io.BytesIO()
        np.savez(arrays, **self.policy.state())  # type: ignore[arg-type]
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("grpo.json", meta_text)
            zf.writestr("policy.npz", arrays.getvalue())
            if self.policy_name in ("mlp", "transformer"):
                import torch

                opt = io.BytesIO()
                torch.save(self.policy.optimizer_state(), opt)  # type: ignore[attr-defined]
                zf.writestr("optimizer.pt", opt.getvalue())
        tmp.replace(path)  # atomic: an interrupted save never leaves a half-written checkpoint

    @classmethod
    def load(cls, path: str | Path, env: str | gym.Env | None = None) -> GRPO:
        """Load a checkpoint written by :meth:`save`; the model predicts exactly as the saved one.

        ``env`` defaults to the env id stored in the checkpoint. A truncated, foreign or tampered file
        raises ``ValueError`` naming the file and what is wrong. Arrays are read with
        ``allow_pickle=False`` and torch optimiser state with ``weights_only=True``.
        """
        path = Path(path)
        try:
            zf = zipfile.ZipFile(path)
        except FileNotFoundError:
            raise
        except (zipfile.BadZipFile, OSError) as err:
            raise ValueError(f"{path} is not a GRPO checkpoint (not a readable zip file: {err})") from err
        with zf:
            names = set(zf.namelist())
            for member in ("grpo.json", "policy.npz"):
                if member not in names:
                    raise ValueError(f"{path} is not a GRPO checkpoint: it has no {member!r}")
            meta = _read_json(zf, path)
            arrays = _read_npz(zf, path)
            opt_bytes = zf.read("optimizer.pt") if "optimizer.pt" in names else None
        policy = meta["policy"]
        if env is None:
            if not meta.get("env_id"):
                raise ValueError(f"{path} was trained on an env without an id; pass env= to load it")
            env = meta["env_id"]
            model = cls(env, GRPOConfig.from_dict(meta["config"]), policy, meta["seed"],
                        env_kwargs=meta.get("env_kwargs") or {}, policy_kwargs=meta.get("policy_kwargs"))
        else:
            model = cls(env, GRPOConfig.from_dict(meta["config"]), policy, meta["seed"],
                        policy_kwargs=meta.get("policy_kwargs"))
        if list(model.observation_space.shape or ()) != list(meta["observation_shape"]):
            raise ValueError(
                f"{path} was trained on observations of shape {meta['observation_shape']}, the env gives "
                f"{model.observation_space.shape}"
            )
        if model.n_actions != meta["n_actions"]:
            raise ValueError(f"{path} has {meta['n_actions']} actions, the env has {model.n_actions}")
        model.policy.load_state(arrays)
        if opt_bytes is not None and policy in ("mlp", "transformer"):
            import torch

            try:
                state = torch.load(io.BytesIO(opt_bytes), weights_only=True)
                model.policy.optimizer.load_state_dict(state)  # type: ignore[attr-defined]
            except Exception as err:  # torch raises many types for a bad file
                raise ValueError(f"{path}: optimiser state is unreadable: {err}") from err
        model.num_timesteps = int(meta["num_timesteps"])
        model.iterations = int(meta["iterations"])
        try:
            model.rng.bit_generator.state = meta["rng_state"]
        except (TypeError, ValueError, KeyError) as err:
            raise ValueError(f"{path}: generator state is malformed: {err}") from err
        return model


def _read_json(zf: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    info = zf.getinfo("grpo.json")
    if info.file_size > 1024 * 1024:
        raise ValueError(f"{path}: grpo.json is {info.file_size} bytes; a checkpoint's is a few KB")
    try:
        meta = json.loads(zf.read("grpo.json").decode("utf-8"))
    except (zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError, OSError, EOFError) as err:
        raise ValueError(f"{path}: grpo.json is corrupt: {err}") from err
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a GRPO checkpoint (format tag {CHECKPOINT_FORMAT!r} missing)")
    required = ("policy", "config", "seed", "num_timesteps", "iterations", "observation_shape",
                "n_actions", "rng_state")
    missing = [k for k in required if k not in meta]
    if missing:
        raise ValueError(f"{path}: grpo.json lacks {missing}")
    if meta["policy"] not in POLICY_NAMES:
        raise ValueError(f"{path}: unknown policy {meta['policy']!r}")
    return meta


def _read_npz(zf: zipfile.ZipFile, path: Path) -> dict[str, np.ndarray]:
    if zf.getinfo("policy.npz").file_size > _MAX_CHECKPOINT_MEMBER:
        raise ValueError(f"{path}: policy.npz is larger than {_MAX_CHECKPOINT_MEMBER} bytes")
    try:
        raw = zf.read("policy.npz")
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as err:
        raise ValueError(f"{path}: policy.npz is corrupt or holds pickled objects: {err}") from err


def _rollout_metrics(batch: GroupBatch, rewards: np.ndarray) -> dict[str, float]:
    tied = np.all(rewards == rewards[:, :1], axis=1)  # (B,)
    out = {
        "rollout/reward_mean": float(batch.returns.mean()),
        "rollout/ep_len_mean": float(batch.lengths.mean()),
        "rollout/zero_std_group_frac": float(tied.mean()),
    }
    if not np.isnan(batch.correct).any():
        out["rollout/solve_rate"] = float(batch.correct.mean())
    if not np.isnan(batch.well_formed).any():
        out["rollout/format_violations"] = float(1.0 - batch.well_formed.mean())
    return out


def _progress(enabled: bool, total: int) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="step", desc="GRPO", dynamic_ncols=True)
