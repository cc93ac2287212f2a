"""What the docs and docstrings say about TRL's PPO and GMPO and where a critic starts, checked against
the installed TRL (the version the docs pin) and against what the agent does."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md",
           *sorted((ROOT / "agents").rglob("*.py"))]


def _text(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def _variants_row(name: str) -> list[str]:
    for line in (ROOT / "docs" / "variants.md").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| {name}"):
            return [cell.strip() for cell in line.strip("|").split("|")]
    raise AssertionError(f"docs/variants.md has no row starting {name!r}")


@pytest.fixture(scope="module")
def trl():  # noqa: ANN201
    trl = pytest.importorskip("trl")
    pinned = re.search(r"trl>=(\d+\.\d+)", (ROOT / "setup.cfg").read_text())
    assert pinned is not None
    if not trl.__version__.startswith(pinned.group(1) + "."):
        pytest.skip(f"the docs describe TRL {pinned.group(1)}; installed {trl.__version__}")
    return trl


def test_trl_ships_no_ppo_trainer_and_every_mention_says_which_trl(trl) -> None:  # noqa: ANN001
    assert not hasattr(trl, "PPOTrainer") and not hasattr(trl, "PPOConfig")
    assert importlib.util.find_spec("trl.experimental.ppo") is None
    unqualified = []
    for path in SOURCES:
        text = _text(path)
        for match in re.finditer(r"TRL(?:'s)? (?:``|`)?PPO(?:Trainer|Config)", text):
            unqualified.append(f"{path.relative_to(ROOT)}: ...{text[match.start() - 40:match.end() + 20]}...")
    assert unqualified == [], "name the TRL release that had it (1.12):\n" + "\n".join(unqualified)
    assert "no PPO trainer in TRL 1.16.0" in _variants_row("PPO with a learned critic")[3]


def test_the_gmpo_row_names_trls_gmpo_trainer(trl) -> None:  # noqa: ANN001
    cell = _variants_row("GMPO geometric-mean ratio")[3]
    assert "`trl.experimental.gmpo`" in cell and "GMPOTrainer" in cell, cell
    gmpo = importlib.import_module("trl.experimental.gmpo")
    assert hasattr(gmpo, "GMPOTrainer") and hasattr(gmpo, "GMPOConfig")
    assert gmpo.GMPOConfig.__dataclass_fields__["epsilon"].default == 0.4  # the cell's "default 0.4"


def test_no_source_says_instructgpt_started_its_critic_from_the_policy() -> None:
    """InstructGPT (Ouyang et al. 2022) initialised its value function from the reward model."""
    for path in SOURCES:
        text = _text(path)
        for match in re.finditer(r"Ouyang et al\. 2022", text):
            around = text[max(0, match.start() - 160):match.end() + 120]
            assert "reward model" in around, f"{path.relative_to(ROOT)}: ...{around}..."
    agent = _text(ROOT / "docs" / "agent.md")
    assert "InstructGPT (Ouyang et al. 2022) initialised its value function from the reward model" in agent
    assert "a value head drawn at random" in agent  # verl's critic, not a zero head
