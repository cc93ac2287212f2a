"""How fast are the native vector envs and the batch verifier?

    python -m benchmarks.speed vector [--repeats 5] [--seconds 0.3] [--out DIR | --update-results]

Three measurements, all in one process:

1. **Vector env steps/s** (env-steps, i.e. vector steps x num_envs) of ``rlvr/Countdown-v0`` and
   ``rlvr/Arithmetic-v0`` built with ``gym.make_vec(..., vectorization_mode="vector_entry_point")`` and
   of Gymnasium's ``CartPoleVectorEnv``, at 64, 1024 and 8192 envs, default kwargs (so observations are
   fresh copies). Actions are uniform random token ids drawn in advance (not timed); episodes that end
   are reset inside ``step`` by each env's autoreset, as in any rollout. The three envs are measured
   alternately, ``--repeats`` times, for about ``--seconds`` each; the median is reported, so drifts of
   the machine's load affect all alike. Goal: Countdown >= 10x CartPoleVectorEnv at 1024 envs.
2. **Verifications/s** of :func:`~rlvr_env.tasks.expression.batch_verify.batch_verify` (with Countdown's
   program shortcut) on a (B, L) token array versus an
   eval-based verifier (regex check of the characters and of the number use, then Python ``eval``: the
   common approach, written here only, never in the library) on the decoded texts of the same answers,
   and :func:`rlvr_env.verify` (the library's exact text verifier) for reference, all on the same answers
   (a shuffled fixed mix of known solutions, grammar-masked random walks and uniform token soup), timed
   alternately, median of ``--repeats``. Goal: batch >= 100x eval.
3. **Cost growth**: vector env steps/s at 1024 envs and batch verifications/s, over N (numbers per
   prompt) and max length.

Results go to ``<out>/vector_speed.json`` and ``<out>/vector_speed.md`` (written atomically) and the
markdown is printed.
"""

from __future__ import annotations

import argparse
import gc
import platform
import re
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

import rlvr_env
from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    cli,
    output_folder,
    write_results,
)
from rlvr_env import CountdownTask, verify
from rlvr_env.tasks.expression.batch_verify import batch_verify
from rlvr_env.tasks.expression.tokens import TokenTable
from rlvr_env.tasks.countdown.programs import by_programs

COUNTS: tuple[int, ...] = (64, 1024, 8192)
VECTOR_IDS: tuple[str, ...] = ("rlvr/Countdown-v0", "rlvr/Arithmetic-v0")
GOAL_ENV_RATIO = 10.0  # Countdown vs CartPoleVectorEnv at 1024 envs
GOAL_VERIFIER_RATIO = 100.0  # batch verifier vs eval-based verifier


# -- 1. vector env steps/s ---------------------------------------------------------------------------------
def make_env(name: str, num_envs: int, **kwargs: Any) -> Any:
    if name == "CartPoleVectorEnv":
        return CartPoleVectorEnv(num_envs=num_envs)
    return gym.make_vec(name, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)


def steps_per_second(env: Any, seconds: float, seed: int) -> float:
    """Env-steps per second of ``env`` over about ``seconds`` of stepping with random actions."""
    n = env.num_envs
    rng = np.random.default_rng(seed)
    actions = [rng.integers(env.single_action_space.n, size=n) for _ in range(64)]  # (64, n), untimed
    env.reset(seed=seed)
    step = env.step
    gc.collect()
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for a in actions[:8]:
            step(a)
        calls += 8
        now = time.perf_counter()
        if now >= deadline:
            break
        actions = actions[8:] + actions[:8]
    return calls * n / (now - start)


