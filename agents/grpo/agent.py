"""The GRPO agent: Stable-Baselines3's public face, DeepSeekMath's algorithm, any Discrete-action env.

Why one long module: it is the one GRPO object (SB3's face: the learn template, predict, save/load, the
logger and the hooks, plus the update epochs that read the config); splitting the class would spread one
object's state over several files.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.evaluation import SuccessReport, greedy_success, success_report
from agents.grpo import checkpoint, hooks
from agents.grpo.checkpoint import registering_module, split_env_id
from agents.grpo.callbacks import Callback, CallbackRunner, make_callbacks
from agents.grpo.config import GRPOConfig
from agents.grpo.hooks import GroupHook, GroupHooks
from agents.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    CRITIC_ESTIMATORS,
    LossTerms,
    ValueLossTerms,
    clipped_value_loss,
    grpo_token_loss,
    high_entropy_tokens,
    loss_weights,
    mask_truncated,
    terminal_token_rewards,
    token_entropies,
)
from agents.grpo.policies import Policy, apply_mask, log_softmax
from agents.grpo.registry import class_path, policy_class, registered_name
from agents.grpo.profiling import NO_TIMER, NoTimer, PhaseTimer
from agents.grpo.rollout import (
    Collected,
    GroupBatch,
    GroupMode,
    collect_groups,
    detect_group_mode,
    env_has_masks,
    env_masks,
    make_runner,
    rollout_metrics,
)
from rlvr_env.envs import TokenEnv
from rlvr_env.tasks.base import Task
from rlvr_env.rewards import length_reward

__all__ = ["GRPO", "Advantages", "Callback"]


@dataclasses.dataclass(frozen=True)
class _Minibatch:
    """One minibatch's arrays for the update: ``rows`` (n,) of the batch, their (n, L) loss ``mask``,
    ``valid`` tokens, old and reference log-probs and advantages, the (T, ...) tokens in the loss, and
    with a critic its values when the batch was collected and its GAE returns (n, L)."""

    rows: np.ndarray
    mask: np.ndarray
    valid: np.ndarray
    logp_old: np.ndarray
    logp_ref: np.ndarray
    adv: np.ndarray
    obs: np.ndarray
    actions: np.ndarray
    action_masks: np.ndarray | None
    n_tokens: int
    values_old: np.ndarray | None = None
    returns: np.ndarray | None = None

    @classmethod
    def gather(cls, batch: GroupBatch, rows: np.ndarray, valid: np.ndarray, loss_mask: np.ndarray,
               logp_ref: np.ndarray, adv_tok: np.ndarray, critic: _CriticTargets | None) -> _Minibatch:
        sub_valid = valid[rows]  # (n, L)
        masks = batch.action_masks
        return cls(rows=rows, mask=loss_mask[rows], valid=sub_valid, logp_old=batch.logp_old[rows],
                   logp_ref=logp_ref[rows], adv=adv_tok[rows], obs=batch.obs[rows][sub_valid],
                   actions=batch.actions[rows][sub_valid],
                   action_masks=None if masks is None else masks[rows][sub_valid],
                   n_tokens=int(sub_valid.sum()),
                   values_old=None if critic is None else critic.values[rows],
                   returns=None if critic is None else critic.returns[rows])


@dataclasses.dataclass(frozen=True)
class _CriticTargets:
    """The critic's side of one iteration's batch (``advantage="gae"``): its values V(s_t) when the
    batch was collected and the GAE returns, both (N, L); ``first_pass``, when kept, is the critic's
    forward pass (with its graph) over every real token, which the first critic step reuses when its
    minibatch is the whole batch (the critic has not changed yet, so the numbers are the same)."""

    values: np.ndarray
    returns: np.ndarray
    first_pass: Any = None


@dataclasses.dataclass(frozen=True)
class Advantages:
    """One iteration's advantages (:meth:`GRPO.compute_advantages`): ``per_answer`` (B, G), one per
    trained answer (with a critic, the mean of its tokens'; None when no group is trained), which the
    group hooks see and the group estimators' update reads; with a critic, ``per_token`` (N, L), the
    advantage of every token, and ``critic``, its targets."""

    per_answer: np.ndarray | None
    per_token: np.ndarray | None = None
    critic: _CriticTargets | None = None


@dataclasses.dataclass
class _Clock:
    """Where ``learn`` started counting: the step count, and the time (moved on by evaluations, which
    the fps and ``train_seconds`` leave out)."""

    start_steps: int
    start_time: float


class GRPO:
    """Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath section 4) on a Gymnasium env.

    Each iteration draws B prompts, runs G episodes on each (all B x G in lockstep), scores them,
    turns each group's rewards into advantages with the group as the baseline (no critic), and takes
    mu epochs of PPO-clipped steps with a KL penalty to a frozen reference policy. With
    ``advantage="gae"`` the baseline is a learned critic instead (PPO as LLM trainers run it, verl's
    ``adv_estimator="gae"``): a value network started from the policy's weights gives token-level GAE
    advantages, which go into the same loss, and it takes a clipped value-loss step beside each policy
    step (:mod:`agents.grpo.value`, docs/agent.md).

    Observing training: ``learn(callback=...)`` gets each iteration's metrics, and
    ``add_group_hook(fn)`` registers ``fn(event)``, called once per iteration after the advantages
    are computed and before the update with an :class:`agents.grpo.hooks.GroupEvent`: every group
    the iteration sampled (all rounds under dynamic sampling, in order), with ``rewards`` (B', G)
    (verifier reward + length term), ``lengths`` and ``correct`` (B', G), ``trained`` (B',) (False for
    groups dynamic sampling dropped), ``advantages`` (B', G) (NaN rows where not trained; with a critic,
    each answer's mean token advantage),
    ``iteration`` (1-based) and ``num_timesteps`` (before this iteration's steps). The arrays are
    read-only copies, so hooks cannot change training: a run with hooks is bit-for-bit the run
    without (as long as a hook draws nothing from ``model.rng``).

    Args:
        env: an env id (made with ``gym.make(env, **env_kwargs)``) or an env instance. Its action space
            must be ``Discrete``. Groups share a start by prompt replay, or by a deterministic seeded
            reset (checked; see :mod:`agents.grpo.rollout`).
        config: the hyperparameters (:class:`GRPOConfig`). Fields it leaves unset (None), and all of
            them when ``config`` is None, take ``policy``'s preset (``GRPOConfig.preset(policy)``);
            ``GRPOConfig.preset("paper")`` is the papers' values. The resolved config is ``self.config``.
        policy: a registered name, ``"tabular"`` (NumPy softmax table), ``"mlp"`` (SB3 PPO's actor
            network) or ``"transformer"`` (a causal transformer over ``observation="tokens"``,
            :mod:`agents.grpo.transformer`), or any :class:`agents.grpo.policies.Policy` subclass
            (:mod:`agents.grpo.registry`; docs/agent.md, "Add a policy architecture"); the neural ones
            need the ``torch`` extra (``pip install ".[torch]"`` in a clone).
        seed: seeds every random draw of the agent (prompts, sampling, network init).
        env_kwargs: keyword arguments for ``gym.make`` when ``env`` is an id.
        policy_kwargs: keyword arguments of the policy's constructor; for ``"mlp"``: ``net_arch``
            (default ``[64, 64]``) and ``activation``.
        verbose: 0 silent, 1 one line per logged iteration, 2 SB3's full tables (needs SB3).
        log_interval: iterations between logger dumps.
        log_dir: if set, also write SB3 logger CSV (and TensorBoard when ``tensorboard=True``) there
            (needs SB3, from the ``torch`` extra; without it only ``verbose`` 0 and 1 work; TensorBoard
            needs the ``tensorboard`` extra, ``pip install ".[tensorboard]"`` in a clone).
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
        policy: str | type[Policy] = "tabular",
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
        policy_cls = policy_class(policy)  # a registered name or a Policy class (ValueError otherwise)
        if config is None:
            config = GRPOConfig()
        if not isinstance(config, GRPOConfig):
            raise ValueError(f"config must be a GRPOConfig, got {type(config).__name__}")
        config = config.resolve(policy_cls.preset)  # unset fields take the policy's preset
        if config.learning_rate is None:  # neither set nor in the preset: the policy's own step size
            config = dataclasses.replace(config, learning_rate=policy_cls.resolved_learning_rate(config))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed={seed!r} must be a non-negative integer")
        if verbose not in (0, 1, 2):
            raise ValueError(f"verbose={verbose!r} must be 0, 1 or 2")
        if isinstance(log_interval, bool) or not isinstance(log_interval, int) or log_interval < 1:
            raise ValueError(f"log_interval={log_interval!r} must be a positive integer")
        if tensorboard and log_dir is None:
            raise ValueError("tensorboard=True needs log_dir: the TensorBoard files are written there")
        if isinstance(eval_freq, bool) or not isinstance(eval_freq, int) or eval_freq < 0:
            raise ValueError(f"eval_freq={eval_freq!r} must be a non-negative integer")
        self.eval_freq, self.eval_k, self.eval_prompts = eval_freq, eval_k, eval_prompts

        self.env_id: str | None = None
        #: the module that registers ``env_id`` (from ``env="module:id"`` or the env spec's entry point;
        #: None when unknown): a checkpoint stores it, and ``load`` imports it before making the env
        self.env_module: str | None = None
        self.env_kwargs = dict(env_kwargs or {})
        if isinstance(env, str) and policy_cls.token_observation:  # it reads the token context
            self.env_kwargs.setdefault("observation", "tokens")
        if isinstance(env, str):
            self.env_module, self.env_id = split_env_id(env)
            self.env = gym.make(self.env_id, **self.env_kwargs)
            self.env_module = self.env_module or registering_module(self.env.spec)
        elif isinstance(env, gym.Env):
            if env_kwargs:
                raise ValueError("env_kwargs are only used when env is an id string")
            self.env = env
            spec = getattr(env, "spec", None)
            if spec is not None:
                self.env_id, self.env_kwargs = spec.id, dict(spec.kwargs)
                self.env_module = registering_module(spec)
        else:
            raise ValueError(f"env must be an env id or a gymnasium.Env, got {type(env).__name__}")
        if not isinstance(self.env.action_space, gym.spaces.Discrete):
            raise ValueError(
                f"GRPO needs a Discrete action space (one token per step), got {self.env.action_space}"
            )
        if self.env.action_space.start != 0:
            raise ValueError(f"Discrete action space must start at 0, got {self.env.action_space}")

        self.config = config
        #: what a checkpoint stores to find the policy's class again: its registered name, else its
        #: import path "module:Class" (None: neither, e.g. a class defined inside a function)
        self.policy_name = (policy if isinstance(policy, str) and ":" not in policy
                            else registered_name(policy_cls) or class_path(policy_cls))
        self.seed = int(seed)
        self.policy_kwargs = dict(policy_kwargs or {})
        self.verbose, self.log_interval = verbose, log_interval
        self.log_dir, self.tensorboard = log_dir, tensorboard
        self.observation_space = self.env.observation_space
        self.n_actions = int(self.env.action_space.n)
        self.group_mode: GroupMode = detect_group_mode(self.env)
        self.rng = np.random.default_rng(self.seed)
        self.max_episode_length = self._max_episode_length()
        # The config becomes the loss's constants once, here (Clip-Cov draws with the agent's generator).
        self._loss_settings = config.loss_settings(self.max_episode_length, self.rng)
        #: the observation segments a tabular policy keys its rows on (None: the whole observation)
        self.feature_slices = self._tabular_slices()
        self.policy: Policy = policy_cls.build(self, self.policy_kwargs)
        #: whether advantages come from a learned critic (``advantage="gae"``): the critic is a value
        #: network started from the policy's current weights (``policy.critic``, agents.grpo.torch_policy)
        self.uses_critic = config.advantage in CRITIC_ESTIMATORS
        if self.uses_critic:
            lr = config.critic_learning_rate
            if lr is None:  # one step size for both networks
                lr = self.policy.optimizer.param_groups[0]["lr"]  # type: ignore[attr-defined]
            self.policy.init_critic(lr)  # type: ignore[attr-defined]
        #: whether rollouts, updates, ``predict`` (when given masks) and evaluation are grammar-masked
        self.use_masks = bool(config.action_masks and env_has_masks(self.env))
        #: whether those masks can forbid a token (``rlvr/Arithmetic-v0``'s allow every one by default)
        task = self._task()
        self.masks_constrain = self.use_masks and (task is None or task.grammar_masked)
        self._warned_unmasked = False
        self._runner = make_runner(self.env, self.env_id, self.env_kwargs, config.prompts_per_iter,
                                   config.group_size, self.group_mode, vectorized, self.use_masks)
        self.vectorized = not hasattr(self._runner, "envs")
        self.num_timesteps = 0
        self.iterations = 0
        self.last_metrics: dict[str, float] = {}
        self.train_seconds = 0.0  # wall time of the last learn() loop (rollouts + updates + logging)
        self._logger: Any = None
        self._group_hooks = GroupHooks()
        #: phase timing of ``learn`` (:mod:`agents.grpo.profiling`): ``model.timer = PhaseTimer()`` turns
        #: it on; the default :data:`~agents.grpo.profiling.NO_TIMER` costs nothing and times nothing
        self.timer: NoTimer | PhaseTimer = NO_TIMER
        self._clock = _Clock(0, time.perf_counter())

    def _task(self) -> Task | None:
        """The env's task when it is a token env of this package (None: any other Gymnasium env)."""
        inner = self.env.unwrapped
        return inner.task if isinstance(inner, TokenEnv) else None

    def _max_episode_length(self) -> int | None:
        task = self._task()
        if task is not None:
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
        callback: Callback | Any = None,
        progress_bar: bool = False,
        reset_num_timesteps: bool = True,
    ) -> GRPO:
        """Train for ``total_timesteps`` environment steps (rounded up to whole iterations).

        As in SB3, ``reset_num_timesteps=False`` continues counting, and ``total_timesteps`` is then
        the number of *additional* steps. ``callback``: ``fn(model, metrics)`` after each iteration
        (False stops), an SB3 ``BaseCallback`` / ``CallbackList``, or a list of these; an SB3
        callback's ``on_step`` runs once per iteration (:mod:`agents.grpo.callbacks`).

        Each iteration is four template steps a subclass can override, as SB3's ``OnPolicyAlgorithm``
        has: :meth:`collect_rollouts`, :meth:`compute_advantages`, :meth:`update` and :meth:`record`.
        """
        callbacks = make_callbacks(callback)
        goal = self._setup_learn(total_timesteps, reset_num_timesteps)
        bar = hooks.progress_bar(progress_bar, int(total_timesteps))
        if callbacks is not None:
            callbacks.start(self, locals(), globals())
        self._clock = _Clock(self.num_timesteps, time.perf_counter())
        try:
            while self.num_timesteps < goal:
                got = self.collect_rollouts(goal, callbacks)
                adv = self.compute_advantages(got)
                self._group_hooks.emit(got.sampled, got.rewards, got.train_groups, adv.per_answer,
                                       self.iterations + 1, self.num_timesteps)
                train_stats = self.update(got, adv)
                self.num_timesteps += got.sampled.n_steps  # every rolled-out step, kept or dropped
                self.iterations += 1
                metrics = self.record(got, train_stats)
                if bar is not None:  # the bar's total is the budget; the last iteration may run past it
                    bar.update(min(got.sampled.n_steps, int(total_timesteps) - bar.n))
                if callbacks is not None and not callbacks.step(self, metrics, locals()):
                    break
            if callbacks is not None:
                callbacks.end()
        finally:
            self._end_learn(bar, goal)
        return self

    def _setup_learn(self, total_timesteps: int, reset_num_timesteps: bool) -> int:
        """Check the budget, reset the counters (unless continuing) and set up the logger; returns the
        step count to reach."""
        if isinstance(total_timesteps, bool) or not isinstance(total_timesteps, (int, np.integer)):
            raise ValueError(f"total_timesteps={total_timesteps!r} must be an integer")
        if total_timesteps < 1:
            raise ValueError(f"total_timesteps={total_timesteps} must be positive")
        if reset_num_timesteps:
            self.num_timesteps, self.iterations = 0, 0
        if self.verbose or self.log_dir is not None:
            _ = self.logger  # set up (and import torch for) SB3's logger before the clock starts
        return self.num_timesteps + int(total_timesteps)

    def _end_learn(self, bar: Any, goal: int) -> None:
        self.train_seconds = time.perf_counter() - self._clock.start_time
        if bar is not None:
            over = self.num_timesteps - goal
            if over > 0:
                bar.set_postfix_str(f"+{over} steps to finish the last iteration", refresh=True)
            bar.close()

    def collect_rollouts(self, goal: int, callbacks: CallbackRunner | None = None) -> Collected:
        """Draw prompts, run G episodes each (several rounds under dynamic sampling) and score them
        (verifier reward + length term, :meth:`_group_rewards`), spending at most the steps left before
        ``goal``; the callbacks' rollout start and end bracket it."""
        if callbacks is not None:
            callbacks.rollout_start()
        got = collect_groups(self._runner, self.policy, self.rng, self._group_rewards, self.config,
                             goal - self.num_timesteps, self.timer)
        if callbacks is not None:
            callbacks.rollout_end()
        return got

    def compute_advantages(self, got: Collected) -> Advantages:
        """The advantages of the groups to train on: ``config.advantage``'s group estimator, or with a
        critic token-level GAE from its values (:meth:`_critic_advantages`). Empty when no group is
        trained on (dynamic sampling found none)."""
        if got.train is None:
            return Advantages(None)
        with self.timer.phase("advantage"):
            if self.uses_critic:  # token-level GAE from the critic's values
                adv_tok, targets = self._critic_advantages(got.train, got.train_rewards)
                lengths = np.maximum(got.train.mask.sum(axis=1), 1.0)
                per_answer = (adv_tok * got.train.mask).sum(axis=1) / lengths
                return Advantages(per_answer.reshape(got.train_rewards.shape), adv_tok, targets)
            return Advantages(ADVANTAGE_ESTIMATORS[self.config.advantage](  # type: ignore[index]
                got.train_rewards, self.config.adv_eps, self.config.unbiased_std,
                lengths=got.train.mask.sum(axis=1).reshape(got.train_rewards.shape),
            ))  # (B, G)

    def update(self, got: Collected, adv: Advantages) -> dict[str, float]:
        """mu clipped epochs on the trained groups with their advantages (:meth:`_train_epochs`); the
        training metrics (``train/*``), empty when nothing was trained."""
        if got.train is None or adv.per_answer is None:
            return {}
        with self.timer.phase("update"):  # mu clipped epochs
            if adv.critic is None:
                return self._train_epochs(got.train, adv.per_answer.reshape(-1))
            assert adv.per_token is not None
            return self._train_epochs(got.train, adv.per_token, adv.critic)

    def record(self, got: Collected, train_stats: dict[str, float]) -> dict[str, float]:
        """The iteration's metrics (rollout, train, time; every ``eval_freq`` iterations the evaluation's,
        whose time the fps leaves out), kept in ``last_metrics`` and sent to the logger."""
        clock = self._clock
        elapsed = time.perf_counter() - clock.start_time
        metrics = {
            **rollout_metrics(got.sampled, got.rewards),
            **train_stats,
            "time/fps": (self.num_timesteps - clock.start_steps) / max(elapsed, 1e-9),
            "time/iterations": float(self.iterations),
            "time/total_timesteps": float(self.num_timesteps),
        }
        if self.config.dynamic_sampling:
            metrics["rollout/sampling_rounds"] = float(got.rounds)
            metrics["rollout/trained_groups"] = float(len(got.train_groups))
        if self.eval_freq and self.iterations % self.eval_freq == 0:
            eval_start = time.perf_counter()
            for split in ("train", "test"):
                rep = self.success(split, k=self.eval_k, n_prompts=self.eval_prompts)
                metrics.update(rep.as_dict(f"eval/{split}_"))
            clock.start_time += time.perf_counter() - eval_start  # fps counts training only
        self.last_metrics = metrics
        self._log(metrics)
        return metrics

    def _group_rewards(self, batch: GroupBatch) -> np.ndarray:
        rewards = batch.returns.reshape(batch.n_groups, batch.group_size).copy()  # (B, G)
        w = self.config.length_weight
        if w > 0 and not np.isnan(batch.correct).any():
            lengths = batch.lengths.reshape(rewards.shape)
            correct = batch.correct.reshape(rewards.shape).astype(bool)
            for b in range(rewards.shape[0]):  # B small groups; the term is defined per group
                rewards[b] += w * length_reward(lengths[b], correct[b])
        return rewards

    def _critic_advantages(self, batch: GroupBatch, rewards: np.ndarray) -> tuple[np.ndarray, _CriticTargets]:
        """(N, L) token-level GAE advantages (whitened) and the critic's targets for ``batch``: the
        answer's reward (verifier + length term, as GRPO's) at its last token, the critic's V(s_t) of
        every token's state, gamma and lambda from the config (:func:`agents.grpo.value.gae_advantages`)."""
        real = batch.mask > 0  # (N, L): GAE runs over every real token (verl's response_mask)
        values = np.zeros(batch.mask.shape)
        keep = self.config.minibatches == 1 and not self.config.mask_truncated  # the first step's rows
        values[real], first_pass = self.policy.values(  # type: ignore[attr-defined]
            batch.obs[real], batch.actions[real], keep=keep)
        token_rewards = terminal_token_rewards(rewards.reshape(-1), batch.mask)
        adv_tok, returns = CRITIC_ESTIMATORS[self.config.advantage](  # type: ignore[index]
            token_rewards, values, batch.mask, self.config.gamma, self.config.lam)
        return adv_tok, _CriticTargets(values=values, returns=returns, first_pass=first_pass)

    def _train_epochs(self, batch: GroupBatch, adv: np.ndarray,
                      critic: _CriticTargets | None = None) -> dict[str, float]:
        """mu epochs of clipped steps over the batch with the advantages ``adv``: (N,) one per answer,
        broadcast to its tokens (the group estimators), or (N, L) one per token (the critic's); the
        same loss reads both. Minibatches hold whole groups. With a critic (``critic`` given), each
        minibatch step also takes a critic step on the clipped value loss, and in the first
        ``critic_warmup`` iterations only the critic steps."""
        cfg = self.config
        loss_mask = batch.mask
        if cfg.mask_truncated and batch.truncated is not None:
            loss_mask = mask_truncated(batch.mask, batch.truncated)  # (N, L)
        valid = loss_mask > 0  # (N, L): the tokens in the loss
        train_policy = critic is None or self.iterations >= cfg.critic_warmup
        adv_tok = adv if adv.ndim == 2 else np.broadcast_to(adv[:, None], batch.mask.shape)  # (N, L)
        # The reference is frozen, so its log-probs are computed once per iteration.
        masks = batch.action_masks  # (N, L, V) or None
        logp_ref = np.zeros_like(batch.logp_old)
        logp_ref[valid] = self.policy.reference_logp(batch.obs[valid], batch.actions[valid],
                                                     None if masks is None else masks[valid])
        # Each minibatch's arrays are gathered once, not once per epoch (the update reads them only).
        chunks = [_Minibatch.gather(batch, rows, valid, loss_mask, logp_ref, adv_tok, critic)
                  for rows in self._minibatch_rows(batch)]
        chunks = [c for c in chunks if c.n_tokens]  # e.g. every answer truncated and masked out
        stats: list[tuple[LossTerms, float]] = []
        value_stats: list[ValueLossTerms] = []
        assert cfg.epochs is not None  # resolved from the preset at construction
        first_pass = None if critic is None else critic.first_pass
        whole = len(chunks) == 1 and np.array_equal(chunks[0].valid, batch.mask > 0)
        if not whole:
            first_pass = None  # the first step's tokens are not the pass's
        for _ in range(cfg.epochs):
            for c in chunks:
                if critic is not None:  # the critic's step on this minibatch (policy-independent)
                    value_fn = functools.partial(self._value_loss, c)
                    value_stats.append(self.policy.update_critic(  # type: ignore[attr-defined]
                        c.obs, c.actions, value_fn, vpreds=first_pass))
                    first_pass = None  # the critic has moved: later steps run their own pass
                if not train_policy:
                    continue
                chosen = None
                if cfg.top_entropy_quantile < 1.0:
                    chosen = self._high_entropy_tokens(batch.obs[c.rows], c.valid, c.mask,
                                                       None if masks is None else masks[c.rows])
                entropy_weights = None
                if cfg.entropy_coef > 0:  # mean entropy of the tokens in the loss (TRL's definition)
                    entropy_weights = np.full(c.n_tokens, cfg.entropy_coef / c.n_tokens)
                    if chosen is not None:  # ... of the tokens the policy term trains on (as TRL)
                        picked = chosen[c.valid]
                        entropy_weights = picked * (cfg.entropy_coef / max(int(picked.sum()), 1))
                loss_fn = functools.partial(self._token_loss, c, policy_tokens=chosen)
                result = self.policy.update(c.obs, c.actions, loss_fn, entropy_weights=entropy_weights,
                                            masks=c.action_masks)
                stats.append((result.terms, result.entropy))
        out = {}
        if value_stats:
            out = {"train/value_loss": float(np.mean([v.loss for v in value_stats])),
                   "train/value_clip_frac": float(np.mean([v.clip_frac for v in value_stats])),
                   "train/explained_variance": float(np.mean([v.explained_variance for v in value_stats]))}
        if not stats:
            return out
        return {
            **out,
            "train/policy_loss": float(np.mean([s.policy_loss for s, _ in stats])),
            "train/loss": float(np.mean([s.loss - cfg.entropy_coef * e for s, e in stats])),
            "train/kl": float(np.mean([s.kl for s, _ in stats])),
            "train/clip_frac": float(np.mean([s.clip_frac for s, _ in stats])),
            "train/entropy": float(np.mean([e for _, e in stats])),
        }

    def _high_entropy_tokens(self, obs: np.ndarray, valid: np.ndarray, mask: np.ndarray,
                             masks: np.ndarray | None) -> np.ndarray | None:
        """(n, L) the top-rho tokens by the current policy's entropy (``top_entropy_quantile``), or None."""
        rho = self.config.top_entropy_quantile
        if rho >= 1.0:
            return None
        logp_all = log_softmax(apply_mask(self.policy.logits(obs[valid]),
                                          None if masks is None else masks[valid]))  # (T, V)
        entropies = np.zeros(valid.shape)
        entropies[valid] = token_entropies(logp_all)
        return high_entropy_tokens(entropies, mask, rho)

    def _minibatch_rows(self, batch: GroupBatch) -> list[np.ndarray]:
        """The episode rows of each minibatch (whole groups, ``config.minibatches`` of them)."""
        chunks = np.array_split(np.arange(batch.n_groups), self.config.minibatches)
        return [(chunk[:, None] * batch.group_size + np.arange(batch.group_size)).reshape(-1)
                for chunk in chunks]

    def _value_loss(self, c: _Minibatch, vpred_tokens: np.ndarray) -> ValueLossTerms:
        """The critic's clipped value loss of minibatch ``c`` given the (T,) predictions for its tokens in
        the loss, with the policy loss's token weights; the gradient comes back per such token."""
        assert c.values_old is not None and c.returns is not None
        vpreds = np.zeros(c.mask.shape)
        vpreds[c.valid] = vpred_tokens
        terms = clipped_value_loss(vpreds, c.returns, c.values_old, c.mask, self.config.cliprange_value,
                                   loss_weights(c.mask, self._loss_settings))
        return dataclasses.replace(terms, grad_vpred=terms.grad_vpred[c.valid])

    def _token_loss(self, c: _Minibatch, logp_tokens: np.ndarray,
                    policy_tokens: np.ndarray | None = None) -> LossTerms:
        """The GRPO loss of minibatch ``c`` given the (T,) log-probs of its tokens in the loss; the
        gradient comes back per such token, in the same order."""
        logp = np.zeros(c.mask.shape)
        logp[c.valid] = logp_tokens
        terms = grpo_token_loss(logp, c.logp_old, c.logp_ref, c.adv, c.mask, self._loss_settings,
                                policy_tokens=policy_tokens)
        return dataclasses.replace(terms, grad_logp=terms.grad_logp[c.valid])

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
        choice to the allowed tokens; pass the env's ``action_masks()`` to decode as in training. A
        model trained under masks that constrain, asked without them, warns once (unmasked, it picks
        tokens it never learned to avoid: such a model can score 0).
        """
        if action_masks is None and self.masks_constrain and not self._warned_unmasked:
            self._warned_unmasked = True
            warnings.warn(
                "this GRPO model trained under grammar masks and predict() got none, so it decodes "
                "unmasked and may write answers the grammar forbids; pass action_masks=env.action_masks()",
                UserWarning, stacklevel=2)
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

    def get_env(self) -> gym.Env:
        """The env this agent was made with (SB3's name; SB3 callbacks read it)."""
        return self.env

    def get_vec_normalize_env(self) -> None:
        """None: GRPO never normalises observations (SB3's name; its callbacks ask)."""
        return None

    def num_parameters(self) -> int:
        """Trainable parameters of the policy (not counting the critic of ``advantage="gae"``)."""
        return self.policy.num_parameters()

    def add_group_hook(self, fn: GroupHook) -> None:
        """Register ``fn(event: GroupEvent) -> None``, called once per iteration with every group it
        sampled, after the advantages and before the update (see the class docstring)."""
        self._group_hooks.add(fn)

    # ---------------------------------------------------------------------------------------------
    # Logging (SB3's logger, imported lazily because it imports torch; a plain one without SB3)
    # ---------------------------------------------------------------------------------------------
    @property
    def logger(self) -> Any:
        """The SB3 ``Logger`` (created on first use; :mod:`agents.grpo.logging`)."""
        if self._logger is None:
            from agents.grpo.logging import make_logger

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
    # Checkpoints: a zip of JSON + NumPy arrays; nothing in it is ever unpickled (agents.grpo.checkpoint)
    # ---------------------------------------------------------------------------------------------
    def _tabular_slices(self) -> list[slice] | None:
        """The task's ``tabular_segments`` as slices of the observation, or None (key on the whole
        observation) when the task names none or the observation does not have them: the token context
        (``observation="tokens"``) lays out ``prompt`` and ``answer``, not the feature segments, and it
        holds only the prompt and the answer so far, so the whole row is the key there."""
        inner = self.env.unwrapped
        task = self._task()
        segments = task.tabular_segments if task is not None else None
        layout = inner.obs_layout if isinstance(inner, TokenEnv) else None
        if not segments or not layout or not all(name in layout for name in segments):
            return None
        return [layout[name] for name in segments]

    def save(self, path: str | Path) -> None:
        """Write a checkpoint (zip: ``grpo.json`` metadata + ``policy.npz`` arrays). As in SB3, a name
        without a suffix gets ``.zip`` (``save("model")`` writes ``model.zip``) and missing parent
        folders are created."""
        checkpoint.save(self, path)

    @classmethod
    def load(cls, path: str | Path, env: str | gym.Env | None = None,
             config_class: type[GRPOConfig] | None = None) -> GRPO:
        """Load a checkpoint written by :meth:`save`; the model predicts exactly as the saved one.

        As in SB3, ``path`` is opened as given, else with ``.zip`` added (``load("model")`` reads
        ``model.zip``). ``env`` defaults to the env id stored in the checkpoint (its registering module,
        when the checkpoint names one, is imported first). The config is rebuilt as the class it was
        saved as (a ``GRPOConfig`` subclass is stored by its import path and imported);
        ``config_class`` overrides that, e.g. for a subclass defined in ``__main__``.
        A truncated, foreign or tampered file
        raises ``ValueError`` naming the file and what is wrong. Arrays are read with
        ``allow_pickle=False`` and torch optimiser state with ``weights_only=True``.
        """
        model: GRPO = checkpoint.load(cls, path, env, config_class=config_class)
        return model
