"""Which project modules does one GRPO training iteration walk through? A before/after measure of a
restructuring: how many modules and files one iteration crosses, and how often it crosses between them.

    python -m benchmarks.tools.iteration_walk [--env rlvr/Countdown-v0] [--env-kwargs '{"n_numbers": 3}']
                                              [--policy mlp] [--preset countdown] [--set '{}'] [--seed 0]
                                              [--checkout PATH] [--top 15] [--out DIR]

Method: ``agents.GRPO`` with ``GRPOConfig.preset(--preset)`` (plus ``--set`` overrides) trains one warm-up
iteration (``learn(1)``: imports, caches and first-call setup happen there), then one more
(``learn(1, reset_num_timesteps=False)``: ``learn`` rounds its budget up to whole iterations, and the
tool checks that ``model.iterations`` grew by exactly one) under ``sys.setprofile``. Every ``call``
event whose function belongs to a project module (``rlvr_env.*``, ``agents.*``, ``benchmarks.*``, read
from the frame's module name, so moved modules are found wherever they are) is counted; a generator's
resumption is a call, as the profiler reports it. A call's caller is the nearest project frame above it
(library frames such as ``torch.nn.Module.__call__`` or Gymnasium's wrappers are skipped, and counted
as "through a library"); a *boundary crossing* is a call whose caller is another project module.

``--checkout PATH`` measures another clone (e.g. the main branch before a refactor): PATH goes first on
``sys.path`` before ``rlvr_env`` and ``agents`` are imported, and the tool stops if they come from
anywhere else; the files it imported from are printed. Output: the report on stdout, and
``<out>/iteration_walk.json`` and ``.md`` (``<out>``: ``benchmark-runs/iteration_walk/``, git-ignored,
unless ``--out``). A maintainer tool: it writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.core.common import LOCAL_OUT, cli, write_atomically

#: The project's top-level packages: a module under one of them is the project's.
PACKAGES = ("rlvr_env", "agents", "benchmarks")
#: Names this tool's own module has (run with ``-m`` it is ``__main__``, which is not the project's).
SELF = frozenset({__name__, "benchmarks.tools.iteration_walk"})


class Call(NamedTuple):
    """One kind of call in the trace: ``caller`` (the nearest project module above, None when only this
    tool is) into ``callee``; ``direct`` when the caller's frame is the callee's immediate parent."""

    caller: str | None
    callee: str
    direct: bool


def is_project(module: str) -> bool:
    return module.partition(".")[0] in PACKAGES and module not in SELF


def package_of(module: str, file: str | None) -> str:
    """The package ``module`` belongs to: itself for a package's ``__init__.py``, else its parent."""
    if file is not None and Path(file).name == "__init__.py":
        return module
    return module.rpartition(".")[0] or module


def summarize(calls: Mapping[Call, int], files: Mapping[str, str], top: int = 15) -> dict[str, Any]:
    """What the trace ``calls`` (how many of each :class:`Call`) crossed: the modules (callees and
    callers) by package, their files (``files``: module -> its file), the calls, the boundary crossings
    (caller another project module than the callee) and the ``top`` crossing pairs."""
    modules = sorted({c.callee for c in calls} | {c.caller for c in calls if c.caller is not None})
    by_package: dict[str, list[str]] = {}
    for module in modules:
        by_package.setdefault(package_of(module, files.get(module)), []).append(module)
    pairs: Counter[tuple[str, str]] = Counter()
    direct = 0
    for call, n in calls.items():
        if call.caller is not None and call.caller != call.callee:
            pairs[(call.caller, call.callee)] += n
            direct += n if call.direct else 0
    crossings = sum(pairs.values())
    return {
        "modules": modules,
        "files": sorted({files[m] for m in modules if m in files}),
        "by_package": {p: by_package[p] for p in sorted(by_package)},
        "calls": sum(calls.values()),
        "crossings": crossings,
        "crossings_direct": direct,
        "crossings_through_library": crossings - direct,
        "pairs": len(pairs),
        "top_pairs": [[a, b, n] for (a, b), n in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[:top]],
    }


def report(summary: Mapping[str, Any], header: Iterable[str] = ()) -> str:
    """The summary as text: counts, the modules grouped by package, the top crossing pairs."""
    s = summary
    lines = [*header,
             f"project modules crossed: {len(s['modules'])}, in {len(s['files'])} files; "
             f"{s['calls']:,} calls into project functions",
             "modules by package:"]
    for package, modules in s["by_package"].items():
        short = [m[len(package) + 1:] if m.startswith(package + ".") else f"({m.rpartition('.')[2]})"
                 for m in modules]
        lines.append(f"  {package} ({len(modules)}): {', '.join(short)}")
    lines.append(f"boundary crossings (a call from one project module into another): {s['crossings']:,} "
                 f"({s['crossings_direct']:,} direct, {s['crossings_through_library']:,} through a "
                 f"library frame), over {s['pairs']} module pairs; the top {len(s['top_pairs'])}:")
    width = max((len(f"{n:,}") for _, _, n in s["top_pairs"]), default=1)
    lines += [f"  {n:>{width},}  {a} -> {b}" for a, b, n in s["top_pairs"]]
    return "\n".join(lines) + "\n"


