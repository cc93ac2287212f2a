"""The arithmetic-expression family's env ids: ``rlvr/Arithmetic-v0`` (token env and native vector env) and
``rlvr/ArithmeticText-v0`` (text env), registered through :func:`rlvr_env.register_envs` when ``rlvr_env``
is imported. :class:`ArithmeticEnv`, :class:`ArithmeticVectorEnv` and :class:`ArithmeticTextEnv` are the
same envs built from keywords alone, ``ArithmeticEnv(grammar_mask=True)``; they hold the documentation."""

from __future__ import annotations

from typing import Any

from rlvr_env.envs import TokenEnv
from rlvr_env.registration import env_arguments, register_envs
from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.text_env import TextEnv
from rlvr_env.vector import TokenVectorEnv

__all__ = ["ArithmeticEnv", "ArithmeticTextEnv", "ArithmeticVectorEnv"]


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

    def __init__(self, **kwargs: Any) -> None:
        task, env_kwargs = env_arguments(TokenEnv, ArithmeticTask, None, kwargs)
        super().__init__(task, **env_kwargs)


class ArithmeticVectorEnv(TokenVectorEnv):
    """``rlvr/Arithmetic-v0`` as a native vector env (see :class:`ArithmeticEnv` for the
    task and :class:`TokenVectorEnv` for the vector protocol).

    >>> import gymnasium as gym, numpy as np
    >>> import rlvr_env
    >>> envs = gym.make_vec("rlvr/Arithmetic-v0", num_envs=2, vectorization_mode="vector_entry_point")
    >>> obs, info = envs.reset(options={"prompt": ((2, 3, 5), 17)})  # a group of 2 on one prompt
    >>> for tokens in ([0, 2], [3, 3], [1, 1], [4, 3], [2, 0]):  # "2+3*5" and "5+3+2"
    ...     obs, rewards, terminated, truncated, info = envs.step(np.array(tokens))
    >>> rewards.tolist(), terminated.tolist(), info["final_info"]["correct"].tolist()
    ([1.1, 0.1], [True, True], [True, False])
    """

    def __init__(self, num_envs: int = 1, **kwargs: Any) -> None:
        task, env_kwargs = env_arguments(TokenVectorEnv, ArithmeticTask, None, kwargs)
        super().__init__(task, num_envs, **env_kwargs)


class ArithmeticTextEnv(TextEnv):
    """``rlvr/ArithmeticText-v0``: the lesson's task (see :class:`ArithmeticEnv`) as a one-step text env
    (see :class:`rlvr_env.text_env.TextEnv`)."""

    def __init__(self, **kwargs: Any) -> None:
        task, env_kwargs = env_arguments(TextEnv, ArithmeticTask, None, kwargs)
        super().__init__(task, **env_kwargs)


register_envs("rlvr/Arithmetic-v0", ArithmeticTask, text_id="rlvr/ArithmeticText-v0",
              envs=(ArithmeticEnv, ArithmeticVectorEnv, ArithmeticTextEnv))
