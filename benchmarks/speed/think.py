"""The thinking env's speed, side by side in one process, and TRL's ``GRPOTrainer`` at trace length.

The transformer (the ``transformer`` preset's network, B x G = 16 x 16, no dynamic sampling) is cold
started briefly on search-style solutions of ``rlvr/CountdownThink-v0`` (Countdown-3, the calculator on,
token observations; ``--sft`` solutions x ``--sft-epochs``: a short cold start, for realistic trace
lengths, not for accuracy). Then these arms take turns over ``--rounds`` (so a change of the machine's
load falls on all of them alike), each ``--steps`` env steps (policy tokens) after a warm-up:

* GRPO on the thinking env at the preset's update (mu = 2 epochs of 4 minibatches; target >= 2,000 env
  steps/s);
* GRPO on the thinking env at mu = 1 (one full-batch step per batch, as TRL's ``GRPOTrainer`` updates by
  default), from the same cold start;
* GRPO at mu = 1 on the expression env ``rlvr/Countdown-v0`` (tokens, not cold started, as in ``speed
  r1``), for reference;
* TRL's ``GRPOTrainer`` (``--trl-steps`` timed steps after one warm-up) on a tiny Llama of the same
  depth and width with a character tokenizer, its completions exactly as long, in that tokenizer's
  tokens (characters), as the cold-started policy's transcripts written out as text (the mean over one
  batch of 256 sampled answers). The ratio GRPO at mu = 1 answers/s / TRL completions/s has the target
  >= 100x; per token it is given too.

``--threads`` goes to ``torch.set_num_threads`` (the table reports what torch then uses). Writes
``benchmark-runs/think_speed/speed.json`` and ``speed.md`` (git-ignored; ``--update-results`` writes
``benchmarks/results/think/speed.md``; ``--render`` only rewrites the table from the json there)::

    python -m benchmarks.speed think --steps 20000 --trl-steps 3 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import rlvr_env  # noqa: F401 - registers the envs
from agents.grpo import GRPO, GRPOConfig
from agents.sft import cold_start

from benchmarks.core.common import (RESULTS_DIR, add_output_arguments, check_writable, cli, command_line,
                                    output_folder, write_atomically, write_json)
from benchmarks.speed.side_by_side import LengthTap, Turns, measure_trl, turn_shares

__all__ = ["ARMS", "arm_row", "completion_length", "lengths", "main", "markdown", "summary", "trl_ratios"]

RESULTS = RESULTS_DIR / "think"
THINK, EXPRESSION = "rlvr/CountdownThink-v0", "rlvr/Countdown-v0"
THINK_KWARGS = {"n_numbers": 3, "calculator": True, "observation": "tokens", "solution_style": "search"}
MU1 = {"epochs": 1, "minibatches": 1}
#: The GRPO arms in turn order: (name, label, env id, env keywords, config overrides, cold started).
ARMS: tuple[tuple[str, str, str, dict[str, Any], dict[str, Any], bool], ...] = (
    ("think_preset", "GRPO, thinking env, the preset's update", THINK, THINK_KWARGS, {}, True),
    ("think_mu1", "GRPO, thinking env, mu = 1 (one full-batch step per batch)", THINK, THINK_KWARGS, MU1,
     True),
    ("expression_mu1", "GRPO, expression env (Countdown-v0), mu = 1, not cold started", EXPRESSION,
     {"n_numbers": 3, "observation": "tokens"}, MU1, False),
)
#: The goals: the thinking env at the preset's update, and GRPO at mu = 1 against TRL per answer.
STEPS_TARGET, TRL_TARGET = 2000.0, 100.0


def lengths(policy_tokens: Sequence[int], transcript_tokens: Sequence[int]) -> dict[str, float]:
    """Mean answer length in the policy's tokens (env steps) and in the transcript's (the tokens the env
    wrote, the calculator's, included), and the calculator's share of the transcript."""
    if len(policy_tokens) != len(transcript_tokens) or not len(policy_tokens):
        raise ValueError(f"{len(policy_tokens)} policy lengths and {len(transcript_tokens)} transcript "
                         "lengths: need the same number, at least one")
    policy, transcript = float(np.mean(policy_tokens)), float(np.mean(transcript_tokens))
    return {"policy_tokens_mean": policy, "transcript_tokens_mean": transcript,
            "calculator_tokens_mean": transcript - policy}


def completion_length(texts: Sequence[str]) -> int:
    """TRL's ``max_completion_length`` for completions as long as ``texts``: their mean length in
    characters (a character tokenizer's tokens), rounded, at least 1."""
    if not texts:
        raise ValueError("no transcript to measure")
    return max(1, round(float(np.mean([len(t) for t in texts]))))


def trl_ratios(mu1: dict[str, float], trl: dict[str, float]) -> dict[str, float]:
    """GRPO at mu = 1 on the thinking env against TRL at the same text length: per answer (answers/s /
    completions/s, the target's ratio), per transcript token (the env's tokens, the calculator's included,
    against TRL's character tokens) and per policy token (env steps/s against TRL's generated tokens/s)."""
    return {
        "per_answer": mu1["answers_per_second"] / trl["completions_per_second"],
        "per_transcript_token": (mu1["answers_per_second"] * mu1["transcript_tokens_mean"]
                                 / trl["completion_tokens_per_second"]),
        "per_policy_token": mu1["steps_per_second"] / trl["completion_tokens_per_second"],
    }


def arm_row(model: Any, tap: LengthTap, steps: int, seconds: float) -> dict[str, Any]:
    """An arm's figures over its timed turns: env steps and answers per second, mean lengths, size."""
    answers = len(tap.policy_tokens)
    return {"steps": float(steps), "seconds": seconds, "answers": float(answers),
            "steps_per_second": steps / seconds, "answers_per_second": answers / seconds,
            **lengths(tap.policy_tokens, tap.transcript_tokens),
            "epochs": model.config.epochs, "minibatches": model.config.minibatches,
            "parameters": float(model.num_parameters())}


def _build(env_id: str, env_kwargs: dict[str, Any], overrides: dict[str, Any], seed: int) -> GRPO:
    cfg = GRPOConfig.preset("transformer", prompts_per_iter=16, group_size=16, dynamic_sampling=False,
                            **overrides)
    return GRPO(env_id, cfg, policy="transformer", seed=seed, env_kwargs=dict(env_kwargs))


def _tap(model: GRPO, text: bool = False) -> LengthTap:
    runner = model._runner
    if not hasattr(runner, "venv"):
        raise RuntimeError(f"{model.env_id}: the measurement reads answer lengths from a native vector env")
    tap = LengthTap(runner.venv, text=text)
    runner.venv = tap
    return tap


def _turn(model: GRPO) -> Any:
    def run(share: int) -> int:
        before = model.num_timesteps
        model.learn(share, reset_num_timesteps=False)
        return int(model.num_timesteps - before)
    return run


def measure(steps: int, seed: int, rounds: int, sft: int, sft_epochs: int, trl_steps: int
            ) -> dict[str, Any]:
    """The cold start, the length sample that sets TRL's completion length, then the arms in turns."""
    models: dict[str, GRPO] = {}
    sft_info: dict[str, Any] = {}
    for name, _, env_id, env_kwargs, overrides, cold in ARMS:
        model = _build(env_id, env_kwargs, overrides, seed)
        if cold:
            if not sft_info:  # one cold start; the other thinking arm starts from a copy of it
                sft_info = cold_start(model, sft, epochs=sft_epochs)
                base = model
            else:
                model.policy.net.load_state_dict(base.policy.net.state_dict())
                model.policy.restart_from_current()
        models[name] = model
    # how long the cold-started policy's answers are, as tokens and as text (untimed, its own generator)
    sampler = models["think_mu1"]
    tap = _tap(sampler, text=True)
    sampler._runner.collect(sampler.policy, np.random.default_rng(seed))
    sampler._runner.venv = tap.venv
    sample = {"answers": float(len(tap.texts)), **lengths(tap.policy_tokens, tap.transcript_tokens),
              "characters_mean": float(np.mean([len(t) for t in tap.texts])), "example": _typical(tap.texts)}
    trl_length = completion_length(tap.texts)

    taps = {}
    for name, model in models.items():
        model.learn(1000)  # warm-up: allocations, first-call overheads
        taps[name] = _tap(model)
    turns = Turns([_turn(models[name]) for name, *_ in ARMS], [steps] * len(ARMS), rounds)
    trl = None
    if trl_steps > 0:
        # TRL's steps drive the rounds: round r's GRPO turns run once TRL has taken its share of round r
        ends = np.cumsum(turn_shares(trl_steps, rounds))

        def between(step: int) -> None:
            while turns.rounds_run < rounds and ends[turns.rounds_run] <= step:
                turns.round()

        trl = measure_trl(trl_steps, seed, completion_length=trl_length, exact_length=True, between=between)
    turns.run()  # the rounds still to run (all of them without TRL)
    rows = {name: {"label": label, "env_id": env_id, "cold_started": cold,
                   **arm_row(models[name], taps[name], turns.done[i], turns.seconds[i])}
            for i, (name, label, env_id, _, _, cold) in enumerate(ARMS)}
    record: dict[str, Any] = {"runs": rows, "sample": sample, "trl_completion_length": trl_length,
                              "sft": {"solutions": sft, "epochs": sft_epochs,
                                      "seconds": sft_info["sft_seconds"], "tokens": sft_info["sft_tokens"]}}
    return {**record, **summary(rows, trl)}


def summary(rows: dict[str, dict[str, Any]], trl: dict[str, float] | None) -> dict[str, Any]:
    """The ratios of the arms' rows: against TRL (:func:`trl_ratios`, from the thinking env's mu = 1 arm,
    the one that updates as TRL does) when TRL ran, and what the trace costs GRPO per answer (the thinking
    env's mu = 1 answers/s over the expression env's)."""
    out: dict[str, Any] = {"think_over_expression_answers": (rows["think_mu1"]["answers_per_second"]
                                                             / rows["expression_mu1"]["answers_per_second"])}
    if trl is not None:
        out["trl"] = trl
        out["ratios"] = trl_ratios(rows["think_mu1"], trl)
    return out


def _typical(texts: Sequence[str]) -> str:
    """The text whose length is nearest the mean (the first such), as an example."""
    mean = float(np.mean([len(t) for t in texts]))
    return min(texts, key=lambda t: abs(len(t) - mean))


def _verdict(value: float, bound: float) -> str:
    return "met" if value >= bound else "**missed**"


def markdown(record: dict[str, Any]) -> str:
    """The measurement as a table: each arm's env steps/s, answers/s and lengths, then the ratios against
    their targets, and what "the same length" means for TRL."""
    runs, sample = record["runs"], record["sample"]
    load = " / ".join(f"{v:.1f}" for v in record["load_average"])
    lines = ["### The thinking env's speed, side by side in one process", "",
             f"Countdown-3, the transformer (the `transformer` preset's network), B x G = 16 x 16, no "
             f"dynamic sampling, the arms taking turns over {record['rounds']} round(s), "
             f"{record['steps']:,} env steps each (whole batches, so a little more); "
             f"{record['threads']} torch thread(s); 1/5/15-minute load average after the run {load}.", "",
             "| arm | update per batch | env steps/s | answers/s | answer length, policy tokens | "
             "answer length, transcript tokens (calculator's included) | parameters |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, *_ in ARMS:
        r = runs[name]
        lines.append(f"| {r['label']} | {r['epochs']} epoch(s) x {r['minibatches']} minibatch(es) | "
                     f"{r['steps_per_second']:,.0f} | {r['answers_per_second']:,.1f} | "
                     f"{r['policy_tokens_mean']:.1f} | {r['transcript_tokens_mean']:.1f} | "
                     f"{r['parameters']:,.0f} |")
    t = record.get("trl")
    if t is not None:
        lines.append(f"| TRL GRPOTrainer, tiny Llama, character tokenizer, completions of "
                     f"{t['max_completion_length']:.0f} characters | 1 step per batch (num_iterations = 1) | "
                     f" | {t['completions_per_second']:,.2f} | "
                     f"{t['completion_tokens_mean']:.1f} (characters) | "
                     f"{t['completion_tokens_mean']:.1f} (characters) | {t['parameters']:,.0f} |")
    preset = runs["think_preset"]["steps_per_second"]
    lines += ["", "| ratio or rate | measured | target |", "|---|---:|---|",
              f"| GRPO, thinking env, the preset's update: env steps/s | {preset:,.0f} | >= 2,000 "
              f"{_verdict(preset, STEPS_TARGET)} |"]
    if t is not None:
        q = record["ratios"]
        lines += [f"| GRPO at mu = 1 answers/s ÷ TRL completions/s, the same text length | "
                  f"{q['per_answer']:.1f}x | >= 100x {_verdict(q['per_answer'], TRL_TARGET)} |",
                  f"| the same per token: GRPO transcript tokens/s ÷ TRL completion tokens/s | "
                  f"{q['per_transcript_token']:.1f}x |  |",
                  f"| the same per generated token: GRPO env steps/s (policy tokens) ÷ TRL completion "
                  f"tokens/s | {q['per_policy_token']:.1f}x |  |"]
    lines.append(f"| GRPO at mu = 1 answers/s, thinking env ÷ expression env | "
                 f"{record['think_over_expression_answers']:.2f}x |  |")
    lines += ["", f"\"The same length\": TRL's completions are as long as the cold-started policy's "
              f"transcripts written out as text, in TRL's tokens. The transcripts of one batch of "
              f"{sample['answers']:.0f} sampled answers (before the timed turns) are "
              f"{sample['policy_tokens_mean']:.1f} policy tokens and {sample['transcript_tokens_mean']:.1f} "
              f"transcript tokens (the calculator's included) long on average; written as a language model "
              f"writes them (one space between tokens, a number's digits together, e.g. "
              f"`{sample['example']}`) they are {sample['characters_mean']:.1f} characters, and TRL's "
              f"character tokenizer reads one token per character. So TRL's max_completion_length is "
              f"{record['trl_completion_length']}, and every TRL completion is exactly that long "
              f"(min_new_tokens; an untrained model would stop early at a sampled end-of-sequence token). "
              f"Per answer both sides write the same text; per token TRL writes about "
              f"{record['trl_completion_length'] / sample['transcript_tokens_mean']:.1f} tokens for each of "
              f"the env's. TRL's prompts are Countdown-3's text prompts (as in `speed r1`); its steps are "
              f"timed after one warm-up step, {t['steps']:.0f} of them here." if t is not None else
              "TRL was not run (--trl-steps 0)."]
    sft = record["sft"]
    lines += ["", f"Cold start: {sft['solutions']:,} search-style solutions x {sft['epochs']} epoch(s), "
              f"{sft['seconds']:.0f} s (for realistic trace lengths, not accuracy); the expression arm is "
              "not cold started.", "", f"Command: `{record['command']}`.", ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed think", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="timed env steps of each GRPO arm")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3, help="turns the arms take over their budgets")
    parser.add_argument("--sft", type=int, default=4_000, help="search-style solutions of the cold start")
    parser.add_argument("--sft-epochs", type=int, default=4, help="epochs of the cold start")
    parser.add_argument("--trl-steps", type=int, default=3,
                        help="TRL GRPOTrainer steps timed after one warm-up step (0: skip TRL)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite speed.md from the speed.json already in the output folder")
    add_output_arguments(parser, "think_speed", RESULTS)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = output_folder(args)
    if args.render:
        record = json.loads((out / "speed.json").read_text())
        write_atomically(out / "speed.md", markdown(record))
        print(markdown(record))
        return
    if min(args.steps, args.threads, args.rounds, args.sft, args.sft_epochs) < 1 or args.trl_steps < 0:
        parser.error(f"--steps={args.steps}, --threads={args.threads}, --rounds={args.rounds}, "
                     f"--sft={args.sft} and --sft-epochs={args.sft_epochs} must be >= 1, "
                     f"--trl-steps={args.trl_steps} >= 0")
    check_writable(out)
    torch.set_num_threads(args.threads)
    record = {"command": command_line("benchmarks.speed think", argv), "threads": torch.get_num_threads(),
              "steps": args.steps, "rounds": args.rounds,
              **measure(args.steps, args.seed, args.rounds, args.sft, args.sft_epochs, args.trl_steps),
              "load_average": os.getloadavg()}
    write_json(out / "speed.json", record)
    write_atomically(out / "speed.md", markdown(record))
    print(markdown(record))


if __name__ == "__main__":
    sys.exit(cli(main))
