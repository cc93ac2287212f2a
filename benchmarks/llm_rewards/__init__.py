"""Do the language-model bridges pay what ``verify()`` pays, refuse hostile completions, and how fast?

    python -m benchmarks.llm_rewards [--n 100000] [--speed-n 5000] [--repeats 3] [--seed 0]
                                     [--out DIR | --update-results]

1. **Agreement.** ``--n`` planted completions over Countdown-4 train prompts (seeded): the generating
   solution, random grammar-walk answers, one-character mutations of the solution, and wrappers around
   them (reasoning text, whitespace, an earlier answer block, and broken wrappers: no tags, an unclosed
   tag, unbalanced tags). The expected reward is ``verify(answer).reward`` for a completion whose
   wrapper is sound and 0 for a broken one. Every completion goes through each bridge: the TRL reward
   functions (``rlvr_accuracy + rlvr_format``, in batches as GRPOTrainer calls them), verl's
   ``compute_score``, the ``verifiers`` taskset's own scoring (``await task.score(trace)``) and the text
   env (``reset(options={"prompt": p})`` + ``step``). A disagreement is any reward that differs.
2. **Hostile completions** (code, ``**``, ``^``, ``!``, unary minus, decimals, near-miss values, huge
   numbers, 1 MB of text, unbalanced tags): none may be paid the accuracy reward by any bridge, and
   none may raise. reasoning-gym's ``score_answer`` (if installed) sees the same ones, for reference.
3. **Throughput.** ``--speed-n`` of the planted completions scored by our TRL accuracy function (one call
   per batch of 1000) and by reasoning-gym's Countdown scorer (``extract_answer`` then
   ``score_answer``, the pair a reasoning-gym reward uses), alternately, ``--repeats`` times; medians
   and the ratio come from this one run. reasoning-gym is not a project dependency: install it in the
   benchmark's environment (``pip install reasoning-gym``); without it the throughput row says so.

Results: ``<out>/llm_rewards.json`` and ``<out>/llm_rewards.md`` (atomically written), table printed.
It is one module of about 400 lines because its three parts feed one table from the same planted
completions and bridges.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np

from benchmarks.core.common import (
    RESULTS_DIR,
    add_output_arguments,
    command_line,
    limit_threads,
    machine_info,
    output_folder,
    write_results,
)
from rlvr_env import verify
from rlvr_env.tasks.expression.completions import score_completion
from rlvr_env.tasks.expression.prompt import Prompt
from rlvr_env.tasks.countdown.task import CountdownTask

#: The target: TRL reward throughput at least this multiple of reasoning-gym's score_answer.
GOAL_RATIO = 50.0
_CHARS = "0123456789+-*/() "

# (completion, numbers, target): hostile completions; none may be paid the accuracy reward.
HOSTILE: list[tuple[str, list[int], int]] = [
    ("<answer>__import__('os').getpid()*0+7</answer>", [1, 2, 4], 7),
    ("<answer>(lambda: 7)()</answer>", [1, 2, 4], 7),
    ("<answer>2**3</answer>", [2, 3], 8),
    ("<answer>2**3**2</answer>", [2, 3, 2], 512),
    ("<answer>2^3</answer>", [2, 3], 8),
    ("<answer>3!</answer>", [3], 6),
    ("<answer>-2+3+1</answer>", [2, 3, 1], 2),
    ("<answer>1.0+2</answer>", [1, 2], 3),
    ("<answer>697*(834-483)</answer>", [697, 834, 483], 244646),  # 244647: within 1e-5 relative
    ("<answer>9*100+1/(50*60)</answer>", [9, 100, 1, 50, 60], 900),  # 900.0003
    ("<answer>999999*999999*999999</answer>", [999999, 999999, 999999], 1),
    ("<answer>" + "9" * 5000 + "</answer>", [9], 9),
    ("<answer>" + "(" * 200 + "1" + ")" * 200 + "</answer>", [1], 1),
    ("x" * 1_000_000 + "<answer>1+2</answer>", [1, 2], 3),
    ("<answer>1+2", [1, 2], 3),
    ("1+2</answer>", [1, 2], 3),
    ("<answer><answer>1+2</answer>", [1, 2], 3),
    ("<answer>1+2</answer><answer>", [1, 2], 3),
    ("<answer>١+٢</answer>", [1, 2], 3),
    ("<answer>1+2 = 3</answer>", [1, 2], 3),
    ("<answer>1+1+1</answer>", [1, 2], 3),
    ("<answer>3</answer>", [1, 2], 3),
]


def planted(task: CountdownTask, n: int,
            seed: int) -> tuple[list[str], list[Prompt], list[float], list[bool]]:
    """``n`` completions, their prompts, the reward verify() assigns (0 for a broken wrapper), and whether
    each wrapper is sound (one balanced answer block last)."""
    rng = np.random.default_rng(seed)
    numbers, targets, history = task.sample_arrays(rng, "train", n)
    completions: list[str] = []
    prompts: list[Prompt] = []
    expected: list[float] = []
    sounds: list[bool] = []
    grammar = task.grammar
    for i in range(n):
        prompt = Prompt(tuple(int(x) for x in numbers[i]), int(targets[i]))
        solution = task.decode(task.solution_tokens(history[i]), prompt)
        kind = rng.integers(3)
        if kind == 0:
            answer = solution
        elif kind == 1:  # a random walk through the grammar mask, as an untrained policy would answer
            tokens: list[int] = []
            while len(tokens) < task.max_length:
                mask = task.action_mask(prompt, tokens)
                tok = int(rng.choice(np.flatnonzero(mask)))
                tokens.append(tok)
                if tok == task.eos_id:
                    break
            answer = task.decode(tokens, prompt)
        else:  # one character of the solution replaced, inserted or deleted
            j = int(rng.integers(len(solution)))
            ch = _CHARS[int(rng.integers(len(_CHARS)))]
            op = rng.integers(3)
            answer = (solution[:j] + ch + solution[j + 1 :] if op == 0 else
                      solution[:j] + ch + solution[j:] if op == 1 else solution[:j] + solution[j + 1 :])
        wrap = int(rng.integers(8))
        sound = True
        if wrap == 0:
            text = f"<answer>{answer}</answer>"
        elif wrap == 1:
            text = f"Let me try {prompt.numbers}. Reaching {prompt.target}...\n<answer>{answer}</answer>"
        elif wrap == 2:
            text = f"<answer>\n  {answer}  \n</answer>\n"
        elif wrap == 3:
            text = f"first guess <answer>1+1</answer>, better: <answer>{answer}</answer> done"
        elif wrap == 4:
            text, sound = answer, False  # no tags
        elif wrap == 5:
            text, sound = f"<answer>{answer}", False  # unclosed
        elif wrap == 6:
            text, sound = f"<answer><answer>{answer}</answer>", False  # unbalanced
        else:
            text = f"<answer>{answer}</answer>"
        value = (verify(answer.strip(), prompt.numbers, prompt.target, grammar=grammar).reward
                 if sound else 0.0)
        if sound and not answer.strip():
            value = 0.0  # an empty answer is refused by extraction
        completions.append(text)
        prompts.append(prompt)
        expected.append(value)
        sounds.append(sound)
    return completions, prompts, expected, sounds


def through_trl(task: CountdownTask, completions: list[str], prompts: list[Prompt]) -> list[float]:
    from rlvr_env.llm import reward_functions

    acc, fmt = reward_functions(task)
    out: list[float] = []
    for s in range(0, len(completions), 1000):
        batch = completions[s : s + 1000]
        kw = dict(prompts=[""] * len(batch), completions=batch,
                  numbers=[list(p.numbers) for p in prompts[s : s + 1000]],
                  target=[p.target for p in prompts[s : s + 1000]])
        out += [a + f for a, f in zip(acc(**kw), fmt(**kw))]
    return out


def through_verl(task: CountdownTask, completions: list[str], prompts: list[Prompt]) -> list[float]:
    from rlvr_env.llm import compute_score, ground_truth

    return [compute_score("rlvr/Countdown", c, ground_truth(task, p), {"index": i})["score"]
            for i, (c, p) in enumerate(zip(completions, prompts))]


def through_verifiers(task: CountdownTask, completions: list[str], prompts: list[Prompt]) -> list[float]:
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode

    from rlvr_env.llm.common import task_spec
    from rlvr_env.llm.vf_taskset import RlvrTask, RlvrTaskConfig, RlvrTaskData

    spec = {k: v for k, v in task_spec(task).items() if k != "task"}
    config = RlvrTaskConfig()
    agent = vf.AgentInfo(config=vf.AgentConfig())

    async def score_all() -> list[float]:
        out = []
        for c, p in zip(completions, prompts):
            t = RlvrTask(RlvrTaskData(prompt="p", numbers=list(p.numbers), target=p.target, **spec), config)
            trace = vf.Trace(task=vf.TraceTask(type="RlvrTask", data=t.data), agent=agent,
                             nodes=[MessageNode(message=vf.AssistantMessage(content=c), sampled=True)])
            await t.score(trace)
            out.append(trace.reward)
        return out

    return asyncio.run(score_all())


def through_text_env(task: CountdownTask, completions: list[str], prompts: list[Prompt]) -> list[float]:
    from rlvr_env.text_env import TextEnv

    env = TextEnv(task)
    out = []
    for c, p in zip(completions, prompts):
        env.reset(options={"prompt": p})
        out.append(float(env.step(c)[1]))
    return out


def _text_env_raw(task: CountdownTask, completions: list[str], prompts: list[Prompt]) -> list[float]:
    """The text env's step on prompts outside the task's ranges (set directly: reset would refuse them)."""
    from rlvr_env.text_env import TextEnv

    env = TextEnv(task)
    out = []
    for c, p in zip(completions, prompts):
        env.reset(seed=0)
        env._prompt = p  # the hostile prompts lie outside any task's ranges; the verifier call is the point
        out.append(float(env.step(c)[1]))
    return out


BRIDGES = {"TRL reward functions": through_trl, "verl compute_score": through_verl,
           "verifiers taskset (task.score)": through_verifiers, "text env (step)": through_text_env}


def hostile_check(task: CountdownTask) -> dict[str, Any]:
    """Per bridge: hostile completions paid the accuracy reward, and exceptions raised."""
    from rlvr_env.llm import AccuracyReward, compute_score
    from rlvr_env.tasks.expression.verifier import Grammar

    grammar = Grammar(operators=frozenset("+-*/"), parentheses=True, number_use="at_most_once")
    result: dict[str, Any] = {"count": len(HOSTILE)}
    paid = {"score_completion": 0, "TRL": 0, "verl": 0}
    errors = 0
    acc = AccuracyReward(task)
    for text, numbers, target in HOSTILE:
        try:
            paid["score_completion"] += score_completion(text, numbers, target, grammar=grammar).correct
            paid["TRL"] += acc(completions=[text], numbers=[numbers], target=[target])[0] > 0
            gt = {"numbers": numbers, "target": target}
            paid["verl"] += compute_score("rlvr/Countdown", text, gt)["accuracy"] > 0
        except Exception:  # noqa: BLE001 - counted: the goal is zero
            errors += 1
    try:  # the verifiers taskset and the text env on the same completions, through their own paths
        prompts = [Prompt(tuple(n), t) for _, n, t in HOSTILE]
        texts = [h[0] for h in HOSTILE]
        generic = CountdownTask(n_numbers=2)  # grammar only: the prompts are replayed as they are
        paid["verifiers"] = sum(r > 1.0 for r in through_verifiers(generic, texts, prompts))
        paid["text env"] = sum(r > 1.0 for r in _text_env_raw(generic, texts, prompts))
    except Exception:  # noqa: BLE001
        errors += 1
    result["paid"] = paid
    result["exceptions"] = errors
    rg = _reasoning_gym()
    if rg is not None:
        extract, score = rg
        rg_paid = []
        for text, numbers, target in HOSTILE:
            if len(text) > 100_000:
                continue  # rg's regex extraction would still find the answer; parse cost is not the point
            answer = extract(text)
            if score(answer, {"metadata": {"numbers": numbers, "target": target}}) >= 1.0:
                rg_paid.append(answer)
        result["reasoning_gym_paid"] = rg_paid
    return result


def _reasoning_gym() -> tuple[Any, Any] | None:
    try:
        import reasoning_gym
        from reasoning_gym.games.countdown import CountdownConfig, CountdownDataset
        from reasoning_gym.utils import extract_answer
    except ImportError:
        return None
    from importlib.metadata import version

    dataset = CountdownDataset(CountdownConfig(size=1, seed=0))
    # the distribution's version (the module's __version__ string lags behind its releases)
    _reasoning_gym.version = version("reasoning-gym")  # type: ignore[attr-defined]
    del reasoning_gym
    return extract_answer, dataset.score_answer


def throughput(task: CountdownTask, completions: list[str], prompts: list[Prompt],
               repeats: int) -> dict[str, Any]:
    from rlvr_env.llm import AccuracyReward

    acc = AccuracyReward(task)  # its own cache: one call per batch verifies every completion
    batches = [(completions[s : s + 1000], [list(p.numbers) for p in prompts[s : s + 1000]],
                [p.target for p in prompts[s : s + 1000]]) for s in range(0, len(completions), 1000)]
    entries = [{"metadata": {"numbers": list(p.numbers), "target": p.target}} for p in prompts]
    rg = _reasoning_gym()

    def ours() -> float:
        acc._cache.clear()
        start = time.perf_counter()
        for comps, nums, targ in batches:
            acc(completions=comps, numbers=nums, target=targ)
        return len(completions) / (time.perf_counter() - start)

    def theirs() -> float:
        assert rg is not None
        extract, score = rg
        start = time.perf_counter()
        for text, entry in zip(completions, entries):
            score(extract(text), entry)
        return len(completions) / (time.perf_counter() - start)

    ours_runs, theirs_runs = [], []
    for _ in range(repeats):
        gc.collect()
        ours_runs.append(ours())
        if rg is not None:
            gc.collect()
            theirs_runs.append(theirs())
    out: dict[str, Any] = {"completions": len(completions), "repeats": repeats,
                           "trl_per_s": ours_runs, "trl_median": statistics.median(ours_runs)}
    if rg is not None:
        out["reasoning_gym_per_s"] = theirs_runs
        out["reasoning_gym_median"] = statistics.median(theirs_runs)
        out["reasoning_gym_version"] = getattr(_reasoning_gym, "version", "?")
        out["ratio_median"] = statistics.median(o / t for o, t in zip(ours_runs, theirs_runs))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llm_rewards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="planted completions per bridge")
    parser.add_argument("--speed-n", type=int, default=5_000, help="completions in the throughput run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(parser, "llm_rewards", RESULTS_DIR)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("n", "speed_n", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)} must be positive")
    limit_threads(1)
    before = machine_info()
    task = CountdownTask()
    t0 = time.perf_counter()
    completions, prompts, expected, sound = planted(task, args.n, args.seed)
    import verifiers.v1  # noqa: F401 - imported before timing: its import takes seconds

    agreement: dict[str, Any] = {}
    for name, bridge in BRIDGES.items():
        start = time.perf_counter()
        got = bridge(task, completions, prompts)
        seconds = time.perf_counter() - start
        bad = [i for i, (g, e) in enumerate(zip(got, expected)) if abs(g - e) > 1e-12]
        agreement[name] = {"disagreements": len(bad), "examples": [completions[i] for i in bad[:3]],
                           "seconds": round(seconds, 2)}
        print(f"{name}: {len(bad)} disagreements in {seconds:.1f} s", file=sys.stderr)
    exp = np.asarray(expected)
    mix = {"correct": int((exp > 1.0).sum()), "well_formed_wrong": int(((exp > 0) & (exp <= 1.0)).sum()),
           "zero": int((exp == 0).sum())}
    hostile = hostile_check(task)
    speed = throughput(task, completions[: args.speed_n], prompts[: args.speed_n], args.repeats)
    tagged = [i for i in range(len(completions)) if sound[i]][: args.speed_n]
    speed_tagged = throughput(task, [completions[i] for i in tagged], [prompts[i] for i in tagged],
                              args.repeats)
    after = machine_info()
    result = {"command": command_line("benchmarks.llm_rewards", argv), "n": args.n, "seed": args.seed,
              "mix": mix, "agreement": agreement, "hostile": hostile, "throughput": speed,
              "throughput_tagged": speed_tagged,
              "goal_ratio": GOAL_RATIO, "machine_before": before, "machine_after": after,
              "seconds": round(time.perf_counter() - t0, 1)}
    write_results(output_folder(args), "llm_rewards", result, table(result))
    return 0


def table(r: dict[str, Any]) -> str:
    m = r["mix"]
    lines = [
        f"`{r['command']}` (seed {r['seed']}; Python {platform.python_version()}, "
        f"{r['machine_before']['cpus']} CPUs, load average before/after "
        f"{_load(r['machine_before'])}, {_load(r['machine_after'])})",
        "",
        f"Agreement with `verify()` over {r['n']:,} planted Countdown-4 completions "
        f"({m['correct']:,} correct, {m['well_formed_wrong']:,} well-formed but wrong, {m['zero']:,} "
        "refused: malformed answers or broken tags):",
        "",
        "| Bridge | Disagreements | Seconds |",
        "|---|---:|---:|",
    ]
    for name, a in r["agreement"].items():
        lines.append(f"| {name} | {a['disagreements']} | {a['seconds']:.1f} |")
    h = r["hostile"]
    lines += ["", f"Hostile completions ({h['count']}: code, `**`, `^`, `!`, unary minus, decimals, near "
              "misses within 1e-5, huge numbers, 1 MB of text, unbalanced tags): paid by "
              + ", ".join(f"{k} {v}" for k, v in h["paid"].items()) + f"; exceptions {h['exceptions']}."]
    if "reasoning_gym_paid" in h:
        lines[-1] += (f" reasoning-gym's `score_answer` paid {len(h['reasoning_gym_paid'])} of them: "
                      + ", ".join(f"`{a}`" for a in h["reasoning_gym_paid"]) + ".")
    s, st = r["throughput"], r["throughput_tagged"]
    lines += ["", f"Reward throughput, completions per second (median of {s['repeats']}, the two scorers "
              "alternating in one process): on the first "
              f"{s['completions']:,} planted completions, and on the first {st['completions']:,} whose "
              "answer sits in sound tags (so both scorers parse it):", "",
              "| Scorer | All planted | Answer in sound tags |", "|---|---:|---:|",
              "| `rlvr_env.llm` TRL accuracy function (batches of 1000) | "
              f"{s['trl_median']:,.0f} | {st['trl_median']:,.0f} |"]
    if "reasoning_gym_median" in s:
        lines += [f"| reasoning-gym {s['reasoning_gym_version']} `extract_answer` + `score_answer` "
                  f"(Countdown) | {s['reasoning_gym_median']:,.0f} | {st['reasoning_gym_median']:,.0f} |",
                  f"| ratio (goal >= {r['goal_ratio']:.0f}x) | {s['ratio_median']:,.1f}x | "
                  f"{st['ratio_median']:,.1f}x |"]
    else:
        lines.append("| reasoning-gym | not installed: no ratio measured | |")
    return "\n".join(lines) + "\n"


def _load(info: dict[str, Any]) -> str:
    load = info.get("load_average_1min")
    return "?" if load is None else f"{load:.1f}"
