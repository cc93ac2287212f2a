"""rlvr-env: Reinforcement Learning from Verifiable Rewards as Gymnasium environments.

Importing the package registers the environments (``rlvr/Arithmetic-v0``, ...) with Gymnasium.
This package needs only gymnasium and numpy.
"""

from gymnasium.envs.registration import register, registry

from rlvr_env.tasks.countdown.envs import CountdownEnv
from rlvr_env.envs import ArithmeticEnv, TokenEnv
from rlvr_env.registration import register_envs
from rlvr_env.rewards import length_reward
from rlvr_env.tasks import SPLITS, ArithmeticTask, CountdownTask, ExpressionTask, Prompt, Task
from rlvr_env.tasks.countdown.settings import CountdownSettings
from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask
from rlvr_env.vector import ArithmeticVectorEnv, CountdownVectorEnv, TokenVectorEnv
from rlvr_env.tasks.expression.verifier import Grammar, verify
from rlvr_env.rewards import RewardWeights, Verdict

__version__ = "0.1.0"

__all__ = [
    "ArithmeticEnv",
    "ArithmeticTask",
    "ArithmeticVectorEnv",
    "CountdownEnv",
    "CountdownSettings",
    "CountdownTask",
    "CountdownVectorEnv",
    "DigitsPrompt",
    "DigitsTask",
    "ExpressionTask",
    "Grammar",
    "Prompt",
    "RewardWeights",
    "SPLITS",
    "Task",
    "TokenEnv",
    "TokenVectorEnv",
    "Verdict",
    "length_reward",
    "register_envs",
    "to_sb3_vec_env",
    "verify",
]


def to_sb3_vec_env(vec_env: object) -> object:
    """A Stable-Baselines3 ``VecEnv`` over a native vector env, for SB3 PPO/A2C and sb3-contrib
    MaskablePPO (:class:`rlvr_env.sb3.SB3VecEnv`). SB3 is imported here, not by ``import rlvr_env``."""
    from rlvr_env.sb3 import SB3VecEnv

    return SB3VecEnv(vec_env)


def _register(env_id: str, entry_point: str, **kwargs: object) -> None:
    # Re-importing (e.g. under importlib.reload) must not warn about overriding a registration.
    if env_id not in registry:
        register(id=env_id, entry_point=entry_point, **kwargs)  # type: ignore[arg-type]


_register(
    "rlvr/Arithmetic-v0",
    "rlvr_env.envs:ArithmeticEnv",
    vector_entry_point="rlvr_env.vector:ArithmeticVectorEnv",
)
_register(
    "rlvr/Countdown-v0",
    "rlvr_env.tasks.countdown.envs:CountdownEnv",
    vector_entry_point="rlvr_env.vector:CountdownVectorEnv",
)
# Text-mode (language-model) variants: observation = prompt text, action = completion string.
_register("rlvr/CountdownText-v0", "rlvr_env.text_env:CountdownTextEnv")
_register("rlvr/ArithmeticText-v0", "rlvr_env.text_env:ArithmeticTextEnv")
# A task on the Task contract needs no env classes of its own: one call registers all three envs.
register_envs("rlvr/Digits-v0", DigitsTask, text_id="rlvr/DigitsText-v0")
