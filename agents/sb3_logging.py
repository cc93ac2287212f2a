"""SB3 logger set-up for the GRPO agent (imports torch through stable_baselines3)."""

from __future__ import annotations

import sys
from typing import Any

from stable_baselines3.common.logger import CSVOutputFormat, HumanOutputFormat, KVWriter, Logger

__all__ = ["OneLineFormat", "make_logger"]

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
    "time/fps": "fps",
}


class OneLineFormat(KVWriter):
    """An SB3 ``KVWriter`` that prints one compact line per dump (the CLI's per-iteration line)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
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
        self.stream.write(" | ".join(parts) + "\n")
        self.stream.flush()

    def close(self) -> None:
        pass


def make_logger(verbose: int, log_dir: str | None, tensorboard: bool) -> Logger:
    """stdout (one line per dump for verbose=1, SB3's tables for verbose=2), CSV and TensorBoard."""
    formats: list[KVWriter] = []
    if verbose == 1:
        formats.append(OneLineFormat())
    elif verbose == 2:
        formats.append(HumanOutputFormat(sys.stdout))
    if log_dir is not None:
        import os

        os.makedirs(log_dir, exist_ok=True)
        formats.append(CSVOutputFormat(os.path.join(log_dir, "progress.csv")))
        if tensorboard:
            from stable_baselines3.common.logger import make_output_format

            formats.append(make_output_format("tensorboard", log_dir))
    return Logger(folder=log_dir, output_formats=formats)
