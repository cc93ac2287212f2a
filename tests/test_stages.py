"""The R1 recipe's four stages (benchmarks.stages): one seed end to end at a tiny size, the costs it
reports, and the study's tables and verdicts read from records whose numbers are known."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from benchmarks.stages import DEFAULT_SPEC, SIDE_ARMS, STAGES, stage_table

TASKS = ["countdown", "digits", "arithmetic"]


def tiny_spec(seed: int = 0) -> dict:
    spec = copy.deepcopy(DEFAULT_SPEC)
    spec.update(seed=seed)
    spec["sft"].update(n=600, epochs=1)
    spec["rl"]["budget"] = 600
    spec["mix_rl"]["budget"] = 600
    spec["rejection"].update(n_prompts=24, k=4, cap=2, epochs=1)
    spec["eval"].update(k=2, prompts=6)
    return spec


@pytest.fixture(scope="module")
def tiny_record() -> dict:
    pytest.importorskip("torch")
    from benchmarks.stages import stages_run

    seen: list[str] = []
    record = stages_run(tiny_spec(), report=lambda stage, rec: seen.append(stage))
    record["_seen"] = seen
    return record


def test_one_seed_runs_the_four_stages_and_the_side_arms_in_order(tiny_record: dict) -> None:
    assert tiny_record["_seen"] == ["cold_start", "reasoning_rl", "rejection_sft_noremix", "rejection_sft",
                                    "mix_rl", "rsft_from_base"]
    assert tiny_record["tasks"] == TASKS
    for where, names in (("stages", STAGES), ("side", SIDE_ARMS)):
        for name in names:
            row = tiny_record[where][name]
            for split in ("eval", "eval_train"):
                assert set(row[split]) == set(TASKS)
                for ev in row[split].values():
                    assert 0.0 <= ev["greedy"] <= 1.0 and 0.0 <= ev["sampled"] <= 1.0
                    assert set(ev["pass_at"]) == {"1", "2"}
                    assert ev["pass_at"]["1"] == pytest.approx(ev["sampled"])
    json.dumps(tiny_record)  # a run's record is JSON (the store writes it)


def test_each_stage_reports_what_it_cost(tiny_record: dict) -> None:
    stages = tiny_record["stages"]
    spec = tiny_spec()
    assert stages["cold_start"]["cost"]["answers"] == 0 and stages["cold_start"]["cost"]["tokens"] > 600
    for name, budget in (("reasoning_rl", spec["rl"]["budget"]), ("mix_rl", spec["mix_rl"]["budget"])):
        cost = stages[name]["cost"]
        assert cost["tokens"] >= budget and cost["answers"] > 0
        assert cost["tokens"] >= cost["answers"]  # every answer is at least one policy token
    rs = stages["rejection_sft"]["cost"]
    kept = rs["kept"]
    assert rs["answers"] == kept["sampled"] == spec["rejection"]["n_prompts"] * spec["rejection"]["k"]
    assert kept["kept"] <= kept["distinct_paid"] <= kept["paid"] <= kept["sampled"]
    assert kept["kept"] <= spec["rejection"]["cap"] * kept["prompts_kept"]
    if kept["kept"]:  # stage 3 re-mixes one other-task solution per kept answer (remix 1.0)
        assert rs["fit"]["remixed"] == kept["kept"] and rs["fit"]["kept"] == kept["kept"]
        noremix = tiny_record["side"]["rejection_sft_noremix"]["cost"]
        assert noremix["fit"]["remixed"] == 0
    # RS-FT from the base samples as many answers as stage 2's GRPO did (to within one prompt's k)
    k = spec["rejection"]["k"]
    assert abs(tiny_record["side"]["rsft_from_base"]["cost"]["answers"] - stages["reasoning_rl"]["cost"]["answers"]) <= k


def test_each_stage_trains_on_the_tasks_it_names(tiny_record: dict) -> None:
    only = {"countdown": 1.0, "digits": 0.0, "arithmetic": 0.0}
    mix = {"countdown": 0.5, "digits": 0.25, "arithmetic": 0.25}
    draws = {name: row["cost"]["draws"] for where in ("stages", "side") for name, row in tiny_record[where].items()}
    assert draws == {"cold_start": mix, "reasoning_rl": only, "rejection_sft": only, "mix_rl": mix,
                     "rsft_from_base": only, "rejection_sft_noremix": only}
    assert tiny_record["seconds"] > 0 and tiny_record["cpu_seconds"] > 0


def test_a_stage_carries_the_network_and_anchors_rl_to_it() -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.stages.run import _carry, _make

    spec = tiny_spec()
    src, dst = _make(spec, None), _make({**spec, "seed": 1}, {"countdown": 1.0, "digits": 0.0, "arithmetic": 0.0})
    with torch.no_grad():
        for p in src.policy.net.parameters():
            p.add_(0.5)
    _carry(src, dst)
    for a, b, ref in zip(src.policy.net.parameters(), dst.policy.net.parameters(),
                         dst.policy.reference.parameters()):
        assert torch.equal(a, b) and torch.equal(b, ref)
    assert dst.env.unwrapped.task.weights["digits"] == 0.0


def test_each_arm_starts_from_the_network_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stage 2 and RS-FT from the base start from the cold start; stage 3 (with and without the re-mix)
    from stage 2's RL; stage 4 from stage 3 (RL'd and then fine-tuned)."""
    pytest.importorskip("torch")
    import benchmarks.stages.run as stages

    carried = []
    real = stages._carry

    def spy(src, dst):  # noqa: ANN001, ANN202
        carried.append((src.num_timesteps, dict(dst.env.unwrapped.task.weights)["digits"]))
        return real(src, dst)

    monkeypatch.setattr(stages, "_carry", spy)
    spec = tiny_spec()
    stages.stages_run(spec)
    rl = spec["rl"]["budget"]
    # (RL env steps the source had run, digits' weight in the new model), in the order the run carries
    assert [(steps >= rl if steps else 0, w) for steps, w in carried] == [
        (0, 0.0),      # stage 2 from the cold start
        (True, 0.0),   # stage 3 without the re-mix, from stage 2
        (True, 0.25),  # stage 4 over the mix, from stage 3 (stage 2's model, fine-tuned)
        (0, 0.0)]      # RS-FT from the base


