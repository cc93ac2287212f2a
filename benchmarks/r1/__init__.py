"""The R1 recipe on a CPU at equal budgets: a cold-started causal transformer, then RL, and what RL adds.

    python -m benchmarks.r1 [--seeds 10-14] [--budget 300000] [--workers 2] [--arms grpo,gae,...]
                            [--sft-budgets 1000,10000] [--no-ppo] [--ray-address ADDR]

Per seed, on ``rlvr/Countdown-v0`` (three numbers by default, ``observation="tokens"``, grammar masks):

- **bases** (stage 1): the supervised cold start (:func:`agents.sft.cold_start`, train-split solutions
  only) on the recipe's data budget and on each of ``--sft-budgets``; each base is evaluated alone;
- **RL** (stage 2) from the recipe's base, every arm for the same env-step budget (``--budget``):
  the agent's GRPO (the ``transformer`` preset, KL reference = its start), the agent's PPO with a
  learned critic (``advantage="gae"``: token-level GAE, a value network started from the base, as
  verl's ``gae`` estimator), RLOO and REINFORCE++-baseline (the agent's advantages; everything else is
  the preset's), sb3-contrib MaskablePPO (same masks) and SB3 PPO (unmasked: it may write malformed
  answers and is scored as written; its base is the same cold start without the masks, so it learned
  to avoid off-grammar tokens). Every arm gets the same network and initial weights
  (``agents.policies.transformer.copy_to_sb3`` for SB3). From scratch (the same seeded initial network, no
  cold start): the arms of ``--scratch-arms`` (every arm of ``--arms`` by default; SB3's two take
  20-30 CPU-minutes a run from scratch, the agent's 1-3).

SB3's arms run through the native vector env (:func:`rlvr_env.to_sb3_vec_env`) with the settings of
:data:`SB3_SETTINGS`, chosen on the unreported seeds (see its comment); SB3 re-encodes each step's
whole context in every update (no prefix shared), so its per-env-step cost is several times GRPO's.

Every model is scored by the same code (:mod:`agents.evaluation`; SB3 actors are copied back into the
transformer with :func:`~agents.policies.transformer.copy_from_sb3`, which gives their logits exactly):
greedy and sampled success and unbiased pass@k for k = 1..64 from 64 samples per prompt
(:meth:`~agents.evaluation.SuccessReport.pass_at`) on a fixed list of train and held-out prompts, and a
learning curve of held-out sampled success (8 samples per prompt) every ``--curve-every`` env steps.
Each run is one executor task (:mod:`benchmarks.core.executor`) with one torch thread; stage 2's
tasks carry their base's weights in their spec, so a cluster needs no shared filesystem. Results go to
``benchmark-runs/r1/`` (git-ignored) unless ``--update-results`` (``benchmarks/results/r1/``). The bases'
weights live only in a git-ignored cache; where it is missing (a fresh clone, another machine, whose
retrained base need not match to the last bit), a base whose every run is in the results folder is read
from there with its runs (:func:`committed_without_bases`), so the committed tables come back without
training; a seed or an arm not there trains its base again, and everything from it.
Settings were chosen on seeds 0-2; the reported seeds start at 10.
The summary, the goal verdicts and the table are :mod:`benchmarks.r1.report`'s.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from agents.grpo import PRESETS
from benchmarks.core.common import (
    LOCAL_OUT,
    RESULTS_DIR,
    add_executor_arguments,
    add_output_arguments,
    check_writable,
    command_line,
    limit_threads,
    machine_info,
    output_folder,
    positive_int,
    seeds_argument,
    write_atomically,
    write_results,
)
from benchmarks.core.executor import Outcome, Run, run_all
from benchmarks.core.store import RunFileError, check_run, code_version, run_key
from benchmarks.core.bases import (DEFAULT_ENV_KWARGS, ENV_ID, EVAL, RECIPE_SFT, SB3_SETTINGS, base_name,
                                   base_runs, evaluate, make_model)
from benchmarks.core.weights import load_weights
from benchmarks.r1.report import AGENT_ALGOS, ALGOS, SB3_ALGOS, headline, markdown, summarize

#: Stage 1's run files (bases with their weights, about 1 MB each): a git-ignored cache, never committed.
LOCAL_BASES = LOCAL_OUT / "r1" / "bases"


def rl_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Stage 2: one RL contender for ``spec["budget"]`` env steps from a base's weights (or from the
    seeded initial network when ``spec["base_weights"]`` is None), with a held-out learning curve."""
    threads = limit_threads(1, import_torch=True)
    algo, budget, ev = spec["algo"], int(spec["budget"]), spec["eval"]
    masked = algo != "ppo"
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is not one of {ALGOS}")
    if (spec["base_weights"] is None) != (spec["start"] == "scratch"):
        raise ValueError(f"start={spec['start']!r} with base_weights "
                         f"{'missing' if spec['base_weights'] is None else 'given'}: a run starts from a "
                         "base's weights or, as 'scratch', from the seeded network")
    if "preset" in spec and spec["preset"] != PRESETS["transformer"]:
        raise ValueError(f"this run's spec was made for the transformer preset {spec['preset']}, not the "
                         f"current {PRESETS['transformer']}")
    scorer = make_model(spec, masks=masked)  # GRPO trains this one; SB3 actors are copied into it to score
    if spec["base_weights"] is not None:
        load_weights(spec["base_weights"], scorer.policy.net)
    scorer.policy.restart_from_current()  # GRPO's KL reference = its start
    sb3 = _sb3_model(spec, scorer) if algo in SB3_ALGOS else None
    checkpoints = sorted(set(spec["points"]) | {budget})
    curve = [{"steps": 0, "test_sampled": evaluate(scorer, ev["curve_k"], ev["curve_prompts"],
                                                   ("test",))["test"]["sampled"]}]
    seconds, done = 0.0, 0
    for target in checkpoints:  # whole iterations / rollouts: a run ends at or just past each point
        if target <= done:
            continue
        start = time.perf_counter()
        if sb3 is None:
            scorer.learn(target - done, reset_num_timesteps=done == 0)
            done = scorer.num_timesteps
        else:
            sb3.learn(target - done, reset_num_timesteps=done == 0)
            done = sb3.num_timesteps
        seconds += time.perf_counter() - start
        if sb3 is not None:
            from agents.policies.transformer import copy_from_sb3

            copy_from_sb3(sb3, scorer.policy)
        curve.append({"steps": done, "train_seconds": seconds,
                      "test_sampled": evaluate(scorer, ev["curve_k"], ev["curve_prompts"],
                                               ("test",))["test"]["sampled"]})
    return {"algo": algo, "start": spec["start"], "seed": spec["seed"], "budget": budget, "steps_run": done,
            "train_seconds": seconds, "steps_per_second": done / max(seconds, 1e-9), "curve": curve,
            "eval": evaluate(scorer, ev["k"], ev["prompts"]), "torch_threads": threads}


