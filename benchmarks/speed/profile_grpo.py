"""Where one GRPO iteration spends its time, on one thread.

    python -m benchmarks.speed profile_grpo [--steps 40000] [--cases tab_arith,mlp_arith,mlp_countdown3]
                                      [--repeats 3] [--update-results]

Each case trains a fresh agent (seed ``--seed``) with the phase timer on (``model.timer =
PhaseTimer()``, :mod:`agents.grpo.profiling`: wall-clock timers at the agent's phase boundaries, free when
off) for ``--steps`` env steps after ``--warmup`` untimed steps, ``--repeats`` times (the run with the
median env steps/s is reported), and reports each phase's share of ``learn``'s loop time and the env
steps/s. The verifier runs inside the env's ``step``; its part of ``env_step`` is attributed by one more
run under ``cProfile`` (the cumulative time of the batch verifier's ``feed`` and ``finish`` over that of
the vector env's ``step``; the profiler slows Python, so this ratio is approximate and reported apart).

Cases (the agent's defaults otherwise: native vector env, grammar masks where the task has them):

* ``tab_arith``: tabular policy on ``rlvr/Arithmetic-v0`` (the tabular preset).
* ``mlp_arith``: MLP policy on ``rlvr/Arithmetic-v0`` (the mlp preset).
* ``mlp_countdown3``: MLP policy on ``rlvr/Countdown-v0`` with ``n_numbers=3`` (the countdown preset).

Results: ``benchmark-runs/profile_grpo/profile_grpo.{json,md}`` (git-ignored); with ``--update-results``
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
from typing import Any

from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    cli,
    command_line,
    limit_threads,
    machine_info,
    output_folder,
    write_results,
)

#: case name -> (env id, env kwargs, policy, preset, description)
CASES: dict[str, tuple[str, dict[str, Any], str, str, str]] = {
    "tab_arith": ("rlvr/Arithmetic-v0", {}, "tabular", "tabular", "tabular, Arithmetic"),
    "mlp_arith": ("rlvr/Arithmetic-v0", {}, "mlp", "mlp", "MLP, Arithmetic"),
    "mlp_countdown3": ("rlvr/Countdown-v0", {"n_numbers": 3}, "mlp", "countdown", "MLP, Countdown-3"),
}
#: functions of the incremental array verifier (rlvr_env/tasks/expression/machine.py) that the vector
#: env's step calls
VERIFIER_FUNCTIONS = ("feed", "finish")


def make_agent(case: str, seed: int) -> Any:
    import rlvr_env  # noqa: F401  (registers the envs)
    from agents.grpo import GRPO, GRPOConfig

    env_id, env_kwargs, policy, preset, _ = CASES[case]
    return GRPO(env_id, GRPOConfig.preset(preset), policy=policy, seed=seed, env_kwargs=env_kwargs)


def time_phases(case: str, steps: int, warmup: int, seed: int) -> dict[str, Any]:
    """One timed run: seconds per phase, the loop's wall time and env steps/s."""
    from agents.grpo import PHASES, PhaseTimer

    model = make_agent(case, seed)
    if warmup:
        model.learn(warmup)  # first-call costs (imports, allocator, torch kernels) stay out of the figures
    timer = PhaseTimer()
    model.timer = timer
    model.learn(steps)
    total = model.train_seconds
    seconds = {name: timer.seconds.get(name, 0.0) for name in PHASES}
    seconds["other"] = max(total - sum(seconds.values()), 0.0)
    return {
        "env_steps": int(model.num_timesteps),
        "iterations": int(model.iterations),
        "seconds": total,
        "env_steps_per_s": model.num_timesteps / total,
        "phase_seconds": seconds,
        "shares": {name: s / total for name, s in seconds.items()},
        "phase_calls": dict(timer.calls),
    }


def verifier_share_of_step(case: str, steps: int, seed: int) -> float | None:
    """Cumulative time of the batch verifier's entry points over that of the vector env's ``step``, in
    a run under ``cProfile`` (None when the step was never seen)."""
    model = make_agent(case, seed)
    profiler = cProfile.Profile()
    profiler.enable()
    model.learn(steps)
    profiler.disable()
    stats: dict[tuple[str, int, str], tuple[Any, ...]]
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    step = verifier = 0.0
    for (path, _, func), (_, _, _, cumulative, _) in stats.items():
        if path.endswith("rlvr_env/vector.py") and func == "step":
            step += cumulative
        elif path.endswith("rlvr_env/tasks/expression/machine.py") and func in VERIFIER_FUNCTIONS:
            verifier += cumulative
    return verifier / step if step > 0 else None


def profile_case(case: str, steps: int, warmup: int, repeats: int, seed: int) -> dict[str, Any]:
    runs = [time_phases(case, steps, warmup, seed) for _ in range(repeats)]
    rates = [r["env_steps_per_s"] for r in runs]
    median = sorted(runs, key=lambda r: r["env_steps_per_s"])[len(runs) // 2]
    return {
        **median,
        "description": CASES[case][4],
        "env_steps_per_s_all": rates,
        "env_steps_per_s_median": statistics.median(rates),
        "verifier_share_of_env_step": verifier_share_of_step(case, min(steps, 20_000), seed),
    }


def markdown(result: dict[str, Any]) -> str:
    from agents.grpo import PHASES

    names = [*PHASES, "other"]
    lines = [
        "### Where a GRPO iteration spends its time (one thread)",
        "",
        f"`{result['command']}`; {result['steps']} env steps per run after {result['warmup']} untimed, "
        f"seed {result['seed']}, the median of {result['repeats']} runs by env steps/s. Shares of "
        "`learn`'s loop time (`agents.grpo.profiling` phases; `other` is metrics and logging).",
        "",
        "| case | env steps/s | " + " | ".join(names) + " | verifier (of env_step) |",
        "|---|---:|" + "---:|" * len(names) + "---:|",
    ]
    for case in result["cases"].values():
        shares = case["shares"]
        top = max(names, key=lambda n: shares[n])
        cells = [(f"**{shares[n]:.0%}**" if n == top else f"{shares[n]:.0%}") for n in names]
        vshare = case["verifier_share_of_env_step"]
        lines.append(f"| {case['description']} | {case['env_steps_per_s']:,.0f} | " + " | ".join(cells)
                     + f" | {'-' if vshare is None else f'{vshare:.0%}'} |")
    lines += ["", "The largest share of each row is in bold. The verifier's part of `env_step` comes from a "
              "separate `cProfile` run (approximate: the profiler slows Python code more than NumPy).", ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed profile_grpo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40_000, help="timed env steps per run")
    parser.add_argument("--warmup", type=int, default=4_000, help="untimed env steps before the timed ones")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (median reported)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(parser, "profile_grpo", RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown or not cases:
        parser.error(f"--cases={args.cases!r}: unknown {unknown}; choose among {', '.join(CASES)}")
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1 or args.seed < 0:
        parser.error(f"--steps={args.steps} and --repeats={args.repeats} must be >= 1, --warmup="
                     f"{args.warmup} and --seed={args.seed} >= 0")
    out = output_folder(args)
    limit_threads(1, import_torch=any(CASES[c][2] == "mlp" for c in cases))
    result = {
        "command": command_line("benchmarks.speed profile_grpo", argv),
        "machine": machine_info(),
        "steps": args.steps, "warmup": args.warmup, "repeats": args.repeats, "seed": args.seed,
        "cases": {c: profile_case(c, args.steps, args.warmup, args.repeats, args.seed) for c in cases},
    }
    write_results(out, "profile_grpo", result, markdown(result))
    return result


if __name__ == "__main__":
    sys.exit(cli(main))