def test_each_task_is_evaluated_alone_on_the_split_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import agents.evaluation
    from benchmarks.stages.run import _make, evaluate_tasks

    calls = []

    def fake(predict, env, split, **kw):  # noqa: ANN001, ANN003 - the evaluation's own signature
        calls.append((dict(env.unwrapped.task.weights), split, kw["k"], kw["n_prompts"]))
        return agents.evaluation.SuccessReport(0.5, 0.25, 0.75, kw["k"], np.array([0.25]))

    monkeypatch.setattr(agents.evaluation, "success_report", fake)
    spec = tiny_spec()
    out = evaluate_tasks(_make(spec, None), spec, "train")
    assert set(out) == set(TASKS) and out["digits"]["greedy"] == 0.5
    assert [c[1:] for c in calls] == [("train", 2, 6)] * 3
    for (weights, *_), task in zip(calls, TASKS):
        assert weights == {t: float(t == task) for t in TASKS}


def test_the_one_seed_table_has_a_row_per_stage_so_far(tiny_record: dict) -> None:
    table = stage_table(tiny_record, 2)
    for name in STAGES:
        assert f"| {name} |" in table
    for name in SIDE_ARMS:
        assert f"| ({name}) |" in table
    partial = {**tiny_record, "stages": {"cold_start": tiny_record["stages"]["cold_start"]}, "side": {}}
    assert stage_table(partial, 2).count("\n| ") == 1  # the cold_start row alone below the header


def test_a_reasoning_task_not_in_the_mix_is_refused() -> None:
    pytest.importorskip("torch")
    from benchmarks.stages import stages_run

    with pytest.raises(ValueError, match="reasoning='nonsense' is not a task"):
        stages_run({**tiny_spec(), "reasoning": "nonsense"})


