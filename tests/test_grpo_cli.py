"""``python -m agents.grpo``: usage errors in two lines, output paths checked before training, Ctrl-C
saves the model trained so far, the base's score after a cold start, --tensorboard, --clip-eps-high."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import rlvr_env  # noqa: F401
from agents import GRPO, GRPOConfig
from agents.grpo.__main__ import build_parser, config_from_args, main

ROOT = Path(__file__).resolve().parents[1]
#: a budget no test could finish: a test that passes with it proves nothing trained
FOREVER = ["--total-timesteps", str(10**12)]


def test_a_usage_error_is_its_message_under_a_one_line_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--group-size", "0"])
    assert exc.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("usage: python -m agents.grpo ") and "--help" in lines[0]
    assert "group_size=0 must be at least 2" in lines[1]


def _bad_outputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    return [
        (["--save", str(a_file / "model.zip")], f"--save {a_file / 'model.zip'}: {a_file} is a file"),
        (["--json", str(tmp_path)], f"--json {tmp_path} is a folder"),
        (["--save", str(tmp_path / "model.zip" / "")], "is a folder"),
        (["--json", str(a_file / "sub" / "r.json")], "cannot write in"),
        (["--log-dir", str(a_file)], f"--log-dir {a_file}: {a_file} is a file"),
        (["--tensorboard", str(a_file / "tb")], "--tensorboard"),
        (["--save", str(tmp_path / "same"), "--json", str(tmp_path / "same.zip")], "both name"),
    ]


def _no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def learn(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("training started although an output path cannot be written")

    monkeypatch.setattr(GRPO, "learn", learn)


def test_unwritable_outputs_fail_in_one_line_before_training(tmp_path: Path, monkeypatch, capsys) -> None:
    _no_training(monkeypatch)
    (tmp_path / "model.zip").mkdir()
    for argv, fragment in _bad_outputs(tmp_path):
        with pytest.raises(SystemExit) as exc:
            main(argv + FOREVER)
        message = exc.value.code  # SystemExit("...") prints it as one line on stderr, exit status 1
        assert isinstance(message, str) and "\n" not in message, (argv, message)
        assert message.startswith("error: ") and fragment in message, (argv, message)
        assert "GRPO (" not in capsys.readouterr().out  # nothing was built, let alone trained


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes read-only folders")
def test_a_read_only_folder_fails_before_training(tmp_path: Path, monkeypatch) -> None:
    _no_training(monkeypatch)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for flag in ("--save", "--json"):
            with pytest.raises(SystemExit) as exc:
                main([flag, str(locked / "out.zip")] + FOREVER)
            assert f"cannot write in {locked}" in str(exc.value.code)
    finally:
        locked.chmod(0o700)


def test_missing_output_folders_are_created(tmp_path: Path, capsys) -> None:
    out = tmp_path / "new" / "runs"
    assert main(["--total-timesteps", "64", "--quiet", "--eval-k", "1", "--save", str(out / "model"),
                 "--json", str(out / "run.json")]) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["interrupted"] is False
    assert GRPO.load(out / "model").num_timesteps == record["num_timesteps"] > 0  # model.zip, as SB3
    assert sorted(p.name for p in out.iterdir()) == ["model.zip", "run.json"]  # no probe or temp left


def _interrupt(argv: list[str], ready: str, tmp_path: Path, delay: float = 0.0) -> tuple[int, str, str]:
    """Run the CLI in a subprocess, send SIGINT (Ctrl-C) once a stdout line starts with ``ready``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    # A shell starts a background job with Ctrl-C ignored, and a child inherits that: restore the
    # default so the CLI runs as it does in a terminal, whoever started the test run.
    proc = subprocess.Popen([sys.executable, "-m", "agents.grpo", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith(ready):
                break
        else:
            err = proc.stderr.read() if proc.stderr is not None else ""
            raise AssertionError(f"no line starting {ready!r}: {''.join(seen)} {err}")
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"still running 120 s after Ctrl-C; its output ends {out[-2000:]!r}, "
                                 f"its errors end {err[-2000:]!r}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen) + out, err


def test_ctrl_c_during_training_saves_the_model_so_far(tmp_path: Path) -> None:
    code, out, err = _interrupt(["--save", "model", "--json", "run.json", *FOREVER], "iter ", tmp_path)
    assert code == 130, err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("interrupted during training after ") and "model.zip and run.json" in lines[0]
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["interrupted"] is True and record["interrupted_during"] == "training"
    model = GRPO.load(tmp_path / "model.zip")
    assert model.num_timesteps == record["num_timesteps"] > 0 and model.iterations == record["iterations"]
    assert f"after {record['num_timesteps']} of " in lines[0]


def test_ctrl_c_during_the_cold_start_saves_the_model_so_far(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    argv = ["--env", "rlvr/Countdown-v0", "--env-kwargs", '{"n_numbers": 3}', "--policy", "transformer",
            "--policy-kwargs", '{"d_model": 16, "n_layers": 1, "n_heads": 1}', "--sft", "2000",
            "--sft-epochs", "100000", "--save", "base.zip", "--json", "run.json", *FOREVER]
    code, out, err = _interrupt(argv, "cold start:", tmp_path, delay=0.5)
    assert code == 130, err
    assert len(err.splitlines()) == 1 and err.startswith("interrupted during the cold start after 0 of"), err
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["interrupted"] is True and record["interrupted_during"] == "the cold start"
    assert record["num_timesteps"] == 0 and record["policy"] == "transformer"
    assert GRPO.load(tmp_path / "base.zip").num_timesteps == 0


def test_the_base_score_is_one_line_before_rl(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    main(["--env", "rlvr/Countdown-v0", "--env-kwargs", '{"n_numbers": 3}', "--policy", "transformer",
          "--policy-kwargs", '{"d_model": 16, "n_layers": 1, "n_heads": 1}', "--sft", "200",
          "--sft-epochs", "1", "--total-timesteps", "256", "--eval-k", "2", "--eval-prompts", "8", "--quiet",
          "--json", str(tmp_path / "run.json")])
    out = capsys.readouterr().out.splitlines()
    record = json.loads((tmp_path / "run.json").read_text())
    base = [i for i, line in enumerate(out) if line.startswith("base after the cold start, before RL:")]
    trained = [i for i, line in enumerate(out) if line.startswith("trained ")]
    assert len(base) == 1 and trained and base[0] < trained[0], out
    assert (f"test (held-out) greedy {record['base_test_greedy']:.3f}, sampled (mean@2) "
            f"{record['base_test_sampled']:.3f}, pass@2 {record['base_test_pass_at_k']:.3f}") in out[base[0]]


class _FakeWriter:
    """Stands in for torch's SummaryWriter (tensorboard is an optional extra): records what SB3 writes."""

    made: list[_FakeWriter] = []

    def __init__(self, log_dir: str, **kwargs: Any) -> None:
        self.log_dir, self.scalars = log_dir, []
        _FakeWriter.made.append(self)

    def add_scalar(self, key: str, value: float, step: int, **kwargs: Any) -> None:
        self.scalars.append((key, step))

    def __getattr__(self, name: str) -> Any:  # add_text, add_histogram, flush, close, ...
        return lambda *args, **kwargs: None


def test_tensorboard_flag_writes_to_its_folder(tmp_path: Path, monkeypatch, capsys) -> None:
    from stable_baselines3.common import logger as sb3_logger

    monkeypatch.setattr(sb3_logger, "SummaryWriter", _FakeWriter)
    _FakeWriter.made.clear()
    assert main(["--total-timesteps", "256", "--quiet", "--eval-k", "1",
                 "--tensorboard", str(tmp_path / "tb"), "--log-dir", str(tmp_path / "csv")]) == 0
    assert [w.log_dir for w in _FakeWriter.made] == [str(tmp_path / "tb")]
    assert ("rollout/reward_mean", 320) in _FakeWriter.made[0].scalars  # one tabular iteration: 32 x 2 x 5
    header, row = (tmp_path / "csv" / "progress.csv").read_text().splitlines()  # CSV in --log-dir
    assert "rollout/reward_mean" in header.split(",") and row
    monkeypatch.setattr(sb3_logger, "SummaryWriter", None)  # as SB3 leaves it without tensorboard
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["--tensorboard", str(tmp_path / "tb2"), *FOREVER])
    assert str(exc.value).startswith("error: --tensorboard:")
    assert 'pip install ".[tensorboard]"' in str(exc.value)


def test_clip_eps_high_none_is_the_symmetric_clip() -> None:
    parse = build_parser().parse_args
    assert config_from_args(parse(["--clip-eps-high", "none"])).resolve("transformer").clip_eps_high is None
    assert config_from_args(parse([])).resolve("transformer").clip_eps_high == 0.28  # unset: the preset's
    assert config_from_args(parse(["--preset", "countdown", "--clip-eps-high", "none"])).clip_eps_high is None
    assert config_from_args(parse(["--preset", "countdown"])).clip_eps_high == 0.28
    assert GRPOConfig.preset("transformer", clip_eps_high=None).clip_eps_high is None
    assert GRPOConfig.preset("transformer", clip_eps_high=0.3).clip_eps_high == 0.3
    # KL-Cov clips nothing, so it takes no preset's clip-higher
    assert GRPOConfig(policy_loss="kl_cov").resolve("transformer").clip_eps_high is None


def test_the_agent_keeps_an_explicit_symmetric_clip() -> None:
    pytest.importorskip("torch")
    # GRPO resolves its config again with its policy's preset: an explicit None must survive that too
    tiny = {"d_model": 16, "n_layers": 1, "n_heads": 1}
    for config, high in ((GRPOConfig(clip_eps_high=None), None), (GRPOConfig(), 0.28),
                         (GRPOConfig.preset("transformer", clip_eps_high=None), None)):
        model = GRPO("rlvr/Countdown-v0", config, policy="transformer", env_kwargs={"n_numbers": 3},
                     policy_kwargs=tiny)
        assert model.config.clip_eps_high == high and model._loss_settings.surrogate.clip_eps_high == high
