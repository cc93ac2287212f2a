"""Is clone B's environment as fast as clone A's? Env speed of two checkouts, measured in alternation.

    python -m benchmarks.tools.ab_speed --a PATH_A --b PATH_B [--rounds 7] [--seconds 0.5]
                                        [--steps 100000] [--num-envs 1024] [--verbose] [--out DIR]

Each round runs one fresh Python process per checkout (A then B in even rounds, B then A in odd ones, so
neither always runs second), with ``PYTHONPATH`` set to that checkout only and its folder as the working
directory, so the process imports that checkout's ``rlvr_env`` (it checks ``rlvr_env.__file__`` and
stops otherwise; ``--verbose`` prints it). The code that measures is this file's, loaded by path in both
processes, so only ``rlvr_env`` differs between A and B. Each process measures:

* **vector env steps/s** (env-steps: vector steps x ``--num-envs``) of ``rlvr/Countdown-v0`` with
  ``n_numbers=3`` and with ``n_numbers=4`` and of ``rlvr/Arithmetic-v0``, each built with
  ``gym.make_vec(..., vectorization_mode="vector_entry_point")``, stepped for about ``--seconds`` with
  uniform random token ids drawn in advance, after a short untimed warm-up (the method of
  ``python -m benchmarks.speed vector``, docs/speed.md);
* **single-env steps/s** of ``rlvr/Countdown-v0`` (default kwargs) and ``CartPole-v1`` through
  ``gym.make`` (default wrappers), ``--steps`` actions drawn in advance as Python ints, an ended episode
  reset inside the timed loop, each env warmed up first, and their ratio (the method of
  ``python -m benchmarks.speed env``, whose env is Arithmetic).

Reported per measurement: the median over rounds of A's and of B's value, and the median of the
per-round ratios B / A (a round's two processes ran back to back, so the machine's drift cancels more
than in the ratio of medians). Output: the table on stdout and ``<out>/ab_speed.json`` and ``.md``
(``<out>``: ``benchmark-runs/ab_speed/``, git-ignored, unless ``--out``). A maintainer tool for a
before/after report; it writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: label -> (env id, kwargs) of the vector measurements.
VECTOR_ENVS: dict[str, tuple[str, dict[str, Any]]] = {
    "Countdown-v0 n_numbers=3": ("rlvr/Countdown-v0", {"n_numbers": 3}),
    "Countdown-v0 n_numbers=4": ("rlvr/Countdown-v0", {"n_numbers": 4}),
    "Arithmetic-v0": ("rlvr/Arithmetic-v0", {}),
}
#: The single-env pair: ours, then the reference.
SINGLE_ENVS: tuple[str, str] = ("rlvr/Countdown-v0", "CartPole-v1")
#: How a fresh process loads this file by path (its folder never goes on sys.path) and runs `worker`.
_BOOT = ("import importlib.util, json, sys; "
         "spec = importlib.util.spec_from_file_location('_ab_speed_worker', sys.argv[1]); "
         "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m); "
         "print(json.dumps(m.worker(json.loads(sys.argv[2]))))")


# -- the measuring process --------------------------------------------------------------------------------
def worker(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Measure every env in this process (run by :func:`measure` in a fresh one)."""
    import gc
    import time

    import gymnasium as gym
    import numpy as np

    import rlvr_env

    checkout = Path(settings["checkout"]).resolve()
    where = Path(rlvr_env.__file__ or "").resolve()
    if not where.is_relative_to(checkout):
        raise RuntimeError(f"rlvr_env was imported from {where}, not from the checkout {checkout}")
    seed, seconds, num_envs = int(settings["seed"]), float(settings["seconds"]), int(settings["num_envs"])

    def vector_rate(env: Any, duration: float) -> float:
        rng = np.random.default_rng(seed)
        actions = [rng.integers(env.single_action_space.n, size=env.num_envs) for _ in range(64)]  # untimed
        env.reset(seed=seed)
        step = env.step
        gc.collect()
        calls = 0
        start = time.perf_counter()
        deadline = start + duration
        while True:
            for a in actions[:8]:
                step(a)
            calls += 8
            now = time.perf_counter()
            if now >= deadline:
                break
            actions = actions[8:] + actions[:8]
        return calls * env.num_envs / (now - start)

    def single_rate(env: Any, actions: list[int]) -> float:
        env.reset(seed=seed)
        step, reset = env.step, env.reset
        gc.collect()
        start = time.perf_counter()
        for a in actions:
            _, _, terminated, truncated, _ = step(a)
            if terminated or truncated:
                reset()
        return len(actions) / (time.perf_counter() - start)

    vector = {}
    for label, (env_id, kwargs) in VECTOR_ENVS.items():
        vec = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
        vector_rate(vec, min(0.1, seconds))  # warm-up: first calls, caches
        vector[label] = vector_rate(vec, seconds)
        vec.close()
    envs = {env_id: gym.make(env_id) for env_id in SINGLE_ENVS}
    rng = np.random.default_rng(seed)
    actions = {env_id: rng.integers(int(env.action_space.n),  # type: ignore[attr-defined]
                                    size=int(settings["steps"])).tolist()
               for env_id, env in envs.items()}
    for env_id, env in envs.items():
        single_rate(env, actions[env_id][:2000])  # warm-up: the passive checker's first calls
    order = SINGLE_ENVS if settings.get("round", 0) % 2 == 0 else SINGLE_ENVS[::-1]
    single = {env_id: single_rate(envs[env_id], actions[env_id]) for env_id in order}
    return {"rlvr_env": str(where), "python": sys.version.split()[0], "vector": vector,
            "single": {env_id: single[env_id] for env_id in SINGLE_ENVS}}


