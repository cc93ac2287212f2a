"""Warm start by behaviour cloning (DeepSeek-R1's "cold start": supervised fine-tuning on a small set of
demonstrations before RL; Guo et al. 2025, section 2.3.1).

An ``rlvr_env`` task that knows a solution per prompt (Countdown keeps its generating expression in
``prompt.info()["solution_tokens"]``) provides demonstrations; :func:`behaviour_clone` fits a torch
policy to them by maximum likelihood (cross-entropy on each demonstrated token, under the same grammar
masks as decoding; the loop is :func:`agents.supervised.fit`, shared with the R1 cold start);
:func:`warm_start` does that to a GRPO agent and makes the cloned policy its KL
reference, as in the papers. Because the MLP policy *is* SB3 PPO's actor, :func:`copy_actor_to_sb3`
puts the same cloned actor into an SB3 PPO or sb3-contrib MaskablePPO model (its critic stays fresh),
so every contender can start from one policy.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from agents.evaluation import as_token_env
from agents.extras import missing_extra
from agents.supervised import Batch, Demonstrations, fit
from rlvr_env.tasks.expression.prompt import Prompt

try:
    import torch

    from agents.policies.torch_base import TorchPolicy
except ImportError as err:  # installed without the torch extra
    raise missing_extra("behaviour cloning (agents.bc)", "torch") from err

__all__ = ["Demonstrations", "behaviour_clone", "copy_actor_to_sb3", "demonstrations", "warm_start"]


def demonstrations(
    env: gym.Env,
    n: int,
    seed: int,
    split: str = "train",
    answers: Sequence[tuple[Prompt, Sequence[int]]] | None = None,
) -> Demonstrations:
    """Replay ``n`` solutions in ``env`` and record (observation, mask, token) per step.

    By default the solutions are the task's own: ``n`` prompts of ``split`` drawn with a generator
    seeded by ``seed``, each with ``prompt.info()["solution_tokens"]``. ``answers`` gives them
    explicitly instead ((prompt, token ids) pairs; ``n`` and ``seed`` are then unused). Every replayed
    answer must be correct, or ``ValueError`` says which is not.
    """
    base = as_token_env(env)
    if answers is None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n={n!r} demonstrations must be a positive integer")
        rng = np.random.default_rng(seed)
        answers = []
        for _ in range(n):
            prompt = base.task.sample_prompt(rng, split)
            tokens = prompt.info().get("solution_tokens")
            if tokens is None:
                raise ValueError(
                    f"task {type(base.task).__name__} keeps no solution in prompt.info()"
                    "['solution_tokens']; pass answers= explicitly"
                )
            answers.append((prompt, tokens))
    probe = copy.deepcopy(base)
    obs, masks, actions = [], [], []
    for prompt, tokens in answers:
        o, _ = probe.reset(options={"prompt": prompt})
        info: dict[str, Any] = {}
        for tok in tokens:
            obs.append(o)
            masks.append(probe.action_masks())
            actions.append(int(tok))
            o, _, terminated, truncated, info = probe.step(int(tok))
            if terminated or truncated:
                break
        if not info.get("correct", False):
            raise ValueError(f"demonstration {list(tokens)} for {prompt} is not a correct answer")
    return Demonstrations(np.asarray(obs), np.asarray(masks, dtype=bool), np.asarray(actions),
                          tuple(p for p, _ in answers))


def behaviour_clone(
    policy: Any,
    demos: Demonstrations,
    *,
    epochs: int = 50,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
    masked: bool = True,
) -> list[float]:
    """Fit a torch policy (e.g. :class:`agents.policies.mlp.MLPPolicy`) to ``demos`` by cross-entropy (Adam
    at the constant ``learning_rate``, :func:`agents.supervised.fit`) on minibatches of ``batch_size``
    rows in a fresh seeded order each epoch, under the demonstrations' grammar masks when ``masked``.
    Returns the mean loss of each epoch. The policy's RL optimiser and reference network are left alone
    (see :func:`warm_start`)."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs={epochs!r} must be a positive integer")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} must be a positive integer")
    rng = np.random.default_rng(seed)
    t = len(demos.actions)

    def shuffled() -> Iterator[list[Batch]]:
        for _ in range(epochs):
            order = rng.permutation(t)
            yield [(order[start : start + batch_size], None) for start in range(0, t, batch_size)]

    return fit(policy, demos, shuffled(), learning_rate=learning_rate, masked=masked)


def warm_start(model: Any, demos: Demonstrations, **bc_kwargs: Any) -> list[float]:
    """Behaviour-clone a GRPO agent's torch policy on ``demos``, then make the clone its frozen KL
    reference and restart its RL optimiser (as DeepSeek-R1 starts RL from the cold-start checkpoint); a
    critic (``advantage="gae"``) starts again from the clone.
    ``bc_kwargs`` go to :func:`behaviour_clone` (``masked`` defaults to the agent's ``use_masks``)."""
    if not isinstance(getattr(model, "policy", None), TorchPolicy):
        raise ValueError(f"warm_start needs a GRPO agent with a torch policy (e.g. policy='mlp'), not "
                         f"{type(getattr(model, 'policy', model)).__name__}")
    bc_kwargs.setdefault("masked", model.use_masks)
    bc_kwargs.setdefault("seed", model.seed)
    losses = behaviour_clone(model.policy, demos, **bc_kwargs)
    model.policy.restart_from_current()  # reference, RL optimiser and a critic start from the clone
    return losses


def copy_actor_to_sb3(policy: Any, sb3_model: Any) -> None:
    """Copy an MLP policy's weights into an SB3 ``PPO`` / sb3-contrib ``MaskablePPO`` model's actor
    (``mlp_extractor.policy_net`` and ``action_net``); the critic (``value_net``, value MLP) is left
    as initialised. Raises ``ValueError`` when the architectures differ."""
    src = [m for m in policy.net if isinstance(m, torch.nn.Linear)]
    sb = sb3_model.policy
    dst = [m for m in sb.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)] + [sb.action_net]
    shapes_src = [tuple(m.weight.shape) for m in src]
    shapes_dst = [tuple(m.weight.shape) for m in dst]
    if shapes_src != shapes_dst:
        raise ValueError(f"actor layers {shapes_dst} do not match the policy's {shapes_src}")
    with torch.no_grad():
        for s, d in zip(src, dst):
            d.weight.copy_(s.weight.to(d.weight.dtype))
            d.bias.copy_(s.bias.to(d.bias.dtype))