# -- the study's tables, from records whose numbers are set by hand ----------------------------------
def fake_record(seed: int, greedy: dict[str, dict[str, float]]) -> dict:
    """A record whose held-out and train greedy of ``task`` at ``stage`` are ``greedy[stage][task]``."""
    def ev(v: float) -> dict:
        return {"greedy": v, "sampled": v / 2, "pass_at": {"1": v / 2, "16": min(1.0, 2 * v)}}

    def row(name: str) -> dict:
        return {"cost": {"answers": 100, "tokens": 600, "cpu_seconds": 1.0},
                "eval": {t: ev(greedy[name][t]) for t in TASKS},
                "eval_train": {t: ev(greedy[name][t]) for t in TASKS}}

    return {"seed": seed, "tasks": TASKS, "stages": {s: row(s) for s in STAGES},
            "side": {s: row(s) for s in SIDE_ARMS}}


def test_the_study_reads_gains_and_verdicts_from_the_per_seed_differences() -> None:
    pytest.importorskip("scipy")
    from benchmarks.stages.__main__ import study_tables

    records = []
    for seed, noise in zip(range(5), (0.0, 0.01, -0.01, 0.005, -0.005)):
        g = {s: {"countdown": 0.3, "digits": 0.5, "arithmetic": 0.6} for s in (*STAGES, *SIDE_ARMS)}
        g["reasoning_rl"] = {"countdown": 0.5 + noise, "digits": 0.4 + noise, "arithmetic": 0.6}  # RL: +0.2, -0.1
        g["rejection_sft"] = {"countdown": 0.5 + noise, "digits": 0.5 + noise, "arithmetic": 0.6}
        g["rejection_sft_noremix"] = {"countdown": 0.5, "digits": 0.35 + noise, "arithmetic": 0.6}
        g["mix_rl"] = {"countdown": 0.52 + noise, "digits": 0.55 + noise, "arithmetic": 0.6}
        g["rsft_from_base"] = {"countdown": 0.1 + noise, "digits": 0.5, "arithmetic": 0.6}
        records.append(fake_record(seed, g))
    text = "\n".join(study_tables(records, 16, "countdown"))
    rows = {line.split(" | ")[0] + " | " + line.split(" | ")[1]: line for line in text.splitlines()
            if line.startswith("| ") and line.count("|") > 4}
    # each stage's paired gain over the one before: stage 2 - stage 1 is +0.200 on the reasoning task
    gain = next(line for line in text.splitlines() if line.startswith("| reasoning_rl - cold_start |"))
    assert gain.split(" | ")[1].startswith("0.200 [")
    assert gain.split(" | ")[2].startswith("-0.100 [")
    verdicts = [line.rsplit(" | ", 2)[-2:] for line in text.splitlines() if "(held-out)" in line]
    claims = [line for line in text.splitlines() if "(held-out)" in line or "(train)" in line]
    # RS-FT 0.1 against GRPO's 0.5: RS-FT is not within 0.02
    assert "disagree" in next(c for c in claims if c.startswith("| RS-FT vs GRPO"))
    # RL on countdown alone lowers digits by 0.1: agree; arithmetic unchanged: inconclusive
    lowers = [c for c in claims if c.startswith("| RL on the reasoning task alone")]
    assert "agree |" in next(c for c in lowers if "digits (held-out)" in c)
    assert "inconclusive" in next(c for c in lowers if "arithmetic (held-out)" in c)
    # re-mixed stage 3 keeps digits at the cold start's level (within 0.02); the un-remixed one does not
    keeps = next(c for c in claims if c.startswith("| Re-mixing") and "digits (held-out)" in c)
    assert keeps.endswith("| agree |")
    dropped = next(c for c in claims if c.startswith("| Stage 3 without") and "digits (held-out)" in c)
    assert dropped.endswith("| disagree |")
    assert verdicts and rows


