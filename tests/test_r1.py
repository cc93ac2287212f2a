"""The R1 study's pieces: pass@k from samples, SB3 actors scored by the transformer decoder,
shuffled-answer SFT minibatches, and the study's two stages on a tiny budget."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

import gymnasium as gym  # noqa: E402

import rlvr_env  # noqa: E402,F401
from agents.evaluation import pass_at_k_curve  # noqa: E402

ENV = "rlvr/Countdown-v0"
SMALL = {"d_model": 32, "n_layers": 1, "n_heads": 2}


def test_pass_at_k_is_the_unbiased_estimator_computed_by_hand() -> None:
    # n = 4 samples per prompt, with 0, 1 and 4 correct
    rates = np.array([0.0, 0.25, 1.0])
    got = pass_at_k_curve(rates, 4, [1, 2, 3, 4])
    # c = 1: pass@2 = 1 - C(3,2)/C(4,2) = 1/2; pass@3 = 1 - C(3,3)/C(4,3) = 3/4; pass@4 = 1
    assert got[1] == pytest.approx((0 + 0.25 + 1) / 3)
    assert got[2] == pytest.approx((0 + 0.5 + 1) / 3)
    assert got[3] == pytest.approx((0 + 0.75 + 1) / 3)
    assert got[4] == pytest.approx(2 / 3)
    for bad in (0, 5, 2.0, True):
        with pytest.raises(ValueError, match="must be an integer in 1..4"):
            pass_at_k_curve(rates, 4, [bad])


def test_a_report_gives_sampled_at_k1_and_its_own_pass_at_k_at_n() -> None:
    from agents import GRPO

    model = GRPO(ENV, policy="transformer", seed=1, env_kwargs={"n_numbers": 3, "observation": "tokens"},
                 policy_kwargs=SMALL)
    rep = model.success("test", k=8, n_prompts=12)
    curve = rep.pass_at([1, 8])
    assert curve[1] == pytest.approx(rep.sampled)
    assert curve[8] == pytest.approx(rep.pass_at_k)


@pytest.mark.parametrize("algo", ["PPO", "MaskablePPO"])
def test_an_sb3_actor_copied_back_gives_its_logits_exactly(algo: str) -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    from agents import GRPO
    from agents.policies.transformer import copy_from_sb3, copy_to_sb3, sb3_policy_kwargs

    env = gym.make(ENV, n_numbers=3, observation="tokens")
    n = int(env.action_space.n)
    cls = {"PPO": PPO, "MaskablePPO": MaskablePPO}[algo]
    sb3 = cls("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, learning_rate=1e-2,
              policy_kwargs=sb3_policy_kwargs(n, seed=3, **SMALL))
    grpo = GRPO(ENV, policy="transformer", seed=3, env_kwargs={"n_numbers": 3, "observation": "tokens"},
                policy_kwargs=SMALL)
    copy_to_sb3(grpo.policy, sb3)
    sb3.learn(128)  # the SB3 actor moves away from GRPO's network
    obs, _ = env.reset(seed=5)
    width = env.unwrapped.token_context.prompt_width
    net = grpo.policy.net

    def ours() -> torch.Tensor:
        with torch.no_grad():
            hidden = net.hidden(torch.as_tensor(obs[None, :width]))[0][:, -1]
            return torch.log_softmax(net.head(hidden), -1)

    with torch.no_grad():
        theirs = sb3.policy.get_distribution(torch.as_tensor(obs[None]).float()).distribution.logits
    assert not torch.allclose(ours().float(), theirs, atol=1e-4)
    copy_from_sb3(sb3, grpo.policy)
    assert torch.allclose(ours().float(), theirs, atol=1e-5)
    other = GRPO(ENV, policy="transformer", seed=3, env_kwargs={"n_numbers": 3, "observation": "tokens"},
                 policy_kwargs={**SMALL, "d_model": 16})
    with pytest.raises(ValueError, match="architectures differ"):
        copy_from_sb3(sb3, other.policy)


def _demos(n: int = 300):
    from agents import GRPO
    from agents.sft import demonstrations

    model = GRPO(ENV, policy="transformer", seed=2, env_kwargs={"n_numbers": 3, "observation": "tokens"},
                 policy_kwargs=SMALL)
    return model, demonstrations(model.env, n, seed=4)


def test_shuffled_answer_minibatches_fit_repeat_and_refuse_bad_settings() -> None:
    from agents.sft import _copy_index, _distinct_answers, supervised_fit

    model, demos = _demos()
    lengths = demos.lengths
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    answers, _, _ = _distinct_answers(demos, lengths, bounds)
    copy_of = _copy_index(demos, lengths, answers)
    for i in range(len(lengths)):  # each solution points at a distinct answer with its own tokens
        a = answers[copy_of[i]]
        assert np.array_equal(demos.actions[bounds[i]:bounds[i + 1]], demos.actions[bounds[a]:bounds[a + 1]])
        assert demos.prompt_index[i] == demos.prompt_index[a]
    start = {k: v.clone() for k, v in model.policy.net.state_dict().items()}
    losses = supervised_fit(model.policy, demos, epochs=3, batch_size=32, seed=1, minibatch="answers",
                            warmup=0.1)
    assert losses[-1] < losses[0]
    after = {k: v.clone() for k, v in model.policy.net.state_dict().items()}
    model.policy.net.load_state_dict(start)
    assert supervised_fit(model.policy, demos, epochs=3, batch_size=32, seed=1, minibatch="answers",
                          warmup=0.1) == losses
    assert all(torch.equal(after[k], v) for k, v in model.policy.net.state_dict().items())
    model.policy.net.load_state_dict(start)
    # minibatches of whole prompts (the default) are another fit
    assert supervised_fit(model.policy, demos, epochs=3, batch_size=32, seed=1) != losses
    with pytest.raises(ValueError, match="minibatch='words' must be one of"):
        supervised_fit(model.policy, demos, minibatch="words")
    with pytest.raises(ValueError, match="warmup=1.5 must be a fraction"):
        supervised_fit(model.policy, demos, warmup=1.5)


def test_the_step_size_warms_up_then_decays_to_a_tenth() -> None:
    from agents.sft import _step_size

    sizes = [_step_size(1.0, s, 100, 0.1) for s in range(100)]
    assert sizes[0] == pytest.approx(0.1) and sizes[9] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(sizes[:10], sizes[1:10]))
    assert all(a >= b for a, b in zip(sizes[10:], sizes[11:]))
    assert sizes[-1] == pytest.approx(0.1, abs=1e-3)
    assert _step_size(1.0, 0, 100, 0.0) == pytest.approx(1.0)


def test_the_study_scores_a_base_and_rl_from_it_and_counts_steps_to_plus_0_1() -> None:
    from benchmarks.core.bases import base_run
    from benchmarks.r1 import rl_run
    from benchmarks.r1.report import summarize

    ev = {"k": 4, "prompts": 8, "curve_k": 2, "curve_prompts": 8}
    common = {"seed": 0, "env_kwargs": {"n_numbers": 3}, "policy_kwargs": SMALL, "eval": ev}
    base = base_run({**common, "sft": {"n": 200, "epochs": 1, "learning_rate": 1e-3, "batch_size": 64,
                                       "minibatch": "answers", "warmup": 0.0}})
    assert set(base["eval"]) == {"train", "test"} and set(base["eval"]["test"]["pass_at"]) == {"1", "2", "4"}
    runs = []
    for algo in ("grpo", "maskable_ppo"):
        spec = {**common, "algo": algo, "start": "base_200", "budget": 1024, "points": [512],
                "base_weights": base["weights"],
                "sb3": None if algo == "grpo" else {"n_envs": 16, "n_steps": 32, "learning_rate": 1e-4}}
        runs.append(rl_run(spec))
        assert runs[-1]["steps_run"] >= 1024 and [c["steps"] for c in runs[-1]["curve"]][0] == 0
        # the curve starts where the base is: the same weights scored by the same code
        assert runs[-1]["curve"][0]["test_sampled"] == pytest.approx(base["curve_start"])
    # steps to base + 0.1: the first checkpoint at or above it (hand-made curves)
    runs[0]["curve"] = [{"steps": 0, "test_sampled": 0.1}, {"steps": 512, "test_sampled": 0.15},
                        {"steps": 1024, "test_sampled": 0.3}]
    base["curve_start"] = 0.1
    summary = summarize([{k: v for k, v in base.items() if k != "weights"}], runs)
    assert summary["grpo_base_200"]["steps_to_plus_0.1"] == [1024]
    assert set(summary) == {"base_200", "grpo_base_200", "maskable_ppo_base_200"}
    from benchmarks.r1.report import markdown

    table = markdown({"summary": summary, "seeds": "0", "env_kwargs": {"n_numbers": 3}, "curve_every": 512,
                      "eval": ev, "recipe_sft": {"n": 200}, "command": "x", "machine": {}})
    assert "| base alone (SFT 200) |" in table and "| base (SFT 200) + SB3 MaskablePPO |" in table
    assert "| SB3 MaskablePPO | 1.00 (one seed, not an interval) |" in table
    assert "GRPO raises pass@1 (held-out)" in table  # the Yue et al. rows
    assert "| base alone >= 0.65 held-out greedy |" in table
    # GRPO's gain split into greedy, sampled, and sampled against the base's greedy (paired by seed)
    rl_eval, base_eval = summary["grpo_base_200"]["per_seed"][0], summary["base_200"]["per_seed"][0]
    gap = rl_eval["test"]["sampled"] - base_eval["test"]["greedy"]
    assert f"| GRPO sampled - base greedy (held-out) | {gap:+.3f} (one seed, not an interval) |" in table
    # the learning curve read at fractions of the budget: the last checkpoint at or before each
    assert ("| base (SFT 200) + GRPO | 0.100 | 0.100 | 0.150 | 0.150 | 0.300 | +0.150 (one seed, not an "
            "interval) |") in table
    from benchmarks.r1.report import headline

    top = headline({"summary": summary, "seeds": "0", "env_kwargs": {"n_numbers": 3}, "budget": 1024,
                    "eval": ev, "recipe_sft": {"n": 200}})
    assert top.splitlines()[4].startswith("| base alone (SFT 200) |")
    assert "| base (SFT 200) + GRPO |" in top and "| 1,024; 0/1 |" in top
    assert "same cold-started transformer;" in top and "unmasked" not in top
    # the unmasked PPO arm comes last, under its own base, and the first line says where it starts
    nomask = {"base_200_nomask": summary["base_200"],
              "ppo_base_200_nomask": summary["maskable_ppo_base_200"]}
    both = headline({"summary": {**summary, **nomask}, "seeds": "0", "env_kwargs": {"n_numbers": 3},
                     "budget": 1024, "eval": ev, "recipe_sft": {"n": 200, "fit_masks": False}})
    rows = [line.split(" | ")[0] for line in both.splitlines()[4:] if line]
    assert rows[-2:] == ["| base alone (SFT 200 without masks)",
                         "| base (SFT 200 without masks) + SB3 PPO (unmasked)"]
    assert "fitted over every token, decoded with the masks" in both.splitlines()[0]
    assert "unmasked PPO from its own base" in both.splitlines()[0]


def test_a_base_fitted_over_every_token_has_the_unmasked_base_s_weights() -> None:
    """``--sft-fit unmasked``: the masked arms start from exactly the weights the unmasked PPO arm starts
    from (the same fit; only the decoding differs), so the two compare from one network."""
    from benchmarks.core.bases import base_run

    ev = {"k": 2, "prompts": 8, "curve_k": 2, "curve_prompts": 8}
    common = {"seed": 3, "env_kwargs": {"n_numbers": 3}, "policy_kwargs": SMALL, "eval": ev}
    sft = {"n": 200, "epochs": 1, "learning_rate": 1e-3, "batch_size": 64, "minibatch": "prompts",
           "warmup": 0.0}
    fitted = base_run({**common, "sft": {**sft, "fit_masks": False}})
    unmasked = base_run({**common, "sft": {**sft, "masked": False}})
    masked = base_run({**common, "sft": sft})
    assert fitted["weights"] == unmasked["weights"] != masked["weights"]
    assert fitted["sft_losses"] == unmasked["sft_losses"]


def test_the_unmasked_ppo_arm_starts_from_an_unmasked_base_and_sb3_critics_get_their_own_trunk() -> None:
    from benchmarks.r1 import RECIPE_SFT, stage1_runs, build_parser, stage2_runs
    from benchmarks.r1.report import ALGOS, _label

    args = build_parser().parse_args(["--seeds", "10", "--sft-budgets", "1000", "--scratch-arms",
                                      ",".join(ALGOS)])
    args.recipe, args.eval = dict(RECIPE_SFT), {"k": 4, "prompts": 8, "curve_k": 2, "curve_prompts": 8}
    bases = stage1_runs(args)
    assert sorted(t.arm for t in bases) == ["base_1000", "base_100000", "base_100000_nomask"]
    nomask = next(t for t in bases if t.arm.endswith("_nomask"))
    assert nomask.spec["sft"]["masked"] is False
    assert "masked" not in next(t for t in bases if t.arm == "base_100000").spec["sft"]  # keys unchanged
    records = {(10, t.arm): {"weights": t.arm} for t in bases}
    runs = {t.arm: t.spec for t in stage2_runs(args, records)}
    assert runs["ppo_base_100000_nomask"]["base_weights"] == "base_100000_nomask"
    assert runs["maskable_ppo_base_100000"]["base_weights"] == "base_100000"
    assert runs["grpo_base_1000"]["base_weights"] == "base_1000"
    assert runs["maskable_ppo_base_100000"]["sb3"]["share_features_extractor"] is False
    assert "share_features_extractor" not in runs["maskable_ppo_scratch"]["sb3"]  # SB3's default there
    assert runs["grpo_base_100000"]["sb3"] is None
    # every arm at the same budget and curve points; the agent's arms differ from GRPO in one field each
    assert {spec["budget"] for spec in runs.values()} == {300_000}
    assert len({tuple(spec["points"]) for spec in runs.values()}) == 1
    assert runs["gae_base_100000"]["grpo"] == {"advantage": "gae", "dynamic_sampling": False}
    assert runs["rloo_scratch"]["grpo"] == {"advantage": "rloo"} and "grpo" not in runs["grpo_scratch"]
    # the agent's arms carry the preset they train with in their spec (hence their key); SB3's do not
    from agents.grpo.config import PRESETS
    from benchmarks.r1 import rl_run

    assert all(spec["preset"] == PRESETS["transformer"] for name, spec in runs.items()
               if not name.startswith(("maskable_ppo", "ppo")))
    assert "preset" not in runs["maskable_ppo_base_100000"] and "preset" not in runs["ppo_base_100000_nomask"]
    with pytest.raises(ValueError, match="made for the transformer preset"):
        rl_run({**runs["grpo_scratch"], "preset": {**PRESETS["transformer"], "epochs": 1}})
    default = build_parser().parse_args(["--seeds", "10"])  # every arm from its base and from scratch
    default.recipe, default.eval = args.recipe, args.eval
    names = {t.arm for t in stage2_runs(default, records)}
    assert "ppo_base_100000_nomask" in names
    assert {f"{a}_scratch" for a in ("grpo", "gae", "rloo", "reinforce_pp_baseline", "maskable_ppo", "ppo")
            } <= names
    none = build_parser().parse_args(["--seeds", "10", "--scratch-arms", "", "--arms", "grpo,gae"])
    none.recipe, none.eval = args.recipe, args.eval  # nothing from scratch
    assert {t.arm for t in stage2_runs(none, records)} == {"grpo_base_100000", "gae_base_100000"}
    assert _label("ppo_base_100000_nomask") == "base (SFT 100,000 without masks) + SB3 PPO (unmasked)"
    assert _label("base_100000_nomask") == "base alone (SFT 100,000 without masks)"
    with pytest.raises(ValueError, match="unknown"):
        _label("base_x")
    no_ppo = build_parser().parse_args(["--seeds", "10", "--sft-budgets", "", "--no-ppo"])
    no_ppo.recipe, no_ppo.eval = args.recipe, args.eval
    no_ppo.arms = [a for a in no_ppo.arms if a not in ("maskable_ppo", "ppo")]  # as main() does
    assert [t.arm for t in stage1_runs(no_ppo)] == ["base_100000"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--arms", "grpo,a2c"])


def test_a_study_with_another_setting_or_cold_start_writes_its_own_folder() -> None:
    from benchmarks.r1 import RECIPE_SFT, results_folder

    assert results_folder({"n_numbers": 3}, dict(RECIPE_SFT)) == ""
    assert results_folder({"n_numbers": 4}, dict(RECIPE_SFT)) == "n_numbers4"
    assert results_folder({"n_numbers": 3}, {**RECIPE_SFT, "epochs": 16}) == "sft_epochs16"
    assert results_folder({"n_numbers": 4}, {**RECIPE_SFT, "epochs": 16, "n": 50_000}) == (
        "n_numbers4_sft_epochs16_sft_n50000")
    from benchmarks.r1 import SB3_SETTINGS, build_parser

    tuned = build_parser().parse_args(["--sb3", '{"n_epochs": 7}']).sb3
    assert tuned == {**SB3_SETTINGS, "n_epochs": 7}
    assert results_folder({"n_numbers": 3}, dict(RECIPE_SFT), tuned) == "sb3_n_epochs7"
    assert results_folder({"n_numbers": 3}, dict(RECIPE_SFT), dict(SB3_SETTINGS)) == ""
    from benchmarks.r1 import recipe_of, stage1_runs

    plain = build_parser().parse_args(["--seeds", "10"])
    assert recipe_of(plain) == RECIPE_SFT  # the recipe's bases keep their keys
    fit = build_parser().parse_args(["--seeds", "10", "--sft-fit", "unmasked"])
    fit.recipe, fit.eval = recipe_of(fit), {"k": 4, "prompts": 8, "curve_k": 2, "curve_prompts": 8}
    assert fit.recipe == {**RECIPE_SFT, "fit_masks": False}
    assert results_folder({"n_numbers": 3}, fit.recipe) == "sft_fit_masksFalse"
    sfts = {t.arm: t.spec["sft"] for t in stage1_runs(fit)}
    assert sfts["base_100000"]["fit_masks"] is False and "masked" not in sfts["base_100000"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--sft-fit", "none"])


def test_the_study_says_where_its_results_went_and_what_it_reused(tmp_path, monkeypatch, capsys) -> None:
    """The folder it wrote (a non-default setting's own subfolder) and, per stage, how many runs were found
    on disk (the executor's log line, here from a stand-in executor that has every run stored)."""
    from benchmarks import r1
    from benchmarks.core.executor import Outcome

    def all_stored(tasks, out, *, desc, log, **kwargs):
        log(f"{desc}: {len(tasks)} run(s): {len(tasks)} found on disk, 0 to run")
        return Outcome(total=len(tasks), found=len(tasks))

    monkeypatch.setattr(r1, "run_all", all_stored)
    assert r1.main(["--seeds", "10", "--sft", "500", "--out", str(tmp_path), "--no-ppo"]) == 0
    out = capsys.readouterr().out
    assert "bases: " in out and "found on disk, 0 to run" in out
    folder = tmp_path / r1.results_folder(r1.DEFAULT_ENV_KWARGS, {**r1.RECIPE_SFT, "n": 500})
    assert out.rstrip().splitlines()[-1].startswith(f"results in {folder}/")
    assert (folder / "r1.md").is_file()


def test_a_study_whose_bases_are_not_on_disk_reads_its_runs_from_them(tmp_path, monkeypatch, capsys) -> None:
    """On a machine without the bases' cache (a base trained again there need not have the same weights to
    the last bit), the committed runs from the bases are read by arm and seed, linked to the study's base
    records by the score they start from: nothing trains, the tables come out the same. A run whose link
    or code version does not hold is not read, and then the bases train."""
    import json
    import shutil

    from benchmarks import r1
    from benchmarks.core.executor import Outcome, _resolve, worker_version
    from benchmarks.core.store import save_run

    trained: list[str] = []

    def in_process(tasks, out, *, desc, log, **kwargs):  # the executor's run files, without Ray
        outcome = Outcome(total=len(tasks))
        for task in tasks:
            trained.append(task.key)
            record = _resolve(task.fn)(dict(task.spec))
            record["execution"] = {"worker": worker_version(), "host": "test", "attempts": 1, "fn": task.fn}
            save_run(out / "runs", task.key, task.fingerprint, record)
            outcome.records[task.key] = record
        return outcome

    monkeypatch.setattr(r1, "run_all", in_process)
    common = ["--seeds", "10", "--sft", "200", "--sft-epochs", "1", "--budget", "256", "--curve-every", "128",
              "--eval-prompts", "4", "--arms", "grpo,gae", "--out", str(tmp_path), "--quiet"]
    argv = [*common, "--scratch-arms", ""]
    assert r1.main(argv) == 0
    folder = tmp_path / r1.results_folder(r1.DEFAULT_ENV_KWARGS, {**r1.RECIPE_SFT, "n": 200, "epochs": 1})
    table = (folder / "r1.md").read_text()
    assert len(trained) == 3  # the base, then GRPO and PPO with a critic from it
    shutil.rmtree(tmp_path / "bases")  # another machine: no bases on disk
    trained.clear()
    capsys.readouterr()
    assert r1.main(argv) == 0
    assert trained == [] and "without their weights" in capsys.readouterr().out
    assert (folder / "r1.md").read_text().split("Command:")[0] == table.split("Command:")[0]
    # the runs from scratch are keyed without a base: those not on disk train, the others are read
    assert r1.main([*common, "--scratch-arms", "grpo"]) == 0
    assert [k.split("__")[0] for k in trained] == ["grpo_scratch"]
    # a seed added to the study: its base and the runs from it train, the committed seed is still read
    trained.clear()
    more = [*common, "--scratch-arms", ""]
    more[more.index("10")] = "10,11"
    assert r1.main(more) == 0
    assert sorted(tuple(k.split("__")[:2]) for k in trained) == [
        ("base_200", "s11"), ("gae_base_200", "s11"), ("grpo_base_200", "s11")]
    # a base record whose score is not where a run starts: nothing is read without the weights
    args = r1.build_parser().parse_args(argv)
    args.recipe, args.eval = r1.recipe_of(args), {**r1.EVAL, "prompts": 4, "curve_prompts": 4}
    stage1 = r1.stage1_runs(args)
    assert list(r1.committed_without_bases(folder, stage1, args)[0]) == [(10, "base_200")]
    stored = json.loads((folder / "r1.json").read_text())
    stored["bases"][0]["curve_start"] += 0.5  # seed 10's
    (folder / "r1.json").write_text(json.dumps(stored))
    assert r1.committed_without_bases(folder, stage1, args) == ({}, {})
    trained.clear()
    assert r1.main(argv) == 0
    assert [k.split("__")[0] for k in trained] == ["base_200", "grpo_base_200", "gae_base_200"]
    with pytest.raises(ValueError, match="base_weights missing"):
        r1.rl_run({"algo": "grpo", "start": "base_200", "base_weights": None, "budget": 1, "eval": {}})


def _scores(at_1: float, at_64: float) -> dict:
    """One seed's evaluation as the R1 report reads it (both splits alike)."""
    split = {"greedy": at_1, "sampled": at_1, "pass_at": {"1": at_1, "64": at_64}}
    return {"train": split, "test": dict(split)}


def _arm(seeds: list[int], evals: list[dict]) -> dict:
    means = {f"{s}_pass_at": {k: float(np.mean([e[s]["pass_at"][k] for e in evals])) for k in ("1", "64")}
             for s in ("train", "test")}
    return {"seeds": seeds, "per_seed": evals, **means}


def test_the_yue_rows_pair_the_base_and_rl_by_seed_and_read_a_lower_pass_at_64_as_agreeing() -> None:
    from benchmarks.r1.report import _paired_evals, yue_claim

    base = _arm([0, 1, 2], [_scores(0.2, 0.9), _scores(0.3, 0.5), _scores(0.4, 0.7)])
    rl = _arm([1, 2], [_scores(0.3, 0.4), _scores(0.4, 0.6)])  # each 0.1 below its own seed's pass@64
    assert _paired_evals(base, rl) == [(base["per_seed"][1], rl["per_seed"][0]),
                                       (base["per_seed"][2], rl["per_seed"][1])]
    summary = {"base_10": base, "grpo_base_10": rl}
    rows = {name: (measured, said) for name, measured, said in yue_claim(summary, 10, [1, 64])}
    measured, said = rows["GRPO narrows pass@64 (held-out)"]
    assert measured.startswith("-0.100 [-0.100, -0.100]") and said == "agree"


def test_equal_pass_at_k_curves_never_cross() -> None:
    from benchmarks.r1.report import yue_claim

    evals = [_scores(0.3, 0.8), _scores(0.4, 0.9)]
    rows = yue_claim({"base_10": _arm([0, 1], evals), "grpo_base_10": _arm([0, 1], evals)}, 10, [1, 64])
    crossings = [measured for name, measured, _ in rows if name.startswith("smallest k")]
    assert crossings == ["none up to 64", "none up to 64"]


def test_a_checkpoint_exactly_at_base_plus_0_1_counts() -> None:
    from benchmarks.r1.report import summarize

    base = {"seed": 0, "sft": {"n": 10}, "curve_start": 0.5, "eval": _scores(0.5, 0.9), "sft_seconds": 1.0}
    run = {"seed": 0, "start": "base_10", "algo": "grpo", "eval": _scores(0.6, 0.9), "train_seconds": 1.0,
           "steps_per_second": 100.0, "budget": 1024, "steps_run": 1024,
           "curve": [{"steps": 0, "test_sampled": 0.5}, {"steps": 512, "test_sampled": 0.6},
                     {"steps": 1024, "test_sampled": 0.7}]}
    assert summarize([base], [run])["grpo_base_10"]["steps_to_plus_0.1"] == [512]
