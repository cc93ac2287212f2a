"""Countdown's env ids: ``rlvr/Countdown-v0`` (token env and native vector env) and
``rlvr/CountdownText-v0`` (text env), registered through :func:`rlvr_env.register_envs` when ``rlvr_env``
is imported, with the family's keywords declared once (:func:`countdown_task`, :func:`countdown_keywords`).
:class:`CountdownEnv`, :class:`CountdownVectorEnv` and :class:`CountdownTextEnv` are the same envs built
from keywords alone (``CountdownEnv(n_numbers=3)``); they hold the documentation."""

from __future__ import annotations

from typing import Any

from rlvr_env.envs import TokenEnv
from rlvr_env.registration import env_arguments, register_envs
from rlvr_env.tasks.countdown.settings import CountdownSettings, settings_of
from rlvr_env.tasks.countdown.task import OBSERVATIONS, CountdownTask
from rlvr_env.tasks.expression.task import check_number_tokens
from rlvr_env.tasks.registry import register_task
from rlvr_env.text_env import TextEnv
from rlvr_env.vector import TokenVectorEnv

__all__ = ["CountdownEnv", "CountdownTextEnv", "CountdownVectorEnv", "countdown_keywords", "countdown_task",
           "split_observation"]

ENV_ID = "rlvr/Countdown-v0"


def split_observation(observation: object, task_kinds: tuple[str, ...] = OBSERVATIONS) -> tuple[str, str]:
    """Countdown's ``observation`` keyword as (the task's prompt features, the env's observation kind):
    ``"tokens"`` reads no task features (the task keeps its plain ``"bits"``), any other value is the
    task's feature set with the ``"features"`` observation; a value that is neither one of
    ``task_kinds`` nor ``"tokens"`` is a ``ValueError`` listing all."""
    valid = (*task_kinds, "tokens")
    if not isinstance(observation, str) or observation not in valid:
        raise ValueError(f"observation={observation!r} is not one of {valid}")
    return ("bits", "tokens") if observation == "tokens" else (observation, "features")


def countdown_task(settings: CountdownSettings | None = None, *, features: str = "bits",
                   solution_stats: bool = False, number_tokens: str = "digits",
                   **keywords: Any) -> CountdownTask:
    """The task of ``gym.make("rlvr/Countdown-v0", ...)``: the setting as an object or as its fields'
    keywords (``n_numbers=3``), the prompt ``features`` (what :func:`countdown_keywords` reads from the
    ``observation`` keyword), ``solution_stats`` and ``number_tokens``."""
    return CountdownTask(settings_of(settings, keywords, ENV_ID), observation=features,
                         solution_stats=solution_stats, number_tokens=number_tokens)


def countdown_keywords(kwargs: dict[str, Any], env_class: type) -> dict[str, Any]:
    """Countdown's ``observation`` names the task's features (``"bits"``, ``"relations"``) or the token
    context (``"tokens"``): split it between the task and the token envs (the text env observes text).
    ``number_tokens`` is checked against the observation (``"whole"`` needs ``"tokens"``)."""
    if env_class is TextEnv:
        return kwargs
    observation = kwargs.pop("observation", "bits")
    features, env_observation = split_observation(observation)
    check_number_tokens(kwargs.get("number_tokens", "digits"), env_observation)
    return {**kwargs, "features": features, "observation": env_observation}


