"""Countdown-N, the numbers game, as a family: its settings (:mod:`.settings`), prompt draw
(:mod:`.draw`), held-out split (:mod:`.split`), grammar masks (:mod:`.masks`), answer programs and their
fast scorer (:mod:`.programs`, :mod:`.scorer`), observation features (:mod:`.features`), the task
(:mod:`.task`) and its env ids (:mod:`.envs`). It builds on the arithmetic-expression family."""

from rlvr_env.tasks.countdown.settings import CountdownSettings, settings_of
from rlvr_env.tasks.countdown.split import HELD_OUT_BUCKETS, multiset_hash
from rlvr_env.tasks.countdown.task import OBSERVATIONS, CountdownTask

__all__ = ["CountdownSettings", "CountdownTask", "HELD_OUT_BUCKETS", "OBSERVATIONS", "multiset_hash",
           "settings_of"]
