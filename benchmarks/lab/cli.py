"""The GRPO lab: published claims about GRPO's variants, each as a small seeded
experiment on ``rlvr/Countdown-v0`` (N = 3 numbers, grammar masks), the result stated whatever it is.

    python -m benchmarks.lab [--regime mlp|r1] [--claim NAME[,NAME] ...] [--seeds 100-107]
                             [--budget-scale 1.0] [--workers 2] [--ray-address HOST:6379]
                             [--out DIR | --update-results]

Regimes (``--regime``, :mod:`benchmarks.lab.regime`): ``mlp`` (the default; everything below) and ``r1``,
the base-model regime: every arm starts from the R1 recipe's base of its seed (the causal
transformer cold-started on 100k train-split solutions, :func:`benchmarks.core.bases.base_run`, found in
the R1 study's cache ``benchmark-runs/r1/bases/`` or trained there once per seed) with the ``transformer``
preset; claims ``dr_grpo``, ``dapo``, ``kimi`` at 300k env steps per arm and ``yue`` (Yue et al. 2025:
RLVR raises pass@1 but narrows pass@k at large k; the base alone vs GRPO from it, pass@k for k = 1..64
from 64 samples per held-out prompt); seeds 10-14 by default; results in ``<out>/r1/``.

Claims (``--claim``; every arm of a claim runs on the same seeds, so arms are compared seed by seed):

* ``dr_grpo`` (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783): dividing each
  answer's token sum by its own length (``seq_mean_token_mean``) makes *wrong* answers grow longer
  during training; a constant normaliser (``seq_mean_token_sum``) does not. And the std in GRPO's
  advantage weights too-easy and too-hard prompts up (measured on the groups of these runs).
* ``dapo`` (Yu et al. 2025, arXiv 2503.14476, sections 3.1-3.2): symmetric clipping collapses entropy;
  clip-higher keeps it and learns faster; dynamic sampling reaches a given success in fewer policy
  updates (at the price of more env steps, counted).
* ``gspo`` (Zheng et al. 2025, arXiv 2507.18071): a sequence-level ratio is more stable than the
  token-level one when each batch is reused for more epochs (higher mu).
* ``kimi`` (Kimi k1.5, arXiv 2501.12599, section 2.3.3): the length reward shortens correct answers
  without costing accuracy.
* ``kl``: beta = 0 against the lesson's range (0.001-0.04), the KL reference being a behaviour-cloned
  warm start (``agents.bc.warm_start``, DeepSeek-R1's cold start).
* ``sapo`` (Gao et al. 2025, arXiv 2511.20347): SAPO's smooth gate (``policy_loss="sapo"``) in place of
  the hard clip learns better off-policy (mu = 12 epochs per batch).
* ``gmpo`` (Zhao et al. 2025, arXiv 2507.20673): the geometric mean of token ratios
  (``policy_loss="geo_mean"``) with the wider log-clip 0.4 learns better than token ratios at mu = 12.
* ``passk`` (Tang et al. 2025, arXiv 2503.19595): the pass@k advantage (``advantage="grpo_passk"``)
  raises held-out pass@8 over GRPO.
* ``high_entropy`` (Wang et al. 2025, arXiv 2506.01939): training on the 20% highest-entropy tokens
  (``top_entropy_quantile=0.2``) matches (within 0.02 held-out success) or beats every token.

Method. Every run is ``GRPO("rlvr/Countdown-v0", config, policy="mlp", seed=s)`` with the
:data:`ENV_KWARGS` below and the base configuration :data:`BASE` (the best Countdown setting the code
offers: the "countdown" preset when it exists, else the mlp one, and the "lookahead" observation when the
task has it) plus what the claim changes (one module per claim, named as the claim).
Every arm x seed is one run of the executor (:mod:`benchmarks.core.executor`: embedded local Ray by
default, a cluster with ``--ray-address``); the run function (:func:`benchmarks.lab.runner.run_arm`, one
torch thread) keeps each iteration's logged metrics (``rollout/solve_rate``, ``train/entropy``,
``train/clip_frac``, ``train/kl``, ...) and observes each iteration's groups through the agent's public
group hook (``model.add_group_hook``): the lengths of correct and wrong answers and each group's rewards,
from which the advantage weights of both estimators are computed. After training the run is scored on
256 held-out prompts (greedy, sampled mean@8, pass@8, all under the grammar masks). Each run is one run
file of the store, ``<out>/runs/<settings hash>_seed<s>.json`` (key, fingerprint, checksum); a rerun
reuses a run whose file passes its checks, and arms of different claims with equal settings share runs.
The default output is ``benchmark-runs/lab/`` (git-ignored); ``--update-results`` writes the committed
``benchmarks/results/lab/``. Statistics: per-seed values, the IQM over seeds with a 95%
percentile-bootstrap interval (:mod:`benchmarks.core.stats`); differences between arms are paired by seed.
A verdict is "agree" when the interval of the claimed difference excludes zero (or the claim's stated
margin) on the claimed side, "disagree" when it lies beyond it on the other side, "inconclusive"
otherwise, and "no signal" for every row of a claim when no arm's held-out sampled success interval lies
above the single-answer floor (answering the number equal to the target). Settings
(budgets, thresholds) were chosen on seeds 0-1 (0-9 are kept for choosing); the reported seeds start at
100; the four later claims (sapo, gmpo, passk, high_entropy) use their papers' settings, untuned.

The summary (``lab.json``, ``lab.md``) covers every claim whose runs on these seeds at this budget are
in the output folder, so ``--claim X --update-results`` adds or replaces X and keeps the others; run
files of an earlier code version that record the same runs are read for analysis only
(:mod:`benchmarks.lab.legacy`).
"""