def measure(checkout: Path, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Run :func:`worker` in a fresh process that imports ``checkout``'s ``rlvr_env``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-c", _BOOT, str(Path(__file__).resolve()),
                           json.dumps({**settings, "checkout": str(checkout)})],
                          cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process for {checkout} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the pure parts: order, ratios, medians, the table -----------------------------------------------------
def round_order(round_index: int) -> tuple[str, str]:
    """Which checkout runs first in a round: A in even rounds, B in odd ones."""
    return ("a", "b") if round_index % 2 == 0 else ("b", "a")


def rows_of(result: Mapping[str, Any]) -> dict[str, float]:
    """One process's measurements as named values: each vector env, each single env, and the single-env
    ratio ours / reference."""
    ours, reference = SINGLE_ENVS
    rows = {f"vector {label}": float(v) for label, v in result["vector"].items()}
    rows.update({f"single {env_id}": float(result["single"][env_id]) for env_id in SINGLE_ENVS})
    rows[f"single {ours} / {reference}"] = float(result["single"][ours]) / float(result["single"][reference])
    return rows


def summarize(rounds: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per measurement, over ``rounds`` (each ``{"a": result, "b": result}``): the median of A, the median
    of B, and the median of the per-round ratios B / A."""
    if not rounds:
        raise ValueError("no rounds to summarize")
    per_round = [{side: rows_of(r[side]) for side in ("a", "b")} for r in rounds]
    out: dict[str, dict[str, float]] = {}
    for name in per_round[0]["a"]:
        a = [r["a"][name] for r in per_round]
        b = [r["b"][name] for r in per_round]
        out[name] = {"a": statistics.median(a), "b": statistics.median(b),
                     "b_over_a": statistics.median(y / x for x, y in zip(a, b))}
    return out


def markdown(summary: Mapping[str, Mapping[str, float]], a: str, b: str, rounds: int) -> str:
    lines = [f"A = `{a}`, B = `{b}`; {rounds} rounds, one fresh process per checkout each, interleaved "
             "(medians over rounds; B / A: the median of the per-round ratios)", "",
             "| measurement | A | B | B / A |", "|---|---:|---:|---:|"]
    for name, row in summary.items():
        unit = "" if " / " in name else " steps/s"
        fmt = (lambda x: f"{x:.2f}x") if unit == "" else (lambda x: f"{x:,.0f}")
        lines.append(f"| {name}{unit} | {fmt(row['a'])} | {fmt(row['b'])} | {row['b_over_a']:.3f} |")
    return "\n".join(lines) + "\n"


def _checkout(text: str) -> Path:
    path = Path(text).resolve()
    if not (path / "rlvr_env" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{path}: no rlvr_env/__init__.py there; give a clone's top folder")
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.ab_speed",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=_checkout, required=True, help="checkout A (e.g. the main branch)")
    parser.add_argument("--b", type=_checkout, required=True, help="checkout B (e.g. the change)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (one process per checkout each)")
    parser.add_argument("--seconds", type=float, default=0.5, help="stepping time of one vector env")
    parser.add_argument("--steps", type=int, default=100_000, help="steps of one single-env measurement")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="each process's rlvr_env file and numbers")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default benchmark-runs/ab_speed/, git-ignored)")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from benchmarks.core.common import LOCAL_OUT, write_atomically

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0 or args.steps < 1 or args.num_envs < 1:
        parser.error("--rounds, --steps and --num-envs must be at least 1 and --seconds positive")
    checkouts = {"a": args.a, "b": args.b}
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        settings = {"seed": args.seed + r, "seconds": args.seconds, "steps": args.steps,
                    "num_envs": args.num_envs, "round": r}
        got = {side: measure(checkouts[side], settings) for side in round_order(r)}
        rounds.append(got)
        if args.verbose:
            for side in round_order(r):
                rows = ", ".join(f"{k} {v:,.2f}" for k, v in rows_of(got[side]).items())
                print(f"round {r} {side.upper()}: rlvr_env {got[side]['rlvr_env']}: {rows}", file=sys.stderr)
    summary = summarize(rounds)
    text = markdown(summary, str(args.a), str(args.b), args.rounds)
    print(text, end="")
    result = {"a": str(args.a), "b": str(args.b), "rounds": rounds, "summary": summary,
              "settings": {"seconds": args.seconds, "steps": args.steps, "num_envs": args.num_envs,
                           "seed": args.seed}}
    out = args.out if args.out is not None else LOCAL_OUT / "ab_speed"
    write_atomically(out / "ab_speed.json", json.dumps(result, indent=1) + "\n")
    write_atomically(out / "ab_speed.md", text)
    return result


if __name__ == "__main__":
    from benchmarks.core.common import cli

    sys.exit(cli(main))
