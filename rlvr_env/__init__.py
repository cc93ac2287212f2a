"""rlvr-env: Reinforcement Learning from Verifiable Rewards as Gymnasium environments.

Importing the package registers the environments (``rlvr/Arithmetic-v0``, ...) with Gymnasium.
This package needs only gymnasium and numpy.
"""

from rlvr_env.envs import TokenEnv
from rlvr_env.registration import register_envs
from rlvr_env.rewards import BatchVerdict, RewardWeights, Verdict, best_reward, length_reward
from rlvr_env.scoring import BatchScorer, TaskScorer
from rlvr_env.tasks import SPLITS, ArithmeticTask, CountdownTask, ExpressionTask, Prompt, Task
from rlvr_env.tasks.countdown.settings import CountdownSettings
from rlvr_env.tasks.digits import DigitsPrompt, DigitsTask
from rlvr_env.tasks.think import ThinkTask
from rlvr_env.tasks.expression.verifier import Grammar, verify
from rlvr_env.text_env import TextEnv
from rlvr_env.vector import TokenVectorEnv

# The families' env ids register on import (each through register_envs).
from rlvr_env.tasks.countdown.envs import CountdownEnv, CountdownTextEnv, CountdownVectorEnv  # noqa: E402
from rlvr_env.tasks.expression.envs import ArithmeticEnv, ArithmeticTextEnv, ArithmeticVectorEnv  # noqa: E402
from rlvr_env.tasks.think.envs import ENV_ID as _THINK_ID  # noqa: E402,F401
from rlvr_env.tasks.mix import MixPrompt, MixTask  # noqa: E402
import rlvr_env.tasks.mix.envs  # noqa: E402,F401  (the mix ids; members are found by name when built)

__version__ = "0.1.0"

__all__ = [
    "ArithmeticEnv",
    "ArithmeticTask",
    "ArithmeticTextEnv",
    "ArithmeticVectorEnv",
    "BatchScorer",
    "BatchVerdict",
    "CountdownEnv",
    "CountdownSettings",
    "CountdownTask",
    "CountdownTextEnv",
    "CountdownVectorEnv",
    "DigitsPrompt",
    "DigitsTask",
    "ExpressionTask",
    "Grammar",
    "MixPrompt",
    "MixTask",
    "Prompt",
    "RewardWeights",
    "SPLITS",
    "Task",
    "TaskScorer",
    "ThinkTask",
    "TextEnv",
    "TokenEnv",
    "TokenVectorEnv",
    "Verdict",
    "best_reward",
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


# A task on the Task contract needs no env classes of its own: one call registers all three envs.
register_envs("rlvr/Digits-v0", DigitsTask, text_id="rlvr/DigitsText-v0")
