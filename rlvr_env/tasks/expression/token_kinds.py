"""Token kinds: what a vocabulary token means to the batch verifier and to the grammar masks.

A leaf module (no imports from the project) so that the verifier
(:mod:`rlvr_env.tasks.expression.tokens`, :mod:`~rlvr_env.tasks.expression.machine`) and the
Countdown masks and answer programs (:mod:`rlvr_env.tasks.countdown.masks`,
:mod:`rlvr_env.tasks.countdown.programs`) share one numbering without importing each other.
"""

__all__ = ["NUM", "ADD", "SUB", "MUL", "DIV", "LPAREN", "RPAREN", "EOS", "OTHER"]

NUM, ADD, SUB, MUL, DIV, LPAREN, RPAREN, EOS, OTHER = range(9)
