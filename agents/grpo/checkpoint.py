"""GRPO checkpoints: a zip of ``grpo.json`` (metadata, the resolved config, the generator state) and
``policy.npz`` (the policy's arrays; with ``advantage="gae"`` also the critic's, ``critic.*``), plus
``optimizer.pt`` (torch's Adam state) for the torch policies and ``critic_optimizer.pt`` (the critic's).
The policy is stored by its registered name (:mod:`agents.grpo.registry`); loading finds the class there,
so a custom policy class loads once it is registered again, and a class never registered cannot be saved.

Nothing in a checkpoint is ever unpickled: arrays are read with ``allow_pickle=False`` and the optimiser
state with ``weights_only=True``. The format tag :data:`CHECKPOINT_FORMAT` names the layout; a file
without it, or truncated, or tampered with (bytes flipped inside a member included), raises
``ValueError`` naming the file and what is wrong.

Paths follow Stable-Baselines3's ``save_util``: :func:`save` adds ``.zip`` to a name without a suffix
(``save("model")`` writes ``model.zip``) and creates missing parent folders; :func:`load` opens the name
as given and, if there is no such file, the name with ``.zip`` added (``load("model")`` reads
``model.zip``).
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.grpo.config import GRPOConfig
from agents.grpo.registry import policy_names

__all__ = ["CHECKPOINT_FORMAT", "checkpoint_path", "load", "save"]

CHECKPOINT_FORMAT = "rlvr-env/grpo-checkpoint/v1"
_MAX_CHECKPOINT_MEMBER = 512 * 1024 * 1024


def checkpoint_path(path: str | Path) -> Path:
    """The file :func:`save` writes for ``path``: ``path`` with ``.zip`` added when its name has no
    suffix (as SB3's ``save_util.open_path`` does with ``suffix="zip"``), else ``path`` itself."""
    path = Path(path)
    return path.with_name(path.name + ".zip") if path.suffix == "" else path


def save(model: Any, path: str | Path) -> Path:
    """Write ``model`` (an :class:`agents.grpo.GRPO`) atomically to :func:`checkpoint_path` of ``path``,
    creating missing parent folders (see the module docstring); returns the path written."""
    if model.policy_name is None:
        raise ValueError(
            f"the policy class {type(model.policy).__qualname__} is not registered, and a checkpoint names "
            "its policy: register it first (agents.grpo.registry.register_policy(name, cls))")
    meta = {
        "format": CHECKPOINT_FORMAT,
        "policy": model.policy_name,
        "config": model.config.to_dict(),
        "seed": model.seed,
        "env_id": model.env_id,
        "env_kwargs": model.env_kwargs,
        "policy_kwargs": model.policy_kwargs,
        "num_timesteps": model.num_timesteps,
        "iterations": model.iterations,
        "observation_shape": list(model.observation_space.shape or ()),
        "n_actions": model.n_actions,
        "rng_state": model.rng.bit_generator.state,
    }
    try:
        meta_text = json.dumps(meta)
    except TypeError as err:
        raise ValueError(f"env_kwargs or policy_kwargs are not JSON-serialisable: {err}") from err
    arrays = io.BytesIO()
    np.savez(arrays, **model.policy.state())
    path = checkpoint_path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give the checkpoint a file name, e.g. "
                                f"{path / 'model.zip'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("grpo.json", meta_text)
        zf.writestr("policy.npz", arrays.getvalue())
        if model.policy.uses_torch:
            import torch  # a torch policy exists, so torch is installed

            opt = io.BytesIO()
            torch.save(model.policy.optimizer_state(), opt)
            zf.writestr("optimizer.pt", opt.getvalue())
            critic_state = model.policy.critic_optimizer_state()
            if critic_state is not None:  # advantage="gae": the critic's Adam state
                opt = io.BytesIO()
                torch.save(critic_state, opt)
                zf.writestr("critic_optimizer.pt", opt.getvalue())
    tmp.replace(path)  # atomic: an interrupted save never leaves a half-written checkpoint
    return path


def load(cls: Any, path: str | Path, env: str | gym.Env | None = None) -> Any:
    """The ``cls`` (:class:`agents.grpo.GRPO`) model saved at ``path``; it predicts exactly as the saved
    one and continues training from the same generator state. ``env`` defaults to the stored env id."""
    path = Path(path)
    if not path.exists() and Path(f"{path}.zip").exists():
        path = Path(f"{path}.zip")  # as SB3's load: the name as given, else with ".zip" added
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{path} is not a GRPO checkpoint (not a readable zip file: {err})") from err
    with zf:
        names = set(zf.namelist())
        for member in ("grpo.json", "policy.npz"):
            if member not in names:
                raise ValueError(f"{path} is not a GRPO checkpoint: it has no {member!r}")
        meta = _read_json(zf, path)
        arrays = _read_npz(zf, path)
        opt_bytes = _read_member(zf, "optimizer.pt", path) if "optimizer.pt" in names else None
        critic_opt_bytes = (_read_member(zf, "critic_optimizer.pt", path) if "critic_optimizer.pt" in names
                            else None)
    policy = meta["policy"]
    if env is None:
        if not meta.get("env_id"):
            raise ValueError(f"{path} was trained on an env without an id; pass env= to load it")
        env = meta["env_id"]
        model = cls(env, GRPOConfig.from_dict(meta["config"]), policy, meta["seed"],
                    env_kwargs=meta.get("env_kwargs") or {}, policy_kwargs=meta.get("policy_kwargs"))
    else:
        model = cls(env, GRPOConfig.from_dict(meta["config"]), policy, meta["seed"],
                    policy_kwargs=meta.get("policy_kwargs"))
    if list(model.observation_space.shape or ()) != list(meta["observation_shape"]):
        raise ValueError(
            f"{path} was trained on observations of shape {meta['observation_shape']}, the env gives "
            f"{model.observation_space.shape}"
        )
    if model.n_actions != meta["n_actions"]:
        raise ValueError(f"{path} has {meta['n_actions']} actions, the env has {model.n_actions}")
    model.policy.load_state(arrays)
    if opt_bytes is not None and model.policy.uses_torch:
        import torch  # the torch policy above was built, so torch is installed

        try:
            state = torch.load(io.BytesIO(opt_bytes), weights_only=True)
            model.policy.optimizer.load_state_dict(state)
        except Exception as err:  # torch raises many types for a bad file
            raise ValueError(f"{path}: optimiser state is unreadable: {err}") from err
    critic_opt = getattr(model.policy, "critic_optimizer", None)
    if critic_opt is not None:
        if critic_opt_bytes is None:
            raise ValueError(f"{path} has a critic (advantage={model.config.advantage!r}) but no "
                             "'critic_optimizer.pt'")
        import torch

        try:
            critic_opt.load_state_dict(torch.load(io.BytesIO(critic_opt_bytes), weights_only=True))
        except Exception as err:  # torch raises many types for a bad file
            raise ValueError(f"{path}: the critic's optimiser state is unreadable: {err}") from err
    model.num_timesteps = int(meta["num_timesteps"])
    model.iterations = int(meta["iterations"])
    try:
        model.rng.bit_generator.state = meta["rng_state"]
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"{path}: generator state is malformed: {err}") from err
    return model


