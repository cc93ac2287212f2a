"""Gymnasium environments in which a policy emits an answer token by token and a verifier pays for it."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import logger, spaces
from gymnasium.error import ResetNeeded

from rlvr_env.tasks.expression.batch_verify import TokenTable
from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.base import Task, check_split
from rlvr_env.token_obs import TokenContext, check_observation
from rlvr_env.rewards import RewardWeights, Verdict

__all__ = ["TokenEnv", "ArithmeticEnv", "UnsupportedRenderMode", "check_action", "check_render_mode",
           "warn_no_render_mode"]


class UnsupportedRenderMode(ValueError, TypeError):
    """A ``render_mode`` the env cannot draw. A ``ValueError`` (a bad value of a kwarg) and a ``TypeError``
    (what an env constructor without a ``render_mode`` parameter raises), so tools that ask for a mode
    and retry without it on ``TypeError``, as SB3's ``make_vec_env`` does with ``"rgb_array"``, build
    the env without a render mode (docs/envs.md, "Rendering")."""


def check_render_mode(render_mode: object, modes: list[str]) -> None:
    """Raise :class:`UnsupportedRenderMode` naming ``render_mode`` unless it is None or one of ``modes``."""
    if render_mode is not None and render_mode not in modes:
        raise UnsupportedRenderMode(
            f"render_mode={render_mode!r} is not supported; choose one of {modes} or None (the envs are "
            "text and draw no frames)"
        )


def check_action(action: object, n: int) -> int:
    """Return ``action`` as a Python int in ``[0, n)`` or raise naming the value and the rule.

    Accepts what ``gymnasium.spaces.Discrete(n).contains`` accepts: a Python or NumPy integer, or a
    0-d integer array. Booleans, floats and arrays of any other shape are refused.
    """
    if type(action) is int:  # the common case first: this runs on every step
        a = action
    elif isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
        a = int(action)
    elif isinstance(action, np.ndarray) and np.issubdtype(action.dtype, np.integer):
        if action.shape != ():
            raise ValueError(
                f"action {action!r} has shape {action.shape}; a single token id (shape ()) is expected"
            )
        a = int(action)
    else:
        raise TypeError(
            f"action {action!r} of type {type(action).__name__} is not a token id; "
            f"expected an integer in [0, {n})"
        )
    if not 0 <= a < n:
        raise ValueError(f"action {a} is outside the action space Discrete({n}): valid ids are 0..{n - 1}")
    return a


def warn_no_render_mode(env: object) -> None:
    """Warn that ``render()`` was called on an env built without a render mode (nothing is drawn)."""
    spec = getattr(env, "spec", None)
    name = spec.id if spec is not None else type(env).__name__
    logger.warn(
        f"render() was called on {name} without a render mode, so nothing is rendered; build the env "
        f"with render_mode='ansi' (e.g. gym.make({name!r}, render_mode='ansi')) to get text"
    )


class TokenEnv(gym.Env[np.ndarray, np.int64]):
    """A token-emission environment over a :class:`~rlvr_env.tasks.base.Task`.

    Generic core of every ``rlvr/*`` environment: the task supplies prompts, vocabulary, grammar and
    verifier; this class supplies the Gymnasium protocol (spaces, seeding, prompt replay, termination
    vs truncation, rendering, input validation). See :class:`ArithmeticEnv` for the full documentation
    of the behaviour, which every task shares.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task: Task,
        *,
        split: str = "train",
        accuracy_weight: float = 1.0,
        format_weight: float = 0.1,
        render_mode: str | None = None,
        observation: str = "features",
    ) -> None:
        if not isinstance(split, str):
            raise ValueError(f"split={split!r} must be a string, one of ('train', 'test')")
        check_split(split)
        check_observation(observation)
        check_render_mode(render_mode, self.metadata["render_modes"])
        # The batch verifier's reading of the vocabulary; refuses tokens that would read differently
        # token by token and as text (e.g. "", " ", "2+3"), so that every env reads answers one way.
        TokenTable.from_vocab(task.vocab, task.eos_id)
        self.task = task
        self.split = split
        self.reward_weights = RewardWeights(accuracy=accuracy_weight, format=format_weight)
        self.render_mode = render_mode

        vocab_size = len(task.vocab)
        self._vocab_size = vocab_size
        self._prefix_offset = task.prompt_dim
        obs_dim = task.prompt_dim + task.max_length * vocab_size
        self.observation_space = spaces.Box(0.0, 1.0, shape=(obs_dim,), dtype=np.float32)
        self.action_space = spaces.Discrete(vocab_size)
        #: Named slices of the observation vector (prompt segments, then ``"prefix"``: one one-hot row
        #: of ``len(vocab)`` per answer position, all zeros where no token was emitted yet).
        self.obs_layout: dict[str, slice] = {
            **task.prompt_layout,
            "prefix": slice(self._prefix_offset, obs_dim),
        }
        self._obs = np.zeros(obs_dim, dtype=np.float32)
        #: With ``observation="tokens"``: the builder of the token-context rows (``rlvr_env.token_obs``),
        #: which then replace the features above (space, layout and buffer).
        self.token_context: TokenContext | None = None
        if observation == "tokens":
            self.token_context = ctx = TokenContext(task)
            self.observation_space = ctx.space
            self.obs_layout = ctx.layout
            self._prefix_offset = ctx.prompt_width
            self._obs = np.zeros(ctx.length, dtype=np.int64)

        self._prompt: Any = None  # the task's prompt value (None before the first reset)
        self._tokens: list[int] = []
        self._done = False

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options={options!r} must be a dict or None")
        if options and "prompt" in options:
            unknown = set(options) - {"prompt"}
            if unknown:
                raise ValueError(f"unknown reset options {sorted(unknown)}; only 'prompt' is accepted")
            prompt = self.task.validate_prompt(options["prompt"])
        else:
            if options:
                raise ValueError(f"unknown reset options {sorted(options)}; only 'prompt' is accepted")
            prompt = self.task.sample_prompt(self.np_random, self.split)
        self._prompt = prompt
        self._tokens = []
        self._done = False
        self._obs[:] = 0
        ctx = self.token_context
        self._obs[: self._prefix_offset] = (self.task if ctx is None else ctx).encode_prompt(prompt)
        return self._obs.copy(), {"prompt": prompt, "split": self.task.split_of(prompt)}

    def step(
        self, action: object
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._prompt is None:
            raise ResetNeeded("step() was called before reset(); call reset() to draw a prompt first")
        if self._done:
            raise ResetNeeded("step() was called after the episode ended; call reset() to start a new one")
        token = check_action(action, self._vocab_size)
        position = len(self._tokens)
        if self.token_context is None:
            self._obs[self._prefix_offset + position * self._vocab_size + token] = 1.0
        else:  # the token context: the answer's next position holds the token's context id
            self._obs[self._prefix_offset + position] = self.token_context.answer_offset + token
        self._tokens.append(token)

        task = self.task
        terminated = truncated = False
        if task.eos_id is not None and token == task.eos_id:
            terminated = True
        elif len(self._tokens) >= task.max_length:
            # Fixed-length tasks end after max_length tokens; EOS tasks that never emitted EOS are cut off.
            terminated = task.eos_id is None
            truncated = not terminated
        if not (terminated or truncated):
            return self._obs.copy(), 0.0, False, False, {}

        self._done = True
        verdict = task.score(self._prompt, self._tokens, self.reward_weights, truncated=truncated)
        return self._obs.copy(), float(verdict.reward), terminated, truncated, self._final_info(verdict)

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: the prompt and the answer so far. Without a render mode it warns
        (through ``gymnasium.logger``, as Gymnasium's own environments do) and returns None."""
        if self.render_mode != "ansi":
            warn_no_render_mode(self)
            return None
        if self._prompt is None:
            return "(no episode: call reset())"
        answer = " ".join(self.task.vocab[t] for t in self._tokens)
        status = " [done]" if self._done else ""
        return f"{self.task.render_prompt(self._prompt)} | answer: {answer}{status}"

    # -- helpers ----------------------------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        """(V,) bool mask of tokens that keep the answer well-formed (sb3-contrib MaskablePPO reads it)."""
        if self._prompt is None:
            raise ResetNeeded("action_masks() was called before reset()")
        return self.task.action_mask(self._prompt, self._tokens)

    @property
    def prompt(self) -> Any:
        """The current episode's prompt, a value of the task's prompt type (None before the first
        reset)."""
        return self._prompt

    def _final_info(self, verdict: Verdict) -> dict[str, Any]:
        return {
            "prompt": self._prompt,
            "reward_parts": dict(verdict.parts),
            "expression": verdict.expression,
            "value": verdict.value,
            "reason": verdict.reason,
            "correct": verdict.correct,
            "well_formed": verdict.well_formed,
            "length": len(self._tokens),
        }


class ArithmeticEnv(TokenEnv):
    """
    ## Description

    The lesson's RLVR toy as a Gymnasium environment. A prompt gives three numbers, a permutation of
    2, 3 and 5, and a target. The policy writes an arithmetic expression one token at a time; after the
    fifth token a verifier program evaluates it with real operator precedence (``*`` before ``+``) and
    pays the reward. The 24 well-formed answers take the values 10, 11, 13, 17 and 30, which are the
    targets; 17 (``2+3*5``) is hit by only 4 of the 24, 10 and 30 by 6 each.

    ## Action Space

    ``Discrete(5)``: token ids ``0: "2"``, ``1: "3"``, ``2: "5"``, ``3: "+"``, ``4: "*"``.

    ## Observation Space

    ``Box(0, 1, (39,), float32)``, one-hot segments (named in ``env.unwrapped.obs_layout``):

    | Index | Segment | Meaning                                                                  |
    |-------|---------|--------------------------------------------------------------------------|
    | 0-4   | target  | one-hot of the target among (10, 11, 13, 17, 30)                         |
    | 5-13  | numbers | for each of the 3 prompt slots, one-hot of its number among (2, 3, 5)    |
    | 14-38 | prefix  | per answer position, one-hot of the token emitted there (zeros if none)  |

    ## Rewards

    Zero on every step but the last. On the last step the reward is
    ``accuracy_weight * correct + format_weight * well_formed`` (defaults 1.0 and 0.1, so 1.1, 0.1 or
    0.0). The final ``info`` carries the weighted parts in ``info["reward_parts"]`` (they sum to the
    reward), the decoded ``"expression"``, its exact ``"value"`` (a ``Fraction``, None if it does not
    parse), the ``"reason"`` it is wrong (None when correct), ``"correct"``, ``"well_formed"`` and
    ``"length"`` in tokens. The Kimi k1.5 length term is a group-level function,
    :func:`rlvr_env.length_reward`, that an agent applies to a finished group; it is not in this reward.

    ## Verifier

    :func:`rlvr_env.verify` parses (never ``eval``) the decoded text: numbers, ``+`` and ``*`` only,
    each of 2, 3, 5 exactly once, no parentheses. A number token is one number: two adjacent number
    tokens are two numbers side by side (the expression shows them apart, ``"2 3+5*"``), which the
    grammar rejects; they never join into a literal such as 23. The same rule holds in every task and
    in the vector env and batch verifier.

    ## Starting State

    ``reset`` draws a prompt uniformly from the split with ``self.np_random``, and puts it in
    ``info["prompt"]`` (a hashable :class:`rlvr_env.Prompt`). ``reset(options={"prompt": p})`` replays
    exactly prompt ``p`` (a ``Prompt`` or a ``(numbers, target)`` pair; any valid prompt of either split),
    which is how a GRPO agent runs one prompt G times. An invalid prompt raises ``ValueError``.

    ## Action Masks

    ``action_masks()`` ((5,) bool, sb3-contrib's MaskablePPO reads it) allows every token by default:
    ``rlvr/Arithmetic-v0`` has no grammar mask, and every committed Arithmetic result was made so.
    ``grammar_mask=True`` makes it the grammar mask: only the tokens that keep the answer a prefix of a
    well-formed one (a number not used yet at positions 1, 3, 5, an operator at 2 and 4; a prefix an
    unmasked agent already broke is offered every token). It is an opt-in keyword, not a new default,
    because a masked agent sees a different env: results with and without it are not compared (the
    env kwargs are part of every benchmark run's spec). Masks never change what is paid.

    ## Episode End

    Terminated after the fifth token, always. Never truncated (the answer length is fixed). Calling
    ``step`` after the end, or before the first ``reset``, raises ``gymnasium.error.ResetNeeded``.

    ## Splits

    30 prompts (6 number orders x 5 targets). ``split="test"`` holds out 10 (order, target) pairs, each
    target with 2 of its 6 orders, in a Latin-square pattern so every order is also seen in training
    (with other targets). Because tokens name values, a correct answer depends only on the target;
    the split therefore tests whether a policy reads the target and is invariant to the order in which
    the prompt lists its numbers, a combination it never saw rewarded. A lookup-table policy keyed on
    the whole observation cannot pass it (held-out observations are new rows); the tabular policy in
    ``agents`` keys on the segments in ``task.tabular_segments`` (target and prefix), which makes it
    order-invariant by construction, while an MLP has to learn the invariance.

    ## Arguments

    >>> import gymnasium as gym
    >>> import rlvr_env
    >>> env = gym.make("rlvr/Arithmetic-v0", split="train", render_mode="ansi")
    >>> obs, info = env.reset(seed=0)
    >>> info["prompt"]
    Prompt(numbers=(3, 2, 5), target=30)
    >>> for token in (2, 4, 0, 4, 1):  # "5*2*3"
    ...     obs, reward, terminated, truncated, info = env.step(token)
    >>> reward, terminated, truncated, info["expression"], info["reward_parts"]
    (1.1, True, False, '5*2*3', {'accuracy': 1.0, 'format': 0.1})
    >>> env.render()
    'numbers: 3 2 5 | target: 30 | answer: 5 * 2 * 3 [done]'
    >>> masked = gym.make("rlvr/Arithmetic-v0", grammar_mask=True)
    >>> _ = masked.reset(seed=0)
    >>> _ = masked.step(2)  # "5": next an operator
    >>> masked.unwrapped.action_masks().tolist()
    [False, False, False, True, True]
    >>> _ = masked.step(4)  # "5*": next 2 or 3
    >>> masked.unwrapped.action_masks().tolist()
    [True, True, False, False, False]

    | Parameter         | Type          | Default   | Description                                         |
    |-------------------|---------------|-----------|-----------------------------------------------------|
    | `split`           | str           | `"train"` | `"train"` (20 prompts) or `"test"` (10 held out)     |
    | `accuracy_weight` | float         | `1.0`     | reward for a correct answer (finite)                 |
    | `format_weight`   | float         | `0.1`     | reward for a well-formed answer (finite)             |
    | `render_mode`     | str or None   | `None`    | `"ansi"` returns the prompt and the answer so far    |
    | `grammar_mask`    | bool          | `False`   | `action_masks()` is the grammar mask (else all True) |
    | `observation`     | str           | `"features"` | or `"tokens"`: prompt digits + answer as token ids |
    |                   |               |           | (:mod:`rlvr_env.token_obs`)                          |

    ## Version History

    * v0: initial version (the lesson's task, verifier and split). ``action_masks()`` allows every
      token unless ``grammar_mask=True`` (added later as an opt-in keyword; the default is unchanged).
      The ``observation="tokens"`` option was added later without a version bump: the default
      observation is unchanged.
    """

    def __init__(
        self,
        split: str = "train",
        accuracy_weight: float = 1.0,
        format_weight: float = 0.1,
        render_mode: str | None = None,
        grammar_mask: bool = False,
        observation: str = "features",
    ) -> None:
        super().__init__(
            ArithmeticTask(grammar_mask),
            split=split,
            accuracy_weight=accuracy_weight,
            format_weight=format_weight,
            render_mode=render_mode,
            observation=observation,
        )
