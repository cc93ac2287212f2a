"""One seed of the R1 recipe's four stages (:func:`stages_run`) and its one-seed table; the package's
docstring says what the stages are (docs/stages.md)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["DEFAULT_SPEC", "STAGES", "SIDE_ARMS", "evaluate_tasks", "stage_table", "stages_run"]

#: The four stages, in order, and the side arms, by the names the records and tables use.
STAGES: tuple[str, ...] = ("cold_start", "reasoning_rl", "rejection_sft", "mix_rl")
SIDE_ARMS: tuple[str, ...] = ("rsft_from_base", "rejection_sft_noremix")

#: One seed's settings (sized for two cores; docs/stages.md says how they were chosen).
DEFAULT_SPEC: dict[str, Any] = {
    "env_id": "rlvr/CountdownMix-v0",
    "env_kwargs": {},
    "reasoning": "countdown",
    "sft": {"n": 24_000, "epochs": 8, "batch_size": 256, "learning_rate": 1e-3},
    "rl": {"budget": 150_000},
    "rejection": {"n_prompts": 1_024, "k": 8, "cap": 4, "epochs": 2, "batch_size": 256,
                  "learning_rate": 3e-4, "start": "current", "remix": 1.0},
    "mix_rl": {"budget": 150_000},
    "eval": {"k": 16, "prompts": 200},
}


def _make(spec: Mapping[str, Any], weights: Mapping[str, float] | None) -> Any:
    """The seeded GRPO transformer on the mix, with ``weights`` (None: the mix's own)."""
    import rlvr_env  # noqa: F401 - registers the envs
    from agents.grpo import GRPO, GRPOConfig

    kwargs = {**spec["env_kwargs"], "observation": "tokens"}
    if weights is not None:
        kwargs["weights"] = dict(weights)
    config = GRPOConfig.preset("transformer", **spec.get("grpo", {}))
    return GRPO(spec["env_id"], config, policy="transformer", seed=spec["seed"], env_kwargs=kwargs)


def _tasks(model: Any) -> tuple[str, ...]:
    return tuple(model.env.unwrapped.task.members)


def _only(tasks: tuple[str, ...], chosen: set[str]) -> dict[str, float]:
    """Mix weights that draw only ``chosen`` (equally), the others at 0: the same spaces as the mix."""
    return {t: (1.0 if t in chosen else 0.0) for t in tasks}


def _carry(src: Any, dst: Any) -> Any:
    """``dst`` takes ``src``'s network and restarts RL from it (the KL reference becomes it)."""
    dst.policy.net.load_state_dict(copy.deepcopy(src.policy.net.state_dict()))
    dst.policy.restart_from_current()
    return dst


def evaluate_tasks(model: Any, spec: Mapping[str, Any], split: str = "test") -> dict[str, dict[str, Any]]:
    """Greedy, sampled (mean@k) and pass@k of ``model`` on each task of its mix on ``split`` (held-out:
    ``"test"``), each task alone (the mix with the others' weights at 0: the same spaces, so the same
    policy reads it)."""
    import gymnasium as gym

    from agents.evaluation import success_report

    ev = spec["eval"]
    rng = np.random.default_rng(0)
    out: dict[str, dict[str, Any]] = {}
    tasks = _tasks(model)
    for name in tasks:
        env = gym.make(spec["env_id"], **{**spec["env_kwargs"], "observation": "tokens",
                                          "weights": _only(tasks, {name})})

        def predict(obs: np.ndarray, masks: np.ndarray | None, deterministic: bool) -> np.ndarray:
            return model.policy.predict(obs, deterministic, rng, masks)

        rep = success_report(predict, env, split, k=ev["k"], masked=model.use_masks, n_prompts=ev["prompts"],
                             seed=0)
        env.close()
        out[name] = {"greedy": rep.greedy, "sampled": rep.sampled,
                     "pass_at": {str(j): v for j, v in rep.pass_at([1, ev["k"]]).items()}}
    return out


def _rl(model: Any, budget: int) -> dict[str, Any]:
    """GRPO for ``budget`` env steps; its cost: answers sampled, env steps (policy tokens), CPU seconds."""
    answers = [0]
    model.add_group_hook(lambda event: answers.__setitem__(0, answers[0] + int(event.rewards.size)))
    cpu, wall = time.process_time(), time.perf_counter()
    model.learn(int(budget))
    return {"answers": answers[0], "tokens": int(model.num_timesteps), "cpu_seconds": time.process_time() - cpu,
            "seconds": time.perf_counter() - wall}


def _rejection(model: Any, spec: Mapping[str, Any], *, n_prompts: int, remix: float, seed: int
               ) -> dict[str, Any]:
    """Stage 3's step on ``model`` (which draws only the reasoning task): sample, keep what is paid,
    fine-tune re-mixed with the other tasks' solutions at ``remix`` kept answers each."""
    import gymnasium as gym

    from agents.rejection import Remix, rejection_finetune, rejection_sample

    rj = spec["rejection"]
    cpu, wall = time.process_time(), time.perf_counter()
    kept = rejection_sample(model, n_prompts, rj["k"], split="train", cap=rj["cap"], seed=seed)
    mix = None
    if remix > 0:
        tasks = _tasks(model)
        others = _only(tasks, set(tasks) - {spec["reasoning"]})
        task = gym.make(spec["env_id"], **{**spec["env_kwargs"], "weights": others}).unwrapped.task
        n_remix = max(int(round(remix * kept.kept)), 1)
        prompts = task.sample_prompts(np.random.default_rng(seed + 1), "train", n_remix)
        mix = Remix(prompts, remix)
    if kept.kept == 0:  # nothing paid: nothing to fit (the model stays as it was)
        fit: dict[str, Any] = {"skipped": "no answer was paid"}
    else:
        fit = rejection_finetune(model, kept, start=rj["start"], epochs=rj["epochs"],
                                 batch_size=rj["batch_size"], learning_rate=rj["learning_rate"], remix=mix,
                                 seed=seed)
    counts = kept.as_dict()
    return {"answers": int(counts["sampled"]), "tokens": int(counts["tokens_sampled"]),
            "cpu_seconds": time.process_time() - cpu, "seconds": time.perf_counter() - wall,
            "kept": counts, "fit": {k: v for k, v in fit.items() if isinstance(v, (int, float, str))}}


def stages_run(spec: dict[str, Any], report: Callable[[str, dict[str, Any]], None] | None = None
               ) -> dict[str, Any]:
    """One seed of the four stages and the two side arms; ``report(stage, record)`` is called after each
    (the one-seed command prints a table there). Returns the record: per stage and side arm, the held-out
    scores of every task and the stage's cost."""
    from agents.sft import cold_start
    from benchmarks.core.common import limit_threads

    threads = limit_threads(spec.get("threads", 1), import_torch=True)
    wall, cpu_start = time.perf_counter(), time.process_time()
    seed = spec["seed"]
    record: dict[str, Any] = {"seed": seed, "torch_threads": threads, "stages": {}, "side": {}}

    def done(name: str, cost: dict[str, Any], model: Any, where: str = "stages") -> None:
        cost["draws"] = dict(model.env.unwrapped.task.weights)  # the tasks this stage trained on
        record[where][name] = {"cost": cost, "eval": evaluate_tasks(model, spec),
                               "eval_train": evaluate_tasks(model, spec, "train")}
        if report is not None:
            report(name, record)

    # 1. the cold start on every task of the mix
    base = _make(spec, None)
    tasks = _tasks(base)
    record["tasks"] = list(tasks)
    record["parameters"] = base.num_parameters()
    if spec["reasoning"] not in tasks:
        raise ValueError(f"reasoning={spec['reasoning']!r} is not a task of {spec['env_id']} {list(tasks)}")
    sft = spec["sft"]
    cpu = time.process_time()
    info = cold_start(base, sft["n"], epochs=sft["epochs"], batch_size=sft["batch_size"],
                      learning_rate=sft["learning_rate"], minibatch="prompts", warmup=0.0)
    done("cold_start", {"answers": 0, "tokens": int(info["sft_tokens"]) * sft["epochs"],
                        "cpu_seconds": time.process_time() - cpu, "seconds": info["sft_seconds"],
                        "solutions": sft["n"]}, base)

    # 2. reasoning RL: GRPO on the reasoning task alone
    reasoning = _only(tasks, {spec["reasoning"]})
    rl = _carry(base, _make(spec, reasoning))
    done("reasoning_rl", _rl(rl, spec["rl"]["budget"]), rl)
    stage2_answers = record["stages"]["reasoning_rl"]["cost"]["answers"]

    # 3. rejection sampling + SFT from the stage-2 model, re-mixed; and without the re-mix (a side arm)
    rj = spec["rejection"]
    noremix = _carry(rl, _make(spec, reasoning))
    done("rejection_sft_noremix", _rejection(noremix, spec, n_prompts=rj["n_prompts"], remix=0.0,
                                             seed=seed), noremix, "side")
    _rejection_cost = _rejection(rl, spec, n_prompts=rj["n_prompts"], remix=rj["remix"], seed=seed)
    done("rejection_sft", _rejection_cost, rl)

    # 4. RL for all scenarios: a second GRPO pass over the whole mix
    final = _carry(rl, _make(spec, None))
    done("mix_rl", _rl(final, spec["mix_rl"]["budget"]), final)

    # RS-FT against GRPO at equal sampled answers, from the same base (the stage-1 network)
    from_base = _carry(base, _make(spec, reasoning))
    n_prompts = max(1, int(round(stage2_answers / rj["k"])))
    done("rsft_from_base", _rejection(from_base, {**spec, "rejection": {**rj, "start": "current"}},
                                      n_prompts=n_prompts, remix=0.0, seed=seed), from_base, "side")
    # the whole run (the side arms and every evaluation included): what "one seed" costs
    record["seconds"], record["cpu_seconds"] = time.perf_counter() - wall, time.process_time() - cpu_start
    return record


# -- the tables ----------------------------------------------------------------------------------------
def _score(ev: Mapping[str, Any], k: int) -> str:
    return f"{ev['greedy']:.3f} / {ev['sampled']:.3f} / {ev['pass_at'][str(k)]:.3f}"


def stage_table(record: Mapping[str, Any], k: int) -> str:
    """One seed's table: per stage (and side arm) every task's held-out greedy / sampled / pass@k, its
    train-split greedy and the stage's cost; the rows so far (the one-seed command prints it after each
    stage)."""
    tasks = record["tasks"]
    head = ("| stage | " + " | ".join(f"{t} greedy / sampled / pass@{k}" for t in tasks)
            + " | train greedy (" + " / ".join(tasks) + ") | answers sampled | policy tokens | CPU s |")
    lines = [head, "|---|" + "---:|" * (len(tasks) + 4)]
    for where, names in (("stages", STAGES), ("side", SIDE_ARMS)):
        for name in names:
            row = record[where].get(name)
            if row is None:
                continue
            cost = row["cost"]
            label = name if where == "stages" else f"({name})"
            train = " / ".join(f"{row['eval_train'][t]['greedy']:.3f}" for t in tasks)
            lines.append(f"| {label} | " + " | ".join(_score(row["eval"][t], k) for t in tasks)
                         + f" | {train} | {cost['answers']:,} | {cost['tokens']:,} | {cost['cpu_seconds']:.0f} |")
    return "\n".join(lines) + "\n"

