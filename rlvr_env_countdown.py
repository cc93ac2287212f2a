"""``verifiers`` taskset id ``rlvr_env_countdown``: rlvr_env's Countdown (see rlvr_env.llm.vf_taskset)."""

from rlvr_env.llm.vf_taskset import CountdownTaskset

__all__ = ["CountdownTaskset"]