def _sb3_model(spec: dict[str, Any], scorer: Any) -> Any:
    from benchmarks.core.baselines import make_sb3_transformer

    # the same start as GRPO's: the base, or the seeded network
    return make_sb3_transformer(spec["algo"], ENV_ID, spec["env_kwargs"], spec["seed"], spec["policy_kwargs"],
                                spec["sb3"], start=scorer.policy)


# -- the study ----------------------------------------------------------------------------------------
def stage1_runs(args: argparse.Namespace) -> list[Run]:
    """Stage 1's runs (:func:`benchmarks.core.bases.base_runs`): the recipe's base and each smaller one per
    seed, plus the unmasked base when the unmasked PPO arm is among ``args.arms``."""
    return base_runs(args.seeds, args.recipe, sft_budgets=args.sft_budgets, env_kwargs=args.env_kwargs,
                     evaluation=args.eval, unmasked="ppo" in args.arms)


def stage2_runs(args: argparse.Namespace, bases: dict[tuple[int, str], dict[str, Any]]) -> list[Run]:
    """Stage 2's runs; ``bases`` maps (seed, :func:`base_name`) to the base's record. Every arm of
    ``args.arms`` from the recipe's base (the unmasked PPO arm from the unmasked base), the agent's arms
    from scratch (those of ``args.scratch_arms``), GRPO from each smaller base; every run for
    ``args.budget`` env steps. SB3 arms from a base give the critic its own copy of the trunk (the value
    loss must not move a pretrained actor); from scratch SB3's default (one shared trunk) stays."""
    tasks = []
    for seed in args.seeds:
        recipe = args.recipe["n"]
        starts = [("base", recipe), ("scratch", 0)] + [("base", n) for n in args.sft_budgets if n != recipe]
        for start, n in starts:
            algos = [a for a in args.arms if n in (recipe, 0)] if n in (recipe, 0) else ["grpo"]
            if start == "scratch":
                algos = [a for a in algos if a in args.scratch_arms]
            for algo in algos:
                origin = "scratch" if start == "scratch" else base_name({"n": n, "masked": algo != "ppo"})
                if start == "base" and (seed, origin) not in bases:
                    continue  # its base failed: reported as missing
                name = f"{algo}_{origin}"
                sb3 = dict(args.sb3) if algo in SB3_ALGOS else None
                if sb3 is not None and start == "base":
                    sb3["share_features_extractor"] = False
                spec = {"seed": seed, "algo": algo, "start": origin, "env_kwargs": args.env_kwargs,
                        "policy_kwargs": {}, "budget": args.budget, "points": _points(args),
                        "eval": args.eval,
                        "base_weights": bases[(seed, origin)]["weights"] if start == "base" else None,
                        "sb3": sb3}
                if algo in AGENT_ALGOS:  # the preset it trains with is part of its key (never the SB3 arms')
                    spec["preset"] = dict(PRESETS["transformer"])
                if AGENT_ALGOS.get(algo):
                    spec["grpo"] = dict(AGENT_ALGOS[algo])
                tasks.append(Run("benchmarks.r1:rl_run", spec, run_key(name, spec), arm=name,
                                 label=f"{name} s{seed}"))
    return tasks


