"""How fast is the environment? Single-env steps per second through ``gym.make`` (default wrappers), for
``rlvr/Arithmetic-v0`` and ``CartPole-v1`` in the same process, and verifier calls per second on text.

    python -m benchmarks.speed env [--steps 100000] [--repeats 7] [--out DIR | --update-results]

Method: both environments are built with ``gym.make`` and keep Gymnasium's
default wrappers (PassiveEnvChecker, OrderEnforcing, and CartPole's TimeLimit), because that is what a
user gets. Actions are drawn in advance from a seeded generator as Python ints, so action sampling is not
timed; an episode that ends is reset inside the timed loop, as in any rollout. The two environments are
measured alternately, ``--repeats`` times each, and the median is reported, so drifts of the machine's
speed affect both alike. The goal is Arithmetic steps/s >= 2x CartPole-v1's.

Results go to ``<out>/env_speed.json`` and ``<out>/env_speed.md`` (written atomically) and the markdown
table is printed.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time

import gymnasium as gym
import numpy as np

import rlvr_env
from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    cli,
    output_folder,
    write_results,
)
from rlvr_env import verify
from rlvr_env.tasks.expression.arithmetic import TARGETS

ENV_IDS: tuple[str, ...] = ("rlvr/Arithmetic-v0", "CartPole-v1")
#: The target: Arithmetic steps per second at least this multiple of CartPole-v1's.
GOAL_RATIO = 2.0

# Hand-written malformed or hostile answers mixed into the verifier workload (the lexer rejects most
# of them early, so their share changes the calls/s; it is fixed here so runs compare).
_HOSTILE: tuple[str, ...] = (
    "2**3+5",
    "1.0+2",
    "-2+3*5",
    "(2+3)*5",
    "__import__('os').system('x')",
    "",
    "2+3*5+",
    "\uff12+3*5",
)


def steps_per_second(env: gym.Env, actions: list[int], seed: int) -> float:
    """Time ``len(actions)`` steps of ``env``, resetting whenever an episode ends."""
    env.reset(seed=seed)
    step, reset = env.step, env.reset
    gc.collect()
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = step(a)
        if terminated or truncated:
            reset()
    return len(actions) / (time.perf_counter() - start)


def verifier_workload(n: int, seed: int) -> list[tuple[str, tuple[int, ...], int]]:
    """``n`` (text, numbers, target) triples: uniformly random 5-token answers over the env's vocabulary
    (about 0.8% well-formed), well-formed answers (a third of the list), and fixed hostile strings."""
    rng = np.random.default_rng(seed)
    vocab = np.array(["2", "3", "5", "+", "*"])
    perms: list[tuple[int, ...]] = [(2, 3, 5), (2, 5, 3), (3, 2, 5), (3, 5, 2), (5, 2, 3), (5, 3, 2)]
    out: list[tuple[str, tuple[int, ...], int]] = []
    for i in range(n):
        numbers = perms[int(rng.integers(len(perms)))]
        target = TARGETS[int(rng.integers(len(TARGETS)))]
        kind = i % 3
        if kind == 0:
            text = "".join(vocab[rng.integers(5, size=5)])
        elif kind == 1:
            a, b, c = (numbers[j] for j in rng.permutation(3))
            o1, o2 = ("+*"[int(k)] for k in rng.integers(2, size=2))
            text = f"{a}{o1}{b}{o2}{c}"
        else:
            text = _HOSTILE[int(rng.integers(len(_HOSTILE)))]
        out.append((text, numbers, target))
    return out


def verifier_calls_per_second(workload: list[tuple[str, tuple[int, ...], int]]) -> float:
    gc.collect()
    start = time.perf_counter()
    for text, numbers, target in workload:
        verify(text, numbers, target)
    return len(workload) / (time.perf_counter() - start)


def _load_average() -> float | None:
    # Other processes compete for the CPU; the 1-minute load average says how much (None on Windows).
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def run(steps: int, repeats: int, seed: int) -> dict[str, object]:
    """Measure both environments and return the result. Long because every timing loop is written out inline,
    so nothing between the timed calls adds cost."""
    load_before = _load_average()
    envs = {env_id: gym.make(env_id) for env_id in ENV_IDS}
    rng = np.random.default_rng(seed)
    actions = {
        env_id: rng.integers(int(env.action_space.n), size=steps).tolist()  # type: ignore[attr-defined]
        for env_id, env in envs.items()
    }
    workload = verifier_workload(max(steps // 5, 1000), seed)
    for env_id, env in envs.items():  # warm-up: imports, caches, the passive checker's first calls
        steps_per_second(env, actions[env_id][: min(steps, 2000)], seed)
    verifier_calls_per_second(workload[:200])

    samples: dict[str, list[float]] = {env_id: [] for env_id in ENV_IDS}
    verifier_samples: list[float] = []
    for r in range(repeats):
        # Alternate the order too, so neither env always runs right after the other.
        order = ENV_IDS if r % 2 == 0 else ENV_IDS[::-1]
        for env_id in order:
            samples[env_id].append(steps_per_second(envs[env_id], actions[env_id], seed + r))
        verifier_samples.append(verifier_calls_per_second(workload))
    for env in envs.values():
        env.close()

    median = {env_id: statistics.median(s) for env_id, s in samples.items()}
    ratio = median["rlvr/Arithmetic-v0"] / median["CartPole-v1"]
    ratios = [a / c for a, c in zip(samples["rlvr/Arithmetic-v0"], samples["CartPole-v1"])]
    return {
        "command": "python -m benchmarks.speed env " + " ".join(sys.argv[1:]),
        "steps": steps,
        "repeats": repeats,
        "seed": seed,
        "envs": {
            env_id: {
                "steps_per_s_median": median[env_id],
                "steps_per_s_min": min(samples[env_id]),
                "steps_per_s_max": max(samples[env_id]),
                "steps_per_s_all": samples[env_id],
                "wrappers": _wrapper_names(gym.make(env_id)),
            }
            for env_id in ENV_IDS
        },
        "ratio_arithmetic_over_cartpole": ratio,
        "ratio_per_repeat": ratios,
        "goal_ratio": GOAL_RATIO,
        "meets_goal": ratio >= GOAL_RATIO,
        "verifier": {
            "calls_per_s_median": statistics.median(verifier_samples),
            "calls_per_s_all": verifier_samples,
            "workload_size": len(workload),
            "well_formed_fraction": float(np.mean([verify(*w).well_formed for w in workload])),
        },
        "platform": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(),
            "system": platform.system(),
            "gymnasium": gym.__version__,
            "numpy": np.__version__,
            "rlvr_env": rlvr_env.__version__,
            "cpu_count": os.cpu_count(),
            "load_average_1min": [load_before, _load_average()],
        },
    }


def _wrapper_names(env: gym.Env) -> list[str]:
    names = []
    while isinstance(env, gym.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


def markdown(result: dict[str, object]) -> str:
    envs = result["envs"]
    assert isinstance(envs, dict)
    ver = result["verifier"]
    assert isinstance(ver, dict)
    plat = result["platform"]
    assert isinstance(plat, dict)
    load = ", ".join(f"{x:.1f}" for x in plat["load_average_1min"] if x is not None) or "n/a"
    lines = [
        f"`{str(result['command']).strip()}` ({result['steps']} steps x {result['repeats']} repeats, "
        f"median; Python {plat['python']}, Gymnasium {plat['gymnasium']}, {plat['machine']}, "
        f"{plat['cpu_count']} CPUs, load average before/after {load})",
        "",
        "| Measurement | Median | Min | Max |",
        "|---|---:|---:|---:|",
    ]
    for env_id, row in envs.items():
        lines.append(
            f"| `{env_id}` steps/s (gym.make, default wrappers) | {row['steps_per_s_median']:,.0f} "
            f"| {row['steps_per_s_min']:,.0f} | {row['steps_per_s_max']:,.0f} |"
        )
    ratios = result["ratio_per_repeat"]
    assert isinstance(ratios, list)
    goal = "meets" if result["meets_goal"] else "misses"
    lines.append(
        f"| Arithmetic / CartPole ratio ({goal} the {result['goal_ratio']:g}x goal) "
        f"| {result['ratio_arithmetic_over_cartpole']:.2f}x | {min(ratios):.2f}x | {max(ratios):.2f}x |"
    )
    calls = ver["calls_per_s_all"]
    lines.append(
        f"| `verify` calls/s on text ({ver['workload_size']} expressions, "
        f"{ver['well_formed_fraction']:.0%} well-formed) | {ver['calls_per_s_median']:,.0f} "
        f"| {min(calls):,.0f} | {max(calls):,.0f} |"
    )
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed env",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="steps per measurement")
    parser.add_argument("--repeats", type=int, default=7, help="measurements per environment")
    parser.add_argument("--seed", type=int, default=0, help="seed of the action and verifier workloads")
    add_output_arguments(parser, "env_speed", RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error(f"--steps={args.steps} and --repeats={args.repeats} must be at least 1")
    result = run(args.steps, args.repeats, args.seed)
    write_results(output_folder(args), "env_speed", result, markdown(result))
    return result


if __name__ == "__main__":
    sys.exit(cli(main))