# The lab's command line: run (or reuse) every arm x seed of the chosen claims through the executor,
# analyse every claim whose runs are all stored, write the figures, ``lab.json`` and ``lab.md``.


from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.core.common import (
    RESULTS_DIR,
    ROOT,
    add_executor_arguments,
    add_output_arguments,
    check_writable,
    command_line,
    machine_info,
    output_folder,
    write_atomically,
    write_json,
)
from benchmarks.core.executor import Outcome, run_all
from benchmarks.core.store import RunFileError, check_run
from benchmarks.core.common import seeds_argument
from benchmarks.lab.base import EVAL_PROMPTS, NO_SIGNAL, seeds_of, apply_floor
from benchmarks.lab.legacy import earlier_records
from benchmarks.lab.regime import MLP, REGIMES, Bases, Regime, budget_of, regime_named

__all__ = ["analyse", "build_parser", "claim_records", "main", "previous_results", "run_claims",
           "stored_records", "table"]

#: Where the r1 regime's bases are cached by default: the R1 study's own cache (``benchmarks.r1``).
BASES_CACHE = Path("benchmark-runs") / "r1" / "bases"


def run_claims(names: Sequence[str], seeds: Sequence[int], scale: float, out: Path, *,
               address: str | None = None, workers: int | None = None, progress: bool = True,
               rerun: Sequence[str] = (), log: Callable[[str], None] = print, regime: Regime = MLP,
               bases: Bases | None = None) -> Outcome:
    """Run (or reuse from disk) every arm x seed of the named claims on the executor; return the
    executor's outcome (its ``failures`` and ``missing`` name the runs that failed). Arms of different
    claims with equal settings share their runs. ``bases``: the r1 regime's, per seed
    (:meth:`Regime.bases`)."""
    tasks = [regime.task(regime.claims[name], arm, seed, budget_of(regime, name, scale), bases or {})
             for name in names for seed in seeds for arm in regime.claims[name].arms]
    outcome = run_all(tasks, out, address=address, workers=workers, progress=progress, desc="lab",
                      rerun=rerun, log=log)
    return outcome


