"""The ``callback`` of ``GRPO.learn``: the project's ``(model, metrics) -> bool`` callable and
Stable-Baselines3's callback face (``BaseCallback``, ``CallbackList``, a list of either).

How GRPO drives an SB3 callback, against SB3's on-policy loop (``OnPolicyAlgorithm.learn``):

==========================  =====================================================================
SB3 call                    when GRPO makes it
==========================  =====================================================================
``init_callback(model)``    at the start of ``learn`` (``model.get_env()`` is the GRPO's env)
``on_training_start``       next, with ``learn``'s ``locals()`` and this module's ``globals()``
``on_rollout_start``        before each iteration draws its prompts and runs its groups
``on_rollout_end``          after the groups are verified, before the update
``on_step``                 **once per iteration**, after its update (``self.locals`` then holds the
                            loop's locals: ``metrics``, ``got`` (the groups), ``adv`` (its ``Advantages``));
                            returning False stops training, as the callable's False does
``on_training_end``         when ``learn`` returns (also after a stop)
==========================  =====================================================================

So ``n_calls`` counts iterations, not env steps (SB3 calls ``on_step`` per vector-env step, GRPO
updates once per iteration of B x G whole episodes, and a checkpoint or evaluation between two updates
would see the same policy): SB3's ``CheckpointCallback(save_freq=10)`` saves every 10 iterations, and
its files are real GRPO checkpoints (``GRPO.load`` reads them). ``num_timesteps`` is the agent's env-step
count, as in SB3. SB3's ``EvalCallback`` runs too (mean episode return through ``model.predict``); for
success rates use :class:`agents.grpo.eval_callback.SuccessEvalCallback`.

SB3 stays optional: a callable needs nothing, and an object can only be an SB3 callback if SB3 is
already imported, so this module never imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["Callback", "CallbackRunner", "make_callbacks"]

#: ``callback(model, metrics)`` after each iteration of ``learn``; returning False stops it.
Callback = Callable[[Any, dict[str, float]], "bool | None"]


def _is_sb3_callback(obj: object) -> bool:
    module = sys.modules.get("stable_baselines3.common.callbacks")
    return module is not None and isinstance(obj, module.BaseCallback)


class CallbackRunner:
    """The callbacks of one ``learn`` call, in the order given; see the module docstring."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self._sb3 = [p for p in parts if _is_sb3_callback(p)]

    def start(self, model: Any, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        for cb in self._sb3:
            cb.init_callback(model)
            cb.on_training_start(locals_, globals_)

    def rollout_start(self) -> None:
        for cb in self._sb3:
            cb.on_rollout_start()

    def rollout_end(self) -> None:
        for cb in self._sb3:
            cb.on_rollout_end()

    def step(self, model: Any, metrics: dict[str, float], locals_: dict[str, Any]) -> bool:
        """Every callback's step (all are called, as SB3's ``CallbackList`` does); False: stop."""
        go_on = True
        for part in self.parts:
            if _is_sb3_callback(part):
                part.update_locals(locals_)
                go_on = part.on_step() is not False and go_on
            else:
                go_on = part(model, metrics) is not False and go_on
        return go_on

    def end(self) -> None:
        for cb in self._sb3:
            cb.on_training_end()


def make_callbacks(callback: object) -> CallbackRunner | None:
    """``learn``'s ``callback`` as a runner: None, a ``(model, metrics)`` callable, an SB3
    ``BaseCallback`` (``CallbackList`` included), or a list / tuple of those. Anything else is a
    ``TypeError`` naming it."""
    if callback is None:
        return None
    items = list(callback) if isinstance(callback, (list, tuple)) else [callback]
    for item in items:
        if not (_is_sb3_callback(item) or callable(item)):
            raise TypeError(
                f"callback {item!r} is neither a callable (model, metrics) -> bool nor a "
                "stable_baselines3 BaseCallback"
            )
    return CallbackRunner(items)
