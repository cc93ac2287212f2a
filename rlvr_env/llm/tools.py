"""The thinking env's calculator as a tool function for chat-template tool calling (TRL's
``GRPOTrainer(tools=[calculator])``): a plain Python function whose name, type hints and Google-style
docstring are what ``transformers.utils.get_json_schema`` reads.

It computes one step ``a op b`` exactly as the token env's calculator does
(:func:`rlvr_env.tasks.think.trace.calculate`): the result when it is a whole number >= 0 of at most the
task's digits, ``?`` otherwise. The text is lexed by the verifier's own lexer
(:func:`rlvr_env.tasks.expression.verifier.tokenize`); nothing is evaluated.
"""

from __future__ import annotations

from collections.abc import Callable

from rlvr_env.tasks.expression.verifier import VerifierError, tokenize
from rlvr_env.tasks.think.task import ThinkTask
from rlvr_env.tasks.think.trace import NO_NUMBER, calculate

__all__ = ["calculator", "make_calculator"]

_DOC = """Compute one step of Countdown arithmetic exactly: two whole numbers and one operator.

    Args:
        expression: The step to compute, written "a op b" with whole numbers a and b and op one of
            {ops}, for example "9 * 7".

    Returns:
        The exact result, for example "63"; "?" when it is no whole number >= 0 of at most {digits}
        digits (a negative or fractional result, a division by zero); or a message starting with
        "error:" when the expression is not "a op b".
    """

#: The longest expression text read (a step is a few characters; a longer text is an error, unread).
MAX_EXPRESSION_CHARS = 64


def make_calculator(task: ThinkTask | None = None) -> Callable[[str], str]:
    """The calculator tool of ``task`` (default: ``ThinkTask()``'s settings): its operators and its bound
    on a number's digits, as the task's token env computes a step."""
    task = task if task is not None else ThinkTask()
    if not isinstance(task, ThinkTask):
        raise ValueError(f"task={task!r:.80} must be a ThinkTask (the thinking env's calculator)")
    operators, max_digits = task.settings.operators, task.max_digits

    def calculator(expression: str) -> str:
        if not isinstance(expression, str):
            return f"error: the expression must be text, got {type(expression).__name__}"
        if len(expression) > MAX_EXPRESSION_CHARS:
            return f"error: the expression is longer than {MAX_EXPRESSION_CHARS} characters; write one step"
        try:
            parts = tokenize(expression)
        except VerifierError as err:
            return f"error: {err}"
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit() or parts[1] not in operators:
            return (f"error: expected 'a op b' with two whole numbers and one of {' '.join(operators)}, got "
                    f"{expression.strip()!r}")
        if any(len(p) > max_digits for p in (parts[0], parts[2])):
            return f"error: a number has more than {max_digits} digits"
        result = calculate(int(parts[0]), parts[1], int(parts[2]), max_digits)
        return NO_NUMBER if result is None else str(result)

    calculator.__doc__ = _DOC.format(ops=", ".join(operators), digits=max_digits)
    calculator.__qualname__ = "calculator"
    calculator.__module__ = __name__
    return calculator


#: The calculator of ``ThinkTask()``'s default settings (Countdown-4, ``+ - * /``).
calculator = make_calculator()
