"""What the torch policies (``mlp``, ``transformer``) share: parameters, arrays and optimiser state for
checkpoints. Each subclass holds ``self.net`` (trained), ``self.reference`` (the frozen KL reference) and
``self.optimizer``, and names itself in ``kind`` for error messages."""

from __future__ import annotations

import numpy as np

from agents.extras import missing_extra
from agents.grpo.policies import Policy

try:
    import torch
except ImportError as err:  # installed without the torch extra: the tabular policy still works
    raise missing_extra("the neural policies (agents.grpo.torch_policy)", "torch") from err

__all__ = ["TorchPolicy"]


class TorchPolicy(Policy):
    """A :class:`Policy` whose network and reference are torch modules (checkpoint arrays ``net.*`` and
    ``ref.*``; the optimiser's state is saved beside them by :mod:`agents.grpo.checkpoint`)."""

    kind = "torch"
    net: torch.nn.Module
    reference: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.net.parameters() if p.requires_grad)

    def state(self) -> dict[str, np.ndarray]:
        out = {f"net.{k}": v.detach().numpy().copy() for k, v in self.net.state_dict().items()}
        out.update({f"ref.{k}": v.numpy().copy() for k, v in self.reference.state_dict().items()})
        return out

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        for prefix, module in (("net.", self.net), ("ref.", self.reference)):
            expected = module.state_dict()
            for k, v in expected.items():
                arr = arrays.get(prefix + k)
                if arr is None:
                    raise ValueError(f"{self.kind} policy state lacks the array {prefix + k!r}")
                if tuple(arr.shape) != tuple(v.shape) or not np.all(np.isfinite(arr)):
                    raise ValueError(
                        f"array {prefix + k!r} has shape {arr.shape}; expected {tuple(v.shape)} "
                        "with finite values"
                    )
            module.load_state_dict({k: torch.as_tensor(arrays[prefix + k]) for k in expected})
        self._loaded()

    def _loaded(self) -> None:
        """Called after :meth:`load_state` (a subclass drops what it cached from the old weights)."""
