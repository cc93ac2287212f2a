"""Rolling out groups: B prompts, G episodes each, all B x G advancing in lockstep.

Group members share their start in one of two ways (docs/agent.md, "The GRPO agent"):

* **replay**: the env's ``reset()`` reports ``info["prompt"]`` and ``reset(options={"prompt": p})``
  starts exactly on ``p`` (every ``rlvr_env`` env). The first member of a group draws the prompt with a
  seeded reset; the other G-1 replay it.
* **seed**: any other env; all G members reset with the same seed. This is only a shared start when
  ``reset(seed=s)`` is deterministic, which :func:`detect_group_mode` checks (two resets with one seed
  must give equal observations) and refuses otherwise.

When the env id has a native vector env (``gym.make_vec(..., vectorization_mode="vector_entry_point")``
that accepts one prompt per sub-env), :class:`VectorGroupRunner` uses it, so a rollout step costs array
operations; otherwise :class:`ListGroupRunner` steps a list of env copies.

Why one long module: both ways a group shares its start (replay, seeded reset) on single and native
vector envs, with the KV-cached transformer path, produce one ``GroupBatch``; they share its bookkeeping.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from agents.grpo.batch import GroupBatch, concat_groups
from agents.grpo.config import GRPOConfig
from agents.grpo.objective import informative_groups
from agents.grpo.profiling import NO_TIMER, NoTimer, PhaseTimer
from agents.policies import Policy, apply_mask, log_softmax, sample_from_logp
from rlvr_env.envs import TokenEnv
from rlvr_env.tasks.base import Task
from rlvr_env.vector import TokenVectorEnv

__all__ = [
    "Collected",
    "GroupBatch",
    "GroupMode",
    "collect_groups",
    "concat_groups",
    "ListGroupRunner",
    "VectorGroupRunner",
    "detect_group_mode",
    "draw_prompts",
    "env_has_masks",
    "env_masks",
    "make_runner",
    "obs_equal",
    "rollout_metrics",
]

GroupMode = Literal["replay", "seed"]
Timer = NoTimer | PhaseTimer
_PROBE_SEED = 12345


def obs_equal(a: Any, b: Any) -> bool:
    """Exact equality of two observations (arrays, scalars, tuples or dicts of them)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(obs_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(obs_equal(x, y) for x, y in zip(a, b))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def detect_group_mode(env: gym.Env) -> GroupMode:
    """How G episodes of ``env`` can share a start; ``ValueError`` if they cannot.

    Uses (and leaves reset) the given env instance.
    """
    probe = copy.deepcopy(env)
    obs1, info = probe.reset(seed=_PROBE_SEED)
    if isinstance(info, dict) and "prompt" in info:
        try:
            obs2, info2 = probe.reset(options={"prompt": info["prompt"]})
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{_name(env)} reports info['prompt'] but refuses reset(options={{'prompt': ...}}): {err}"
            ) from err
        if not obs_equal(obs1, obs2):
            raise ValueError(
                f"{_name(env)}: replaying info['prompt'] gave a different observation; prompt replay "
                "must reproduce the start exactly"
            )
        return "replay"
    obs2, _ = probe.reset(seed=_PROBE_SEED)
    if not obs_equal(obs1, obs2):
        raise ValueError(
            f"{_name(env)} has no prompt-replay option and two reset(seed={_PROBE_SEED}) calls gave "
            "different observations, so G episodes cannot share a start; GRPO needs either "
            "reset(options={'prompt': p}) or a deterministic reset(seed=...)"
        )
    return "seed"


