"""GRPO checkpoints: a zip of ``grpo.json`` (metadata, the resolved config, the generator state) and
``policy.npz`` (the policy's arrays; with ``advantage="gae"`` also the critic's, ``critic.*``), plus
``optimizer.pt`` (torch's Adam state) for the torch policies and ``critic_optimizer.pt`` (the critic's).
The policy is stored by its registered name (:mod:`agents.policies.registry`); loading finds the class
there, so a custom policy class loads once it is registered again. An unregistered class defined at a
module's top level is stored by its import path ``"module:Class"`` and imported on load (a path from
before the policies moved to :mod:`agents.policies`, e.g. ``"agents.grpo.mlp:MLPPolicy"``, is read as
where the class lives now: :data:`agents.policies.MOVED_POLICY_PATHS`); one defined inside a function
(or in ``__main__``) cannot be saved unless registered. The config is stored with its class's
import path (``"agents.grpo.config:GRPOConfig"``, or a user's subclass whose own fields a registered loss
reads), and the env id with the module that registers it when the agent knows it (the ``module:`` of
``env="module:id"``, else the module of the env spec's entry point, for ``register_envs`` the task
class's); :func:`load` imports those modules, as ``gym.make("module:id")`` does, or says which module to
import or which argument to pass.

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

import functools
import importlib
import io
import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.grpo.config import GRPOConfig
from agents.policies import import_path, moved_policy_path, policy_names

__all__ = ["CHECKPOINT_FORMAT", "checkpoint_path", "load", "registering_module", "save", "split_env_id"]

CHECKPOINT_FORMAT = "rlvr-env/grpo-checkpoint/v1"
_MAX_CHECKPOINT_MEMBER = 512 * 1024 * 1024


def checkpoint_path(path: str | Path) -> Path:
    """The file :func:`save` writes for ``path``: ``path`` with ``.zip`` added when its name has no
    suffix (as SB3's ``save_util.open_path`` does with ``suffix="zip"``), else ``path`` itself."""
    path = Path(path)
    return path.with_name(path.name + ".zip") if path.suffix == "" else path


def split_env_id(env: str) -> tuple[str | None, str]:
    """``(module, id)`` of Gymnasium's ``"module:id"`` form, with ``module`` imported (it registers
    ``id``); ``(None, env)`` for a bare id. ``ValueError`` naming the module when it cannot be imported."""
    if ":" not in env:
        return None, env
    module, _, env_id = env.partition(":")
    if not module or not env_id:
        raise ValueError(f"env={env!r} is neither an env id nor of the form 'module:id'")
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"env={env!r}: the module {module!r}, which should register {env_id!r}, cannot be "
                         f"imported ({err}); put it on the Python path (e.g. PYTHONPATH)") from err
    return module, env_id


def registering_module(spec: Any) -> str | None:
    """The module an env spec's entry point comes from, which (for ``register_envs`` and for a module
    that registers its own env class) is the module that registers the id: ``"module:Attr"``'s module,
    the task class of ``register_envs``'s ``partial(make_token_env, task)``, else the callable's
    ``__module__``. None when there is none to import (e.g. ``__main__``)."""
    entry = getattr(spec, "entry_point", None)
    if isinstance(entry, str):
        module: str | None = entry.partition(":")[0]
    elif isinstance(entry, functools.partial):
        target = entry.args[0] if entry.args and callable(entry.args[0]) else entry.func
        module = getattr(target, "__module__", None)
    else:
        module = getattr(entry, "__module__", None)
    return None if not module or module == "__main__" else module


