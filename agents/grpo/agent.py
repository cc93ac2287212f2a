"""The GRPO agent: Stable-Baselines3's public face, DeepSeekMath's algorithm, any Discrete-action env.

One iteration of :meth:`GRPO.learn`, top to bottom: draw B prompts -> run G episodes on each -> verify
(:meth:`GRPO.collect_rollouts`, :mod:`agents.grpo.rollout`) -> group advantages
(:meth:`GRPO.compute_advantages`) -> mu clipped epochs (:meth:`GRPO.update`, :mod:`agents.grpo.update`)
-> log (:meth:`GRPO.record`). What the constructor builds is :mod:`agents.grpo.build`; checkpoints are
:mod:`agents.grpo.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.evaluation import SuccessReport, greedy_success, mean_return, success_report
from agents.grpo import checkpoint, hooks
from agents.grpo.build import (
    check_agent_args,
    critic_of,
    make_env,
    max_episode_length,
    resolve_config,
    tabular_slices,
    task_of,
)
from agents.grpo.callbacks import Callback, CallbackRunner, make_callbacks
from agents.grpo.config import GRPOConfig
from agents.grpo.hooks import GroupHook, GroupHooks
from agents.grpo.objective import CRITIC_ESTIMATORS
from agents.grpo.profiling import NO_TIMER, NoTimer, PhaseTimer, timed
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
from agents.grpo.update import (
    Advantages,
    CriticTargets,
    critic_advantages,
    group_advantages,
    group_rewards,
    train_epochs,
)
from agents.policies import CriticPolicy, Policy, class_path, policy_class, registered_name
from rlvr_env.envs import TokenEnv

__all__ = ["GRPO", "Advantages", "Callback"]


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
    step (:mod:`agents.grpo.value`, docs/agent.md); the policy must then declare
    :class:`agents.policies.CriticPolicy` (the mlp and transformer policies do).

    Observing training: ``learn(callback=...)`` gets each iteration's metrics, and
    ``add_group_hook(fn)`` registers ``fn(event)``, called once per iteration after the advantages
    are computed and before the update with an :class:`agents.grpo.hooks.GroupEvent`: every group
    the iteration sampled (all rounds under dynamic sampling, in order) with its rewards, lengths,
    correctness and advantages, and whether it was trained on. The arrays are read-only copies, so
    hooks cannot change training: a run with hooks is bit-for-bit the run without (as long as a hook
    draws nothing from ``model.rng``).

    Args:
        env: an env id (made with ``gym.make(env, **env_kwargs)``) or an env instance. Its action space
            must be ``Discrete``. Groups share a start by prompt replay, or by a deterministic seeded
            reset (checked; see :mod:`agents.grpo.rollout`).
        config: the hyperparameters (:class:`GRPOConfig`). Fields it leaves unset (None), and all of
            them when ``config`` is None, take ``policy``'s preset (``GRPOConfig.preset(policy)``);
            ``GRPOConfig.preset("paper")`` is the papers' values. The resolved config is ``self.config``.
        policy: a registered name, ``"tabular"`` (NumPy softmax table), ``"mlp"`` (SB3 PPO's actor
            network) or ``"transformer"`` (a causal transformer over ``observation="tokens"``,
            :mod:`agents.policies.transformer`), or any :class:`agents.policies.Policy` subclass
            (:mod:`agents.policies.registry`; docs/agent.md, "Add a policy architecture"); the neural ones
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
        config = resolve_config(config, policy_cls)  # unset fields take the policy's preset
        check_agent_args(seed, verbose, log_interval, tensorboard, log_dir, eval_freq)
        self.eval_freq, self.eval_k, self.eval_prompts = eval_freq, eval_k, eval_prompts
        made = make_env(env, env_kwargs, policy_cls.token_observation)
        self.env, self.env_id, self.env_kwargs = made.env, made.env_id, made.env_kwargs
        #: the module that registers ``env_id`` (from ``env="module:id"`` or the env spec's entry point;
        #: None when unknown): a checkpoint stores it, and ``load`` imports it before making the env
        self.env_module = made.env_module

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
        self.n_actions = made.n_actions
        self.group_mode: GroupMode = detect_group_mode(self.env)
        self.rng = np.random.default_rng(self.seed)
        self.max_episode_length = max_episode_length(self.env)
        # The config becomes the loss's constants once, here (Clip-Cov draws with the agent's generator).
        self._loss_settings = config.loss_settings(self.max_episode_length, self.rng)
        #: the observation segments a tabular policy keys its rows on (None: the whole observation)
        self.feature_slices = tabular_slices(self.env)
        self.policy: Policy = policy_cls.build(self, self.policy_kwargs)
        #: whether advantages come from a learned critic (``advantage="gae"``): the critic is a value
        #: network started from the policy's current weights (``policy.critic``, agents.policies.torch_base)
        self.uses_critic = config.advantage in CRITIC_ESTIMATORS
        #: the policy as the critic it serves (None without one): it declares agents.policies.CriticPolicy
        self._critic: CriticPolicy | None = None
        if self.uses_critic:
            assert config.advantage is not None
            self._critic = critic_of(self.policy, config.advantage)
            self._critic.init_critic(config.critic_learning_rate)  # None: the policy's step size
        #: whether rollouts, updates, ``predict`` (when given masks) and evaluation are grammar-masked
        self.use_masks = bool(config.action_masks and env_has_masks(self.env))
        #: whether those masks can forbid a token (``rlvr/Arithmetic-v0``'s allow every one by default)
        task = task_of(self.env)
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

    # -- Training --------------------------------------------------------------------------------------
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
        # The two template steps the agent times, bound once: themselves when the timer is off (nothing
        # of the timer on their path), else inside their phase (the rollout times its own phases).
        compute_advantages = timed(self.timer, "advantage", self.compute_advantages)
        update = timed(self.timer, "update", self.update)
        self._clock = _Clock(self.num_timesteps, time.perf_counter())
        try:
            while self.num_timesteps < goal:
                got = self.collect_rollouts(goal, callbacks)  # draw prompts -> G episodes each -> verify
                adv = compute_advantages(got)  # group advantages (or the critic's)
                self._group_hooks.emit(got.sampled, got.rewards, got.train_groups, adv.per_answer,
                                       self.iterations + 1, self.num_timesteps)
                train_stats = update(got, adv)  # mu clipped epochs
                self.num_timesteps += got.sampled.n_steps  # every rolled-out step, kept or dropped
                self.iterations += 1
                metrics = self.record(got, train_stats)  # log
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
        critic token-level GAE from its values (:func:`agents.grpo.update.critic_advantages`). Empty
        when no group is trained on (dynamic sampling found none)."""
        if got.train is None:
            return Advantages(None)
        if self._critic is not None:  # token-level GAE from the critic's values
            return critic_advantages(self._critic, self.config, got.train, got.train_rewards)
        return group_advantages(self.config, got.train_rewards, got.train.mask)  # (B, G)

    def update(self, got: Collected, adv: Advantages) -> dict[str, float]:
        """mu clipped epochs on the trained groups with their advantages (:meth:`_train_epochs`); the
        training metrics (``train/*``), empty when nothing was trained."""
        if got.train is None or adv.per_answer is None:
            return {}
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
        return group_rewards(batch, self.config.length_weight)  # (B, G)

    def _train_epochs(self, batch: GroupBatch, adv: np.ndarray,
                      critic: CriticTargets | None = None) -> dict[str, float]:
        """mu epochs of clipped steps over the batch with the advantages ``adv`` ((N,) per answer or
        (N, L) per token; :func:`agents.grpo.update.train_epochs`). With the critic's targets
        (``critic``), each minibatch step also takes a critic step, and in the first ``critic_warmup``
        iterations only the critic steps."""
        train_policy = critic is None or self.iterations >= self.config.critic_warmup
        return train_epochs(self.policy, None if critic is None else self._critic, batch, adv, critic,
                            self.config, self._loss_settings, train_policy)

    # -- Inference and evaluation ----------------------------------------------------------------------
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

    def success(self, split: str = "test", k: int = 16, n_prompts: int | None = None,
                seed: int = 0) -> SuccessReport:
        """Greedy success, sampled success (mean over ``k`` sampled answers per prompt), pass@k and
        per-prompt sampled success on ``split`` (an ``rlvr_env`` env only), decoded under the grammar
        masks when the agent trains with them. Sampling uses a generator seeded by ``seed`` (not the
        agent's), so evaluating does not change training and repeats exactly."""
        rng = np.random.default_rng(seed)

        def predict(obs: np.ndarray, masks: np.ndarray | None, deterministic: bool) -> np.ndarray:
            return self.policy.predict(obs, deterministic, rng, masks)

        return success_report(predict, self.env, split, k=k, masked=self.use_masks,
                              n_prompts=n_prompts, seed=seed)

    def evaluate(self, split: str = "test", n_prompts: int | None = None, n_episodes: int = 10) -> float:
        """Greedy performance (see :meth:`success` for sampled success and pass@k as well).

        On an ``rlvr_env`` env: the fraction of ``split``'s prompts answered correctly (all prompts of a
        finite task, else ``n_prompts`` seeded draws), a float in [0, 1]. On any other env: the mean
        undiscounted return of ``n_episodes`` greedy episodes from seeded resets (``split`` unused).
        """
        if isinstance(self.env.unwrapped, TokenEnv):
            if self.use_masks:
                return self.success(split, k=1, n_prompts=n_prompts).greedy
            return greedy_success(lambda o: self.predict(o, deterministic=True)[0], self.env, split,
                                  n_prompts=n_prompts)
        probe = gym.make(self.env_id, **self.env_kwargs) if self.env_id else self.env
        return mean_return(lambda o, m: self.predict(o, deterministic=True, action_masks=m)[0], probe,
                           n_episodes, env_masks if self.use_masks else None)

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

    # -- Logging (SB3's logger, imported lazily because it imports torch; a plain one without SB3) -----
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

    # -- Checkpoints: JSON + NumPy arrays in a zip, nothing unpickled (agents.grpo.checkpoint) ---
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
