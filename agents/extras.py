"""The optional dependencies of ``agents`` and the extra that installs them.

``pip install .`` (in a clone) brings gymnasium and NumPy only: the environments, the verifier and the
tabular GRPO run on that. The neural policies (torch), SB3's logger and the SB3 baselines come with the
``torch`` extra; code that needs them imports them where it is used and, when they are missing, raises
:func:`missing_extra`'s ``ImportError``, which names the extra.
"""

from __future__ import annotations

__all__ = ["TORCH_EXTRA", "missing_extra"]

#: The install command that brings torch, stable-baselines3 and SB3's progress-bar packages, run in a
#: clone of the repository (the package is not on the package index, so pip finds it by its path).
TORCH_EXTRA = 'pip install ".[torch]" (in a clone of the repository)'


def missing_extra(what: str, package: str) -> ImportError:
    """The error to raise (``from`` the original one) when ``what`` needs ``package`` and it is absent."""
    return ImportError(f"{what} needs {package}, which is not installed; install it with {TORCH_EXTRA}")
