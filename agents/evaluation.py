"""Evaluation on an ``rlvr_env`` split, shared by the GRPO agent and the benchmarks (one
implementation, so GRPO, SB3 PPO and MaskablePPO are scored by exactly the same code).

Two views of one policy, because greedy success alone cannot tell a learned prompt from a lucky argmax
(a near-uniform policy whose argmax happens to spell a right answer scores 1 greedily):

* :func:`greedy_success`: the fraction of prompts the greedy (argmax) answer gets right;
* :func:`success_report`: greedy success, **sampled** success (the mean over ``k`` sampled answers per
  prompt, i.e. mean@k: the expected success of one sampled answer), **pass@k** (the fraction of prompts
  with at least one correct answer among the ``k``) and the per-prompt sampled rates (their minimum
  says whether *every* prompt is learned).

Both take grammar masks: a masked agent (GRPO with ``action_masks=True``, MaskablePPO) is given the
env's ``action_masks()`` at every step, as in training.

Any SB3-shaped model plugs in through :func:`sb3_predictor`: ``greedy_success(sb3_predictor(model), env)``
and ``success_report(sb3_predictor(model), env)``. The predictor decides the masks unless ``masked=`` is
passed: a model that trains with masks (its ``predict`` takes ``action_masks``, as MaskablePPO's does, or
its ``use_masks`` is True, as a masked GRPO model's is) is scored under them; any other unmasked. A
recurrent model (sb3-contrib's RecurrentPPO) gets its hidden state carried from step to step of each
episode and reset at each episode's start (``episode_start``), as ``evaluate_policy`` does in SB3."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rlvr_env.envs import TokenEnv
from rlvr_env.tasks.base import check_split
from rlvr_env.tasks.expression.prompt import Prompt

__all__ = [
    "BatchPredict",
    "MaskedPredict",
    "SB3Predictor",
    "SuccessReport",
    "pass_at_k_curve",
    "answer_correct",
    "as_token_env",
    "evaluation_prompts",
    "greedy_success",
    "sb3_predictor",
    "mean_return",
    "split_scores",
    "success_report",
]

#: Maps a batch of observations (N, obs_dim) to a batch of token ids (N,).
BatchPredict = Callable[[np.ndarray], np.ndarray]
#: ``predict(obs, masks, deterministic)``: observations (N, obs_dim), grammar masks (N, V) bool or None
#: (None when the evaluation is unmasked), greedy or sampled; returns token ids (N,). A sampling
#: predict owns its (seeded) randomness.
MaskedPredict = Callable[[np.ndarray, "np.ndarray | None", bool], np.ndarray]


def as_token_env(env: gym.Env) -> TokenEnv:
    """The :class:`TokenEnv` under any wrappers, or a ``TypeError`` saying the env is not an rlvr env."""
    inner = env.unwrapped
    if not isinstance(inner, TokenEnv):
        raise TypeError(
            f"{type(inner).__name__} is not an rlvr_env TokenEnv; success rates need a verifier"
        )
    return inner


def evaluation_prompts(
    env: gym.Env, split: str, n_prompts: int | None = None, seed: int = 0
) -> list[Prompt]:
    """The prompts an evaluation on ``split`` uses: all of them for a finite task (when ``n_prompts`` is
    None), else ``n_prompts`` drawn with a generator seeded by ``seed`` (the same list every call)."""
    check_split(split)
    task = as_token_env(env).task
    pool = task.prompts(split)
    if pool is not None and n_prompts is None:
        return list(pool)
    n = 256 if n_prompts is None else n_prompts
    if n < 1:
        raise ValueError(f"n_prompts={n_prompts!r} must be at least 1")
    rng = np.random.default_rng(seed)
    if pool is not None:
        idx = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        return [pool[int(i)] for i in np.sort(idx)]
    return [task.sample_prompt(rng, split) for _ in range(n)]


def greedy_success(
    predict: BatchPredict,
    env: gym.Env,
    split: str = "test",
    *,
    prompts: Sequence[Prompt] | None = None,
    n_prompts: int | None = None,
    seed: int = 0,
    masked: bool | None = None,
) -> float:
    """Fraction of ``prompts`` (default: :func:`evaluation_prompts`) that ``predict`` answers correctly.

    ``predict`` is a :data:`BatchPredict` (``obs -> actions``, which should be greedy; always
    unmasked) or an :class:`SB3Predictor` (``sb3_predictor(model)``, asked for greedy actions; a
    recurrent model's state is carried; masked as :func:`answer_correct` says). All episodes advance in
    lockstep: one ``predict`` call per token position for the whole batch.
    """
    if prompts is None:
        prompts = evaluation_prompts(env, split, n_prompts, seed)
    if isinstance(predict, SB3Predictor):
        return float(answer_correct(predict, env, prompts, deterministic=True, masked=masked).mean())
    if masked:
        raise ValueError(
            "masked=True needs a predict that takes the masks: pass sb3_predictor(model), or call "
            "answer_correct with a MaskedPredict"
        )
    batch_predict = predict
    return float(answer_correct(lambda o, m, d: batch_predict(o), env, prompts, deterministic=True).mean())


def mean_return(
    predict: Callable[[np.ndarray, np.ndarray | None], Any],
    env: gym.Env,
    n_episodes: int = 10,
    masks: Callable[[gym.Env], np.ndarray] | None = None,
) -> float:
    """The mean undiscounted return of ``n_episodes`` episodes of ``env`` (any Gymnasium env, not only an
    ``rlvr_env`` one) from the seeded resets ``1_000_000 + i``, acting with ``predict(obs, masks)`` (an
    action; greedy, for an evaluation), given ``masks(env)`` before every step when ``masks`` is given."""
    total = 0.0
    for i in range(n_episodes):
        obs, _ = env.reset(seed=1_000_000 + i)
        done = False
        while not done:
            action = predict(obs, None if masks is None else masks(env))
            obs, r, terminated, truncated, _ = env.step(int(action))
            total += float(r)
            done = terminated or truncated
    return total / n_episodes


def answer_correct(
    predict: MaskedPredict,
    env: gym.Env,
    prompts: Sequence[Prompt],
    *,
    deterministic: bool,
    masked: bool | None = None,
    repeats: int = 1,
) -> np.ndarray:
    """(len(prompts), repeats) bool: whether each of ``repeats`` answers to each prompt is correct.

    All episodes advance in lockstep: one ``predict`` call per token position for the whole batch.
    With ``masked``, ``predict`` gets each active episode's ``action_masks()`` (the env must offer it).
    ``masked=None`` (the default) leaves it to an :class:`SB3Predictor` (its :attr:`~SB3Predictor.masked`:
    a MaskablePPO is scored under its masks) and is unmasked for any other ``predict``.
    """
    base = as_token_env(env)
    if masked is None:
        masked = predict.masked if isinstance(predict, SB3Predictor) else False
    elif masked and isinstance(predict, SB3Predictor) and not predict.accepts_masks:
        raise ValueError(
            f"masked=True, but {type(predict.model).__name__}.predict takes no action_masks argument"
        )
    if not prompts:
        raise ValueError("no prompts to evaluate")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be a positive integer")
    if masked and not callable(getattr(base, "action_masks", None)):
        raise ValueError(f"masked=True, but {type(base).__name__} has no action_masks()")
    episodes = [p for p in prompts for _ in range(repeats)]
    if isinstance(predict, SB3Predictor):
        predict = predict.episodes(len(episodes))  # a fresh state per episode, for recurrent models
    correct = _answer_correct_vector(predict, base, episodes, deterministic, masked)
    return correct.reshape(len(prompts), repeats)


def _predict_rows(predict: MaskedPredict, obs: np.ndarray, masks: np.ndarray | None,
                  deterministic: bool, rows: np.ndarray) -> np.ndarray:
    """Actions (n,) for the episodes at ``rows`` (an :class:`_EpisodeState` is told which they are)."""
    if isinstance(predict, _EpisodeState):
        return predict.step(obs, masks, deterministic, rows)
    return np.asarray(predict(obs, masks, deterministic)).reshape(-1)


def _answer_correct_vector(predict: MaskedPredict, base: TokenEnv, episodes: list[Prompt],
                           deterministic: bool, masked: bool) -> np.ndarray:
    """:func:`answer_correct` in the native vector env (same task, observations, masks and verdicts as
    the single env; a lockstep test in tests/test_vector.py checks that), one row per episode."""
    from rlvr_env.vector import TokenVectorEnv

    kind = "features" if base.token_context is None else "tokens"  # same observation
    venv = TokenVectorEnv(base.task, len(episodes), split=base.split, autoreset_mode="Disabled",
                          observation=kind)
    obs, _ = venv.reset(options={"prompt": episodes})
    active = np.ones(len(episodes), dtype=bool)
    correct = np.zeros(len(episodes), dtype=bool)
    actions = np.zeros(len(episodes), dtype=np.int64)
    while active.any():
        idx = np.flatnonzero(active)
        masks = venv.action_masks()[idx] if masked else None
        actions[idx] = _predict_rows(predict, obs[idx], masks, deterministic, idx)
        obs, _, terminated, truncated, info = venv.step(actions)
        ended = active & (terminated | truncated)
        if ended.any():
            correct[ended] = info["correct"][ended]
            active &= ~ended
    return correct


def pass_at_k_curve(per_prompt_success: np.ndarray, n: int, ks: Sequence[int]) -> dict[int, float]:
    """Unbiased pass@k for each of ``ks`` from ``n`` samples per prompt whose per-prompt success rates
    are ``per_prompt_success`` (so c = rate * n correct): mean of 1 - C(n-c, k)/C(n, k), computed as
    the product prod_{i=n-c+1..n} (1 - k/i) (no overflow). ``ValueError`` for a k outside 1..n."""
    correct = np.rint(np.asarray(per_prompt_success, dtype=np.float64) * n).astype(np.int64)
    out: dict[int, float] = {}
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
            raise ValueError(f"k={k!r} must be an integer in 1..{n} (the samples per prompt)")
        # by_c[c] = prod_{i=n-c+1..n} (1 - k/i): the chance that k of n samples miss all c correct ones
        by_c = np.concatenate([[1.0], np.cumprod(1.0 - k / np.arange(n, 0, -1))])
        fail = np.where(n - correct < k, 0.0, by_c[correct])
        out[int(k)] = float(1.0 - fail.mean()) if len(correct) else 0.0
    return out


@dataclass(frozen=True)
class SuccessReport:
    """Greedy and sampled success of one policy on one list of prompts (see the module docstring)."""

    greedy: float  #: fraction of prompts whose greedy answer is correct
    sampled: float  #: mean over prompts of the fraction of k sampled answers that are correct (mean@k)
    pass_at_k: float  #: fraction of prompts with at least one correct answer among k samples
    k: int
    per_prompt_sampled: np.ndarray  #: (P,) each prompt's sampled success rate

    @property
    def min_prompt_sampled(self) -> float:
        """The worst prompt's sampled success (1.0 only if every prompt is learned)."""
        return float(self.per_prompt_sampled.min())

    def pass_at(self, ks: Sequence[int]) -> dict[int, float]:
        """The unbiased pass@k estimate (Chen et al. 2021, "Evaluating large language models trained
        on code", eq. 1) for each k <= :attr:`k` from the same ``k`` samples per prompt: the mean over
        prompts of 1 - C(n - c, k) / C(n, k), with n = :attr:`k` samples of which c are correct. It
        equals :attr:`pass_at_k` at k = n and :attr:`sampled` at k = 1."""
        return pass_at_k_curve(self.per_prompt_sampled, self.k, ks)

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {
            f"{prefix}greedy": self.greedy,
            f"{prefix}sampled": self.sampled,
            f"{prefix}pass@{self.k}": self.pass_at_k,
            f"{prefix}min_prompt_sampled": self.min_prompt_sampled,
        }


def split_scores(model: Any, k: int, n_prompts: int | None = None, prefix: str = "",
                 show: bool = False) -> dict[str, float]:
    """``{prefix}{split}_greedy / _sampled / _pass_at_k / _min_prompt_sampled / _prompts`` on both splits
    (held-out = the test split) and ``eval_k``, from ``model.success(split, k=k, n_prompts=n_prompts)``
    (a GRPO model's :meth:`agents.grpo.GRPO.success`: this evaluation, masks as in training), the keys of
    ``python -m agents.grpo --json``; ``show`` prints them."""
    out: dict[str, float] = {"eval_k": k}
    for split in ("train", "test"):
        rep = model.success(split, k=k, n_prompts=n_prompts)
        out.update({f"{prefix}{split}_greedy": rep.greedy, f"{prefix}{split}_sampled": rep.sampled,
                    f"{prefix}{split}_pass_at_k": rep.pass_at_k,
                    f"{prefix}{split}_min_prompt_sampled": rep.min_prompt_sampled,
                    f"{prefix}{split}_prompts": len(rep.per_prompt_sampled)})
        if show:
            print(f"{split} prompts ({len(rep.per_prompt_sampled)}"
                  f"{', grammar-masked' if model.masks_constrain else ''}): greedy success {rep.greedy:.3f}, "
                  f"sampled success (mean@{rep.k}) {rep.sampled:.3f}, pass@{rep.k} {rep.pass_at_k:.3f}, "
                  f"worst prompt's sampled success {rep.min_prompt_sampled:.3f}")
    return out


def success_report(
    predict: MaskedPredict,
    env: gym.Env,
    split: str = "test",
    *,
    k: int = 16,
    masked: bool | None = None,
    prompts: Sequence[Prompt] | None = None,
    n_prompts: int | None = None,
    seed: int = 0,
) -> SuccessReport:
    """Greedy success, sampled success (mean@k), pass@k and per-prompt sampled success of ``predict``
    on ``prompts`` (default: :func:`evaluation_prompts` of ``split``); ``masked`` as
    :func:`answer_correct` takes it."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be a positive integer")
    if prompts is None:
        prompts = evaluation_prompts(env, split, n_prompts, seed)
    greedy = answer_correct(predict, env, prompts, deterministic=True, masked=masked)[:, 0]
    sampled = answer_correct(predict, env, prompts, deterministic=False, masked=masked, repeats=k)
    per_prompt = sampled.mean(axis=1)
    return SuccessReport(
        greedy=float(greedy.mean()),
        sampled=float(per_prompt.mean()),
        pass_at_k=float(sampled.any(axis=1).mean()),
        k=k,
        per_prompt_sampled=per_prompt,
    )


class SB3Predictor:
    """A :data:`MaskedPredict` for any model with SB3's ``predict(obs, state, episode_start,
    deterministic)`` (PPO, A2C, DQN, the GRPO agent, sb3-contrib's RecurrentPPO) or sb3-contrib's
    ``predict(..., action_masks=...)`` (MaskablePPO): masks are passed when the evaluation is masked.

    ``masked`` says whether the evaluators mask when their own ``masked`` is None (the default). None
    here: the model's ``use_masks`` if it is a bool (the GRPO agent: as it trains), else whether its
    ``predict`` takes ``action_masks`` (MaskablePPO: scored as it trains and as ``evaluate_policy``
    of sb3-contrib's ``maskable`` package scores it; PPO, A2C, DQN: unmasked).

    Called as ``predictor(obs, masks=None, deterministic=True)`` it is state-less. The evaluators
    (:func:`answer_correct`, so :func:`greedy_success` and :func:`success_report`) run it per batch of
    episodes instead: a model that returns a state (RecurrentPPO's LSTM ``(h, c)``, each
    ``(layers, n_envs, hidden)``) gets each episode's own state back on its next step, and
    ``episode_start`` True on its first step, so the hidden state restarts with every episode.
    Sampling uses the model's own generator (torch's for SB3 models: seed it with ``set_random_seed``
    for a repeatable score)."""

    def __init__(self, model: object, masked: bool | None = None) -> None:
        predict = getattr(model, "predict", None)
        if not callable(predict):
            raise TypeError(f"{type(model).__name__} has no predict() method")
        if masked is not None and not isinstance(masked, bool):
            raise ValueError(f"masked={masked!r} must be True, False or None (decided by the model)")
        self.model = model
        self._predict = predict
        #: whether ``predict`` takes an ``action_masks`` argument
        self.accepts_masks = _takes_action_masks(predict)
        if masked and not self.accepts_masks:
            raise ValueError(
                f"masked=True, but {type(model).__name__}.predict takes no action_masks argument"
            )
        use_masks = getattr(model, "use_masks", None)
        if masked is None:
            masked = use_masks if isinstance(use_masks, bool) else self.accepts_masks
        #: whether the evaluators mask this model's answers when not told (their ``masked=None``)
        self.masked: bool = masked

    def __call__(self, obs: np.ndarray, masks: np.ndarray | None = None,
                 deterministic: bool = True) -> np.ndarray:
        return self.predict(obs, masks, deterministic, None, None)[0]

    def predict(self, obs: np.ndarray, masks: np.ndarray | None, deterministic: bool,
                state: object, episode_start: np.ndarray | None) -> tuple[np.ndarray, object]:
        """One call of the model's ``predict``: (actions (n,), the state it returns)."""
        kwargs: dict[str, object] = {"deterministic": deterministic}
        if state is not None or episode_start is not None:
            kwargs.update(state=state, episode_start=episode_start)
        if masks is not None:
            kwargs["action_masks"] = masks
        actions, new_state = self._predict(obs, **kwargs)
        return np.asarray(actions).reshape(-1), new_state

    def episodes(self, n: int) -> _EpisodeState:
        """A predictor for ``n`` episodes that start now (it carries their states)."""
        return _EpisodeState(self, n)


class _EpisodeState:
    """The per-episode recurrent state of one :class:`SB3Predictor` over a batch of ``n`` episodes."""

    def __init__(self, predictor: SB3Predictor, n: int) -> None:
        self.predictor = predictor
        self.started = np.zeros(n, dtype=bool)  # (n,) whether the episode took its first step
        self.state: tuple[np.ndarray, ...] | None = None  # each (layers, n, hidden) once known

    def __call__(self, obs: np.ndarray, masks: np.ndarray | None, deterministic: bool) -> np.ndarray:
        return self.step(obs, masks, deterministic, np.arange(len(obs)))

    def step(self, obs: np.ndarray, masks: np.ndarray | None, deterministic: bool,
             rows: np.ndarray) -> np.ndarray:
        """Actions for the episodes ``rows`` (their observations ``obs``), carrying their states."""
        state = None if self.state is None else tuple(s[:, rows] for s in self.state)
        actions, new_state = self.predictor.predict(obs, masks, deterministic, state,
                                                    ~self.started[rows])
        self.started[rows] = True
        if new_state is not None:
            parts = ((np.asarray(new_state),) if isinstance(new_state, np.ndarray)
                     else tuple(np.asarray(s) for s in new_state))
            if self.state is None:  # the first call has every episode: take the layout from it
                self.state = tuple(np.zeros((s.shape[0], len(self.started), *s.shape[2:]), s.dtype)
                                   for s in parts)
            for full, part in zip(self.state, parts):
                full[:, rows] = part
        return actions


def _takes_action_masks(predict: Callable[..., object]) -> bool:
    """Whether ``predict`` has a parameter named ``action_masks`` (sb3-contrib's MaskablePPO does)."""
    try:
        return "action_masks" in inspect.signature(predict).parameters
    except (TypeError, ValueError):  # a callable without an inspectable signature
        return False


def sb3_predictor(model: object, masked: bool | None = None) -> SB3Predictor:
    """:class:`SB3Predictor` of ``model``: the evaluators' adapter for any SB3-shaped model (``masked``:
    see :class:`SB3Predictor`; None scores a MaskablePPO under its masks, a PPO without)."""
    return SB3Predictor(model, masked)
