"""``python -m agents.grpo``: train GRPO from the shell, the lesson's ``python3 main.py`` grown up.

Prints one line per iteration (group reward mean, solve rate, format violations, share of tied groups,
KL to the reference, clip fraction, entropy, fps; with ``--eval-freq`` also greedy and sampled success
and pass@k per split), then an evaluation on the train and held-out prompts: greedy success, sampled
success (mean over k answers per prompt), pass@k and the worst prompt's sampled success. Every
:class:`~agents.grpo.config.GRPOConfig` field is a flag (``--group-size``, ``--beta``, ...).

Torch threads: a neural policy trains with ``--threads`` torch threads (default 1, set before training).
The networks are tiny, and torch's default (one thread per core) ran 8.5x slower on a busy 2-core
machine. The tabular policy never imports torch. A bad value is a usage error (exit status 2): the
message under a one-line usage (``--help`` lists every flag).

Outputs: every path the run will write (``--save``, ``--json``, ``--log-dir``, ``--tensorboard``) is
checked before anything trains (missing folders are created); one that cannot be written is one line
on stderr (exit status 1). With ``--sft`` the cold-started base's evaluation is one line before RL.
Ctrl-C (during the cold start, training or the evaluations) prints one line, saves the model trained so
far to ``--save`` and writes ``--json`` with ``"interrupted": true``, the phase and the env steps done
(exit status 130).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import tempfile
import typing
from pathlib import Path

import gymnasium as gym

import rlvr_env  # noqa: F401  (registers the rlvr/* environments)
from agents.evaluation import split_scores
from agents.grpo.agent import GRPO
from agents.grpo.checkpoint import checkpoint_path
from agents.grpo.config import GRPOConfig
from agents.grpo.presets import COLD_START, PRESETS, Unset
from agents.policies import TABULAR_DEFAULT_LR, policy_names
from rlvr_env.envs import TokenEnv


#: The one-line usage a usage error prints above its message (``--help`` lists every flag).
USAGE = "%(prog)s [--env ID] [--policy NAME] [--total-timesteps N] [options]  (--help lists them all)"


def _config_flags(parser: argparse.ArgumentParser) -> None:
    hints = typing.get_type_hints(GRPOConfig)
    docs = GRPOConfig.field_docs()
    group = parser.add_argument_group(
        "GRPOConfig fields (an unset flag takes the value that will run: the --policy's preset, "
        "GRPOConfig.preset(policy), shown per policy)")
    runs = {policy: GRPOConfig.preset(policy) for policy in policy_names() if policy in PRESETS}
    for field in dataclasses.fields(GRPOConfig):
        flag = "--" + field.name.replace("_", "-")
        hint = hints[field.name]
        values = {policy: getattr(cfg, field.name) for policy, cfg in runs.items()}
        if len(set(map(repr, values.values()))) == 1:
            runs_as = f"runs with: {next(iter(values.values()))}"
        else:
            runs_as = "runs with: " + ", ".join(f"{p} {v}" for p, v in values.items())
        if field.name == "learning_rate":
            runs_as += f"; tabular with --tabular-optimizer adam: {TABULAR_DEFAULT_LR['adam']}"
        doc = docs.get(field.name, "").replace("%", "%%") + f" ({runs_as.replace('%', '%%')})"
        if hint is bool:
            group.add_argument(flag, type=_parse_bool, default=None, metavar="{true,false}", help=doc)
        elif hint is int:
            group.add_argument(flag, type=_parse_int, default=None, help=doc)
        elif hint in (int | None,):
            group.add_argument(flag, type=_parse_optional_int, default=None, help=doc)
        elif hint in (float, float | None, float | None | Unset):
            group.add_argument(flag, type=_parse_optional_float, default=None, help=doc)
        else:
            group.add_argument(flag, type=str, default=None, help=doc)


def _parse_bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true/false)")


def _parse_optional(kind: type, what: str) -> typing.Callable[[str], typing.Any]:
    """An argparse type: ``kind(text)``, or ``"none"`` for None (the field's own meaning of None: the
    policy's preset for most fields, the symmetric clip for ``clip_eps_high``)."""

    def parse(text: str) -> typing.Any:
        if text.lower() == "none":
            return "none"
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (or 'none')") from None

    return parse


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _bounded_int(low: int) -> typing.Callable[[str], int]:
    """An argparse type: an integer of at least ``low``, else a usage error naming the value."""
    rule = "a positive integer" if low == 1 else f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is not {rule}")
        return value

    return parse


_positive_int = _bounded_int(1)
_non_negative_int = _bounded_int(0)
_parse_optional_int = _parse_optional(int, "an integer")
_parse_optional_float = _parse_optional(float, "a number")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agents.grpo", description=__doc__, usage=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="rlvr/Arithmetic-v0",
                        help="Gymnasium env id, or Gymnasium's module:id (the module, e.g. one of yours that "
                             "calls register_envs, is imported first: my_tasks:me/MyTask-v0)")
    parser.add_argument("--env-kwargs", default="{}", help="JSON dict of gym.make kwargs")
    parser.add_argument("--policy", default="tabular", metavar="NAME",
                        help=f"a registered policy name {policy_names()}, or a Policy class by its import "
                             "path module:Class (the module is imported)")
    parser.add_argument("--preset", default=None, choices=sorted(PRESETS),
                        help="start from this named preset instead of the policy's (e.g. countdown); "
                             "flags still override it")
    parser.add_argument("--policy-kwargs", default="{}",
                        help='JSON dict for the policy, e.g. \'{"n_layers": 3}\' for the transformer')
    parser.add_argument("--seed", type=_non_negative_int, default=0)
    parser.add_argument("--total-timesteps", type=_non_negative_int, default=50_000,
                        help="budget in env steps (0: no RL, e.g. to evaluate the cold start alone)")
    parser.add_argument("--log-interval", type=_positive_int, default=1,
                        help="iterations between printed lines")
    parser.add_argument("--log-dir", default=None, help="also write SB3 CSV logs here")
    parser.add_argument("--tensorboard", default=None, metavar="DIR",
                        help="also write TensorBoard event files here (GRPO(log_dir=..., tensorboard=True); "
                             'needs pip install ".[tensorboard]" in a clone)')
    parser.add_argument("--progress-bar", action="store_true")
    parser.add_argument("--save", default=None,
                        help="write a checkpoint zip here (.zip added to a name without a suffix, as SB3 "
                             "does); checked before training, and written on Ctrl-C too")
    parser.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    parser.add_argument("--threads", type=_positive_int, default=1,
                        help="torch threads for a neural policy (torch.set_num_threads, before training; "
                             "default 1: the networks are tiny and more threads are slower on a busy "
                             "machine); the tabular policy does not use torch")
    parser.add_argument("--eval-freq", type=_non_negative_int, default=0,
                        help="iterations between evaluations logged as eval/* (0: only at the end)")
    parser.add_argument("--eval-k", type=_positive_int, default=16,
                        help="sampled answers per prompt for sampled success (mean@k) and pass@k")
    parser.add_argument("--eval-prompts", type=_positive_int, default=None,
                        help="prompts per split for evaluations (default: all of a finite task, else 256)")
    # the R1 recipe (cold start, then GRPO) and a machine-readable result
    parser.add_argument("--sft", type=_non_negative_int, default=0,
                        help="supervised cold start on this many train-split solutions before GRPO "
                             "(agents.sft; 0: train from scratch); the SFT model is the KL reference")
    parser.add_argument("--sft-epochs", type=_positive_int, default=COLD_START["epochs"],
                        help="epochs of the cold start")
    parser.add_argument("--sft-lr", type=float, default=COLD_START["learning_rate"],
                        help="Adam step size of the cold start")
    parser.add_argument("--sft-batch-size", type=_positive_int, default=COLD_START["batch_size"],
                        help="answers per cold-start step")
    parser.add_argument("--sft-minibatch", choices=("prompts", "answers"),
                        default=COLD_START["minibatch"],
                        help="cold-start minibatches: whole prompts with all their answers (prompts) or "
                             "uniformly shuffled solutions (answers)")
    parser.add_argument("--sft-warmup", type=float, default=COLD_START["warmup"],
                        help="fraction of the cold start's steps with a linear step-size warm-up")
    parser.add_argument("--sft-fit", choices=("masked", "unmasked"), default="masked",
                        help="the cold start's cross-entropy under the grammar masks the agent decodes "
                             "with (masked) or over every token (unmasked; the agent still decodes with its "
                             "masks)")
    parser.add_argument("--json", default=None,
                        help="write the final metrics (test_greedy, test_sampled, test_pass_at_k, "
                             "train_greedy, ... and the base model's, base_*) as JSON here; on Ctrl-C the "
                             'record so far with "interrupted": true and the env steps done')
    _config_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as err:
        parser.error(f"--env-kwargs {args.env_kwargs!r} is not JSON: {err}")
    if not isinstance(env_kwargs, dict):
        parser.error(f"--env-kwargs {args.env_kwargs!r} must be a JSON object (a dict of gym.make kwargs)")
    try:
        policy_kwargs = json.loads(args.policy_kwargs)
    except json.JSONDecodeError as err:
        parser.error(f"--policy-kwargs {args.policy_kwargs!r} is not JSON: {err}")
    if not isinstance(policy_kwargs, dict):
        parser.error(f"--policy-kwargs {args.policy_kwargs!r} must be a JSON object")
    try:
        config = config_from_args(args)
    except ValueError as err:
        parser.error(str(err))
    save_path = _check_outputs(args)  # before anything trains: a run must never end unable to write
    try:
        model = GRPO(args.env, config, policy=args.policy, seed=args.seed,
                     env_kwargs=env_kwargs, policy_kwargs=policy_kwargs,
                     verbose=0 if args.quiet else 1, log_interval=args.log_interval, log_dir=args.log_dir,
                     eval_freq=args.eval_freq, eval_k=args.eval_k, eval_prompts=args.eval_prompts)
    except (ValueError, TypeError, gym.error.Error) as err:  # a bad flag value, env id or env kwarg
        parser.error(str(err))
    except ImportError as err:  # a policy whose extra is not installed (the message names the install)
        raise SystemExit(f"error: --policy {args.policy}: {err}") from None
    if args.tensorboard is not None:
        from agents.grpo.logging import make_logger

        try:
            model.set_logger(make_logger(model.verbose, args.log_dir, True, tensorboard_dir=args.tensorboard))
        except ImportError as err:
            raise SystemExit(f"error: --tensorboard: {err}") from None
    if model.policy.uses_torch:  # a torch policy: one thread unless asked (see the module docstring)
        import torch

        torch.set_num_threads(args.threads)
    print(f"GRPO ({args.policy}) on {args.env}, seed {args.seed}: {model.config}")
    record: dict[str, typing.Any] = {"argv": sys.argv[1:] if argv is None else list(argv),
                                     "env": args.env, "env_kwargs": model.env_kwargs, "policy": args.policy,
                                     "seed": args.seed, "config": model.config.to_dict(),
                                     "policy_kwargs": model.policy_kwargs,
                                     "parameters": model.num_parameters()}
    token_env = isinstance(model.env.unwrapped, TokenEnv)
    phase = "set-up"
    try:
        if args.sft:
            try:
                from agents.sft import cold_start  # lazy: torch
            except ImportError as err:
                raise SystemExit(f"error: --sft: {err}") from None

            phase = "the cold start"
            print(f"cold start: {args.sft} train-split solutions, {args.sft_epochs} epochs ...", flush=True)
            try:
                record.update(cold_start(model, args.sft, epochs=args.sft_epochs,
                                         batch_size=args.sft_batch_size, learning_rate=args.sft_lr,
                                         minibatch=args.sft_minibatch, warmup=args.sft_warmup,
                                         masked=None if args.sft_fit == "masked" else False))
            except ValueError as err:
                raise SystemExit(f"error: {err}") from None
            print(f"cold start: {args.sft} train-split solutions, {args.sft_epochs} epochs in "
                  f"{record['sft_seconds']:.1f} s, loss per token {record['sft_losses'][-1]:.3f}")
            if token_env:  # the base's score, before RL changes it
                phase = "the base's evaluation"
                record.update(split_scores(model, args.eval_k, args.eval_prompts, "base_"))
                print(_base_line(record, args.eval_k), flush=True)
        phase = "training"
        if args.total_timesteps > 0:
            model.learn(args.total_timesteps, progress_bar=args.progress_bar)
        phase = "the final evaluation"
        _trained(model, record)
        if token_env:
            record.update(split_scores(model, args.eval_k, args.eval_prompts, show=True))
        else:
            print(f"greedy mean return over 10 episodes: {model.evaluate():.2f}")
    except KeyboardInterrupt:
        record.update({"interrupted": True, "interrupted_during": phase, "num_timesteps": model.num_timesteps,
                       "iterations": model.iterations})
        wrote = [str(p) for p in (save_path, args.json) if p is not None]
        print(f"interrupted during {phase} after {model.num_timesteps} of {args.total_timesteps} env steps"
              + (f"; saving the model trained so far to {' and '.join(wrote)}" if wrote else
                 "; nothing saved (no --save or --json)"), file=sys.stderr, flush=True)
        with _no_interrupts():
            _write_outputs(model, record, save_path, args.json, quiet=True)  # the line above names them
        return 130  # 128 + SIGINT, as a shell reports a program stopped by Ctrl-C
    record["interrupted"] = False
    _write_outputs(model, record, save_path, args.json)
    return 0


