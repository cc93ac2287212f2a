"""Task mixes: one policy, one vocabulary, several tasks drawn by weight and paid by their own verifiers
(:mod:`.task`); the draw by weight (:mod:`.draw`), the shared vocabularies and id maps (:mod:`.vocab`) and
the env ids (:mod:`.envs`)."""

from rlvr_env.tasks.mix.draw import MixPrompt
from rlvr_env.tasks.mix.task import MixTask

__all__ = ["MixPrompt", "MixTask"]
