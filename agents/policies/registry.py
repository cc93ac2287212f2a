"""Policies by name: what ``GRPO(env, policy=...)`` accepts besides a :class:`Policy` class (as SB3 takes
``"MlpPolicy"`` or a policy class).

The built-in names are ``"tabular"`` (:class:`agents.policies.tabular.TabularPolicy`, NumPy only),
``"mlp"`` (:class:`agents.policies.mlp.MLPPolicy`) and ``"transformer"``
(:class:`agents.policies.transformer.TransformerPolicy`); the torch ones are imported when first asked for,
so naming the tabular policy never imports torch. :func:`register_policy` adds a name for any
:class:`Policy` subclass; a checkpoint stores the name and :meth:`agents.grpo.GRPO.load` finds the class
here again. A class can also be named by its import path ``"module:QualName"`` (as Gymnasium names an
entry point): :func:`policy_class` imports the module, and a checkpoint of an unregistered class defined
at a module's top level stores that path. A class defined inside a function (or in ``__main__``) has no
path another process can import: it trains, but cannot be saved unless registered. A path from before
the policies had a package of their own (``"agents.grpo.mlp:MLPPolicy"``) names the class where it lives
now (:data:`MOVED_POLICY_PATHS`).

What a policy needs from the agent it declares on its class, not here: its config preset
(``Policy.preset``), whether it reads the token context (``Policy.token_observation``), whether a
checkpoint saves a torch optimiser (``Policy.uses_torch``), how it is built (:meth:`Policy.build`), and
whether it serves a learned critic (``CriticPolicy`` among its bases).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

from agents.policies.protocol import Policy
from agents.policies.tabular import TabularPolicy

__all__ = ["MOVED_POLICY_PATHS", "class_path", "import_path", "moved_policy_path", "policy_class",
           "policy_names", "register_policy", "registered_name"]

P = TypeVar("P", bound=type[Policy])


#: The import paths of the policy classes that lived in ``agents.grpo`` before ``agents.policies`` was a
#: package of its own -> where they live now: a checkpoint or a ``policy="module:Class"`` argument that
#: names an old path gets the class at its new one (the built-ins' checkpoints store their names, which
#: did not change).
MOVED_POLICY_PATHS: dict[str, str] = {
    "agents.grpo.policies:Policy": "agents.policies.protocol:Policy",
    "agents.grpo.policies:TabularPolicy": "agents.policies.tabular:TabularPolicy",
    "agents.grpo.torch_policy:TorchPolicy": "agents.policies.torch_base:TorchPolicy",
    "agents.grpo.mlp:MLPPolicy": "agents.policies.mlp:MLPPolicy",
    "agents.grpo.transformer:TransformerPolicy": "agents.policies.transformer:TransformerPolicy",
}


def moved_policy_path(path: str) -> str:
    """``path`` (``"module:QualName"``), or where the class it names lives now when it moved
    (:data:`MOVED_POLICY_PATHS`)."""
    return MOVED_POLICY_PATHS.get(path, path)


def _mlp() -> type[Policy]:
    from agents.policies.mlp import MLPPolicy  # lazy: torch

    return MLPPolicy


def _transformer() -> type[Policy]:
    from agents.policies.transformer import TransformerPolicy  # lazy: torch

    return TransformerPolicy


#: name -> the class, or a function that imports it (the torch policies: imported on first use)
_POLICIES: dict[str, type[Policy] | Callable[[], type[Policy]]] = {
    "tabular": TabularPolicy,
    "mlp": _mlp,
    "transformer": _transformer,
}


def _load(name: str) -> type[Policy]:
    entry = _POLICIES[name]
    if isinstance(entry, type):
        return entry
    cls = entry()
    _POLICIES[name] = cls
    return cls


@overload
def register_policy(name: str) -> Callable[[P], P]: ...


@overload
def register_policy(name: str, cls: P) -> P: ...


def register_policy(name: str, cls: P | None = None) -> P | Callable[[P], P]:
    """Register ``cls`` (a :class:`Policy` subclass) under ``name``, so ``GRPO(env, policy=name)`` builds
    it and a checkpoint of it loads. As a decorator: ``@register_policy("linear")`` above the class.
    ``ValueError`` for a name that is not a non-empty string, a class that is not a ``Policy``
    subclass, or a name already registered to another class (registering the same class again is a
    no-op)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a policy name must be a non-empty string, got {name!r}")

    def add(policy_cls: P) -> P:
        if not (isinstance(policy_cls, type) and issubclass(policy_cls, Policy)):
            raise ValueError(f"register_policy({name!r}, ...) needs a subclass of "
                             f"agents.policies.Policy, got {policy_cls!r}")
        if name in _POLICIES and _load(name) is not policy_cls:
            raise ValueError(f"policy name {name!r} is already registered to {_load(name).__qualname__}; "
                             "choose another name")
        _POLICIES[name] = policy_cls
        return policy_cls

    return add if cls is None else add(cls)