def committed_without_bases(out: Path, stage1: list[Run], args: argparse.Namespace
                            ) -> tuple[dict[tuple[int, str], dict[str, Any]], dict[str, dict[str, Any]]]:
    """The study's committed bases whose runs are all on disk, read without the bases' weights:
    ``(bases by (seed, name), their runs' records by stage-2 key)``; a base missing there trains (or
    comes from the cache) as usual, and so do the runs from it.

    A run from a base is keyed by the digest of its whole spec, the base's weights included, and a base
    trained again on another machine need not have the same weights to the last bit (torch's CPU kernels
    differ by instruction set), so its runs would all train again. Here a base is ``out/r1.json``'s record
    of it (seed and cold start as in ``stage1``, the study's evaluation and setting) and each run from it
    is the one run file in ``out/runs`` of its arm and seed whose record says the same algorithm, start,
    seed and budget, was made by this code version (:func:`~benchmarks.core.store.code_version`), and whose
    learning curve starts at the base's recorded score (the same weights scored by the same code). The
    checksums are checked; the fingerprints, which cover the weights, cannot be."""
    try:
        stored = json.loads((out / "r1.json").read_text())
    except (OSError, ValueError):
        return {}, {}
    if stored.get("eval") != args.eval or stored.get("env_kwargs") != args.env_kwargs:
        return {}, {}
    bases: dict[tuple[int, str], dict[str, Any]] = {}
    for run in stage1:
        same = [b for b in stored.get("bases", [])
                if b.get("seed") == run.spec["seed"] and b.get("sft") == run.spec["sft"]]
        if len(same) == 1:
            bases[(run.spec["seed"], run.arm)] = {**same[0], "weights": None}
    version = code_version()
    found: dict[tuple[int, str], dict[str, dict[str, Any]]] = {base: {} for base in bases}
    for run in stage2_runs(args, bases):
        spec = run.spec
        base = (spec["seed"], spec["start"])
        if base not in found:  # from scratch (keyed without a base), or its base is already out
            continue
        matches = []
        for path in sorted((out / "runs").glob(f"{run.arm}__s{spec['seed']}__*.json")):
            try:
                record = check_run(path)
            except RunFileError:
                continue
            worker = record.get("execution", {}).get("worker", {})
            if ([record.get(k) for k in ("algo", "start", "seed", "budget")]
                    == [spec[k] for k in ("algo", "start", "seed", "budget")]
                    and record["curve"][0]["test_sampled"] == bases[base]["curve_start"]
                    and {k: worker.get(k) for k in version} == version):
                matches.append(record)
        if len(matches) == 1:
            found[base][run.key] = matches[0]
        else:  # this base's runs are not all here: it trains (or comes from the cache), and so do they
            del found[base]
    return ({b: bases[b] for b in found},
            {key: record for records in found.values() for key, record in records.items()})


