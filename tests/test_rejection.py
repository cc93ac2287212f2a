"""Rejection sampling and fine-tuning (agents.rejection): it keeps exactly the paid answers (re-scored one
by one with ``Task.score``), within the cap, deduplicated per prompt; the fine-tune targets only the
policy's tokens (the calculator's are in the transcript, never a target), re-mixes exactly
round(ratio * kept) solutions, starts from the base when asked, becomes the KL reference, and repeats
bit for bit."""

from __future__ import annotations

from collections import Counter, defaultdict

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401
from agents.grpo import GRPO, GRPOConfig, VectorGroupRunner
from agents.rejection import Kept, Remix, expert_iteration, rejection_finetune, rejection_sample
from agents.sft import answer_demonstrations, supervised_fit
from rlvr_env import Prompt
from rlvr_env.rewards import DEFAULT_WEIGHTS

torch.set_num_threads(1)
SMALL = {"d_model": 32, "n_layers": 1, "n_heads": 2}
COUNTDOWN = ("rlvr/Countdown-v0", {"n_numbers": 3})
#: two numbers of 1..3: many paid answers, repeated within a prompt and shared across prompts
TINY = ("rlvr/Countdown-v0", {"n_numbers": 2, "number_range": (1, 3)})
THINK = ("rlvr/CountdownThink-v0", {"n_numbers": 3, "calculator": True})
FIT = {"epochs": 2, "batch_size": 16, "learning_rate": 3e-3}


def model_of(env: tuple[str, dict], policy: str = "transformer", seed: int = 0) -> GRPO:
    cfg = GRPOConfig.preset(policy, prompts_per_iter=4, group_size=4)
    return GRPO(env[0], cfg, policy=policy, seed=seed, env_kwargs=env[1],
                policy_kwargs=SMALL if policy == "transformer" else {})


