"""GRPO env steps per second with the transformer policy at batch 256 (16 prompts x 16 answers) and its
preset's update, side by side in one process with the agent's PPO with a learned critic
(``advantage="gae"``, same network, batch and settings; target: >= 0.5x GRPO's steps/s), with
sb3-contrib's MaskablePPO on the same network with the R1 study's settings (target: >= 1k env steps/s),
with the MLP policy (target: >= 10k steps/s) and with the transformer at mu = 1 (one full-batch step per
batch, as TRL's ``GRPOTrainer`` updates by default: the TRL ratio, target >= 100x, compares these two),
and the supervised cold start's solutions per second (one epoch over ``--sft`` train-split solutions).
The arms take turns in ``--rounds`` slices of ``--steps`` (``--sb3-steps`` for MaskablePPO), so a change
of the machine's load falls on all of them alike.

Ratios measured in one run are what to quote on a shared machine; absolute figures depend on its load.
Writes ``benchmark-runs/r1_speed/speed.json`` and ``speed.md`` (git-ignored; ``--update-results`` writes
``benchmarks/results/r1/``; ``--render`` only rewrites the table from the json there)::

    python -m benchmarks.speed r1 --steps 20000 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch

import rlvr_env  # noqa: F401
from agents.grpo import GRPO, GRPOConfig
from agents.sft import demonstrations, supervised_fit

from benchmarks.core.baselines import make_sb3_transformer
from benchmarks.core.bases import SB3_SETTINGS
from benchmarks.core.common import (RESULTS_DIR, add_output_arguments, cli, command_line, output_folder,
                                    write_atomically, write_json)
from benchmarks.speed.side_by_side import Turns, measure_trl

__all__ = ["measure", "measure_sft", "measure_together", "measure_trl", "main"]

RESULTS = RESULTS_DIR / "r1"


def measure(policy: str, steps: int, seed: int, advantage: str = "grpo") -> dict[str, float]:
    """Steps/s of the training loop (rollouts + updates) after a one-iteration warm-up; the rollout and
    update shares come from wall time around the agent's own calls."""
    return measure_together([(policy, advantage, {})], steps, seed, rounds=1)[0]


def measure_together(arms: list[tuple[str, str, dict[str, Any]]], steps: int, seed: int, rounds: int,
                     sb3_steps: int = 0) -> list[dict[str, Any]]:
    """:func:`measure` for each (policy, advantage, config overrides) arm, built and warmed up first, then
    trained in turns of ``steps / rounds`` env steps each (the same seed, network, batch and settings:
    the policy's preset, B x G = 16 x 16, no dynamic sampling, and the arm's overrides). With
    ``sb3_steps``, sb3-contrib's MaskablePPO with the R1 study's settings (:data:`SB3_SETTINGS`, the
    critic on its own trunk as from a base) from the first arm's network takes ``sb3_steps / rounds`` in
    each turn too, and its row comes last."""
    models, answers = [], []
    for policy, advantage, overrides in arms:
        preset = "transformer" if policy == "transformer" else "countdown"
        cfg = GRPOConfig.preset(preset, prompts_per_iter=16, group_size=16, dynamic_sampling=False,
                                advantage=advantage, **overrides)
        model = GRPO("rlvr/Countdown-v0", cfg, policy=policy, seed=seed, env_kwargs={"n_numbers": 3})
        model.learn(1000)  # warm-up: allocations, first-call overheads
        count = [0]
        model.add_group_hook(lambda event, count=count: count.__setitem__(0, count[0] + event.rewards.size))
        models.append(model)
        answers.append(count)
    sb3 = None
    if sb3_steps > 0:  # the R1 study's MaskablePPO from the same seeded network, in the same turns
        sb3 = make_sb3_transformer("maskable_ppo", "rlvr/Countdown-v0", {"n_numbers": 3}, seed, {},
                                   {**SB3_SETTINGS, "share_features_extractor": False},
                                   start=models[0].policy)
        sb3.learn(SB3_SETTINGS["n_envs"] * SB3_SETTINGS["n_steps"])  # warm-up: one rollout and update
    sb3_clock = _rollout_clock() if sb3 is not None else None

    def turn(model: Any) -> Any:
        def run(share: int) -> int:
            before = model.num_timesteps
            if model is sb3:
                model.learn(share, reset_num_timesteps=False, callback=sb3_clock)
            else:
                model.learn(share, reset_num_timesteps=False)
            return int(model.num_timesteps - before)
        return run

    learners = [*models, *([sb3] if sb3 is not None else [])]
    turns = Turns([turn(m) for m in learners], [steps] * len(models) + [sb3_steps] * (sb3 is not None),
                  rounds)
    turns.run()
    seconds, trained = turns.seconds, turns.done
    rows = []
    for (policy, advantage, overrides), model, count, secs, n in zip(arms, models, answers, seconds, trained):
        t0 = time.perf_counter()
        batch = model._runner.collect(model.policy, model.rng)
        rollout_s = time.perf_counter() - t0
        critic = getattr(model.policy, "critic", None)
        critic_size = 0 if critic is None else sum(p.numel() for p in critic.parameters())
        rows.append({"policy": policy, "advantage": advantage, "overrides": dict(overrides),
                     "epochs": model.config.epochs, "minibatches": model.config.minibatches,
                     "steps": float(n), "seconds": secs,
                     "steps_per_second": n / secs, "rollout_steps_per_second": batch.n_steps / rollout_s,
                     "answers_per_second": count[0] / secs, "parameters": float(model.num_parameters()),
                     "critic_parameters": float(critic_size)})
    if sb3 is not None:
        n, secs = trained[-1], seconds[-1]
        rollout = sb3_clock.seconds
        rows.append({"policy": "transformer", "advantage": "sb3_maskable_ppo", "steps": float(n),
                     "seconds": secs,
                     "steps_per_second": n / secs, "settings": dict(SB3_SETTINGS),
                     "rollouts": float(sb3_clock.rollouts), "rollout_seconds": rollout,
                     "update_seconds": secs - rollout,
                     "rollout_steps_per_second": n / rollout,
                     "seconds_per_update": (secs - rollout) / max(sb3_clock.rollouts, 1),
                     "parameters": float(sum(p.numel() for p in sb3.policy.parameters()))})
    return rows