def _points(args: argparse.Namespace) -> list[int]:
    """Learning-curve points: every ``--curve-every`` env steps up to the budget (the same points for
    every arm, so steps to base + 0.1 are read at one resolution)."""
    return list(range(args.curve_every, args.budget + 1, args.curve_every))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.r1", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=seeds_argument(), default="10-14",
                        help="reported seeds (settings were chosen on 0-2): a list (10,11) or a range "
                             "(10-14)")
    parser.add_argument("--budget", type=positive_int, default=300_000,
                        help="env steps per RL run (every arm)")
    parser.add_argument("--arms", type=_arms, default=",".join(ALGOS),
                        help=f"comma-separated RL arms, of {', '.join(ALGOS)}")
    parser.add_argument("--scratch-arms", type=_scratch_arms, default=",".join(ALGOS),
                        help="the arms of --arms also trained from scratch (no cold start; default: every "
                        "one); '' for none")
    parser.add_argument("--curve-every", type=positive_int, default=10_000,
                        help="env steps between learning-curve points")
    parser.add_argument("--sft-budgets", type=_budgets, default="",
                        help=f"smaller cold starts (the recipe's is {RECIPE_SFT['n']:,}), each + GRPO")
    parser.add_argument("--sft", type=positive_int, default=RECIPE_SFT["n"],
                        help="the recipe's SFT solutions")
    parser.add_argument("--sft-epochs", type=positive_int, default=RECIPE_SFT["epochs"])
    parser.add_argument("--sft-fit", choices=("masked", "unmasked"), default="masked",
                        help="the cold start's cross-entropy under the grammar masks the bases decode with "
                             "(the recipe) or over every token (the bases still decode with the masks; a "
                             "study with 'unmasked' writes its own results subfolder)")
    parser.add_argument("--eval-prompts", type=positive_int, default=EVAL["prompts"],
                        help="prompts per split for the final scores (64 samples each)")
    parser.add_argument("--env-kwargs", type=_env_kwargs, default='{"n_numbers": 3}',
                        help="Countdown's keywords as JSON, e.g. '{\"n_numbers\": 4}' or "
                             "'{\"n_numbers\": 3, \"operators\": \"+-*\", \"number_range\": [1, 12]}'")
    parser.add_argument("--sb3", type=_sb3_settings, default="{}",
                        help="JSON overrides of the SB3 arms' settings (n_envs, n_steps, batch_size, "
                             "n_epochs, learning_rate, or any PPO keyword), e.g. '{\"n_epochs\": 2}'; "
                             "a study with overrides writes its own results subfolder")
    parser.add_argument("--no-ppo", action="store_true",
                        help="skip the SB3 arms (MaskablePPO and PPO) and the unmasked base")
    add_executor_arguments(parser)
    add_output_arguments(parser, "r1", RESULTS_DIR / "r1")
    return parser


def recipe_of(args: argparse.Namespace) -> dict[str, Any]:
    """The cold start the study's bases take: :data:`RECIPE_SFT` with ``--sft``, ``--sft-epochs`` and,
    for ``--sft-fit unmasked``, ``fit_masks: False`` (a key the recipe's own bases do not carry)."""
    recipe = {**RECIPE_SFT, "n": args.sft, "epochs": args.sft_epochs}
    if args.sft_fit == "unmasked":
        recipe["fit_masks"] = False
    return recipe


def _env_kwargs(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"--env-kwargs {text!r} is not JSON ({err.msg})") from None
    if not isinstance(value, dict) or "observation" in value or "split" in value:
        raise argparse.ArgumentTypeError(f"--env-kwargs {text!r} must be a JSON object without 'observation' "
                                         "or 'split' (the study sets both)")
    return value


def _slug(env_kwargs: dict[str, Any]) -> str:
    """A folder name for a setting: ``{"n_numbers": 4, "operators": "+-*"}`` -> ``n_numbers4_operatorsPMT``.
    """
    ops = str.maketrans({"+": "P", "-": "M", "*": "T", "/": "D"})
    parts = [k + re.sub(r"[^A-Za-z0-9]+", "-", str(v).translate(ops) if k == "operators" else str(v))
             .strip("-") for k, v in sorted(env_kwargs.items())]
    return "_".join(parts)


def results_folder(env_kwargs: dict[str, Any], recipe: dict[str, Any],
                   sb3: dict[str, Any] | None = None) -> str:
    """The subfolder of a non-default study ("" for the default): the setting's :func:`_slug`, then each
    cold-start setting that differs from :data:`RECIPE_SFT` (``sft_epochs16``, ``sft_n50000``), then each
    SB3 setting that differs from :data:`SB3_SETTINGS` (``sb3_n_epochs2``)."""
    parts = [_slug(env_kwargs)] if env_kwargs != DEFAULT_ENV_KWARGS else []
    parts += [f"sft_{k}{v}" for k, v in sorted(recipe.items()) if RECIPE_SFT.get(k) != v]
    parts += [f"sb3_{k}{v}" for k, v in sorted((sb3 or {}).items()) if SB3_SETTINGS.get(k) != v]
    return "_".join(parts)