def trace(run: Callable[[], Any]) -> tuple[Counter[Call], dict[str, str]]:
    """Run ``run()`` under ``sys.setprofile`` and return the project calls it made and each called
    module's file."""
    calls: Counter[Call] = Counter()
    files: dict[str, str] = {}

    def module(frame: Any) -> str:
        name = frame.f_globals.get("__name__", "")
        return name if isinstance(name, str) else ""

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = module(frame)
        if not is_project(callee):
            return
        if callee not in files:
            files[callee] = frame.f_globals.get("__file__") or frame.f_code.co_filename
        back, direct, caller = frame.f_back, True, None
        while back is not None:
            name = module(back)
            if name in SELF:  # the traced call's own entry: what called this tool is not the iteration
                break
            if is_project(name):
                caller = name
                break
            back, direct = back.f_back, False
        calls[Call(caller, callee, direct and caller is not None)] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls, files


def use_checkout(path: Path) -> None:
    """Put the clone at ``path`` first on ``sys.path``, before ``rlvr_env`` and ``agents`` are imported."""
    path = path.resolve()
    if not (path / "rlvr_env" / "__init__.py").is_file():
        raise SystemExit(f"--checkout {path}: no rlvr_env/__init__.py there; give a clone's top folder")
    early = [m for m in ("rlvr_env", "agents") if m in sys.modules]
    if early:
        raise SystemExit(f"--checkout {path}: {early} already imported; run this tool in a fresh process")
    sys.path.insert(0, str(path))


def imported_from(checkout: Path | None) -> dict[str, str]:
    """Where ``rlvr_env`` and ``agents`` came from (a SystemExit when not from ``checkout``)."""
    import agents
    import rlvr_env

    where = {m.__name__: str(Path(m.__file__ or "").resolve()) for m in (rlvr_env, agents)}
    if checkout is not None:
        wrong = {k: v for k, v in where.items() if not Path(v).is_relative_to(checkout.resolve())}
        if wrong:
            raise SystemExit(f"--checkout {checkout}: imported {wrong} instead")
    return where


def walk(env: str, env_kwargs: dict[str, Any], policy: str, preset: str, overrides: dict[str, Any],
         seed: int) -> tuple[Counter[Call], dict[str, str], dict[str, Any]]:
    """Train one warm-up iteration, then trace exactly one more; returns the trace and what ran."""
    from agents import GRPO, GRPOConfig

    if policy != "tabular":
        import torch

        torch.set_num_threads(1)  # one thread, as every study's run (the count does not depend on it)
    model = GRPO(env, GRPOConfig.preset(preset, **overrides), policy=policy, seed=seed, env_kwargs=env_kwargs)
    model.learn(1)  # the warm-up iteration
    before, steps = model.iterations, model.num_timesteps
    calls, files = trace(lambda: model.learn(1, reset_num_timesteps=False))
    if model.iterations != before + 1:
        raise RuntimeError(f"learn(1) ran {model.iterations - before} iterations, not one")
    return calls, files, {"iteration": model.iterations, "env_steps": model.num_timesteps - steps}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.iteration_walk",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="rlvr/Countdown-v0")
    parser.add_argument("--env-kwargs", type=json.loads, default={"n_numbers": 3}, help="JSON env kwargs")
    parser.add_argument("--policy", default="mlp")
    parser.add_argument("--preset", default="countdown", help="GRPOConfig.preset name")
    parser.add_argument("--set", type=json.loads, default={}, help="JSON GRPOConfig overrides on the preset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkout", type=Path, default=None,
                        help="import rlvr_env and agents from this clone (default: as Python finds them)")
    parser.add_argument("--top", type=int, default=15, help="crossing pairs to list")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default {LOCAL_OUT / 'iteration_walk'}/, git-ignored)")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    if args.checkout is not None:
        use_checkout(args.checkout)
    where = imported_from(args.checkout)
    calls, files, ran = walk(args.env, args.env_kwargs, args.policy, args.preset, args.set, args.seed)
    summary = summarize(calls, files, args.top)
    header = [f"iteration_walk: {args.env} {json.dumps(args.env_kwargs)}, policy {args.policy}, preset "
              f"{args.preset} {json.dumps(args.set)}, seed {args.seed}",
              f"imported from: rlvr_env {where['rlvr_env']}, agents {where['agents']}",
              f"traced: iteration {ran['iteration']} ({ran['env_steps']:,} env steps), after one warm-up "
              "iteration"]
    text = report(summary, header)
    print(text, end="")
    result = {"env": args.env, "env_kwargs": args.env_kwargs, "policy": args.policy, "preset": args.preset,
              "overrides": args.set, "seed": args.seed, "imported_from": where, **ran, **summary}
    out = args.out if args.out is not None else LOCAL_OUT / "iteration_walk"
    write_atomically(out / "iteration_walk.json", json.dumps(result, indent=1) + "\n")
    write_atomically(out / "iteration_walk.md", text)
    return result


if __name__ == "__main__":
    sys.exit(cli(main))