def _name(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__


def draw_prompts(task: Task, split: str, n: int, rng: np.random.Generator) -> list[Any]:
    """``n`` prompts of ``split`` drawn with the agent's generator (one per group)."""
    return [task.sample_prompt(rng, split) for _ in range(n)]


class _Recorder:
    """Accumulates one rollout's per-position arrays and the episodes' outcomes."""

    def __init__(self, n: int) -> None:
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, dtype=np.int64)
        self.correct = np.full(n, np.nan)
        self.well_formed = np.full(n, np.nan)
        self.truncated = np.zeros(n, dtype=bool)
        self.parts: dict[str, np.ndarray] = {}
        self.stats: dict[str, np.ndarray] = {}  # the env's unpaid measurements (info["stats"])
        self.obs: list[np.ndarray] = []
        self.act: list[np.ndarray] = []
        self.logp: list[np.ndarray] = []
        self.mask: list[np.ndarray] = []
        self.action_masks: list[np.ndarray] = []

    def sample(self, policy: Policy, obs: np.ndarray, active: np.ndarray,
               rng: np.random.Generator, masks: np.ndarray | None = None,
               timer: Timer = NO_TIMER, greedy: bool = False) -> np.ndarray:
        """One batched policy call for the active rows; returns (N,) actions (0 on inactive rows).

        ``obs`` is recorded as it is (the runner passes an array it will not change afterwards).
        ``masks`` (N, V) bool, when given, restricts each active row to its allowed tokens (the sample
        and its log-prob come from the renormalised distribution). ``greedy``: the most likely allowed
        token instead of a sample (``rng`` is not drawn from)."""
        n = len(active)
        every = bool(active.all())
        idx = np.flatnonzero(active)
        with timer.phase("forward"):
            sub = obs if every else obs[idx]
            policy.observe(sub)
            logits = policy.logits(sub)  # (n_active, V)
        with timer.phase("sampling"):
            if masks is not None:
                if every:
                    full_masks = masks
                else:
                    full_masks = np.ones(masks.shape, dtype=bool)
                    full_masks[idx] = masks[idx]
                self.action_masks.append(full_masks)
                logits = apply_mask(logits, full_masks[idx] if not every else full_masks)
            logp_all = log_softmax(logits)  # (n_active, V), shared by the draw and the recorded log-prob
            actions = logp_all.argmax(axis=-1).astype(np.int64) if greedy else sample_from_logp(logp_all, rng)
            full_act = np.zeros(n, dtype=np.int64)
            full_logp = np.zeros(n)
            full_act[idx] = actions
            full_logp[idx] = logp_all[np.arange(len(idx)), actions]
            self.obs.append(obs)
            self.act.append(full_act)
            self.logp.append(full_logp)
            self.mask.append(active.astype(np.float64))
        return full_act

    def batch(self, group_size: int) -> GroupBatch:
        return GroupBatch(
            obs=np.stack(self.obs, axis=1),
            actions=np.stack(self.act, axis=1),
            logp_old=np.stack(self.logp, axis=1),
            mask=np.stack(self.mask, axis=1),
            returns=self.returns,
            lengths=self.lengths,
            correct=self.correct,
            well_formed=self.well_formed,
            group_size=group_size,
            action_masks=np.stack(self.action_masks, axis=1) if self.action_masks else None,
            truncated=self.truncated,
            parts=self.parts,
            stats=self.stats,
        )

    def record_parts(self, rows: np.ndarray, parts: Any, into: dict[str, np.ndarray] | None = None) -> None:
        """Keep the weighted reward parts (a dict of arrays over ``rows``, or of numbers for one row);
        ``into=self.stats`` keeps the env's unpaid measurements the same way."""
        if not isinstance(parts, dict):
            return
        store = self.parts if into is None else into
        for name, value in parts.items():
            if isinstance(name, str) and not name.startswith("_"):
                column = store.get(name)
                if column is None:
                    column = store[name] = np.full(len(self.returns), np.nan)
                column[rows] = np.asarray(value, dtype=np.float64)


class ListGroupRunner:
    """Steps B x G copies of one env in lockstep, one batched policy call per step position."""

    def __init__(self, env: gym.Env, n_groups: int, group_size: int, mode: GroupMode,
                 use_masks: bool = False) -> None:
        self.n_groups, self.group_size, self.mode = n_groups, group_size, mode
        self.envs = [copy.deepcopy(env) for _ in range(n_groups * group_size)]
        self.use_masks = use_masks

    def _reset_groups(self, rng: np.random.Generator) -> list[Any]:
        g = self.group_size
        obs: list[Any] = []
        token_env = self.envs[0].unwrapped
        if isinstance(token_env, TokenEnv):
            # rlvr envs: the agent draws the prompts (exactly as VectorGroupRunner does) and replays them.
            prompts = draw_prompts(token_env.task, token_env.split, self.n_groups, rng)
            for b, prompt in enumerate(prompts):
                for member in self.envs[b * g : (b + 1) * g]:
                    obs.append(member.reset(options={"prompt": prompt})[0])
            return obs
        seeds = rng.integers(0, 2**31 - 1, size=self.n_groups)
        for b, seed in enumerate(seeds):
            first = self.envs[b * g]
            o, info = first.reset(seed=int(seed))
            obs.append(o)
            for member in self.envs[b * g + 1 : (b + 1) * g]:
                if self.mode == "replay":
                    o, _ = member.reset(options={"prompt": info["prompt"]})
                else:
                    o, _ = member.reset(seed=int(seed))
                obs.append(o)
        return obs

    def collect(self, policy: Policy, rng: np.random.Generator, timer: Timer = NO_TIMER) -> GroupBatch:
        n = len(self.envs)
        with timer.phase("prompts"):
            obs = np.stack([np.asarray(o) for o in self._reset_groups(rng)])  # (N, *obs_shape)
        active = np.ones(n, dtype=bool)
        rec = _Recorder(n)
        while active.any():
            masks = None
            if self.use_masks:
                with timer.phase("masks"):
                    masks = np.ones((n, policy.n_actions), dtype=bool)
                    for i in np.flatnonzero(active):
                        masks[i] = env_masks(self.envs[i])
            actions = rec.sample(policy, obs, active, rng, masks, timer)
            with timer.phase("env_step"):
                obs = obs.copy()  # the recorder keeps the previous array
                for i in np.flatnonzero(active):  # env steps; the policy was called once for all rows
                    o, r, terminated, truncated, info = self.envs[i].step(int(actions[i]))
                    obs[i] = o
                    rec.returns[i] += float(r)
                    rec.lengths[i] += 1
                    if terminated or truncated:
                        active[i] = False
                        rec.truncated[i] = bool(truncated and not terminated)
                        if "correct" in info:
                            rec.correct[i] = float(info["correct"])
                        if "well_formed" in info:
                            rec.well_formed[i] = float(info["well_formed"])
                        rec.record_parts(np.array([i]), info.get("reward_parts"))
                        rec.record_parts(np.array([i]), info.get("stats"), rec.stats)
        return rec.batch(self.group_size)


