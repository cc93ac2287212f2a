"""Mutation testing of the core modules: ``python -m benchmarks.tools.mutation [MODULE ...]``.

A mutation tool (mutmut, the ``[dev]`` extra; its shared settings are the ``[mutmut]`` section of
setup.cfg) plants one small bug at a time in a module (an operator flipped, a constant changed, an
argument dropped) and runs the tests that reach the mutated function; a mutant that no test notices
*survived*. The score of a module is the share of its mutants that the tests kill, leaving out the
survivors judged *equivalent* (the mutated code does the same thing, so no test can tell), which are
listed with the reason in ``benchmarks/tools/mutation_equivalent.json``.

Each module runs in a copy of this checkout (its tracked and new files, as they are on disk, so a change
not yet committed is what is measured) under the output folder, with only that module mutated and only
its covering tests (:data:`TARGETS`) selected, so one module fits two cores in minutes. Writes
``mutation.{json,md}`` (the score per module and every survivor not judged equivalent, with its diff) to
``benchmark-runs/mutation/`` (git-ignored), or with ``--update-results`` to ``benchmarks/results/``;
docs/mutation.md says how to use it on the modules a change touches. Not part of the test run (too slow).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.core.common import (
    RESULTS_DIR,
    ROOT,
    SetupError,
    add_output_arguments,
    cli,
    command_line,
    machine_info,
    output_folder,
    write_results,
)

#: Each core module and the test files that cover it (the tests mutmut may run against its mutants:
#: it runs them once to learn which test reaches which function, then each mutant's own tests only).
TARGETS: dict[str, tuple[str, ...]] = {
    "rlvr_env/tasks/base.py": ("tests/test_task_base.py", "tests/test_task_contract.py",
                               "tests/test_custom_task.py", "tests/test_text_env.py"),
    "rlvr_env/tasks/digits.py": ("tests/test_digits_task.py", "tests/test_digits.py",
                                 "tests/test_task_contract.py"),
    "rlvr_env/tasks/expression/task.py": ("tests/test_expression_task.py", "tests/test_task_contract.py",
                                          "tests/test_env.py", "tests/test_token_obs.py",
                                          "tests/test_custom_task.py", "tests/test_batch_protocol.py"),
    "rlvr_env/scoring.py": ("tests/test_scoring.py", "tests/test_task_contract.py",
                            "tests/test_vector.py", "tests/test_custom_task.py",
                            "tests/test_batch_protocol.py"),
    "rlvr_env/vector_prompts.py": ("tests/test_vector_prompts.py", "tests/test_vector.py",
                                   "tests/test_vector_speed_paths.py"),
    "agents/grpo/objective.py": ("tests/test_objective.py", "tests/test_variants_parity.py"),
    "agents/grpo/surrogates.py": ("tests/test_surrogates.py", "tests/test_objective.py",
                                  "tests/test_variants_parity.py"),
    "agents/grpo/advantages.py": ("tests/test_objective.py", "tests/test_variants_parity.py",
                                  "tests/test_value.py"),
    "agents/grpo/value.py": ("tests/test_value.py", "tests/test_variants_parity.py"),
    "agents/policies/torch_base.py": ("tests/test_transformer.py", "tests/test_value.py",
                                      "tests/test_agents.py"),
    # tests/test_pipeline.py runs studies in subprocesses and Ray workers with another working folder,
    # where mutmut's stats pass cannot find its settings and fails: the store's own tests cover it
    "benchmarks/core/store.py": ("tests/test_store.py",),
    "benchmarks/core/executor.py": ("tests/test_pipeline.py", "tests/test_experiment_api.py"),
}

#: Where the survivors judged equivalent are listed, each with why.
EQUIVALENT_FILE = Path(__file__).with_name("mutation_equivalent.json")

#: mutmut's exit codes per mutant (``mutmut.stats.status_by_exit_code``), as this tool counts them: a
#: timeout is a kill (the mutant made the tests hang), "no tests" a survivor (nothing would notice it).
KILLED_CODES = {1, 3, 36, 24, -24, 152, 255, -11, -9, 37}
SURVIVED_CODES = {0, 5, 33}


@dataclass
class ModuleScore:
    module: str
    tests: tuple[str, ...]
    killed: int = 0
    timeouts: int = 0
    survived: list[dict[str, str]] = field(default_factory=list)   # not judged equivalent
    equivalent: list[dict[str, str]] = field(default_factory=list)
    other: int = 0             # skipped or suspicious: neither killed nor survived
    seconds: float = 0.0

    @property
    def scored(self) -> int:
        return self.killed + len(self.survived)

    @property
    def score(self) -> float | None:
        return self.killed / self.scored if self.scored else None

    def record(self) -> dict[str, Any]:
        return {"module": self.module, "tests": list(self.tests), "killed": self.killed,
                "timeouts": self.timeouts, "survived": self.survived, "equivalent": self.equivalent,
                "other": self.other, "score": self.score, "seconds": round(self.seconds, 1)}


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[dict[str, str]]:
    """The judged-equivalent survivors: a JSON list of ``{"module", "function", "change", "why"}``;
    ``change`` is the mutant's diff reduced to its ``-``/``+`` lines (:func:`change_of`), so an entry
    outlives edits elsewhere in the module (mutmut's mutant numbers do not)."""
    if not path.is_file():
        return []
    entries = json.loads(path.read_text())
    if not isinstance(entries, list):
        raise SetupError(f"{path}: expected a JSON list of entries, got {type(entries).__name__}")
    for i, entry in enumerate(entries):
        missing = {"module", "function", "change", "why"} - set(entry)
        if missing:
            raise SetupError(f"{path}: entry {i} lacks {sorted(missing)}")
        if not str(entry["why"]).strip():
            raise SetupError(f"{path}: entry {i} ({entry['function']}) gives no reason why it is equivalent")
    return entries


def change_of(diff: str) -> str:
    """A unified diff reduced to its changed lines, stripped: ``"- a + b\\n+ a - b"``."""
    lines = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line[:1] in "-+":
            lines.append(f"{line[0]} {line[1:].strip()}")
    return "\n".join(lines)


def function_of(mutant: str) -> str:
    """``rlvr_env.tasks.base.xǁTaskǁscore_text__mutmut_3`` -> ``Task.score_text``."""
    name = mutant.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    # mutmut mangles a function as "x_<name>" and a method as "xǁ<Class>ǁ<name>"
    name = name[2:] if name.startswith("x_") else name.removeprefix("x")
    return ".".join(part for part in name.split("ǁ") if part)


def _copy_checkout(dest: Path) -> None:
    """The tracked and new (not ignored) files of this checkout, as they are on disk."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    if dest.exists():
        shutil.rmtree(dest)
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _configure(copy: Path, module: str, tests: tuple[str, ...]) -> None:
    """The copy's setup.cfg: the project's ``[mutmut]`` section with only ``module`` mutated and only
    ``tests`` selected."""
    import configparser

    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(copy / "setup.cfg")
    if not cfg.has_section("mutmut"):
        raise SetupError("setup.cfg has no [mutmut] section (the mutation tool's shared settings)")
    cfg.set("mutmut", "only_mutate", "\n" + module)
    cfg.set("mutmut", "pytest_add_cli_args_test_selection", "\n" + "\n".join(tests))
    with open(copy / "setup.cfg", "w") as fh:
        cfg.write(fh)


_DIFFS = r"""
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], sys.argv[2:]
print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))
"""


def run_module(module: str, tests: tuple[str, ...], work: Path, equivalents: list[dict[str, str]],
               max_children: int, log: Path, *, rerun: bool = True) -> ModuleScore:
    """Mutate ``module`` in a fresh copy under ``work`` and score it; ``rerun=False`` scores the copy's
    last run again (e.g. after editing the equivalents) without mutating anything."""
    if not (ROOT / module).is_file():
        raise SetupError(f"no module {module!r} in this checkout")
    missing = [t for t in tests if not (ROOT / t).is_file()]
    if missing:
        raise SetupError(f"{module}: covering test files {missing} do not exist")
    copy = work / module.replace("/", "_").removesuffix(".py")
    meta = copy / "mutants" / f"{module}.meta"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": ""}
    seconds = 0.0
    if rerun:
        _copy_checkout(copy)
        _configure(copy, module, tests)
        start = time.perf_counter()
        with open(log, "a") as fh:
            fh.write(f"\n== {module}\n")
            fh.flush()
            status = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children",
                                     str(max_children)], cwd=copy, env=env, stdout=fh,
                                    stderr=subprocess.STDOUT).returncode
        seconds = time.perf_counter() - start
        if status != 0 or not meta.is_file():
            raise SetupError(f"mutmut failed on {module} (exit status {status}); its output is in {log}")
    elif not meta.is_file():
        raise SetupError(f"--no-run: {module} has no earlier run in {copy}")
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    if not rerun:
        timing = copy / "seconds.json"
        seconds = float(json.loads(timing.read_text())) if timing.is_file() else 0.0
    else:
        (copy / "seconds.json").write_text(json.dumps(seconds))
    score = ModuleScore(module, tests, seconds=seconds)
    survivors = sorted(name for name, code in codes.items() if code in SURVIVED_CODES)
    diffs: dict[str, str] = {}
    if survivors:
        out = subprocess.run([sys.executable, "-c", _DIFFS, module, *survivors], cwd=copy,
                             env=env, capture_output=True, text=True, check=True).stdout
        diffs = json.loads(out)
    judged = {(e["function"], e["change"]): e["why"] for e in equivalents if e["module"] == module}
    for name, code in sorted(codes.items()):
        if code in KILLED_CODES:
            score.killed += 1
            score.timeouts += code not in (1, 3)
        elif code in SURVIVED_CODES:
            function, change = function_of(name), change_of(diffs.get(name, ""))
            row = {"mutant": name, "function": function, "change": change,
                   "status": "no tests" if code in (5, 33) else "survived"}
            why = judged.get((function, change))
            if why is None:
                score.survived.append(row)
            else:
                score.equivalent.append({**row, "why": why})
        else:
            score.other += 1
    return score


def render(scores: list[ModuleScore], goal: float, command: str = "") -> str:
    lines = [f"Recorded by `{command}`; the seconds are each module's own mutmut run.", ""] if command else []
    lines += ["| module | mutants | killed | survived | judged equivalent | score | goal met | seconds |",
              "|---|---|---|---|---|---|---|---|"]
    for s in scores:
        total = s.scored + len(s.equivalent) + s.other
        shown = "n/a" if s.score is None else f"{s.score:.1%}"
        met = "n/a" if s.score is None else ("yes" if s.score >= goal else "no")
        lines.append(f"| `{s.module}` | {total} | {s.killed} | {len(s.survived)} | {len(s.equivalent)} | "
                     f"{shown} | {met} | {s.seconds:.0f} |")
    lines += ["", "Score: killed / (killed + survived), survivors judged equivalent left out; a timeout "
              f"counts as killed, a mutant that no selected test reaches as survived. Goal: {goal:.0%}."]
    for s in scores:
        if s.survived:
            lines += ["", f"### Survivors in `{s.module}`", ""]
            for row in s.survived:
                change = row["change"].replace("\n", " / ").replace("|", "\\|")
                lines.append(f"- `{row['function']}` ({row['status']}): `{change}`")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.mutation",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("modules", nargs="*", metavar="MODULE",
                   help="modules to mutate, as paths (default: every core module of TARGETS)")
    p.add_argument("--tests", nargs="+", default=None,
                   help="covering test files for a module not in TARGETS (or to replace its own)")
    p.add_argument("--max-children", type=int, default=2, help="mutants run at once (default 2: two cores)")
    p.add_argument("--goal", type=float, default=0.9, help="the score each module should reach")
    p.add_argument("--list", action="store_true", help="print the core modules and their tests, then stop")
    p.add_argument("--no-run", action="store_true",
                   help="score each module's last run again (after editing the equivalents); mutates nothing")
    add_output_arguments(p, "mutation", RESULTS_DIR)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        for module, tests in TARGETS.items():
            print(module, "<-", " ".join(tests))
        return 0
    modules = args.modules or list(TARGETS)
    for module in modules:
        if module not in TARGETS and not args.tests:
            raise SetupError(f"{module!r} is not a core module of TARGETS; pass its covering tests with "
                             "--tests")
    try:
        import mutmut  # noqa: F401
    except ImportError:
        raise SetupError('the mutation tool is missing: python -m pip install "torch==2.13.0" -e '
                         '".[test,dev]"') from None
    out = output_folder(args)
    out.mkdir(parents=True, exist_ok=True)
    work = (Path("benchmark-runs") / "mutation" / "work").resolve()
    work.mkdir(parents=True, exist_ok=True)
    log = work / "mutmut.log"
    equivalents = load_equivalents()
    scores, failed = [], []
    for module in modules:
        tests = tuple(args.tests) if args.tests else TARGETS[module]
        print(f"mutating {module} against {len(tests)} test file(s) ...", flush=True)
        try:
            s = run_module(module, tests, work, equivalents, args.max_children, log, rerun=not args.no_run)
        except SetupError as err:  # e.g. a covering test that fails before any mutant: the next module
            print(f"  error: {err}", flush=True)
            failed.append(module)
            continue
        scores.append(s)
        print(f"  killed {s.killed}, survived {len(s.survived)}, equivalent {len(s.equivalent)}, "
              f"{s.seconds:.0f} s", flush=True)
    if failed and args.update_results:
        raise SetupError(f"not recorded: mutmut failed on {', '.join(failed)} (see above)")
    previous = out / "mutation.json"
    kept: dict[str, Any] = {}
    if previous.is_file():  # a run over some modules keeps the other modules' last scores
        kept = {r["module"]: r for r in json.loads(previous.read_text()).get("modules", [])}
    for s in scores:
        kept[s.module] = s.record()
    rows = [_from_record(r) for r in kept.values()]
    rows.sort(key=lambda s: list(TARGETS).index(s.module) if s.module in TARGETS else len(TARGETS))
    command = command_line("benchmarks.tools.mutation", argv)
    result = {"command": command, "machine": machine_info(), "goal": args.goal,
              "modules": [s.record() for s in rows]}
    write_results(out, "mutation", result, render(rows, args.goal, command))
    return 1 if failed else 0


def _from_record(r: dict[str, Any]) -> ModuleScore:
    return ModuleScore(r["module"], tuple(r["tests"]), killed=r["killed"], timeouts=r["timeouts"],
                       survived=r["survived"], equivalent=r["equivalent"], other=r["other"],
                       seconds=r["seconds"])


if __name__ == "__main__":
    sys.exit(cli(main))
