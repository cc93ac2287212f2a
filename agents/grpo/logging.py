"""The GRPO agent's logger: Stable-Baselines3's ``Logger`` when SB3 is installed (stdout, CSV,
TensorBoard), else a plain stdout logger that prints the same one line per dump.

SB3 (and through it torch) comes with the ``torch`` extra. Without it, ``verbose=1`` still prints its
line; SB3's table format (``verbose=2``) and its CSV/TensorBoard files (``log_dir``) raise an
``ImportError`` naming the extra. This module is imported only when a logger is made.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from agents.extras import missing_extra

try:  # SB3 imports torch; a missing (or broken) install leaves the plain logger
    from stable_baselines3.common import logger as sb3_logger
except ImportError as err:
    sb3_logger = None  # type: ignore[assignment]
    _SB3_MISSING: ImportError | None = err
else:
    _SB3_MISSING = None

__all__ = ["OneLineFormat", "StdoutLogger", "make_logger", "one_line"]

# Short names for the one-line stdout format, in print order.
_SHORT = {
    "time/iterations": "iter",
    "time/total_timesteps": "steps",
    "rollout/reward_mean": "reward",
    "rollout/solve_rate": "solve",
    "rollout/format_violations": "fmt_viol",
    "rollout/zero_std_group_frac": "tied",
    "train/kl": "kl",
    "train/clip_frac": "clip",
    "train/entropy": "entropy",
    "train/value_loss": "vloss",  # advantage="gae" (the critic's)
    "train/explained_variance": "ev",
    "time/fps": "fps",
}


def one_line(key_values: Mapping[str, Any]) -> str:
    """The compact per-iteration line (the CLI's): the keys of ``_SHORT`` present, then the evaluations."""
    parts = []
    for key, short in _SHORT.items():
        if key in key_values:
            value = key_values[key]
            text = f"{int(value)}" if short in ("iter", "steps", "fps") else f"{value:.3f}"
            parts.append(f"{short} {text}")
    for split in ("train", "test"):  # evaluations (GRPO eval_freq): greedy / sampled / pass@k
        greedy = key_values.get(f"eval/{split}_greedy")
        if greedy is not None:
            sampled = key_values[f"eval/{split}_sampled"]
            pass_k = next(v for k, v in key_values.items() if k.startswith(f"eval/{split}_pass@"))
            parts.append(f"{split} greedy/sampled/pass@k {greedy:.2f}/{sampled:.2f}/{pass_k:.2f}")
    return " | ".join(parts)


# An SB3 ``KVWriter`` when SB3 is installed (its Logger writes only to KVWriter instances).
_WriterBase: type = object if sb3_logger is None else sb3_logger.KVWriter


class OneLineFormat(_WriterBase):  # type: ignore[misc, valid-type]
    """Prints :func:`one_line` per dump (an SB3 ``KVWriter`` when SB3 is installed)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
        self.stream.write(one_line(key_values) + "\n")
        self.stream.flush()

    def close(self) -> None:
        pass


class StdoutLogger:
    """The part of SB3's ``Logger`` the agent uses (``record``, ``dump``, ``close``), for installs
    without SB3: each dump hands the recorded values to ``output_formats`` and clears them."""

    def __init__(self, output_formats: list[OneLineFormat]) -> None:
        self.output_formats = output_formats
        self.name_to_value: dict[str, Any] = {}

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        self.name_to_value[key] = value

    def dump(self, step: int = 0) -> None:
        for fmt in self.output_formats:
            fmt.write(self.name_to_value, {}, step)
        self.name_to_value.clear()

    def close(self) -> None:
        for fmt in self.output_formats:
            fmt.close()


def make_logger(verbose: int, log_dir: str | None, tensorboard: bool,
                tensorboard_dir: str | None = None) -> Any:
    """stdout (one line per dump for verbose=1, SB3's tables for verbose=2), CSV in ``log_dir`` and, with
    ``tensorboard``, TensorBoard files in ``tensorboard_dir`` (default: ``log_dir``)."""
    if tensorboard and tensorboard_dir is None:
        tensorboard_dir = log_dir
    if sb3_logger is None:
        if verbose == 2 or log_dir is not None or tensorboard:
            what = ("verbose=2 (SB3's tables)" if verbose == 2 else
                    "TensorBoard logs" if tensorboard else "log_dir (SB3's CSV/TensorBoard logs)")
            raise missing_extra(what, "stable-baselines3") from _SB3_MISSING
        return StdoutLogger([OneLineFormat()] if verbose == 1 else [])
    formats: list[Any] = []
    if verbose == 1:
        formats.append(OneLineFormat())
    elif verbose == 2:
        formats.append(sb3_logger.HumanOutputFormat(sys.stdout))
    if log_dir is not None:
        os.makedirs(log_dir, exist_ok=True)
        formats.append(sb3_logger.CSVOutputFormat(os.path.join(log_dir, "progress.csv")))
    if tensorboard and tensorboard_dir is not None:
        if getattr(sb3_logger, "SummaryWriter", None) is None:  # SB3 found no tensorboard
            raise ImportError('TensorBoard logs need tensorboard, which is not installed; install it '
                              'with pip install ".[tensorboard]" in a clone of the repository (or pip '
                              'install tensorboard)')
        os.makedirs(tensorboard_dir, exist_ok=True)
        formats.append(sb3_logger.make_output_format("tensorboard", tensorboard_dir))
    return sb3_logger.Logger(folder=log_dir or tensorboard_dir, output_formats=formats)