def stored_records(name: str, seeds: Sequence[int], scale: float, out: Path, *, regime: Regime = MLP,
                   bases: Bases | None = None) -> dict[str, list[dict[str, Any]]] | None:
    """The stored runs of claim ``name`` on ``seeds`` at ``scale``, by arm; None if any is missing. Read
    only: a file that fails its checks is left where it is (the run step quarantines and retrains the
    runs of the claims it runs; another claim's files, e.g. committed ones, are not moved)."""
    if regime.needs_bases and (bases is None or not set(seeds) <= set(bases)):
        return None
    claim = regime.claims[name]
    records: dict[str, list[dict[str, Any]]] = {}
    for arm in claim.arms:
        for seed in seeds:
            task = regime.task(claim, arm, seed, budget_of(regime, name, scale), bases or {})
            try:
                rec = check_run(Path(out) / "runs" / f"{task.key}.json", task.key, task.fingerprint)
            except RunFileError:
                return None
            records.setdefault(arm.name, []).append(rec)
    return records


def claim_records(name: str, seeds: Sequence[int], scale: float, out: Path, *, regime: Regime = MLP,
                  bases: Bases | None = None) -> tuple[dict[str, list[dict[str, Any]]] | None, str]:
    """The runs to analyse claim ``name`` from and where they come from: this code's run files
    ("current"; the r1 regime without ``bases``: matched by key,
    :func:`~benchmarks.lab.base_model.stored_without_bases`), else (mlp regime) run files of an earlier
    code version that record exactly these runs (:mod:`benchmarks.lab.legacy`; "earlier code"), else
    (None, "")."""
    records = stored_records(name, seeds, scale, out, regime=regime, bases=bases)
    if records is not None:
        return records, "current"
    if regime.needs_bases and bases is None:  # no base cache: the run files matched by their keys
        from benchmarks.lab.base_model import stored_without_bases

        claim = regime.claims[name]
        records = stored_without_bases(claim.arms, seeds, budget_of(regime, name, scale), claim.eval_k,
                                       regime.base_runs(seeds), out)
        return (records, "current") if records is not None else (None, "")
    if not regime.reads_earlier:
        return None, ""
    records = earlier_records(regime.claims[name].arms, seeds, budget_of(regime, name, scale), out)
    return (records, "earlier code") if records is not None else (None, "")


def analyse(name: str, runs: dict[str, list[dict[str, Any]]], regime: Regime = MLP) -> dict[str, Any]:
    claim = regime.claims[name]
    res = apply_floor(claim.analyse(claim, runs), runs, regime.floor())
    res["seeds"] = seeds_of(runs)
    res["budget"] = max(r["key"]["budget"] for a in claim.arms for r in runs[a.name])
    res["seconds"] = {a.name: [r["seconds"] + r["eval_seconds"] for r in runs[a.name]] for a in claim.arms}
    # Standalone cost of the claim (every distinct run it needs, shared ones included), on 2 workers.
    distinct = {json.dumps(r["key"], sort_keys=True): r["seconds"] + r["eval_seconds"]
                for a in claim.arms for r in runs[a.name]}
    res["minutes_on_2_workers"] = sum(distinct.values()) / 2 / 60
    res["distinct_runs"] = len(distinct)
    res["arms"] = {a.name: {"label": a.label, "overrides": a.overrides, "warm_start": a.warm_start,
                            "rl": a.rl}
                   for a in claim.arms}
    return res