def sampled_answers(model: GRPO, n_prompts: int, k: int, seed: int) -> list[tuple]:
    """Every sampled answer as (prompt, transcript, truncated, policy tokens), in sampling order, sampled
    again as rejection_sample documents it (the task's generator seeded ``seed`` draws the prompts, then
    samples), in one rollout batch."""
    task = model.env.unwrapped.task
    kind = "tokens" if model.env.unwrapped.token_context is not None else "features"
    rng = np.random.default_rng(seed)
    prompts = task.sample_prompts(rng, "train", n_prompts)
    runner = VectorGroupRunner.of_task(task, n_prompts, k, observation=kind, use_masks=model.use_masks)
    batch = runner.collect(model.policy, rng, prompts=prompts)
    venv = runner.venv.unwrapped
    return [(prompts[r // k], tuple(venv.tokens(r)), bool(batch.truncated[r]), int(batch.lengths[r]))
            for r in range(n_prompts * k)]


def paid_by_score(model: GRPO, answers: list[tuple]) -> list[tuple]:
    """(prompt, transcript) of the answers ``Task.score`` pays, one answer at a time."""
    task = model.env.unwrapped.task
    out = []
    for prompt, transcript, truncated, _ in answers:
        verdict = task.score(prompt, transcript, DEFAULT_WEIGHTS, truncated=truncated)
        if verdict.correct and verdict.well_formed:
            out.append((prompt, transcript))
    return out


def expected_kept(paid: list[tuple], cap: int | None, dedupe: bool) -> list[tuple]:
    """What the docs say is kept: per prompt, in sampling order, distinct ones (dedupe), the first cap."""
    seen, taken, out = defaultdict(set), Counter(), []
    for prompt, transcript in paid:
        repeat = transcript in seen[prompt]
        seen[prompt].add(transcript)
        if (dedupe and repeat) or (cap is not None and taken[prompt] >= cap):
            continue
        taken[prompt] += 1
        out.append((prompt, transcript))
    return out


def weights(model: GRPO) -> dict[str, np.ndarray]:
    return {k: v for k, v in model.policy.state().items() if k.startswith("net.")}


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def nudge(model: GRPO) -> None:
    """Move the trained network away from its reference (as an RL pass would)."""
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    model.policy._drop_caches()


# -- what is kept ------------------------------------------------------------------------------------
@pytest.mark.parametrize("env", [COUNTDOWN, TINY, THINK], ids=["countdown", "tiny", "think_calc"])
def test_it_keeps_exactly_the_paid_answers_deduplicated_per_prompt(env) -> None:
    model = model_of(env)
    n, k = (8, 8) if env is THINK else (16, 8)
    paid = paid_by_score(model, sampled_answers(model, n, k, seed=3))
    kept = rejection_sample(model, n, k, seed=3)
    assert kept.paid == len(paid) and kept.sampled == n * k and kept.prompts_drawn == n
    assert kept.distinct_paid == len(set(paid))
    assert list(zip(kept.prompts, kept.answers)) == expected_kept(paid, None, True)
    assert kept.kept == len(kept) == len(set(paid)) > 0
    assert kept.prompts_kept == len({p for p, _ in paid})
    task = model.env.unwrapped.task
    for prompt, answer in zip(kept.prompts, kept.answers):  # each kept answer re-scores correct
        verdict = task.score(prompt, answer, DEFAULT_WEIGHTS)
        assert verdict.correct and verdict.well_formed
    per_prompt = defaultdict(list)
    for prompt, answer in zip(kept.prompts, kept.answers):
        per_prompt[prompt].append(answer)
    assert all(len(v) == len(set(v)) for v in per_prompt.values())  # no duplicate within a prompt


def test_the_counts_are_what_was_sampled() -> None:
    model = model_of(TINY)
    answers = sampled_answers(model, 16, 8, seed=3)
    kept = rejection_sample(model, 16, 8, seed=3)
    task = model.env.unwrapped.task
    prompts = task.sample_prompts(np.random.default_rng(3), "train", 16)
    assert kept.distinct_prompts == len(set(prompts)) < 16  # a prompt drawn twice pools its answers
    # tokens the policy wrote: the transcripts hold nothing else here (no calculator)
    assert kept.tokens_sampled == sum(len(t) for _, t, _, _ in answers)
    row = kept.as_dict("s_")
    assert row["s_kept"] == kept.kept and row["s_paid"] == kept.paid and row["s_prompts"] == 16
    assert row["s_cpu_seconds"] >= 0 and row["s_wall_seconds"] > 0 and row["s_tokens_sampled"] > 0


def test_tokens_sampled_counts_the_policy_tokens_only() -> None:
    model = model_of(THINK)
    answers = sampled_answers(model, 12, 8, seed=1)
    kept = rejection_sample(model, 12, 8, seed=1)
    assert any(len(a) > len(b) for a, b in zip(kept.answers, kept.actions))  # paid ones used it too
    written = sum(len(t) for _, t, _, _ in answers)
    assert kept.tokens_sampled == sum(n for _, _, _, n in answers) < written  # the calculator wrote the rest


def test_dedupe_is_per_prompt_and_off_keeps_the_duplicates() -> None:
    model = model_of(TINY)
    paid = paid_by_score(model, sampled_answers(model, 16, 8, seed=3))
    # the data has repeats within a prompt and one transcript paid for several prompts
    assert len(set(paid)) < len(paid)
    by_answer = defaultdict(set)
    for prompt, transcript in paid:
        by_answer[transcript].add(prompt)
    assert any(len(prompts) > 1 for prompts in by_answer.values())
    kept = rejection_sample(model, 16, 8, seed=3)
    assert list(zip(kept.prompts, kept.answers)) == expected_kept(paid, None, True)
    loose = rejection_sample(model, 16, 8, seed=3, dedupe=False)
    assert list(zip(loose.prompts, loose.answers)) == paid and loose.kept == loose.paid > kept.kept
    capped = rejection_sample(model, 16, 8, seed=3, dedupe=False, cap=2)
    assert list(zip(capped.prompts, capped.answers)) == expected_kept(paid, 2, False)


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_the_cap_keeps_the_first_distinct_answers_of_each_prompt(cap) -> None:
    model = model_of(TINY)
    paid = paid_by_score(model, sampled_answers(model, 16, 8, seed=3))
    kept = rejection_sample(model, 16, 8, seed=3, cap=cap)
    assert list(zip(kept.prompts, kept.answers)) == expected_kept(paid, cap, True)
    distinct = defaultdict(set)
    for prompt, transcript in paid:
        distinct[prompt].add(transcript)
    counts = Counter(kept.prompts)
    assert all(counts[p] == min(cap, len(v)) for p, v in distinct.items())
    assert any(len(v) > cap for v in distinct.values())  # the cap bites somewhere
    assert kept.distinct_paid == sum(len(v) for v in distinct.values())


def test_greedy_sampling_gives_one_answer_per_prompt() -> None:
    model = model_of(TINY)
    kept = rejection_sample(model, 16, 4, seed=3, deterministic=True, dedupe=False)
    assert kept.paid % 4 == 0 and kept.distinct_paid == len(set(kept.prompts))  # a prompt's 4 are one
    assert rejection_sample(model, 16, 4, seed=3, deterministic=True).kept == len(set(kept.prompts)) > 0


# -- the fine-tune -----------------------------------------------------------------------------------
def test_calculator_tokens_are_in_the_transcript_and_never_a_target() -> None:
    model = model_of(THINK)
    kept = rejection_sample(model, 12, 8, seed=1)
    task = model.env.unwrapped.task
    longer = 0
    for prompt, answer, actions in zip(kept.prompts, kept.answers, kept.actions):
        # the transcript is the actions with the calculator's replies written after each "="
        transcript: list[int] = []
        for a in actions:
            transcript.append(a)
            if a in task.reply_after:
                transcript += task.reply(prompt, tuple(transcript))
        assert tuple(transcript) == answer
        longer += len(answer) > len(actions)
    assert longer > 0
    demos = answer_demonstrations(model.env, kept.prompts, kept.answers, transcripts=True)
    assert np.array_equal(demos.actions, np.concatenate(kept.actions))  # targets: the actions, in order
    assert np.array_equal(demos.lengths, [len(a) for a in kept.actions])
    report = rejection_finetune(model, kept, **FIT)
    assert report["tokens"] == sum(map(len, kept.actions))
    assert report["env_tokens"] == sum(map(len, kept.answers)) - report["tokens"] > 0
    # the fit equals one on the policy's tokens alone (replayed as actions, the env writing the rest)
    other = model_of(THINK)
    manual = answer_demonstrations(other.env, kept.prompts, kept.actions)
    supervised_fit(other.policy, manual, seed=0, masked=other.use_masks, **FIT)
    assert same(weights(model), weights(other))


def test_a_transcript_the_env_does_not_write_is_refused() -> None:
    model = model_of(THINK)
    kept = rejection_sample(model, 12, 8, seed=1)
    i = next(j for j, (a, b) in enumerate(zip(kept.answers, kept.actions)) if len(a) > len(b))
    with pytest.raises(ValueError, match="not the transcript|not paid"):
        answer_demonstrations(model.env, [kept.prompts[i]], [kept.actions[i]], transcripts=True)
    # a calculator result changed: the replay never feeds it (the env writes its own), yet it is refused
    task = model.env.unwrapped.task
    at = next(j for j in range(1, len(kept.answers[i])) if kept.answers[i][j - 1] in task.reply_after)
    forged = list(kept.answers[i])
    forged[at] = task.vocab.index("7") if task.vocab[forged[at]] != "7" else task.vocab.index("8")
    with pytest.raises(ValueError, match="not the transcript"):
        answer_demonstrations(model.env, [kept.prompts[i]], [forged], transcripts=True)


def test_the_fit_moves_the_weights_raises_the_likelihood_and_becomes_the_reference() -> None:
    model = model_of(COUNTDOWN)
    kept = rejection_sample(model, 16, 8, seed=3)
    demos = answer_demonstrations(model.env, kept.prompts, kept.answers, transcripts=True)
    before = weights(model)
    with torch.no_grad():
        start = float(model.policy.log_prob(demos.obs, demos.actions, demos.masks).sum())
    report = rejection_finetune(model, kept, **FIT)
    with torch.no_grad():
        end = float(model.policy.log_prob(demos.obs, demos.actions, demos.masks).sum())
    assert not same(before, weights(model)) and end > start
    assert report["kept"] == kept.kept and report["remixed"] == 0 and report["demonstrations"] == kept.kept
    assert report["steps"] > 0 and len(report["losses"]) == 2 and report["start"] == "current"
    pol = model.policy
    ref, net = pol.reference.state_dict(), pol.net.state_dict()
    assert all(torch.equal(ref[k], net[k]) for k in ref)
    assert not pol.optimizer.state_dict()["state"]  # the RL optimiser restarted


def test_start_base_restores_the_reference_before_fitting() -> None:
    model, other = model_of(COUNTDOWN), model_of(COUNTDOWN)
    kept = rejection_sample(model, 16, 8, seed=3)
    for m in (model, other):
        nudge(m)
    base = {k: v.clone() for k, v in model.policy.reference.state_dict().items()}
    assert not all(torch.equal(base[k], v) for k, v in model.policy.net.state_dict().items())
    other.policy.reset_to_reference()
    assert all(torch.equal(base[k], v) for k, v in other.policy.net.state_dict().items())
    demos = answer_demonstrations(other.env, kept.prompts, kept.answers, transcripts=True)
    supervised_fit(other.policy, demos, seed=0, masked=other.use_masks, **FIT)
    report = rejection_finetune(model, kept, start="base", **FIT)
    assert report["start"] == "base" and same(weights(model), weights(other))
    current = model_of(COUNTDOWN)
    nudge(current)
    rejection_finetune(current, kept, start="current", **FIT)
    assert not same(weights(current), weights(model))


def test_the_remix_adds_round_ratio_kept_solutions_cycling_through_the_prompts() -> None:
    model = model_of(COUNTDOWN)
    kept = rejection_sample(model, 16, 8, seed=3)
    task = model.env.unwrapped.task
    others = task.sample_prompts(np.random.default_rng(99), "train", 3)
    ratio = 4.6 / kept.kept  # round, not floor: 5 re-mixed, cycling through 3 prompts
    n = round(ratio * kept.kept)
    assert n == 5
    fit = {**FIT, "batch_size": 4}  # several steps an epoch: the seed orders them
    report = rejection_finetune(model, kept, remix=Remix(others, ratio), seed=5, **fit)
    assert report["remixed"] == n and report["demonstrations"] == kept.kept + n
    extra = [others[i % len(others)] for i in range(n)]
    other = model_of(COUNTDOWN)
    demos = answer_demonstrations(other.env, [*kept.prompts, *extra],
                                  [*kept.actions, *(task.solution(p) for p in extra)])
    assert report["tokens"] == len(demos.actions)
    supervised_fit(other.policy, demos, seed=5, masked=other.use_masks, **fit)
    assert same(weights(model), weights(other))
    none = rejection_finetune(model_of(COUNTDOWN), kept, remix=Remix(others, 0.0), **FIT)
    assert none["remixed"] == 0 and none["demonstrations"] == kept.kept


def test_the_remix_count_rounds_as_python_does() -> None:
    assert [Remix((1,), r).count(5) for r in (0.0, 0.1, 0.3, 0.5, 1.0, 2.0)] == [0, 0, 2, 2, 5, 10]
    assert Remix((1, 2), 1.0).take(5) == [1, 2, 1, 2, 1]


def test_a_remixed_prompt_without_a_solution_is_named() -> None:
    model = model_of(COUNTDOWN)
    kept = rejection_sample(model, 16, 8, seed=3)
    bare = Prompt((1, 2, 3), 6)  # built by hand: no generating expression
    with pytest.raises(ValueError, match=r"re-mixed prompt Prompt\(numbers=\(1, 2, 3\)"):
        rejection_finetune(model, kept, remix=Remix([bare], 1.0), **FIT)


# -- determinism, policies, expert iteration -------------------------------------------------------
@pytest.mark.parametrize("env,policy", [(COUNTDOWN, "transformer"), (TINY, "mlp")])
def test_the_same_call_twice_keeps_the_same_answers_and_fits_the_same_weights(env, policy) -> None:
    runs = []
    for _ in range(2):
        model = model_of(env, policy)
        kept = rejection_sample(model, 16, 8, seed=4, cap=2)
        report = rejection_finetune(model, kept, seed=2, remix=Remix(kept.prompts[:2], 0.5), **FIT)
        runs.append((kept, report, weights(model)))
    (k1, r1, w1), (k2, r2, w2) = runs
    assert k1.kept > 0 and (k1.prompts, k1.answers, k1.actions) == (k2.prompts, k2.answers, k2.actions)
    assert r1["losses"] == r2["losses"] and same(w1, w2)


def test_the_mlp_on_digits_after_a_cold_start() -> None:
    from agents.sft import cold_start

    model = model_of(("rlvr/Digits-v0", {}), "mlp")
    cold_start(model, 600, epochs=4, batch_size=64)
    kept = rejection_sample(model, 24, 4, seed=0)
    assert kept.kept > 0
    report = rejection_finetune(model, kept, **FIT)
    assert report["tokens"] == sum(map(len, kept.answers)) and report["env_tokens"] == 0


def test_expert_iteration_rounds_and_start_base_refits_the_first_base_every_round() -> None:
    model = model_of(TINY)
    nudge(model)
    base = {k: v.clone() for k, v in model.policy.reference.state_dict().items()}
    rounds = expert_iteration(model, 2, n_prompts=12, k=4, cap=2, start="base", seed=7, **FIT)
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0]["sample_seed"] != rounds[1]["sample_seed"]
    assert all(r["sample_kept"] == r["fit_kept"] > 0 and r["fit_start"] == "base" for r in rounds)
    # by hand, from the reported seeds: sample from the latest policy, fit from the first base
    other = model_of(TINY)
    nudge(other)
    for r in rounds:
        kept = rejection_sample(other, 12, 4, cap=2, seed=r["sample_seed"])
        assert kept.kept == r["sample_kept"]
        other.policy.reference.load_state_dict(base)
        rejection_finetune(other, kept, start="base", seed=r["fit_seed"], **FIT)
    assert same(weights(model), weights(other))
    again = model_of(TINY)
    nudge(again)
    repeat = expert_iteration(again, 2, n_prompts=12, k=4, cap=2, start="base", seed=7, **FIT)
    assert repeat[1]["sample_kept"] == rounds[1]["sample_kept"] and same(weights(again), weights(model))


def test_expert_iteration_from_the_current_weights() -> None:
    model = model_of(TINY)
    rounds = expert_iteration(model, 2, n_prompts=12, k=4, seed=1, **FIT)
    other = model_of(TINY)
    for r in rounds:
        kept = rejection_sample(other, 12, 4, seed=r["sample_seed"])
        rejection_finetune(other, kept, seed=r["fit_seed"], **FIT)
    assert same(weights(model), weights(other))


# -- what is refused ----------------------------------------------------------------------------------
def test_bad_values_are_refused_with_the_value_and_the_rule() -> None:
    model = model_of(COUNTDOWN)
    for kwargs, match in [({"n_prompts": 0}, "n_prompts=0"), ({"k": 0}, "k=0"), ({"cap": 0}, "cap=0"),
                          ({"split": "dev"}, "split='dev'")]:
        args = {"n_prompts": 2, "k": 2, **kwargs}
        with pytest.raises(ValueError, match=match):
            rejection_sample(model, args.pop("n_prompts"), args.pop("k"), **args)
    kept = rejection_sample(model, 16, 8, seed=3)
    for kwargs, match in [({"epochs": 0}, "epochs=0"), ({"start": "middle"}, "start='middle'"),
                          ({"batch_size": 0}, "batch_size=0"), ({"learning_rate": 0.0}, "learning_rate=0.0")]:
        with pytest.raises(ValueError, match=match):
            rejection_finetune(model, kept, **{**FIT, **kwargs})
    for ratio in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="ratio="):
            Remix([kept.prompts[0]], ratio)
    with pytest.raises(ValueError, match="at least one prompt"):
        Remix([], 0.5)
    empty = rejection_sample(model, 1, 1, seed=0)
    empty = Kept(**{**empty.__dict__, "prompts": (), "answers": (), "actions": ()})
    with pytest.raises(ValueError, match="kept holds no answers"):
        rejection_finetune(model, empty, **FIT)
    with pytest.raises(ValueError, match="rounds=0"):
        expert_iteration(model, 0, n_prompts=2, k=2)
    with pytest.raises(ValueError, match="start='middle'"):
        expert_iteration(model, 1, n_prompts=2, k=2, start="middle")


def test_a_model_without_a_verifier_is_refused() -> None:
    model = GRPO(gym.make("CartPole-v1"), GRPOConfig(group_size=2, prompts_per_iter=2), policy="mlp")
    with pytest.raises(ValueError, match="no verifier|not an rlvr_env"):
        rejection_sample(model, 2, 2)
    tabular = model_of(("rlvr/Arithmetic-v0", {}), "tabular")
    kept = rejection_sample(tabular, 16, 8, seed=0)  # sampling works for any policy; fitting needs torch
    with pytest.raises(ValueError, match="torch policy"):
        rejection_finetune(tabular, kept, **FIT)