def measure_envs(
    names: list[str], counts: tuple[int, ...], repeats: int, seconds: float, seed: int, **kwargs: Any
) -> dict[str, dict[int, float]]:
    """Median env-steps/s per env name and count, measuring the envs alternately."""
    envs = {
        (name, n): make_env(name, n, **({} if name == "CartPoleVectorEnv" else kwargs))
        for name in names
        for n in counts
    }
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in envs}
    for r in range(repeats):
        for n in counts:
            for name in names:
                samples[(name, n)].append(steps_per_second(envs[(name, n)], seconds, seed + r))
    return {name: {n: statistics.median(samples[(name, n)]) for n in counts} for name in names}


# -- 2. verifiers ------------------------------------------------------------------------------------------
_EVAL_CHARS = re.compile(r"[0-9+\-*/() ]+")
_EVAL_NUMBERS = re.compile(r"\d+")


def eval_verify(text: str, numbers: tuple[int, ...], target: int, exactly_once: bool) -> float:
    """The common regex + ``eval`` verifier (e.g. TinyZero's Countdown reward), for comparison only.

    It checks the characters and the number use with regexes and evaluates with Python's ``eval`` (with
    empty builtins), comparing floats with a tolerance. It is unsafe (``"9**9**9"`` passes the character
    check and hangs the process; this workload never contains it) and inexact, which is why the library
    parses instead.
    """
    if not _EVAL_CHARS.fullmatch(text):
        return 0.0
    used = Counter(int(x) for x in _EVAL_NUMBERS.findall(text))
    available = Counter(numbers)
    if any(c > available[x] for x, c in used.items()) or (exactly_once and used != available) or not used:
        return 0.0
    try:
        value = eval(text, {"__builtins__": None}, {})  # noqa: S307 - the point of the comparison
    except Exception:  # noqa: BLE001 - any failure is a malformed answer
        return 0.0
    if not isinstance(value, (int, float)):
        return 0.0
    return 1.1 if abs(value - target) < 1e-5 else 0.1


