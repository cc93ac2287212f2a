"""The speed goals (each named below with its line), measured side by side in one run.

    python -m benchmarks.speed goals [--repeats 5] [--seconds 0.3] [--ppo-updates 2] [--update-results]

1. **Native vector Countdown vs ``CartPoleVectorEnv``** at 1024 envs, env steps/s (vector steps x
   num_envs). Countdown draws a random *legal* action for every row from ``action_masks()`` at every
   step (``argmax(u * mask)`` with ``u`` uniform numbers drawn in advance, untimed: the mask call and
   the pick are timed), CartPole steps uniform random actions drawn in advance. Both use their own
   same-step autoreset. Measured alternately, ``--repeats`` times for about ``--seconds`` each;
   medians. Countdown-4 (the env's defaults) and Countdown-3, and the loop alone on a fixed mask
   (:class:`HarnessOnly`: the ceiling of any env under this loop). Goal: Countdown >= 1x CartPole.
2. **SB3 PPO on the adapter vs on ``DummyVecEnv``**, Countdown-3, 1024 envs: ``PPO("MlpPolicy")``
   with SB3's per-update defaults (``n_steps * n_envs = 2048``, so ``n_steps=2``; ``batch_size=64``,
   ``n_epochs=10``), on ``rlvr_env.to_sb3_vec_env`` over the native vector env and on ``DummyVecEnv``
   over 1024 single envs, ``--ppo-updates`` updates each, alternately. Env steps/s of the whole
   ``learn()`` and of its rollout collection alone (timed by a callback between rollout start and
   end), and PPO's own gradient update (``train()``, timed in a subclass). Amdahl's law on the
   ``DummyVecEnv`` times bounds what any env can give ``learn()``: the row "learn() ceiling" is
   ``T / U`` (``DummyVecEnv``'s learn time T, update time U; :func:`amdahl_ceiling`). Goal: adapter
   >= 5x DummyVecEnv (whole learn()).
3. **Batch verifier vs regex + ``eval``** on the same 20,000 Countdown-4 answers
   (:func:`benchmarks.speed.vector.measure_verifiers`). Goal: >= 20x.
4. **The prompt draw's floor** (:func:`measure_prompt_floor`): a refill of 1024 prompts
   (``CountdownTask.sample_arrays``) against the same generator calls alone, replayed on a fresh generator
   (the seeded stream fixes their number and sizes: an exact env cannot make fewer), and the prompts one
   masked env step draws (episodes ending per step, counted over the first 400 steps). Their product is
   the time the generator alone costs per env step, against CartPole's whole step.

Results go to ``benchmark-runs/speed_goals/speed_goals.{json,md}`` (git-ignored); with
``--update-results`` to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

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
from benchmarks.speed.vector import measure_verifiers
from rlvr_env import CountdownTask

NUM_ENVS = 1024
GOAL_ENV = 1.0
GOAL_PPO = 5.0
GOAL_VERIFIER = 20.0
RESULTS = RESULTS_DIR
COUNTDOWN = "rlvr/Countdown-v0"
HARNESS = "harness alone (mask x uniforms, argmax; no env)"


# -- 1. env steps/s ----------------------------------------------------------------------------------------
def masked_steps_per_second(env: Any, seconds: float, seed: int) -> float:
    """Env steps/s with a random legal action per row drawn from ``action_masks()`` every step."""
    rng = np.random.default_rng(seed)
    uniforms = [rng.random((env.num_envs, env.single_action_space.n)) for _ in range(16)]  # untimed
    env.reset(seed=seed)
    masks_of, step = env.action_masks, env.step
    gc.collect()
    calls, start = 0, time.perf_counter()
    while True:
        for u in uniforms[:8]:
            step((u * masks_of()).argmax(axis=1))
        calls += 8
        now = time.perf_counter()
        if now - start >= seconds:
            return calls * env.num_envs / (now - start)
        uniforms = uniforms[8:] + uniforms[:8]


def random_steps_per_second(env: Any, seconds: float, seed: int) -> float:
    """Env steps/s with uniform random actions drawn in advance."""
    rng = np.random.default_rng(seed)
    actions = [rng.integers(env.single_action_space.n, size=env.num_envs) for _ in range(16)]
    env.reset(seed=seed)
    step = env.step
    gc.collect()
    calls, start = 0, time.perf_counter()
    while True:
        for a in actions:
            step(a)
        calls += len(actions)
        now = time.perf_counter()
        if now - start >= seconds:
            return calls * env.num_envs / (now - start)


class HarnessOnly:
    """The masked loop's own work without an env: ``action_masks()`` returns one fixed (B, V) mask
    (a Countdown-4 env's first), ``step`` does nothing. Its rate bounds what any env can reach under
    :func:`masked_steps_per_second` (the mask product and the argmax are timed there too)."""

    def __init__(self, env: Any) -> None:
        self.num_envs, self.single_action_space = env.num_envs, env.single_action_space
        env.reset(seed=0)
        self._masks = env.action_masks()

    def reset(self, seed: int | None = None) -> None:
        pass

    def action_masks(self) -> np.ndarray:
        return self._masks

    def step(self, actions: np.ndarray) -> None:
        pass


def measure_envs(repeats: int, seconds: float, seed: int) -> dict[str, Any]:
    countdown4 = gym.make_vec(COUNTDOWN, num_envs=NUM_ENVS, vectorization_mode="vector_entry_point").unwrapped
    envs: dict[str, tuple[Any, Any]] = {
        "CartPoleVectorEnv": (CartPoleVectorEnv(num_envs=NUM_ENVS), random_steps_per_second),
        HARNESS: (HarnessOnly(countdown4), masked_steps_per_second),
        "Countdown-4 (masked)": (countdown4, masked_steps_per_second),
        "Countdown-3 (masked)": (gym.make_vec(COUNTDOWN, num_envs=NUM_ENVS, n_numbers=3,
                                              vectorization_mode="vector_entry_point").unwrapped,
                                 masked_steps_per_second),
    }
    samples: dict[str, list[float]] = {name: [] for name in envs}
    for r in range(repeats):
        for name, (env, fn) in envs.items():
            samples[name].append(fn(env, seconds, seed + r))
    rates = {name: statistics.median(s) for name, s in samples.items()}
    cart = rates["CartPoleVectorEnv"]
    return {
        "env_steps_per_s": rates,
        "samples": samples,
        "ratio_vs_cartpole": {name: rate / cart for name, rate in rates.items() if name != "CartPoleVectorEnv"},
    }


class RecordingGenerator:
    """Forwards ``integers`` to a real generator and records each call, so the calls can be replayed."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def integers(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        return self.rng.integers(*args, **kwargs)


def _median_seconds(fn: Any, repeats: int, inner: int = 20) -> float:
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def prompts_per_step(env: Any, steps: int, seed: int) -> float:
    """Episodes ending per step (= prompts drawn per step, same-step autoreset) under the loop of
    :func:`masked_steps_per_second` (the same 16 uniform arrays in the same cyclic order)."""
    rng = np.random.default_rng(seed)
    uniforms = [rng.random((env.num_envs, env.single_action_space.n)) for _ in range(16)]
    env.reset(seed=seed)
    ended = 0
    for t in range(steps):
        _, _, terminated, truncated, _ = env.step((uniforms[t % 16] * env.action_masks()).argmax(axis=1))
        ended += int(terminated.sum() + truncated.sum())
    return ended / steps


def measure_prompt_floor(repeats: int, seed: int, cart_step_seconds: float) -> dict[str, Any]:
    """Per setting: seconds of a 1024-prompt refill, of its generator calls alone, prompts per step, and
    the generator's seconds per env step (``calls / 1024 * prompts per step``) against CartPole's step."""
    out: dict[str, Any] = {}
    for n in (4, 3):
        task = CountdownTask(n_numbers=n)
        recorder = RecordingGenerator(np.random.default_rng(seed))
        task.sample_arrays(recorder, "train", NUM_ENVS)  # type: ignore[arg-type]
        calls = recorder.calls
        rng = np.random.default_rng(seed)
        refill = _median_seconds(lambda: task.sample_arrays(rng, "train", NUM_ENVS), repeats)
        replay = np.random.default_rng(seed)
        alone = _median_seconds(lambda: [replay.integers(*a, **k) for a, k in calls], repeats)
        env = gym.make_vec(COUNTDOWN, num_envs=NUM_ENVS, n_numbers=n, vectorization_mode="vector_entry_point")
        per_step = prompts_per_step(env.unwrapped, 400, seed)
        floor = alone / NUM_ENVS * per_step
        out[f"Countdown-{n}"] = {"refill_s": refill, "generator_calls_s": alone,
                                 "generator_calls": len(calls), "prompts_per_step": per_step,
                                 "generator_s_per_step": floor,
                                 "cartpole_step_s": cart_step_seconds,
                                 "generator_share_of_cartpole_step": floor / cart_step_seconds}
    return out


# -- 2. SB3 PPO --------------------------------------------------------------------------------------------
def ppo_env(kind: str, seed: int) -> Any:
    import rlvr_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    if kind == "adapter":
        venv = gym.make_vec(COUNTDOWN, num_envs=NUM_ENVS, vectorization_mode="vector_entry_point", n_numbers=3)
        env = rlvr_env.to_sb3_vec_env(venv)
    else:
        env = DummyVecEnv([lambda: gym.make(COUNTDOWN, n_numbers=3) for _ in range(NUM_ENVS)])
    env.seed(seed)
    return env


def ppo_rate(kind: str, updates: int, seed: int) -> dict[str, float]:
    """Env steps/s of ``PPO.learn`` (whole, and rollout collection alone) on one env kind."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    class RolloutClock(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.seconds = 0.0
            self._start = 0.0

        def _on_rollout_start(self) -> None:
            self._start = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.seconds += time.perf_counter() - self._start

        def _on_step(self) -> bool:
            return True

    class TimedPPO(PPO):  # type: ignore[misc]
        """PPO whose gradient update (``train``, the same work on either env) is timed."""

        update_seconds = 0.0

        def train(self) -> None:
            start = time.perf_counter()
            super().train()
            self.update_seconds += time.perf_counter() - start

    env = ppo_env(kind, seed)
    model = TimedPPO("MlpPolicy", env, n_steps=2, batch_size=64, n_epochs=10, seed=seed, device="cpu")
    steps = updates * 2 * NUM_ENVS
    clock = RolloutClock()
    gc.collect()
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=clock)
    seconds = time.perf_counter() - start
    env.close()
    return {"learn_steps_per_s": model.num_timesteps / seconds,
            "rollout_steps_per_s": model.num_timesteps / clock.seconds,
            "learn_seconds": seconds, "rollout_seconds": clock.seconds,
            "update_seconds": model.update_seconds,
            "update_share": model.update_seconds / seconds, "rollout_share": clock.seconds / seconds}


def amdahl_ceiling(dummy: dict[str, float], adapter: dict[str, float]) -> dict[str, float]:
    """Amdahl's law on the measured ``learn()`` times: PPO's own gradient update (``train()``) is the
    same work on either env, so no env can make ``learn()`` faster than ``T_dummy / U`` (``T_dummy``:
    ``DummyVecEnv``'s whole ``learn()``, ``U``: the update time, the smaller of the two sides' so the
    bound is generous), even if rollout collection, the env resets and everything else cost nothing."""
    update = min(dummy["update_seconds"], adapter["update_seconds"])
    return {"update_seconds": update, "ceiling": dummy["learn_seconds"] / update}


def measure_ppo(updates: int, repeats: int, seed: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {"adapter": [], "DummyVecEnv": []}
    for r in range(repeats):
        for kind in runs:
            runs[kind].append(ppo_rate(kind, updates, seed + r))
    med = {kind: {key: statistics.median(run[key] for run in rs) for key in rs[0]} for kind, rs in runs.items()}
    ratio_rollout = med["adapter"]["rollout_steps_per_s"] / med["DummyVecEnv"]["rollout_steps_per_s"]
    return {
        "runs": runs,
        "median": med,
        "ratio_learn": med["adapter"]["learn_steps_per_s"] / med["DummyVecEnv"]["learn_steps_per_s"],
        "ratio_rollout": ratio_rollout,
        "amdahl": amdahl_ceiling(med["DummyVecEnv"], med["adapter"]),
        "config": {"n_envs": NUM_ENVS, "n_steps": 2, "batch_size": 64, "n_epochs": 10, "updates": updates},
    }


# -- report ------------------------------------------------------------------------------------------------
def _verdict(value: float, goal: float) -> str:
    return f"**met** ({value:.2f}x >= {goal:g}x)" if value >= goal else (
        f"**missed** ({value:.2f}x < {goal:g}x: {goal / value:.1f}x short)")


def markdown(result: dict[str, Any]) -> str:
    env, ppo, ver, floor = result["envs"], result["ppo"], result["verifier"], result["prompt_floor"]
    lines = [f"Command: `{result['command']}` (machine load {result['machine']['load_average_1min']})", "",
             "| measurement | env steps/s | vs CartPoleVectorEnv |", "|---|---:|---:|"]
    for name, rate in env["env_steps_per_s"].items():
        ratio = env["ratio_vs_cartpole"].get(name)
        lines.append(f"| {name}, {NUM_ENVS} envs | {rate:,.0f} | {'' if ratio is None else f'{ratio:.3f}x'} |")
    med = ppo["median"]
    lines += ["", "| SB3 PPO, Countdown-3, 1024 envs | learn() env steps/s | rollout env steps/s | learn() s "
              "| rollout share | update share |", "|---|---:|---:|---:|---:|---:|"]
    for kind in ("adapter", "DummyVecEnv"):
        m = med[kind]
        lines.append(f"| {kind} | {m['learn_steps_per_s']:,.0f} | {m['rollout_steps_per_s']:,.0f} | "
                     f"{m['learn_seconds']:.2f} | {m['rollout_share']:.1%} | {m['update_share']:.1%} |")
    amdahl = ppo["amdahl"]
    update, dummy_learn = amdahl["update_seconds"], med["DummyVecEnv"]["learn_seconds"]
    lines += ["", f"Amdahl's law: PPO's own update (`train()`, {update:.2f} s, the same work on both sides) "
              f"bounds learn() on any env at DummyVecEnv's {dummy_learn:.2f} s / {update:.2f} s = "
              f"**{amdahl['ceiling']:.2f}x**, even with rollouts, resets and the rest free (measured "
              f"{ppo['ratio_learn']:.2f}x)."]
    lines += ["", "| prompt draw (1024 prompts) | whole refill | generator calls alone | prompts per env "
              "step | generator per env step | vs CartPole's whole step |", "|---|---:|---:|---:|---:|---:|"]
    for name, f in floor.items():
        lines.append(f"| {name} | {f['refill_s'] * 1e6:,.0f} us | {f['generator_calls_s'] * 1e6:,.0f} us "
                     f"({f['generator_calls']} calls) | {f['prompts_per_step']:.0f} | "
                     f"{f['generator_s_per_step'] * 1e6:.1f} us | "
                     f"{f['generator_share_of_cartpole_step']:.0%} |")
    lines += ["", f"Verifier on {ver['answers']} answers: batch {ver['batch_per_s']:,.0f}/s, regex+eval "
              f"{ver['eval_per_s']:,.0f}/s; batch agrees with `verify`: {ver['batch_agrees_with_verify']}.", "",
              "| goal | verdict |", "|---|---|",
              f"| native vector Countdown-4 >= {GOAL_ENV:g}x CartPoleVectorEnv | "
              f"{_verdict(env['ratio_vs_cartpole']['Countdown-4 (masked)'], GOAL_ENV)} |",
              f"| (Countdown-3) | {_verdict(env['ratio_vs_cartpole']['Countdown-3 (masked)'], GOAL_ENV)} |",
              f"| (ceiling of any env under the masked loop: the harness alone) | "
              f"{env['ratio_vs_cartpole'][HARNESS]:.2f}x CartPoleVectorEnv |",
              f"| SB3 PPO on the adapter >= {GOAL_PPO:g}x on DummyVecEnv (learn) | "
              f"{_verdict(ppo['ratio_learn'], GOAL_PPO)} |",
              f"| (rollout collection alone) | {_verdict(ppo['ratio_rollout'], GOAL_PPO)} |",
              f"| (learn() ceiling by Amdahl's law: all but the update free) | "
              f"{_verdict(ppo['amdahl']['ceiling'], GOAL_PPO)} |",
              f"| batch verifier >= {GOAL_VERIFIER:g}x regex+eval | "
              f"{_verdict(ver['ratio_batch_vs_eval'], GOAL_VERIFIER)} |"]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed goals",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved measurements (median)")
    parser.add_argument("--seconds", type=float, default=0.3, help="length of one env measurement")
    parser.add_argument("--ppo-updates", type=int, default=2, help="PPO updates per learn() run")
    parser.add_argument("--ppo-repeats", type=int, default=1, help="learn() runs per env kind (median)")
    parser.add_argument("--verifier-size", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(parser, "speed_goals", RESULTS)
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("repeats", "ppo_updates", "ppo_repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)} must be >= 1")
    if args.seconds <= 0 or args.verifier_size < 3:
        parser.error(f"--seconds={args.seconds} must be > 0 and --verifier-size={args.verifier_size} >= 3")
    if args.update_results and args.out is not None:
        parser.error("--update-results writes benchmarks/results/; do not pass --out with it")
    out = output_folder(args)
    limit_threads(1)
    result: dict[str, Any] = {
        "command": command_line("benchmarks.speed goals", argv),
        "machine": machine_info(),
        "envs": measure_envs(args.repeats, args.seconds, args.seed),
        "ppo": measure_ppo(args.ppo_updates, args.ppo_repeats, args.seed),
        "verifier": measure_verifiers(CountdownTask(), args.verifier_size, args.repeats, args.seed),
    }
    cart_step = NUM_ENVS / result["envs"]["env_steps_per_s"]["CartPoleVectorEnv"]
    result["prompt_floor"] = measure_prompt_floor(args.repeats, args.seed, cart_step)
    write_results(out, "speed_goals", result, markdown(result))
    return result


if __name__ == "__main__":
    sys.exit(cli(main))
