"""The supervised cold start (agents.sft): train-split data only, it lowers the loss, seeded repeats are
exact, it becomes GRPO's KL reference, and the CLI runs the recipe end to end and writes JSON."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401
from agents.grpo.config import GRPOConfig
from agents.grpo.__main__ import main
from agents.grpo.agent import GRPO
from agents.sft import cold_start, demonstrations, number_prompts, solutions, supervised_fit
from rlvr_env import Prompt
from rlvr_env.tasks import DigitsPrompt

torch.set_num_threads(1)
ENV = "rlvr/Countdown-v0"
SMALL = {"d_model": 32, "n_layers": 1, "n_heads": 2}


def agent(seed: int = 0) -> GRPO:
    cfg = GRPOConfig.preset("transformer", prompts_per_iter=4, group_size=4)
    return GRPO(ENV, cfg, policy="transformer", seed=seed, env_kwargs={"n_numbers": 3},
                policy_kwargs=SMALL)


def test_no_test_split_prompt_in_the_sft_data() -> None:
    env = gym.make(ENV, n_numbers=3, split="test", observation="tokens")  # even from a test-split env
    task = env.unwrapped.task
    prompts, answers = solutions(task, 3000, seed=1)
    assert {task.split_of(p) for p in prompts} == {"train"} and len(answers) == 3000
    demos = demonstrations(env, 500, seed=1)
    assert {task.split_of(p) for p in demos.prompts} == {"train"}
    assert [demos.prompts[i] for i in demos.prompt_index] == solutions(task, 500, seed=1)[0]
    assert demos.lengths.sum() == len(demos.actions) == len(demos.obs) == len(demos.masks)
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()  # every token is allowed


def test_sft_lowers_the_loss_and_repeats_exactly() -> None:
    states = []
    for _ in range(2):
        model = agent(seed=2)
        demos = demonstrations(model.env, 400, seed=3)
        with torch.no_grad():
            start = float(-model.policy.log_prob(demos.obs, demos.actions, demos.masks).mean())
        losses = supervised_fit(model.policy, demos, epochs=3, batch_size=64, seed=3)
        with torch.no_grad():
            end = float(-model.policy.log_prob(demos.obs, demos.actions, demos.masks).mean())
        assert losses[-1] < losses[0] and end < start - 0.08
        states.append(model.policy.state())
    assert all(np.array_equal(states[0][k], states[1][k]) for k in states[0])


def test_cold_start_becomes_the_kl_reference_and_the_start_of_rl() -> None:
    model = agent()
    info = cold_start(model, 300, epochs=1, batch_size=64)
    assert info["sft_solutions"] == 300 and info["sft_tokens"] > 300
    pol = model.policy
    ref, net = pol.reference.state_dict(), pol.net.state_dict()
    assert all(torch.equal(ref[k], net[k]) for k in ref)
    assert not pol.optimizer.state_dict()["state"]  # the RL optimiser restarted


def test_sft_refuses_a_task_without_solutions() -> None:
    from rlvr_env import Task
    from rlvr_env.tasks.expression.arithmetic import ArithmeticTask

    class Unsolved(ArithmeticTask):
        solution = Task.solution  # declares none

    with pytest.raises(ValueError, match="declares no solutions"):
        solutions(Unsolved(), 10, seed=0)


def test_cli_runs_the_recipe_and_writes_json(tmp_path, capsys) -> None:
    out = tmp_path / "out.json"
    rc = main(["--env", ENV, "--env-kwargs", '{"n_numbers": 3}', "--policy", "transformer",
               "--preset", "transformer", "--sft", "200", "--sft-epochs", "1", "--total-timesteps", "200",
               "--seed", "1", "--eval-prompts", "16", "--eval-k", "2", "--quiet", "--json", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    for key in ("test_greedy", "test_sampled", "test_pass_at_k", "train_greedy", "base_test_greedy",
                "base_test_pass_at_k", "sft_seconds", "num_timesteps"):
        assert key in record, key
    assert record["sft_solutions"] == 200 and record["num_timesteps"] >= 200
    assert 0.0 <= record["test_greedy"] <= 1.0 and record["env_kwargs"]["observation"] == "tokens"


def test_repeated_solutions_are_trained_once_with_their_count_as_weight() -> None:
    from agents.sft import _distinct_answers

    model = agent()
    demos = demonstrations(model.env, 3000, seed=4)
    bounds = np.concatenate([[0], np.cumsum(demos.lengths)])
    first, counts, prompt_of = _distinct_answers(demos, demos.lengths, bounds)
    assert counts.sum() == 3000 and len(first) < 3000  # the generator repeats (prompt, answer) pairs
    assert len(np.unique(prompt_of)) < len(first)  # and prompts: several answers share one
    with torch.no_grad():  # the weighted loss over distinct answers is the loss over every copy
        every = -model.policy.log_prob(demos.obs, demos.actions, demos.masks)
        rows = np.concatenate([np.arange(bounds[a], bounds[a + 1]) for a in first])
        weights = torch.as_tensor(np.repeat(counts, demos.lengths[first]), dtype=every.dtype)
        once = -model.policy.log_prob(demos.obs[rows], demos.actions[rows], demos.masks[rows])
    assert torch.isclose((weights * once).sum() / weights.sum(), every.mean(), atol=1e-5)


@pytest.mark.parametrize("minibatch", ["prompts", "answers"])
def test_the_fitted_loss_is_the_mean_nll_over_every_copy(minibatch: str) -> None:
    # One full batch at a vanishing step size: the loss supervised_fit reports is the one it trained on,
    # and it must equal the mean NLL per token over every demonstrated copy (repeats counted).
    model = agent(seed=5)
    demos = demonstrations(model.env, 1500, seed=6)
    from agents.sft import _distinct_answers

    _, counts, _ = _distinct_answers(demos, demos.lengths, np.concatenate([[0], np.cumsum(demos.lengths)]))
    assert counts.max() > 1 and len(counts) < 1500  # the data repeats answers: the weights matter
    with torch.no_grad():
        every = float(-model.policy.log_prob(demos.obs, demos.actions, demos.masks).double().mean())
    losses = supervised_fit(model.policy, demos, epochs=1, batch_size=10_000, learning_rate=1e-12, seed=0,
                            minibatch=minibatch)
    assert len(losses) == 1
    assert losses[0] == pytest.approx(every, abs=1e-5)


@pytest.mark.parametrize("minibatch", ["prompts", "answers"])
def test_the_step_size_schedule_walks_every_step_once_and_decays_to_a_tenth(
        minibatch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import agents.sft as sft

    calls: list[int] = []
    sizes: list[float] = []
    real_fit = sft.fit

    def recording_fit(*args, step_size, **kwargs):  # type: ignore[no-untyped-def]
        def record(step: int) -> float:
            calls.append(step)
            sizes.append(step_size(step))
            return sizes[-1]
        return real_fit(*args, step_size=record, **kwargs)

    monkeypatch.setattr(sft, "fit", recording_fit)
    model = agent()
    demos = demonstrations(model.env, 150, seed=1)
    # 150 solutions in batches of 40: a partial last batch in each epoch, so the steps are rounded up
    supervised_fit(model.policy, demos, epochs=2, batch_size=40, learning_rate=1e-3, seed=0,
                   minibatch=minibatch)
    assert calls == list(range(len(calls))) and len(calls) >= 8
    assert all(b <= a for a, b in zip(sizes, sizes[1:])), sizes
    assert min(sizes) >= 1e-4 * (1 - 1e-9)


def test_a_solution_the_verifier_does_not_pay_is_refused() -> None:
    from rlvr_env import CountdownTask

    class WrongSolutions(CountdownTask):
        def solution(self, prompt: Prompt) -> tuple[int, ...]:
            return (self.eos_id,)  # an empty answer: never correct

    env = rlvr_env.TokenEnv(WrongSolutions(n_numbers=3))
    with pytest.raises(ValueError, match="not paid as correct"):
        demonstrations(env, 4, seed=0)


def test_the_recipe_cold_start_is_one_setting_everywhere() -> None:
    # the CLI's --sft-* defaults, cold_start's defaults and the R1 study's recipe are the same settings
    import inspect

    from agents.grpo.__main__ import build_parser
    from agents.grpo.config import COLD_START
    from benchmarks.r1 import RECIPE_SFT

    args = build_parser().parse_args([])
    cli = {"epochs": args.sft_epochs, "batch_size": args.sft_batch_size, "learning_rate": args.sft_lr,
           "minibatch": args.sft_minibatch, "warmup": args.sft_warmup}
    signature = inspect.signature(cold_start).parameters
    assert cli == COLD_START == {k: signature[k].default for k in COLD_START}
    assert {k: v for k, v in RECIPE_SFT.items() if k != "n"} == COLD_START
    assert args.sft_fit == "masked" and signature["masked"].default is None  # under the agent's masks


def test_the_cli_fits_over_every_token_with_sft_fit_unmasked(monkeypatch: pytest.MonkeyPatch) -> None:
    import agents.sft

    seen = []
    real = agents.sft.cold_start

    def recording(model, n, **kwargs):
        seen.append(kwargs["masked"])
        return real(model, n, **kwargs)

    monkeypatch.setattr(agents.sft, "cold_start", recording)
    for fit in ("masked", "unmasked"):
        rc = main(["--env", "rlvr/Digits-v0", "--policy", "transformer", "--preset", "transformer",
                   "--sft", "50", "--sft-epochs", "1", "--sft-fit", fit, "--total-timesteps", "0",
                   "--eval-prompts", "4", "--eval-k", "2", "--quiet"])
        assert rc == 0
    assert seen == [None, False]


def test_the_mlp_policy_takes_a_cold_start_too() -> None:
    """The supervised fit reads the network's dtype from its parameters, not from a transformer's head."""
    model = GRPO("rlvr/Countdown-v0", GRPOConfig.preset("countdown"), policy="mlp", seed=0,
                 env_kwargs={"n_numbers": 3})
    before = [p.detach().clone() for p in model.policy.net.parameters()]
    info = cold_start(model, 200, epochs=2)
    assert info["sft_losses"][-1] < info["sft_losses"][0]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.net.parameters()))


def test_a_transformer_cold_start_fits_digits_solutions() -> None:
    """The cold start reads any task's contract: Digits' prompts are not numbers and a target."""
    model = GRPO("rlvr/Digits-v0", GRPOConfig.preset("transformer"), policy="transformer", seed=0,
                 env_kwargs={"observation": "tokens", "max_digits": 2, "train_digits": 1},
                 policy_kwargs=SMALL)
    demos = demonstrations(model.env, 50, seed=0)
    assert all(isinstance(p, DigitsPrompt) for p in demos.prompts)
    task = model.env.unwrapped.task
    for i, p in enumerate(demos.prompt_index[:5]):  # each answer is its prompt's solution
        start = int(demos.lengths[:i].sum())
        assert tuple(demos.actions[start : start + demos.lengths[i]]) == task.solution(demos.prompts[p])
    before = model.evaluate("train", n_prompts=200)
    info = cold_start(model, 500, epochs=60, batch_size=64, learning_rate=3e-3)
    after = model.evaluate("train", n_prompts=200)
    assert before < 0.05 and after > 0.3, (before, after)
    assert info["sft_losses"][-1] < 0.5 * info["sft_losses"][0]


def test_the_cli_cold_starts_digits() -> None:
    rc = main(["--env", "rlvr/Digits-v0", "--policy", "transformer", "--preset", "transformer",
               "--sft", "200", "--sft-epochs", "1", "--total-timesteps", "200", "--eval-prompts", "16",
               "--eval-k", "2", "--quiet"])
    assert rc == 0


def test_prompts_are_numbered_in_sorted_order_or_as_they_first_occur() -> None:
    a, b = Prompt((3, 1), 4), Prompt((1, 3), 9)
    distinct, index = number_prompts([a, b, a, Prompt((1, 3), 2)])
    assert distinct == (Prompt((1, 3), 2), b, a) and index.tolist() == [2, 1, 2, 0]
    x, y = DigitsPrompt(5, "+", 1), DigitsPrompt(1, "+", 5)  # no order: first occurrence
    distinct, index = number_prompts([x, y, x])
    assert distinct == (x, y) and index.tolist() == [0, 1, 0]


def test_a_cold_start_fits_over_every_token_when_asked_and_the_agent_keeps_its_masks() -> None:
    """``masked=False``: the cross-entropy over the whole vocabulary teaches the network the grammar (the
    probability it gives off-grammar tokens falls); under the masks (the default for a masked agent)
    nothing pushes those tokens down. The agent decodes with its masks either way."""
    off_grammar = {}
    for masked in (None, False):
        model = agent(seed=4)
        demos = demonstrations(model.env, 300, seed=5)
        cold_start(model, 300, epochs=12, batch_size=64, learning_rate=3e-3, masked=masked)
        assert model.use_masks
        logits = model.policy.logits(demos.obs)  # unmasked
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        off_grammar[masked] = float(probs[~demos.masks].sum() / len(demos.actions))
    assert off_grammar[False] < 0.5 * off_grammar[None], off_grammar
    with pytest.raises(ValueError, match="masked='no'"):
        cold_start(agent(), 10, masked="no")  # type: ignore[arg-type]