def _read_json(zf: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    info = zf.getinfo("grpo.json")
    if info.file_size > 1024 * 1024:
        raise ValueError(f"{path}: grpo.json is {info.file_size} bytes; a checkpoint's is a few KB")
    raw = _read_member(zf, "grpo.json", path)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: grpo.json is corrupt: {err}") from err
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a GRPO checkpoint (format tag {CHECKPOINT_FORMAT!r} missing)")
    required = ("policy", "config", "seed", "num_timesteps", "iterations", "observation_shape",
                "n_actions", "rng_state")
    missing = [k for k in required if k not in meta]
    if missing:
        raise ValueError(f"{path}: grpo.json lacks {missing}")
    if meta["policy"] not in policy_names():
        raise ValueError(
            f"{path}: its policy {meta['policy']!r} is not registered (registered: {policy_names()}); "
            f"register its class first (agents.grpo.registry.register_policy({meta['policy']!r}, cls))")
    return meta


def _read_npz(zf: zipfile.ZipFile, path: Path) -> dict[str, np.ndarray]:
    if zf.getinfo("policy.npz").file_size > _MAX_CHECKPOINT_MEMBER:
        raise ValueError(f"{path}: policy.npz is larger than {_MAX_CHECKPOINT_MEMBER} bytes")
    raw = _read_member(zf, "policy.npz", path)
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as err:
        raise ValueError(f"{path}: policy.npz is corrupt or holds pickled objects: {err}") from err


def _read_member(zf: zipfile.ZipFile, name: str, path: Path) -> bytes:
    """The bytes of member ``name``; damage inside the archive (a failed CRC check, a compressed stream
    zlib cannot inflate, a member cut short) is the same ``ValueError`` as any other corruption."""
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as err:
        raise ValueError(f"{path} is not a GRPO checkpoint (its member {name!r} is corrupt: {err})") from err