def test_a_task_at_zero_in_every_seed_is_no_signal_not_a_verdict() -> None:
    pytest.importorskip("scipy")
    from benchmarks.stages.__main__ import study_tables

    g = {s: {"countdown": 0.3, "digits": 0.0, "arithmetic": 0.6} for s in (*STAGES, *SIDE_ARMS)}
    records = [fake_record(seed, g) for seed in range(3)]
    claims = [line for line in study_tables(records, 16, "countdown") if "digits (held-out)" in line]
    assert claims and all(line.endswith("| no signal |") for line in claims)


def test_the_fraction_line_is_stage_3_answers_over_stage_2() -> None:
    from benchmarks.stages.__main__ import fraction_line

    g = {s: {t: 0.5 for t in TASKS} for s in (*STAGES, *SIDE_ARMS)}
    a, b = fake_record(0, g), fake_record(1, g)
    a["stages"]["rejection_sft"]["cost"]["answers"], a["stages"]["reasoning_rl"]["cost"]["answers"] = 100, 400
    b["stages"]["rejection_sft"]["cost"]["answers"], b["stages"]["reasoning_rl"]["cost"]["answers"] = 300, 400
    assert "0.50x" in fraction_line([a, b])
    assert np.isclose(float(fraction_line([a]).split(" ")[3].rstrip("x")), 0.25)


@pytest.mark.slow
def test_the_command_runs_one_seed_then_a_study_that_regenerates_from_its_runs(tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("ray")
    from benchmarks.stages.__main__ import main

    small = ["--sft", "600", "--epochs", "1", "--budget", "600", "--mix-budget", "600", "--rs-prompts", "24",
             "--rs-k", "4", "--rs-cap", "2", "--rs-epochs", "1", "--eval-k", "2", "--eval-prompts", "6"]
    assert main(["--seed", "0", *small]) == 0
    said = capsys.readouterr().out
    for stage in ("cold_start", "reasoning_rl", "rejection_sft", "mix_rl"):
        assert f"after {stage}:" in said
    args = ["--seeds", "1-2", "--out", str(tmp_path), "--quiet", "--workers", "2", *small]
    assert main(args) == 0
    assert "2 to run" in capsys.readouterr().out
    table = (tmp_path / "study.md").read_text()
    assert (tmp_path / "study.png").stat().st_size > 0
    assert main(args) == 0  # again: from the stored runs, nothing trains
    assert "2 found on disk, 0 to run" in capsys.readouterr().out
    assert (tmp_path / "study.md").read_text().split("Machine:")[0] == table.split("Machine:")[0]


RUNS = __import__("pathlib").Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "stages" / "runs"


@pytest.mark.skipif(not any(RUNS.glob("*.json")), reason="no stored runs of the stages study")
def test_the_study_regenerates_from_its_stored_runs(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    import shutil

    from benchmarks.stages.__main__ import _spec, build_parser, main
    from benchmarks.core.executor import Run
    from benchmarks.core.store import run_key

    args = build_parser().parse_args([])
    spec = {**_spec(args, args.seeds[0]), "threads": args.threads}
    first = Run("benchmarks.stages:stages_run", spec, run_key("stages", _spec(args, args.seeds[0])), arm="stages")
    stored = json.loads((RUNS / f"{first.key}.json").read_text())
    if stored["fingerprint"] != first.fingerprint:  # another Python or library version: it would train
        pytest.skip("the stored runs were made with another Python or library versions (store.code_version): "
                    "regenerating them here would train every run")
    shutil.copytree(RUNS, tmp_path / "runs")
    assert main(["--out", str(tmp_path), "--quiet"]) == 0
    assert f"{len(args.seeds)} found on disk, 0 to run" in capsys.readouterr().out
    table = (tmp_path / "study.md").read_text()
    committed = (RUNS.parent / "study.md").read_text()
    assert table.split("Command:")[0] == committed.split("Command:")[0]  # the committed table is these runs'
    assert (tmp_path / "study.png").stat().st_size > 0
