"""The import graph of ``rlvr_env``, ``agents`` and ``benchmarks`` has no circle, and its arrows point one
way: ``benchmarks -> agents -> rlvr_env`` (the order of docs/experiments.md, "The repository's layout";
docs/install.md, "What the wheel installs": nothing in the two installed packages imports ``benchmarks``).

Inside ``agents``, two more rules: ``agents.grpo`` is seen from outside through its face only (nothing
outside it imports one of its modules: ``from agents.grpo import GRPO`` is fine, ``agents.grpo.config`` is
not), and ``agents.policies`` imports nothing of ``agents.grpo`` (the trainer gives a policy its loss).

The graph is read from the source with ``ast``: every ``import`` and ``from ... import`` statement,
module-level or inside a function (a lazy import is still an arrow), resolved to the project module it
names (``from a.b import c`` is an arrow to ``a.b.c`` when that is a module, else to ``a.b``). The
packages are walked, so new modules are covered without naming them here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rlvr_env", "agents", "benchmarks")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            modules[_module_name(path)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is a project module (None: not ours)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that ``module`` (at ``path``) imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the current package, up level - 1 packages
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from a.b import c`: the submodule a.b.c when it is one, else a.b itself
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != module:
                out.add(resolved)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_graph_is_read_from_every_module_including_lazy_imports() -> None:
    graph = import_graph()
    assert {"rlvr_env", "agents", "agents.grpo.agent", "agents.policies.mlp"} <= set(graph)
    assert len(graph) > 40 and sum(map(len, graph.values())) > 80
    # the policy registry imports the mlp policy inside a function: the arrow is seen
    assert "agents.policies.mlp" in graph["agents.policies.registry"]
    assert "agents.policies.torch_base" in graph["agents.policies.mlp"]


def test_find_cycle_finds_a_planted_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_circle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize(("package", "forbidden"), [
    ("rlvr_env", ("agents", "benchmarks")),
    ("agents", ("benchmarks",)),
])
def test_arrows_point_one_way(package: str, forbidden: tuple[str, ...]) -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == package
        for target in targets
        if target.split(".")[0] in forbidden
    )
    assert not wrong, wrong


def _experiment(module: str) -> str | None:
    """The experiment a ``benchmarks`` module belongs to: its top-level package or module under
    ``benchmarks`` (``benchmarks.lab.kl`` -> ``lab``); None for ``benchmarks`` itself and for ``core``, which
    every experiment shares."""
    parts = module.split(".")
    if parts[0] != "benchmarks" or len(parts) < 2 or parts[1] == "core":
        return None
    return parts[1]


def test_no_experiment_imports_another_and_core_imports_none() -> None:
    """An experiment imports ``benchmarks.core`` and its own modules only (what two share belongs in
    ``core``), and ``core`` imports no experiment."""
    graph = import_graph()
    assert {"compare", "lab", "r1", "speed", "tools"} <= {_experiment(m) for m in graph}
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("benchmarks")
        for target in targets
        if _experiment(target) is not None and _experiment(target) != _experiment(module)
    )
    assert not wrong, wrong


#: The generic env layer: what every task family runs on. It imports no family (the envs, the vector and
#: text envs, the token context, registration, the reward, the scoring protocol and the Task contract).
GENERIC_LAYER = ("rlvr_env.envs", "rlvr_env.vector", "rlvr_env.vector_prompts", "rlvr_env.text_env",
                 "rlvr_env.text_tool_env",
                 "rlvr_env.token_obs", "rlvr_env.registration", "rlvr_env.rewards", "rlvr_env.scoring",
                 "rlvr_env.completions", "rlvr_env.sb3", "rlvr_env.tasks.base", "rlvr_env.tasks.registry")


def family_of(module: str) -> str | None:
    """The task family a module belongs to: ``rlvr_env.tasks.<family>`` and everything under it, except
    the contract (``base``) and the registry; None for any other module."""
    parts = module.split(".")
    if parts[:2] != ["rlvr_env", "tasks"] or len(parts) < 3 or parts[2] in ("base", "registry"):
        return None
    return parts[2]


def generic_to_family(graph: dict[str, set[str]]) -> list[str]:
    """Every arrow from a generic-layer module to a family module."""
    return sorted(f"{m} -> {t}" for m in GENERIC_LAYER for t in graph.get(m, ()) if family_of(t) is not None)


def test_family_of_reads_packages_and_modules() -> None:
    assert family_of("rlvr_env.tasks.countdown.masks") == "countdown"
    assert family_of("rlvr_env.tasks.countdown") == "countdown"
    assert family_of("rlvr_env.tasks.digits") == "digits"
    assert family_of("rlvr_env.tasks.base") is None and family_of("rlvr_env.tasks.registry") is None
    assert family_of("rlvr_env.tasks") is None and family_of("rlvr_env.vector") is None


def test_generic_to_family_finds_a_planted_arrow() -> None:
    graph = {"rlvr_env.vector": {"rlvr_env.tasks.base", "rlvr_env.tasks.countdown.masks"},
             "rlvr_env.tasks.base": {"rlvr_env.rewards"}}
    assert generic_to_family(graph) == ["rlvr_env.vector -> rlvr_env.tasks.countdown.masks"]


def test_the_generic_layer_imports_no_family() -> None:
    graph = import_graph()
    assert set(GENERIC_LAYER) <= set(graph), sorted(set(GENERIC_LAYER) - set(graph))
    assert generic_to_family(graph) == []


def test_families_are_packages_that_import_no_circle_among_themselves() -> None:
    """Each family is a folder (Digits may stay one module), and family arrows point one way (Countdown
    builds on the arithmetic-expression family, never the reverse)."""
    graph = import_graph()
    families = {family_of(m) for m in graph} - {None}
    assert {"expression", "countdown", "digits"} <= families
    for family in families - {"digits"}:
        assert (ROOT / "rlvr_env" / "tasks" / str(family) / "__init__.py").is_file(), family
    between = {(family_of(m), family_of(t)) for m, ts in graph.items() for t in ts
               if family_of(m) and family_of(t) and family_of(m) != family_of(t)}
    assert find_cycle({a: {b for x, b in between if x == a} for a, _ in between}) is None, between
    assert ("expression", "countdown") not in between


def test_the_top_of_benchmarks_holds_only_groups() -> None:
    """``benchmarks/`` holds folders (core, the studies, speed, tools; docs/experiments.md, "The layout"):
    a study is a package run as ``python -m benchmarks.<name>``, never a loose module beside them."""
    loose = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules at the top of benchmarks/: {loose}; make each a package or move it to a group"
    studies = {p.parent.name for p in (ROOT / "benchmarks").glob("*/__main__.py")}
    assert {"compare", "countdown", "r1", "lab", "speed", "grpo_targets", "llm_rewards", "tabular_hold",
            "demo"} <= studies


def reaching_into(graph: dict[str, set[str]], package: str) -> list[str]:
    """Every arrow from a module outside ``package`` to one of its modules (``package`` itself, its face,
    is allowed), as ``"a -> b"``."""
    inside = package + "."
    return sorted(f"{module} -> {target}" for module, targets in graph.items()
                  if module != package and not module.startswith(inside)
                  for target in targets if target.startswith(inside))


def importing_from(graph: dict[str, set[str]], package: str, forbidden: str) -> list[str]:
    """Every arrow from ``package`` or one of its modules to ``forbidden`` or one of its modules."""
    def within(name: str, pkg: str) -> bool:
        return name == pkg or name.startswith(pkg + ".")

    return sorted(f"{module} -> {target}" for module, targets in graph.items() if within(module, package)
                  for target in targets if within(target, forbidden))


def test_the_two_agents_rules_find_planted_violations() -> None:
    graph = {"agents.grpo": {"agents.grpo.agent"}, "agents.grpo.agent": {"agents.grpo.config"},
             "agents.sft": {"agents.grpo"}, "benchmarks.x": {"agents.grpo"},
             "agents.policies": {"agents.policies.tabular"}, "agents.policies.tabular": {"numpy"}}
    assert reaching_into(graph, "agents.grpo") == []
    assert importing_from(graph, "agents.policies", "agents.grpo") == []
    graph["agents.sft"] = {"agents.grpo.config"}  # reaches into the package past its face
    graph["agents.policies.tabular"] = {"agents.grpo.objective"}  # a policy importing the trainer
    graph["agents.policies"] = {"agents.grpo"}  # ... or its face
    assert reaching_into(graph, "agents.grpo") == ["agents.policies.tabular -> agents.grpo.objective",
                                                   "agents.sft -> agents.grpo.config"]
    assert importing_from(graph, "agents.policies", "agents.grpo") == [
        "agents.policies -> agents.grpo", "agents.policies.tabular -> agents.grpo.objective"]
    # a module whose name only starts like the package is not in it
    assert reaching_into({"agents.grpo_x": {"agents.grpo.agent"}}, "agents.grpo") == [
        "agents.grpo_x -> agents.grpo.agent"]
    assert importing_from({"agents.policies_x": {"agents.grpo"}}, "agents.policies", "agents.grpo") == []


def test_nothing_outside_agents_grpo_imports_one_of_its_modules() -> None:
    """``agents.grpo`` is seen from the rest of the project (``agents``, ``benchmarks``) through its face
    ``agents.grpo`` only; tests may reach in."""
    wrong = reaching_into(import_graph(), "agents.grpo")
    assert not wrong, wrong


def test_the_policies_import_nothing_of_agents_grpo() -> None:
    wrong = importing_from(import_graph(), "agents.policies", "agents.grpo")
    assert not wrong, wrong