class VectorGroupRunner:
    """Runs the B x G episodes in an ``rlvr_env`` native vector env: one ``step`` call per position.

    The env runs with ``autoreset_mode="Disabled"``: rows that finish early stay frozen (no prompt
    draw, no verification) until the slowest episode of the batch ends and the next ``reset`` restarts
    them all; only the steps of real episodes are counted and trained on.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], n_groups: int, group_size: int,
                 use_masks: bool = False) -> None:
        self._setup(gym.make_vec(env_id, num_envs=n_groups * group_size,
                                 vectorization_mode="vector_entry_point", autoreset_mode="Disabled",
                                 **env_kwargs), n_groups, group_size, use_masks)

    @classmethod
    def of_task(cls, task: Task, n_groups: int, group_size: int, *, split: str = "train",
                observation: str = "features", use_masks: bool = False) -> VectorGroupRunner:
        """A runner over a :class:`rlvr_env.vector.TokenVectorEnv` of ``task`` itself (no env id needed:
        the same task, observation and verdicts an agent's env has, as the evaluation builds it)."""
        runner = cls.__new__(cls)
        runner._setup(TokenVectorEnv(task, n_groups * group_size, split=split, autoreset_mode="Disabled",
                                     observation=observation), n_groups, group_size, use_masks)
        return runner

    def _setup(self, venv: Any, n_groups: int, group_size: int, use_masks: bool) -> None:
        self.n_groups, self.group_size = n_groups, group_size
        self.use_masks = use_masks
        self.venv = venv
        inner = self.venv.unwrapped
        self.task: Task = inner.task
        self.split: str = inner.split

    def collect(self, policy: Policy, rng: np.random.Generator, timer: Timer = NO_TIMER, *,
                prompts: list[Any] | None = None, greedy: bool = False) -> GroupBatch:
        """B groups of G episodes: on B prompts drawn with ``rng`` (or the given ``prompts``, one per
        group), sampled with ``rng`` (or greedy). Afterwards every row stays frozen at its finished answer
        until the next call, so ``self.venv.unwrapped.tokens(row)`` is its whole transcript (the env's own
        tokens included)."""
        g, n = self.group_size, self.n_groups * self.group_size
        with timer.phase("prompts"):
            if prompts is None:
                prompts = draw_prompts(self.task, self.split, self.n_groups, rng)
            elif len(prompts) != self.n_groups:
                raise ValueError(f"{len(prompts)} prompts given for {self.n_groups} groups")
            obs, _ = self.venv.reset(options={"prompt": [p for p in prompts for _ in range(g)]})
        active = np.ones(n, dtype=bool)
        rec = _Recorder(n)
        while active.any():
            masks = None
            if self.use_masks:
                with timer.phase("masks"):
                    masks = self.venv.unwrapped.action_masks()
            actions = rec.sample(policy, obs, active, rng, masks, timer, greedy)
            with timer.phase("env_step"):
                # a fresh array every call (the env's copy=True), so the recorder keeps the last one as is
                obs, rewards, terminated, truncated, info = self.venv.step(actions)
                rec.returns[active] += rewards[active]
                rec.lengths[active] += 1
                ended = active & (terminated | truncated)
                if ended.any():  # with autoreset disabled, the final info is at the top level of info
                    rec.truncated[ended] = (truncated & ~terminated)[ended]
                    rec.correct[ended] = info["correct"][ended]
                    rec.well_formed[ended] = info["well_formed"][ended]
                    parts = info.get("reward_parts", {})
                    rec.record_parts(np.flatnonzero(ended), {name: np.asarray(values)[ended]
                                                             for name, values in parts.items()
                                                             if not name.startswith("_")})
                    stats = info.get("stats", {})
                    rec.record_parts(np.flatnonzero(ended), {name: np.asarray(values)[ended]
                                                             for name, values in stats.items()
                                                             if not name.startswith("_")}, rec.stats)
                    active &= ~ended
        return rec.batch(g)

    def close(self) -> None:
        self.venv.close()


def make_runner(
    env: gym.Env,
    env_id: str | None,
    env_kwargs: dict[str, Any],
    n_groups: int,
    group_size: int,
    mode: GroupMode,
    vectorized: bool | None,
    use_masks: bool = False,
) -> ListGroupRunner | VectorGroupRunner:
    """The vector runner when ``vectorized`` (or, when None, when the env id has a native vector env
    and is an rlvr env); otherwise the list runner. ``use_masks``: sample under the env's
    ``action_masks()`` (see :func:`env_has_masks`)."""
    spec = gym.spec(env_id) if env_id else None
    has_vector = (
        spec is not None
        and spec.vector_entry_point is not None
        and isinstance(env.unwrapped, TokenEnv)
    )
    if vectorized and not has_vector:
        raise ValueError(
            f"vectorized=True needs an rlvr env id with a native vector env; {env_id!r} has none"
        )
    if has_vector and vectorized is not False:
        assert env_id is not None
        return VectorGroupRunner(env_id, env_kwargs, n_groups, group_size, use_masks)
    return ListGroupRunner(env, n_groups, group_size, mode, use_masks)


def env_masks(env: gym.Env) -> np.ndarray:
    """The current ``action_masks()`` of ``env`` (its own method, else its base env's)."""
    fn = getattr(env, "action_masks", None)
    if not callable(fn):
        fn = env.unwrapped.action_masks  # type: ignore[attr-defined]
    return np.asarray(fn(), dtype=bool)


def env_has_masks(env: gym.Env) -> bool:
    """Whether ``env`` offers grammar masks: an ``action_masks()`` method on the env or its base env
    (the protocol sb3-contrib's MaskablePPO reads)."""
    return callable(getattr(env, "action_masks", None)) or callable(
        getattr(env.unwrapped, "action_masks", None)
    )


@dataclass(frozen=True)
class Collected:
    """One iteration's rollouts (see :func:`collect_groups`)."""

    sampled: GroupBatch  # every group rolled out, B' of them (all rounds, in order)
    rewards: np.ndarray  # (B', G) their rewards (verifier reward + length term)
    train: GroupBatch | None  # the groups to train on (None: none)
    train_rewards: np.ndarray  # (B_train, G) their rewards
    train_groups: np.ndarray  # (B_train,) their indices among the B' sampled groups
    rounds: int  # rollout rounds of B groups


def collect_groups(
    runner: ListGroupRunner | VectorGroupRunner,
    policy: Policy,
    rng: np.random.Generator,
    group_rewards: Callable[[GroupBatch], np.ndarray],
    config: GRPOConfig,
    steps_left: int,
    timer: Timer = NO_TIMER,
) -> Collected:
    """Roll out one iteration's groups and score them with ``group_rewards`` ((B, G) per rollout).

    Without dynamic sampling, the one rollout of B groups is both sampled and trained on. With it
    (DAPO, ``config.dynamic_sampling``), rounds of B groups are rolled out until B groups with untied
    rewards are kept, ``config.dynamic_sampling_max_rounds`` is spent, or the rounds' steps reach
    ``steps_left`` (the rest of the step budget); only the first B informative groups are trained on.
    """
    first = runner.collect(policy, rng, timer)
    with timer.phase("scoring"):
        first_rewards = group_rewards(first)  # (B, G)
    if not config.dynamic_sampling:
        return Collected(first, first_rewards, first, first_rewards, np.arange(first.n_groups), 1)
    target = first.n_groups
    sampled, sampled_rewards = [first], [first_rewards]
    kept: list[GroupBatch] = []
    kept_rewards: list[np.ndarray] = []
    kept_index: list[np.ndarray] = []  # indices of the kept groups among all sampled ones
    steps, offset = 0, 0
    while True:
        batch, rewards = sampled[-1], sampled_rewards[-1]
        steps += batch.n_steps
        with timer.phase("scoring"):  # dynamic sampling's selection is part of scoring
            keep = np.flatnonzero(informative_groups(rewards))
            if keep.size:
                kept.append(batch.select_groups(keep))
                kept_rewards.append(rewards[keep])
                kept_index.append(offset + keep)
            offset += len(rewards)
        n_kept = sum(len(r) for r in kept_rewards)
        if n_kept >= target or len(sampled) >= config.dynamic_sampling_max_rounds or steps >= steps_left:
            break
        sampled.append(runner.collect(policy, rng, timer))
        with timer.phase("scoring"):
            sampled_rewards.append(group_rewards(sampled[-1]))
    with timer.phase("scoring"):
        return _assemble(sampled, sampled_rewards, kept, kept_rewards, kept_index, target)


def _assemble(sampled: list[GroupBatch], sampled_rewards: list[np.ndarray], kept: list[GroupBatch],
              kept_rewards: list[np.ndarray], kept_index: list[np.ndarray], target: int) -> Collected:
    """Dynamic sampling's result: every sampled group, and the first ``target`` informative ones."""
    first = sampled[0]
    all_batch = concat_groups(sampled) if len(sampled) > 1 else first
    all_rewards = np.concatenate(sampled_rewards)
    if not kept:
        return Collected(all_batch, all_rewards, None, np.zeros((0, first.group_size)),
                         np.zeros(0, dtype=np.int64), len(sampled))
    train = concat_groups(kept)
    train_rewards = np.concatenate(kept_rewards)
    train_index = np.concatenate(kept_index)
    if train.n_groups > target:  # the last round overshot: keep the first B informative groups
        train, train_rewards = train.select_groups(np.arange(target)), train_rewards[:target]
        train_index = train_index[:target]
    return Collected(all_batch, all_rewards, train, train_rewards, train_index, len(sampled))


def rollout_metrics(batch: GroupBatch, rewards: np.ndarray) -> dict[str, float]:
    """The ``rollout/*`` metrics of an iteration's sampled groups and their (B', G) rewards."""
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
    for name, values in batch.parts.items():  # every weighted part the env pays, by its name
        if len(values) and not np.isnan(values).any():
            out[f"rollout/reward_{name}_mean"] = float(values.mean())
    known = ~np.isnan(batch.correct)
    for label, rows in (("correct", known & (batch.correct == 1)), ("wrong", known & (batch.correct == 0))):
        if rows.any():  # response length of right and wrong answers, apart (R1's length curves)
            out[f"rollout/ep_len_{label}_mean"] = float(batch.lengths[rows].mean())
    for name, values in batch.stats.items():  # what the env measured and did not pay (a trace's steps...)
        measured = ~np.isnan(values)  # a stat only some episodes report (one member of a mix) is their mean
        if measured.any():
            out[f"rollout/{name}_mean"] = float(values[measured].mean())
    out.update(labelled_metrics(batch))
    consistent = batch.stats.get("consistent")
    if consistent is not None and known.all() and batch.correct.sum() > 0 and not np.isnan(consistent).any():
        # the share of paid answers that a successful branch of their own trace derives
        out["rollout/consistency"] = float(consistent.sum() / batch.correct.sum())
    return out


#: A stat named ``task/<label>`` marks the episodes of one part of a task (1.0 on them, 0.0 elsewhere), as
#: a task mix marks its members (``rlvr_env.MixTask``): success and reward are then logged per label.
LABEL_PREFIX = "task/"


def labelled_metrics(batch: GroupBatch) -> dict[str, float]:
    """``rollout/<label>/solve_rate``, ``rollout/<label>/reward_mean`` and ``rollout/<label>/ep_len_mean``
    over the episodes each ``task/<label>`` stat marks; a label no episode of the batch has is left out
    (never a 0 or a NaN in the log), and solve rates are over the episodes that report correctness."""
    out: dict[str, float] = {}
    for name, values in batch.stats.items():
        if not name.startswith(LABEL_PREFIX) or len(name) == len(LABEL_PREFIX):
            continue
        rows = values == 1.0  # (N,) NaN and 0.0 rows are not this label's
        if not rows.any():
            continue
        label = name[len(LABEL_PREFIX):]
        out[f"rollout/{label}/reward_mean"] = float(batch.returns[rows].mean())
        out[f"rollout/{label}/ep_len_mean"] = float(batch.lengths[rows].mean())
        known = rows & ~np.isnan(batch.correct)
        if known.any():
            out[f"rollout/{label}/solve_rate"] = float(batch.correct[known].mean())
    return out