def policy_names() -> tuple[str, ...]:
    """Every registered policy name, the built-in ones first."""
    return tuple(_POLICIES)


def class_path(cls: type) -> str | None:
    """``"module:QualName"`` of ``cls``, the path :func:`import_path` imports it by; None for a class
    no other process can import that way (defined inside a function, or in ``__main__``)."""
    module, qualname = cls.__module__, cls.__qualname__
    if module == "__main__" or "<locals>" in qualname:
        return None
    return f"{module}:{qualname}"


def import_path(path: str, what: str = "object") -> Any:
    """The object ``path`` (``"module:QualName"``) names: the module is imported, then the (dotted)
    name looked up in it. ``ValueError`` naming the path and what failed (a malformed path, a module
    that cannot be imported, a name the module lacks)."""
    module, sep, qualname = path.partition(":")
    if not sep or not module or not qualname:
        raise ValueError(f"{what} {path!r} is not an import path of the form 'module:QualName'")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"{what} {path!r}: the module {module!r} cannot be imported ({err}); put it on "
                         "the Python path (e.g. PYTHONPATH) or install it") from err
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{what} {path!r}: the module {module!r} has no {qualname!r}") from None
    return obj


def policy_class(policy: str | type[Policy]) -> type[Policy]:
    """The class a ``policy=`` argument names: a registered name, an import path ``"module:Class"``
    (the module is imported; :func:`import_path`; a moved class's old path is read as its new one,
    :func:`moved_policy_path`), or a :class:`Policy` subclass itself. ``ValueError`` naming the value
    and the registered names otherwise."""
    if isinstance(policy, str) and ":" in policy:
        cls = import_path(moved_policy_path(policy), "policy")
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise ValueError(f"policy={policy!r} names {cls!r}, which is not a subclass of "
                             "agents.policies.Policy")
        return cls
    if isinstance(policy, str):
        if policy not in _POLICIES:
            raise ValueError(f"policy={policy!r} is not one of the registered policies {policy_names()}; "
                             "register a Policy class with agents.policies.register_policy, or name it "
                             "by its import path 'module:Class'")
        return _load(policy)
    if isinstance(policy, type) and issubclass(policy, Policy):
        return policy
    raise ValueError(f"policy={policy!r} must be a registered name {policy_names()} or a subclass of "
                     "agents.policies.Policy")


def registered_name(cls: type[Policy]) -> str | None:
    """The name ``cls`` is registered under (None when it is not). A built-in torch policy that has not
    been imported yet is not ``cls`` (``cls`` exists, so its module was imported), so nothing is loaded
    here that is not loaded already."""
    for name, entry in _POLICIES.items():
        if entry is cls or (not isinstance(entry, type) and getattr(cls, "kind", None) == name
                            and _load(name) is cls):
            return name
    return None