def _sb3_settings(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"--sb3 {text!r} is not JSON ({err.msg})") from None
    if not isinstance(value, dict) or "share_features_extractor" in value:
        raise argparse.ArgumentTypeError(f"--sb3 {text!r} must be a JSON object without "
                                         "'share_features_extractor' (the study sets it per start)")
    return {**SB3_SETTINGS, **value}


def _arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ALGOS]
    if unknown or not arms:
        raise argparse.ArgumentTypeError(f"--arms {text!r}: {unknown or 'none'} not among {', '.join(ALGOS)}")
    return arms


def _scratch_arms(text: str) -> list[str]:
    """``--scratch-arms``: like ``--arms``, and empty (``''``) trains nothing from scratch."""
    return _arms(text) if text.strip() else []


def _budgets(text: str) -> tuple[int, ...]:
    return tuple(positive_int(part) for part in text.split(",") if part.strip())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.no_ppo:
        args.arms = [a for a in args.arms if a not in SB3_ALGOS]
    args.recipe = recipe_of(args)
    args.eval = {**EVAL, "prompts": args.eval_prompts,
                 "curve_prompts": min(EVAL["curve_prompts"], args.eval_prompts)}
    try:
        out = output_folder(args)
    except ValueError as err:
        parser.error(str(err))
    folder = results_folder(args.env_kwargs, args.recipe, args.sb3)
    if folder:  # another setting or cold start: its own subfolder, never the default's
        out = out / folder
    rerun = [r for r in args.rerun.split(",") if r]
    common = {"address": args.ray_address, "workers": args.workers, "progress": not args.quiet,
              "rerun": rerun,
              "log": print}
    # Bases carry their weights (about 1 MB each): kept in the git-ignored cache, never committed.
    cache = args.out / "bases" if args.out is not None else LOCAL_BASES
    stage1 = stage1_runs(args)
    check_writable(out)  # the results folder too, before the bases train
    # a base whose every run is committed needs no weights (this machine's retrained base may differ)
    stored, found = committed_without_bases(out, stage1, args) if not rerun else ({}, {})
    if stored:
        print(f"bases: {len(stored)} read from {out / 'r1.json'} and the {len(found)} committed run(s) from "
              "them without their weights (linked by the score each run starts from)")
    rest = [r for r in stage1 if (r.spec["seed"], r.arm) not in stored]
    got = (run_all(rest, cache, desc="bases", **common) if rest else Outcome()) \
        + Outcome(total=len(stored), found=len(stored))
    either = {**stored, **{(r["seed"], base_name(r["sft"])): r for r in got.ordered(rest)}}
    bases = {(r.spec["seed"], r.arm): either[(r.spec["seed"], r.arm)] for r in stage1
             if (r.spec["seed"], r.arm) in either}  # stage 1's order
    from_bases = Outcome(records=found, total=len(found), found=len(found))
    stage2 = stage2_runs(args, bases)
    todo = [t for t in stage2 if t.key not in from_bases.records]
    # the longest runs (SB3's) start first, so the last minutes of the study are not one run alone
    longest_first = sorted(todo, key=lambda t: t.spec["algo"] not in SB3_ALGOS)
    runs = from_bases + run_all(longest_first, out, desc="rl", **common)
    result = {"command": command_line("benchmarks.r1", argv), "machine": machine_info(),
              "seeds": ",".join(map(str, args.seeds)), "curve_every": args.curve_every,
              "budget": args.budget, "arms": args.arms,
              "env_kwargs": args.env_kwargs,
              "recipe_sft": args.recipe, "sb3": args.sb3, "eval": args.eval,
              "failures": got.failures + runs.failures,
              "bases": [{k: v for k, v in b.items() if k != "weights"} for b in bases.values()]}
    result["summary"] = summarize(result["bases"], runs.ordered(stage2))
    outcome = got + runs
    dest = outcome.destination(out)  # with runs missing: the scratch folder, never a committed one
    write_results(dest, "r1", result, markdown(result), incomplete=outcome.incomplete())
    top, missing = headline(result), outcome.incomplete()
    write_atomically(dest / "headline.md", f"{missing}\n\n{top}" if missing else top)
    print(f"results in {dest}/ (r1.md, headline.md, r1.json, runs/)")
    for failure in result["failures"]:
        print(f"FAILED: {failure}")
    return 1 if result["failures"] else 0