def config_from_args(args: argparse.Namespace) -> GRPOConfig:
    """The (unresolved) config the flags ask for: the named ``--preset`` with the flags applied, or just
    the flags (the policy's preset fills the rest inside GRPO). ``none`` is None: the preset's value
    for most fields, the symmetric clip for ``--clip-eps-high``, no clip for ``--max-grad-norm``."""
    overrides = {}
    for field in dataclasses.fields(GRPOConfig):
        value = getattr(args, field.name)
        if value is not None:
            overrides[field.name] = None if value == "none" else value
    if args.preset is not None:
        return GRPOConfig.preset(args.preset, **overrides)
    return GRPOConfig(**overrides)


def _check_outputs(args: argparse.Namespace) -> Path | None:
    """Check every path the run will write (``--save``, ``--json``, ``--log-dir``, ``--tensorboard``)
    before training, creating missing folders as the writers would; a path that cannot be written is
    one line on stderr (exit status 1). Returns the checkpoint's file (``.zip`` added as SB3 does)."""
    save_path = None if args.save is None else checkpoint_path(args.save)
    files = {"--save": save_path, "--json": None if args.json is None else Path(args.json)}
    for flag, path in files.items():
        if path is None:
            continue
        if path.is_dir():
            raise SystemExit(f"error: {flag} {path} is a folder; name a file in it (e.g. {path / 'out'}"
                             f"{'.zip' if flag == '--save' else '.json'})")
        _check_folder(flag, path, path.parent)
    json_path = files["--json"]
    if save_path is not None and json_path is not None and save_path.resolve() == json_path.resolve():
        raise SystemExit(f"error: --save and --json both name {save_path}; one would overwrite the other")
    for flag, folder in (("--log-dir", args.log_dir), ("--tensorboard", args.tensorboard)):
        if folder is not None:
            _check_folder(flag, Path(folder), Path(folder))
    return save_path