def _rollout_clock() -> Any:
    """An SB3 callback that sums the wall seconds of its rollouts (the rest of ``learn`` is updates)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class RolloutClock(BaseCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.seconds, self.rollouts, self._start = 0.0, 0, 0.0

        def _on_rollout_start(self) -> None:
            self._start = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.seconds += time.perf_counter() - self._start
            self.rollouts += 1

        def _on_step(self) -> bool:
            return True

    return RolloutClock()


def measure_sft(n: int, seed: int) -> dict[str, float]:
    """Solutions per second of one cold-start epoch (after the demonstrations are built) over ``n``
    train-split solutions, with the transformer policy's default architecture."""
    model = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("transformer"), policy="transformer", seed=seed,
                 env_kwargs={"n_numbers": 3})
    start = time.perf_counter()
    demos = demonstrations(model.env, n, seed)
    demo_s = time.perf_counter() - start
    start = time.perf_counter()
    supervised_fit(model.policy, demos, epochs=1, seed=seed)
    fit_s = time.perf_counter() - start
    return {"solutions": float(n), "demonstrations_seconds": demo_s, "epoch_seconds": fit_s,
            "solutions_per_second": n / fit_s, "parameters": float(model.num_parameters())}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed r1", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=4,
                        help="turns the arms take over --steps each")
    parser.add_argument("--sft", type=int, default=100_000, help="solutions for the cold-start epoch")
    parser.add_argument("--sb3-steps", type=int, default=8_192,
                        help="env steps of sb3-contrib MaskablePPO (the R1 study's settings) in the same "
                             "turns (0: skip it)")
    parser.add_argument("--trl-steps", type=int, default=3,
                        help="TRL GRPOTrainer steps timed after one warm-up step (0: skip TRL)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite speed.md from the speed.json already in the output folder")
    add_output_arguments(parser, "r1_speed", RESULTS)
    return parser


_ROWS = (("GRPO, the preset's update", 0), ("PPO with a critic (gae), the preset's update", 1),
         ("GRPO at mu = 1 (one full-batch step per batch)", 3),
         ("sb3-contrib MaskablePPO, the R1 study's settings", 4), ("GRPO, MLP policy", 2))