def save(model: Any, path: str | Path) -> Path:
    """Write ``model`` (an :class:`agents.grpo.GRPO`) atomically to :func:`checkpoint_path` of ``path``,
    creating missing parent folders (see the module docstring); returns the path written."""
    if model.policy_name is None:
        raise ValueError(
            f"the policy class {type(model.policy).__qualname__} is not registered, and a checkpoint names "
            "its policy: register it first (agents.policies.register_policy(name, cls)), or define it "
            "at a module's top level (the checkpoint then stores its import path 'module:Class')")
    config_cls = type(model.config)
    meta = {
        "format": CHECKPOINT_FORMAT,
        "policy": model.policy_name,
        "config": model.config.to_dict(),
        "config_class": f"{config_cls.__module__}:{config_cls.__qualname__}",
        "seed": model.seed,
        "env_id": model.env_id,
        "env_module": getattr(model, "env_module", None),
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


def load(cls: Any, path: str | Path, env: str | gym.Env | None = None,
         config_class: type[GRPOConfig] | None = None) -> Any:
    """The ``cls`` (:class:`agents.grpo.GRPO`) model saved at ``path``; it predicts exactly as the saved
    one and continues training from the same generator state. ``env`` defaults to the stored env id
    (its stored registering module imported first); ``config_class`` to the stored config class."""
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
    if ":" in policy:  # an unregistered class by its import path
        try:
            policy = import_path(moved_policy_path(policy), "policy")
        except ValueError as err:
            raise ValueError(f"{path}: its {err}; or register the class and load again") from err
    config = _config(meta, path, config_class)
    if env is None:
        if not meta.get("env_id"):
            raise ValueError(f"{path} was trained on an env without an id; pass env= to load it")
        env = _registered_env(path, meta["env_id"], meta.get("env_module"))
        model = cls(env, config, policy, meta["seed"],
                    env_kwargs=meta.get("env_kwargs") or {}, policy_kwargs=meta.get("policy_kwargs"))
        model.env_module = meta.get("env_module") or model.env_module
    else:
        model = cls(env, config, policy, meta["seed"], policy_kwargs=meta.get("policy_kwargs"))
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


def _config(meta: dict[str, Any], path: Path, config_class: type[GRPOConfig] | None) -> GRPOConfig:
    """The stored config, rebuilt as ``config_class`` when given, else as the stored class (imported by
    its path; :class:`GRPOConfig` for a checkpoint that names none)."""
    stored = meta.get("config_class")
    if config_class is not None:
        if not (isinstance(config_class, type) and issubclass(config_class, GRPOConfig)):
            raise ValueError(f"config_class={config_class!r} must be GRPOConfig or a subclass of it")
        config_cls = config_class
    elif stored is None or stored == "agents.grpo.config:GRPOConfig":
        config_cls = GRPOConfig
    else:
        how = (f"import the module that defines {stored.partition(':')[2]!r}, or pass "
               f"GRPO.load(path, config_class=...) the GRPOConfig subclass the model was trained with")
        if not isinstance(stored, str) or "<locals>" in stored:
            raise ValueError(f"{path}: its config class {stored!r} was defined inside a function, so it "
                             f"cannot be imported; pass GRPO.load(path, config_class=...) that class")
        try:
            found = import_path(stored, "config class")
        except ValueError as err:
            raise ValueError(f"{path}: its {err}; {how}") from err
        if not (isinstance(found, type) and issubclass(found, GRPOConfig)):
            raise ValueError(f"{path}: its config class {stored!r} names {found!r}, not a GRPOConfig "
                             f"subclass; pass GRPO.load(path, config_class=...)")
        config_cls = found
    try:
        return config_cls.from_dict(meta["config"])
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{path}: its config (saved as {stored or 'GRPOConfig'}) does not fit {config_cls.__qualname__}: "
            f"{err}; pass GRPO.load(path, config_class=...) the GRPOConfig subclass the model was trained "
            "with") from err


def _registered_env(path: Path, env_id: str, module: str | None) -> str:
    """``env_id`` once it is registered: the stored registering ``module`` is imported when the id is
    not registered yet. ``ValueError`` naming the file, the id and the fix otherwise."""
    if env_id not in gym.registry and module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ValueError(
                f"{path} was trained on the env {env_id!r}, which the module {module!r} registers, and "
                f"that module cannot be imported here ({err}): put it on the Python path (e.g. "
                "PYTHONPATH), or pass env= (an env id or instance) to GRPO.load") from err
    if env_id not in gym.registry:
        where = f" (the module {module!r} was imported and did not register it)" if module else ""
        raise ValueError(
            f"{path} was trained on the env {env_id!r}, which is not registered in this process{where}: "
            f"import the module that registers it before loading (or pass env='your_module:{env_id}'), "
            "or pass env= (an env id or instance) to GRPO.load")
    return env_id


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
    if not isinstance(meta["policy"], str):
        raise ValueError(f"{path}: grpo.json names the policy {meta['policy']!r}, not a name or a path")
    if ":" not in meta["policy"] and meta["policy"] not in policy_names():
        raise ValueError(
            f"{path}: its policy {meta['policy']!r} is not registered (registered: {policy_names()}); "
            f"register its class first (agents.policies.register_policy({meta['policy']!r}, cls))")
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