class CountdownEnv(TokenEnv):
    """
    ## Description

    Countdown-N, the numbers game: a prompt gives N numbers and a target; the policy writes an infix
    expression one token at a time, with ``+ - * /``, parentheses and real precedence, that must
    evaluate exactly (over the rationals) to the target, using each given number at most once. The
    answer has variable length and ends with an end-of-sequence token. Prompts are generated: N numbers
    are drawn from ``number_range``, a random expression tree over all of them is built, and its value
    becomes the target, so every prompt is solvable (the generating expression is stored in
    ``info["prompt"].info()["solution"]``). Difficulty grows with N, the ranges, the operator set and
    a tighter ``max_length``.

    ## Action Space

    ``Discrete(V)``. With the defaults (N = 4, all operators, parentheses), V = 11:
    ``0-3: "n0".."n3"`` (the prompt's numbers by slot), ``4: "+"``, ``5: "-"``, ``6: "*"``, ``7: "/"``,
    ``8: "("``, ``9: ")"``, ``10: "<eos>"``. Number tokens name slots, not values, so the vocabulary does
    not grow with ``number_range``; ``env.unwrapped.task.vocab`` lists the tokens for any setting.
    ``env.unwrapped.action_masks()`` gives the grammar mask that sb3-contrib's ``MaskablePPO`` reads.

    ## Observation Space

    ``Box(0, 1, (prompt_dim + max_length * V,), float32)``; 160 with the defaults. Segments are named in
    ``env.unwrapped.obs_layout`` (defaults in brackets):

    | Index (defaults) | Segment     | Meaning                                                           |
    |------------------|-------------|-------------------------------------------------------------------|
    | 0-3              | numbers     | slot k: ``(n_k - low) / (high - low)`` for ``number_range``       |
    | 4-19             | number_bits | slot k: ``n_k - low`` in binary, least significant bit first (4)  |
    | 20               | target      | ``(target - low) / (high - low)`` for ``target_range``            |
    | 21-27            | target_bits | ``target - low`` in binary, least significant bit first (7)       |
    | 28-159           | prefix      | per answer position (12), one-hot of the token emitted there (11) |

    The scaled value gives a network the magnitude; the exact binary code makes every prompt
    distinguishable, so no two prompts share an observation.

    ## Rewards

    Zero on every step but the last. When the episode ends with EOS the reward is
    ``accuracy_weight * correct + format_weight * well_formed`` (defaults 1.0 and 0.1). A truncated
    answer (no EOS within ``max_length``) earns 0: the format reward is withheld too. The final
    ``info`` carries ``"reward_parts"``, ``"expression"`` (with the numbers written out), ``"value"``,
    ``"reason"``, ``"correct"``, ``"well_formed"`` and ``"length"`` (tokens, EOS included).

    ## Verifier

    :func:`rlvr_env.verify` on the decoded text (slot tokens become their numbers' digits), with the
    grammar ``Grammar(operators, parentheses, number_use, integer_division)``. No ``eval``; division by
    zero, or an inexact quotient under ``integer_division=True``, makes the answer not well-formed.
    Using a slot twice uses its number twice, which breaks the number-use rule (unless the prompt holds
    that number twice). A slot token is one number: two adjacent slot tokens are not well-formed (the
    expression shows them apart, ``"1 2"``), so ``n0 n1`` with numbers (1, 2, 12) never reads as the
    prompt's 12, unmasked or not.

    ``number_use="at_most_once"`` is the default because it is the game's rule, and because it makes
    answer length a real choice (a two-number answer can be correct), which is what the Kimi k1.5 length
    term acts on; every prompt is also solvable under ``"exactly_once"`` (the stored solution uses all N).

    ## Starting State

    ``reset`` draws a prompt of the split with ``self.np_random`` and puts it in ``info["prompt"]``
    (a hashable :class:`rlvr_env.Prompt` whose ``info()`` holds ``solution``, ``solution_tokens`` and
    ``solution_length``; with ``solution_stats=True`` also ``num_solutions`` and ``shortest_length``,
    found by enumerating every expression, N <= 4 only). ``reset(options={"prompt": p})`` replays any
    prompt of this setting (a ``Prompt`` or a ``(numbers, target)`` pair within the ranges; a replayed
    pair is not checked for solvability).

    ## Episode End

    Terminated when the policy emits ``"<eos>"``. Truncated after ``max_length`` tokens without EOS
    (default ``4 N - 4``: the longest minimal-parenthesis expression over N numbers plus EOS). Calling
    ``step`` after the end, or before the first ``reset``, raises ``gymnasium.error.ResetNeeded``.

    ## Splits

    A prompt's split is a fixed hash of its *sorted number multiset*: one multiset in five is held
    out (``split="test"``), whatever its target and number order. Held-out prompts therefore combine
    numbers the policy has never been trained with, so a test score measures arithmetic that
    generalises, not memorised number sets. ``rlvr_env.tasks.countdown.multiset_hash`` is the rule.

    ## Arguments

    >>> import gymnasium as gym
    >>> import rlvr_env
    >>> env = gym.make("rlvr/Countdown-v0", n_numbers=3, render_mode="ansi")
    >>> obs, info = env.reset(seed=5)
    >>> info["prompt"], info["prompt"].info()["solution"]
    (Prompt(numbers=(7, 9, 1), target=70), '(1+9)*7')
    >>> for token in (0, 5, 7, 1, 3, 2, 8, 9):  # n0 * ( n1 + n2 ) <eos>
    ...     obs, reward, terminated, truncated, info = env.step(token)
    >>> reward, terminated, truncated, info["expression"], info["reward_parts"]
    (1.1, True, False, '7*(9+1)', {'accuracy': 1.0, 'format': 0.1})
    >>> env.render()
    'numbers: 7 9 1 | target: 70 | answer: n0 * ( n1 + n2 ) <eos> [done]'

    | Parameter          | Type        | Default          | Description                                   |
    |--------------------|-------------|------------------|-----------------------------------------------|
    | `n_numbers`        | int         | `4`              | N, numbers per prompt (2 to 8)                |
    | `number_range`     | (int, int)  | `(1, 10)`        | inclusive range of the numbers (>= 1)         |
    | `target_range`     | (int, int)  | `(1, 100)`       | inclusive range of the targets                |
    | `operators`        | str         | `"+-*/"`         | allowed operators, a subset of ``+-*/``       |
    | `parentheses`      | bool        | `True`           | whether ``(`` and ``)`` are tokens            |
    | `number_use`       | str         | `"at_most_once"` | or `"exactly_once"`                           |
    | `integer_division` | bool        | `False`          | every ``/`` must divide exactly (integers)    |
    | `max_length`       | int or None | `None`           | tokens incl. EOS; None means ``4 N - 4``      |
    | `settings`         | settings    | `None`           | the rows above as one ``CountdownSettings``   |
    | `solution_stats`   | bool        | `False`          | add solution count / shortest length (N <= 4) |
    | `observation`      | str         | `"bits"`         | `"relations"` appends one-hot numbers/target  |
    |                    |             |                  | and pair residuals (``CountdownFeatures._relations``) |
    |                    |             |                  | `"tokens"`: prompt digits + answer as token ids   |
    |                    |             |                  | (:mod:`rlvr_env.token_obs`)                       |
    | `number_tokens`    | str         | `"digits"`       | with `"tokens"`: `"whole"` writes each number |
    |                    |             |                  | and target as one token (``[70]``), <= 999    |
    | `split`            | str         | `"train"`        | `"train"` or `"test"` (held-out multisets)    |
    | `accuracy_weight`  | float       | `1.0`            | reward for a correct answer                   |
    | `format_weight`    | float       | `0.1`            | reward for a well-formed answer               |
    | `render_mode`      | str or None | `None`           | `"ansi"` returns the prompt and the answer    |

    ``gym.make_vec("rlvr/Countdown-v0", num_envs=n, vectorization_mode="vector_entry_point")`` builds
    the native :class:`CountdownVectorEnv` with the same arguments.

    ## Version History

    * v0: initial version. ``observation="tokens"`` was added later without a version bump: the
      default observation is unchanged.
    """

    def __init__(self, **kwargs: Any) -> None:
        # The task's keywords (n_numbers, number_range, ...) are CountdownSettings' fields, declared there.
        task, env_kwargs = env_arguments(TokenEnv, countdown_task, countdown_keywords, kwargs)
        super().__init__(task, **env_kwargs)