def markdown(record: dict[str, Any]) -> str:
    """The measurement as a table: each arm's update, env steps/s and answers/s, then the ratios against
    their targets."""
    runs = record["runs"]
    lines = ["### The R1 arms' speed, side by side in one process", "",
             f"Countdown-3 tokens, B x G = 16 x 16, the arms taking turns; {record['threads']} torch "
             f"thread(s); 1/5/15-minute load average after the run "
             f"{' / '.join(f'{v:.1f}' for v in record['load_average'])}.", "",
             "| arm | update per batch | env steps/s | answers/s | parameters |", "|---|---|---:|---:|---:|"]
    for name, i in _ROWS:
        if i >= len(runs):
            continue
        r = runs[i]
        if r["advantage"] == "sb3_maskable_ppo":
            st = r["settings"]
            update = (f"{st['n_envs']} envs x {st['n_steps']} steps, {st['n_epochs']} epochs of "
                      "minibatches of "
                      f"{st['batch_size']}; {r['seconds_per_update']:.1f} s per update, rollouts at "
                      f"{r['rollout_steps_per_second']:,.0f} env steps/s")
            answers = ""
        else:
            update = f"{r['epochs']} epoch(s) x {r['minibatches']} minibatch(es)"
            answers = f"{r['answers_per_second']:,.0f}"
        lines.append(f"| {name} | {update} | {r['steps_per_second']:,.0f} | {answers} | "
                     f"{r['parameters']:,.0f} |")
    targets = [("PPO with a critic ÷ GRPO, env steps/s", record["gae_over_grpo"], ">= 0.5x", 0.5, "x")]
    if "sb3_maskable_ppo_steps_per_second" in record:
        targets.append(("MaskablePPO env steps/s", record["sb3_maskable_ppo_steps_per_second"], ">= 1,000",
                        1000.0, ""))
    if "trl" in record:
        targets.append(("GRPO at mu = 1 answers/s ÷ TRL GRPOTrainer's completions/s (TRL's default one "
                        "step per batch)", record["transformer_answers_over_trl_completions"], ">= 100x",
                        100.0, "x"))
        targets.append(("GRPO at the preset's update, the same ratio",
                        record["preset_answers_over_trl_completions"], "", None, "x"))
    lines += ["", "| ratio or rate | measured | target |", "|---|---:|---|"]
    for name, value, target, bound, unit in targets:
        verdict = "" if bound is None else (" met" if value >= bound else " **missed**")
        shown = f"{value:.2f}{unit}" if unit else f"{value:,.0f}"
        lines.append(f"| {name} | {shown} | {target}{verdict} |")
    if "trl" in record:
        t = record["trl"]
        lines += ["", f"TRL: a Llama of the transformer's depth and width ({t['parameters']:,.0f} "
                  f"parameters, character tokenizer), {t['completions_per_second']:.1f} completions/s over "
                  f"{t['steps']:.0f} timed steps of 256 completions."]
    sft = record["sft"]
    command = record.get("command", "python -m benchmarks.speed r1 (arguments not recorded)")
    lines += ["", f"Cold start: {sft['solutions_per_second']:,.0f} solutions/s (one epoch over "
              f"{sft['solutions']:,.0f} train-split solutions).", "",
              f"Command: `{command}`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.render:
        out = output_folder(args)
        record = json.loads((out / "speed.json").read_text())
        write_atomically(out / "speed.md", markdown(record))
        print(markdown(record))
        return
    if args.steps < 1 or args.threads < 1 or args.sft < 1 or args.rounds < 1 or args.sb3_steps < 0:
        parser.error(f"--steps={args.steps}, --threads={args.threads}, --sft={args.sft} and "
                     f"--rounds={args.rounds} must be >= 1, --sb3-steps={args.sb3_steps} >= 0")
    out = output_folder(args)
    torch.set_num_threads(args.threads)
    # the transformer at its preset (the R1 study's update: mu = 2 epochs of 4 minibatches), with a critic,
    # the MLP (one epoch), and the transformer at mu = 1 (one full-batch step, as TRL's GRPOTrainer runs
    # by default: num_iterations = 1), for the TRL ratio
    rows = measure_together([("transformer", "grpo", {}), ("transformer", "gae", {}),
                             ("mlp", "grpo", {"epochs": 1}),
                             ("transformer", "grpo", {"epochs": 1, "minibatches": 1})],
                            args.steps, args.seed, args.rounds, sb3_steps=args.sb3_steps)
    record = {"command": command_line("benchmarks.speed r1", argv), "threads": args.threads,
              "load_average": os.getloadavg(), "runs": rows,
              "transformer_over_mlp": rows[0]["steps_per_second"] / rows[2]["steps_per_second"],
              "gae_over_grpo": rows[1]["steps_per_second"] / rows[0]["steps_per_second"],
              "mu1_over_preset": rows[3]["steps_per_second"] / rows[0]["steps_per_second"],
              **({"sb3_maskable_ppo_steps_per_second": rows[4]["steps_per_second"],
                  "sb3_maskable_ppo_over_grpo": rows[4]["steps_per_second"] / rows[0]["steps_per_second"]}
                 if args.sb3_steps > 0 else {}),
              "sft": measure_sft(args.sft, args.seed)}
    if args.trl_steps > 0:
        record["trl"] = measure_trl(args.trl_steps, args.seed)
        # like for like: one gradient step per batch on both sides (TRL's default num_iterations = 1)
        record["transformer_answers_over_trl_completions"] = (
            rows[3]["answers_per_second"] / record["trl"]["completions_per_second"])
        record["preset_answers_over_trl_completions"] = (
            rows[0]["answers_per_second"] / record["trl"]["completions_per_second"])
    write_json(out / "speed.json", record)
    write_atomically(out / "speed.md", markdown(record))
    print(markdown(record))


if __name__ == "__main__":
    sys.exit(cli(main))
