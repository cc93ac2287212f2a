"""Network weights as text, the one format a run's spec and record carry them in.

A base's weights travel from the run that trained them to the runs that start from them inside specs and
records (JSON), so a cluster needs no shared filesystem: :func:`pack_weights` is a base64 string of a
compressed ``.npz`` of the state dict's arrays; :func:`unpack_weights` and :func:`load_weights` read it
back; :func:`state_digest` names a set of arrays (a run key records a base by it).

Not :mod:`agents.grpo.checkpoint`'s format: a checkpoint is a file (``torch.save`` of the whole model),
these are strings inside JSON, and the packed text of every stored base is part of the R1 study's run
keys (a RL run's spec holds its base's weights), so its format cannot change without retraining every
stored run.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["load_weights", "pack_weights", "state_digest", "unpack_weights"]


def pack_weights(net: Any) -> str:
    """``net``'s state dict as text: base64 of a compressed ``.npz`` of its arrays."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: v.detach().numpy() for k, v in net.state_dict().items()})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def unpack_weights(blob: str) -> dict[str, np.ndarray]:
    """The named arrays of packed weights (:func:`pack_weights`)."""
    with np.load(io.BytesIO(base64.b64decode(blob)), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def load_weights(blob: str, net: Any) -> None:
    """Load packed weights into ``net``; ``ValueError`` when the names differ."""
    import torch

    arrays, expected = unpack_weights(blob), net.state_dict()
    if set(arrays) != set(expected):
        raise ValueError(f"base weights hold {sorted(arrays)}, the network {sorted(expected)}")
    net.load_state_dict({k: torch.as_tensor(arrays[k]).to(expected[k].dtype) for k in expected})


def state_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 (16 hex digits) of named arrays: names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode() + a.tobytes())
    return h.hexdigest()[:16]
