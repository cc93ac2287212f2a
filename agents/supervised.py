"""The supervised fit: cross-entropy on demonstrated tokens, one loop for every torch policy and every
caller (behaviour cloning, :func:`agents.bc.behaviour_clone`, and the R1 cold start,
:func:`agents.sft.supervised_fit`). The callers differ only in how they cut the demonstrations into
minibatches (and the cold start's step-size schedule and gradient clip), so they pass those in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.extras import missing_extra

try:
    import torch

    from agents.policies.torch_base import TorchPolicy
except ImportError as err:  # installed without the torch extra
    raise missing_extra("the supervised fit (agents.supervised)", "torch") from err

__all__ = ["Batch", "Demonstrations", "fit"]


@dataclass(frozen=True)
class Demonstrations:
    """Token-level demonstrations: one row per demonstrated token."""

    obs: np.ndarray  # (T, obs_dim) observation before the token
    masks: np.ndarray  # (T, V) the grammar mask at that step
    actions: np.ndarray  # (T,) the demonstrated token
    prompts: tuple[Any, ...]  # the prompts they come from (the task's own values)


#: One minibatch: the demonstration rows (n,) and each row's weight (n,), or None for a plain mean.
Batch = tuple[np.ndarray, "np.ndarray | None"]


def fit(policy: TorchPolicy, demos: Demonstrations, epochs: Iterable[Sequence[Batch]], *,
        learning_rate: float, masked: bool = True, max_grad_norm: float | None = None,
        step_size: Callable[[int], float] | None = None) -> list[float]:
    """Fit ``policy`` to ``demos`` by minibatch cross-entropy with Adam (eps 1e-5, as the RL optimiser)
    on the policy's trainable parameters, under the demonstrations' grammar masks when ``masked``.

    ``epochs`` yields each epoch's minibatches (:data:`Batch`); an epoch's loss is the mean of
    ``-log pi(a | s)`` over its rows, weighted where a batch gives weights (a repeated answer trained once
    with its count as weight). ``step_size(step)`` sets the step size before each step (None: the
    constant ``learning_rate``); ``max_grad_norm`` clips the gradient norm (None: off). Returns each
    epoch's mean loss (nats per demonstrated token). The policy's RL optimiser and reference network are
    left alone."""
    if not isinstance(policy, TorchPolicy):
        raise ValueError(f"the supervised fit trains a torch policy (a TorchPolicy), not a "
                         f"{type(policy).__name__}")
    params = policy.parameters()
    opt = torch.optim.Adam(params, lr=learning_rate, eps=1e-5)
    losses, step = [], 0
    for batches in epochs:
        total, count = 0.0, 0.0
        for rows, weights in batches:
            if step_size is not None:
                for group in opt.param_groups:
                    group["lr"] = step_size(step)
            masks = demos.masks[rows] if masked else None
            logp = policy.log_prob(demos.obs[rows], demos.actions[rows], masks)
            if weights is None:
                loss, size = -logp.mean(), float(len(rows))
            else:
                w = torch.as_tensor(weights, dtype=params[0].dtype)  # (n,) copies of each row
                loss, size = -(w * logp).sum() / w.sum(), float(w.sum())
            opt.zero_grad()
            loss.backward()
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            opt.step()
            total += float(loss.detach()) * size
            count += size
            step += 1
        losses.append(total / count)
    return losses
