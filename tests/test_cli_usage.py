"""The CLIs' threads flag, help text that says what runs, and usage errors
(argparse's, exit status 2, naming the value and the rule) instead of tracebacks."""

from __future__ import annotations

import importlib

import pytest

import rlvr_env  # noqa: F401
from agents import GRPO, GRPOConfig

#: (CLI module, argv, a fragment the usage error must contain)
BAD_VALUES = [
    ("agents.grpo.__main__", ["--total-timesteps", "-5"], "--total-timesteps: -5 is not an integer >= 0"),
    ("agents.grpo.__main__", ["--total-timesteps", "abc"], "'abc' is not an integer >= 0"),
    ("agents.grpo.__main__", ["--seed", "-1"], "--seed: -1 is not an integer >= 0"),
    ("agents.grpo.__main__", ["--threads", "0"], "--threads: 0 is not a positive integer"),
    ("agents.grpo.__main__", ["--eval-k", "0"], "--eval-k: 0 is not a positive integer"),
    ("agents.grpo.__main__", ["--eval-freq", "-2"], "--eval-freq: -2 is not an integer >= 0"),
    ("agents.grpo.__main__", ["--group-size", "0"], "group_size=0 must be at least 2"),
    ("agents.grpo.__main__", ["--group-size", "x"], "--group-size: 'x' is not an integer"),
    ("agents.grpo.__main__", ["--beta", "-1"], "beta=-1.0 must be >= 0"),
    ("agents.grpo.__main__", ["--env-kwargs", "{"], "--env-kwargs '{' is not JSON"),
    ("agents.grpo.__main__", ["--env-kwargs", "[1]"], "must be a JSON object"),
    ("agents.grpo.__main__", ["--env", "nope/Nothing-v0"], "nope"),
    ("agents.grpo.__main__", ["--env-kwargs", '{"foo": 1}'], "unexpected keyword argument 'foo'"),
    ("agents.grpo.__main__", ["--env", "CartPole-v1"], "policy='tabular' needs discrete observations"),
    ("benchmarks.compare", ["--seeds", "abc"], "'abc' is not a seed"),
    ("benchmarks.compare", ["--budget", "-1"], "--budget -1 must be a positive number of env steps"),
    ("benchmarks.compare", ["--workers", "0"], "--workers 0 must be at least 1"),
    ("benchmarks.compare", ["--contenders", "foo"], "--contenders 'foo': unknown ['foo']"),
    ("benchmarks.compare", ["--eval-every", "0"], "--eval-every 0 must be between 1 and the budget"),
    ("benchmarks.compare", ["--env", "nope-v0"], "--env 'nope-v0' is not a registered Gymnasium id"),
    ("benchmarks.compare", ["--rerun", "bar"], "--rerun 'bar': unknown ['bar']"),
]


@pytest.mark.parametrize(("module", "argv", "fragment"), BAD_VALUES,
                         ids=[f"{m.split('.')[0]}:{' '.join(a)}" for m, a, _ in BAD_VALUES])
def test_bad_cli_values_are_usage_errors(module: str, argv: list[str], fragment: str, capsys) -> None:
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and fragment in err, err


def test_threads_flag_sets_torch_threads_for_a_neural_policy(capsys) -> None:
    torch = pytest.importorskip("torch")
    from agents.grpo.__main__ import build_parser, main

    assert "--threads" in build_parser().format_help()
    before = torch.get_num_threads()
    try:
        main(["--policy", "mlp", "--threads", "2", "--total-timesteps", "64", "--group-size", "4",
              "--prompts-per-iter", "2", "--quiet", "--eval-k", "1"])
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)
        main(["--policy", "tabular", "--threads", "2", "--total-timesteps", "64", "--quiet", "--eval-k", "1"])
        assert torch.get_num_threads() == 1  # the tabular policy leaves torch alone
        main(["--policy", "mlp", "--total-timesteps", "64", "--group-size", "4", "--prompts-per-iter", "2",
              "--quiet", "--eval-k", "1"])
        assert torch.get_num_threads() == 1  # the default
    finally:
        torch.set_num_threads(before)


def test_learning_rate_help_says_what_runs() -> None:
    from agents.grpo.__main__ import build_parser

    text = " ".join(build_parser().format_help().split())
    start = text.index("--learning-rate LEARNING_RATE Step size")
    doc = text[start:text.index("--tabular-optimizer TABULAR_OPTIMIZER", start)]
    tab = GRPO("rlvr/Arithmetic-v0", policy="tabular")
    tab_adam = GRPO("rlvr/Arithmetic-v0", GRPOConfig(tabular_optimizer="adam"), policy="tabular")
    assert f"runs with: tabular {tab.policy.learning_rate}, mlp 0.001" in doc
    assert f"tabular with --tabular-optimizer adam: {tab_adam.policy.learning_rate}" in doc
    assert tab_adam.policy.learning_rate == 0.1
    assert GRPOConfig.preset("tabular", tabular_optimizer="adam").learning_rate is None
    assert "for \"mlp\", 3e-4" not in doc  # the old help named a step size that never ran
    pytest.importorskip("torch")
    mlp = GRPO("rlvr/Arithmetic-v0", policy="mlp")
    assert mlp.config.learning_rate == 0.001
    assert mlp.policy.optimizer.param_groups[0]["lr"] == 0.001
