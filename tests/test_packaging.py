"""`pip install rlvr-env` is light (gymnasium + NumPy), and everything it promises works without torch.

The no-torch checks run in a subprocess whose imports of torch, stable-baselines3, sb3-contrib and SB3's
progress-bar packages are blocked by a meta-path finder, which is what a bare install looks like from
inside Python (`.ci/run` installs the wheel in a real fresh venv and imports the packages from it).
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: top-level modules the `torch` extra brings (torch, SB3, sb3-contrib; tqdm and rich for progress bars)
EXTRA_MODULES = ("torch", "stable_baselines3", "sb3_contrib", "tqdm", "rich")

BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys

    class _Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {EXTRA_MODULES!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, _Blocked())
""")


def _run_without_extra(code: str, tmp_path: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_blocker_really_blocks(tmp_path: Path) -> None:
    out = _run_without_extra("""
        for name in ("torch", "stable_baselines3.common.logger", "sb3_contrib", "tqdm.auto", "rich"):
            try:
                __import__(name)
            except ImportError:
                print("blocked", name)
    """, tmp_path)
    assert out.count("blocked") == 5, out


def test_envs_verifier_and_tabular_grpo_work_without_torch(tmp_path: Path) -> None:
    out = _run_without_extra("""
        import sys
        import gymnasium as gym
        import numpy as np
        import rlvr_env
        from agents import GRPO, GRPOConfig
        from agents.grpo.__main__ import main

        assert rlvr_env.verify("2+3*5", [2, 3, 5], 17).correct
        env = gym.make("rlvr/Countdown-v0")
        obs, info = env.reset(seed=0)
        env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
        text = gym.make("rlvr/CountdownText-v0")
        text.reset(seed=0)
        assert text.step("1+2")[2] is True
        venv = gym.make_vec("rlvr/Arithmetic-v0", num_envs=4, vectorization_mode="vector_entry_point")
        venv.reset(seed=0)
        venv.step(np.zeros(4, dtype=np.int64))

        model = GRPO("rlvr/Arithmetic-v0", GRPOConfig(group_size=4, prompts_per_iter=2), seed=0, verbose=1)
        model.learn(400)
        model.save("tabular.zip")
        again = GRPO.load("tabular.zip")
        probe = model.env.reset(seed=1)[0]
        assert np.array_equal(model.predict(probe, deterministic=True)[0],
                              again.predict(probe, deterministic=True)[0])
        assert 0.0 <= again.evaluate("test") <= 1.0
        assert main(["--policy", "tabular", "--total-timesteps", "300", "--group-size", "4",
                     "--prompts-per-iter", "2", "--save", "cli.zip"]) == 0
        GRPO.load("cli.zip")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {blocked})
        assert not loaded, loaded
        print("NO-TORCH OK")
    """.replace("{blocked}", repr(set(EXTRA_MODULES))), tmp_path)
    assert "NO-TORCH OK" in out
    assert re.search(r"^iter 1 \| steps \d+ \| reward", out, re.M), out  # the plain one-line logger


def test_torch_pieces_without_the_extra_raise_importerror_naming_it(tmp_path: Path) -> None:
    out = _run_without_extra("""
        import importlib
        from agents import GRPO

        def message(fn):
            try:
                fn()
            except ImportError as err:
                return str(err)
            raise AssertionError(f"{fn} did not raise ImportError")

        hint = 'pip install ".[torch]" (in a clone of the repository)'
        checks = {
            "mlp": lambda: GRPO("rlvr/Arithmetic-v0", policy="mlp"),
            "mlp module": lambda: importlib.import_module("agents.policies.mlp"),
            "bc": lambda: importlib.import_module("agents.bc"),
            "csv log": lambda: GRPO("rlvr/Arithmetic-v0", log_dir="logs").learn(10),
            "tables": lambda: GRPO("rlvr/Arithmetic-v0", verbose=2).learn(10),
        }
        for name, fn in checks.items():
            text = message(fn)
            assert hint in text, (name, text)
            print(name, "->", text)
    """, tmp_path)
    assert out.count('pip install ".[torch]" (in a clone of the repository)') == 5, out


def test_the_progress_bar_works_without_torch_tqdm_or_rich(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent("""
            import sys
            from agents import GRPO, GRPOConfig

            model = GRPO("rlvr/Arithmetic-v0", GRPOConfig(group_size=4, prompts_per_iter=2))
            model.learn(410, progress_bar=True)
            print(sorted(m for m in sys.modules if m.split(".")[0] in {blocked}))
        """.replace("{blocked}", repr(set(EXTRA_MODULES))))],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"  # nothing of the torch extra was imported
    last = [line for line in re.split(r"[\r\n]", result.stderr) if line][-1]  # the bar redraws in place
    assert last.startswith("GRPO: 100% |" + "#" * 30 + "| 410/410 steps ["), result.stderr
    assert last.endswith(", +30 steps to finish the last iteration"), last  # whole iterations of 40 steps


def test_install_requires_is_light_and_the_extras_bring_the_rest() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")

    def names(text: str) -> set[str]:
        lines = [line.split("#")[0].strip() for line in text.splitlines()]
        return {re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower() for line in lines if line}

    assert names(cfg["options"]["install_requires"]) == {"gymnasium", "numpy"}
    extras = {key: names(value) for key, value in cfg["options.extras_require"].items()}
    assert {"torch", "stable-baselines3", "tqdm", "rich"} <= extras["torch"]
    for extra in ("bench", "test"):  # the README's two commands install the torch extra too
        assert "rlvr-env" in extras[extra] and "rlvr-env[torch]" in cfg["options.extras_require"][extra]
    assert "rlvr-env[bench]" in cfg["options.extras_require"]["tune"]
    assert "tensorboard" in extras["tensorboard"]  # GRPO(tensorboard=True); its error names the extra
    assert "rlvr-env[torch]" in cfg["options.extras_require"]["tensorboard"]


@pytest.mark.parametrize("package", ["agents", "agents.grpo", "rlvr_env"])
def test_importing_the_packages_imports_no_extra(package: str, tmp_path: Path) -> None:
    _run_without_extra(f"import {package}, agents.grpo.__main__, agents.evaluation", tmp_path)


#: what the wheel puts into site-packages: the two packages, and the two one-line modules `verifiers`
#: loads its tasksets by (benchmarks/ and the maintainer scripts run from a clone)
WHEEL_PACKAGES = {"rlvr_env", "agents"}
WHEEL_MODULES = {"rlvr_env_countdown.py", "rlvr_env_arithmetic.py"}


def _copy_source(dest: Path) -> Path:
    """The files a build reads, copied, so the build's own ``build/`` and ``*.egg-info`` land in tmp_path."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "results")
    dest.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md", *WHEEL_MODULES):
        shutil.copy2(ROOT / name, dest / name)
    for package in ("rlvr_env", "agents", "benchmarks"):  # benchmarks too: the wheel must leave it out
        shutil.copytree(ROOT / package, dest / package, ignore=skip)
    return dest


def test_the_wheel_ships_rlvr_env_and_agents_with_py_typed_and_no_benchmarks(tmp_path: Path) -> None:
    src = _copy_source(tmp_path / "src")
    dist = tmp_path / "dist"
    # offline: the build backend is the one installed here (the [test] extra brings setuptools and wheel)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(dist), str(src)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = dist.glob("rlvr_env-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "site")
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == WHEEL_PACKAGES | WHEEL_MODULES, sorted(top)
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    listed = set((tmp_path / "site" / top_level).read_text().split())
    assert listed == WHEEL_PACKAGES | {m.removesuffix(".py") for m in WHEEL_MODULES}, listed
    for package in WHEEL_PACKAGES:  # PEP 561: type checkers read the hints of a package with py.typed
        assert f"{package}/py.typed" in names
        for init in sorted((ROOT / package).rglob("__init__.py")):  # every subpackage is shipped
            assert init.relative_to(ROOT).as_posix() in names, init
    # the unpacked wheel alone imports (no clone on the path): nothing in it needs benchmarks/
    probe = subprocess.run(
        [sys.executable, "-c", "import rlvr_env, agents, agents.grpo, rlvr_env_countdown; "
         "print(rlvr_env.__file__); print(agents.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    for line in probe.stdout.split():
        assert Path(line).is_relative_to(tmp_path / "site"), probe.stdout
