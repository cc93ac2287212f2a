"""``verifiers`` taskset id ``rlvr_env_arithmetic``: rlvr_env's Arithmetic (see rlvr_env.llm.vf_taskset)."""

from rlvr_env.llm.vf_taskset import ArithmeticTaskset

__all__ = ["ArithmeticTaskset"]