def _check_folder(flag: str, path: Path, folder: Path) -> None:
    """Create ``folder`` if missing and write (then remove) a probe file in it; one line if impossible."""
    if folder.exists() and not folder.is_dir():
        raise SystemExit(f"error: {flag} {path}: {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise SystemExit(f"error: {flag} {path}: cannot write in {folder} ({reason})") from None


def _trained(model: GRPO, record: dict[str, typing.Any]) -> None:
    seconds = model.train_seconds  # the training loop only: no logger/torch set-up, no evaluation
    record.update({"num_timesteps": model.num_timesteps, "train_seconds": seconds,
                   "steps_per_second": model.num_timesteps / max(seconds, 1e-9)})
    print(f"trained {model.num_timesteps} env steps in {seconds:.2f} s "
          f"({model.num_timesteps / max(seconds, 1e-9):.0f} steps/s), {model.num_parameters()} parameters")


def _base_line(record: dict[str, typing.Any], k: int) -> str:
    """One line with the cold-started base's evaluation (the ``base_*`` entries of ``record``)."""
    parts = [f"{split} greedy {record[f'base_{split}_greedy']:.3f}, sampled (mean@{k}) "
             f"{record[f'base_{split}_sampled']:.3f}, pass@{k} {record[f'base_{split}_pass_at_k']:.3f}"
             for split in ("test", "train")]
    return "base after the cold start, before RL: " + "; ".join(parts).replace("test", "test (held-out)", 1)


def _write_outputs(model: GRPO, record: dict[str, typing.Any], save_path: Path | None, json_path: str | None,
                   quiet: bool = False) -> None:
    """The checkpoint and the JSON record, each written whole or not at all (temp file, then rename)."""
    if save_path is not None:
        model.save(save_path)
        if not quiet:
            print(f"saved {save_path}")
    if json_path is not None:
        path = Path(json_path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, path)
        if not quiet:
            print(f"wrote {json_path}")


@contextlib.contextmanager
def _no_interrupts() -> typing.Iterator[None]:
    """Ignore Ctrl-C while the interrupted run's files are written (main thread only; elsewhere a no-op)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals cannot be changed here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C before the model exists (imports, env set-up): nothing to save
        print("interrupted before training began; nothing saved", file=sys.stderr)
        sys.exit(130)
