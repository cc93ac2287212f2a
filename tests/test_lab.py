"""The GRPO lab (benchmarks/lab/): a tiny-budget run of one claim end to end through the executor's
embedded Ray, and its statistics."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import lab
from benchmarks.core.stats import Interval


def test_verdict_reads_the_interval_on_the_claimed_side() -> None:
    assert lab.verdict(Interval(0.3, 0.1, 0.5), +1) == "agree"
    assert lab.verdict(Interval(-0.3, -0.5, -0.1), +1) == "disagree"
    assert lab.verdict(Interval(0.1, -0.1, 0.3), +1) == "inconclusive"
    assert lab.verdict(Interval(-0.3, -0.5, -0.1), -1) == "agree"
    assert lab.verdict(Interval(0.3, 0.1, 0.5), -1) == "disagree"
    assert lab.verdict(Interval(float("nan"), float("nan"), float("nan")), +1) == "inconclusive"
    # a margin reads "no worse than by margin" (Kimi's "no accuracy cost", "matches or beats")
    assert lab.verdict(Interval(0.0, -0.015, 0.02), +1, 0.02) == "agree"
    assert lab.verdict(Interval(0.0, -0.015, 0.02), +1) == "inconclusive"
    assert lab.verdict(Interval(-0.06, -0.10, -0.03), +1, 0.02) == "disagree"
    assert lab.verdict(Interval(0.06, 0.03, 0.10), -1, 0.02) == "disagree"
    with pytest.raises(ValueError, match="margin=-0.1"):
        lab.verdict(Interval(0.3, 0.1, 0.5), +1, -0.1)


def _record(seed: int, sampled: float, length: float, budget: int = 15_000) -> dict:
    """A hand-made lab record: 8 iterations, correct answers of ``length`` tokens, held-out ``sampled``."""
    iters = [{"solve_rate": 0.1, "len_correct": length, "len_wrong": 6.0, "entropy": 0.5, "kl": 0.0,
              "clip_frac": 0.1, "updated": 1.0, "total_timesteps": float(budget * (i + 1) / 8)}
             for i in range(8)]
    return {"key": {"seed": seed, "budget": budget}, "iterations": iters, "seconds": 1.0,
            "eval_seconds": 0.1, "final": {"greedy": sampled, "sampled": sampled, "pass@8": sampled}}


def test_single_answer_floor_is_countdowns_single_number_floor_on_the_lab_prompts() -> None:
    import gymnasium as gym

    from agents.evaluation import evaluation_prompts
    from benchmarks.core.baselines import single_number_floor

    env = gym.make(lab.ENV_ID, **lab.ENV_KWARGS)
    prompts = evaluation_prompts(env, "test", lab.base.EVAL_PROMPTS, seed=0)
    assert lab.single_answer_floor() == single_number_floor(env, prompts)
    assert lab.single_answer_floor() == np.mean([p.target in p.numbers for p in prompts])
    assert 0.0 < lab.single_answer_floor() < 0.5


def test_no_signal_when_no_arm_beats_the_floor_whatever_the_difference() -> None:
    """``--claim kimi --budget-scale 0.1`` once had both arms at 0.06 held-out sampled success
    and still printed "agree". Here the length term shortens answers clearly, and accuracy ties."""
    floor = lab.single_answer_floor()
    seeds = range(100, 108)
    at_floor = {"no_length": [_record(s, 0.06, 6.0) for s in seeds],
                "length_term": [_record(s, 0.06, 3.0 + 0.01 * s) for s in seeds]}
    claim = lab.CLAIMS["kimi"]
    assert claim.analyse(claim, at_floor)["rows"][0]["verdict"] == "agree"  # the claim's own rule
    res = lab.analyse("kimi", at_floor)
    assert res["no_signal"] and res["floor"] == floor
    assert [r["verdict"] for r in res["rows"]] == ["no signal"]
    assert f"single-answer floor {floor:.2f}" in res["rows"][0]["measured"]
    # one arm above the floor (its whole interval): the claim's own verdict stands
    learned = {**at_floor, "no_length": [_record(s, floor + 0.2 + 0.001 * s - 0.1, 6.0) for s in seeds]}
    res = lab.analyse("kimi", learned)
    assert not res["no_signal"] and res["rows"][0]["verdict"] == "disagree"  # accuracy lost
    assert not lab.base.no_signal({"a": [floor + 0.01] * 4, "b": [0.0] * 4}, floor)
    assert lab.base.no_signal({"a": [floor] * 4, "b": [0.0] * 4}, floor)  # at the floor is not above it
    with pytest.raises(ValueError, match="floor=nan"):
        lab.base.no_signal({"a": [0.5] * 4}, float("nan"))


@pytest.mark.parametrize("name", ["sapo", "gmpo", "passk", "high_entropy"])
def test_new_claims_are_valid_settings_and_judge_their_two_arms(name: str) -> None:
    from agents import GRPOConfig

    claim = lab.CLAIMS[name]
    assert len(claim.arms) == 2 and claim.budget == lab.BUDGET
    for arm in claim.arms:
        key = lab.run_key(arm, 100, claim.budget)
        assert GRPOConfig.from_dict(key["config"]).to_dict() == key["config"]  # a valid config
        for field, value in arm.overrides.items():
            assert key["config"][field] == value
    # the challenger (second arm) clearly ahead on every per-seed number: "agree"; behind: "disagree"
    seeds = range(100, 108)
    for lead, want in ((0.1, "agree"), (-0.1, "disagree")):
        runs = {claim.arms[0].name: [_record(s, 0.40 + 0.001 * s, 5.0) for s in seeds],
                claim.arms[1].name: [_record(s, 0.40 + lead + 0.001 * s + 0.002 * (s % 2), 5.0) for s in seeds]}
        res = lab.analyse(name, runs)
        assert [r["verdict"] for r in res["rows"]] == [want], res["rows"]
        assert res["rows"][0]["paper"] == claim.paper
        assert claim.plot(claim, runs, res)[:4] == b"\x89PNG"


def test_high_entropy_matches_within_its_margin() -> None:
    from benchmarks.lab.high_entropy import MATCH_MARGIN

    seeds = range(100, 108)
    runs = {"all_tokens": [_record(s, 0.40, 5.0) for s in seeds],
            "top20": [_record(s, 0.40 - MATCH_MARGIN / 2 + 0.001 * (s % 2), 5.0) for s in seeds]}
    assert lab.analyse("high_entropy", runs)["rows"][0]["verdict"] == "agree"


def test_earlier_run_keys_match_only_the_runs_they_record() -> None:
    from benchmarks.lab.legacy import matches_earlier

    arm = lab.Arm("b", "b", {"epochs": 12})
    key = lab.run_key(arm, 100, 1000)
    earlier = json.loads(json.dumps(key))
    for added in ("top_entropy_quantile", "seq_mean_rows", "sapo_tau_pos", "sapo_tau_neg"):
        del earlier["config"][added]  # fields the earlier code did not have
    earlier["config"]["kl_cov_coef"] = 1.0  # its default then; read by KL-Cov only
    assert matches_earlier(earlier, key)
    # a new field set away from its default is another run, as is any recorded field that differs
    assert not matches_earlier(earlier, lab.run_key(lab.Arm("t", "t", {"epochs": 12,
                                                                       "top_entropy_quantile": 0.2}), 100, 1000))
    assert not matches_earlier(earlier, lab.run_key(lab.Arm("e", "e", {"epochs": 4}), 100, 1000))
    assert not matches_earlier(earlier, lab.run_key(arm, 101, 1000))
    assert not matches_earlier(earlier, lab.run_key(lab.Arm("k", "k", {"policy_loss": "kl_cov", "epochs": 12,
                                                                       "clip_eps_high": None}), 100, 1000))
    gone = json.loads(json.dumps(earlier))
    gone["config"]["removed_field"] = 1
    assert not matches_earlier(gone, key)


def test_committed_lab_table_is_the_analysis_of_the_committed_runs() -> None:
    """Every claim of the committed lab.json re-analysed from the committed run files (this code's, or an
    earlier code's that record the same runs) gives the committed rows: nothing in the table is typed in."""
    from benchmarks.core.common import RESULTS_DIR

    folder = RESULTS_DIR / "lab"
    committed = json.loads((folder / "lab.json").read_text())["claims"]
    assert set(committed) >= {"dr_grpo", "dapo", "gspo", "kimi", "kl"}
    for name, res in committed.items():
        scale = res["budget"] / lab.CLAIMS[name].budget
        records, source = lab.claim_records(name, res["seeds"], scale, folder)
        assert records is not None, name
        # a config field added since turns the files this code wrote into an earlier version's
        assert source == res["runs"] or (res["runs"], source) == ("current", "earlier code"), name
        assert lab.analyse(name, records)["rows"] == res["rows"], name


def test_seed_parsing_and_bad_arguments(tmp_path) -> None:
    parser = lab.build_parser()
    assert parser.parse_args(["--seeds", "100-102,7"]).seeds == [100, 101, 102, 7]
    for bad in ("5", "9-3"):  # intervals need 2 seeds; a range reads LOW-HIGH
        with pytest.raises(SystemExit):
            parser.parse_args(["--seeds", bad])
    with pytest.raises(ValueError, match="unknown claim"):
        lab.main(["--claim", "nonsense", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="--rerun"):
        lab.main(["--claim", "kimi", "--rerun", "nonsense", "--out", str(tmp_path)])


def test_arms_with_equal_settings_share_their_runs() -> None:
    base = lab.Arm("a", "a", {})
    same = lab.Arm("b", "b", {k: v for k, v in lab.BASE.items() if k == "group_size"})
    other = lab.Arm("c", "c", {"epochs": 7})
    key = lab.run_for
    assert key(base, 3, 100).key == key(same, 3, 100).key
    assert key(base, 3, 100).fingerprint == key(same, 3, 100).fingerprint
    assert key(base, 3, 100).key != key(other, 3, 100).key
    assert key(base, 3, 100).key != key(base, 4, 100).key


def test_first_reach_and_auc_on_a_hand_made_record() -> None:
    rec = {"iterations": [
        {"solve_rate": 0.0, "updated": 1.0, "total_timesteps": 100.0},
        {"solve_rate": 0.6, "updated": 0.0, "total_timesteps": 300.0},
        {"solve_rate": 0.6, "updated": 1.0, "total_timesteps": 400.0},
        {"solve_rate": 0.9, "updated": 1.0, "total_timesteps": 500.0},
    ]}
    # 2-iteration means: 0.3, 0.6 (reached at iteration 3: 2 updates, 400 steps)
    assert lab.first_reach(rec, 0.5, window=2) == (2.0, 400.0)
    assert np.isnan(lab.first_reach(rec, 0.95, window=2)[0])
    assert lab.solve_auc(rec) == pytest.approx((0 * 100 + 0.6 * 200 + 0.6 * 100 + 0.9 * 100) / 500)


def test_tiny_lab_run_writes_figures_table_and_reuses_runs(tmp_path, capsys) -> None:
    """One claim through the executor's embedded Ray (2 workers), tiny budget, end to end."""
    from benchmarks.core.store import check_run

    claim = lab.CLAIMS["dr_grpo"]
    scale = 1200 / claim.budget
    argv = ["--claim", "dr_grpo", "--seeds", "0-1", "--budget-scale", str(scale), "--workers", "2",
            "--out", str(tmp_path), "--quiet"]
    assert lab.main(argv) == 0
    first = capsys.readouterr().out
    assert "lab: 4 run(s): 0 found on disk, 4 to run" in first

    summary = json.loads((tmp_path / "lab.json").read_text())
    res = summary["claims"]["dr_grpo"]
    assert res["seeds"] == [0, 1] and res["budget"] == 1200
    assert len(res["rows"]) == 2
    for row in res["rows"]:  # 1,200 steps learn nothing: "no signal" exactly when no arm beats the floor
        assert row["verdict"] in {"agree", "disagree", "inconclusive", "no signal"}
        assert (row["verdict"] == "no signal") == res["no_signal"]
        assert row["paper"] == claim.paper
    png = (tmp_path / "dr_grpo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "lab.md").read_text()
    assert md.count("| Dr. GRPO") == 2 and "python -m benchmarks.lab --seeds 0-1" in md

    # The numbers come from the run files: recompute the wrong-answer length growth per seed.
    for arm in claim.arms:
        for i, seed in enumerate((0, 1)):
            rec = check_run(tmp_path / "runs" / f"{lab.run_for(arm, seed, 1200).key}.json")
            assert rec["execution"]["fn"] == "benchmarks.lab.runner:run_arm"
            assert rec["num_timesteps"] >= 1200
            assert rec["key"]["config"]["loss_aggregation"] == arm.overrides["loss_aggregation"]
            assert rec["key"]["env_kwargs"]["n_numbers"] == 3
            assert 0.0 <= rec["final"]["sampled"] <= 1.0
            steps = [it["total_timesteps"] for it in rec["iterations"]]
            assert steps == sorted(steps) and steps[-1] == rec["num_timesteps"]
            lw = np.array([it["len_wrong"] for it in rec["iterations"]], dtype=float)
            k = max(1, round(len(lw) * 0.25))
            want = np.nanmean(lw[-k:]) - np.nanmean(lw[:k])
            assert res["wrong_length_growth"][arm.name][i] == pytest.approx(want)
            assert sum(rec["untied_groups"]) + sum(rec["tied_groups"]) > 0

    # A rerun reuses every stored run; a run file edited by hand is set aside and the run trained again.
    path = tmp_path / "runs" / f"{lab.run_for(claim.arms[1], 1, 1200).key}.json"
    data = json.loads(path.read_text())
    data["record"]["key"]["budget"] = 1
    path.write_text(json.dumps(data))
    assert lab.main(argv) == 0
    out = capsys.readouterr()
    assert "3 found on disk, 1 to run" in out.out
    assert f"run file {path}" in out.err and "checksum" in out.err
    assert check_run(path)["key"]["budget"] == 1200
    assert (tmp_path / "runs" / "quarantine" / f"{path.name}.checksum").is_file()


def test_earlier_runs_repeat_exactly_under_this_code() -> None:
    """The rule of :mod:`benchmarks.lab.legacy` checked on data: wherever the committed runs hold a run
    of this code and an earlier code's file of the same run, both record the same training and scores."""
    from benchmarks.core.common import RESULTS_DIR
    from benchmarks.lab.legacy import _index, matches_earlier

    records = _index(RESULTS_DIR / "lab")
    current = [r for r in records if "seq_mean_rows" in r["key"]["config"]]
    earlier = [r for r in records if "seq_mean_rows" not in r["key"]["config"]]
    pairs = [(c, e) for c in current for e in earlier if matches_earlier(e["key"], c["key"])]
    assert pairs  # the new claims' baselines share settings with old claims' arms
    for c, e in pairs:
        assert c["final"] == e["final"] and c["iterations"] == e["iterations"]


def test_running_some_claims_keeps_the_others_in_the_summary(tmp_path, capsys) -> None:
    """``--claim kimi`` adds kimi to a folder's summary and keeps dr_grpo: re-analysed from its stored
    runs, or (its runs gone) kept as the previous lab.json had it; other seeds or budgets are not mixed in."""
    argv = ["--seeds", "0-1", "--budget-scale", str(1200 / lab.BUDGET), "--workers", "2", "--out",
            str(tmp_path), "--quiet"]
    assert lab.main(["--claim", "dr_grpo", *argv]) == 0
    first = json.loads((tmp_path / "lab.json").read_text())["claims"]["dr_grpo"]
    assert lab.main(["--claim", "kimi", *argv]) == 0
    claims = json.loads((tmp_path / "lab.json").read_text())["claims"]
    assert set(claims) == {"dr_grpo", "kimi"} and claims["dr_grpo"]["runs"] == "current"
    assert claims["dr_grpo"]["rows"] == first["rows"]
    for seed in (0, 1):  # the constant arm's runs are not kimi's: remove them
        (tmp_path / "runs" / f"{lab.run_for(lab.CLAIMS['dr_grpo'].arms[1], seed, 1200).key}.json").unlink()
    assert lab.main(["--claim", "kimi", *argv]) == 0
    claims = json.loads((tmp_path / "lab.json").read_text())["claims"]
    assert claims["dr_grpo"]["rows"] == first["rows"]
    assert claims["dr_grpo"]["runs"] == "kept from the previous lab.json"
    assert "| Dr. GRPO" in (tmp_path / "lab.md").read_text()
    assert lab.main(["--claim", "kimi", *argv[:2], "--budget-scale", str(1300 / lab.BUDGET), *argv[4:]]) == 0
    assert set(json.loads((tmp_path / "lab.json").read_text())["claims"]) == {"kimi"}
    capsys.readouterr()
