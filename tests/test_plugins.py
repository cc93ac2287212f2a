"""What a user plugs in survives the way a model travels: a config subclass with a loss's own field through
``save``/``load`` (and SB3's ``CheckpointCallback`` files), a task registered outside the package through
the CLI (``--env module:id``, ``--policy module:Class``) and through a checkpoint loaded in a fresh
process; every token env trains with every built-in policy that reads it; and the error texts name the
fix that applies (docs/agent.md, docs/add-a-task.md)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlvr_env  # noqa: F401  (registers the envs)
from agents import GRPO, GRPOConfig
from agents.grpo import register_policy_loss
from agents.policies import TabularPolicy, policy_class
from agents.policies.torch_base import TorchPolicy
from rlvr_env.envs import TokenEnv

ROOT = Path(__file__).resolve().parent.parent
ARITH = "rlvr/Arithmetic-v0"
KW = {"format_weight": 1.0}
torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------------
# A config subclass with a loss's own field, saved and loaded
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CoefConfig(GRPOConfig):
    my_coef: float = 1.0
    """The weight of the test loss (``policy_loss="test_plugin_coef"``)."""


@register_policy_loss("test_plugin_coef", settings=("clip_eps", "my_coef"))
def coef_surrogate(logp, logp_old, adv, mask, s):
    ratio = np.exp(np.clip(logp - logp_old, -20.0, 20.0))
    return s.my_coef * ratio * adv, s.my_coef * ratio * adv, np.zeros(logp.shape, dtype=bool)


def _coef_model() -> GRPO:
    config = CoefConfig(group_size=4, prompts_per_iter=2, policy_loss="test_plugin_coef", my_coef=2.5)
    return GRPO(ARITH, config, policy="tabular", seed=1, env_kwargs=KW)


def test_a_config_subclass_with_its_own_field_survives_save_and_load(tmp_path: Path) -> None:
    model = _coef_model()
    model.learn(200)
    model.save(tmp_path / "m")
    loaded = GRPO.load(tmp_path / "m")
    assert type(loaded.config) is CoefConfig and loaded.config == model.config
    assert loaded._loss_settings.surrogate.my_coef == 2.5
    model.learn(100, reset_num_timesteps=False)
    loaded.learn(100, reset_num_timesteps=False)
    assert np.array_equal(model.policy.table, loaded.policy.table)  # it trains on as the saved one
    # config_class= rebuilds the config as the class given (e.g. one defined in __main__)
    assert type(GRPO.load(tmp_path / "m", config_class=CoefConfig).config) is CoefConfig
    with pytest.raises(ValueError,
                       match=r"m\.zip: its config .* does not fit GRPOConfig.*my_coef.*config_class="):
        GRPO.load(tmp_path / "m", config_class=GRPOConfig)
    with pytest.raises(ValueError, match="config_class=<class 'dict'> must be GRPOConfig"):
        GRPO.load(tmp_path / "m", config_class=dict)  # type: ignore[arg-type]


def test_sb3_checkpoint_callback_files_of_a_config_subclass_load(tmp_path: Path) -> None:
    from stable_baselines3.common.callbacks import CheckpointCallback

    model = _coef_model()
    model.learn(64, callback=CheckpointCallback(save_freq=1, save_path=str(tmp_path), name_prefix="run"))
    files = sorted(tmp_path.glob("run_*_steps.zip"))
    assert files
    loaded = GRPO.load(files[-1])
    assert type(loaded.config) is CoefConfig and loaded.config.my_coef == 2.5


def test_a_config_class_that_cannot_be_imported_is_named_with_the_fix(tmp_path: Path) -> None:
    @dataclass(frozen=True)
    class LocalConfig(GRPOConfig):
        my_coef: float = 1.0

    model = GRPO(ARITH, LocalConfig(group_size=4, prompts_per_iter=2, policy_loss="test_plugin_coef"),
                 seed=0, env_kwargs=KW)
    path = tmp_path / "local.zip"
    model.save(path)
    with pytest.raises(ValueError, match=r"local\.zip: its config class .*LocalConfig.* was defined inside a "
                                         r"function.*config_class="):
        GRPO.load(path)
    assert GRPO.load(path, config_class=LocalConfig).config.my_coef == 1.0


# ------------------------------------------------------------------------------------------------
# Every token env with every built-in policy that reads it
# ------------------------------------------------------------------------------------------------
def _token_env_ids() -> list[str]:
    """The rlvr/* ids whose task offers the token context (``observation="tokens"``)."""
    ids = []
    for env_id in sorted(gym.registry):
        if not env_id.startswith("rlvr/"):
            continue
        env = gym.make(env_id)
        inner = env.unwrapped
        if isinstance(inner, TokenEnv) and inner.task.context_tokens() is not None:
            ids.append(env_id)
        env.close()
    return ids


TOKEN_ENVS = _token_env_ids()


def test_the_token_envs_are_found() -> None:
    assert {"rlvr/Arithmetic-v0", "rlvr/Countdown-v0", "rlvr/Digits-v0"} <= set(TOKEN_ENVS)


@pytest.mark.parametrize("env_id", TOKEN_ENVS)
@pytest.mark.parametrize("policy", ["transformer", "mlp", "tabular"])
def test_every_token_env_trains_with_every_policy_that_reads_tokens(env_id: str, policy: str) -> None:
    env_kwargs = {} if policy == "transformer" else {"observation": "tokens"}  # the transformer's default
    if policy == "tabular":
        task = gym.make(env_id).unwrapped.task
        if task.tabular_segments is None and task.prompts("train") is None:
            pytest.skip("the table refuses a task with unlisted prompts (tested with its message below)")
    config = GRPOConfig(group_size=4, prompts_per_iter=2)
    policy_kwargs = {"d_model": 16, "n_layers": 1, "n_heads": 2} if policy == "transformer" else None
    model = GRPO(env_id, config, policy=policy, seed=0, env_kwargs=env_kwargs, policy_kwargs=policy_kwargs)
    assert model.env.unwrapped.token_context is not None  # it really reads the token context
    model.learn(200)
    assert model.num_timesteps >= 200 and np.isfinite(model.last_metrics["rollout/reward_mean"])
    assert np.isfinite(model.last_metrics["train/policy_loss"])  # the update ran on the token rows


# ------------------------------------------------------------------------------------------------
# Error texts and the resolved config
# ------------------------------------------------------------------------------------------------
def test_the_transformer_on_a_task_without_token_context_names_context_tokens_and_mlp() -> None:
    from rlvr_env.tasks.digits import DigitsTask

    class NoTokens(DigitsTask):
        def context_tokens(self):  # type: ignore[override]
            return None

    env = TokenEnv(NoTokens())
    with pytest.raises(ValueError, match=r"context_tokens\(\) is None.*implement context_tokens\(\) and "
                                         r"encode_context\(\).*policy='mlp'") as err:
        TokenEnv(NoTokens(), observation="tokens")
    assert "use observation='features'" not in str(err.value)
    model = GRPO(env, GRPOConfig(group_size=4, prompts_per_iter=2), policy="mlp")  # the fix it names works
    model.learn(50)


def test_the_tabular_refusal_says_how_a_task_declares_itself_finite() -> None:
    with pytest.raises(ValueError, match=r"prompts\(split\).*tabular_segments") as err:
        GRPO("rlvr/Digits-v0", GRPOConfig(group_size=4, prompts_per_iter=2), policy="tabular")
    assert "its prompts come from an unbounded set" not in str(err.value)


class UserLinear(TorchPolicy):
    """A user's torch policy (its class, unregistered; the "paper" preset sets no learning rate)."""

    kind = "test-plugins-linear"

    def __init__(self, observation_space: gym.Space, n_actions: int, learning_rate: float, *, seed: int,
                 max_grad_norm: float | None = None) -> None:
        self.n_actions, self.max_grad_norm = n_actions, max_grad_norm
        torch.manual_seed(seed)
        self.net = torch.nn.Linear(int(np.prod(observation_space.shape)), n_actions).double()
        self.reference = copy.deepcopy(self.net).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=learning_rate)

    def network_logits(self, net: torch.nn.Module, obs: np.ndarray, actions: np.ndarray | None
                       ) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(obs, dtype=np.float64))
        return net(x.reshape(x.shape[0], -1))


def test_model_config_shows_the_learning_rate_that_runs() -> None:
    model = GRPO("rlvr/Countdown-v0", GRPOConfig(group_size=4, prompts_per_iter=2), policy=UserLinear,
                 env_kwargs={"n_numbers": 2, "number_range": (1, 4), "target_range": (1, 16)})
    assert model.config.learning_rate == 3e-4
    assert model.policy.optimizer.param_groups[0]["lr"] == model.config.learning_rate
    tab = GRPO(ARITH, GRPOConfig(tabular_optimizer="adam"), policy="tabular", env_kwargs=KW)
    assert tab.config.learning_rate == 0.1 == tab.policy.learning_rate


def test_policy_by_import_path() -> None:
    assert policy_class("agents.policies.tabular:TabularPolicy") is TabularPolicy
    assert policy_class("agents.grpo.policies:TabularPolicy") is TabularPolicy  # where it lived before
    with pytest.raises(ValueError, match="the module 'no_such_module' cannot be imported"):
        policy_class("no_such_module:Policy")
    with pytest.raises(ValueError, match="has no 'Nope'"):
        policy_class("agents.policies.tabular:Nope")
    with pytest.raises(ValueError, match="not a subclass of agents.policies.Policy"):
        policy_class("agents.policies.sampling:log_softmax")


# ------------------------------------------------------------------------------------------------
# A task registered outside the package: the CLI and a checkpoint in a fresh process
# ------------------------------------------------------------------------------------------------
TASK_MODULE = '''
"""A user's task outside the package: Digits under another name and id."""
from rlvr_env import register_envs
from rlvr_env.tasks.digits import DigitsTask


class MyDigits(DigitsTask):
    name = "test-my-digits"


register_envs("me/MyDigits-v0", MyDigits)
'''

POLICY_MODULE = '''
"""A user's policy class, never registered: the CLI names it by its import path."""
from agents.policies import TabularPolicy


class MyTable(TabularPolicy):
    kind = "my-table"
'''


def _run(args: list[str], cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in [*pythonpath, ROOT]),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture()
def user_modules(tmp_path: Path) -> Path:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "my_tasks.py").write_text(TASK_MODULE)
    (mods / "my_policies.py").write_text(POLICY_MODULE)
    return mods


def test_the_cli_trains_a_task_outside_the_package_and_the_checkpoint_loads_elsewhere(
        tmp_path: Path, user_modules: Path) -> None:
    # docs/add-a-task.md's cold start, on the user's task by Gymnasium's module:id
    out = _run(["-m", "agents.grpo", "--env", "my_tasks:me/MyDigits-v0", "--policy", "transformer",
                "--preset", "transformer", "--sft", "64", "--sft-epochs", "1", "--total-timesteps", "64",
                "--group-size", "4", "--prompts-per-iter", "4", "--eval-prompts", "4", "--eval-k", "2",
                "--policy-kwargs", '{"d_model": 16, "n_layers": 1, "n_heads": 2}', "--quiet",
                "--save", str(tmp_path / "digits.zip")], tmp_path, [user_modules])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cold start: 64 train-split solutions" in out.stdout and (tmp_path / "digits.zip").exists()
    # a fresh process that never imports my_tasks: the checkpoint names the module, load imports it
    load = "from agents import GRPO; m = GRPO.load('digits.zip'); print('LOADED', m.env_id, m.env_module)"
    got = _run(["-c", load], tmp_path, [user_modules])
    assert got.returncode == 0 and "LOADED me/MyDigits-v0 my_tasks" in got.stdout, got.stdout + got.stderr
    # the module is not importable there: the error names the file, the id, the module and the fix
    gone = _run(["-c", load], tmp_path, [])
    assert gone.returncode == 1
    last = gone.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: digits.zip was trained on the env 'me/MyDigits-v0'"), last
    assert "'my_tasks'" in last and "pass env=" in last and "NamespaceNotFound" not in gone.stderr


def test_the_cli_takes_the_readme_module_id_and_a_policy_by_import_path(
        tmp_path: Path, user_modules: Path) -> None:
    out = _run(["-m", "agents.grpo", "--env", "rlvr_env:rlvr/Arithmetic-v0", "--policy",
                "my_policies:MyTable", "--total-timesteps", "64", "--group-size", "4", "--prompts-per-iter",
                "2", "--quiet", "--save", str(tmp_path / "t.zip")], tmp_path, [user_modules])
    assert out.returncode == 0, out.stdout + out.stderr
    load = ("from agents import GRPO; m = GRPO.load('t.zip'); "
            "print('LOADED', type(m.policy).__name__, m.policy_name, m.env_id)")
    got = _run(["-c", load], tmp_path, [user_modules])
    assert "LOADED MyTable my_policies:MyTable rlvr/Arithmetic-v0" in got.stdout, got.stdout + got.stderr
    bad = _run(["-m", "agents.grpo", "--env", "nowhere_mod:me/X-v0", "--total-timesteps", "8"], tmp_path, [])
    assert bad.returncode == 2 and "the module 'nowhere_mod'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_checkpoint_of_an_unregistered_id_names_the_file_the_id_and_the_fix(tmp_path: Path) -> None:
    from rlvr_env import register_envs
    from rlvr_env.tasks.digits import DigitsTask

    class Transient(DigitsTask):
        name = "test-transient-digits"

    register_envs("test/Transient-v0", Transient)
    model = GRPO("test/Transient-v0", GRPOConfig(group_size=4, prompts_per_iter=2), policy="mlp")
    path = tmp_path / "transient.zip"
    model.save(path)
    del gym.registry["test/Transient-v0"]  # as a fresh process that never registered it
    with pytest.raises(ValueError, match=r"transient\.zip was trained on the env 'test/Transient-v0', "
                                         r"which is not registered.*import the module that registers "
                                         r"it.*pass env="):
        GRPO.load(path)
    loaded = GRPO.load(path, env=gym.make("rlvr/Digits-v0"))  # env= is the way round it
    assert loaded.n_actions == model.n_actions


# ------------------------------------------------------------------------------------------------
# The light install: one-line errors with the install that helps
# ------------------------------------------------------------------------------------------------
BLOCK = '''
import importlib.abc, sys

class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Blocked())
'''


def _without(blocked: tuple[str, ...], args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(BLOCK.format(blocked=blocked)))
    return _run(args, tmp_path, [site])


def test_the_cli_without_torch_prints_one_line_naming_the_install(tmp_path: Path) -> None:
    out = _without(("torch", "stable_baselines3"), ["-m", "agents.grpo", "--policy", "mlp",
                                                    "--total-timesteps", "8"], tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: --policy mlp: the neural policies (agents.policies.torch_base) needs torch, which is not "
        'installed; install it with pip install ".[torch]" (in a clone of the repository)'], out.stderr


def test_benchmarks_compare_without_scipy_names_the_bench_install(tmp_path: Path) -> None:
    out = _without(("scipy",), ["-m", "benchmarks.compare", "--help"], tmp_path)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr   # one line, no traceback
    assert 'needs scipy' in lines[0] and 'pip install ".[bench]"' in lines[0], out.stderr
    imported = _without(("scipy",), ["-c", "import benchmarks.compare"], tmp_path)  # as a library
    assert imported.returncode == 1
    assert "ImportError: python -m benchmarks.compare needs scipy" in imported.stderr


def test_no_install_hint_names_a_distribution_the_index_does_not_have() -> None:
    hits = []
    for folder in ("rlvr_env", "agents", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if "rlvr-env[" in line:
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)