class CountdownVectorEnv(TokenVectorEnv):
    """``rlvr/Countdown-v0`` as a native vector env (see :class:`rlvr_env.countdown_env.CountdownEnv` for
    the task and its arguments, :class:`TokenVectorEnv` for the vector protocol).

    >>> import gymnasium as gym, numpy as np
    >>> import rlvr_env
    >>> envs = gym.make_vec("rlvr/Countdown-v0", num_envs=3, vectorization_mode="vector_entry_point",
    ...                     n_numbers=3)
    >>> obs, info = envs.reset(options={"prompt": ((9, 4, 5), 14)})
    >>> answers = np.array([[0, 3, 2, 9], [0, 3, 1, 9], [0, 3, 0, 9]])  # 9+5, 9+4, 9+9
    >>> for col in answers.T:
    ...     obs, rewards, terminated, truncated, info = envs.step(col)
    >>> rewards.tolist(), info["final_info"]["well_formed"].tolist()
    ([1.1, 0.1, 0.0], [True, True, False])
    """

    def __init__(self, num_envs: int = 1, **kwargs: Any) -> None:
        task, env_kwargs = env_arguments(TokenVectorEnv, countdown_task, countdown_keywords, kwargs)
        super().__init__(task, num_envs, **env_kwargs)


class CountdownTextEnv(TextEnv):
    """``rlvr/CountdownText-v0``: Countdown-N (see :class:`CountdownEnv` for the task's
    arguments) as a one-step text env (see :class:`TextEnv`).

    >>> import gymnasium as gym
    >>> import rlvr_env
    >>> env = gym.make("rlvr/CountdownText-v0", n_numbers=3)
    >>> text, info = env.reset(seed=5)
    >>> info["prompt"]
    Prompt(numbers=(7, 9, 1), target=70)
    >>> _, reward, terminated, truncated, info = env.step("7 times 10: <answer>7*(9+1)</answer>")
    >>> reward, terminated, info["expression"], info["reward_parts"]
    (1.1, True, '7*(9+1)', {'accuracy': 1.0, 'format': 0.1})
    """

    def __init__(self, **kwargs: Any) -> None:
        task, env_kwargs = env_arguments(TextEnv, countdown_task, countdown_keywords, kwargs)
        super().__init__(task, **env_kwargs)


register_envs(ENV_ID, countdown_task, text_id="rlvr/CountdownText-v0", keywords=countdown_keywords,
              envs=(CountdownEnv, CountdownVectorEnv, CountdownTextEnv))
register_task(CountdownTask.name, CountdownTask)