def workload(
    task: CountdownTask, size: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``size`` answers to ``size`` train prompts: a third known solutions, a third grammar-masked random
    walks, a third uniform token soup. Returns tokens (B, L), numbers (B, N), targets (B,) and texts."""
    rng = np.random.default_rng(seed)
    numbers, targets, history = task.sample_arrays(rng, "train", size)
    length = task.max_length
    tokens = np.full((size, length), task.eos_id, dtype=np.int64)
    third = size // 3
    for i in range(third):
        sol = task.solution_tokens(history[i])
        tokens[i, : len(sol)] = sol
    walk = np.arange(third, 2 * third)
    lengths = np.zeros(len(walk), dtype=np.int64)
    ended = np.zeros(len(walk), dtype=bool)
    for col in range(length):
        masks = task.action_masks_arrays(tokens[walk], lengths)  # (w, V)
        pick = np.argmax(rng.random(masks.shape) * masks, axis=1)  # uniform among legal tokens
        live = ~ended
        tokens[walk[live], col] = pick[live]
        lengths += live
        ended |= live & (pick == task.eos_id)
    soup = np.arange(2 * third, size)
    tokens[soup] = rng.integers(len(task.vocab), size=(len(soup), length))
    mix = rng.permutation(size)  # any prefix is then a representative mix
    tokens, numbers, targets = tokens[mix], numbers[mix], targets[mix]
    texts = []
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    values = table.values(numbers)
    for i in range(size):
        texts.append(table.text(tokens[i].tolist(), values[i]))
    return tokens, numbers, targets, texts


def median_rates(fns: dict[str, Callable[[], object]], items: int, repeats: int) -> dict[str, float]:
    """Median items/s of each function over ``repeats`` rounds, the functions timed alternately."""
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            rates[name].append(items / (time.perf_counter() - start))
    return {name: statistics.median(r) for name, r in rates.items()}


def measure_verifiers(task: CountdownTask, size: int, repeats: int, seed: int) -> dict[str, Any]:
    tokens, numbers, targets, texts = workload(task, size, seed)
    table = TokenTable.from_vocab(task.vocab, task.eos_id)
    grammar = task.grammar
    exactly = grammar.number_use == "exactly_once"
    nums = [tuple(row) for row in numbers.tolist()]
    tgts = targets.tolist()

    def run_batch() -> object:
        return batch_verify(tokens, numbers, targets, table=table, grammar=grammar, programs=by_programs)

    def run_eval() -> list[float]:
        with warnings.catch_warnings():  # compile() warns about text such as "2(3)"; once per run
            warnings.simplefilter("ignore", SyntaxWarning)
            return [eval_verify(texts[i], nums[i], tgts[i], exactly) for i in range(size)]

    def run_text() -> list[float]:
        return [verify(texts[i], nums[i], tgts[i], grammar=grammar).reward for i in range(size)]

    rates = median_rates({"batch": run_batch, "eval": run_eval, "verify": run_text}, size, repeats)
    batch, evals, text = rates["batch"], rates["eval"], rates["verify"]
    got = batch_verify(tokens, numbers, targets, table=table, grammar=grammar, programs=by_programs)
    exact = run_text()
    by_eval = run_eval()
    return {
        "answers": size,
        "batch_per_s": batch,
        "eval_per_s": evals,
        "verify_per_s": text,
        "ratio_batch_vs_eval": batch / evals,
        "ratio_batch_vs_verify": batch / text,
        "batch_agrees_with_verify": bool(np.array_equal(got.reward, np.array(exact))),
        "eval_disagrees_with_verify": int(sum(abs(a - b) > 1e-9 for a, b in zip(by_eval, exact))),
        "correct_fraction": float(got.correct.mean()),
        "well_formed_fraction": float(got.well_formed.mean()),
    }


# -- 3. cost growth ----------------------------------------------------------------------------------------
def growth(repeats: int, seconds: float, seed: int) -> list[dict[str, Any]]:
    rows = []
    for n, max_length in ((3, None), (4, None), (5, None), (6, None), (4, 24), (6, 40)):
        kwargs: dict[str, Any] = {"n_numbers": n, "max_length": max_length}
        if n >= 5:
            kwargs["target_range"] = (1, 1000)
        env_rate = measure_envs(["rlvr/Countdown-v0"], (1024,), repeats, seconds, seed, **kwargs)
        task = CountdownTask(**kwargs)
        verifier = measure_verifiers(task, 8192, max(1, repeats // 2), seed)
        rows.append({
            "n_numbers": n,
            "max_length": task.max_length,
            "vocab": len(task.vocab),
            "obs_dim": task.prompt_dim + task.max_length * len(task.vocab),
            "env_steps_per_s_1024": env_rate["rlvr/Countdown-v0"][1024],
            "batch_verify_per_s": verifier["batch_per_s"],
            "eval_per_s": verifier["eval_per_s"],
        })
    return rows


# -- report ------------------------------------------------------------------------------------------------
def run(repeats: int, seconds: float, seed: int, verifier_size: int) -> dict[str, Any]:
    names = [*VECTOR_IDS, "CartPoleVectorEnv"]
    envs = measure_envs(names, COUNTS, repeats, seconds, seed)
    cart = envs["CartPoleVectorEnv"]
    ratios = {name: {n: envs[name][n] / cart[n] for n in COUNTS} for name in VECTOR_IDS}
    verifiers = measure_verifiers(CountdownTask(), verifier_size, repeats, seed)
    return {
        "command": "python -m benchmarks.speed vector " + " ".join(sys.argv[1:]),
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "gymnasium": gym.__version__,
            "rlvr_env": rlvr_env.__version__,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "repeats": repeats,
        "seconds_per_measurement": seconds,
        "env_steps_per_s": {name: {str(n): v for n, v in rates.items()} for name, rates in envs.items()},
        "ratio_vs_cartpole": {name: {str(n): v for n, v in r.items()} for name, r in ratios.items()},
        "goal_env_ratio_countdown_1024": GOAL_ENV_RATIO,
        "goal_env_met": ratios["rlvr/Countdown-v0"][1024] >= GOAL_ENV_RATIO,
        "verifier": verifiers,
        "goal_verifier_ratio": GOAL_VERIFIER_RATIO,
        "goal_verifier_met": verifiers["ratio_batch_vs_eval"] >= GOAL_VERIFIER_RATIO,
        "growth": growth(repeats, seconds, seed),
    }


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def markdown(result: dict[str, Any]) -> str:
    envs, ratios = result["env_steps_per_s"], result["ratio_vs_cartpole"]
    lines = [
        f"Command: `{result['command'].strip()}` (median of {result['repeats']} interleaved runs, "
        f"~{result['seconds_per_measurement']} s each; {result['machine']['processor']}, "
        f"Python {result['machine']['python']}, NumPy {result['machine']['numpy']})",
        "",
        "| num_envs | Countdown-v0 steps/s | Arithmetic-v0 steps/s | CartPoleVectorEnv steps/s "
        "| Countdown / CartPole | Arithmetic / CartPole |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in COUNTS:
        k = str(n)
        lines.append(
            f"| {n} | {_si(envs['rlvr/Countdown-v0'][k])} | {_si(envs['rlvr/Arithmetic-v0'][k])} "
            f"| {_si(envs['CartPoleVectorEnv'][k])} | {ratios['rlvr/Countdown-v0'][k]:.2f}x "
            f"| {ratios['rlvr/Arithmetic-v0'][k]:.2f}x |"
        )
    met = "met" if result["goal_env_met"] else "NOT met"
    lines += ["", f"Goal Countdown >= {GOAL_ENV_RATIO:.0f}x CartPoleVectorEnv at 1024 envs: **{met}**.", ""]
    v = result["verifier"]
    lines += [
        f"| verifier ({v['answers']} Countdown-4 answers) | verifications/s | batch speed-up |",
        "|---|---:|---:|",
        f"| `batch_verify` (arrays) | {_si(v['batch_per_s'])} | 1x |",
        f"| regex + `eval` | {_si(v['eval_per_s'])} | {v['ratio_batch_vs_eval']:.0f}x |",
        f"| `verify` (text parser) | {_si(v['verify_per_s'])} | {v['ratio_batch_vs_verify']:.0f}x |",
        "",
        f"Goal batch >= {GOAL_VERIFIER_RATIO:.0f}x eval: "
        f"**{'met' if result['goal_verifier_met'] else 'NOT met'}**. "
        f"Batch agrees with `verify` on every timed answer: {v['batch_agrees_with_verify']}; the eval "
        f"verifier disagrees with `verify` on {v['eval_disagrees_with_verify']} of them (floats, `**`).",
        "",
        "| N | max_length | vocab | obs dim | Countdown steps/s (1024 envs) | batch verifications/s "
        "| eval verifications/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["growth"]:
        lines.append(
            f"| {row['n_numbers']} | {row['max_length']} | {row['vocab']} | {row['obs_dim']} "
            f"| {_si(row['env_steps_per_s_1024'])} | {_si(row['batch_verify_per_s'])} "
            f"| {_si(row['eval_per_s'])} |"
        )
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed vector",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per measurement (median)")
    parser.add_argument("--seconds", type=float, default=0.3, help="approximate length of one env run")
    parser.add_argument("--verifier-size", type=int, default=20000, help="answers in the verifier workload")
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(parser, "vector_speed", RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    if args.repeats < 1 or args.seconds <= 0 or args.verifier_size < 3:
        raise ValueError(f"--repeats={args.repeats} >= 1, --seconds={args.seconds} > 0 and "
                         f"--verifier-size={args.verifier_size} >= 3 are required")
    result = run(args.repeats, args.seconds, args.seed, args.verifier_size)
    write_results(output_folder(args), "vector_speed", result, markdown(result))
    return result


if __name__ == "__main__":
    sys.exit(cli(main))
