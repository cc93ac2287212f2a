"""The mutation-testing command's bookkeeping (the mutmut run itself is a maintainer command, not a test)."""

from __future__ import annotations

import configparser
import json
from pathlib import Path

import pytest

from benchmarks.core.common import ROOT, SetupError
from benchmarks.tools import mutation

DIFF = """--- rlvr_env/tasks/digits.py
+++ rlvr_env/tasks/digits.py
@@ -1,3 +1,3 @@
 def f(a, b):
-    return a   +  b
+    return a - b
     # unchanged
"""


def test_a_change_is_the_diff_reduced_to_its_stripped_changed_lines() -> None:
    assert mutation.change_of(DIFF) == "- return a   +  b\n+ return a - b"
    assert mutation.change_of("") == ""


@pytest.mark.parametrize("mutant, function", [
    ("rlvr_env.tasks.base.xǁTaskǁscore_text__mutmut_3", "Task.score_text"),
    ("rlvr_env.tasks.base.x_refused_verdict__mutmut_12", "refused_verdict"),
    ("agents.grpo.surrogates.x__log_ratio__mutmut_1", "_log_ratio"),
])
def test_a_mutant_name_reads_as_its_function(mutant: str, function: str) -> None:
    assert mutation.function_of(mutant) == function


def _score(killed: int, survived: int, equivalent: int = 0) -> mutation.ModuleScore:
    row = {"mutant": "m", "function": "f", "change": "- a\n+ b", "status": "survived"}
    return mutation.ModuleScore("rlvr_env/tasks/digits.py", ("tests/test_digits.py",), killed=killed,
                                survived=[row] * survived, equivalent=[{**row, "why": "same"}] * equivalent)


def test_the_score_leaves_equivalent_survivors_out_and_the_table_says_whether_the_goal_is_met() -> None:
    s = _score(killed=9, survived=1, equivalent=5)
    assert s.score == pytest.approx(0.9)
    low = _score(killed=8, survived=2)
    table = mutation.render([s, low], goal=0.9)
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows[0].split("|")[2:9] == [" 15 ", " 9 ", " 1 ", " 5 ", " 90.0% ", " yes ", " 0 "]
    assert rows[1].split("|")[6:8] == [" 80.0% ", " no "]
    assert "### Survivors in `rlvr_env/tasks/digits.py`" in table and "`- a / + b`" in table
    assert mutation._from_record(s.record()).record() == s.record()
    assert mutation.render([s], 0.9, "python -m x").startswith("Recorded by `python -m x`")


def test_an_equivalent_entry_must_say_why(tmp_path: Path) -> None:
    path = tmp_path / "eq.json"
    path.write_text(json.dumps([{"module": "m.py", "function": "f", "change": "- a\n+ b", "why": " "}]))
    with pytest.raises(SetupError, match="gives no reason"):
        mutation.load_equivalents(path)
    path.write_text(json.dumps([{"module": "m.py", "function": "f"}]))
    with pytest.raises(SetupError, match=r"lacks \['change', 'why'\]"):
        mutation.load_equivalents(path)
    assert mutation.load_equivalents(tmp_path / "none.json") == []


def test_the_recorded_equivalents_are_well_formed_and_name_core_modules() -> None:
    for entry in mutation.load_equivalents():
        assert entry["module"] in mutation.TARGETS, entry


def test_every_core_module_and_its_covering_tests_exist() -> None:
    for module, tests in mutation.TARGETS.items():
        assert (ROOT / module).is_file(), module
        assert tests and all((ROOT / t).is_file() for t in tests), (module, tests)


def test_the_copy_mutates_only_the_module_against_only_its_tests(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text((ROOT / "setup.cfg").read_text())
    mutation._configure(tmp_path, "rlvr_env/tasks/digits.py", ("tests/test_digits.py", "tests/test_env.py"))
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(tmp_path / "setup.cfg")
    assert cfg.get("mutmut", "only_mutate").split() == ["rlvr_env/tasks/digits.py"]
    selected = cfg.get("mutmut", "pytest_add_cli_args_test_selection").split()
    assert selected == ["tests/test_digits.py", "tests/test_env.py"]
    assert cfg.get("mutmut", "process_isolation") == "forkserver"   # the project's shared settings stay
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = x\n")
    with pytest.raises(SetupError, match=r"no \[mutmut\] section"):
        mutation._configure(tmp_path, "m.py", ("t.py",))


def test_a_module_outside_the_core_needs_its_tests() -> None:
    with pytest.raises(SetupError, match="pass its covering tests with --tests"):
        mutation.main(["rlvr_env/sb3.py"])