def previous_results(out: Path) -> dict[str, dict[str, Any]]:
    """The claims of ``out/lab.json`` (empty if there is none)."""
    path = Path(out) / "lab.json"
    if not path.exists():
        return {}
    try:
        claims = json.loads(path.read_text(encoding="utf-8"))["claims"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a lab summary ({err}); move it away to start a new one") from None
    return dict(claims)


def table(results: dict[str, dict[str, Any]], meta: dict[str, Any], regime: Regime = MLP) -> str:
    lines = [
        "| claim | paper | what we measured (IQM over seeds [95% bootstrap CI]) | verdict |",
        "|---|---|---|---|",
    ]
    claims = regime.claims
    for name in claims:
        if name not in results:
            continue
        for row in results[name]["rows"]:
            lines.append(f"| {row['claim']} | {row['paper']} | {row['measured']} | **{row['verdict']}** |")
    shown = [n for n in claims if n in results]
    seeds = sorted({s for r in results.values() for s in r["seeds"]})
    scaled = [n for n in shown if results[n]["budget"] != claims[n].budget]
    earlier = [n for n in shown if results[n].get("runs") != "current"]
    samples = sorted({claims[n].eval_k for n in shown})
    per_claim = ", ".join(f"{n} {claims[n].eval_k}" for n in shown) if len(samples) > 1 else ""
    floor = regime.floor()
    lines += [
        "",
        regime.setting_note(seeds)
        + " Budgets (env steps per run): "
        + ", ".join(f"{n} {results[n]['budget']:,}" for n in shown)
        + (f" (scaled down with --budget-scale: {', '.join(scaled)})" if scaled else "")
        + f". Held-out score: {EVAL_PROMPTS} test prompts, sampled = mean over "
        + (f"{samples[0]} answers" if not per_claim else f"each claim's answers per prompt ({per_claim})")
        + ". Verdict: \"agree\" when the interval of the claimed difference excludes zero (or the stated "
        "margin) on the claimed side, \"disagree\" when it lies beyond it on the other side, "
        f"\"inconclusive\" otherwise; **\"{NO_SIGNAL}\"** for every row of a claim when no arm's held-out "
        f"sampled success interval lies above the single-answer floor, {floor:.2f} (answer the number equal "
        f"to the target; `benchmarks.core.baselines.single_number_floor` on the same prompts). "
        + (f"Claims {', '.join(earlier)}: analysed from the committed run files of an earlier code version "
           "(before the config fields `seq_mean_rows`, `top_entropy_quantile` and `sapo_tau_pos` / "
           "`sapo_tau_neg` existed; not retrained, see `benchmarks/lab/legacy.py`). "
           if earlier else "")
        + "Figures: " + ", ".join(f"[{n}]({meta['out']}/{n}.png)" for n in shown)
        + ". Time per claim (its distinct runs, training + evaluation, summed / 2 workers; the machine was "
        "shared, so this overstates an idle 2-core machine): "
        + ", ".join(f"{n} {results[n]['distinct_runs']} runs, {results[n]['minutes_on_2_workers']:.1f} min"
                    for n in shown)
        + f". Command: `{meta['command']}`.",
    ]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regime", default=MLP.name,
                        help=f"where every arm starts, from {list(REGIMES)} (default {MLP.name})")
    parser.add_argument("--claim", "--claims", nargs="+", default=["all"],
                        help="claims, comma- or space-separated, of the regime (mlp: "
                             f"{list(MLP.claims)}; r1: {list(REGIMES['r1'].claims)}), or 'all'")
    parser.add_argument("--seeds", type=seeds_argument(minimum=2), default=None,
                        help="reported seeds, at least 2: a list (100,101) or a range (100-107); default: "
                             "the regime's (mlp 100-107, settings chosen on 0-9; r1 10-14, the R1 study's)")
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply every claim's budget")
    parser.add_argument("--bases", type=Path, default=BASES_CACHE,
                        help=f"r1 regime: the bases' cache (default {BASES_CACHE}/, the R1 study's)")
    add_executor_arguments(parser)
    add_output_arguments(parser, "lab", RESULTS_DIR / "lab")
    return parser


