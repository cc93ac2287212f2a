"""The arithmetic-expression family: answers are infix expressions over a prompt's numbers, read by one
exact verifier (:mod:`.verifier`, text; :mod:`.batch_verify`, token arrays), with the contract's
abilities filled once (:mod:`.task`) and the lesson's toy, ``rlvr/Arithmetic-v0`` (:mod:`.arithmetic`,
:mod:`.envs`). Countdown (:mod:`rlvr_env.tasks.countdown`) builds on it."""

from rlvr_env.tasks.expression.arithmetic import ArithmeticTask
from rlvr_env.tasks.expression.prompt import Prompt, unpack_prompt
from rlvr_env.tasks.expression.task import ExpressionTask, check_number_tokens, describe_grammar
from rlvr_env.tasks.expression.verifier import Grammar, VerifierError, verify

__all__ = ["ArithmeticTask", "ExpressionTask", "Grammar", "Prompt", "VerifierError", "check_number_tokens",
           "describe_grammar", "unpack_prompt", "verify"]