def _claim_names(given: Sequence[str], regime: Regime) -> list[str]:
    names = [c.strip() for part in given for c in part.split(",") if c.strip()]
    if names == ["all"]:
        return list(regime.claims)
    unknown = [n for n in names if n not in regime.claims]
    if unknown or not names:
        raise ValueError(f"--claim {' '.join(given)!r}: unknown claim(s) {unknown} in the {regime.name} "
                         f"regime; choose from {list(regime.claims)}")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the claims of a regime (bases first, then every arm on every seed) and write the lab's table,
    figures and JSON. Long because the steps share the regime's folders and are read top to bottom."""
    args = build_parser().parse_args(argv)
    regime = regime_named(args.regime)
    names = _claim_names(args.claim, regime)
    if not (args.budget_scale > 0 and np.isfinite(args.budget_scale)):
        raise ValueError(f"--budget-scale={args.budget_scale!r} must be a positive number")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers={args.workers!r} must be at least 1")
    arms = {a.name for n in names for a in regime.claims[n].arms}
    rerun = [r.strip() for r in args.rerun.split(",") if r.strip()]
    if set(rerun) - arms:
        raise ValueError(f"--rerun {args.rerun!r}: unknown arm(s) {sorted(set(rerun) - arms)}; "
                         f"the chosen claims' arms are {sorted(arms)}")
    seeds: list[int] = args.seeds if args.seeds is not None else seeds_argument(minimum=2)(regime.seeds)
    out = output_folder(args)
    if regime.subfolder and args.out is None:  # the default and the committed folder: a subfolder each
        out = out / regime.subfolder
    check_writable(out)
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    executor: dict[str, Any] = {"address": address, "workers": None if address else args.workers,
                                "progress": not args.quiet}
    # The r1 regime's bases first: found in the cache (or trained there once per seed), shared by every arm.
    bases = regime.bases(seeds, args.bases, train=True, log=print, **executor)
    outcome = run_claims(names, seeds, args.budget_scale, out, rerun=rerun, regime=regime, bases=bases,
                         **executor)
    failures = outcome.failures
    # With runs missing, the summary goes to the scratch folder, first line saying which (never a committed
    # folder); it is analysed from the runs in ``out`` as below.
    dest = outcome.destination(out)
    # The summary covers every claim whose runs (these seeds, this budget) are all on disk, analysed
    # afresh from the run files (this code's, else an earlier code's that record the same runs), so
    # running one claim never leaves another's figures stale; a claim not run now whose runs are gone
    # keeps its entry of the previous lab.json (same seeds and budget), so no claim is dropped.
    previous = previous_results(out)
    results: dict[str, Any] = {}
    for name, claim in regime.claims.items():
        records, source = claim_records(name, seeds, args.budget_scale, out, regime=regime, bases=bases)
        if records is not None:
            res = analyse(name, records, regime)
            res["runs"] = source
            write_atomically(dest / f"{name}.png", claim.plot(claim, records, res))
            results[name] = res
        elif name not in names and name in previous and previous[name].get("seeds") == sorted(seeds) \
                and previous[name].get("budget") == budget_of(regime, name, args.budget_scale):
            results[name] = {**previous[name], "runs": "kept from the previous lab.json"}
    shown = dest.resolve().relative_to(ROOT) if dest.resolve().is_relative_to(ROOT) else dest
    # The command that reproduces the whole table (any --claim subset makes the same runs).
    seeds_text = ",".join(map(str, seeds))
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        seeds_text = f"{seeds[0]}-{seeds[-1]}"
    command = "python -m benchmarks.lab" + (f" --regime {regime.name}" if regime is not MLP else "") + \
        f" --seeds {seeds_text}" + (f" --budget-scale {args.budget_scale:g}"
                                    if args.budget_scale != 1.0 else "")
    meta = {"command": command, "invoked": command_line("benchmarks.lab", argv), "machine": machine_info(),
            "out": str(shown), "regime": regime.name}
    incomplete = outcome.incomplete()
    write_json(dest / "lab.json", {**({"incomplete": incomplete} if incomplete else {}), "meta": meta,
                                   "claims": results})
    text = (f"{incomplete}\n\n" if incomplete else "") + table(results, meta, regime)
    write_atomically(dest / "lab.md", text)
    print(text)
    print(f"results in {dest}/")
    if failures:
        print(f"{len(failures)} run(s) failed:\n" + "\n".join(failures), file=sys.stderr)
        print(incomplete + (f"; {out}/ is left as it was" if dest != out else ""), file=sys.stderr)
        return 1
    return 0
